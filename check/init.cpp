// MPI_Init, MPI_Init_thread and MPI_Finalize: where the checking core learns whether debug mode is on (lockstep's
// Config, resolved as lockstep resolves it: LOCKSTEP_DEBUG_MODE, config.yaml, launcher flag), makes the shadows of
// the predefined communicators and registers its error class.

#include "communicators.hpp"
#include "entry.hpp"

#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/foreign_watch.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace lockstep::check {

thread_local bool inside_lockstep __attribute__((tls_model("initial-exec"))) = false;
thread_local const void* caller_address __attribute__((tls_model("initial-exec"))) = nullptr;
bool debug_mode = false;
int mismatch_error_class = MPI_SUCCESS;
int mismatch_error_code = MPI_SUCCESS;

namespace {

// Resolves the Config before MPI starts (no MPI call: a bad setting ends the process while the launcher can still
// tell the user which one).
void resolve_settings() {
    const InsideLockstep inside;
    try {
        debug_mode = lockstep::config().debug;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "lockstep check: %s\n", e.what());
        std::fflush(stderr);
        std::_Exit(2);
    }
}

void after_init(int provided) {
    {
        const InsideLockstep inside;
        if (debug_mode) {
            PMPI_Add_error_class(&mismatch_error_class);
            PMPI_Add_error_code(mismatch_error_class, &mismatch_error_code);
            char text[] = "lockstep check: the processes of a communicator made different MPI calls";
            PMPI_Add_error_string(mismatch_error_code, text);
            PMPI_Add_error_string(mismatch_error_class, text);
            register_predefined_communicators();
        }
    }
    on_init(provided);
    communicator_created(MPI_COMM_WORLD, MPI_COMM_NULL, "MPI_Init", nullptr);
    communicator_created(MPI_COMM_SELF, MPI_COMM_NULL, "MPI_Init", nullptr);
}

}  // namespace
}  // namespace lockstep::check

using namespace lockstep::check;

LOCKSTEP_CHECK_ENTRY int MPI_Init(int* argc, char*** argv) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Init(argc, argv));
    resolve_settings();
    const int rc = PMPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) return rc;
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    after_init(provided);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Init_thread(argc, argv, required, provided));
    resolve_settings();
    const int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc != MPI_SUCCESS) return rc;
    after_init(*provided);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Finalize() {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Finalize());
    on_finalize(LOCKSTEP_CHECK_CALLER());
    int found = MPI_SUCCESS;
    if (debug_mode) {
        const InsideLockstep inside;
        found = check_at_finalize();
        free_shadows();
    }
    {
        // The trace at exit that the setting trace_file (`lockstep launch --trace FILE`) asks for: every process's
        // recorded MPI calls, gathered on MPI_COMM_WORLD (every program call on it has returned by now).
        const InsideLockstep inside;
        lockstep::foreign::write_trace_at_exit(MPI_COMM_WORLD);
    }
    const int rc = PMPI_Finalize();
    return rc != MPI_SUCCESS ? rc : found;
}
