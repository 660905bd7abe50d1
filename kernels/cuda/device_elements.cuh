#pragma once
// How the CUDA kernels see tensors: the device type behind each dtype (__half, __nv_bfloat16 for the 16-bit floats),
// widening to the compute type and rounding back, the element conversion rules of scalar_conversion.hpp, the launch
// geometry of grid-stride loops, and a scope that makes a tensor's device current.

#include "../scalar_conversion.hpp"

#include <lockstep/internal/cuda_check.hpp>
#include <lockstep/tensor.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace lockstep::kernels::cuda {

constexpr int threads_per_block = 256;
// Enough blocks to fill the largest GPUs several times over; grid-stride loops cover the rest.
constexpr std::int64_t max_blocks = 4096;

[[nodiscard]] inline unsigned blocks_for(std::int64_t work_items) {
    const std::int64_t blocks = (work_items + threads_per_block - 1) / threads_per_block;
    return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, max_blocks));
}

__device__ __forceinline__ std::int64_t global_thread_index() {
    return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() {
    return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// Makes the device of a CUDA tensor current for the scope, restoring the previous one.
class DeviceScope {
public:
    explicit DeviceScope(Device device) {
        LOCKSTEP_CUDA_CHECK(cudaGetDevice(&previous_));
        if (previous_ != device.index()) LOCKSTEP_CUDA_CHECK(cudaSetDevice(device.index()));
        changed_ = previous_ != device.index();
    }
    ~DeviceScope() {
        if (changed_) cudaSetDevice(previous_);
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    int previous_ = 0;
    bool changed_ = false;
};

// ---- element types

template <typename T>
struct device_scalar {
    using type = T;
};
template <>
struct device_scalar<float16> {
    using type = __half;
};
template <>
struct device_scalar<bfloat16> {
    using type = __nv_bfloat16;
};
template <typename T>
using device_t = typename device_scalar<T>::type;

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The type floating arithmetic runs in: float for the 16-bit types, the type itself otherwise.
template <typename T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

template <typename T>
__host__ __device__ __forceinline__ compute_t<T> widen(T v) {
    if constexpr (std::is_same_v<T, __half>) {
        return __half2float(v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __bfloat162float(v);
    } else {
        return v;
    }
}

// Rounds a compute value into T once (round to nearest even for the 16-bit types).
template <typename T>
__host__ __device__ __forceinline__ T narrow(compute_t<T> v) {
    if constexpr (std::is_same_v<T, __half>) {
        return __float2half_rn(v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __float2bfloat16_rn(v);
    } else {
        return v;
    }
}

// One element from any type to any type, by the rules of scalar_conversion.hpp: the CUDA intrinsics used here round
// directly from double and from 64-bit integers, so no double rounding occurs.
template <typename To, typename From>
__host__ __device__ __forceinline__ To convert(From v) {
    if constexpr (std::is_same_v<To, From>) {
        return v;
    } else if constexpr (std::is_same_v<From, bool>) {
        return convert<To>(static_cast<std::uint8_t>(v ? 1 : 0));
    } else if constexpr (std::is_same_v<To, bool>) {
        return widen(v) != compute_t<From>(0);
    } else if constexpr (std::is_integral_v<To>) {
        if constexpr (std::is_integral_v<From>) {
            return static_cast<To>(v);
        } else {
            return static_cast<To>(saturate_to_int64(static_cast<double>(widen(v))));
        }
    } else if constexpr (std::is_same_v<To, __half>) {
        if constexpr (std::is_integral_v<From>) {
            return __ll2half_rn(static_cast<long long>(v));
        } else if constexpr (std::is_same_v<From, double>) {
            return __double2half(v);
        } else {
            return __float2half_rn(widen(v));
        }
    } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
        if constexpr (std::is_integral_v<From>) {
            return __ll2bfloat16_rn(static_cast<long long>(v));
        } else if constexpr (std::is_same_v<From, double>) {
            return __double2bfloat16(v);
        } else {
            return __float2bfloat16_rn(widen(v));
        }
    } else {
        return static_cast<To>(widen(v));
    }
}

// ---- dtype visitors, handing fn a value of the device type

// The CUDA kernels take the dtypes of their first release; int16, uint16, uint32, uint64 and the complex types on a
// CUDA device are carried by the collectives (copied, staged, reduced on the host or by MPI), not computed on.
template <typename T>
inline constexpr bool has_device_kernels_v =
    !is_complex_v<T> && !std::is_same_v<T, std::int16_t> && !std::is_same_v<T, std::uint16_t> &&
    !std::is_same_v<T, std::uint32_t> && !std::is_same_v<T, std::uint64_t>;

template <typename Fn>
decltype(auto) visit_device(DType dtype, Fn&& fn) {
    return visit_dtype(dtype, [&](auto zero) {
        using T = decltype(zero);
        if constexpr (has_device_kernels_v<T>) {
            return fn(device_t<T>{});
        } else {
            throw DTypeError(std::string("the CUDA kernels do not compute on dtype ") + std::string(dtype_name(dtype)) +
                             " (collectives carry it); copy the tensor to the host, or cast it on the host first");
            return fn(float{});  // never reached: gives the branch the return type of the others
        }
    });
}

// All dtypes but bool (dispatch.cpp refuses arithmetic on bool before any kernel runs).
template <typename Fn>
void visit_arithmetic(DType dtype, Fn&& fn) {
    visit_device(dtype, [&](auto zero) {
        if constexpr (std::is_same_v<decltype(zero), bool>) {
            throw DTypeError("arithmetic on bool tensors is not supported; cast to an integer or floating dtype first");
        } else {
            fn(zero);
        }
    });
}

template <typename Fn>
void visit_floating(DType dtype, Fn&& fn) {
    visit_device(dtype, [&](auto zero) {
        if constexpr (std::is_integral_v<decltype(zero)>) {
            throw DTypeError(std::string("dtype ") + std::string(dtype_name(dtype)) +
                             " is not floating; this operation needs float32, float64, float16 or bfloat16");
        } else {
            fn(zero);
        }
    });
}

template <typename T>
[[nodiscard]] T* device_data(Tensor& t) {
    return static_cast<T*>(t.data());
}
template <typename T>
[[nodiscard]] const T* device_data(const Tensor& t) {
    return static_cast<const T*>(t.data());
}

}  // namespace lockstep::kernels::cuda
