#pragma once
// Names and formats to the C interface's enums: dtypes (lockstep's, numpy's and torch's names), devices ("cpu",
// "cuda:N"), reduce ops, and buffer-protocol formats both ways. The conversion of integers, flags and text is
// arguments.hpp.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

namespace lockstep_python {

namespace py = pybind11;

// "float32", a numpy dtype (its .name), a numpy scalar type (its __name__) or a torch dtype ("torch.float32").
lockstep_dtype_t parse_dtype(const py::handle& spec);
lockstep_device_t parse_device(const std::string& spec);
std::string device_name(lockstep_device_t device);
lockstep_reduce_op_t parse_op(py::handle name, const char* function);
// The buffer-protocol format of each dtype; bfloat16 has none.
const char* buffer_format(lockstep_dtype_t dtype);

// The dtype of a buffer's format (struct-module syntax, one native little-endian item) and item size.
inline std::optional<lockstep_dtype_t> dtype_of_format(const char* format, Py_ssize_t itemsize) {
    const char* f = format != nullptr ? format : "B";
    if (*f == '@' || *f == '=' || *f == '<') ++f;
    if (f[0] == 'Z' && f[1] != '\0' && f[2] == '\0') {  // complex: "Zf", "Zd"
        std::optional<lockstep_dtype_t> dtype;
        if (f[1] == 'f') dtype = LOCKSTEP_COMPLEX64;
        if (f[1] == 'd') dtype = LOCKSTEP_COMPLEX128;
        if (dtype && lockstep_dtype_size(*dtype) != static_cast<size_t>(itemsize)) return std::nullopt;
        return dtype;
    }
    if (f[0] == '\0' || f[1] != '\0') return std::nullopt;
    std::optional<lockstep_dtype_t> dtype;
    switch (*f) {
        case '?':
            dtype = LOCKSTEP_BOOL;
            break;
        case 'e':
            dtype = LOCKSTEP_FLOAT16;
            break;
        case 'f':
            dtype = LOCKSTEP_FLOAT32;
            break;
        case 'd':
            dtype = LOCKSTEP_FLOAT64;
            break;
        case 'b':
            dtype = LOCKSTEP_INT8;
            break;
        case 'B':
        case 'c':
            dtype = LOCKSTEP_UINT8;
            break;
        case 'h':
        case 'i':
        case 'l':
        case 'q':
        case 'n':
            if (itemsize == 2) dtype = LOCKSTEP_INT16;
            if (itemsize == 4) dtype = LOCKSTEP_INT32;
            if (itemsize == 8) dtype = LOCKSTEP_INT64;
            break;
        case 'H':
        case 'I':
        case 'L':
        case 'Q':
        case 'N':
            if (itemsize == 2) dtype = LOCKSTEP_UINT16;
            if (itemsize == 4) dtype = LOCKSTEP_UINT32;
            if (itemsize == 8) dtype = LOCKSTEP_UINT64;
            break;
        default:
            break;
    }
    if (dtype && lockstep_dtype_size(*dtype) != static_cast<size_t>(itemsize)) return std::nullopt;
    return dtype;
}

}  // namespace lockstep_python
