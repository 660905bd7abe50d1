// Logging before any MPI: the identity comes from the launcher's variables, which meson sets for this test
// (OMPI_COMM_WORLD_RANK/SIZE: rank 0 of 2, or rank 1 of 4). MPI is never initialised here, so in-order records fall
// back to local emission, and the main process says once that they are not ordered.
#define BOOST_TEST_MODULE logging_before_init
#include <boost/test/unit_test.hpp>

#include "logging_capture.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <mpi.h>

#include <cstdlib>
#include <string>

using lockstep::LogLevel;
using lockstep_test::CapturedBlocks;

namespace {
int env_int(const char* name) {
    const char* value = std::getenv(name);
    BOOST_REQUIRE_MESSAGE(value != nullptr, name << " is not set: meson sets it for this test");
    return std::atoi(value);
}
}  // namespace

BOOST_AUTO_TEST_CASE(records_carry_the_launcher_identity) {
    int initialized = 1;
    MPI_Initialized(&initialized);
    BOOST_REQUIRE(initialized == 0);
    BOOST_REQUIRE(!lockstep::Runtime::initialized());
    const int rank = env_int("OMPI_COMM_WORLD_RANK");
    const int size = env_int("OMPI_COMM_WORLD_SIZE");

    CapturedBlocks captured;
    const auto log = lockstep::get_logger("early", LogLevel::Info);
    log.info("main only");
    log.info(lockstep::every_rank, "every rank");
    const auto records = captured.records();
    BOOST_REQUIRE_EQUAL(records.size(), rank == 0 ? 2u : 1u);
    if (rank == 0) BOOST_TEST(records.front().message == "main only");
    BOOST_TEST(records.back().message == "every rank");
    for (const auto& r : records) {
        BOOST_TEST(r.rank == rank);
        BOOST_TEST(r.size == size);
        BOOST_TEST(r.host == lockstep::host_name());
    }
    BOOST_TEST(log.will_emit(LogLevel::Info, {}) == (rank == 0));
    BOOST_TEST(log.will_emit(LogLevel::Info, lockstep::every_rank));
    BOOST_TEST(!log.will_emit(LogLevel::Debug, lockstep::every_rank));
}

BOOST_AUTO_TEST_CASE(in_order_without_mpi_is_emitted_locally_with_a_warning_once) {
    const int rank = env_int("OMPI_COMM_WORLD_RANK");
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("early-ordered", LogLevel::Info);
    log.info(lockstep::in_rank_order, "ordered {}", 1);
    LOCKSTEP_LOG_INFO(log, lockstep::in_rank_order) << "ordered " << 2;
    log.debug(lockstep::in_rank_order, "filtered");

    std::vector<std::string> own;
    int warnings = 0;
    for (const auto& block : captured.blocks()) {
        BOOST_REQUIRE_EQUAL(block.size(), 1u);
        const auto& r = block.front();
        if (r.logger == "lockstep.logging") {
            ++warnings;
            BOOST_TEST((r.level == LogLevel::Warning));
            BOOST_TEST(r.message.find("not in rank order") != std::string::npos, r.message);
        } else {
            own.push_back(r.message);
            BOOST_TEST(r.rank == rank);
        }
    }
    BOOST_TEST(own == (std::vector<std::string>{"ordered 1", "ordered 2"}), boost::test_tools::per_element());
    // The warning is a main-process record like any other.
    BOOST_TEST(warnings == (rank == 0 ? 1 : 0));
}
