// The CUDA kernels against the CPU kernels: every operation runs on the same random inputs on both devices and the
// results must agree within a tolerance per dtype. Sizes 1, 3, 1025 and 2^20 + 7 leave tails after every vector
// width, and views at odd element offsets take the unaligned path. Exits 77 (skipped) where no CUDA device exists.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <lockstep/kernels.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

constexpr DType floating_dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
constexpr DType numeric_dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Int8,    DType::UInt8,   DType::Int32,   DType::Int64};
constexpr std::int64_t sizes[] = {1, 3, 1025, (std::int64_t{1} << 20) + 7};

const Device gpu = Device::cuda(0);

// Random values on the CPU: uniform in [low, high) for floating dtypes, truncated into integers otherwise.
Tensor random(const Shape& shape, DType dtype, double low, double high, std::uint64_t seed) {
    Generator gen(seed);
    if (dtype == DType::UInt8 && low < 0) low = 0;
    Tensor t = Tensor::uniform(shape, low, high, DType::Float64, Device::cpu(), &gen);
    return ops::cast(t, dtype);
}

// Relative tolerance of one floating result in `dtype`.
double epsilon(DType dtype) {
    switch (dtype) {
        case DType::Float32:
            return 1.2e-7;
        case DType::Float64:
            return 2.3e-16;
        case DType::Float16:
            return 9.8e-4;
        case DType::BFloat16:
            return 7.9e-3;
        default:
            return 0.0;
    }
}

std::vector<double> values_of(const Tensor& t) {
    const Tensor host = t.to(Device::cpu());
    std::vector<double> out(static_cast<std::size_t>(host.numel()));
    visit_dtype(host.dtype(), [&](auto zero) {
        using T = decltype(zero);
        const auto* p = static_cast<const T*>(host.data());
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = to_double(p[i]);
    });
    return out;
}

// |gpu - cpu| <= rel * max(1, |cpu|) elementwise (rel * max(1, magnitude[i]) where magnitudes are given); NaN and
// infinities must match exactly.
void expect_match(const Tensor& on_gpu, const Tensor& on_cpu, double rel, const std::string& what,
                  const std::vector<double>* magnitude = nullptr) {
    BOOST_TEST_CONTEXT(what) {
        BOOST_REQUIRE(on_gpu.device() == gpu);
        BOOST_REQUIRE(on_gpu.dtype() == on_cpu.dtype());
        BOOST_REQUIRE(on_gpu.shape() == on_cpu.shape());
        const auto g = values_of(on_gpu);
        const auto c = values_of(on_cpu);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < c.size(); ++i) {
            bool ok = false;
            if (std::isnan(c[i])) {
                ok = std::isnan(g[i]);
            } else if (std::isinf(c[i])) {
                ok = g[i] == c[i];
            } else {
                const double m = magnitude != nullptr ? (*magnitude)[i] : std::fabs(c[i]);
                ok = std::fabs(g[i] - c[i]) <= rel * std::max(1.0, m);
            }
            if (!ok && bad++ < 5) BOOST_TEST_MESSAGE("element " << i << ": gpu " << g[i] << ", cpu " << c[i]);
        }
        BOOST_TEST(bad == 0u, bad << " of " << c.size() << " elements differ");
    }
}

std::string label(const char* op, DType dtype, std::int64_t n) {
    return std::string(op) + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n);
}

// The dtypes the CUDA kernels compute on (the later ones are carried by the collectives only).
const DType kernel_dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
                               DType::UInt8,   DType::Int32,   DType::Int64,   DType::Bool};

}  // namespace

BOOST_AUTO_TEST_CASE(fill_and_cast) {
    for (std::int64_t n : sizes) {
        for (DType dtype : kernel_dtypes) {
            Tensor t = Tensor::empty({n}, dtype, gpu);
            ops::fill_(t, -2.75);
            Tensor c = Tensor::empty({n}, dtype);
            ops::fill_(c, -2.75);
            expect_match(t, c, 0.0, label("fill", dtype, n));
        }
    }
    // Every pair of dtypes on values that exercise rounding, truncation, wrap-around and NaN.
    for (std::int64_t n : {std::int64_t{1025}, sizes[3]}) {
        Tensor base = random({n}, DType::Float64, -300, 300, 1);
        static_cast<double*>(base.data())[0] = std::nan("");
        for (DType from : kernel_dtypes) {
            Tensor src = ops::cast(base, from);
            Tensor src_gpu = src.to(gpu);
            for (DType to : kernel_dtypes) {
                expect_match(ops::cast(src_gpu, to), ops::cast(src, to), 0.0,
                             label((std::string("cast to ") + std::string(dtype_name(to))).c_str(), from, n));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(binary_ops) {
    using Op = Tensor (*)(const Tensor&, const Tensor&);
    using InPlace = Tensor& (*)(Tensor&, const Tensor&);
    using ScalarOp = Tensor (*)(const Tensor&, double);
    struct Case {
        const char* name;
        Op op;
        InPlace op_inplace;
        ScalarOp op_scalar;
    };
    const Case cases[] = {{"add", ops::add, ops::add_, ops::add},
                          {"sub", ops::sub, ops::sub_, ops::sub},
                          {"mul", ops::mul, ops::mul_, ops::mul},
                          {"div", ops::div, ops::div_, ops::div}};
    for (std::int64_t n : sizes) {
        for (DType dtype : numeric_dtypes) {
            Tensor a = random({n, 3}, dtype, -100, 100, 2);
            // Divisors of integer type stay away from zero.
            Tensor b = is_floating(dtype) ? random({n, 3}, dtype, -100, 100, 3) : random({n, 3}, dtype, 1, 50, 3);
            Tensor row = is_floating(dtype) ? random({3}, dtype, -4, 4, 4) : random({3}, dtype, 1, 9, 4);
            Tensor a_gpu = a.to(gpu);
            Tensor b_gpu = b.to(gpu);
            Tensor row_gpu = row.to(gpu);
            const double rel = epsilon(dtype);
            for (const Case& c : cases) {
                expect_match(c.op(a_gpu, b_gpu), c.op(a, b), rel, label(c.name, dtype, n));
                expect_match(c.op(a_gpu, row_gpu), c.op(a, row), rel, label(c.name, dtype, n) + " broadcast [3]");
                const double scalar = is_floating(dtype) ? 1.75 : 3.0;
                expect_match(c.op_scalar(a_gpu, scalar), c.op_scalar(a, scalar), rel,
                             label(c.name, dtype, n) + " scalar");
                Tensor target_gpu = a_gpu.clone();
                Tensor target = a.clone();
                c.op_inplace(target_gpu, b_gpu);
                c.op_inplace(target, b);
                expect_match(target_gpu, target, rel, label(c.name, dtype, n) + " in place");
            }
            // Views one element into the storage: misaligned for every vector width.
            Tensor a_view = a_gpu.reshape({-1}).narrow_rows(1, 3 * n);
            Tensor b_view = b_gpu.reshape({-1}).narrow_rows(1, 3 * n);
            expect_match(ops::add(a_view, b_view),
                         ops::add(a.reshape({-1}).narrow_rows(1, 3 * n), b.reshape({-1}).narrow_rows(1, 3 * n)), rel,
                         label("add", dtype, n) + " misaligned");
        }
    }
}

BOOST_AUTO_TEST_CASE(axpy_scale_and_integer_division_checks) {
    for (std::int64_t n : sizes) {
        for (DType dtype : numeric_dtypes) {
            Tensor x = random({n}, dtype, -50, 50, 5);
            Tensor y = random({n}, dtype, -50, 50, 6);
            Tensor y_gpu = y.to(gpu);
            const double alpha = is_floating(dtype) ? -0.625 : 3.0;
            // The GPU may fuse the multiply-add (one rounding fewer): the two results may then differ by a rounding
            // of the product, which is relative to |alpha x| + |y|, not to the (possibly cancelled) result.
            std::vector<double> magnitude = values_of(y);
            const std::vector<double> xs = values_of(x);
            for (std::size_t i = 0; i < xs.size(); ++i)
                magnitude[i] = std::fabs(alpha * xs[i]) + std::fabs(magnitude[i]);
            ops::axpy_(alpha, x.to(gpu), y_gpu);
            ops::axpy_(alpha, x, y);
            expect_match(y_gpu, y, 2 * epsilon(dtype), label("axpy_", dtype, n), &magnitude);
            // scale_ on the same input on both sides: one multiplication, one rounding each.
            Tensor z = y_gpu.to(Device::cpu());
            ops::scale_(y_gpu, alpha);
            ops::scale_(z, alpha);
            expect_match(y_gpu, z, epsilon(dtype), label("scale_", dtype, n));
        }
    }
    // Integer division by zero is refused before anything is written, also when the zero is the last element.
    for (DType dtype : {DType::Int8, DType::UInt8, DType::Int32, DType::Int64}) {
        Tensor divisor = Tensor::ones({1025}, DType::Float64);
        static_cast<double*>(divisor.data())[1024] = 0.0;
        Tensor b = ops::cast(divisor, dtype).to(gpu);
        Tensor a = Tensor::full({1025}, 7.0, dtype, gpu);
        BOOST_CHECK_THROW((void)ops::div(a, b), InvalidArgumentError);
        BOOST_CHECK_THROW(ops::div_(a, b), InvalidArgumentError);
        BOOST_TEST(ops::sum(a).item<double>() == 7.0 * 1025);
    }
}

BOOST_AUTO_TEST_CASE(devices_must_agree) {
    Tensor c = Tensor::ones({4});
    Tensor g = Tensor::ones({4}, DType::Float32, gpu);
    BOOST_CHECK_THROW((void)ops::add(c, g), DeviceError);
    BOOST_CHECK_THROW((void)ops::matmul(g.reshape({2, 2}), c.reshape({2, 2})), DeviceError);
    Tensor gi = Tensor::ones({4}, DType::Int32, gpu);
    BOOST_CHECK_THROW((void)ops::add(g, gi), DTypeError);
}

BOOST_AUTO_TEST_CASE(reductions) {
    // [outer, extent, inner] layouts: long runs, many short runs, wide rows, a middle dimension, 0-d and empty.
    const std::vector<Shape> shapes = {{1},       {3},           {1025},        {sizes[3]}, {7, 1025}, {1025, 3},
                                       {3, 5, 7}, {2, 4099, 33}, {1, sizes[3]}, {4, 0, 3},  {}};
    using Reduction = Tensor (*)(const Tensor&, std::int64_t, bool);
    using Whole = Tensor (*)(const Tensor&);
    struct Case {
        const char* name;
        Whole whole;
        Reduction along;
        bool exact;  // max and min pick an element; sums and means differ by summation order
    };
    const Case cases[] = {{"sum", ops::sum, ops::sum, false},
                          {"mean", ops::mean, ops::mean, false},
                          {"max", ops::max, ops::max, true},
                          {"min", ops::min, ops::min, true}};
    for (const Shape& shape : shapes) {
        for (DType dtype : kernel_dtypes) {
            // Floating values in [-1, 1) keep 16-bit sums of 2^20 elements finite; bools are about half true.
            Tensor t = dtype == DType::Bool ? ops::cast(random(shape, DType::Int8, 0, 2, 7), DType::Bool)
                       : is_floating(dtype) ? random(shape, dtype, -1, 1, 7)
                                            : random(shape, dtype, -100, 100, 7);
            Tensor t_gpu = t.to(gpu);
            const double n = std::max<double>(1.0, static_cast<double>(t.numel()));
            for (const Case& c : cases) {
                if (std::string(c.name) == "mean" && !is_floating(dtype)) continue;
                if (c.exact && t.numel() == 0) continue;
                const double rel =
                    c.exact ? 0.0 : 16 * std::sqrt(n) * std::max(epsilon(dtype), 1.2e-7) + epsilon(dtype);
                const std::string what =
                    std::string(c.name) + " " + std::string(dtype_name(dtype)) + " " + shape_str(shape);
                expect_match(c.whole(t_gpu), c.whole(t), rel, what);
                for (std::int64_t dim = -t.dim(); dim < t.dim(); ++dim) {
                    if (c.exact && t.size(dim) == 0) continue;
                    expect_match(c.along(t_gpu, dim, false), c.along(t, dim, false), rel,
                                 what + " dim " + std::to_string(dim));
                }
            }
        }
    }
    // NaN propagates through max and min on both devices.
    Tensor nan = Tensor::ones({3, 1025}, DType::Float32);
    static_cast<float*>(nan.data())[1500] = std::nanf("");
    BOOST_TEST(std::isnan(ops::max(nan.to(gpu)).item<double>()));
    expect_match(ops::min(nan.to(gpu), 1), ops::min(nan, 1), 0.0, "min with NaN");
    expect_match(ops::max(nan.to(gpu), 0), ops::max(nan, 0), 0.0, "max with NaN along dim 0");
}

BOOST_AUTO_TEST_CASE(matmul) {
    struct Size {
        std::int64_t m, k, n;
    };
    for (const Size& s : {Size{1, 1, 1}, Size{3, 5, 2}, Size{65, 33, 17}, Size{257, 129, 1025}, Size{4, 0, 3}}) {
        for (DType dtype : floating_dtypes) {
            for (bool ta : {false, true}) {
                for (bool tb : {false, true}) {
                    Tensor a = random(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, dtype, -1, 1, 8);
                    Tensor b = random(tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, dtype, -1, 1, 9);
                    const double k = std::max<double>(1.0, static_cast<double>(s.k));
                    // Accumulation order differs (cuBLAS blocks the k loop): error grows like sqrt(k); 16-bit results
                    // round once at the end.
                    const double rel = 8 * std::sqrt(k) * std::max(epsilon(dtype), 1.2e-7) + 2 * epsilon(dtype);
                    expect_match(ops::matmul(a.to(gpu), b.to(gpu), ta, tb), ops::matmul(a, b, ta, tb), rel,
                                 "matmul " + std::string(dtype_name(dtype)) + " " + std::to_string(s.m) + "x" +
                                     std::to_string(s.k) + "x" + std::to_string(s.n) + " ta=" + std::to_string(ta) +
                                     " tb=" + std::to_string(tb));
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(activations_and_losses) {
    for (std::int64_t n : sizes) {
        for (DType dtype : floating_dtypes) {
            Tensor x = random({n}, dtype, -1, 1, 10);
            Tensor g = random({n}, dtype, -1, 1, 11);
            Tensor target = random({n}, dtype, -1, 1, 12);
            Tensor x_gpu = x.to(gpu);
            Tensor g_gpu = g.to(gpu);
            Tensor target_gpu = target.to(gpu);
            const double rel = epsilon(dtype);
            expect_match(ops::relu(x_gpu), ops::relu(x), 0.0, label("relu", dtype, n));
            expect_match(ops::relu_backward(g_gpu, x_gpu), ops::relu_backward(g, x), 0.0,
                         label("relu_backward", dtype, n));
            expect_match(ops::mse_loss(x_gpu, target_gpu), ops::mse_loss(x, target),
                         16 * std::sqrt(static_cast<double>(n)) * std::max(rel, 1.2e-7) + rel,
                         label("mse_loss", dtype, n));
            expect_match(ops::mse_loss_backward(x_gpu, target_gpu), ops::mse_loss_backward(x, target), 2 * rel,
                         label("mse_loss_backward", dtype, n));
        }
    }
}

bool init_kernels_cuda() {
    boost::unit_test::framework::master_test_suite().p_name.value = "kernels_cuda";
    return true;
}

int main(int argc, char* argv[]) {
    if (cuda_device_count() == 0) {
        std::cout << "skipped: no CUDA device\n";
        return 77;
    }
    return boost::unit_test::unit_test_main(&init_kernels_cuda, argc, argv);
}
