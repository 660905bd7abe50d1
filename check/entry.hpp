#pragma once
// What the MPI_ entry points of the checking core share (internal).

#include "hooks.hpp"

#include <string>
#include <vector>

// The MPI_ functions this library defines are its only exports.
#define LOCKSTEP_CHECK_ENTRY extern "C" __attribute__((visibility("default")))

namespace lockstep::check {

// The error class that a checked call returns on every process where the program set a non-fatal error handler on
// the communicator (MPI_ERRORS_RETURN or its own), and its one error code; MPI_SUCCESS before MPI_Init.
extern int mismatch_error_class;
extern int mismatch_error_code;

// A deferred collective's request the program waited for or freed (deferred.cpp): whether it was one, and its
// outcome (MPI_SUCCESS, or the error its check returned). The entry is gone afterwards.
struct DeferredOutcome {
    bool deferred;
    int error;
};
[[nodiscard]] DeferredOutcome take_deferred(MPI_Request request);
// The non-blocking collectives whose requests the program never completed or freed: "MPI_Ibcast at f (file:line)".
[[nodiscard]] std::vector<std::string> deferred_never_completed();
// The same for the requests of track_request (requests.cpp).
[[nodiscard]] std::vector<std::string> tracked_never_completed();

// MPI_Type_free of a datatype that a deferred collective will start its payload with: true when the free is
// postponed until it has (deferred.cpp).
[[nodiscard]] bool postpone_type_free(MPI_Datatype type);

// Writes a report to standard error in one piece.
void print_report(const std::string& text);

// The checks MPI_Finalize makes in debug mode (finalize.cpp): call counts per communicator, requests never completed.
[[nodiscard]] int check_at_finalize();  // MPI_SUCCESS, or the error code where the world returns errors

}  // namespace lockstep::check
