#include "operand.hpp"

#include <pybind11/stl.h>

#include "conversion.hpp"
#include "dlpack.hpp"
#include "errors.hpp"
#include "runtime.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

namespace lockstep_python {

namespace {

// The Py_buffer a wrapped tensor borrows; released by the tensor's deleter, which may run on a thread without the GIL
// or after the interpreter is gone (then the reference is leaked: there is nobody left to give it back to).
struct BorrowedBuffer {
    Py_buffer view;
};

extern "C" void release_borrowed_buffer(void* context) {
    auto* borrowed = static_cast<BorrowedBuffer*>(context);
    if (!Py_IsInitialized()) return;
    if (PyGILState_Check()) {
        PyBuffer_Release(&borrowed->view);
        delete borrowed;
        return;
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing()) return;
#else
    if (_Py_IsFinalizing()) return;
#endif  // another thread holds the GIL to tear the interpreter down: do not wait for it
    PyGILState_STATE state = PyGILState_Ensure();
    PyBuffer_Release(&borrowed->view);
    delete borrowed;
    PyGILState_Release(state);
}

}  // namespace

// Wraps a buffer-protocol object without copying (read-only buffers give read-only tensors).
Tensor wrap_buffer(const py::handle& object) {
    ensure_init();
    auto borrowed = std::make_unique<BorrowedBuffer>();
    if (PyObject_GetBuffer(object.ptr(), &borrowed->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
        throw py::error_already_set();
    }
    Py_buffer& view = borrowed->view;
    std::optional<lockstep_dtype_t> dtype = dtype_of_format(view.format, view.itemsize);
    if (!dtype) {
        std::string format = view.format != nullptr ? view.format : "B";
        Py_ssize_t itemsize = view.itemsize;
        PyBuffer_Release(&view);
        raise_status(LOCKSTEP_ERROR_DTYPE, "lockstep has no dtype for buffer format '" + format + "' (item size " +
                                               std::to_string(itemsize) + ")");
    }
    static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "buffer shapes are passed to lockstep as they are");
    const auto* shape = reinterpret_cast<const int64_t*>(view.shape);
    const uint64_t flags = view.readonly ? LOCKSTEP_TENSOR_READ_ONLY : 0;
    lockstep_tensor_t handle = nullptr;
    lockstep_status_t status =
        lockstep_tensor_wrap(view.buf, shape, view.ndim, *dtype, lockstep_device_t{LOCKSTEP_DEVICE_CPU, 0}, flags,
                             &release_borrowed_buffer, borrowed.get(), &handle);
    if (status != LOCKSTEP_OK) {
        std::string text = last_error_text(status);
        PyBuffer_Release(&view);
        raise_status(status, text);
    }
    borrowed.release();  // the tensor's deleter owns it now
    return Tensor(handle);
}

namespace {

// Wrapping a buffer costs about as much as a small collective itself, and a training loop passes the same arrays
// again and again: each thread keeps the handles of the last few buffers it wrapped. A handle here owns nothing (no
// deleter) and is used only while a call holds a buffer of exactly that address, shape, dtype and writability, so a
// stale entry can never be reached; entries are compared, never dereferenced.
struct WrapCacheEntry {
    void* buf = nullptr;
    int ndim = -1;
    std::array<int64_t, 8> shape{};
    lockstep_dtype_t dtype = 0;
    bool read_only = false;
    lockstep_tensor_t handle = nullptr;
};
struct WrapCache {
    std::array<WrapCacheEntry, 4> entries;
    std::size_t next = 0;
    ~WrapCache() {
        for (WrapCacheEntry& e : entries) lockstep_tensor_release(e.handle);
    }
};
thread_local WrapCache g_wrap_cache;

}  // namespace

// The handle of a held buffer, from the cache or newly wrapped (without a deleter: the HeldBuffer keeps it alive).
lockstep_tensor_t cached_handle(const Py_buffer& view, lockstep_dtype_t dtype) {
    const bool read_only = view.readonly != 0;
    for (const WrapCacheEntry& e : g_wrap_cache.entries) {
        if (e.handle != nullptr && e.buf == view.buf && e.ndim == view.ndim && e.dtype == dtype &&
            e.read_only == read_only && std::equal(e.shape.begin(), e.shape.begin() + e.ndim, view.shape)) {
            return e.handle;
        }
    }
    lockstep_tensor_t handle = nullptr;
    const auto* shape = reinterpret_cast<const int64_t*>(view.shape);
    check(lockstep_tensor_wrap(view.buf, shape, view.ndim, dtype, lockstep_device_t{LOCKSTEP_DEVICE_CPU, 0},
                               read_only ? LOCKSTEP_TENSOR_READ_ONLY : 0, nullptr, nullptr, &handle));
    WrapCacheEntry& slot = g_wrap_cache.entries[g_wrap_cache.next];
    g_wrap_cache.next = (g_wrap_cache.next + 1) % g_wrap_cache.entries.size();
    lockstep_tensor_release(slot.handle);
    slot = WrapCacheEntry{view.buf, view.ndim, {}, dtype, read_only, handle};
    std::copy(shape, shape + view.ndim, slot.shape.begin());
    return handle;
}

Operand to_operand(const py::handle& object, bool may_copy) {
    Operand operand;
    if (object.is_none()) return operand;
    if (py::isinstance<Tensor>(object)) {
        operand.handle = object.cast<Tensor&>().handle();
        return operand;
    }
    if (PyObject_CheckBuffer(object.ptr())) {
        Py_buffer view;
        if (PyObject_GetBuffer(object.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
            auto guard = std::make_unique<HeldBuffer>();
            guard->view = view;  // released by the guard from here on
            const std::optional<lockstep_dtype_t> dtype = dtype_of_format(guard->view.format, guard->view.itemsize);
            if (dtype && guard->view.ndim <= 8) {
                ensure_init();
                operand.handle = cached_handle(guard->view, *dtype);
                check(lockstep_tensor_retain(operand.handle));
                guard->handle = operand.handle;
                operand.held = std::move(guard);
                return operand;
            }
        } else {
            PyErr_Clear();  // wrap_buffer below asks again and raises the buffer's own error
        }
        operand.owned.emplace(wrap_buffer(object));
    } else {
        operand.owned.emplace(
            tensor_from_dlpack(object, may_copy ? py::object(py::none()) : py::object(py::bool_(false))));
    }
    operand.handle = operand.owned->handle();
    return operand;
}

py::object as_tensor(const py::object& object) {
    if (py::isinstance<Tensor>(object)) return object;
    if (PyObject_CheckBuffer(object.ptr())) return py::cast(wrap_buffer(object));
    return py::cast(tensor_from_dlpack(object, py::none()));
}

}  // namespace lockstep_python
