#pragma once
// What the MPI_ entry points of the checking core share (internal).

#include "hooks.hpp"

// The MPI_ functions this library defines are its only exports.
#define LOCKSTEP_CHECK_ENTRY extern "C" __attribute__((visibility("default")))

namespace lockstep::check {

// The error class that a checked call returns on every process where the program set a non-fatal error handler on
// the communicator (MPI_ERRORS_RETURN or its own), and its one error code; MPI_SUCCESS before MPI_Init.
extern int mismatch_error_class;
extern int mismatch_error_code;

// The checks MPI_Finalize makes in debug mode (finalize.cpp): call counts per communicator, requests never completed.
void check_at_finalize();

}  // namespace lockstep::check
