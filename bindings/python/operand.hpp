#pragma once
// Python objects as the tensors of one call, never copied on the way in: a Tensor as it is; a buffer-protocol object
// (numpy array, bytearray, memoryview) wrapped, its Py_buffer held for the call or released by the tensor's deleter,
// with a per-thread cache of the handles of recently wrapped buffers; anything else through DLPack.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include "tensor.hpp"

#include <memory>
#include <optional>

namespace lockstep_python {

namespace py = pybind11;

// Wraps a buffer-protocol object without copying (read-only buffers give read-only tensors).
Tensor wrap_buffer(const py::handle& object);

// A Tensor object as is; a buffer-protocol object wrapped; anything else through DLPack. `may_copy` is false for the
// operands of collectives: they work in place, so a copy would silently lose the result.
// A buffer held for the duration of one collective: the memory a cached handle (below) describes stays exported, and
// so alive and in place, until the call is over. Released with the GIL held (operands are locals of the binding).
// It also holds its own reference to the cached handle: a later operand of the same call may evict that handle from
// the cache (and release the cache's reference) while this one still uses it.
struct HeldBuffer {
    Py_buffer view;
    lockstep_tensor_t handle = nullptr;
    HeldBuffer() = default;
    HeldBuffer(const HeldBuffer&) = delete;
    HeldBuffer& operator=(const HeldBuffer&) = delete;
    ~HeldBuffer() {
        lockstep_tensor_release(handle);
        PyBuffer_Release(&view);
    }
};

// Wrapping a buffer costs about as much as a small collective itself, and a training loop passes the same arrays
// again and again: each thread keeps the handles of the last few buffers it wrapped. A handle here owns nothing (no
// deleter) and is used only while a call holds a buffer of exactly that address, shape, dtype and writability, so a

// The handle of a held buffer, from the cache or newly wrapped (without a deleter: the HeldBuffer keeps it alive).
lockstep_tensor_t cached_handle(const Py_buffer& view, lockstep_dtype_t dtype);

struct Operand {
    lockstep_tensor_t handle = nullptr;
    std::optional<Tensor> owned;
    std::unique_ptr<HeldBuffer> held;
};

Operand to_operand(const py::handle& object, bool may_copy);

py::object as_tensor(const py::object& object);

}  // namespace lockstep_python
