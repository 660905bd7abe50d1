// Elementwise CUDA kernels: fill, cast, the four binary operations (tensor-tensor with suffix broadcast, and
// tensor-scalar), axpy, relu and its gradient, the gradient of the mean squared error, and the integer
// division-by-zero check.
//
// Every operation is a map out[i] = f(in0[i], in1[i], ...) with a functor f, run by one of two grid-stride kernels:
// - map_packed_kernel when all operands have the element size of the output and 16-byte aligned storage: each
//   thread moves whole 16-byte packs (float4 for float32, 8 halves, ...), and the first threads of the grid finish
//   the n % pack elements that do not fill a pack;
// - map_kernel otherwise (casts between sizes, views at odd offsets), one element per step.
// A broadcast right operand of nb elements is read at i % nb by broadcast_kernel.
// Integer arithmetic wraps as in two's complement (computed on the unsigned type); floating arithmetic runs in
// float for __half/__nv_bfloat16 and rounds once on store.

#include "cuda_kernels.hpp"
#include "device_elements.cuh"

#include <cstdint>
#include <type_traits>
#include <utility>

namespace lockstep::kernels::cuda {

namespace {

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
    T v[N];
};

template <typename Out>
inline constexpr int pack_size = 16 / static_cast<int>(sizeof(Out));

template <typename Out, typename F, typename... In>
__global__ void map_kernel(Out* out, std::int64_t n, F f, const In*... in) {
    for (std::int64_t i = global_thread_index(); i < n; i += grid_stride()) out[i] = f(in[i]...);
}

template <int N, typename Out, typename F, typename... In>
__device__ __forceinline__ void map_pack(Pack<Out, N>& result, const F& f, const Pack<In, N>&... packs) {
#pragma unroll
    for (int k = 0; k < N; ++k) result.v[k] = f(packs.v[k]...);
}

template <typename Out, typename F, typename... In>
__global__ void map_packed_kernel(Out* out, std::int64_t n, F f, const In*... in) {
    constexpr int N = pack_size<Out>;
    const std::int64_t packs = n / N;
    for (std::int64_t p = global_thread_index(); p < packs; p += grid_stride()) {
        Pack<Out, N> result;
        map_pack<N>(result, f, reinterpret_cast<const Pack<In, N>*>(in)[p]...);
        reinterpret_cast<Pack<Out, N>*>(out)[p] = result;
    }
    const std::int64_t tail = packs * N + global_thread_index();
    if (tail < n) out[tail] = f(in[tail]...);
}

template <typename T, typename F>
__global__ void broadcast_kernel(T* out, const T* a, const T* b, std::int64_t n, std::int64_t nb, F f) {
    for (std::int64_t i = global_thread_index(); i < n; i += grid_stride()) out[i] = f(a[i], b[i % nb]);
}

[[nodiscard]] inline bool aligned16(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// out[i] = f(in[i]...) for i < n. `out` may be one of the inputs (in-place operations): each element is read before
// it is written, by the same thread, which is why no pointer is declared __restrict__.
template <typename Out, typename F, typename... In>
void launch_map(const char* name, Out* out, std::int64_t n, F f, const In*... in) {
    if (n == 0) return;
    constexpr bool same_size = ((sizeof(In) == sizeof(Out)) && ...);
    if (pack_size < Out >> 1 && same_size && aligned16(out) && (aligned16(in) && ...)) {
        // blocks_for never returns fewer than one block, enough threads for the tail of under pack_size elements.
        map_packed_kernel<<<blocks_for(n / pack_size<Out>), threads_per_block>>>(out, n, f, in...);
    } else {
        map_kernel<<<blocks_for(n), threads_per_block>>>(out, n, f, in...);
    }
    LOCKSTEP_CUDA_LAUNCH_CHECK(name);
}

// ---- functors

template <typename T>
using unsigned_t = std::make_unsigned_t<T>;

template <BinaryOp Op, typename T>
__device__ __forceinline__ T integer_arith(T a, T b) {
    using U = unsigned_t<T>;
    if constexpr (Op == BinaryOp::Add) {
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else if constexpr (Op == BinaryOp::Sub) {
        return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
    } else if constexpr (Op == BinaryOp::Mul) {
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
        // INT_MIN / -1 overflows; negation modulo 2^bits gives INT_MIN, as the CPU backend does.
        if constexpr (std::is_signed_v<T>) {
            if (b == T(-1)) return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(a)));
        }
        return static_cast<T>(a / b);
    }
}

template <BinaryOp Op, typename C>
__device__ __forceinline__ C floating_arith(C a, C b) {
    if constexpr (Op == BinaryOp::Add) {
        return a + b;
    } else if constexpr (Op == BinaryOp::Sub) {
        return a - b;
    } else if constexpr (Op == BinaryOp::Mul) {
        return a * b;
    } else {
        return a / b;
    }
}

template <BinaryOp Op, typename T>
struct BinaryFn {
    __device__ __forceinline__ T operator()(T a, T b) const {
        if constexpr (std::is_integral_v<T>) {
            return integer_arith<Op>(a, b);
        } else {
            return narrow<T>(floating_arith<Op>(widen(a), widen(b)));
        }
    }
};

// a op scalar. Integer scalars are integral (checked by the dispatch point); integer division runs in int64 so that
// a divisor outside T's range still truncates correctly.
template <BinaryOp Op, typename T>
struct ScalarFn {
    using S = std::conditional_t<std::is_integral_v<T>, std::int64_t, compute_t<T>>;
    S scalar;
    __device__ __forceinline__ T operator()(T a) const {
        if constexpr (std::is_integral_v<T> && Op == BinaryOp::Div) {
            return static_cast<T>(integer_arith<Op>(static_cast<std::int64_t>(a), scalar));
        } else if constexpr (std::is_integral_v<T>) {
            return integer_arith<Op>(a, static_cast<T>(scalar));
        } else {
            return narrow<T>(floating_arith<Op>(widen(a), scalar));
        }
    }
};

template <typename T>
struct AxpyFn {
    using S = std::conditional_t<std::is_integral_v<T>, T, compute_t<T>>;
    S alpha;
    __device__ __forceinline__ T operator()(T y, T x) const {
        if constexpr (std::is_integral_v<T>) {
            return integer_arith<BinaryOp::Add>(y, integer_arith<BinaryOp::Mul>(alpha, x));
        } else {
            return narrow<T>(widen(y) + alpha * widen(x));
        }
    }
};

template <typename T>
struct FillFn {
    T value;
    __device__ __forceinline__ T operator()() const { return value; }
};

template <typename To, typename From>
struct CastFn {
    __device__ __forceinline__ To operator()(From v) const { return convert<To>(v); }
};

template <typename T>
struct ReluFn {
    // x < 0 ? 0 : x keeps NaN (the comparison is false).
    __device__ __forceinline__ T operator()(T x) const { return widen(x) < compute_t<T>(0) ? narrow<T>(0) : x; }
};

template <typename T>
struct ReluBackwardFn {
    __device__ __forceinline__ T operator()(T grad, T x) const {
        return widen(x) > compute_t<T>(0) ? grad : narrow<T>(0);
    }
};

template <typename T>
struct MseBackwardFn {
    compute_t<T> scale;  // 2 / numel
    __device__ __forceinline__ T operator()(T pred, T target) const {
        return narrow<T>((widen(pred) - widen(target)) * scale);
    }
};

template <typename T>
__global__ void any_zero_kernel(const T* __restrict__ in, std::int64_t n, int* __restrict__ found) {
    for (std::int64_t i = global_thread_index(); i < n; i += grid_stride()) {
        if (widen(in[i]) == compute_t<T>(0)) *found = 1;  // every writer stores the same value
    }
}

// Calls fn with std::integral_constant<BinaryOp, op>, so that functors are specialised per operation.
template <typename Fn>
void with_op(BinaryOp op, Fn&& fn) {
    switch (op) {
        case BinaryOp::Add:
            fn(std::integral_constant<BinaryOp, BinaryOp::Add>{});
            return;
        case BinaryOp::Sub:
            fn(std::integral_constant<BinaryOp, BinaryOp::Sub>{});
            return;
        case BinaryOp::Mul:
            fn(std::integral_constant<BinaryOp, BinaryOp::Mul>{});
            return;
        case BinaryOp::Div:
            fn(std::integral_constant<BinaryOp, BinaryOp::Div>{});
            return;
    }
}

}  // namespace

void fill(Tensor& t, double value) {
    const DeviceScope scope(t.device());
    visit_device(t.dtype(), [&](auto zero) {
        using T = decltype(zero);
        launch_map("fill", device_data<T>(t), t.numel(), FillFn<T>{convert<T>(value)});
    });
}

void cast(const Tensor& src, Tensor& dst) {
    const DeviceScope scope(src.device());
    visit_device(src.dtype(), [&](auto src_zero) {
        using From = decltype(src_zero);
        visit_device(dst.dtype(), [&](auto dst_zero) {
            using To = decltype(dst_zero);
            launch_map("cast", device_data<To>(dst), dst.numel(), CastFn<To, From>{}, device_data<From>(src));
        });
    });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
    const DeviceScope scope(a.device());
    visit_arithmetic(a.dtype(), [&](auto zero) {
        using T = decltype(zero);
        with_op(op, [&](auto op_constant) {
            const BinaryFn<decltype(op_constant)::value, T> f{};
            const std::int64_t n = a.numel();
            const std::int64_t nb = b.numel();
            if (n == 0) return;
            if (nb == n) {
                launch_map("binary", device_data<T>(out), n, f, device_data<T>(a), device_data<T>(b));
            } else {
                broadcast_kernel<<<blocks_for(n), threads_per_block>>>(device_data<T>(out), device_data<T>(a),
                                                                       device_data<T>(b), n, nb, f);
                LOCKSTEP_CUDA_LAUNCH_CHECK("broadcast binary");
            }
        });
    });
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, Tensor& out) {
    const DeviceScope scope(a.device());
    visit_arithmetic(a.dtype(), [&](auto zero) {
        using T = decltype(zero);
        with_op(op, [&](auto op_constant) {
            using F = ScalarFn<decltype(op_constant)::value, T>;
            F f{};
            if constexpr (std::is_integral_v<T>) {
                f.scalar = saturate_to_int64(scalar);
            } else {
                f.scalar = static_cast<typename F::S>(scalar);
            }
            launch_map("binary scalar", device_data<T>(out), a.numel(), f, device_data<T>(a));
        });
    });
}

void axpy(double alpha, const Tensor& x, Tensor& y) {
    const DeviceScope scope(y.device());
    visit_arithmetic(y.dtype(), [&](auto zero) {
        using T = decltype(zero);
        AxpyFn<T> f{};
        if constexpr (std::is_integral_v<T>) {
            f.alpha = static_cast<T>(saturate_to_int64(alpha));
        } else {
            f.alpha = static_cast<typename AxpyFn<T>::S>(alpha);
        }
        launch_map("axpy", device_data<T>(y), y.numel(), f, device_data<T>(y), device_data<T>(x));
    });
}

bool any_zero(const Tensor& t) {
    if (t.numel() == 0) return false;
    const DeviceScope scope(t.device());
    Tensor found = Tensor::zeros({}, DType::Int32, t.device());
    visit_device(t.dtype(), [&](auto zero) {
        using T = decltype(zero);
        any_zero_kernel<<<blocks_for(t.numel()), threads_per_block>>>(device_data<T>(t), t.numel(),
                                                                      device_data<int>(found));
        LOCKSTEP_CUDA_LAUNCH_CHECK("any_zero");
    });
    return found.item<int>() != 0;
}

void relu(const Tensor& in, Tensor& out) {
    const DeviceScope scope(in.device());
    visit_floating(in.dtype(), [&](auto zero) {
        using T = decltype(zero);
        launch_map("relu", device_data<T>(out), in.numel(), ReluFn<T>{}, device_data<T>(in));
    });
}

void relu_backward(const Tensor& grad_output, const Tensor& input, Tensor& out) {
    const DeviceScope scope(input.device());
    visit_floating(input.dtype(), [&](auto zero) {
        using T = decltype(zero);
        launch_map("relu_backward", device_data<T>(out), input.numel(), ReluBackwardFn<T>{},
                   device_data<T>(grad_output), device_data<T>(input));
    });
}

void mse_loss_backward(const Tensor& pred, const Tensor& target, Tensor& out) {
    if (pred.numel() == 0) return;
    const DeviceScope scope(pred.device());
    visit_floating(pred.dtype(), [&](auto zero) {
        using T = decltype(zero);
        const MseBackwardFn<T> f{static_cast<compute_t<T>>(2.0 / static_cast<double>(pred.numel()))};
        launch_map("mse_loss_backward", device_data<T>(out), pred.numel(), f, device_data<T>(pred),
                   device_data<T>(target));
    });
}

}  // namespace lockstep::kernels::cuda
