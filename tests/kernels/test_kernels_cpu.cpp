// The CPU kernels against closed-form values: every public operation, every dtype family, and the edge cases of the
// shared rules (0-d and empty tensors, suffix broadcast, mismatched operands, integer wrap-around and division,
// rounding of the 16-bit floats). Values are built and read through the dtype table, never through the kernels.
#define BOOST_TEST_MODULE kernels_cpu
#include <boost/test/unit_test.hpp>

#include <lockstep/kernels.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

constexpr DType floating_dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
constexpr DType integral_dtypes[] = {DType::Int8, DType::UInt8, DType::Int32, DType::Int64};
constexpr DType numeric_dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Int8,    DType::UInt8,   DType::Int32,   DType::Int64};

// A CPU tensor holding `values` converted to `dtype` element by element.
Tensor make(const std::vector<double>& values, const Shape& shape, DType dtype) {
    Tensor t = Tensor::empty(shape, dtype);
    BOOST_REQUIRE_EQUAL(static_cast<std::size_t>(t.numel()), values.size());
    visit_dtype(dtype, [&](auto zero) {
        using T = decltype(zero);
        auto* p = static_cast<T*>(t.data());
        for (std::size_t i = 0; i < values.size(); ++i) p[i] = from_double<T>(values[i]);
    });
    return t;
}

std::vector<double> values_of(const Tensor& t) {
    std::vector<double> out(static_cast<std::size_t>(t.numel()));
    visit_dtype(t.dtype(), [&](auto zero) {
        using T = decltype(zero);
        const auto* p = static_cast<const T*>(t.data());
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = to_double(p[i]);
    });
    return out;
}

// The value `exact` takes when stored in `dtype`: rounded for floating types, wrapped for integers.
double stored(double exact, DType dtype) {
    return visit_dtype(dtype, [&](auto zero) {
        using T = decltype(zero);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            return static_cast<double>(static_cast<T>(static_cast<std::int64_t>(exact)));
        } else {
            return to_double(from_double<T>(exact));
        }
    });
}

// Relative tolerance for a result computed in float and rounded once into `dtype`.
double tolerance(DType dtype) {
    switch (dtype) {
        case DType::Float32:
            return 1e-6;
        case DType::Float64:
            return 1e-12;
        case DType::Float16:
            return 1e-3;
        case DType::BFloat16:
            return 8e-3;
        default:
            return 0.0;
    }
}

void check_close(const Tensor& t, const std::vector<double>& expected, double rel, const std::string& what) {
    BOOST_TEST_CONTEXT(what << " " << t.str()) {
        const std::vector<double> got = values_of(t);
        BOOST_REQUIRE_EQUAL(got.size(), expected.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            if (std::isnan(expected[i])) {
                BOOST_TEST(std::isnan(got[i]), "element " << i << " should be NaN, is " << got[i]);
            } else if (std::isinf(expected[i])) {
                BOOST_TEST(got[i] == expected[i],
                           "element " << i << ": got " << got[i] << ", expected " << expected[i]);
            } else {
                BOOST_TEST(std::fabs(got[i] - expected[i]) <= rel * std::max(1.0, std::fabs(expected[i])),
                           "element " << i << ": got " << got[i] << ", expected " << expected[i]);
            }
        }
    }
}

// Checks that `fn` throws E and that its message contains every one of `needles`.
template <typename E>
void check_throws(const std::function<void()>& fn, const std::vector<std::string>& needles) {
    bool thrown = false;
    try {
        fn();
    } catch (const E& e) {
        thrown = true;
        const std::string message = e.what();
        for (const auto& needle : needles) {
            BOOST_TEST(message.find(needle) != std::string::npos,
                       "message '" << message << "' lacks '" << needle << "'");
        }
    }
    BOOST_TEST(thrown, "expected exception not thrown");
}

template <typename T>
std::uint16_t bits_of(double v) {
    return T(static_cast<float>(v)).bits;
}

}  // namespace

// ------------------------------------------------------------------------------------------------ fill, copy, cast

BOOST_AUTO_TEST_SUITE(fill_copy_cast)

BOOST_AUTO_TEST_CASE(fill_every_dtype_and_shape) {
    for (DType dtype : all_dtypes) {
        for (const Shape& shape : {Shape{2, 3}, Shape{}, Shape{0}, Shape{4, 0, 2}}) {
            Tensor t = Tensor::empty(shape, dtype);
            ops::fill_(t, 3.0);
            const double expected = dtype == DType::Bool ? 1.0 : 3.0;
            check_close(t, std::vector<double>(static_cast<std::size_t>(t.numel()), expected), 0.0, "fill 3");
        }
    }
}

BOOST_AUTO_TEST_CASE(fill_converts_like_cast) {
    Tensor i = Tensor::empty({3}, DType::Int32);
    ops::fill_(i, -2.7);
    check_close(i, {-2, -2, -2}, 0.0, "truncation toward zero");
    Tensor u = Tensor::empty({2}, DType::UInt8);
    ops::fill_(u, -1.0);
    check_close(u, {255, 255}, 0.0, "wraps into uint8");
    Tensor h = Tensor::empty({1}, DType::Float16);
    ops::fill_(h, 1e6);
    BOOST_TEST(std::isinf(values_of(h)[0]));
}

BOOST_AUTO_TEST_CASE(cast_small_integers_between_every_pair) {
    const std::vector<double> values = {0, 1, 2, 5, 100};
    for (DType from : all_dtypes) {
        for (DType to : all_dtypes) {
            Tensor src = make(values, {5}, from);
            Tensor dst = ops::cast(src, to);
            BOOST_TEST(dst.dtype() == to);
            BOOST_TEST(dst.shape() == src.shape());
            std::vector<double> expected = values_of(src);
            if (to == DType::Bool) {
                for (double& v : expected) v = v != 0.0 ? 1.0 : 0.0;
            }
            check_close(dst, expected, 0.0,
                        std::string("cast ") + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
        }
    }
}

BOOST_AUTO_TEST_CASE(integer_casts_wrap_as_cpp_defines) {
    check_close(ops::cast(make({300, -129, 127, -128, 255}, {5}, DType::Int32), DType::Int8), {44, 127, 127, -128, -1},
                0.0, "int32 -> int8");
    check_close(ops::cast(make({-1, 256, 511}, {3}, DType::Int64), DType::UInt8), {255, 0, 255}, 0.0, "int64 -> uint8");
    Tensor big = Tensor::empty({1}, DType::Int64);
    big.at<std::int64_t>({0}) = (std::int64_t{1} << 32) + 5;
    check_close(ops::cast(big, DType::Int32), {5}, 0.0, "int64 -> int32 keeps the low 32 bits");
    check_close(ops::cast(make({200, 255}, {2}, DType::UInt8), DType::Int8), {-56, -1}, 0.0, "uint8 -> int8");
}

BOOST_AUTO_TEST_CASE(floating_to_integer_truncates_and_saturates) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Tensor f = make({2.7, -2.7, 0.5, nan, 1e30, -1e30}, {6}, DType::Float64);
    Tensor i64 = ops::cast(f, DType::Int64);
    const auto v = i64.to_vector<std::int64_t>();
    BOOST_TEST(v[0] == 2);
    BOOST_TEST(v[1] == -2);
    BOOST_TEST(v[2] == 0);
    BOOST_TEST(v[3] == 0);
    BOOST_TEST(v[4] == std::numeric_limits<std::int64_t>::max());
    BOOST_TEST(v[5] == std::numeric_limits<std::int64_t>::min());
    check_close(ops::cast(make({-1.5, 300.9}, {2}, DType::Float32), DType::UInt8), {255, 44}, 0.0,
                "float -> uint8 truncates, then wraps");
}

BOOST_AUTO_TEST_CASE(bool_casts) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    check_close(ops::cast(make({0.0, 0.5, -3.0, nan}, {4}, DType::Float32), DType::Bool), {0, 1, 1, 1}, 0.0,
                "float -> bool is != 0");
    Tensor b = Tensor::empty({2}, DType::Bool);
    b.at<bool>({0}) = true;
    b.at<bool>({1}) = false;
    for (DType to : numeric_dtypes) check_close(ops::cast(b, to), {1, 0}, 0.0, "bool -> number");
}

BOOST_AUTO_TEST_CASE(half_casts_round_to_nearest_even_once) {
    // Halfway cases round to the even neighbour.
    const double h_ulp = std::ldexp(1.0, -10);  // float16 spacing in [1, 2)
    Tensor f = make({1 + h_ulp / 2, 1 + 3 * h_ulp / 2, 65504.0, 65520.0}, {4}, DType::Float32);
    check_close(ops::cast(f, DType::Float16), {1.0, 1 + 2 * h_ulp, 65504.0, std::numeric_limits<double>::infinity()},
                0.0, "float32 -> float16");
    const double b_ulp = std::ldexp(1.0, -7);  // bfloat16 spacing in [1, 2)
    Tensor g = make({1 + b_ulp / 2, 1 + 3 * b_ulp / 2}, {2}, DType::Float32);
    check_close(ops::cast(g, DType::BFloat16), {1.0, 1 + 2 * b_ulp}, 0.0, "float32 -> bfloat16");

    // Just above a halfway point by less than a float ulp: rounding through float would land on the halfway point
    // and then on the even neighbour below; one correct rounding goes up.
    Tensor d = Tensor::empty({1}, DType::Float64);
    d.at<double>({0}) = 1 + h_ulp / 2 + std::ldexp(1.0, -40);
    BOOST_TEST(values_of(ops::cast(d, DType::Float16))[0] == 1 + h_ulp);
    Tensor e = Tensor::empty({1}, DType::Float64);
    e.at<double>({0}) = 1 + b_ulp / 2 + std::ldexp(1.0, -40);
    BOOST_TEST(values_of(ops::cast(e, DType::BFloat16))[0] == 1 + b_ulp);

    // The same for a 64-bit integer that a double cannot hold: 2^60 + 2^52 + 1 is just above the bfloat16 halfway
    // point 2^60 + 2^52, which is where the double rounds it.
    Tensor i = Tensor::empty({1}, DType::Int64);
    i.at<std::int64_t>({0}) = (std::int64_t{1} << 60) + (std::int64_t{1} << 52) + 1;
    BOOST_TEST(values_of(ops::cast(i, DType::BFloat16))[0] == std::ldexp(1.0, 60) + std::ldexp(1.0, 53));

    // float16 -> bfloat16 rounds once from the exact value.
    Tensor h = make({1 + 3 * h_ulp}, {1}, DType::Float16);
    BOOST_TEST(values_of(ops::cast(h, DType::BFloat16))[0] == 1.0);
}

BOOST_AUTO_TEST_CASE(copy_converts_and_checks_counts) {
    Tensor src = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Int32);
    Tensor dst = Tensor::zeros({6}, DType::Float32);
    ops::copy_(dst, src);
    check_close(dst, {1, 2, 3, 4, 5, 6}, 0.0, "copy int32 -> float32, other shape");
    Tensor same = Tensor::zeros({3, 2}, DType::Int32);
    ops::copy_(same, src);
    check_close(same, {1, 2, 3, 4, 5, 6}, 0.0, "copy same dtype");
    Tensor wrong = Tensor::zeros({5}, DType::Float32);
    check_throws<ShapeError>([&] { ops::copy_(wrong, src); }, {"[5]", "[2, 3]"});
}

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------------------------------------ elementwise

BOOST_AUTO_TEST_SUITE(elementwise)

struct BinaryCase {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> op;
    std::function<Tensor&(Tensor&, const Tensor&)> op_inplace;
    std::function<double(double, double)> exact;
};

const std::vector<BinaryCase>& binary_cases() {
    static const std::vector<BinaryCase> cases = {
        {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, ops::add_, std::plus<double>()},
        {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, ops::sub_, std::minus<double>()},
        {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, ops::mul_, std::multiplies<double>()},
        {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, ops::div_, std::divides<double>()},
    };
    return cases;
}

// The expected value of x op y in `dtype`: integer division truncates, integers wrap, floats round once.
double expected_binary(const BinaryCase& c, double x, double y, DType dtype) {
    double exact = c.exact(x, y);
    if (is_integral(dtype) && std::string(c.name) == "div") exact = std::trunc(exact);
    return stored(exact, dtype);
}

BOOST_AUTO_TEST_CASE(binary_ops_every_numeric_dtype) {
    const std::vector<double> x = {1, 2, 3, 4, 5, 6, 120, 7};
    const std::vector<double> y = {6, 5, 4, 3, 2, 1, 7, -2};
    for (DType dtype : numeric_dtypes) {
        for (const auto& c : binary_cases()) {
            std::vector<double> yv = y;
            if (dtype == DType::UInt8) yv.back() = 2;  // no negative operands in uint8
            Tensor a = make(x, {2, 4}, dtype);
            Tensor b = make(yv, {2, 4}, dtype);
            std::vector<double> expected;
            for (std::size_t i = 0; i < x.size(); ++i) expected.push_back(expected_binary(c, x[i], yv[i], dtype));
            check_close(c.op(a, b), expected, tolerance(dtype), c.name);
            Tensor target = a.clone();
            Tensor& result = c.op_inplace(target, b);
            BOOST_TEST(&result == &target);
            check_close(target, expected, tolerance(dtype), std::string(c.name) + "_");
            check_close(a, x, 0.0, "left operand untouched");
        }
    }
}

BOOST_AUTO_TEST_CASE(suffix_broadcast) {
    const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    for (DType dtype : numeric_dtypes) {
        Tensor a = make(x, {2, 2, 3}, dtype);
        struct Right {
            Shape shape;
            std::vector<double> values;
        };
        for (const Right& r :
             {Right{{3}, {1, 2, 3}}, Right{{2, 3}, {1, 2, 3, 4, 5, 6}}, Right{{}, {2}}, Right{{2, 2, 3}, x}}) {
            Tensor b = make(r.values, r.shape, dtype);
            for (const auto& c : binary_cases()) {
                std::vector<double> expected;
                for (std::size_t i = 0; i < x.size(); ++i) {
                    expected.push_back(expected_binary(c, x[i], r.values[i % r.values.size()], dtype));
                }
                Tensor out = c.op(a, b);
                BOOST_TEST(out.shape() == a.shape());
                check_close(out, expected, tolerance(dtype), std::string(c.name) + " broadcast " + shape_str(r.shape));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(zero_d_and_empty_operands) {
    for (DType dtype : numeric_dtypes) {
        Tensor s = make({6}, {}, dtype);
        Tensor t = make({3}, {}, dtype);
        check_close(s / t, {2}, 0.0, "0-d / 0-d");
        BOOST_TEST((s + t).dim() == 0);
        Tensor e = Tensor::empty({0, 3}, dtype);
        Tensor row = make({1, 2, 3}, {3}, dtype);
        BOOST_TEST((e + row).shape() == (Shape{0, 3}));
        BOOST_TEST((e * 2.0).numel() == 0);
        BOOST_TEST(ops::sum(e).item<double>() == 0.0);
    }
}

BOOST_AUTO_TEST_CASE(shape_mismatch_names_both_shapes) {
    Tensor a = Tensor::ones({2, 3});
    for (const Shape& bad : {Shape{2}, Shape{1, 3}, Shape{3, 2}, Shape{4, 2, 3}}) {
        Tensor b = Tensor::ones(bad);
        check_throws<ShapeError>([&] { (void)(a + b); }, {"add", "[2, 3]", shape_str(bad)});
        check_throws<ShapeError>([&] { ops::mul_(a, b); }, {"mul", "[2, 3]", shape_str(bad)});
    }
}

BOOST_AUTO_TEST_CASE(dtype_mismatch_names_both_dtypes) {
    Tensor f = Tensor::ones({3}, DType::Float32);
    Tensor i = Tensor::ones({3}, DType::Int32);
    check_throws<DTypeError>([&] { (void)(f + i); }, {"float32", "int32"});
    check_throws<DTypeError>([&] { ops::axpy_(1.0, i, f); }, {"float32", "int32"});
    check_throws<DTypeError>(
        [&] {
            (void)ops::matmul(Tensor::ones({2, 2}, DType::Float64), Tensor::ones({2, 2}));
        },
        {"float64", "float32"});
}

BOOST_AUTO_TEST_CASE(bool_arithmetic_is_refused) {
    Tensor b = Tensor::ones({3}, DType::Bool);
    check_throws<DTypeError>([&] { (void)(b + b); }, {"bool"});
    check_throws<DTypeError>([&] { (void)(b * 2.0); }, {"bool"});
    check_throws<DTypeError>([&] { ops::scale_(b, 2.0); }, {"bool"});
    check_throws<DTypeError>([&] { (void)ops::mean(b); }, {"bool"});
    check_throws<DTypeError>([&] { (void)ops::relu(b); }, {"bool"});
}

BOOST_AUTO_TEST_CASE(devices_must_agree_and_exist) {
    if (cuda_device_count() == 0) {
        // Without a usable device no CUDA tensor can be made; the error says why.
        BOOST_CHECK_THROW((void)Tensor::zeros({2}, DType::Float32, Device::cuda(0)), DeviceError);
        return;
    }
    Tensor c = Tensor::ones({2});
    Tensor g = Tensor::ones({2}, DType::Float32, Device::cuda(0));
    check_throws<DeviceError>([&] { (void)(c + g); }, {"cpu", "cuda:0"});
}

BOOST_AUTO_TEST_CASE(undefined_operands_are_refused) {
    Tensor undefined;
    check_throws<InvalidArgumentError>([&] { (void)(undefined + Tensor::ones({1})); }, {"undefined"});
    check_throws<InvalidArgumentError>([&] { (void)ops::sum(undefined); }, {"undefined"});
}

BOOST_AUTO_TEST_CASE(integer_division) {
    for (DType dtype : {DType::Int8, DType::Int32, DType::Int64}) {
        check_close(make({7, -7, 7, -7}, {4}, dtype) / make({2, 2, -2, -2}, {4}, dtype), {3, -3, -3, 3}, 0.0,
                    "truncates toward zero");
        check_throws<InvalidArgumentError>(
            [&] {
                (void)(make({1, 2}, {2}, dtype) / make({1, 0}, {2}, dtype));
            },
            {"division by zero"});
        Tensor a = make({1, 2}, {2}, dtype);
        check_throws<InvalidArgumentError>([&] { ops::div_(a, make({0}, {}, dtype)); }, {"division by zero"});
        check_close(a, {1, 2}, 0.0, "untouched after a refused division");
        check_throws<InvalidArgumentError>([&] { (void)(a / 0.0); }, {"division", "0"});
    }
    // The one overflowing quotient, INT_MIN / -1, wraps to INT_MIN.
    check_close(make({-128}, {1}, DType::Int8) / make({-1}, {1}, DType::Int8), {-128}, 0.0, "int8 min / -1");
    Tensor m = Tensor::empty({1}, DType::Int64);
    m.at<std::int64_t>({0}) = std::numeric_limits<std::int64_t>::min();
    BOOST_TEST((m / make({-1}, {1}, DType::Int64)).at<std::int64_t>({0}) == std::numeric_limits<std::int64_t>::min());
    BOOST_TEST((m / -1.0).at<std::int64_t>({0}) == std::numeric_limits<std::int64_t>::min());
    // A scalar divisor outside the dtype's range still truncates as a true quotient.
    check_close(make({100, -100}, {2}, DType::Int8) / 300.0, {0, 0}, 0.0, "int8 / 300");
    check_close(make({7}, {1}, DType::Float32) / make({0}, {1}, DType::Float32),
                {std::numeric_limits<double>::infinity()}, 0.0, "float division by zero is inf");
}

BOOST_AUTO_TEST_CASE(integer_overflow_wraps) {
    check_close(make({100, -100}, {2}, DType::Int8) + make({100, -100}, {2}, DType::Int8), {-56, 56}, 0.0, "int8 add");
    check_close(make({200, 3}, {2}, DType::UInt8) * make({2, 100}, {2}, DType::UInt8), {144, 44}, 0.0, "uint8 mul");
    check_close(make({1}, {1}, DType::UInt8) - make({2}, {1}, DType::UInt8), {255}, 0.0, "uint8 sub");
    const double int32_max = std::numeric_limits<std::int32_t>::max();
    check_close(make({int32_max}, {1}, DType::Int32) + 1.0, {-int32_max - 1}, 0.0, "int32 max + 1");
    check_close(make({100}, {1}, DType::Int8) * 3.0, {44}, 0.0, "int8 * scalar");
}

BOOST_AUTO_TEST_CASE(scalar_ops) {
    struct ScalarCase {
        const char* name;
        std::function<Tensor(const Tensor&, double)> op;
        std::function<double(double, double)> exact;
    };
    const std::vector<ScalarCase> cases = {
        {"add", [](const Tensor& a, double s) { return a + s; }, std::plus<double>()},
        {"sub", [](const Tensor& a, double s) { return a - s; }, std::minus<double>()},
        {"mul", [](const Tensor& a, double s) { return a * s; }, std::multiplies<double>()},
        {"div", [](const Tensor& a, double s) { return a / s; }, std::divides<double>()},
    };
    const std::vector<double> x = {-6, -1, 0, 5, 9, 100};
    for (DType dtype : numeric_dtypes) {
        if (dtype == DType::UInt8) continue;  // covered by the wrap-around tests
        const double scalar = is_integral(dtype) ? 4.0 : 2.5;
        for (const auto& c : cases) {
            std::vector<double> expected;
            for (double v : x) {
                double exact = c.exact(v, scalar);
                if (is_integral(dtype) && std::string(c.name) == "div") exact = std::trunc(exact);
                expected.push_back(stored(exact, dtype));
            }
            check_close(c.op(make(x, {6}, dtype), scalar), expected, tolerance(dtype), c.name);
        }
    }
    check_throws<InvalidArgumentError>([] { (void)(make({1}, {1}, DType::Int32) * 0.5); }, {"0.5", "int32"});
    check_throws<InvalidArgumentError>(
        [] { (void)(make({1}, {1}, DType::Int64) + std::numeric_limits<double>::quiet_NaN()); }, {"int64"});
}

BOOST_AUTO_TEST_CASE(half_types_compute_in_float_and_round_once) {
    // 2048 + 1 is a halfway case in float16 (spacing 2) and rounds to even.
    check_close(make({2048}, {1}, DType::Float16) + make({1}, {1}, DType::Float16), {2048}, 0.0, "float16 2048 + 1");
    check_close(make({2048}, {1}, DType::Float16) + make({3}, {1}, DType::Float16), {2052}, 0.0, "float16 2048 + 3");
    // 0.1 + 0.2 in float, rounded once.
    for (DType dtype : {DType::Float16, DType::BFloat16}) {
        Tensor a = make({0.1}, {1}, dtype);
        Tensor b = make({0.2}, {1}, dtype);
        const float exact = static_cast<float>(values_of(a)[0]) + static_cast<float>(values_of(b)[0]);
        BOOST_TEST(values_of(a + b)[0] == stored(exact, dtype));
    }
    // axpy rounds once: y + 3x is -9.15625 in float16; rounding 3x to float16 first would give -9.1640625.
    Tensor y = make({-2.826171875}, {1}, DType::Float16);
    ops::axpy_(3.0, make({-2.111328125}, {1}, DType::Float16), y);
    BOOST_TEST(values_of(y)[0] == -9.15625);
    BOOST_TEST(y.at<float16>({0}).bits == bits_of<float16>(-9.15625));
}

BOOST_AUTO_TEST_CASE(axpy_and_scale) {
    for (DType dtype : numeric_dtypes) {
        Tensor y = make({1, 2, 3}, {3}, dtype);
        Tensor& result = ops::axpy_(2.0, make({4, 5, 6}, {3}, dtype), y);
        BOOST_TEST(&result == &y);
        check_close(y, {9, 12, 15}, tolerance(dtype), "axpy");
        ops::scale_(y, 3.0);
        check_close(y, {stored(27, dtype), stored(36, dtype), stored(45, dtype)}, tolerance(dtype), "scale");
    }
    Tensor y = Tensor::ones({3});
    check_throws<ShapeError>([&] { ops::axpy_(1.0, Tensor::ones({2}), y); }, {"[2]", "[3]"});
    Tensor yi = make({1}, {1}, DType::Int32);
    check_throws<InvalidArgumentError>([&] { ops::scale_(yi, 0.5); }, {"0.5"});
}

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------------------------------------ reductions

BOOST_AUTO_TEST_SUITE(reductions)

BOOST_AUTO_TEST_CASE(whole_tensor_every_numeric_dtype) {
    const std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6};
    for (DType dtype : numeric_dtypes) {
        Tensor t = make(x, {2, 4}, dtype);
        Tensor s = ops::sum(t);
        BOOST_TEST(s.dim() == 0);
        BOOST_TEST(s.dtype() == (is_floating(dtype) ? dtype : DType::Int64));
        BOOST_TEST(s.item<double>() == 31.0);
        BOOST_TEST(ops::max(t).item<double>() == 9.0);
        BOOST_TEST(ops::min(t).item<double>() == 1.0);
        BOOST_TEST(ops::max(t).dtype() == dtype);
        if (is_floating(dtype)) {
            BOOST_TEST(ops::mean(t).dtype() == dtype);
            BOOST_TEST(std::fabs(ops::mean(t).item<double>() - 3.875) <= tolerance(dtype) * 4);
        } else {
            check_throws<DTypeError>([&] { (void)ops::mean(t); }, {"mean", std::string(dtype_name(dtype))});
            check_throws<DTypeError>([&] { (void)ops::mean(t, 0); }, {"mean"});
        }
    }
}

BOOST_AUTO_TEST_CASE(integer_and_bool_sums_widen_to_int64) {
    Tensor t = Tensor::full({1000}, 100.0, DType::Int8);
    Tensor s = ops::sum(t);
    BOOST_TEST(s.dtype() == DType::Int64);
    BOOST_TEST(s.at<std::int64_t>({}) == 100000);
    BOOST_TEST(ops::sum(Tensor::full({300}, 255.0, DType::UInt8)).at<std::int64_t>({}) == 76500);
    Tensor b = make({1, 0, 1, 1}, {2, 2}, DType::Bool);
    BOOST_TEST(ops::sum(b).dtype() == DType::Int64);
    BOOST_TEST(ops::sum(b).at<std::int64_t>({}) == 3);
    check_close(ops::sum(b, 1), {1, 2}, 0.0, "bool sum along dim");
    BOOST_TEST(ops::max(b).at<bool>({}) == true);
    BOOST_TEST(ops::min(b).at<bool>({}) == false);
    check_close(ops::sum(make({-5, 3}, {2}, DType::Int8)), {-2}, 0.0, "negative int8 sum");
}

BOOST_AUTO_TEST_CASE(half_types_accumulate_in_float) {
    // In float16 arithmetic a running sum of ones stops at 2048, in bfloat16 at 256.
    BOOST_TEST(ops::sum(Tensor::ones({4096}, DType::Float16)).item<double>() == 4096.0);
    BOOST_TEST(ops::sum(Tensor::ones({1000}, DType::BFloat16)).item<double>() == 1000.0);
    BOOST_TEST(static_cast<float>(ops::sum(Tensor::ones({2, 4096}, DType::Float16), 1).to_vector<float16>()[1]) ==
               4096.0f);
    // Along a leading dimension every partial sum is one long chain.
    BOOST_TEST(static_cast<float>(ops::sum(Tensor::ones({4096, 2}, DType::Float16), 0).to_vector<float16>()[0]) ==
               4096.0f);
    BOOST_TEST(static_cast<float>(ops::sum(Tensor::ones({1000, 3}, DType::BFloat16), 0).to_vector<bfloat16>()[2]) ==
               1000.0f);
    BOOST_TEST(ops::mean(Tensor::ones({4096}, DType::Float16)).item<double>() == 1.0);
}

BOOST_AUTO_TEST_CASE(float32_sum_is_accurate) {
    // 10^6 copies of 0.1f: a single float accumulator drifts by about 1e-2 relative; blocked sums stay below 1e-6.
    Tensor t = Tensor::full({1000000}, 0.1, DType::Float32);
    const double exact = 1e6 * static_cast<double>(0.1f);
    BOOST_TEST(std::fabs(ops::sum(t).item<double>() - exact) <= 1e-6 * exact);
    BOOST_TEST(std::fabs(ops::mean(t).item<double>() - 0.1) <= 1e-6);
}

BOOST_AUTO_TEST_CASE(zero_d_and_empty) {
    for (DType dtype : numeric_dtypes) {
        Tensor s = make({7}, {}, dtype);
        BOOST_TEST(ops::sum(s).item<double>() == 7.0);
        BOOST_TEST(ops::max(s).item<double>() == 7.0);
        Tensor e = Tensor::empty({0}, dtype);
        BOOST_TEST(ops::sum(e).item<double>() == 0.0);
        check_throws<InvalidArgumentError>([&] { (void)ops::max(e); }, {"max", "empty"});
        check_throws<InvalidArgumentError>([&] { (void)ops::min(e); }, {"min", "empty"});
        if (is_floating(dtype)) BOOST_TEST(std::isnan(ops::mean(e).item<double>()));
        check_throws<InvalidArgumentError>([&] { (void)ops::sum(s, 0); }, {"0-d"});
    }
    Tensor e = Tensor::empty({2, 0, 3});
    BOOST_TEST(ops::sum(e, 1).shape() == (Shape{2, 3}));
    check_close(ops::sum(e, 1), std::vector<double>(6, 0.0), 0.0, "sum over an empty dimension");
    BOOST_TEST(ops::sum(e, 0).shape() == (Shape{0, 3}));
    BOOST_TEST(ops::max(e, 0).shape() == (Shape{0, 3}));
    check_throws<InvalidArgumentError>([&] { (void)ops::max(e, 1); }, {"max", "[2, 0, 3]"});
}

// Reference: reduce a [2, 3, 4] tensor of known values along each dimension with plain loops.
std::vector<double> reference_reduce(const std::vector<double>& x, const Shape& shape, std::size_t d,
                                     const std::string& op) {
    std::int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < d; ++i) outer *= shape[i];
    for (std::size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
    const std::int64_t extent = shape[d];
    std::vector<double> out;
    for (std::int64_t o = 0; o < outer; ++o) {
        for (std::int64_t i = 0; i < inner; ++i) {
            double acc = op == "max" ? -INFINITY : op == "min" ? INFINITY : 0.0;
            for (std::int64_t j = 0; j < extent; ++j) {
                const double v = x[static_cast<std::size_t>((o * extent + j) * inner + i)];
                acc = op == "max" ? std::max(acc, v) : op == "min" ? std::min(acc, v) : acc + v;
            }
            out.push_back(op == "mean" ? acc / static_cast<double>(extent) : acc);
        }
    }
    return out;
}

BOOST_AUTO_TEST_CASE(along_each_dimension) {
    const Shape shape = {2, 3, 4};
    std::vector<double> x;
    for (int i = 0; i < 24; ++i) x.push_back(static_cast<double>((i * 7) % 24) - 5.0);  // a permutation, some negative
    using Reduction = Tensor (*)(const Tensor&, std::int64_t, bool);
    const std::vector<std::pair<std::string, Reduction>> reductions = {
        {"sum", ops::sum}, {"mean", ops::mean}, {"max", ops::max}, {"min", ops::min}};
    for (DType dtype : numeric_dtypes) {
        if (dtype == DType::UInt8) continue;  // negative values
        Tensor t = make(x, shape, dtype);
        for (const auto& [name, reduce] : reductions) {
            if (name == "mean" && !is_floating(dtype)) continue;
            for (std::int64_t dim : {0, 1, 2, -1, -3}) {
                const auto d = static_cast<std::size_t>(dim < 0 ? dim + 3 : dim);
                const std::vector<double> expected = reference_reduce(x, shape, d, name);
                Shape removed = shape;
                removed.erase(removed.begin() + static_cast<std::ptrdiff_t>(d));
                Shape kept = shape;
                kept[d] = 1;
                Tensor r = reduce(t, dim, false);
                BOOST_TEST(r.shape() == removed);
                BOOST_TEST(r.dtype() == (name == "sum" && !is_floating(dtype) ? DType::Int64 : dtype));
                check_close(r, expected, tolerance(dtype) * 4, name + " dim " + std::to_string(dim));
                Tensor k = reduce(t, dim, true);
                BOOST_TEST(k.shape() == kept);
                check_close(k, expected, tolerance(dtype) * 4, name + " keepdim " + std::to_string(dim));
            }
        }
        check_throws<InvalidArgumentError>([&] { (void)ops::sum(t, 3); }, {"3", "[2, 3, 4]"});
        check_throws<InvalidArgumentError>([&] { (void)ops::max(t, -4); }, {"-4", "[2, 3, 4]"});
    }
}

BOOST_AUTO_TEST_CASE(max_and_min_propagate_nan) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (DType dtype : floating_dtypes) {
        Tensor t = make({1, nan, 3, 4, 5, 6}, {2, 3}, dtype);
        BOOST_TEST(std::isnan(ops::max(t).item<double>()));
        BOOST_TEST(std::isnan(ops::min(t).item<double>()));
        check_close(ops::max(t, 1), {nan, 6}, 0.0, "max along the last dim");
        check_close(ops::min(t, 0), {1, nan, 3}, 0.0, "min along the first dim");
        BOOST_TEST(std::isnan(ops::sum(t).item<double>()));
    }
}

BOOST_AUTO_TEST_CASE(long_runs_and_wide_rows) {
    // Sizes that cross many blocks of whole-tensor sums, and the slice accumulation of inner dims.
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int32}) {
        const std::int64_t n = 3 * 4096 + 17;
        Tensor t = ops::cast(Tensor::arange(n, DType::Int64), dtype);
        const double exact = static_cast<double>(n) * static_cast<double>(n - 1) / 2;
        BOOST_TEST(std::fabs(ops::sum(t).item<double>() - exact) <= 1e-6 * exact);
        BOOST_TEST(ops::max(t).item<double>() == static_cast<double>(n - 1));
        Tensor m = t.reshape({1, n});
        check_close(ops::sum(m, 0), values_of(t), 0.0, "sum over a dimension of size 1");
        check_close(ops::max(m, 1), {static_cast<double>(n - 1)}, 0.0, "max along a long last dimension");
        Tensor w = ops::cast(Tensor::arange(3 * 1000, DType::Int64), dtype).reshape({3, 1000});
        std::vector<double> colsum;
        for (int i = 0; i < 1000; ++i) colsum.push_back(3.0 * i + 3000.0);
        check_close(ops::sum(w, 0), colsum, 1e-6, "column sums");
    }
}

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------------------------------------ matmul

BOOST_AUTO_TEST_SUITE(linear_algebra)

BOOST_AUTO_TEST_CASE(all_transpose_combinations) {
    // op(A) = [[1, 2, 3], [4, 5, 6]], op(B) = [[7, 8], [9, 10], [11, 12]]; each operand is stored transposed when its
    // flag is set, so every combination has the same product.
    const std::vector<double> a = {1, 2, 3, 4, 5, 6};
    const std::vector<double> a_t = {1, 4, 2, 5, 3, 6};
    const std::vector<double> b = {7, 8, 9, 10, 11, 12};
    const std::vector<double> b_t = {7, 9, 11, 8, 10, 12};
    const std::vector<double> c = {58, 64, 139, 154};
    for (DType dtype : floating_dtypes) {
        for (bool ta : {false, true}) {
            for (bool tb : {false, true}) {
                Tensor A = ta ? make(a_t, {3, 2}, dtype) : make(a, {2, 3}, dtype);
                Tensor B = tb ? make(b_t, {2, 3}, dtype) : make(b, {3, 2}, dtype);
                Tensor C = ops::matmul(A, B, ta, tb);
                BOOST_TEST(C.shape() == (Shape{2, 2}));
                BOOST_TEST(C.dtype() == dtype);
                check_close(C, c, 0.0, std::string("matmul ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0"));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(against_a_double_reference) {
    Generator gen(7);
    const std::int64_t m = 17, k = 33, n = 9;
    for (DType dtype : floating_dtypes) {
        Tensor A = Tensor::uniform({m, k}, -1, 1, dtype, Device::cpu(), &gen);
        Tensor B = Tensor::uniform({k, n}, -1, 1, dtype, Device::cpu(), &gen);
        const auto av = values_of(A), bv = values_of(B);
        std::vector<double> expected;
        for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (std::int64_t p = 0; p < k; ++p) acc += av[i * k + p] * bv[p * n + j];
                expected.push_back(acc);
            }
        }
        // Inputs are exact in every dtype; only the float accumulation and the final rounding differ.
        check_close(ops::matmul(A, B), expected, tolerance(dtype) * 8, "random product");
    }
}

BOOST_AUTO_TEST_CASE(degenerate_sizes) {
    BOOST_TEST(ops::matmul(Tensor::ones({0, 3}), Tensor::ones({3, 2})).shape() == (Shape{0, 2}));
    Tensor z = ops::matmul(Tensor::ones({2, 0}), Tensor::ones({0, 3}));
    BOOST_TEST(z.shape() == (Shape{2, 3}));
    check_close(z, std::vector<double>(6, 0.0), 0.0, "empty inner dimension gives zeros");
}

BOOST_AUTO_TEST_CASE(argument_errors) {
    check_throws<DTypeError>(
        [] {
            (void)ops::matmul(Tensor::ones({2, 2}, DType::Int32), Tensor::ones({2, 2}, DType::Int32));
        },
        {"matmul", "int32"});
    check_throws<ShapeError>([] { (void)ops::matmul(Tensor::ones({3}), Tensor::ones({3, 2})); }, {"[3]", "[3, 2]"});
    check_throws<ShapeError>(
        [] {
            (void)ops::matmul(Tensor::ones({2, 3}), Tensor::ones({2, 3}));
        },
        {"[2, 3]", "inner"});
    BOOST_TEST(ops::matmul(Tensor::ones({2, 3}), Tensor::ones({2, 3}), false, true).shape() == (Shape{2, 2}));
}

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------------------------------------ activations, losses

BOOST_AUTO_TEST_SUITE(activations_and_losses)

BOOST_AUTO_TEST_CASE(relu_and_its_gradient) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> x = {-2, -0.5, 0, 0.5, 2, nan};
    for (DType dtype : floating_dtypes) {
        Tensor t = make(x, {2, 3}, dtype);
        Tensor r = ops::relu(t);
        BOOST_TEST(r.shape() == t.shape());
        check_close(r, {0, 0, 0, 0.5, 2, nan}, 0.0, "relu keeps NaN");
        Tensor g = ops::relu_backward(make({1, 2, 3, 4, 5, 6}, {2, 3}, dtype), t);
        check_close(g, {0, 0, 0, 4, 5, 0}, 0.0, "gradient is grad_output where input > 0");
    }
    check_throws<DTypeError>([] { (void)ops::relu(Tensor::ones({2}, DType::Int32)); }, {"relu", "int32"});
    check_throws<ShapeError>([] { (void)ops::relu_backward(Tensor::ones({2}), Tensor::ones({3})); }, {"[2]", "[3]"});
}

BOOST_AUTO_TEST_CASE(relu_gradient_matches_finite_differences) {
    Generator gen(11);
    Tensor x = Tensor::uniform({64}, -2, 2, DType::Float64, Device::cpu(), &gen);
    const double h = 1e-6;
    const auto grad = values_of(ops::relu_backward(Tensor::ones({64}, DType::Float64), x));
    const auto up = values_of(ops::relu(x + h));
    const auto down = values_of(ops::relu(x - h));
    const auto xv = values_of(x);
    for (std::size_t i = 0; i < xv.size(); ++i) {
        if (std::fabs(xv[i]) < 10 * h) continue;  // the kink
        BOOST_TEST(std::fabs((up[i] - down[i]) / (2 * h) - grad[i]) <= 1e-6);
    }
}

BOOST_AUTO_TEST_CASE(mse_closed_form) {
    for (DType dtype : floating_dtypes) {
        Tensor pred = make({1, 2, 3}, {3}, dtype);
        Tensor target = make({0, 2, 5}, {3}, dtype);
        Tensor loss = ops::mse_loss(pred, target);
        BOOST_TEST(loss.dim() == 0);
        BOOST_TEST(loss.dtype() == dtype);
        BOOST_TEST(std::fabs(loss.item<double>() - 5.0 / 3.0) <= tolerance(dtype) * 2);
        Tensor grad = ops::mse_loss_backward(pred, target);
        check_close(grad, {2.0 / 3.0, 0.0, -4.0 / 3.0}, tolerance(dtype) * 2, "2 (pred - target) / n");
    }
    BOOST_TEST(std::isnan(ops::mse_loss(Tensor::empty({0}), Tensor::empty({0})).item<double>()));
    BOOST_TEST(ops::mse_loss_backward(Tensor::empty({0}), Tensor::empty({0})).numel() == 0);
    check_throws<ShapeError>([] { (void)ops::mse_loss(Tensor::ones({2, 3}), Tensor::ones({3})); }, {"[2, 3]", "[3]"});
    check_throws<DTypeError>(
        [] { (void)ops::mse_loss(Tensor::ones({2}, DType::Int64), Tensor::ones({2}, DType::Int64)); }, {"int64"});
}

BOOST_AUTO_TEST_CASE(mse_gradient_matches_finite_differences) {
    Generator gen(5);
    Tensor pred = Tensor::normal({4, 5}, 0, 1, DType::Float64, Device::cpu(), &gen);
    Tensor target = Tensor::normal({4, 5}, 0, 1, DType::Float64, Device::cpu(), &gen);
    const auto grad = values_of(ops::mse_loss_backward(pred, target));
    const double h = 1e-5;
    for (std::int64_t i = 0; i < pred.numel(); ++i) {
        Tensor up = pred.clone();
        Tensor down = pred.clone();
        static_cast<double*>(up.data())[i] += h;
        static_cast<double*>(down.data())[i] -= h;
        const double numeric =
            (ops::mse_loss(up, target).item<double>() - ops::mse_loss(down, target).item<double>()) / (2 * h);
        BOOST_TEST(std::fabs(numeric - grad[static_cast<std::size_t>(i)]) <= 1e-8);
    }
}

BOOST_AUTO_TEST_SUITE_END()
