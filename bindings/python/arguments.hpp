#pragma once
// The conversion of Python arguments to the C interface's types, for every function of _lockstep that takes integers,
// shapes, numbers, flags or text. A bad argument is a TypeError (wrong type) or an OverflowError (an integer outside
// the C type's range) whose message names the function and the argument, never pybind11's own cast error: the bound
// functions take py::object and convert with these.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace lockstep_python {

namespace py = pybind11;

// Where an argument goes, for messages: "Communicator.split" and "color".
struct Argument {
    const char* function;
    std::string name;
};

[[noreturn]] inline void raise_python(PyObject* type, const std::string& text) {
    PyErr_SetString(type, text.c_str());
    throw py::error_already_set();
}

inline std::string type_name(py::handle value) {
    return Py_TYPE(value.ptr())->tp_name;
}

[[noreturn]] inline void raise_type(py::handle value, const Argument& where, const char* expected) {
    raise_python(PyExc_TypeError, std::string(where.function) + ": " + where.name + " must be " + expected + ", not " +
                                      type_name(value));
}

// The integer's digits, or a stand-in where Python refuses to print it (more digits than sys.set_int_max_str_digits).
inline std::string integer_text(py::handle value) {
    PyObject* text = PyObject_Str(value.ptr());
    if (text == nullptr) {
        PyErr_Clear();
        return "that integer";
    }
    const char* utf8 = PyUnicode_AsUTF8(text);
    std::string out = utf8 != nullptr ? utf8 : "that integer";
    if (utf8 == nullptr) PyErr_Clear();
    Py_DECREF(text);
    return out;
}

// An integer (anything with __index__: int, bool, numpy's integers; not float) that fits T.
template <typename T>
T to_integer(py::handle value, const Argument& where) {
    static_assert(std::is_integral_v<T>);
    PyObject* object = value.ptr();
    if (PyFloat_Check(object) || PyIndex_Check(object) == 0) raise_type(value, where, "an integer");
    const py::object number = py::reinterpret_steal<py::object>(PyNumber_Index(object));
    if (!number) throw py::error_already_set();
    if constexpr (std::is_signed_v<T>) {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
        if (v == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
        if (overflow == 0 && v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max()) {
            return static_cast<T>(v);
        }
    } else {
        const unsigned long long v = PyLong_AsUnsignedLongLong(number.ptr());
        if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred() != nullptr) {
            PyErr_Clear();  // negative, or too large: the range error below
        } else if (v <= std::numeric_limits<T>::max()) {
            return static_cast<T>(v);
        }
    }
    raise_python(PyExc_OverflowError, std::string(where.function) + ": " + where.name + " " + integer_text(number) +
                                          " is out of range; it must be within " +
                                          std::to_string(std::numeric_limits<T>::min()) + ".." +
                                          std::to_string(std::numeric_limits<T>::max()));
}

// None, or to_integer.
template <typename T>
std::optional<T> to_optional_integer(py::handle value, const Argument& where) {
    if (value.is_none()) return std::nullopt;
    return to_integer<T>(value, where);
}

// A sequence of integers (a list, a tuple, numpy's shape; not text), each fitting T; with `single`, one integer too.
template <typename T>
std::vector<T> to_integers(py::handle value, const Argument& where, bool single) {
    PyObject* object = value.ptr();
    if (single && !PyFloat_Check(object) && PyIndex_Check(object) != 0) return {to_integer<T>(value, where)};
    if (PyUnicode_Check(object) || PyBytes_Check(object) || PyByteArray_Check(object) ||
        PySequence_Check(object) == 0) {
        raise_type(value, where, single ? "an integer or a sequence of integers" : "a sequence of integers");
    }
    const py::sequence items = py::reinterpret_borrow<py::sequence>(value);
    std::vector<T> out;
    const auto count = static_cast<std::size_t>(py::len(items));
    out.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        out.push_back(to_integer<T>(items[i], {where.function, where.name + "[" + std::to_string(i) + "]"}));
    }
    return out;
}

// A shape: one integer, or a sequence of them.
inline std::vector<int64_t> to_shape(py::handle value, const Argument& where) {
    return to_integers<int64_t>(value, where, true);
}

// True or False (also numpy's bool and the integers 0 and 1).
inline bool to_bool(py::handle value, const Argument& where) {
    PyObject* object = value.ptr();
    if (PyBool_Check(object)) return object == Py_True;
    const std::string type = type_name(value);
    if (type == "numpy.bool_" || type == "numpy.bool") {
        const int truth = PyObject_IsTrue(object);
        if (truth < 0) throw py::error_already_set();
        return truth != 0;
    }
    if (!PyFloat_Check(object) && PyIndex_Check(object) != 0) {
        const auto v = to_integer<int64_t>(value, where);
        if (v == 0 || v == 1) return v == 1;
    }
    raise_type(value, where, "a bool");
}

// None, or to_bool.
inline std::optional<bool> to_optional_bool(py::handle value, const Argument& where) {
    if (value.is_none()) return std::nullopt;
    return to_bool(value, where);
}

// A real number (float, int, numpy's numbers).
inline double to_double(py::handle value, const Argument& where) {
    PyObject* object = value.ptr();
    const PyNumberMethods* number = Py_TYPE(object)->tp_as_number;
    const bool real = PyFloat_Check(object) || PyLong_Check(object) || (number != nullptr && number->nb_float);
    if (!real || PyComplex_Check(object)) raise_type(value, where, "a number");
    const double v = PyFloat_AsDouble(object);
    if (v == -1.0 && PyErr_Occurred() != nullptr) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
        PyErr_Clear();
        raise_python(PyExc_OverflowError, std::string(where.function) + ": " + where.name + " " + integer_text(value) +
                                              " is out of range for a double");
    }
    return v;
}

// None, or to_double.
inline std::optional<double> to_optional_double(py::handle value, const Argument& where) {
    if (value.is_none()) return std::nullopt;
    return to_double(value, where);
}

// A str, as UTF-8.
inline std::string to_string(py::handle value, const Argument& where) {
    if (!PyUnicode_Check(value.ptr())) raise_type(value, where, "a str");
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
    if (utf8 == nullptr) throw py::error_already_set();
    return std::string(utf8, static_cast<std::size_t>(size));
}

// None, or to_string.
inline std::optional<std::string> to_optional_string(py::handle value, const Argument& where) {
    if (value.is_none()) return std::nullopt;
    return to_string(value, where);
}

// "end" or "raise" (any case), or None: LOCKSTEP_ON_TIMEOUT_END/RAISE, or -1 (from the configuration).
inline int32_t to_on_timeout(const py::object& value, const Argument& where) {
    const auto text = to_optional_string(value, where);
    if (!text) return -1;
    std::string lower = *text;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (lower == "end") return LOCKSTEP_ON_TIMEOUT_END;
    if (lower == "raise") return LOCKSTEP_ON_TIMEOUT_RAISE;
    raise_python(PyExc_ValueError, std::string(where.function) + ": " + where.name +
                                       " must be 'end' or 'raise' (or None: from the configuration), got " +
                                       py::repr(value).cast<std::string>());
}

}  // namespace lockstep_python
