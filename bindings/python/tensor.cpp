#include "tensor.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"
#include "conversion.hpp"
#include "dlpack.hpp"
#include "operand.hpp"
#include "runtime.hpp"

#include <memory>
#include <string>

namespace lockstep_python {

Tensor empty_tensor(const std::vector<int64_t>& shape, lockstep_dtype_t dtype, lockstep_device_t device) {
    ensure_init();
    lockstep_tensor_t handle = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_tensor_empty(shape.data(), static_cast<int32_t>(shape.size()), dtype, device, &handle);
    }
    check(status);
    return Tensor(handle);
}

// A new tensor on the same device holding the same bytes (staged through host memory, which works for every device).
Tensor copy_tensor(const Tensor& source, std::optional<lockstep_device_t> device) {
    Tensor copy = empty_tensor(source.shape(), source.dtype(), device.value_or(source.device()));
    std::vector<unsigned char> host(source.nbytes());
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_tensor_copy_to_host(source.handle(), host.data(), host.size());
        if (status == LOCKSTEP_OK) status = lockstep_tensor_copy_from_host(copy.handle(), host.data(), host.size());
    }
    check(status);
    return copy;
}

// A second reference to a tensor the caller holds, for its getters.
Tensor borrow(lockstep_tensor_t handle) {
    check(lockstep_tensor_retain(handle));
    return Tensor(handle);
}

namespace {

// What a buffer exported from a Tensor points at, freed by bf_releasebuffer.
struct ExportedShape {
    std::vector<Py_ssize_t> shape;
    std::vector<Py_ssize_t> strides;
};

extern "C" int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
    view->obj = nullptr;
    try {
        const Tensor& tensor = py::handle(self).cast<const Tensor&>();
        const lockstep_device_t device = tensor.device();
        if (device.type != LOCKSTEP_DEVICE_CPU) {
            PyErr_SetString(PyExc_BufferError, ("a lockstep tensor on " + device_name(device) +
                                                " has no buffer: copy it to the CPU or use DLPack")
                                                   .c_str());
            return -1;
        }
        const lockstep_dtype_t dtype = tensor.dtype();
        const char* format = buffer_format(dtype);
        if (format == nullptr) {
            PyErr_SetString(PyExc_BufferError, (std::string("lockstep.Tensor of dtype ") + lockstep_dtype_name(dtype) +
                                                " has no buffer format: use DLPack")
                                                   .c_str());
            return -1;
        }
        const bool read_only = tensor.read_only();
        if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && read_only) {
            PyErr_SetString(PyExc_BufferError, "a writable buffer was requested from a read-only lockstep.Tensor");
            return -1;
        }
        auto exported = std::make_unique<ExportedShape>();
        const Py_ssize_t itemsize = static_cast<Py_ssize_t>(lockstep_dtype_size(dtype));
        for (int64_t d : tensor.shape()) exported->shape.push_back(static_cast<Py_ssize_t>(d));
        exported->strides.resize(exported->shape.size());
        Py_ssize_t stride = itemsize;
        for (size_t i = exported->shape.size(); i-- > 0;) {
            exported->strides[i] = stride;
            stride *= exported->shape[i];
        }
        view->buf = tensor.data();
        view->len = static_cast<Py_ssize_t>(tensor.nbytes());
        view->itemsize = itemsize;
        view->readonly = read_only ? 1 : 0;
        view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? const_cast<char*>(format) : nullptr;
        if ((flags & PyBUF_ND) == PyBUF_ND) {
            view->ndim = static_cast<int>(exported->shape.size());
            view->shape = exported->shape.empty() ? nullptr : exported->shape.data();
        } else {
            view->ndim = 1;
            view->shape = nullptr;
        }
        view->strides =
            (flags & PyBUF_STRIDES) == PyBUF_STRIDES && !exported->strides.empty() ? exported->strides.data() : nullptr;
        view->suboffsets = nullptr;
        view->internal = exported.release();
        view->obj = self;
        Py_INCREF(self);
        return 0;
    } catch (const StatusError& error) {
        PyErr_SetString(PyExc_BufferError, error.message.c_str());
    } catch (py::error_already_set& error) {
        error.restore();
    } catch (const std::exception& error) {
        PyErr_SetString(PyExc_BufferError, error.what());
    }
    return -1;
}

extern "C" void tensor_releasebuffer(PyObject*, Py_buffer* view) {
    delete static_cast<ExportedShape*>(view->internal);
    view->internal = nullptr;
}

}  // namespace

void bind_tensor(py::module_& m) {
    py::class_<Tensor> tensor(
        m, "Tensor", py::buffer_protocol(),
        "A lockstep tensor: its own memory (lockstep.empty) or a view of the caller's (as_tensor, "
        "from_dlpack).");
    // pybind11's own getbuffer cannot refuse a buffer (bfloat16, CUDA) without an exception escaping into C: the type
    // gets these instead.
    auto* type = reinterpret_cast<PyTypeObject*>(tensor.ptr());
    type->tp_as_buffer->bf_getbuffer = tensor_getbuffer;
    type->tp_as_buffer->bf_releasebuffer = tensor_releasebuffer;
    PyType_Modified(type);
    tensor
        .def_property_readonly(
            "shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); },
            "The extent of each dimension, a tuple of ints (row-major, contiguous).")
        .def_property_readonly(
            "ndim", [](const Tensor& t) { return t.shape().size(); }, "The number of dimensions.")
        .def_property_readonly(
            "dtype", [](const Tensor& t) { return std::string(lockstep_dtype_name(t.dtype())); },
            "The element type's name: 'float32', 'int64', 'bfloat16', ...")
        .def_property_readonly(
            "device", [](const Tensor& t) { return device_name(t.device()); },
            "Where the memory is: 'cpu' or 'cuda:N'.")
        .def_property_readonly(
            "data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); },
            "The address of the first element, an int.")
        .def_property_readonly("numel", &Tensor::numel, "The number of elements.")
        .def_property_readonly("nbytes", &Tensor::nbytes, "The size of the elements in bytes.")
        .def_property_readonly("read_only", &Tensor::read_only,
                               "True for a view of read-only memory, which collectives refuse as a target.")
        .def_property_readonly("_handle", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.handle()); })
        .def("__dlpack__", &tensor_dlpack, py::kw_only(), py::arg("stream") = py::none(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
             "A DLPack capsule of the tensor, without a copy (the DLPack protocol: torch.from_dlpack(t), "
             "np.from_dlpack(t)). Raises UnsupportedError for a stream, device or copy it cannot honour.")
        .def("__dlpack_device__",
             [](const Tensor& t) {
                 const lockstep_device_t device = t.device();
                 return py::make_tuple(device.type == LOCKSTEP_DEVICE_CPU ? int(kDLCPU) : int(kDLCUDA), device.index);
             })
        .def(
            "numpy",
            [](py::object self) {
                // np.asarray would wrap an object it cannot read as a 0-d object array, silently.
                const Tensor& t = self.cast<const Tensor&>();
                if (t.device().type != LOCKSTEP_DEVICE_CPU) {
                    raise_status(LOCKSTEP_ERROR_DEVICE, "numpy(): the tensor is on " + device_name(t.device()) +
                                                            "; numpy reads host memory only (use "
                                                            "torch.from_dlpack, or a CPU tensor)");
                }
                if (t.dtype() == LOCKSTEP_BFLOAT16) {
                    raise_status(LOCKSTEP_ERROR_DTYPE,
                                 "numpy(): numpy has no bfloat16; use torch.from_dlpack(t), or a float32 tensor");
                }
                return py::module_::import("numpy").attr("asarray")(self);
            },
            "A numpy array over the tensor's memory, without a copy. Raises DeviceError for a tensor that is not on "
            "the CPU and DTypeError for bfloat16, which numpy lacks.")
        .def("__len__",
             [](const Tensor& t) {
                 std::vector<int64_t> shape = t.shape();
                 if (shape.empty()) throw py::type_error("len() of a 0-d lockstep.Tensor");
                 return shape[0];
             })
        .def("__repr__", [](const Tensor& t) {
            std::string text = "lockstep.Tensor(shape=(";
            std::vector<int64_t> shape = t.shape();
            for (size_t i = 0; i < shape.size(); ++i) {
                text += std::to_string(shape[i]);
                if (i + 1 < shape.size() || shape.size() == 1) text += shape.size() == 1 ? "," : ", ";
            }
            text += "), dtype=" + std::string(lockstep_dtype_name(t.dtype())) + ", device=" + device_name(t.device());
            if (t.read_only()) text += ", read_only=True";
            return text + ")";
        });

    m.def(
        "empty",
        [](py::object shape, py::object dtype, py::object device) {
            const std::vector<int64_t> dims = to_shape(shape, {"lockstep.empty", "shape"});
            const lockstep_dtype_t code = parse_dtype(dtype);
            return empty_tensor(dims, code, parse_device(to_string(device, {"lockstep.empty", "device"})));
        },
        py::arg("shape"), py::arg("dtype") = "float32", py::arg("device") = "cpu",
        "A new tensor of lockstep's allocator, uninitialised: `shape` an int or a sequence of ints, `dtype` a name "
        "('float32', 'int64', ...), `device` 'cpu' or 'cuda:N'. Raises DTypeError or DeviceError for a name lockstep "
        "does not know, OutOfMemoryError when the allocator cannot serve it.");
    m.def(
        "from_dlpack", [](py::object object, py::object copy) { return tensor_from_dlpack(object, copy); },
        py::arg("obj"), py::arg("copy") = py::none(),
        "A tensor over the memory of a DLPack producer (a torch tensor, a cupy or numpy array, a capsule), without a "
        "copy; copy=True asks for one. Raises DTypeError, DeviceError or UnsupportedError for what lockstep cannot "
        "hold (a dtype it lacks, a non-contiguous layout, another device type).");
    m.def("as_tensor", &as_tensor, py::arg("obj"),
          "A tensor over obj's memory, without a copy: a lockstep.Tensor is returned as it is, a buffer-protocol "
          "object (numpy array, bytearray, memoryview) is wrapped, a DLPack producer is imported. Raises TypeError "
          "for anything else, DTypeError for a format lockstep lacks, ShapeError for a non-contiguous buffer.");
    m.def("dtype_size", [](py::object dtype) { return lockstep_dtype_size(parse_dtype(dtype)); });
}

}  // namespace lockstep_python
