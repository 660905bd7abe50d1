#pragma once
// lockstep.Request: a non-blocking operation (a collective or a send/receive called with async_op=True), over the C
// interface's lockstep_request_t.
//
// The operation reads and writes the caller's memory until it completes, so the Request holds what the call was given
// (the Python objects, and the buffers exported from them) until a wait or test sees it complete. Errors of the
// operation are raised there, as the class the blocking call would raise, and again at every later wait. Any thread
// may wait: every C call that may block runs with the GIL released, and the Request's own state changes only with the
// GIL held.
//
// A Request dropped before it was seen complete gives a RequestWarning naming it; what it holds is kept (with its C
// handle, unfreed) until its communicator is freed or lockstep finalises, after which the library no longer touches
// that memory. Testing it instead would run, without a progress thread, the communicator's queue of collectives, which
// may wait for other ranks: a destructor must not block.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include "call_site.hpp"
#include "collective_call.hpp"
#include "errors.hpp"
#include "operand.hpp"

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace lockstep_python {

namespace py = pybind11;

// What result() gives once the operation completed.
enum class RequestResult {
    Given,      // the object of the call (what the blocking call returns: x, out, a new Tensor or None)
    NewTensor,  // the tensor the library created (gather_uneven)
    Source,     // the rank a receive got its message from (what the blocking recv returns)
};

// What a non-blocking call hands to its Request: the blocking call's return value and everything the operation uses.
struct Pending {
    py::object result = py::none();
    RequestResult kind = RequestResult::Given;
    std::vector<Operand> operands;    // buffers held exported, tensors held, until completion
    std::vector<py::object> objects;  // the Python objects given to the call
    // A rank whose conversion failed joined the collective as rejected: its own error, raised at the wait where the
    // library reports no error of its own (outside debug mode).
    std::exception_ptr rejected;
};

class Request {
public:
    Request(lockstep_request_t handle, lockstep_comm_t comm, std::string operation, const CallSite& site,
            Pending pending);
    Request(const Request&) = delete;
    Request& operator=(const Request&) = delete;
    ~Request();  // with the GIL held (pybind11 deallocates with it)

    // Blocks (GIL released) until completion, or at most `timeout` seconds: true when completed; raises its error.
    bool wait(std::optional<double> timeout);
    // Progress without waiting for other ranks where a progress thread runs: true when completed; raises its error.
    bool test();
    // As test(), but never raises the operation's error (a later wait() does).
    bool is_completed();
    // wait(), then what the blocking call returns.
    py::object result();
    // wait(), then the sender's rank for a receive; None for other operations.
    py::object source();
    std::string repr() const;

private:
    enum class Poll { Wait, WaitFor, Test };
    // One C wait, timed wait or test (GIL released) unless the completion was seen: true once it has been.
    bool poll(Poll how, double seconds);
    // A completion seen with `status`: records the outcome and lets go of what the operation used.
    void settle(lockstep_status_t status);
    // Raises the recorded error, if any.
    void raise_outcome() const;

    lockstep_request_t handle_;
    lockstep_comm_t comm_;  // compared only: which communicator's free lets a dropped Request's memory go
    uint64_t generation_;
    std::string operation_;
    std::string site_;  // "file:line", empty when unknown
    Pending pending_;
    bool completed_ = false;
    std::optional<StatusError> error_;
    int32_t source_ = -1;
};

// Lets go of dropped Requests of `comm` (nullptr: of every communicator) once the library has finished with them: after
// lockstep_comm_free(comm) or lockstep_finalize.
void release_dropped_requests(lockstep_comm_t comm);

// lockstep.Request and lockstep.RequestWarning.
void bind_request(py::module_& m);

// A new lockstep.Request for an issued operation (issue_request).
py::object make_request(lockstep_request_t handle, lockstep_comm_t comm, const char* function, const CallSite& site,
                        Pending pending);

// Issues a non-blocking call of `function` ("Communicator.allreduce"): `call(options, &request)` (a C lockstep_i*
// function taking the options and the request last) with the GIL released, then the Request that holds `pending`. The
// keywords are run_collective's.
template <typename Call>
py::object issue_request(const char* function, lockstep_comm_t comm, py::handle tag, py::handle stream, Pending pending,
                         Call&& call, const char* tag_name = "tag") {
    CallOptions options(function, tag, tag_name, stream);
    g_call_started = true;  // from here on, a failure is the call's own (joined())
    ++g_calls_entered;
    lockstep_request_t request = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = call(options.get(), &request);
    }
    if (status != LOCKSTEP_OK) {
        const std::string text = last_error_text(status);
        lockstep_request_free(request);  // NULL unless the library left one
        raise_status(status, text);
    }
    return make_request(request, comm, function, options.site(), std::move(pending));
}

// A call with both forms in one `call(options, request)` (request null for the blocking one): with `nonblocking`, the
// Request of issue_request; otherwise the blocking call (run_collective) and then pending.result, what it returns.
template <typename Call>
py::object run_or_issue(bool nonblocking, const char* function, lockstep_comm_t comm, py::handle tag, py::handle stream,
                        Pending pending, Call&& call, const char* tag_name = "tag") {
    if (nonblocking) return issue_request(function, comm, tag, stream, std::move(pending), call, tag_name);
    run_collective(
        function, tag, stream, [&](const lockstep_call_options_t* o) { return call(o, nullptr); }, tag_name);
    return pending.result;
}

// A non-blocking collective whose conversion failed on this rank (`error`, being handled) joins it as rejected
// (lockstep_ireject_call), since the other ranks issued theirs: the Request's wait raises CallRejectedError on every
// rank in debug mode, else this rank's own error. Blocking calls take joined()'s blocking rejection.
py::object reject_nonblocking(lockstep_comm_t comm, lockstep_collective_t kind, int32_t root, std::exception_ptr error);

// Whether `async_op` asks for a Request; false for a value to_bool refuses (the body raises that error, blocking).
bool requests_request(py::handle async_op) noexcept;

// joined() for a collective that takes async_op: a conversion failure of a non-blocking call joins it without blocking.
template <typename Comm, typename Body>
py::object joined_call(Comm& c, lockstep_collective_t kind, const int32_t& root, py::handle async_op, Body&& body) {
    if (!requests_request(async_op)) return joined(c, kind, root, body);
    g_call_started = false;
    try {
        return body();
    } catch (...) {
        if (g_call_started || c.freed()) throw;
        return reject_nonblocking(c.handle(), kind, root, std::current_exception());
    }
}

}  // namespace lockstep_python
