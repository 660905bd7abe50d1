// Run under mpirun with 2 and 3 ranks. The host program owns MPI (MPI_Init here, MPI_Finalize at exit): in-order
// records work on MPI_COMM_WORLD without a Runtime, on the Runtime's communicator while one is initialised, and on the
// world again once the Runtime has been finalised while MPI still runs.
#define BOOST_TEST_MODULE logging_host_mpi
#include <boost/test/unit_test.hpp>

#include "logging_capture.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <mpi.h>

#include <string>

using lockstep::LogLevel;
using lockstep_test::CapturedBlocks;

namespace {

struct HostOwnsMpi {
    HostOwnsMpi() { MPI_Init(nullptr, nullptr); }
    ~HostOwnsMpi() { MPI_Finalize(); }
};

int world_rank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}
int world_size() {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

// One in-order call; rank 0 checks that it wrote one block holding every rank's record in rank order.
void check_one_in_order_block(const std::string& tag) {
    CapturedBlocks captured;
    lockstep::get_logger("host-mpi", LogLevel::Info).info(lockstep::in_rank_order, "{} from {}", tag, world_rank());
    const auto blocks = captured.blocks();
    if (world_rank() != 0) {
        BOOST_TEST(blocks.empty());
        return;
    }
    BOOST_REQUIRE_EQUAL(blocks.size(), 1u);
    BOOST_REQUIRE_EQUAL(blocks[0].size(), static_cast<std::size_t>(world_size()));
    for (int r = 0; r < world_size(); ++r) {
        BOOST_TEST(blocks[0][r].rank == r);
        BOOST_TEST(blocks[0][r].size == world_size());
        BOOST_TEST(blocks[0][r].message == fmt::format("{} from {}", tag, r));
    }
}

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(HostOwnsMpi);

BOOST_AUTO_TEST_CASE(in_order_without_a_runtime_uses_the_world) {
    BOOST_REQUIRE(!lockstep::Runtime::initialized());
    check_one_in_order_block("no runtime");
    check_one_in_order_block("no runtime again");
}

BOOST_AUTO_TEST_CASE(in_order_follows_the_runtime_through_init_and_finalize) {
    lockstep::Runtime::init();
    BOOST_REQUIRE(!lockstep::Runtime::get().owns_mpi());
    check_one_in_order_block("with runtime");
    lockstep::Runtime::finalize();
    int finalized = 1;
    MPI_Finalized(&finalized);
    BOOST_REQUIRE(finalized == 0);
    check_one_in_order_block("after runtime");
    lockstep::Runtime::init();
    check_one_in_order_block("second runtime");
    lockstep::Runtime::finalize();
}
