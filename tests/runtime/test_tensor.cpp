#define BOOST_TEST_MODULE tensor
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include <cmath>
#include <cstring>
#include <sstream>

using namespace lockstep;

namespace {
template <typename Fn>
std::string error_text(Fn&& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}
}  // namespace

BOOST_AUTO_TEST_CASE(empty_has_shape_numel_bytes_and_prints) {
    Tensor t = Tensor::empty({2, 3});
    BOOST_TEST(t.defined());
    BOOST_TEST(t.dim() == 2);
    BOOST_TEST(t.numel() == 6);
    BOOST_TEST(t.nbytes() == 24u);
    BOOST_TEST(t.size(0) == 2);
    BOOST_TEST(t.size(-1) == 3);
    BOOST_TEST(t.str() == "float32[2, 3] cpu");
    std::ostringstream os;
    os << Tensor::empty({4}, DType::BFloat16);
    BOOST_TEST(os.str() == "bfloat16[4] cpu");
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0u);  // 64-byte aligned storage
    BOOST_CHECK_THROW((void)t.size(2), InvalidArgumentError);
    BOOST_CHECK_THROW((void)t.size(-3), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(zero_dimensional_and_empty_tensors) {
    Tensor scalar = Tensor::full({}, 2.5, DType::Float64);
    BOOST_TEST(scalar.dim() == 0);
    BOOST_TEST(scalar.numel() == 1);
    BOOST_TEST(scalar.str() == "float64[] cpu");
    BOOST_TEST(scalar.at<double>({}) == 2.5);
    BOOST_TEST(scalar.item<double>() == 2.5);
    BOOST_TEST(scalar.item<int>() == 2);

    Tensor none = Tensor::zeros({0, 4});
    BOOST_TEST(none.numel() == 0);
    BOOST_TEST(none.nbytes() == 0u);
    BOOST_TEST(none.to_vector<float>().empty());
    BOOST_TEST(none.clone().numel() == 0);
    BOOST_TEST(none.reshape({4, 0}).shape() == (Shape{4, 0}));
    BOOST_CHECK_THROW((void)none.item<float>(), ShapeError);
}

BOOST_AUTO_TEST_CASE(factories_fill_every_dtype) {
    for (DType dtype : all_dtypes) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            Tensor z = Tensor::zeros({5}, dtype);
            Tensor o = Tensor::ones({5}, dtype);
            Tensor f = Tensor::full({5}, 3.0, dtype);
            BOOST_TEST((z.dtype() == dtype));
            for (std::int64_t i = 0; i < 5; ++i) {
                const auto read = [&](const Tensor& t) {
                    return visit_dtype(dtype, [&](auto zero) {
                        using T = decltype(zero);
                        return to_double(t.at<T>({i}));
                    });
                };
                BOOST_TEST(read(z) == 0.0);
                BOOST_TEST(read(o) == 1.0);
                BOOST_TEST(read(f) == (dtype == DType::Bool ? 1.0 : 3.0));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(arange_counts_like_python) {
    BOOST_TEST(Tensor::arange(5).to_vector<std::int64_t>() == (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
    BOOST_TEST(Tensor::arange(1, 2, 0.25, DType::Float64).to_vector<double>() ==
               (std::vector<double>{1.0, 1.25, 1.5, 1.75}));
    BOOST_TEST(Tensor::arange(5, 0, -2, DType::Int32).to_vector<std::int32_t>() ==
               (std::vector<std::int32_t>{5, 3, 1}));
    BOOST_TEST(Tensor::arange(3, 3, 1).numel() == 0);
    BOOST_TEST(Tensor::arange(3, 0, 1).numel() == 0);
    BOOST_CHECK_THROW((void)Tensor::arange(0, 1, 0), InvalidArgumentError);
    BOOST_CHECK_THROW((void)Tensor::arange(0, INFINITY, 1), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(from_data_copies_and_checks_the_count) {
    std::vector<float> values{1, 2, 3, 4, 5, 6};
    Tensor t = Tensor::from_data(values, {2, 3});
    values[0] = 100;  // the tensor owns a copy
    BOOST_TEST(t.at<float>({0, 0}) == 1.0f);
    BOOST_TEST(t.at<float>({1, 2}) == 6.0f);
    BOOST_TEST(Tensor::from_data<std::int64_t>({7, 8}, {2}).to_vector<std::int64_t>() ==
               (std::vector<std::int64_t>{7, 8}));
    const std::string msg = error_text([] { (void)Tensor::from_data<float>({1, 2, 3}, {2, 2}); });
    BOOST_TEST(contains(msg, "3 values"));
    BOOST_TEST(contains(msg, "[2, 2]"));
}

BOOST_AUTO_TEST_CASE(typed_access_checks_dtype_index_and_bounds) {
    Tensor t = Tensor::zeros({2, 3}, DType::Int32);
    t.at<std::int32_t>({1, 2}) = 42;
    BOOST_TEST(t.to_vector<std::int32_t>()[5] == 42);
    BOOST_TEST(t.data<std::int32_t>()[5] == 42);
    const std::string msg = error_text([&] { (void)t.at<float>({0, 0}); });
    BOOST_TEST(contains(msg, "int32"));
    BOOST_TEST(contains(msg, "float32"));
    BOOST_CHECK_THROW((void)t.data<double>(), DTypeError);
    BOOST_CHECK_THROW((void)t.at<std::int32_t>({2, 0}), InvalidArgumentError);
    BOOST_CHECK_THROW((void)t.at<std::int32_t>({0, -1}), InvalidArgumentError);
    BOOST_CHECK_THROW((void)t.at<std::int32_t>({0}), ShapeError);
    Tensor undefined;
    BOOST_TEST(!undefined.defined());
    BOOST_CHECK_THROW((void)undefined.data(), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(reshape_and_view_share_storage) {
    Tensor t = Tensor::arange(0, 12, 1, DType::Float32);
    Tensor r = t.reshape({3, -1});
    BOOST_TEST(r.shape() == (Shape{3, 4}));
    BOOST_TEST(r.shares_storage_with(t));
    r.at<float>({2, 3}) = -1.0f;
    BOOST_TEST(t.at<float>({11}) == -1.0f);
    Tensor v = t.view({2, 2, 3});
    BOOST_TEST(v.shares_storage_with(t));
    BOOST_TEST(v.at<float>({1, 0, 0}) == 6.0f);

    const std::string msg = error_text([&] { (void)t.reshape({5, 3}); });
    BOOST_TEST(contains(msg, "[12]"));
    BOOST_TEST(contains(msg, "[5, 3]"));
    BOOST_CHECK_THROW((void)t.reshape({-1, -1}), ShapeError);
    BOOST_CHECK_THROW((void)t.reshape({5, -1}), ShapeError);
    BOOST_CHECK_THROW((void)t.view({-1, 4}), ShapeError);
    BOOST_CHECK_THROW((void)t.reshape({}), ShapeError);  // 12 elements do not fit a 0-d tensor
    BOOST_TEST(Tensor::ones({1}).reshape({}).dim() == 0);
}

BOOST_AUTO_TEST_CASE(narrow_rows_is_a_view_of_whole_rows) {
    Tensor t = Tensor::arange(0, 12, 1, DType::Int64).reshape({4, 3});
    Tensor mid = t.narrow_rows(1, 3);
    BOOST_TEST(mid.shape() == (Shape{2, 3}));
    BOOST_TEST(mid.shares_storage_with(t));
    BOOST_TEST(mid.to_vector<std::int64_t>() == (std::vector<std::int64_t>{3, 4, 5, 6, 7, 8}));
    BOOST_TEST(mid.clone().to_vector<std::int64_t>() == mid.to_vector<std::int64_t>());
    BOOST_CHECK_THROW((void)t.narrow_rows(3, 5), InvalidArgumentError);
    BOOST_CHECK_THROW((void)Tensor::zeros({}).narrow_rows(0, 0), ShapeError);
}

BOOST_AUTO_TEST_CASE(clone_is_independent_and_to_same_device_is_identity) {
    Tensor t = Tensor::ones({3});
    Tensor c = t.clone();
    BOOST_TEST(!c.shares_storage_with(t));
    c.at<float>({0}) = 5;
    BOOST_TEST(t.at<float>({0}) == 1.0f);
    BOOST_TEST(t.to(Device::cpu()).shares_storage_with(t));
}

BOOST_AUTO_TEST_CASE(cuda_tensors_without_a_device_are_clear_errors) {
    if (cuda_device_count() > 0) return;  // covered by the cuda suite
    const std::string msg = error_text([] { (void)Tensor::zeros({2}, DType::Float32, Device::cuda(0)); });
    BOOST_TEST(contains(msg, "cuda:0"));
    BOOST_CHECK_THROW((void)Tensor::ones({2}).to(Device::cuda(0)), DeviceError);
}

BOOST_AUTO_TEST_CASE(same_seed_gives_bitwise_identical_random_tensors) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            Generator a(1234), b(1234), c(99);
            Tensor ua = Tensor::uniform({257}, -1, 1, dtype, Device::cpu(), &a);
            Tensor ub = Tensor::uniform({257}, -1, 1, dtype, Device::cpu(), &b);
            Tensor uc = Tensor::uniform({257}, -1, 1, dtype, Device::cpu(), &c);
            BOOST_TEST(std::memcmp(ua.data(), ub.data(), ua.nbytes()) == 0);
            BOOST_TEST(std::memcmp(ua.data(), uc.data(), ua.nbytes()) != 0);
            Tensor na = Tensor::normal({33}, 0, 1, dtype, Device::cpu(), &a);
            Tensor nb = Tensor::normal({33}, 0, 1, dtype, Device::cpu(), &b);
            BOOST_TEST(std::memcmp(na.data(), nb.data(), na.nbytes()) == 0);
        }
    }
    BOOST_CHECK_THROW((void)Tensor::uniform({2}, 0, 1, DType::Int32), DTypeError);
    BOOST_CHECK_THROW((void)Tensor::uniform({2}, 1, 1), InvalidArgumentError);
    BOOST_CHECK_THROW((void)Tensor::normal({2}, 0, -1), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(random_values_have_the_right_distribution) {
    Generator g(7);
    const std::int64_t n = 200000;
    auto u = Tensor::uniform({n}, 2, 4, DType::Float64, Device::cpu(), &g).to_vector<double>();
    double sum = 0, lo = 10, hi = -10;
    for (double v : u) {
        sum += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    BOOST_TEST(lo >= 2.0);
    BOOST_TEST(hi < 4.0);
    BOOST_TEST(std::abs(sum / n - 3.0) < 0.01);
    auto z = Tensor::normal({n}, 1, 2, DType::Float64, Device::cpu(), &g).to_vector<double>();
    double m = 0, m2 = 0;
    for (double v : z) m += v;
    m /= n;
    for (double v : z) m2 += (v - m) * (v - m);
    BOOST_TEST(std::abs(m - 1.0) < 0.02);
    BOOST_TEST(std::abs(std::sqrt(m2 / n) - 2.0) < 0.02);
}

BOOST_AUTO_TEST_CASE(negative_dimensions_are_shape_errors) {
    const std::string msg = error_text([] { (void)Tensor::empty({2, -3}); });
    BOOST_TEST(contains(msg, "[2, -3]"));
}

BOOST_AUTO_TEST_CASE(from_blob_shares_the_callers_memory_without_allocating) {
    std::vector<float> values{1, 2, 3, 4, 5, 6};
    const AllocatorStats before = allocator_for(Device::cpu()).stats();
    Tensor t = Tensor::from_blob(values.data(), {2, 3}, DType::Float32, Device::cpu());
    const AllocatorStats after = allocator_for(Device::cpu()).stats();
    BOOST_TEST(after.num_allocations == before.num_allocations);  // foreign memory is not the allocator's
    BOOST_TEST(after.allocated_bytes == before.allocated_bytes);
    BOOST_TEST(t.data() == static_cast<void*>(values.data()));
    BOOST_TEST(t.shape() == (Shape{2, 3}));
    BOOST_TEST(t.nbytes() == 24u);
    BOOST_TEST(t.storage()->foreign());
    BOOST_TEST(t.storage()->nbytes() == 24u);
    BOOST_TEST((t.storage()->device() == Device::cpu()));
    BOOST_TEST(!Tensor::zeros({2}).storage()->foreign());
    values[1] = 20;  // the caller's writes show in the tensor ...
    BOOST_TEST(t.at<float>({0, 1}) == 20.0f);
    t.at<float>({1, 2}) = -6;  // ... and the tensor's in the caller's memory
    BOOST_TEST(values[5] == -6.0f);
    ops::fill_(t, 7);
    BOOST_TEST(values == std::vector<float>(6, 7.0f));
    const std::vector<float> fresh{9, 8, 7, 6, 5, 4};
    t.copy_from_host(fresh.data());
    BOOST_TEST(values == fresh);
    BOOST_TEST(!t.read_only());
    BOOST_TEST(!t.in_shared_memory());
    BOOST_TEST(!t.shared_memory_offset().has_value());
}

BOOST_AUTO_TEST_CASE(from_blob_release_runs_once_after_the_last_view_drops) {
    std::vector<std::int64_t> values{1, 2, 3, 4, 5, 6};
    int released = 0;
    Tensor clone;
    {
        Tensor t = Tensor::from_blob(values.data(), {3, 2}, DType::Int64, Device::cpu(), [&] { ++released; });
        Tensor flat = t.reshape({-1});
        Tensor rows = t.narrow_rows(1, 3);
        clone = t.clone();
        t = Tensor();
        BOOST_TEST(released == 0);
        flat = Tensor();
        BOOST_TEST(released == 0);  // rows still looks at the memory
        BOOST_TEST(rows.to_vector<std::int64_t>() == (std::vector<std::int64_t>{3, 4, 5, 6}));
    }
    BOOST_TEST(released == 1);
    BOOST_TEST(clone.to_vector<std::int64_t>() == values);  // a clone owns its copy and needs no release
    BOOST_TEST(!clone.storage()->foreign());
    // An empty release is never called; the tensor simply forgets the memory.
    { Tensor t = Tensor::from_blob(values.data(), {6}, DType::Int64, Device::cpu()); }
    BOOST_TEST(released == 1);
}

BOOST_AUTO_TEST_CASE(from_blob_wraps_zero_elements_even_at_null) {
    int released = 0;
    {
        Tensor t = Tensor::from_blob(nullptr, {0, 4}, DType::Float64, Device::cpu(), [&] { ++released; });
        BOOST_TEST(t.defined());
        BOOST_TEST(t.numel() == 0);
        BOOST_TEST(t.nbytes() == 0u);
        BOOST_TEST(t.to_vector<double>().empty());
        BOOST_TEST(t.clone().numel() == 0);
        BOOST_TEST(t.reshape({4, 0}).shape() == (Shape{4, 0}));
    }
    BOOST_TEST(released == 1);
}

BOOST_AUTO_TEST_CASE(from_blob_rejects_invalid_inputs_and_keeps_the_memory_the_callers) {
    std::vector<float> values(8, 1.0f);
    int released = 0;
    auto count = [&] { ++released; };
    const std::string null_msg =
        error_text([&] { (void)Tensor::from_blob(nullptr, {2}, DType::Float32, Device::cpu(), count); });
    BOOST_TEST(contains(null_msg, "null data"), null_msg);
    BOOST_CHECK_THROW((void)Tensor::from_blob(nullptr, {2}, DType::Float32, Device::cpu(), count),
                      InvalidArgumentError);
    BOOST_CHECK_THROW((void)Tensor::from_blob(values.data(), {2, -1}, DType::Float32, Device::cpu(), count),
                      ShapeError);
    // One byte past an aligned float: no float lies there.
    void* misaligned = reinterpret_cast<char*>(values.data()) + 1;
    BOOST_CHECK_THROW((void)Tensor::from_blob(misaligned, {2}, DType::Float32, Device::cpu(), count),
                      InvalidArgumentError);
    BOOST_CHECK_NO_THROW(
        (void)Tensor::from_blob(misaligned, {2}, DType::UInt8, Device::cpu()));  // bytes align anywhere
    if (cuda_device_count() == 0) {
        BOOST_CHECK_THROW((void)Tensor::from_blob(values.data(), {2}, DType::Float32, Device::cuda(0), count),
                          DeviceError);
    }
    BOOST_TEST(released == 0);  // a rejected wrap takes nothing over
}

BOOST_AUTO_TEST_CASE(read_only_is_kept_by_views_and_dropped_by_copies) {
    std::vector<float> values{1, 2, 3, 4, 5, 6};
    Tensor t = Tensor::from_blob(values.data(), {2, 3}, DType::Float32, Device::cpu(), {}, /*read_only=*/true);
    BOOST_TEST(t.read_only());
    BOOST_TEST(t.str() == "float32[2, 3] cpu read-only");
    BOOST_TEST(t.reshape({3, -1}).read_only());
    BOOST_TEST(t.view({6}).read_only());
    BOOST_TEST(t.narrow_rows(1, 2).read_only());
    BOOST_TEST(t.to(Device::cpu()).read_only());  // the same tensor
    Tensor copy = t.clone();
    BOOST_TEST(!copy.read_only());
    BOOST_TEST(copy.str() == "float32[2, 3] cpu");
    ops::fill_(copy, 0);
    BOOST_TEST(values[0] == 1.0f);
    // Memory wrapped read-only stays so, whatever handle asks.
    Tensor view = t.view({6});
    BOOST_CHECK_THROW(view.set_read_only(false), ReadOnlyError);
    BOOST_TEST(view.read_only());

    // An owned tensor can be marked, and unmarked, by its owner; views made meanwhile keep the mark.
    Tensor owned = Tensor::zeros({4});
    owned.set_read_only(true);
    Tensor marked_view = owned.reshape({2, 2});
    BOOST_TEST(marked_view.read_only());
    BOOST_CHECK_THROW(ops::fill_(owned, 1), ReadOnlyError);
    owned.set_read_only(false);
    BOOST_TEST(marked_view.read_only());  // the bit belongs to each handle
    ops::fill_(owned, 1);
    BOOST_TEST(owned.to_vector<float>() == std::vector<float>(4, 1.0f));
    BOOST_TEST(!Tensor().read_only());
}

BOOST_AUTO_TEST_CASE(writes_into_a_read_only_tensor_are_refused_and_change_nothing) {
    const std::vector<float> original{1, 2, 3, 4};
    std::vector<float> values = original;
    Tensor t = Tensor::from_blob(values.data(), {4}, DType::Float32, Device::cpu(), {}, /*read_only=*/true);
    const std::string msg = error_text([&] { t.check_writable("the test's write"); });
    BOOST_TEST(contains(msg, "the test's write"), msg);
    BOOST_TEST(contains(msg, "float32[4] cpu read-only"), msg);
    BOOST_TEST(contains(msg, "clone()"), msg);
    BOOST_CHECK_THROW(t.check_writable("x"), ReadOnlyError);
    BOOST_CHECK_NO_THROW(Tensor::ones({1}).check_writable("x"));

    const std::vector<float> other{9, 9, 9, 9};
    const Tensor source = Tensor::from_data(other, {4});
    BOOST_CHECK_THROW(t.copy_from_host(other.data()), ReadOnlyError);
    BOOST_CHECK_THROW(ops::copy_(t, source), ReadOnlyError);
    BOOST_CHECK_THROW(ops::copy_(t, Tensor::ones({4}, DType::Float64)), ReadOnlyError);  // the converting copy too
    BOOST_CHECK_THROW(ops::fill_(t, 9), ReadOnlyError);
    BOOST_CHECK_THROW(ops::scale_(t, 9), ReadOnlyError);
    BOOST_CHECK_THROW(ops::add_(t, source), ReadOnlyError);
    BOOST_CHECK_THROW(ops::sub_(t, source), ReadOnlyError);
    BOOST_CHECK_THROW(ops::mul_(t, source), ReadOnlyError);
    BOOST_CHECK_THROW(ops::div_(t, source), ReadOnlyError);
    BOOST_CHECK_THROW(ops::axpy_(2.0, source, t), ReadOnlyError);
    Tensor view = t.narrow_rows(1, 3);
    BOOST_CHECK_THROW(ops::fill_(view, 9), ReadOnlyError);
    BOOST_TEST(values == original);
    // Reading is fine, and a read-only tensor may be the source of a write elsewhere.
    Tensor target = Tensor::zeros({4});
    ops::copy_(target, t);
    BOOST_TEST(target.to_vector<float>() == original);
    BOOST_TEST(ops::sum(t).item<float>() == 10.0f);
}
