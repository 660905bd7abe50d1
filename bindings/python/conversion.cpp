#include "conversion.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"
#include "errors.hpp"

namespace lockstep_python {

namespace {

struct DTypeName {
    const char* name;
    lockstep_dtype_t dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"float32", LOCKSTEP_FLOAT32},   {"float64", LOCKSTEP_FLOAT64},     {"float16", LOCKSTEP_FLOAT16},
    {"bfloat16", LOCKSTEP_BFLOAT16}, {"int8", LOCKSTEP_INT8},           {"uint8", LOCKSTEP_UINT8},
    {"int16", LOCKSTEP_INT16},       {"uint16", LOCKSTEP_UINT16},       {"int32", LOCKSTEP_INT32},
    {"uint32", LOCKSTEP_UINT32},     {"int64", LOCKSTEP_INT64},         {"uint64", LOCKSTEP_UINT64},
    {"bool", LOCKSTEP_BOOL},         {"complex64", LOCKSTEP_COMPLEX64}, {"complex128", LOCKSTEP_COMPLEX128},
    {"float", LOCKSTEP_FLOAT32},     {"double", LOCKSTEP_FLOAT64},      {"half", LOCKSTEP_FLOAT16},
    {"int", LOCKSTEP_INT32},         {"long", LOCKSTEP_INT64},          {"bool_", LOCKSTEP_BOOL},
    {"short", LOCKSTEP_INT16},       {"cfloat", LOCKSTEP_COMPLEX64},    {"cdouble", LOCKSTEP_COMPLEX128},
};

}  // namespace

lockstep_dtype_t parse_dtype(const py::handle& spec) {
    std::string name;
    if (py::isinstance<py::str>(spec)) {
        name = spec.cast<std::string>();
    } else if (py::hasattr(spec, "name") && py::isinstance<py::str>(spec.attr("name"))) {
        name = spec.attr("name").cast<std::string>();
    } else if (py::hasattr(spec, "__name__") && py::isinstance<py::str>(spec.attr("__name__"))) {
        name = spec.attr("__name__").cast<std::string>();
    } else {
        name = py::str(spec).cast<std::string>();
    }
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    for (const auto& entry : kDTypeNames) {
        if (name == entry.name) return entry.dtype;
    }
    raise_status(LOCKSTEP_ERROR_DTYPE,
                 "lockstep has no dtype '" + name +
                     "' (float32, float64, float16, bfloat16, int8, uint8, int16, uint16, int32, uint32, "
                     "int64, uint64, bool, complex64, complex128)");
}

lockstep_device_t parse_device(const std::string& spec) {
    if (spec == "cpu") return {LOCKSTEP_DEVICE_CPU, 0};
    if (spec == "cuda") return {LOCKSTEP_DEVICE_CUDA, 0};
    if (spec.rfind("cuda:", 0) == 0 && spec.size() > 5) {
        try {
            size_t used = 0;
            int index = std::stoi(spec.substr(5), &used);
            if (used == spec.size() - 5 && index >= 0) return {LOCKSTEP_DEVICE_CUDA, index};
        } catch (const std::exception&) {
        }
    }
    raise_status(LOCKSTEP_ERROR_DEVICE, "lockstep has no device '" + spec + "' (cpu, cuda, cuda:N)");
}

std::string device_name(lockstep_device_t device) {
    if (device.type == LOCKSTEP_DEVICE_CPU) return "cpu";
    return "cuda:" + std::to_string(device.index);
}

lockstep_reduce_op_t parse_op(py::handle name, const char* function) {
    std::string op = to_string(name, {function, "op"});
    // Python's own spellings first; the names themselves are the C library's (one table, collectives/).
    if (op == "product") op = "prod";
    if (op == "avg") op = "mean";
    if (op == "bitwise_and") op = "band";
    if (op == "bitwise_or") op = "bor";
    if (op == "bitwise_xor") op = "bxor";
    std::string known;
    for (lockstep_reduce_op_t v = 0; const char* reduce_op = lockstep_reduce_op_name(v); ++v) {
        if (op == reduce_op) return v;
        known += std::string(known.empty() ? "" : ", ") + reduce_op;
    }
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 "unknown reduce op '" + op + "' (" + known + "; product, avg, bitwise_and, bitwise_or, bitwise_xor)");
}

const char* buffer_format(lockstep_dtype_t dtype) {
    switch (dtype) {
        case LOCKSTEP_FLOAT32:
            return "f";
        case LOCKSTEP_FLOAT64:
            return "d";
        case LOCKSTEP_FLOAT16:
            return "e";
        case LOCKSTEP_INT8:
            return "b";
        case LOCKSTEP_UINT8:
            return "B";
        case LOCKSTEP_INT32:
            return "i";
        case LOCKSTEP_INT64:
            return "q";
        case LOCKSTEP_INT16:
            return "h";
        case LOCKSTEP_UINT16:
            return "H";
        case LOCKSTEP_UINT32:
            return "I";
        case LOCKSTEP_UINT64:
            return "Q";
        case LOCKSTEP_COMPLEX64:
            return "Zf";
        case LOCKSTEP_COMPLEX128:
            return "Zd";
        case LOCKSTEP_BOOL:
            return "?";
        default:
            return nullptr;
    }
}

}  // namespace lockstep_python
