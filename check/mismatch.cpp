// The end of a disagreement (collective.hpp): every process of the communicator found the same one and holds the
// same report. Each prints it; then, as lockstep's debug mode does, the job ends, unless the program asked MPI to
// return errors on that communicator (MPI_ERRORS_RETURN or a handler of its own): then the call returns this
// library's error code on every process (after the program's own handler ran, if it set one), and the program decides.

#include "collective.hpp"
#include "entry.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockstep::check {
namespace {

constexpr int kMismatchExitCode = 1;

// Whether `handler` ends the job (MPI_ERRORS_ARE_FATAL, and MPI 4's MPI_ERRORS_ABORT).
bool is_fatal(MPI_Errhandler handler) {
#ifdef MPI_ERRORS_ABORT
    if (handler == MPI_ERRORS_ABORT) return true;
#endif
    return handler == MPI_ERRORS_ARE_FATAL;
}

// Waits (a bounded time) until every process of the communicator printed its report, so that the launcher, which ends
// the others once one exits, cuts no report short.
void wait_for_peers(MPI_Comm shadow) {
    MPI_Request barrier = MPI_REQUEST_NULL;
    if (PMPI_Ibarrier(shadow, &barrier) != MPI_SUCCESS) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int done = 0;
    while (done == 0 && std::chrono::steady_clock::now() < until) PMPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
}

}  // namespace

void print_report(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
}

int handle_mismatch(const CommunicatorRecord& comm, const std::string& report) {
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    PMPI_Comm_get_errhandler(comm.comm, &handler);
    const bool fatal = is_fatal(handler);
    if (!fatal) {
        print_report(report +
                     "Returning the error code to the program (the communicator's error handler is not "
                     "fatal).\n");
        if (handler != MPI_ERRORS_RETURN) PMPI_Comm_call_errhandler(comm.comm, mismatch_error_code);
        PMPI_Errhandler_free(&handler);
        return mismatch_error_code;
    }
    PMPI_Errhandler_free(&handler);
    print_report(report + "Ending the job (exit code 1).\n");
    wait_for_peers(comm.shadow);
    std::fflush(stdout);
    std::_Exit(kMismatchExitCode);
}

}  // namespace lockstep::check
