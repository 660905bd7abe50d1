#define BOOST_TEST_MODULE dtype_device
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include <cmath>
#include <limits>
#include <sstream>

using namespace lockstep;

BOOST_AUTO_TEST_CASE(dtype_table_sizes_names_and_categories) {
    struct Expected {
        DType dtype;
        const char* name;
        std::size_t size;
        bool floating;
        bool integral;
        MPI_Datatype mpi;
    };
    const Expected table[] = {
        {DType::Float32, "float32", 4, true, false, MPI_FLOAT},
        {DType::Float64, "float64", 8, true, false, MPI_DOUBLE},
        {DType::Float16, "float16", 2, true, false, MPI_UINT16_T},  // bits travel; reductions widen to float32
        {DType::BFloat16, "bfloat16", 2, true, false, MPI_UINT16_T},
        {DType::Int8, "int8", 1, false, true, MPI_INT8_T},
        {DType::UInt8, "uint8", 1, false, true, MPI_UINT8_T},
        {DType::Int32, "int32", 4, false, true, MPI_INT32_T},
        {DType::Int64, "int64", 8, false, true, MPI_INT64_T},
        {DType::Bool, "bool", 1, false, false, MPI_C_BOOL},
        {DType::Int16, "int16", 2, false, true, MPI_INT16_T},
        {DType::UInt16, "uint16", 2, false, true, MPI_UINT16_T},
        {DType::UInt32, "uint32", 4, false, true, MPI_UINT32_T},
        {DType::UInt64, "uint64", 8, false, true, MPI_UINT64_T},
        {DType::Complex64, "complex64", 8, false, false, MPI_C_FLOAT_COMPLEX},
        {DType::Complex128, "complex128", 16, false, false, MPI_C_DOUBLE_COMPLEX},
    };
    BOOST_TEST(std::size(table) == std::size(all_dtypes));
    for (const auto& e : table) {
        BOOST_TEST_CONTEXT(e.name) {
            BOOST_TEST(dtype_name(e.dtype) == e.name);
            BOOST_TEST(dtype_size(e.dtype) == e.size);
            BOOST_TEST(is_floating(e.dtype) == e.floating);
            BOOST_TEST(is_integral(e.dtype) == e.integral);
            BOOST_TEST((parse_dtype(e.name) == e.dtype));
            std::ostringstream os;
            os << e.dtype;
            BOOST_TEST(os.str() == e.name);
            BOOST_TEST((mpi_datatype(e.dtype) == e.mpi));
            const bool complex = e.dtype == DType::Complex64 || e.dtype == DType::Complex128;
            BOOST_TEST(is_complex(e.dtype) == complex);
            BOOST_TEST((real_dtype(e.dtype) == (e.dtype == DType::Complex64    ? DType::Float32
                                                : e.dtype == DType::Complex128 ? DType::Float64
                                                                               : e.dtype)));
        }
    }
    BOOST_TEST((parse_dtype("short") == DType::Int16));
    BOOST_TEST((parse_dtype("cdouble") == DType::Complex128));
    BOOST_TEST(dtype_name(static_cast<DType>(200)) == "unknown");
    BOOST_TEST((dtype_of<float> == DType::Float32));
    BOOST_TEST((dtype_of<std::int64_t> == DType::Int64));
    BOOST_TEST((dtype_of<bfloat16> == DType::BFloat16));
    BOOST_TEST((parse_dtype("Half") == DType::Float16));
    BOOST_TEST((parse_dtype("double") == DType::Float64));
}

BOOST_AUTO_TEST_CASE(unknown_dtype_name_is_a_dtype_error_listing_valid_names) {
    try {
        (void)parse_dtype("float8");
        BOOST_FAIL("parse_dtype accepted float8");
    } catch (const DTypeError& e) {
        const std::string msg = e.what();
        BOOST_TEST(msg.find("float8") != std::string::npos);
        BOOST_TEST(msg.find("bfloat16") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(float16_round_trips_and_rounds_to_nearest_even) {
    BOOST_TEST(static_cast<float>(float16(1.0f)) == 1.0f);
    BOOST_TEST(float16(1.0f).bits == 0x3C00);
    BOOST_TEST(float16(-2.0f).bits == 0xC000);
    BOOST_TEST(float16(65504.0f).bits == 0x7BFF);                   // largest finite
    BOOST_TEST(std::isinf(static_cast<float>(float16(70000.0f))));  // overflows to infinity
    BOOST_TEST(float16(5.960464477539063e-08f).bits == 0x0001);     // smallest subnormal
    // 1 + 2^-11 lies halfway between 1 and the next float16 (1 + 2^-10): ties go to the even mantissa, 1.
    BOOST_TEST(float16(1.0f + 0x1p-11f).bits == 0x3C00);
    // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
    BOOST_TEST(float16(1.0f + 3 * 0x1p-11f).bits == 0x3C02);
    BOOST_TEST(std::isnan(static_cast<float>(float16(std::numeric_limits<float>::quiet_NaN()))));
}

BOOST_AUTO_TEST_CASE(bfloat16_keeps_the_float32_exponent_and_rounds_to_nearest_even) {
    BOOST_TEST(bfloat16(1.0f).bits == 0x3F80);
    BOOST_TEST(static_cast<float>(bfloat16(3.0e38f)) > 2.9e38f);  // float32's range survives
    BOOST_TEST(bfloat16(1.0f + 0x1p-8f).bits == 0x3F80);          // halfway, tie to even
    BOOST_TEST(bfloat16(1.0f + 3 * 0x1p-8f).bits == 0x3F82);      // halfway, tie to even (up)
    BOOST_TEST(static_cast<float>(bfloat16::from_bits(0x4049)) == 3.140625f);
}

BOOST_AUTO_TEST_CASE(device_parse_and_print) {
    BOOST_TEST((Device::parse("cpu") == Device::cpu()));
    BOOST_TEST((Device::parse("cuda") == Device::cuda(0)));
    BOOST_TEST((Device::parse("cuda:3") == Device::cuda(3)));
    BOOST_TEST(Device::parse("cuda:12").index() == 12);
    BOOST_TEST(Device::cuda(2).str() == "cuda:2");
    BOOST_TEST(Device::cpu().str() == "cpu");
    std::ostringstream os;
    os << Device::cuda(1);
    BOOST_TEST(os.str() == "cuda:1");
    BOOST_TEST(Device::cpu().is_cpu());
    BOOST_TEST(Device::cuda(0).is_cuda());
}

BOOST_AUTO_TEST_CASE(bad_device_strings_are_device_errors_quoting_the_text) {
    for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU ", "", "cuda:0:1", "tpu:0"}) {
        BOOST_TEST_CONTEXT("'" << bad << "'") {
            try {
                (void)Device::parse(bad);
                BOOST_FAIL("accepted");
            } catch (const DeviceError& e) {
                BOOST_TEST(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(cuda_device_count_matches_the_build) {
    if (!cuda_built()) {
        BOOST_TEST(cuda_device_count() == 0);
        BOOST_CHECK_THROW((void)allocator_for(Device::cuda(0)), DeviceError);
    }
    BOOST_TEST(cuda_device_count() >= 0);
    // A device index past the last one is refused with the count in the message.
    try {
        (void)allocator_for(Device::cuda(cuda_device_count() + 7));
        BOOST_FAIL("allocator for a missing device");
    } catch (const DeviceError& e) {
        BOOST_TEST(std::string(e.what()).find("cuda:") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(device_choice_is_local_rank_modulo_device_count) {
    BOOST_TEST((choose_device(0, 0) == Device::cpu()));
    BOOST_TEST((choose_device(5, 0) == Device::cpu()));
    BOOST_TEST((choose_device(0, 4) == Device::cuda(0)));
    BOOST_TEST((choose_device(5, 4) == Device::cuda(1)));
    BOOST_TEST((choose_device(7, 8) == Device::cuda(7)));
}
