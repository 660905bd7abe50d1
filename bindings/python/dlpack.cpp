#include "dlpack.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"
#include "errors.hpp"
#include "runtime.hpp"

#include <optional>
#include <string>
#include <utility>

namespace lockstep_python {

namespace {

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kLegacyUsedName = "used_dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kVersionedUsedName = "used_dltensor_versioned";

// Capsule destructors: the deleter runs only when no consumer took the tensor (a consumer renames the capsule).
extern "C" void legacy_capsule_destructor(PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, kLegacyUsedName)) return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
    if (managed == nullptr) {
        PyErr_WriteUnraisable(capsule);
    } else if (managed->deleter != nullptr) {
        managed->deleter(managed);
    }
    PyErr_Restore(type, value, traceback);
}

extern "C" void versioned_capsule_destructor(PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, kVersionedUsedName)) return;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
    if (managed == nullptr) {
        PyErr_WriteUnraisable(capsule);
    } else if (managed->deleter != nullptr) {
        managed->deleter(managed);
    }
    PyErr_Restore(type, value, traceback);
}

// Consumes a DLPack capsule: on success lockstep owns the managed tensor and the capsule is renamed used_*; on failure
// the capsule is left as it was (its destructor then gives the tensor back to the producer).
Tensor import_capsule(const py::handle& capsule, uint64_t flags) {
    ensure_init();
    lockstep_tensor_t handle = nullptr;
    if (PyCapsule_IsValid(capsule.ptr(), kVersionedName)) {
        auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), kVersionedName));
        check(lockstep_tensor_from_dlpack_versioned(managed, flags, &handle));
        Tensor tensor(handle);
        if (PyCapsule_SetName(capsule.ptr(), kVersionedUsedName) != 0) throw py::error_already_set();
        return tensor;
    }
    if (PyCapsule_IsValid(capsule.ptr(), kLegacyName)) {
        auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kLegacyName));
        check(lockstep_tensor_from_dlpack(managed, flags, &handle));
        Tensor tensor(handle);
        if (PyCapsule_SetName(capsule.ptr(), kLegacyUsedName) != 0) throw py::error_already_set();
        return tensor;
    }
    if (PyCapsule_IsValid(capsule.ptr(), kVersionedUsedName) || PyCapsule_IsValid(capsule.ptr(), kLegacyUsedName)) {
        raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT, "this DLPack capsule was already consumed");
    }
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT, "not a DLPack capsule (\"dltensor\" or \"dltensor_versioned\")");
}

}  // namespace

// from_dlpack(obj, copy): a capsule, or an object with __dlpack__ (asked for the versioned form first; a producer that
// does not know max_version raises TypeError and is asked again for the legacy form).
Tensor tensor_from_dlpack(const py::handle& object, const py::object& copy) {
    const bool must_copy = to_optional_bool(copy, {"lockstep.from_dlpack", "copy"}).value_or(false);
    const bool may_copy = copy.is_none() || must_copy;
    const uint64_t flags = may_copy ? LOCKSTEP_DLPACK_ALLOW_COPY : 0;
    py::object capsule;
    if (PyCapsule_CheckExact(object.ptr())) {
        capsule = py::reinterpret_borrow<py::object>(object);
    } else if (py::hasattr(object, "__dlpack__")) {
        py::object method = object.attr("__dlpack__");
        try {
            capsule = method(py::arg("max_version") = py::make_tuple(1, 0));
        } catch (py::error_already_set& error) {
            if (!error.matches(PyExc_TypeError)) throw;
            capsule = method();
        }
    } else {
        throw py::type_error("lockstep.from_dlpack: " + py::repr(py::type::of(object)).cast<std::string>() +
                             " is neither a DLPack capsule nor has __dlpack__");
    }
    Tensor tensor = import_capsule(capsule, flags);
    if (must_copy) return copy_tensor(tensor);
    return tensor;
}

// __dlpack__(*, stream, max_version, dl_device, copy) of the current protocol.
py::object tensor_dlpack(const Tensor& tensor, const py::object& stream, const py::object& max_version,
                         const py::object& dl_device, const py::object& copy) {
    if (!stream.is_none() && !py::isinstance<py::int_>(stream)) {
        throw py::type_error("__dlpack__: stream must be None or an integer");
    }
    // The protocol's rule: a device without streams (the CPU) takes stream=None only.
    if (!stream.is_none() && tensor.device().type == LOCKSTEP_DEVICE_CPU) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__: a CPU tensor takes stream=None (CPU memory has no streams)");
        throw py::error_already_set();
    }
    // lockstep's collectives return with their results in memory, so there is no pending work to order on `stream`.
    // A (major, minor) pair of integers, as the protocol's max_version and dl_device are.
    const auto int_pair = [](const py::object& value, const char* what) {
        if (!py::isinstance<py::tuple>(value) && !py::isinstance<py::list>(value)) {
            throw py::type_error(std::string("__dlpack__: ") + what + " must be a tuple of two integers");
        }
        py::sequence pair = py::reinterpret_borrow<py::sequence>(value);
        // Integers are anything with __index__ (numpy's integer scalars too).
        const auto integer = [](const py::handle& item) { return PyIndex_Check(item.ptr()) != 0; };
        if (pair.size() != 2 || !integer(pair[0]) || !integer(pair[1])) {
            throw py::type_error(std::string("__dlpack__: ") + what + " must be a tuple of two integers");
        }
        const Argument where{"__dlpack__", what};
        return std::pair<int, int>{to_integer<int>(pair[0], where), to_integer<int>(pair[1], where)};
    };
    bool versioned = false;
    if (!max_version.is_none()) versioned = int_pair(max_version, "max_version (major, minor)").first >= 1;
    const std::optional<bool> copy_wanted = to_optional_bool(copy, {"__dlpack__", "copy"});
    const bool must_copy = copy_wanted.value_or(false);
    const bool no_copy = !copy_wanted.value_or(true);
    const lockstep_device_t own = tensor.device();
    std::optional<lockstep_device_t> target;
    if (!dl_device.is_none()) {
        const auto [type, index] = int_pair(dl_device, "dl_device (device type, index)");
        if (type == kDLCPU || type == kDLCUDAHost) {
            target = lockstep_device_t{LOCKSTEP_DEVICE_CPU, 0};
        } else if (type == kDLCUDA) {
            target = lockstep_device_t{LOCKSTEP_DEVICE_CUDA, index};
        } else {
            PyErr_SetString(PyExc_BufferError, "__dlpack__: lockstep cannot export to this dl_device");
            throw py::error_already_set();
        }
        if (target->type == own.type && target->index == own.index) target.reset();
    }
    if (target && no_copy) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__: another dl_device needs a copy, and copy=False refuses it");
        throw py::error_already_set();
    }
    std::optional<Tensor> copied;
    if (must_copy || target) copied.emplace(copy_tensor(tensor, target));
    const lockstep_tensor_t source = copied ? copied->handle() : tensor.handle();
    if (versioned) {
        DLManagedTensorVersioned* managed = nullptr;
        check(lockstep_tensor_to_dlpack_versioned(source, 0, &managed));
        if (copied) managed->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
        PyObject* capsule = PyCapsule_New(managed, kVersionedName, versioned_capsule_destructor);
        if (capsule == nullptr) {
            managed->deleter(managed);
            throw py::error_already_set();
        }
        return py::reinterpret_steal<py::object>(capsule);
    }
    DLManagedTensor* managed = nullptr;
    check(lockstep_tensor_to_dlpack(source, 0, &managed));
    PyObject* capsule = PyCapsule_New(managed, kLegacyName, legacy_capsule_destructor);
    if (capsule == nullptr) {
        managed->deleter(managed);
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace lockstep_python
