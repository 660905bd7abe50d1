#define BOOST_TEST_MODULE errors
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include <mpi.h>

#include <type_traits>
#include <vector>

using namespace lockstep;

BOOST_AUTO_TEST_CASE(every_error_type_derives_from_lockstep_error) {
    static_assert(std::is_base_of_v<Error, ConfigError>);
    static_assert(std::is_base_of_v<Error, OutOfMemoryError>);
    static_assert(std::is_base_of_v<Error, DistributedOperationError>);
    static_assert(std::is_same_v<DistributedOperationException, DistributedOperationError>);  // the earlier name
    static_assert(std::is_base_of_v<Error, TimeoutError>);
    static_assert(std::is_base_of_v<Error, MpiError>);
    static_assert(std::is_base_of_v<Error, CudaError>);
    static_assert(std::is_base_of_v<Error, ShapeError>);
    static_assert(std::is_base_of_v<Error, DTypeError>);
    static_assert(std::is_base_of_v<Error, DeviceError>);
    static_assert(std::is_base_of_v<Error, ReadOnlyError>);
    static_assert(std::is_base_of_v<Error, UnsupportedError>);
    static_assert(std::is_base_of_v<std::runtime_error, Error>);
    BOOST_CHECK_THROW(throw TimeoutError("x"), Error);
}

BOOST_AUTO_TEST_CASE(read_only_and_unsupported_errors_are_caught_as_lockstep_errors) {
    // Thrown from the library (its typeinfo, as a program catches it), and constructed here.
    std::vector<float> values(2);
    const Tensor t = Tensor::from_blob(values.data(), {2}, DType::Float32, Device::cpu(), {}, /*read_only=*/true);
    try {
        t.check_writable("a test");
        BOOST_FAIL("no throw");
    } catch (const Error& e) {
        BOOST_TEST(dynamic_cast<const ReadOnlyError*>(&e) != nullptr);
        BOOST_TEST(std::string(e.what()).find("a test") != std::string::npos);
    }
    try {
        throw UnsupportedError("DLPack device type 14 is not supported");
    } catch (const Error& e) {
        BOOST_TEST(dynamic_cast<const UnsupportedError*>(&e) != nullptr);
        BOOST_TEST(std::string(e.what()) == "DLPack device type 14 is not supported");
    }
}

BOOST_AUTO_TEST_CASE(mpi_check_names_the_call_the_code_text_and_the_position) {
    BOOST_CHECK_NO_THROW(LOCKSTEP_MPI_CHECK(MPI_SUCCESS));
    try {
        LOCKSTEP_MPI_CHECK(MPI_ERR_TRUNCATE);
        BOOST_FAIL("no throw");
    } catch (const MpiError& e) {
        const std::string msg = e.what();
        BOOST_TEST(e.code() == MPI_ERR_TRUNCATE);
        BOOST_TEST(e.call() == "MPI_ERR_TRUNCATE");
        BOOST_TEST(msg.find("test_errors.cpp:") != std::string::npos);
        BOOST_TEST(msg.find("MPI_ERR_TRUNCATE (code") != std::string::npos);  // named even before MPI_Init
    }
}

BOOST_AUTO_TEST_CASE(config_error_names_its_source) {
    ConfigError e("environment LOCKSTEP_TIMEOUT", "'abc' is not a number");
    BOOST_TEST(e.source() == "environment LOCKSTEP_TIMEOUT");
    BOOST_TEST(std::string(e.what()).find("LOCKSTEP_TIMEOUT") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("'abc'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cuda_error_names_call_code_and_text) {
    CudaError e("cudaMalloc(&p, n)", 2, "cudaErrorMemoryAllocation: out of memory", std::source_location::current());
    BOOST_TEST(e.code() == 2);
    const std::string msg = e.what();
    BOOST_TEST(msg.find("cudaMalloc(&p, n)") != std::string::npos);
    BOOST_TEST(msg.find("cudaErrorMemoryAllocation") != std::string::npos);
    BOOST_TEST(msg.find("test_errors.cpp:") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(out_of_memory_message_is_actionable) {
    AllocatorStats stats;
    stats.limit_bytes = std::size_t{512} << 20;
    stats.allocated_bytes = std::size_t{400} << 20;
    stats.cached_bytes = std::size_t{96} << 20;
    OutOfMemoryError e(Device::cpu(), std::size_t{2} << 30, stats);
    BOOST_TEST(std::string(e.what()).starts_with(
        "cpu out of memory: tried to allocate 2.00 GiB; limit 512.00 MiB, 400.00 MiB in use, 96.00 MiB cached"));
    BOOST_TEST(std::string(e.what()).find("cpu_memory_limit") != std::string::npos);
    BOOST_TEST(e.requested_bytes() == (std::size_t{2} << 30));
    BOOST_TEST(*e.stats().limit_bytes == (std::size_t{512} << 20));
    BOOST_TEST((e.device() == Device::cpu()));
}

BOOST_AUTO_TEST_CASE(byte_sizes_parse_and_format) {
    struct Case {
        const char* text;
        std::size_t bytes;
    };
    const Case cases[] = {
        {"512MiB", std::size_t{512} << 20},
        {"2GiB", std::size_t{2} << 30},
        {"1.5GB", 1'500'000'000},
        {"64k", 65536},
        {"1048576", 1048576},
        {"10 mb", 10'000'000},
        {"3G", std::size_t{3} << 30},
        {"1tib", std::size_t{1} << 40},
        {"100B", 100},
        {"0.5KiB", 512},
    };
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.text) {
            BOOST_TEST(parse_bytes(c.text) == c.bytes);
        }
    }
    for (const char* bad : {"", "MiB", "12XB", "1.2.3", "-5", "abc", "5 MiBs"}) {
        BOOST_TEST_CONTEXT("'" << bad << "'") {
            BOOST_CHECK_THROW((void)parse_bytes(bad), InvalidArgumentError);
        }
    }
    BOOST_TEST(format_bytes(0) == "0 B");
    BOOST_TEST(format_bytes(1023) == "1023 B");
    BOOST_TEST(format_bytes(1536) == "1.50 KiB");
    BOOST_TEST(format_bytes(std::size_t{2} << 30) == "2.00 GiB");
}
