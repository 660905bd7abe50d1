#include "collective_call.hpp"

#include <pybind11/stl.h>

namespace lockstep_python {

thread_local constinit bool g_call_started = false;
thread_local constinit uint64_t g_calls_entered = 0;

void reject_conversion(lockstep_comm_t comm, lockstep_collective_t kind, int32_t root, const char* why) {
    CallOptions options;  // the caller's place, as the collective would have passed it
    lockstep_status_t status;
    ++g_calls_entered;
    {
        py::gil_scoped_release release;
        status = lockstep_reject_call(comm, kind, root, LOCKSTEP_SUM, why, options.get());
    }
    if (status == LOCKSTEP_ERROR_CALL_REJECTED) check(status);  // debug mode: every rank raises this same error
}

void bind_collective_call(py::module_& m) {
    m.def(
        "_calls_entered", []() { return g_calls_entered; },
        "How many collectives this thread has entered (by a call, or by joining one as rejected).");
}

}  // namespace lockstep_python
