// Run under mpirun with 2 ranks and LOCKSTEP_TIMEOUT=2. Rank 1 skips an in-order call that rank 0 makes: rank 0 must
// end its wait with a TimeoutError naming the record (not wait forever, unwatched), write its later in-order records
// at once, and the job must still finish.
#include <lockstep/errors.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <mpi.h>

#include <cstdio>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what.c_str());
        ++failures;
    }
}

}  // namespace

int main() {
    auto& runtime = lockstep::Runtime::init();
    const int rank = runtime.identity().rank;
    check(runtime.identity().size == 2, "run with 2 ranks");
    check(runtime.config().timeout == 2.0, "run with LOCKSTEP_TIMEOUT=2");
    const auto log = lockstep::get_logger("skip_test", lockstep::LogLevel::Info);

    log.info(lockstep::in_rank_order, "every rank makes this one");

    if (rank == 0) {
        std::string error;
        try {
            log.info(lockstep::in_rank_order, "rank 1 skips this one");
        } catch (const lockstep::TimeoutError& e) {
            error = e.what();
        }
        check(!error.empty(), "the skipped in-order call ends in a TimeoutError on rank 0");
        check(error.find("in-order record 2 of this process") != std::string::npos, "the error numbers the record");
        check(error.find("'skip_test'") != std::string::npos, "the error names the logger");
        check(error.find("rank 1 skips this one") != std::string::npos, "the error quotes the record");
        check(error.find("Every rank must make every in-order call") != std::string::npos, "the error says the rule");
        // Later in-order records are local: no wait, no error.
        try {
            log.info(lockstep::in_rank_order, "after the timeout");
        } catch (const std::exception& e) {
            check(false, std::string("an in-order record after the timeout raised: ") + e.what());
        }
    }
    MPI_Barrier(runtime.comm());
    const int failed = failures;
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, runtime.comm());
    lockstep::Runtime::finalize();
    if (rank == 0 && any == 0) std::printf("ok\n");
    return any == 0 ? 0 : 1;
}
