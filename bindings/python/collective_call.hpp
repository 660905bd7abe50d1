#pragma once
// One collective's call from Python: the C call with the GIL released and its failure raised (run_collective), and a
// rank whose arguments fail to convert joining the collective as rejected (joined), since the other ranks are in it.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include "call_site.hpp"
#include "errors.hpp"

#include <cstdint>
#include <exception>

namespace lockstep_python {

namespace py = pybind11;

// Set when a collective's body reaches its C call (joined() below tells conversion failures from the call's own).
extern thread_local constinit bool g_call_started;
// How many collectives this thread has taken part in, by a C call or by joining one as rejected: a wrapper that raises
// (the torch backend's checks) tells from it whether its rank entered the collective, or must still join it.
extern thread_local constinit uint64_t g_calls_entered;

// Runs `call` (a C collective taking the options last) with the GIL released, then raises its failure. `tag` and
// `stream` are the keywords of `function` (see CallOptions).
template <typename Call>
void run_collective(const char* function, py::handle tag, py::handle stream, Call&& call,
                    const char* tag_name = "tag") {
    CallOptions options(function, tag, tag_name, stream);
    g_call_started = true;  // from here on, a failure is the collective's own (joined())
    ++g_calls_entered;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = call(options.get());
    }
    check(status);
}

// Runs a collective's body: converting its arguments, then the C call (run_collective). A conversion that fails on this
// rank (a dtype lockstep lacks, a non-contiguous array, a bad op name) joins the collective as rejected, since the
// other ranks are already in it: in debug mode every rank then raises the same CallRejectedError naming this rank and
// the reason; otherwise this rank raises its own error at once, as a C++ program's would.
void reject_conversion(lockstep_comm_t comm, lockstep_collective_t kind, int32_t root, const char* why);

// `root` is read when a conversion fails: the body may set it (-1 until its own conversion succeeded).
template <typename Comm, typename Body>
auto joined(Comm& c, lockstep_collective_t kind, const int32_t& root, Body&& body) -> decltype(body()) {
    g_call_started = false;
    try {
        return body();
    } catch (py::error_already_set& e) {
        if (!g_call_started && !c.freed()) reject_conversion(c.handle(), kind, root, e.what());
        throw;
    } catch (const StatusError& e) {
        if (!g_call_started && !c.freed()) reject_conversion(c.handle(), kind, root, e.message.c_str());
        throw;
    } catch (const std::exception& e) {
        if (!g_call_started && !c.freed()) reject_conversion(c.handle(), kind, root, e.what());
        throw;
    }
}

// _calls_entered.
void bind_collective_call(py::module_& m);

}  // namespace lockstep_python
