#pragma once
// Failing statuses of the C interface on their way to Python: the exception class __init__.py registered for each code
// (_register_errors), with lockstep_last_error() as its message, read on the thread that made the call.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include <string>

namespace lockstep_python {

namespace py = pybind11;

// A failing status on its way to Python: the registered translator turns it into the class for `status`.
struct StatusError {
    lockstep_status_t status;
    std::string message;
};

[[noreturn]] void raise_status(lockstep_status_t status, std::string message);

// The text of the error this thread's last call left, or the code's name when the library left none.
std::string last_error_text(lockstep_status_t status);

inline void check(lockstep_status_t status) {
    if (status != LOCKSTEP_OK) raise_status(status, last_error_text(status));
}

// Sets the Python error for a failing status: the registered class for its code, else lockstep.Error.
void set_python_error(const StatusError& error);

// The exception translator, _register_errors, status_string, last_error* and STATUS_NAMES.
void bind_errors(py::module_& m);

}  // namespace lockstep_python
