// Run under mpirun with 1, 2 and 3 ranks: lockstep initialises MPI itself and finalises it.
#define BOOST_TEST_MODULE runtime_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

using namespace lockstep;

namespace {
int env_int(const char* name) {
    const char* v = std::getenv(name);
    BOOST_REQUIRE_MESSAGE(v != nullptr, name << " is not set: run this test under mpirun");
    return std::atoi(v);
}
}  // namespace

BOOST_AUTO_TEST_CASE(identity_is_known_before_mpi_is_initialised) {
    int initialized = 1;
    MPI_Initialized(&initialized);
    BOOST_TEST(initialized == 0);
    BOOST_TEST(!Runtime::initialized());
    const ProcessIdentity id = current_identity();
    BOOST_TEST(id.rank == env_int("OMPI_COMM_WORLD_RANK"));
    BOOST_TEST(id.size == env_int("OMPI_COMM_WORLD_SIZE"));
    BOOST_TEST(id.local_rank == env_int("OMPI_COMM_WORLD_LOCAL_RANK"));
    BOOST_TEST(id.local_size == env_int("OMPI_COMM_WORLD_LOCAL_SIZE"));
    BOOST_TEST(id.source == "OMPI_COMM_WORLD_RANK");
    BOOST_CHECK_THROW((void)Runtime::get(), Error);
}

BOOST_AUTO_TEST_CASE(init_takes_identity_from_mpi) {
    const ProcessIdentity before = identity_from_environment();
    Runtime& rt = Runtime::init();
    BOOST_TEST(&Runtime::init() == &rt);  // idempotent
    BOOST_TEST(&Runtime::get() == &rt);
    BOOST_TEST(rt.owns_mpi());
    BOOST_TEST(rt.thread_level() >= MPI_THREAD_SINGLE);

    int world_rank = -1, world_size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const ProcessIdentity& id = rt.identity();
    BOOST_TEST(id.rank == world_rank);
    BOOST_TEST(id.size == world_size);
    BOOST_TEST(id.source == "MPI");
    // One machine: every rank is local, one node, node index 0.
    BOOST_TEST(id.local_size == world_size);
    BOOST_TEST(id.local_rank == world_rank);
    BOOST_TEST(id.node_count == 1);
    BOOST_TEST(id.node_index == 0);
    BOOST_TEST(id.hostname == host_name());
    BOOST_TEST(id.is_main_process() == (world_rank == 0));
    // The launcher's variables agree with MPI.
    BOOST_TEST(before.rank == id.rank);
    BOOST_TEST(before.size == id.size);
    BOOST_TEST(before.local_rank == id.local_rank);
    BOOST_TEST(current_identity().rank == id.rank);
    BOOST_TEST(current_identity().source == "MPI");
}

BOOST_AUTO_TEST_CASE(device_follows_local_rank) {
    const Runtime& rt = Runtime::get();
    BOOST_TEST((rt.device() == choose_device(rt.identity().local_rank, cuda_device_count())));
    if (cuda_device_count() == 0) BOOST_TEST(rt.device().is_cpu());
}

BOOST_AUTO_TEST_CASE(lockstep_works_on_its_own_duplicate_of_the_communicator) {
    const Runtime& rt = Runtime::get();
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(rt.comm(), MPI_COMM_WORLD, &cmp);
    BOOST_TEST(cmp == MPI_CONGRUENT);  // same group, different context: our messages never match the user's
    const int n = rt.identity().size;
    Tensor mine = Tensor::full({}, rt.identity().rank + 1, DType::Int64);
    Tensor total = Tensor::zeros({}, DType::Int64);
    LOCKSTEP_MPI_CHECK(MPI_Allreduce(mine.data(), total.data(), 1, mpi_datatype(DType::Int64), MPI_SUM, rt.comm()));
    BOOST_TEST(total.item<std::int64_t>() == std::int64_t{n} * (n + 1) / 2);
    // Errors on lockstep's communicator come back as codes (then as MpiError), not as an abort.
    try {
        LOCKSTEP_MPI_CHECK(MPI_Bcast(mine.data(), 1, MPI_INT64_T, n + 5, rt.comm()));
        BOOST_FAIL("MPI_Bcast with an invalid root succeeded");
    } catch (const MpiError& e) {
        BOOST_TEST(std::string(e.what()).find("MPI_Bcast") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(finalize_ends_mpi_that_lockstep_started) {
    Runtime::finalize();
    BOOST_TEST(!Runtime::initialized());
    int finalized = 0;
    MPI_Finalized(&finalized);
    BOOST_TEST(finalized == 1);
    Runtime::finalize();  // idempotent
    // Identity still answers after finalisation (logging at exit needs it).
    BOOST_TEST(current_identity().rank == env_int("OMPI_COMM_WORLD_RANK"));
    BOOST_CHECK_THROW((void)Runtime::init(), Error);  // MPI cannot be initialised twice
}
