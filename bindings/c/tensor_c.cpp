// The C interface: tensor handles, and DLPack export and import (the 1.0 versioned structure and the legacy one).
//
// A handle is a reference count around a C++ Tensor. Memory from elsewhere (lockstep_tensor_wrap, DLPack import)
// becomes a Tensor over foreign storage (Tensor::from_blob), whose release callback runs the owner's deleter exactly
// once, after the last view is gone and outside every lock of lockstep. An export hands out a holder that keeps a
// reference to the tensor until the consumer calls the deleter.

#include "c_api_internal.hpp"

#include <lockstep/kernels.hpp>

#include <fmt/core.h>

#include <vector>

using namespace lockstep;
using namespace lockstep::c_api;

namespace lockstep::c_api {

std::string dead_tensor_text(const lockstep_tensor_s* handle, const char* entry, const char* argument) {
    if (handle == nullptr) return fmt::format("{}: {} is NULL", entry, argument);
    return fmt::format("{}: {} is not a live tensor handle (released already, or never made by lockstep)", entry,
                       argument);
}

lockstep::Tensor& tensor(lockstep_tensor_s* handle, const char* entry, const char* argument) {
    lockstep::Tensor* t = live_tensor(handle);
    if (t == nullptr) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, dead_tensor_text(handle, entry, argument));
    return *t;
}

lockstep_tensor_s* new_tensor_handle(lockstep::Tensor t) {
    NewTensorHandle h;
    h->tensor = std::move(t);
    return h.release();
}

DType dtype_of_code(lockstep_dtype_t code) {
    switch (code) {
        case LOCKSTEP_FLOAT32:
            return DType::Float32;
        case LOCKSTEP_FLOAT64:
            return DType::Float64;
        case LOCKSTEP_FLOAT16:
            return DType::Float16;
        case LOCKSTEP_BFLOAT16:
            return DType::BFloat16;
        case LOCKSTEP_INT8:
            return DType::Int8;
        case LOCKSTEP_UINT8:
            return DType::UInt8;
        case LOCKSTEP_INT32:
            return DType::Int32;
        case LOCKSTEP_INT64:
            return DType::Int64;
        case LOCKSTEP_BOOL:
            return DType::Bool;
        case LOCKSTEP_INT16:
            return DType::Int16;
        case LOCKSTEP_UINT16:
            return DType::UInt16;
        case LOCKSTEP_UINT32:
            return DType::UInt32;
        case LOCKSTEP_UINT64:
            return DType::UInt64;
        case LOCKSTEP_COMPLEX64:
            return DType::Complex64;
        case LOCKSTEP_COMPLEX128:
            return DType::Complex128;
        default:
            throw DTypeError(
                fmt::format("unknown lockstep_dtype_t {}; use one of LOCKSTEP_FLOAT32 ... LOCKSTEP_COMPLEX128", code));
    }
}

}  // namespace lockstep::c_api

namespace {

lockstep_dtype_t code_of_dtype(DType d) {
    switch (d) {
        case DType::Float32:
            return LOCKSTEP_FLOAT32;
        case DType::Float64:
            return LOCKSTEP_FLOAT64;
        case DType::Float16:
            return LOCKSTEP_FLOAT16;
        case DType::BFloat16:
            return LOCKSTEP_BFLOAT16;
        case DType::Int8:
            return LOCKSTEP_INT8;
        case DType::UInt8:
            return LOCKSTEP_UINT8;
        case DType::Int32:
            return LOCKSTEP_INT32;
        case DType::Int64:
            return LOCKSTEP_INT64;
        case DType::Bool:
            return LOCKSTEP_BOOL;
        case DType::Int16:
            return LOCKSTEP_INT16;
        case DType::UInt16:
            return LOCKSTEP_UINT16;
        case DType::UInt32:
            return LOCKSTEP_UINT32;
        case DType::UInt64:
            return LOCKSTEP_UINT64;
        case DType::Complex64:
            return LOCKSTEP_COMPLEX64;
        case DType::Complex128:
            return LOCKSTEP_COMPLEX128;
    }
    return LOCKSTEP_FLOAT32;
}

Device device_of(lockstep_device_t d) {
    if (d.type == LOCKSTEP_DEVICE_CPU) return Device::cpu();
    if (d.type == LOCKSTEP_DEVICE_CUDA) {
        if (d.index < 0) throw DeviceError(fmt::format("CUDA device index {} is negative", d.index));
        return Device::cuda(d.index);
    }
    throw DeviceError(
        fmt::format("unknown lockstep_device_type_t {}; use LOCKSTEP_DEVICE_CPU or LOCKSTEP_DEVICE_CUDA", d.type));
}

Shape shape_of(const int64_t* shape, int32_t ndim) {
    if (ndim < 0) throw InvalidArgumentError(fmt::format("ndim is {}; it must be >= 0", ndim));
    if (ndim > 0 && shape == nullptr) throw InvalidArgumentError(fmt::format("shape is NULL for ndim {}", ndim));
    return Shape(shape, shape + ndim);
}

// ---------------------------------------------------------------- DLPack

DLDataType dl_dtype(DType d) {
    DLDataType t{};
    t.lanes = 1;
    t.bits = static_cast<std::uint8_t>(dtype_size(d) * 8);
    switch (d) {
        case DType::Float32:
        case DType::Float64:
        case DType::Float16:
            t.code = kDLFloat;
            break;
        case DType::BFloat16:
            t.code = kDLBfloat;
            break;
        case DType::Int8:
        case DType::Int16:
        case DType::Int32:
        case DType::Int64:
            t.code = kDLInt;
            break;
        case DType::UInt8:
        case DType::UInt16:
        case DType::UInt32:
        case DType::UInt64:
            t.code = kDLUInt;
            break;
        case DType::Complex64:
        case DType::Complex128:
            t.code = kDLComplex;
            break;
        case DType::Bool:
            t.code = LOCKSTEP_DLPACK_BOOL;
            break;
    }
    return t;
}

DType dtype_of_dl(DLDataType t) {
    if (t.lanes != 1) {
        throw UnsupportedError(
            fmt::format("DLPack tensor with {} lanes: lockstep takes scalar elements only", t.lanes));
    }
    const auto bits = t.bits;
    switch (t.code) {
        case kDLFloat:
            if (bits == 32) return DType::Float32;
            if (bits == 64) return DType::Float64;
            if (bits == 16) return DType::Float16;
            break;
        case kDLBfloat:
            if (bits == 16) return DType::BFloat16;
            break;
        case kDLInt:
            if (bits == 8) return DType::Int8;
            if (bits == 16) return DType::Int16;
            if (bits == 32) return DType::Int32;
            if (bits == 64) return DType::Int64;
            break;
        case kDLUInt:
            if (bits == 8) return DType::UInt8;
            if (bits == 16) return DType::UInt16;
            if (bits == 32) return DType::UInt32;
            if (bits == 64) return DType::UInt64;
            break;
        case kDLComplex:
            if (bits == 64) return DType::Complex64;
            if (bits == 128) return DType::Complex128;
            break;
        case LOCKSTEP_DLPACK_BOOL:
            if (bits == 8) return DType::Bool;
            break;
        default:
            break;
    }
    throw UnsupportedError(fmt::format(
        "DLPack dtype (code {}, {} bits) has no lockstep dtype; lockstep takes float16/32/64, bfloat16, int8/16/32/64, "
        "uint8/16/32/64, complex64/128 and bool",
        static_cast<int>(t.code), static_cast<int>(bits)));
}

Device device_of_dl(DLDevice d) {
    switch (static_cast<int>(d.device_type)) {
        case kDLCPU:
        case kDLCUDAHost:  // page-locked host memory: the host reads and writes it like any other
            return Device::cpu();
        case kDLCUDA:
            return Device::cuda(d.device_id);
        default:
            throw UnsupportedError(fmt::format(
                "DLPack device type {} is not supported; lockstep takes CPU (1), CUDA (2) and CUDA host (3) memory",
                static_cast<int>(d.device_type)));
    }
}

// Row-major strides of a shape, in elements.
std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
    std::vector<std::int64_t> s(shape.size());
    std::int64_t step = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        s[i] = step;
        step *= shape[i];
    }
    return s;
}

bool is_contiguous(const Shape& shape, const std::int64_t* strides) {
    if (strides == nullptr) return true;
    for (const std::int64_t d : shape) {
        if (d == 0) return true;  // no elements: any strides describe them
    }
    const std::vector<std::int64_t> want = contiguous_strides(shape);
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] != 1 && strides[i] != want[i]) return false;
    }
    return true;
}

// A strided host array copied into a new contiguous tensor.
Tensor copy_strided(const char* base, const Shape& shape, const std::int64_t* strides, DType dtype) {
    Tensor out = Tensor::empty(shape, dtype, Device::cpu());
    const std::size_t item = dtype_size(dtype);
    auto* dst = static_cast<char*>(out.data());
    const std::int64_t n = out.numel();
    std::vector<std::int64_t> index(shape.size(), 0);
    for (std::int64_t k = 0; k < n; ++k) {
        std::int64_t offset = 0;
        for (std::size_t i = 0; i < shape.size(); ++i) offset += index[i] * strides[i];
        std::memcpy(dst + static_cast<std::size_t>(k) * item, base + offset * static_cast<std::int64_t>(item), item);
        for (std::size_t i = shape.size(); i-- > 0;) {
            if (++index[i] < shape[i]) break;
            index[i] = 0;
        }
    }
    return out;
}

// What an export hands out: the DLPack structure, the shape and strides it points to, and a reference to the tensor.
template <typename Managed>
struct ExportHolder {
    Managed managed{};
    Tensor tensor;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
};

template <typename Managed>
Managed* export_tensor(const Tensor& t) {
    auto holder = std::make_unique<ExportHolder<Managed>>();
    holder->tensor = t;
    holder->shape = t.shape();
    holder->strides = contiguous_strides(t.shape());
    DLTensor& dl = holder->managed.dl_tensor;
    dl.data = t.data();
    dl.device.device_type = t.device().is_cuda() ? kDLCUDA : kDLCPU;
    dl.device.device_id = t.device().is_cuda() ? t.device().index() : 0;
    dl.ndim = static_cast<int32_t>(t.dim());
    dl.dtype = dl_dtype(t.dtype());
    dl.shape = holder->shape.data();
    dl.strides = holder->strides.data();
    dl.byte_offset = 0;
    holder->managed.manager_ctx = holder.get();
    holder->managed.deleter = [](Managed* self) {
        if (self != nullptr) delete static_cast<ExportHolder<Managed>*>(self->manager_ctx);
    };
    return &holder.release()->managed;
}

// Imports a DLTensor; `release` gives it back to its owner. On success lockstep owns it (release runs when the last
// reference is gone, or at once after a copy); on failure nothing was taken.
Tensor import_tensor(const DLTensor& dl, bool read_only, std::uint64_t flags, const std::function<void()>& release) {
    check_flags(flags, LOCKSTEP_DLPACK_ALLOW_COPY, "lockstep_tensor_from_dlpack");
    const DType dtype = dtype_of_dl(dl.dtype);
    const Device device = device_of_dl(dl.device);
    const Shape shape = shape_of(dl.shape, dl.ndim);
    for (const std::int64_t d : shape) {
        if (d < 0) throw ShapeError(fmt::format("DLPack tensor with shape {}: negative dimension", shape_str(shape)));
    }
    char* base = static_cast<char*>(dl.data) + dl.byte_offset;
    if (!is_contiguous(shape, dl.strides)) {
        if ((flags & LOCKSTEP_DLPACK_ALLOW_COPY) == 0) {
            throw InvalidArgumentError(
                fmt::format("DLPack tensor {} {} is not contiguous (row-major); make it contiguous first or pass "
                            "LOCKSTEP_DLPACK_ALLOW_COPY (copy=True in Python)",
                            dtype_name(dtype), shape_str(shape)));
        }
        if (!device.is_cpu()) {
            throw UnsupportedError(
                fmt::format("copying a non-contiguous {} tensor is not supported; make it "
                            "contiguous on its device first",
                            device.str()));
        }
        Tensor copy = copy_strided(base, shape, dl.strides, dtype);
        if (release) release();  // the last step: nothing after it can fail
        return copy;
    }
    return Tensor::from_blob(base, shape, dtype, device, release, read_only);
}

}  // namespace

extern "C" {

lockstep_status_t lockstep_tensor_empty(const int64_t* shape, int32_t ndim, lockstep_dtype_t dtype,
                                        lockstep_device_t device, lockstep_tensor_t* out) {
    return guarded(nullptr, [&] {
        require_out(out, "out");
        *out = new_tensor_handle(Tensor::empty(shape_of(shape, ndim), dtype_of_code(dtype), device_of(device)));
    });
}

lockstep_status_t lockstep_tensor_wrap(void* data, const int64_t* shape, int32_t ndim, lockstep_dtype_t dtype,
                                       lockstep_device_t device, uint64_t flags, void (*deleter)(void* context),
                                       void* context, lockstep_tensor_t* out) {
    return guarded(nullptr, [&] {
        require_out(out, "out");
        check_flags(flags, LOCKSTEP_TENSOR_READ_ONLY, "lockstep_tensor_wrap");
        std::function<void()> release;
        if (deleter != nullptr) release = [deleter, context] { deleter(context); };
        // The handle first: once the memory is taken over nothing may fail, or the caller would free it a second time.
        NewTensorHandle handle;
        handle->tensor = Tensor::from_blob(data, shape_of(shape, ndim), dtype_of_code(dtype), device_of(device),
                                           std::move(release), (flags & LOCKSTEP_TENSOR_READ_ONLY) != 0);
        *out = handle.release();
    });
}

lockstep_status_t lockstep_tensor_retain(lockstep_tensor_t t) {
    return guarded(nullptr, [&] {
        (void)tensor(t, "lockstep_tensor_retain", "tensor");
        t->references.fetch_add(1, std::memory_order_relaxed);
    });
}

lockstep_status_t lockstep_tensor_release(lockstep_tensor_t t) {
    return guarded(nullptr, [&] {
        if (t == nullptr) return;
        (void)tensor(t, "lockstep_tensor_release", "tensor");
        if (t->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            // Out of the set first: from here on the handle is refused, and a second release is an error.
            live_handles_set().erase(t, HandleKind::Tensor);
            delete t;
        }
    });
}

lockstep_status_t lockstep_tensor_data(lockstep_tensor_t t, void** data) {
    return guarded(nullptr, [&] {
        require_out(data, "data");
        *data = tensor(t, "lockstep_tensor_data", "tensor").data();
    });
}
lockstep_status_t lockstep_tensor_ndim(lockstep_tensor_t t, int32_t* ndim) {
    return guarded(nullptr, [&] {
        require_out(ndim, "ndim");
        *ndim = static_cast<int32_t>(tensor(t, "lockstep_tensor_ndim", "tensor").dim());
    });
}
lockstep_status_t lockstep_tensor_shape(lockstep_tensor_t t, const int64_t** shape) {
    return guarded(nullptr, [&] {
        require_out(shape, "shape");
        *shape = tensor(t, "lockstep_tensor_shape", "tensor").shape().data();
    });
}
lockstep_status_t lockstep_tensor_numel(lockstep_tensor_t t, int64_t* numel) {
    return guarded(nullptr, [&] {
        require_out(numel, "numel");
        *numel = tensor(t, "lockstep_tensor_numel", "tensor").numel();
    });
}
lockstep_status_t lockstep_tensor_nbytes(lockstep_tensor_t t, size_t* nbytes) {
    return guarded(nullptr, [&] {
        require_out(nbytes, "nbytes");
        *nbytes = tensor(t, "lockstep_tensor_nbytes", "tensor").nbytes();
    });
}
lockstep_status_t lockstep_tensor_dtype(lockstep_tensor_t t, lockstep_dtype_t* dtype) {
    return guarded(nullptr, [&] {
        require_out(dtype, "dtype");
        *dtype = code_of_dtype(tensor(t, "lockstep_tensor_dtype", "tensor").dtype());
    });
}
lockstep_status_t lockstep_tensor_device(lockstep_tensor_t t, lockstep_device_t* device) {
    return guarded(nullptr, [&] {
        require_out(device, "device");
        const Device d = tensor(t, "lockstep_tensor_device", "tensor").device();
        device->type = d.is_cuda() ? LOCKSTEP_DEVICE_CUDA : LOCKSTEP_DEVICE_CPU;
        device->index = d.index();
    });
}
lockstep_status_t lockstep_tensor_is_read_only(lockstep_tensor_t t, int32_t* read_only) {
    return guarded(nullptr, [&] {
        require_out(read_only, "read_only");
        *read_only = tensor(t, "lockstep_tensor_is_read_only", "tensor").read_only() ? 1 : 0;
    });
}

lockstep_status_t lockstep_tensor_copy_to_host(lockstep_tensor_t t, void* host, size_t nbytes) {
    return guarded(nullptr, [&] {
        const Tensor& x = tensor(t, "lockstep_tensor_copy_to_host", "tensor");
        if (nbytes != x.nbytes()) {
            throw InvalidArgumentError(
                fmt::format("lockstep_tensor_copy_to_host: {} holds {} bytes, not {}", x.str(), x.nbytes(), nbytes));
        }
        if (host == nullptr && nbytes > 0) throw InvalidArgumentError("lockstep_tensor_copy_to_host: host is NULL");
        x.copy_to_host(host);
    });
}

lockstep_status_t lockstep_tensor_copy_from_host(lockstep_tensor_t t, const void* host, size_t nbytes) {
    return guarded(nullptr, [&] {
        Tensor& x = tensor(t, "lockstep_tensor_copy_from_host", "tensor");
        if (nbytes != x.nbytes()) {
            throw InvalidArgumentError(
                fmt::format("lockstep_tensor_copy_from_host: {} holds {} bytes, not {}", x.str(), x.nbytes(), nbytes));
        }
        if (host == nullptr && nbytes > 0) throw InvalidArgumentError("lockstep_tensor_copy_from_host: host is NULL");
        x.copy_from_host(host);
    });
}

size_t lockstep_dtype_size(lockstep_dtype_t dtype) {
    if (dtype < LOCKSTEP_FLOAT32 || dtype > LOCKSTEP_COMPLEX128) return 0;
    return dtype_size(dtype_of_code(dtype));
}

const char* lockstep_dtype_name(lockstep_dtype_t dtype) {
    if (dtype < LOCKSTEP_FLOAT32 || dtype > LOCKSTEP_COMPLEX128) return "unknown";
    return dtype_name(dtype_of_code(dtype)).data();  // the table's static, NUL-terminated names
}

// ---------------------------------------------------------------- DLPack

lockstep_status_t lockstep_tensor_to_dlpack(lockstep_tensor_t t, uint64_t flags, DLManagedTensor** out) {
    return guarded(nullptr, [&] {
        require_out(out, "out");
        check_flags(flags, LOCKSTEP_DLPACK_EXPORT_READ_ONLY_AS_WRITABLE, "lockstep_tensor_to_dlpack");
        const Tensor& x = tensor(t, "lockstep_tensor_to_dlpack", "tensor");
        if (x.read_only() && (flags & LOCKSTEP_DLPACK_EXPORT_READ_ONLY_AS_WRITABLE) == 0) {
            throw ReadOnlyError(
                fmt::format("{} is read-only, and the legacy DLPack structure cannot say so; export it with "
                            "lockstep_tensor_to_dlpack_versioned (max_version=(1, 0) in Python), or copy it first",
                            x.str()));
        }
        *out = export_tensor<DLManagedTensor>(x);
    });
}

lockstep_status_t lockstep_tensor_to_dlpack_versioned(lockstep_tensor_t t, uint64_t flags,
                                                      DLManagedTensorVersioned** out) {
    return guarded(nullptr, [&] {
        require_out(out, "out");
        check_flags(flags, LOCKSTEP_DLPACK_EXPORT_READ_ONLY_AS_WRITABLE, "lockstep_tensor_to_dlpack_versioned");
        const Tensor& x = tensor(t, "lockstep_tensor_to_dlpack_versioned", "tensor");
        DLManagedTensorVersioned* m = export_tensor<DLManagedTensorVersioned>(x);
        m->version.major = 1;
        m->version.minor = 0;
        m->flags = x.read_only() ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
        *out = m;
    });
}

lockstep_status_t lockstep_tensor_from_dlpack(DLManagedTensor* managed, uint64_t flags, lockstep_tensor_t* out) {
    return guarded(nullptr, [&] {
        require(managed, "the DLManagedTensor");
        require_out(out, "out");
        std::function<void()> release = [managed] {
            if (managed->deleter != nullptr) managed->deleter(managed);
        };
        NewTensorHandle handle;  // first: nothing may fail after the take-over
        handle->tensor = import_tensor(managed->dl_tensor, false, flags, release);
        *out = handle.release();
    });
}

lockstep_status_t lockstep_tensor_from_dlpack_versioned(DLManagedTensorVersioned* managed, uint64_t flags,
                                                        lockstep_tensor_t* out) {
    return guarded(nullptr, [&] {
        require(managed, "the DLManagedTensorVersioned");
        require_out(out, "out");
        if (managed->version.major != 1) {
            fail(LOCKSTEP_ERROR_VERSION, fmt::format("DLPack version {}.{}: lockstep reads major version 1",
                                                     managed->version.major, managed->version.minor));
        }
        std::function<void()> release = [managed] {
            if (managed->deleter != nullptr) managed->deleter(managed);
        };
        const bool read_only = (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
        NewTensorHandle handle;  // first: nothing may fail after the take-over
        handle->tensor = import_tensor(managed->dl_tensor, read_only, flags, release);
        *out = handle.release();
    });
}

}  // extern "C"
