#pragma once
// How the CPU backend sees tensor storage through Eigen: the Eigen scalar behind each dtype, the type arithmetic runs
// in, flat maps without copies, the element conversion rules and dtype visitors that leave out what an operation
// does not accept.

#include "../scalar_conversion.hpp"

#include <lockstep/tensor.hpp>

#include <fmt/core.h>
#include <Eigen/Core>

#include <cstdint>
#include <type_traits>

namespace lockstep::kernels::cpu {

// lockstep::float16/bfloat16 have the bit layout of Eigen::half/bfloat16; storage is read through the Eigen types.
template <typename T>
struct eigen_scalar {
    using type = T;
};
template <>
struct eigen_scalar<float16> {
    using type = Eigen::half;
};
template <>
struct eigen_scalar<bfloat16> {
    using type = Eigen::bfloat16;
};
template <typename T>
using eigen_t = typename eigen_scalar<T>::type;

template <typename E>
inline constexpr bool is_half_v = std::is_same_v<E, Eigen::half> || std::is_same_v<E, Eigen::bfloat16>;

// Floating arithmetic runs in float for the 16-bit types (one rounding on store) and in the type itself otherwise.
template <typename E>
using float_compute_t = std::conditional_t<is_half_v<E>, float, E>;

template <typename E>
using Array1 = Eigen::Array<E, Eigen::Dynamic, 1>;

template <typename E>
[[nodiscard]] Eigen::Map<Array1<E>> flat(Tensor& t) {
    return {static_cast<E*>(t.data()), t.numel()};
}
template <typename E>
[[nodiscard]] Eigen::Map<const Array1<E>> flat(const Tensor& t) {
    return {static_cast<const E*>(t.data()), t.numel()};
}

// Converts one element between Eigen storage types following scalar_conversion.hpp (the rules the CUDA backend
// implements with its own intrinsics).
// A complex value converts to its real part, and from a real value with a zero imaginary part (numpy's casts).
template <typename To, typename From>
[[nodiscard]] inline To convert(From v) noexcept {
    if constexpr (std::is_same_v<To, From>) {
        return v;
    } else if constexpr (is_complex_v<To>) {
        return To(convert<typename To::value_type>(v), 0);
    } else if constexpr (is_complex_v<From>) {
        return convert<To>(v.real());
    } else if constexpr (std::is_same_v<From, bool>) {
        return convert<To, std::uint8_t>(v ? 1 : 0);
    } else if constexpr (std::is_same_v<To, bool>) {
        if constexpr (is_half_v<From>) {
            return static_cast<float>(v) != 0.0f;
        } else {
            return v != From{0};
        }
    } else if constexpr (std::is_integral_v<To>) {
        if constexpr (std::is_integral_v<From>) {
            return static_cast<To>(v);
        } else if constexpr (is_half_v<From>) {
            return static_cast<To>(saturate_to_int64(static_cast<double>(static_cast<float>(v))));
        } else {
            return static_cast<To>(saturate_to_int64(static_cast<double>(v)));
        }
    } else if constexpr (is_half_v<To>) {
        if constexpr (std::is_integral_v<From>) {
            return To(round_to_odd_float(static_cast<std::int64_t>(v)));
        } else if constexpr (is_half_v<From>) {
            return To(static_cast<float>(v));
        } else {
            return To(round_to_odd_float(static_cast<double>(v)));
        }
    } else if constexpr (is_half_v<From>) {
        return static_cast<To>(static_cast<float>(v));
    } else {
        return static_cast<To>(v);
    }
}

// Calls fn with a value of the Eigen storage type of `dtype`.
template <typename Fn>
decltype(auto) visit_eigen(DType dtype, Fn&& fn) {
    return visit_dtype(dtype, [&](auto zero) { return fn(eigen_t<decltype(zero)>{}); });
}

// As visit_eigen, for dtypes that take arithmetic (all but bool and the complex types; dispatch.cpp refuses bool
// before any kernel runs). Complex tensors are carried by the collectives; of the tensor math they take fill, copy
// and cast only.
template <typename Fn>
void visit_arithmetic(DType dtype, Fn&& fn) {
    visit_eigen(dtype, [&](auto zero) {
        using E = decltype(zero);
        if constexpr (std::is_same_v<E, bool>) {
            throw DTypeError("arithmetic on bool tensors is not supported; cast to an integer or floating dtype first");
        } else if constexpr (is_complex_v<E>) {
            throw DTypeError(
                fmt::format("tensor arithmetic on {} is not supported (complex tensors take fill, copy, "
                            "cast and the collectives); cast to a real dtype first",
                            dtype_name(dtype)));
        } else {
            fn(zero);
        }
    });
}

// As visit_eigen, for the floating dtypes only.
template <typename Fn>
void visit_floating(DType dtype, Fn&& fn) {
    visit_eigen(dtype, [&](auto zero) {
        using E = decltype(zero);
        if constexpr (std::is_integral_v<E> || is_complex_v<E>) {
            throw DTypeError(
                fmt::format("dtype {} is not floating; this operation needs float32, float64, float16 "
                            "or bfloat16",
                            dtype_name(dtype)));
        } else {
            fn(zero);
        }
    });
}

}  // namespace lockstep::kernels::cpu
