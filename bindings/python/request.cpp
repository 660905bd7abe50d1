#include "request.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"
#include "runtime.hpp"
#include "tensor.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace lockstep_python {

namespace {

// lockstep.RequestWarning (a RuntimeWarning): a strong reference for the life of the process.
PyObject* g_request_warning = nullptr;

// A Request dropped before its completion was seen: its C handle and what its operation uses, until the library has
// finished with them. Only touched with the GIL held; never destroyed (entries hold Python objects, which must not be
// released after the interpreter is gone).
struct DroppedRequest {
    lockstep_request_t handle;
    lockstep_comm_t comm;
    Pending pending;
};
std::vector<DroppedRequest>* const g_dropped = new std::vector<DroppedRequest>();

// A warning from a destructor: the error indicator of whatever is running is kept, and a warning turned into an error
// (-W error) is reported as unraisable, since there is nobody to raise it to.
void warn_from_destructor(const std::string& message) {
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject* category = g_request_warning != nullptr ? g_request_warning : PyExc_RuntimeWarning;
    if (PyErr_WarnEx(category, message.c_str(), 1) != 0) PyErr_WriteUnraisable(nullptr);
    PyErr_Restore(type, value, traceback);
}

}  // namespace

Request::Request(lockstep_request_t handle, lockstep_comm_t comm, std::string operation, const CallSite& site,
                 Pending pending)
    : handle_(handle),
      comm_(comm),
      generation_(g_generation),
      operation_(std::move(operation)),
      site_(site.file != nullptr ? std::string(site.file) + ":" + std::to_string(site.line) : std::string()),
      pending_(std::move(pending)) {}

Request::~Request() {
    if (completed_ || generation_ != g_generation || g_finalized) {
        // Complete, or its lockstep finalised (which completed or cancelled it): the library is done with the memory.
        lockstep_request_free(handle_);
        return;
    }
    warn_from_destructor(repr() +
                         " was dropped before it was seen to complete: wait() for it (or test() until True). Its "
                         "operation still runs; what it uses stays alive until its communicator is freed or lockstep "
                         "finalises.");
    g_dropped->push_back(DroppedRequest{handle_, comm_, std::move(pending_)});
}

void Request::settle(lockstep_status_t status) {
    completed_ = true;
    if (status != LOCKSTEP_OK) {
        error_ = StatusError{status, last_error_text(status)};
    } else if (pending_.kind == RequestResult::Source) {
        const lockstep_status_t s = lockstep_request_source(handle_, &source_);
        if (s != LOCKSTEP_OK) error_ = StatusError{s, last_error_text(s)};
    } else if (pending_.kind == RequestResult::NewTensor) {
        lockstep_tensor_t tensor = nullptr;
        const lockstep_status_t s = lockstep_request_result(handle_, &tensor);
        if (s != LOCKSTEP_OK) {
            error_ = StatusError{s, last_error_text(s)};
        } else {
            pending_.result = py::cast(Tensor(tensor));
        }
    }
    // The library is done with the caller's memory: the buffers are released, the objects let go.
    pending_.operands.clear();
    pending_.objects.clear();
}

void Request::raise_outcome() const {
    if (error_) throw *error_;
    if (pending_.rejected) std::rethrow_exception(pending_.rejected);
}

bool Request::poll(Poll how, double seconds) {
    if (!completed_) {
        lockstep_request_t handle = handle_;  // the library refuses it once finalized, if not complete
        int32_t completed = 0;
        lockstep_status_t status;
        {
            py::gil_scoped_release release;
            if (how == Poll::Wait) {
                status = lockstep_request_wait(handle);
                completed = 1;
            } else if (how == Poll::WaitFor) {
                status = lockstep_request_wait_for(handle, seconds, &completed);
            } else {
                status = lockstep_request_test(handle, &completed);
            }
        }
        if (!completed_) {  // another thread may have seen the completion meanwhile
            if (completed == 0) {
                check(status);  // the call's own failure (the operation's comes with a completion)
                return false;
            }
            settle(status);
        }
    }
    return true;
}

bool Request::wait(std::optional<double> timeout) {
    if (timeout && !(*timeout >= 0.0)) {
        raise_status(
            LOCKSTEP_ERROR_INVALID_ARGUMENT,
            "Request.wait: the timeout must be None or a number of seconds >= 0, got " + std::to_string(*timeout));
    }
    if (!poll(timeout ? Poll::WaitFor : Poll::Wait, timeout.value_or(0.0))) return false;
    raise_outcome();
    return true;
}

bool Request::test() {
    if (!poll(Poll::Test, 0.0)) return false;
    raise_outcome();
    return true;
}

bool Request::is_completed() {
    return poll(Poll::Test, 0.0);
}

py::object Request::result() {
    wait(std::nullopt);
    if (pending_.kind == RequestResult::Source) return py::int_(source_);
    return pending_.result;
}

py::object Request::source() {
    wait(std::nullopt);
    if (pending_.kind == RequestResult::Source) return py::int_(source_);
    return py::none();
}

std::string Request::repr() const {
    std::string text = "lockstep.Request(" + operation_;
    if (!site_.empty()) text += " issued at " + site_;
    if (!completed_) return text + ", pending)";
    if (!error_ && pending_.rejected) return text + ", failed: rejected on this rank)";
    if (!error_) return text + ", completed)";
    return text + ", failed: " + lockstep_status_string(error_->status) + ")";
}

py::object make_request(lockstep_request_t handle, lockstep_comm_t comm, const char* function, const CallSite& site,
                        Pending pending) {
    // The operation's name is the method's: "Communicator.allreduce" gives "allreduce".
    const char* dot = std::strrchr(function, '.');
    return py::cast(
        std::make_unique<Request>(handle, comm, dot != nullptr ? dot + 1 : function, site, std::move(pending)));
}

bool requests_request(py::handle async_op) noexcept {
    try {
        return to_bool(async_op, {"", ""});
    } catch (...) {
        return false;
    }
}

namespace {

// The text of a conversion's failure, for the other ranks' CallRejectedError.
std::string failure_text(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const StatusError& e) {
        return e.message;
    } catch (const std::exception& e) {  // py::error_already_set included
        return e.what();
    } catch (...) {
        return "an unknown error";
    }
}

}  // namespace

py::object reject_nonblocking(lockstep_comm_t comm, lockstep_collective_t kind, int32_t root,
                              std::exception_ptr error) {
    const std::string why = failure_text(error);
    CallOptions options;  // the caller's place, as the collective would have passed it
    ++g_calls_entered;
    lockstep_request_t request = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_ireject_call(comm, kind, root, LOCKSTEP_SUM, why.c_str(), options.get(), &request);
    }
    if (status != LOCKSTEP_OK) {
        lockstep_request_free(request);
        std::rethrow_exception(error);  // the library could not take the rejection: this rank's own error
    }
    Pending pending;
    pending.rejected = std::move(error);
    const char* name = lockstep_collective_name(kind);
    return make_request(request, comm, name != nullptr ? name : "collective", options.site(), std::move(pending));
}

void release_dropped_requests(lockstep_comm_t comm) {
    std::vector<DroppedRequest> released;  // destroyed after the list is consistent (releasing runs Python code)
    auto kept = g_dropped->begin();
    for (auto it = g_dropped->begin(); it != g_dropped->end(); ++it) {
        if (comm == nullptr || it->comm == comm) {
            lockstep_request_free(it->handle);
            released.push_back(std::move(*it));
        } else {
            if (kept != it) *kept = std::move(*it);
            ++kept;
        }
    }
    g_dropped->erase(kept, g_dropped->end());
}

void bind_request(py::module_& m) {
    g_request_warning = PyErr_NewExceptionWithDoc(
        "lockstep.RequestWarning",
        "A non-blocking operation's Request dropped before its completion was seen (no wait(), or no test() that "
        "returned True).",
        PyExc_RuntimeWarning, nullptr);
    if (g_request_warning == nullptr) throw py::error_already_set();
    m.attr("RequestWarning") = py::handle(g_request_warning);

    py::class_<Request>(m, "Request",
                        "A non-blocking operation (a call with async_op=True): wait(), test(), is_completed(), "
                        "result(), source. Errors of the operation are raised at wait/test, the same on every rank "
                        "for a collective; any thread may wait. The objects given to the call must be neither written "
                        "(inputs) nor read (outputs) before it completed.")
        .def(
            "wait",
            [](Request& r, py::object timeout) {
                return r.wait(to_optional_double(timeout, {"Request.wait", "timeout"}));
            },
            py::arg("timeout") = py::none(),
            "Blocks until the operation completed (the GIL released), or at most `timeout` seconds: True when it "
            "completed, False when the time ran out. Raises the operation's error, at every call.")
        .def("test", &Request::test,
             "True when the operation completed (raising its error, if any), False otherwise. With a progress thread "
             "it never blocks; without one it runs the communicator's queue up to this operation.")
        .def("is_completed", &Request::is_completed,
             "As test(), but the operation's error is left for wait() or result() to raise.")
        .def("result", &Request::result,
             "wait(), then what the blocking call returns (the in-place tensor, out, a new Tensor, None, or a "
             "receive's source).")
        .def_property_readonly("source", &Request::source,
                               "wait(), then the rank a receive got its message from; None for other operations.")
        .def("__repr__", &Request::repr);
}

}  // namespace lockstep_python
