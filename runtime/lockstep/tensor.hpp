#pragma once
// Tensor: an n-dimensional array (any rank, including 0-d) with contiguous row-major storage on one device.
// It holds a reference-counted Storage, from its device's allocator or over foreign memory (from_blob); views
// (reshape/view/narrow_rows) share that storage. A tensor may be read-only: lockstep's writes into it (copy_from_host,
// the in-place kernels, the in-place collectives) throw ReadOnlyError, and its views are read-only too.

#include <lockstep/allocator.hpp>
#include <lockstep/device.hpp>
#include <lockstep/dtype.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/export.hpp>
#include <lockstep/generator.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace lockstep {

using Shape = std::vector<std::int64_t>;

[[nodiscard]] LOCKSTEP_API std::string shape_str(const Shape& shape);     // "[2, 3]", "[]" for 0-d
[[nodiscard]] LOCKSTEP_API std::int64_t shape_numel(const Shape& shape);  // throws ShapeError for a negative dimension

class LOCKSTEP_API Tensor {
public:
    Tensor() = default;  // an undefined tensor: defined() is false, every other use throws

    // ---- factories
    static Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
    static Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
    static Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
    static Tensor full(const Shape& shape, double value, DType dtype = DType::Float32, Device device = Device::cpu());
    // start, start+step, ... while < end (> end for a negative step); 1-d.
    static Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Float32,
                         Device device = Device::cpu());
    static Tensor arange(std::int64_t end, DType dtype = DType::Int64, Device device = Device::cpu()) {
        return arange(0.0, static_cast<double>(end), 1.0, dtype, device);
    }
    // Copies host data; values.size() must equal the shape's element count.
    template <typename T>
    static Tensor from_data(std::span<const T> values, const Shape& shape, Device device = Device::cpu()) {
        return from_bytes(values.data(), values.size(), dtype_of<T>, shape, device);
    }
    template <typename T>
    static Tensor from_data(std::initializer_list<T> values, const Shape& shape, Device device = Device::cpu()) {
        return from_bytes(values.begin(), values.size(), dtype_of<T>, shape, device);
    }
    template <typename T>
    static Tensor from_data(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu()) {
        return from_bytes(values.data(), values.size(), dtype_of<T>, shape, device);
    }
    // Wraps `numel(shape) * dtype_size(dtype)` bytes at `data` on `device` without copying, as a contiguous row-major
    // tensor. The memory stays the caller's: it must stay valid, and must not be freed, until `release` runs, which
    // happens exactly once, when the last tensor over it drops (see Storage::wrap); with no `release` it must outlive
    // every such tensor. With `read_only`, neither this tensor nor any view of it can be written by lockstep or made
    // writable (set_read_only). Throws ShapeError for a negative dimension, InvalidArgumentError for a null `data`
    // with elements or one not aligned to the dtype, DeviceError for a CUDA device this build or machine lacks; then
    // `release` is not called.
    static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device,
                            std::function<void()> release = {}, bool read_only = false);
    // Uniform in [low, high) and normal(mean, stddev), floating dtypes only, from `gen` (default_generator()).
    static Tensor uniform(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = DType::Float32,
                          Device device = Device::cpu(), Generator* gen = nullptr);
    static Tensor normal(const Shape& shape, double mean = 0.0, double stddev = 1.0, DType dtype = DType::Float32,
                         Device device = Device::cpu(), Generator* gen = nullptr);

    // ---- properties
    [[nodiscard]] bool defined() const noexcept { return storage_ != nullptr; }
    [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
    [[nodiscard]] std::int64_t dim() const noexcept { return static_cast<std::int64_t>(shape_.size()); }
    [[nodiscard]] std::int64_t size(std::int64_t d) const;  // negative d counts from the end
    [[nodiscard]] std::int64_t numel() const noexcept { return numel_; }
    [[nodiscard]] std::size_t nbytes() const noexcept { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
    [[nodiscard]] DType dtype() const noexcept { return dtype_; }
    [[nodiscard]] Device device() const noexcept { return device_; }
    [[nodiscard]] std::string str() const;  // "float32[2, 3] cpu", "float32[2, 3] cpu read-only"
    // Whether lockstep refuses to write into this tensor (check_writable). Views made from it inherit the bit;
    // clone() and a copy to another device are writable.
    [[nodiscard]] bool read_only() const noexcept { return read_only_; }
    // Marks this tensor (this handle, and the views made from it afterwards) read-only or writable again. Memory
    // wrapped read-only (from_blob) cannot be made writable: ReadOnlyError.
    Tensor& set_read_only(bool read_only);

    // ---- raw and typed data
    // First element (device memory for CUDA tensors). Inline, with the address kept in the tensor itself: every
    // collective reads it, and reading it should not touch the storage object's memory.
    [[nodiscard]] void* data() const {
        check_defined("data()");
        return data_;
    }
    template <typename T>
    [[nodiscard]] T* data() const {
        check_dtype(dtype_of<T>, "data<T>()");
        return static_cast<T*>(data());
    }
    // Element at a multi-index (CPU tensors; bounds and dtype checked). at<T>({}) reads a 0-d tensor.
    template <typename T>
    [[nodiscard]] T& at(std::initializer_list<std::int64_t> index) const {
        check_dtype(dtype_of<T>, "at<T>()");
        return static_cast<T*>(data())[offset_of(index)];
    }
    // The single element of a one-element tensor as T, converted from any dtype (copied to the host if needed).
    template <typename T>
    [[nodiscard]] T item() const {
        return from_double<T>(item_double());
    }
    // All elements as a host vector of T (dtype must match).
    template <typename T>
    [[nodiscard]] std::vector<T> to_vector() const {
        check_dtype(dtype_of<T>, "to_vector<T>()");
        std::vector<T> out(static_cast<std::size_t>(numel_));
        copy_to_host(out.data());
        return out;
    }

    // ---- copies and views
    // The same tensor (read-only if this one is) if already on `device`, else a copy.
    [[nodiscard]] Tensor to(Device device) const;
    [[nodiscard]] Tensor clone() const;  // a copy with its own storage on the same device
    // Same elements, new shape, shared storage. One dimension may be -1 (inferred).
    [[nodiscard]] Tensor reshape(const Shape& shape) const;
    // Like reshape, but the shape must be given in full (no -1).
    [[nodiscard]] Tensor view(const Shape& shape) const;
    // Rows [start, end) along dimension 0, sharing storage (contiguous because storage is row-major).
    [[nodiscard]] Tensor narrow_rows(std::int64_t start, std::int64_t end) const;
    [[nodiscard]] bool shares_storage_with(const Tensor& other) const noexcept {
        return storage_ != nullptr && storage_ == other.storage_;
    }
    [[nodiscard]] const std::shared_ptr<Storage>& storage() const noexcept { return storage_; }
    // Whether the elements lie in this node's shared-memory arena (shared_memory.hpp), where the other processes of
    // the node can read them: host tensors of at least the arena threshold while the arena is active.
    [[nodiscard]] bool in_shared_memory() const noexcept;
    // Where: the offset of the first element from the start of the node's arena object (the same place for every
    // process of the node, which maps it at an address of its own); nullopt when not in the arena.
    [[nodiscard]] std::optional<std::uint64_t> shared_memory_offset() const noexcept;

    // Copies every element into `out` (numel() * dtype_size bytes of host memory).
    void copy_to_host(void* out) const;
    // Overwrites every element from host memory of the same dtype; ReadOnlyError on a read-only tensor.
    void copy_from_host(const void* in);
    // Throws DTypeError naming both dtypes and `what` unless dtype() == expected.
    void check_dtype(DType expected, std::string_view what) const;
    void check_defined(std::string_view what) const {
        if (storage_ == nullptr) [[unlikely]]
            throw_undefined(what);
    }
    // Throws ReadOnlyError naming the tensor and `what` (the write refused) if the tensor is read-only. Inline: the
    // in-place kernels and collectives call it on every call. Raw access (data(), at<T>()) is not checked.
    void check_writable(std::string_view what) const {
        if (read_only_) [[unlikely]]
            throw_read_only(what);
    }

private:
    Tensor(std::shared_ptr<Storage> storage, std::size_t offset, Shape shape, DType dtype, Device device,
           bool read_only = false);
    static Tensor from_bytes(const void* values, std::size_t count, DType dtype, const Shape& shape, Device device);
    [[nodiscard]] std::int64_t offset_of(std::initializer_list<std::int64_t> index) const;
    [[nodiscard]] double item_double() const;
    [[noreturn]] static void throw_undefined(std::string_view what);
    [[noreturn]] void throw_read_only(std::string_view what) const;

    // The fields a collective reads on every call come first, so that they share one cache line.
    void* data_ = nullptr;  // storage_->data() + offset_
    std::int64_t numel_ = 0;
    DType dtype_ = DType::Float32;
    bool read_only_ = false;  // in the padding between dtype_ and device_: the hot fields stay where they were
    Device device_;
    std::shared_ptr<Storage> storage_;
    std::size_t offset_ = 0;  // bytes from the start of the storage
    Shape shape_;
};

LOCKSTEP_API std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Copies `bytes` between any two places (host or CUDA, in any direction). Used by Tensor::to and by kernels.
LOCKSTEP_API void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);

}  // namespace lockstep
