// The program's call site for a Fortran MPI call, which reports name.
//
// A program built with mpif.h or `use mpi` calls the Fortran entry point (mpi_allreduce_) itself: the entry point's
// return address is the call site. A program built with `use mpi_f08` calls Open MPI's module procedure
// (mpi_allreduce_f08_ in libmpi_usempif08.so), which calls the entry point ompi_allreduce_f: the return address lies in
// that library, and the call site is one frame further up. MPICH's Fortran bindings (libmpichfort.so) call the C
// functions from one frame (mpif.h) or two (mpi_f08); a C entry point that hands its own return address here gets the
// program's call site the same way. Those frames are found with the unwinder the first time a return address into a
// binding library is seen; the distance from the entry point's frame to the slot that holds the call site is fixed
// for that return address (the binding procedures keep constant frames), so it is cached and later calls read the
// slot directly: a few loads instead of an unwind on every call.
#pragma once

#include "hooks.hpp"

#include <cstddef>

namespace lockstep::check::fortran {

// The program's call site, given the entry point's return address and its canonical frame address (a return address
// outside the binding libraries is the call site itself).
[[nodiscard]] const void* program_call_site(const void* return_address, const void* frame) noexcept;

// How many return addresses into the binding library have their call-site slot cached (0 where only the unwinder is
// used: outside x86-64). For tests.
[[nodiscard]] std::size_t cached_return_addresses() noexcept;

// Hands the call site to the C entry point (hooks.hpp: taken by LOCKSTEP_CHECK_CALLER()) and clears it after the call
// in any case, so that a C function this library does not intercept leaves no stale address behind.
class CallSite {
public:
    CallSite(const void* return_address, const void* frame) noexcept {
        caller_address = program_call_site(return_address, frame);
    }
    ~CallSite() { caller_address = nullptr; }
    CallSite(const CallSite&) = delete;
    CallSite& operator=(const CallSite&) = delete;
};

}  // namespace lockstep::check::fortran

// In a Fortran entry point (a macro: both builtins must be evaluated in the entry point itself).
#define LOCKSTEP_FORTRAN_CALL_SITE()                                        \
    const ::lockstep::check::fortran::CallSite lockstep_fortran_call_site_( \
        __builtin_extract_return_addr(__builtin_return_address(0)), __builtin_dwarf_cfa())
