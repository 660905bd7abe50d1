#include "errors.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"

#include <exception>
#include <string>
#include <utility>

namespace lockstep_python {

namespace {

// {status: class} and the base class lockstep.Error, from __init__.py. Strong references kept for the life of the
// process: a static py::object would be destroyed after the interpreter.
PyObject* g_error_classes = nullptr;
PyObject* g_error_base = nullptr;

}  // namespace

[[noreturn]] void raise_status(lockstep_status_t status, std::string message) {
    throw StatusError{status, std::move(message)};
}

// The text of the error this thread's last call left, or the code's name when the library left none.
std::string last_error_text(lockstep_status_t status) {
    const char* text = lockstep_last_error();
    if (text != nullptr && text[0] != '\0') return text;
    return lockstep_status_string(status);
}

void set_python_error(const StatusError& error) {
    PyObject* cls = nullptr;
    if (g_error_classes != nullptr) {
        py::int_ key(error.status);
        cls = PyDict_GetItemWithError(g_error_classes, key.ptr());  // borrowed
        if (cls == nullptr && PyErr_Occurred()) PyErr_Clear();
    }
    if (cls == nullptr) cls = g_error_base != nullptr ? g_error_base : PyExc_RuntimeError;
    PyObject* message =
        PyUnicode_DecodeUTF8(error.message.data(), static_cast<Py_ssize_t>(error.message.size()), "replace");
    if (message == nullptr) return;
    PyObject* instance = PyObject_CallOneArg(cls, message);
    Py_DECREF(message);
    if (instance == nullptr) return;  // the constructor's own exception stands
    // The class carries .status; the instance gets it too, so that a code without a class of its own keeps its number.
    PyObject* status = PyLong_FromLong(error.status);
    if (status == nullptr || PyObject_SetAttrString(instance, "status", status) != 0) PyErr_Clear();
    Py_XDECREF(status);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance)), instance);
    Py_DECREF(instance);
}

void bind_errors(py::module_& m) {
    py::register_exception_translator([](std::exception_ptr pointer) {
        try {
            if (pointer) std::rethrow_exception(pointer);
        } catch (const StatusError& error) {
            set_python_error(error);
        }
    });

    m.def(
        "_register_errors",
        [](py::object base, py::dict classes) {
            Py_XDECREF(g_error_base);
            Py_XDECREF(g_error_classes);
            g_error_base = base.release().ptr();
            g_error_classes = classes.release().ptr();
        },
        "Sets lockstep.Error and the {status: class} map the binding raises.");
    m.def("status_string", [](py::object status) {
        return std::string(lockstep_status_string(to_integer<lockstep_status_t>(status, {"status_string", "status"})));
    });
    m.def("last_error", []() { return std::string(lockstep_last_error()); });
    m.def("last_error_status", &lockstep_last_error_status);
    m.def("clear_last_error", &lockstep_clear_last_error);

    // Every status code the C library names, {code: "LOCKSTEP_ERROR_..."}: from 0 up to the first code it does not
    // know (codes are only ever appended). The package builds its exception classes on it.
    py::dict codes;
    for (lockstep_status_t code = LOCKSTEP_OK;; ++code) {
        const std::string name = lockstep_status_string(code);
        if (name == "LOCKSTEP_ERROR_UNKNOWN") break;
        codes[py::int_(code)] = py::str(name);
    }
    m.attr("STATUS_NAMES") = codes;
}

}  // namespace lockstep_python
