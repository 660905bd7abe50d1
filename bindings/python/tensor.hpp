#pragma once
// lockstep.Tensor: one reference to a lockstep tensor, its own memory (lockstep.empty) or a view of the caller's; read
// through the buffer protocol (host memory, dtypes with a buffer format) or DLPack (dlpack.hpp).
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include "errors.hpp"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace lockstep_python {

namespace py = pybind11;

// One reference to a lockstep tensor, released with the object.
class Tensor {
public:
    explicit Tensor(lockstep_tensor_t handle) : handle_(handle) {}
    Tensor(Tensor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Tensor& operator=(Tensor&& other) noexcept {
        std::swap(handle_, other.handle_);
        return *this;
    }
    Tensor(const Tensor&) = delete;
    Tensor& operator=(const Tensor&) = delete;
    ~Tensor() {
        if (handle_ != nullptr) lockstep_tensor_release(handle_);
    }

    lockstep_tensor_t handle() const { return handle_; }

    std::vector<int64_t> shape() const {
        int32_t ndim = 0;
        const int64_t* dims = nullptr;
        check(lockstep_tensor_ndim(handle_, &ndim));
        check(lockstep_tensor_shape(handle_, &dims));
        return std::vector<int64_t>(dims, dims + ndim);
    }
    lockstep_dtype_t dtype() const {
        lockstep_dtype_t dtype;
        check(lockstep_tensor_dtype(handle_, &dtype));
        return dtype;
    }
    lockstep_device_t device() const {
        lockstep_device_t device;
        check(lockstep_tensor_device(handle_, &device));
        return device;
    }
    void* data() const {
        void* data = nullptr;
        check(lockstep_tensor_data(handle_, &data));
        return data;
    }
    int64_t numel() const {
        int64_t numel = 0;
        check(lockstep_tensor_numel(handle_, &numel));
        return numel;
    }
    size_t nbytes() const {
        size_t nbytes = 0;
        check(lockstep_tensor_nbytes(handle_, &nbytes));
        return nbytes;
    }
    bool read_only() const {
        int32_t read_only = 0;
        check(lockstep_tensor_is_read_only(handle_, &read_only));
        return read_only != 0;
    }

private:
    lockstep_tensor_t handle_;
};

Tensor empty_tensor(const std::vector<int64_t>& shape, lockstep_dtype_t dtype, lockstep_device_t device);

// A new tensor on the same device holding the same bytes (staged through host memory, which works for every device).
Tensor copy_tensor(const Tensor& source, std::optional<lockstep_device_t> device = std::nullopt);

// A second reference to a tensor the caller holds, for its getters.
Tensor borrow(lockstep_tensor_t handle);

// The class Tensor (with its buffer slots), empty, from_dlpack, as_tensor and dtype_size.
void bind_tensor(py::module_& m);

}  // namespace lockstep_python
