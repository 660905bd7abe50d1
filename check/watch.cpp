// The watchdog side of the interposition library: what every intercepted call reports (hooks.hpp).
//
// Empty for now: the watchdog for programs that do not send through lockstep (the boards of their calls in flight and
// the hang report) fills these in; the checking core only calls them.

#include "hooks.hpp"

namespace lockstep::check {

void on_init(int /*provided*/) noexcept {}
void on_finalize(const void* /*caller*/) noexcept {}
CallToken call_begin(const CallDescriptor& /*call*/) noexcept {
    return 0;
}
void call_end(CallToken /*token*/) noexcept {}
void request_started(MPI_Request /*request*/, const CallDescriptor& /*call*/) noexcept {}
void request_completed(MPI_Request /*request*/) noexcept {}
void communicator_created(MPI_Comm /*created*/, MPI_Comm /*parent*/, const char* /*function*/,
                          const void* /*caller*/) noexcept {}
void communicator_freed(MPI_Comm /*comm*/) noexcept {}

}  // namespace lockstep::check
