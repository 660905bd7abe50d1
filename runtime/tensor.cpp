#include <lockstep/internal/arena.hpp>
#include <lockstep/shared_memory.hpp>
#include <lockstep/tensor.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>

namespace lockstep {

std::string shape_str(const Shape& shape) {
    return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::int64_t shape_numel(const Shape& shape) {
    std::int64_t n = 1;
    for (auto d : shape) {
        if (d < 0) throw ShapeError(fmt::format("invalid shape {}: dimensions must be >= 0", shape_str(shape)));
        if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) {
            throw ShapeError(fmt::format("invalid shape {}: element count overflows int64", shape_str(shape)));
        }
        n *= d;
    }
    return n;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, std::size_t offset, Shape shape, DType dtype, Device device,
               bool read_only)
    : data_(storage != nullptr ? static_cast<char*>(storage->data()) + offset : nullptr),
      numel_(shape_numel(shape)),
      dtype_(dtype),
      read_only_(read_only),
      device_(device),
      storage_(std::move(storage)),
      offset_(offset),
      shape_(std::move(shape)) {}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
    const std::int64_t n = shape_numel(shape);
    if (static_cast<std::uint64_t>(n) > std::numeric_limits<std::size_t>::max() / dtype_size(dtype)) {
        throw ShapeError(
            fmt::format("empty: shape {} of {} holds more bytes than memory can", shape_str(shape), dtype_name(dtype)));
    }
    const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dtype);
    Allocator& allocator = allocator_for(device);
    std::shared_ptr<Storage> storage;
    try {
        storage = std::make_shared<Storage>(allocator, bytes);
    } catch (const std::bad_alloc&) {  // the control block itself: same condition, same type
        throw OutOfMemoryError(device, bytes, allocator.stats(), "the system refused a small bookkeeping allocation");
    }
    return Tensor(std::move(storage), 0, shape, dtype, device);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device, std::function<void()> release,
                         bool read_only) {
    const std::int64_t n = shape_numel(shape);
    const std::size_t element = dtype_size(dtype);
    if (static_cast<std::uint64_t>(n) > std::numeric_limits<std::size_t>::max() / element) {
        throw ShapeError(fmt::format("from_blob: shape {} of {} holds more bytes than memory can", shape_str(shape),
                                     dtype_name(dtype)));
    }
    if (data == nullptr && n > 0) {
        throw InvalidArgumentError(
            fmt::format("from_blob: null data for {}{} ({} elements); pass the address of the "
                        "first element, or a shape with no elements",
                        dtype_name(dtype), shape_str(shape), n));
    }
    // The kernels read elements as their C++ type, which a misaligned address makes undefined behaviour.
    if (reinterpret_cast<std::uintptr_t>(data) % element != 0) {
        throw InvalidArgumentError(
            fmt::format("from_blob: data at {} is not aligned to the {} bytes of a {} element; "
                        "copy it into an aligned buffer (Tensor::from_data) first",
                        data, element, dtype_name(dtype)));
    }
    if (device.is_cuda()) (void)allocator_for(device);  // throws the DeviceError that explains the build or machine
    auto storage = Storage::wrap(data, static_cast<std::size_t>(n) * element, device, std::move(release), read_only);
    return Tensor(std::move(storage), 0, shape, dtype, device, read_only);
}

namespace {
// Fills host memory with `count` copies of value converted to the dtype.
void fill_host(void* dst, DType dtype, std::int64_t count, double value) {
    visit_dtype(dtype, [&](auto zero) {
        using T = decltype(zero);
        auto* p = static_cast<T*>(dst);
        const T v = from_double<T>(value);
        for (std::int64_t i = 0; i < count; ++i) p[i] = v;
    });
}

// Builds the values on the host, then places them on `device` (CUDA tensors are uploaded in one copy).
template <typename Fill>
Tensor make_on_host_then_move(const Shape& shape, DType dtype, Device device, Fill&& fill) {
    Tensor host = Tensor::empty(shape, dtype, Device::cpu());
    fill(host.data());
    return device.is_cpu() ? host : host.to(device);
}
}  // namespace

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
    return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
    return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
    const std::int64_t n = shape_numel(shape);
    return make_on_host_then_move(shape, dtype, device, [&](void* p) { fill_host(p, dtype, n, value); });
}

Tensor Tensor::arange(double start, double end, double step, DType dtype, Device device) {
    if (step == 0.0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
        throw InvalidArgumentError(
            fmt::format("arange({}, {}, {}): start, end and step must be finite and step non-zero", start, end, step));
    }
    const double span = (end - start) / step;
    const auto n = static_cast<std::int64_t>(span > 0 ? std::ceil(span) : 0);
    return make_on_host_then_move({n}, dtype, device, [&](void* p) {
        visit_dtype(dtype, [&](auto zero) {
            using T = decltype(zero);
            auto* out = static_cast<T*>(p);
            for (std::int64_t i = 0; i < n; ++i) out[i] = from_double<T>(start + static_cast<double>(i) * step);
        });
    });
}

Tensor Tensor::from_bytes(const void* values, std::size_t count, DType dtype, const Shape& shape, Device device) {
    const std::int64_t n = shape_numel(shape);
    if (static_cast<std::int64_t>(count) != n) {
        throw ShapeError(
            fmt::format("from_data: {} values given for shape {} which holds {} elements", count, shape_str(shape), n));
    }
    return make_on_host_then_move(shape, dtype, device, [&](void* p) {
        // An empty vector's data() may be null, which memcpy may not be given.
        if (count > 0) std::memcpy(p, values, count * dtype_size(dtype));
    });
}

namespace {
template <typename Draw>
Tensor random_tensor(const char* what, const Shape& shape, DType dtype, Device device, Draw&& draw) {
    if (!is_floating(dtype)) {
        throw DTypeError(fmt::format("{}: dtype {} is not floating; use float32, float64, float16 or bfloat16", what,
                                     dtype_name(dtype)));
    }
    const std::int64_t n = shape_numel(shape);
    return make_on_host_then_move(shape, dtype, device, [&](void* p) {
        visit_dtype(dtype, [&](auto zero) {
            using T = decltype(zero);
            auto* out = static_cast<T*>(p);
            for (std::int64_t i = 0; i < n; ++i) out[i] = from_double<T>(draw());
        });
    });
}
}  // namespace

Tensor Tensor::uniform(const Shape& shape, double low, double high, DType dtype, Device device, Generator* gen) {
    if (!(low < high)) throw InvalidArgumentError(fmt::format("uniform: low ({}) must be below high ({})", low, high));
    Generator& g = gen != nullptr ? *gen : default_generator();
    return random_tensor("uniform", shape, dtype, device, [&] { return low + (high - low) * g.next_uniform(); });
}

Tensor Tensor::normal(const Shape& shape, double mean, double stddev, DType dtype, Device device, Generator* gen) {
    if (!(stddev >= 0)) throw InvalidArgumentError(fmt::format("normal: stddev ({}) must be >= 0", stddev));
    Generator& g = gen != nullptr ? *gen : default_generator();
    return random_tensor("normal", shape, dtype, device, [&] { return mean + stddev * g.next_normal(); });
}

std::int64_t Tensor::size(std::int64_t d) const {
    check_defined("size()");
    const std::int64_t rank = dim();
    const std::int64_t i = d < 0 ? d + rank : d;
    if (i < 0 || i >= rank) {
        throw InvalidArgumentError(fmt::format("dimension {} is out of range for {} (rank {})", d, str(), rank));
    }
    return shape_[static_cast<std::size_t>(i)];
}

std::string Tensor::str() const {
    if (!defined()) return "undefined tensor";
    return fmt::format("{}{} {}{}", dtype_name(dtype_), shape_str(shape_), device_.str(),
                       read_only_ ? " read-only" : "");
}

Tensor& Tensor::set_read_only(bool read_only) {
    check_defined("set_read_only()");
    if (!read_only && storage_->read_only()) {
        throw ReadOnlyError(
            fmt::format("set_read_only(false): {} lies in memory that was wrapped read-only "
                        "(from_blob with read_only); write into a copy made with clone() instead",
                        str()));
    }
    read_only_ = read_only;
    return *this;
}

void Tensor::throw_read_only(std::string_view what) const {
    throw ReadOnlyError(
        fmt::format("{}: {} is read-only and cannot be written; pass a writable tensor, or a copy of "
                    "this one made with clone()",
                    what, str()));
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    return os << t.str();
}

void Tensor::throw_undefined(std::string_view what) {
    throw InvalidArgumentError(fmt::format("{} called on an undefined tensor", what));
}

void Tensor::check_dtype(DType expected, std::string_view what) const {
    check_defined(what);
    if (dtype_ != expected) {
        throw DTypeError(fmt::format("{}: tensor {} has dtype {}, but {} was requested", what, str(),
                                     dtype_name(dtype_), dtype_name(expected)));
    }
}

std::int64_t Tensor::offset_of(std::initializer_list<std::int64_t> index) const {
    check_defined("at()");
    if (!device_.is_cpu()) {
        throw DeviceError(fmt::format("at(): {} is not on the cpu; copy it with .to(Device::cpu()) first", str()));
    }
    if (static_cast<std::int64_t>(index.size()) != dim()) {
        throw ShapeError(
            fmt::format("at(): {} indices given for {} of shape {}", index.size(), str(), shape_str(shape_)));
    }
    std::int64_t offset = 0;
    std::size_t d = 0;
    for (auto i : index) {
        if (i < 0 || i >= shape_[d]) {
            throw InvalidArgumentError(
                fmt::format("at(): index {} is out of range for dimension {} of shape {}", i, d, shape_str(shape_)));
        }
        offset = offset * shape_[d] + i;
        ++d;
    }
    return offset;
}

double Tensor::item_double() const {
    check_defined("item()");
    if (numel_ != 1) {
        throw ShapeError(
            fmt::format("item(): {} has {} elements; only a one-element tensor converts to a scalar", str(), numel_));
    }
    alignas(8) unsigned char buffer[8] = {};
    copy_to_host(buffer);
    return visit_dtype(dtype_, [&](auto zero) {
        using T = decltype(zero);
        T v;
        std::memcpy(&v, buffer, sizeof(T));
        return to_double(v);
    });
}

void Tensor::copy_to_host(void* out) const {
    check_defined("copy_to_host()");
    copy_bytes(out, Device::cpu(), data(), device_, nbytes());
}

void Tensor::copy_from_host(const void* in) {
    check_defined("copy_from_host()");
    check_writable("copy_from_host()");
    copy_bytes(data(), device_, in, Device::cpu(), nbytes());
}

Tensor Tensor::to(Device device) const {
    check_defined("to()");
    if (device == device_) return *this;
    Tensor out = empty(shape_, dtype_, device);
    copy_bytes(out.data(), device, data(), device_, nbytes());
    return out;
}

Tensor Tensor::clone() const {
    check_defined("clone()");
    Tensor out = empty(shape_, dtype_, device_);
    copy_bytes(out.data(), device_, data(), device_, nbytes());
    return out;
}

Tensor Tensor::reshape(const Shape& shape) const {
    check_defined("reshape()");
    Shape resolved = shape;
    std::int64_t known = 1;
    int inferred = -1;
    for (std::size_t i = 0; i < resolved.size(); ++i) {
        if (resolved[i] == -1) {
            if (inferred >= 0) {
                throw ShapeError(
                    fmt::format("reshape {} to {}: only one dimension may be -1", shape_str(shape_), shape_str(shape)));
            }
            inferred = static_cast<int>(i);
        } else if (resolved[i] < 0) {
            throw ShapeError(fmt::format("reshape {} to {}: invalid dimension {}", shape_str(shape_), shape_str(shape),
                                         resolved[i]));
        } else {
            known *= resolved[i];
        }
    }
    if (inferred >= 0) {
        if (known == 0 || numel_ % known != 0) {
            throw ShapeError(fmt::format("reshape {} ({} elements) to {}: -1 cannot be inferred", shape_str(shape_),
                                         numel_, shape_str(shape)));
        }
        resolved[static_cast<std::size_t>(inferred)] = numel_ / known;
    }
    if (shape_numel(resolved) != numel_) {
        throw ShapeError(fmt::format("reshape {} ({} elements) to {} ({} elements): element counts differ",
                                     shape_str(shape_), numel_, shape_str(resolved), shape_numel(resolved)));
    }
    return Tensor(storage_, offset_, std::move(resolved), dtype_, device_, read_only_);
}

Tensor Tensor::view(const Shape& shape) const {
    for (auto d : shape) {
        if (d < 0) {
            throw ShapeError(fmt::format("view {} as {}: every dimension must be given (use reshape for -1)",
                                         shape_str(shape_), shape_str(shape)));
        }
    }
    return reshape(shape);
}

Tensor Tensor::narrow_rows(std::int64_t start, std::int64_t end) const {
    check_defined("narrow_rows()");
    if (dim() == 0) throw ShapeError(fmt::format("narrow_rows() needs at least one dimension; got {}", str()));
    if (start < 0 || end < start || end > shape_[0]) {
        throw InvalidArgumentError(
            fmt::format("narrow_rows({}, {}) is out of range for {} rows of {}", start, end, shape_[0], str()));
    }
    Shape shape = shape_;
    shape[0] = end - start;
    const std::int64_t row = shape_[0] == 0 ? 0 : numel_ / shape_[0];
    return Tensor(storage_, offset_ + static_cast<std::size_t>(start * row) * dtype_size(dtype_), std::move(shape),
                  dtype_, device_, read_only_);
}

}  // namespace lockstep

namespace lockstep {
// Foreign memory (from_blob) never counts as the arena's, even where its address falls inside it: lockstep did not
// place it there, so nothing keeps the block behind it allocated while other processes read it.
bool Tensor::in_shared_memory() const noexcept {
    return storage_ != nullptr && device_.is_cpu() && !storage_->foreign() &&
           lockstep::in_shared_memory(data_, nbytes());
}
std::optional<std::uint64_t> Tensor::shared_memory_offset() const noexcept {
    if (!in_shared_memory()) return std::nullopt;
    return detail::arena_offset(data_, nbytes());
}
}  // namespace lockstep
