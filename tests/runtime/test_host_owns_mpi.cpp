// Run under mpirun with 1, 2 and 3 ranks: the host program owns MPI; lockstep adopts it, runs on a communicator the
// program supplies, and leaves MPI initialised when it finalises.
#define BOOST_TEST_MODULE host_owns_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include <mpi.h>

using namespace lockstep;

namespace {
struct HostProgramOwnsMpi {
    HostProgramOwnsMpi() {
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    }
    ~HostProgramOwnsMpi() { MPI_Finalize(); }
};
}  // namespace
BOOST_TEST_GLOBAL_FIXTURE(HostProgramOwnsMpi);

BOOST_AUTO_TEST_CASE(runtime_adopts_an_initialised_mpi_and_leaves_it_running) {
    Runtime& rt = Runtime::init();
    BOOST_TEST(!rt.owns_mpi());
    BOOST_TEST(rt.thread_level() == MPI_THREAD_FUNNELED);  // the level the host program asked for
    int world_size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    BOOST_TEST(rt.identity().size == world_size);
    Runtime::finalize();
    int finalized = 1;
    MPI_Finalized(&finalized);
    BOOST_TEST(finalized == 0);
    BOOST_TEST(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);  // the host program can still use MPI
}

BOOST_AUTO_TEST_CASE(runtime_runs_on_a_user_supplied_communicator) {
    int world_rank = 0, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    // Two groups: even and odd world ranks.
    MPI_Comm half = MPI_COMM_NULL;
    BOOST_REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half) == MPI_SUCCESS);

    RuntimeOptions options;
    options.comm = half;
    Runtime& rt = Runtime::init(options);  // re-initialisation after finalize: MPI is still up
    const int expected_size = world_size / 2 + ((world_rank % 2 == 0) ? world_size % 2 : 0);
    BOOST_TEST(rt.identity().rank == world_rank / 2);
    BOOST_TEST(rt.identity().size == expected_size);
    BOOST_TEST(rt.identity().node_count == 1);
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(rt.comm(), half, &cmp);
    BOOST_TEST(cmp == MPI_CONGRUENT);

    // A sum over the sub-group only: the even group sums even world ranks.
    int mine = world_rank, sum = 0;
    LOCKSTEP_MPI_CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, rt.comm()));
    int expected = 0;
    for (int r = world_rank % 2; r < world_size; r += 2) expected += r;
    BOOST_TEST(sum == expected);

    Runtime::finalize();
    // lockstep freed only its duplicate: the user's communicator is still valid.
    int half_size = 0;
    BOOST_TEST(MPI_Comm_size(half, &half_size) == MPI_SUCCESS);
    BOOST_TEST(half_size == expected_size);
    MPI_Comm_free(&half);
}
