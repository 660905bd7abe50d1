#pragma once
// Element types of a Tensor. One table (dtype.cpp) holds each type's name, size, category and MPI datatype.

#include <lockstep/export.hpp>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <type_traits>

namespace lockstep {

// Values are appended, never reordered: they travel in debug mode's signatures.
enum class DType : std::uint8_t {
    Float32,
    Float64,
    Float16,
    BFloat16,
    Int8,
    UInt8,
    Int32,
    Int64,
    Bool,
    Int16,
    UInt16,
    UInt32,
    UInt64,
    Complex64,   // std::complex<float>: two float32, real part first
    Complex128,  // std::complex<double>
};

inline constexpr DType all_dtypes[] = {DType::Float32, DType::Float64,   DType::Float16,   DType::BFloat16,
                                       DType::Int8,    DType::UInt8,     DType::Int32,     DType::Int64,
                                       DType::Bool,    DType::Int16,     DType::UInt16,    DType::UInt32,
                                       DType::UInt64,  DType::Complex64, DType::Complex128};

[[nodiscard]] LOCKSTEP_API std::string_view dtype_name(DType dtype) noexcept;  // "float32", "bfloat16", ...
[[nodiscard]] LOCKSTEP_API std::size_t dtype_size(DType dtype) noexcept;       // bytes per element
[[nodiscard]] LOCKSTEP_API bool is_floating(DType dtype) noexcept;             // float32/64, float16, bfloat16
[[nodiscard]] LOCKSTEP_API bool is_integral(DType dtype) noexcept;             // int8 ... uint64 (not bool)
[[nodiscard]] LOCKSTEP_API bool is_complex(DType dtype) noexcept;              // complex64, complex128
// The real type of a complex dtype's parts (float32 for complex64, float64 for complex128); `dtype` itself otherwise.
[[nodiscard]] LOCKSTEP_API DType real_dtype(DType dtype) noexcept;
// Parses a name as printed by dtype_name (also "float", "double", "half", "int", "long", "short", "cfloat",
// "cdouble"); throws DTypeError.
[[nodiscard]] LOCKSTEP_API DType parse_dtype(std::string_view name);
LOCKSTEP_API std::ostream& operator<<(std::ostream& os, DType dtype);

// IEEE 754 binary16. Storage only: arithmetic converts to float. Conversions round to nearest even.
struct LOCKSTEP_API float16 {
    std::uint16_t bits = 0;
    float16() = default;
    explicit float16(float value) noexcept;
    explicit operator float() const noexcept;
    static float16 from_bits(std::uint16_t b) noexcept {
        float16 h;
        h.bits = b;
        return h;
    }
    friend bool operator==(float16 a, float16 b) noexcept { return static_cast<float>(a) == static_cast<float>(b); }
};

// bfloat16: the upper half of a float32. Storage only, like float16. Conversions round to nearest even.
struct LOCKSTEP_API bfloat16 {
    std::uint16_t bits = 0;
    bfloat16() = default;
    explicit bfloat16(float value) noexcept;
    explicit operator float() const noexcept;
    static bfloat16 from_bits(std::uint16_t b) noexcept {
        bfloat16 h;
        h.bits = b;
        return h;
    }
    friend bool operator==(bfloat16 a, bfloat16 b) noexcept { return static_cast<float>(a) == static_cast<float>(b); }
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2);

// The DType of a C++ element type, for typed access (Tensor::data<T>(), from_data<T>()).
template <typename T>
struct dtype_traits;
template <>
struct dtype_traits<float> {
    static constexpr DType value = DType::Float32;
};
template <>
struct dtype_traits<double> {
    static constexpr DType value = DType::Float64;
};
template <>
struct dtype_traits<float16> {
    static constexpr DType value = DType::Float16;
};
template <>
struct dtype_traits<bfloat16> {
    static constexpr DType value = DType::BFloat16;
};
template <>
struct dtype_traits<std::int8_t> {
    static constexpr DType value = DType::Int8;
};
template <>
struct dtype_traits<std::uint8_t> {
    static constexpr DType value = DType::UInt8;
};
template <>
struct dtype_traits<std::int32_t> {
    static constexpr DType value = DType::Int32;
};
template <>
struct dtype_traits<std::int64_t> {
    static constexpr DType value = DType::Int64;
};
template <>
struct dtype_traits<bool> {
    static constexpr DType value = DType::Bool;
};
template <>
struct dtype_traits<std::int16_t> {
    static constexpr DType value = DType::Int16;
};
template <>
struct dtype_traits<std::uint16_t> {
    static constexpr DType value = DType::UInt16;
};
template <>
struct dtype_traits<std::uint32_t> {
    static constexpr DType value = DType::UInt32;
};
template <>
struct dtype_traits<std::uint64_t> {
    static constexpr DType value = DType::UInt64;
};
template <>
struct dtype_traits<std::complex<float>> {
    static constexpr DType value = DType::Complex64;
};
template <>
struct dtype_traits<std::complex<double>> {
    static constexpr DType value = DType::Complex128;
};

template <typename T>
inline constexpr bool is_complex_v = false;
template <typename T>
inline constexpr bool is_complex_v<std::complex<T>> = true;

template <typename T>
inline constexpr DType dtype_of = dtype_traits<T>::value;

// Calls fn with a value-initialised object of the C++ type that stores `dtype` (float, float16, ..., bool,
// std::complex<float>, std::complex<double>).
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
    switch (dtype) {
        case DType::Float32:
            return fn(float{});
        case DType::Float64:
            return fn(double{});
        case DType::Float16:
            return fn(float16{});
        case DType::BFloat16:
            return fn(bfloat16{});
        case DType::Int8:
            return fn(std::int8_t{});
        case DType::UInt8:
            return fn(std::uint8_t{});
        case DType::Int32:
            return fn(std::int32_t{});
        case DType::Int64:
            return fn(std::int64_t{});
        case DType::Bool:
            return fn(bool{});
        case DType::Int16:
            return fn(std::int16_t{});
        case DType::UInt16:
            return fn(std::uint16_t{});
        case DType::UInt32:
            return fn(std::uint32_t{});
        case DType::UInt64:
            return fn(std::uint64_t{});
        case DType::Complex64:
            return fn(std::complex<float>{});
        case DType::Complex128:
            return fn(std::complex<double>{});
    }
    return fn(float{});  // unreachable: every enumerator is handled above
}

// Converts between any element type and double, the common currency of scalar arguments (a complex value converts
// to its real part, and from a double with a zero imaginary part, as numpy's casts do).
template <typename T>
[[nodiscard]] inline double to_double(T v) noexcept {
    if constexpr (is_complex_v<T>) {
        return static_cast<double>(v.real());
    } else if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        return static_cast<double>(static_cast<float>(v));
    } else {
        return static_cast<double>(v);
    }
}
template <typename T>
[[nodiscard]] inline T from_double(double v) noexcept {
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        return T(static_cast<float>(v));
    } else if constexpr (std::is_same_v<T, bool>) {
        return v != 0.0;
    } else if constexpr (is_complex_v<T>) {
        return T(static_cast<typename T::value_type>(v), 0);
    } else {
        return static_cast<T>(v);
    }
}

}  // namespace lockstep
