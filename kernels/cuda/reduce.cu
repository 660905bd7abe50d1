// Reductions on CUDA, including the mean squared error loss.
//
// The input is read as [outer, extent, inner]; a loader functor turns a flat index into an accumulator value (an
// element, or a squared difference for the loss), a combiner merges two accumulators, and a store functor writes one
// result. Two kernels cover the two layouts, each in at most two passes and without atomics:
// - inner == 1 (a whole tensor, or the last dimension): runs of `extent` contiguous elements. Each run is cut into
//   `chunks` pieces; one block reduces a piece (coalesced strided loop, then a warp-shuffle block reduction) into a
//   partial, and a second launch of the same kernel reduces each run's partials into the result.
// - inner > 1: one thread per (outer, chunk, inner) walks its piece of the extent with stride `inner`, so that
//   neighbouring threads read neighbouring addresses; a second launch combines the chunk partials the same way.
// Accumulators: unsigned 64-bit for integer and bool sums (wrapping, stored as int64), 64-bit signed for integer
// max/min, float for float32 and the 16-bit floats, double for float64. max/min propagate NaN.

#include "cuda_kernels.hpp"
#include "device_elements.cuh"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace lockstep::kernels::cuda {

namespace {

constexpr int warp_size = 32;

struct SumOp {
    template <typename A>
    __device__ __forceinline__ A operator()(A a, A b) const {
        return a + b;
    }
};

struct MaxOp {
    template <typename A>
    __device__ __forceinline__ A operator()(A a, A b) const {
        if constexpr (std::is_floating_point_v<A>) {
            if (a != a) return a;
            if (b != b) return b;
        }
        return a < b ? b : a;
    }
};

struct MinOp {
    template <typename A>
    __device__ __forceinline__ A operator()(A a, A b) const {
        if constexpr (std::is_floating_point_v<A>) {
            if (a != a) return a;
            if (b != b) return b;
        }
        return b < a ? b : a;
    }
};

template <typename T, typename Acc>
struct ElementLoad {
    const T* data;
    __device__ __forceinline__ Acc operator()(std::int64_t i) const { return static_cast<Acc>(widen(data[i])); }
};

template <typename Acc>
struct PartialLoad {
    const Acc* data;
    __device__ __forceinline__ Acc operator()(std::int64_t i) const { return data[i]; }
};

template <typename T>
struct SquaredDifferenceLoad {
    const T* pred;
    const T* target;
    __device__ __forceinline__ compute_t<T> operator()(std::int64_t i) const {
        const compute_t<T> d = widen(pred[i]) - widen(target[i]);
        return d * d;
    }
};

template <typename Acc>
struct PartialStore {
    Acc* data;
    __device__ __forceinline__ void operator()(std::int64_t i, Acc v) const { data[i] = v; }
};

// The final value: the accumulator converted to the output type, divided by `count` first for a mean.
template <typename Out, typename Acc>
struct ResultStore {
    Out* data;
    bool mean;
    std::int64_t count;
    __device__ __forceinline__ void operator()(std::int64_t i, Acc v) const {
        if constexpr (std::is_floating_point_v<Acc>) {
            if (mean) v /= static_cast<Acc>(count);
        }
        data[i] = convert<Out>(v);
    }
};

// Combines `v` across the block; the result is valid in thread 0. Every thread of the block must call it.
template <typename Acc, typename Combine>
__device__ Acc block_reduce(Acc v, Combine combine, Acc identity) {
    __shared__ Acc warp_results[threads_per_block / warp_size];
    const unsigned lane = threadIdx.x % warp_size;
    const unsigned warp = threadIdx.x / warp_size;
    for (int offset = warp_size / 2; offset > 0; offset /= 2) v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0) warp_results[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / warp_size ? warp_results[lane] : identity;
        for (int offset = warp_size / 2; offset > 0; offset /= 2) {
            v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
        }
    }
    __syncthreads();  // warp_results is reused by the block's next item
    return v;
}

// One item per block at a time: item = run * chunks + chunk covers [chunk * chunk_len, +chunk_len) of the run.
template <typename Acc, typename Load, typename Combine, typename Store>
__global__ void reduce_runs_kernel(Load load, Combine combine, Store store, Acc identity, std::int64_t extent,
                                   std::int64_t chunk_len, std::int64_t chunks, std::int64_t items) {
    for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const std::int64_t run = item / chunks;
        const std::int64_t begin = (item % chunks) * chunk_len;
        const std::int64_t end = std::min(begin + chunk_len, extent);
        Acc acc = identity;
        for (std::int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc = combine(acc, load(run * extent + j));
        acc = block_reduce(acc, combine, identity);
        if (threadIdx.x == 0) store(item, acc);
    }
}

// One item per thread: item = (o * chunks + chunk) * inner + i.
template <typename Acc, typename Load, typename Combine, typename Store>
__global__ void reduce_slices_kernel(Load load, Combine combine, Store store, Acc identity, ReduceGeometry g,
                                     std::int64_t chunk_len, std::int64_t chunks) {
    const std::int64_t items = g.outer * chunks * g.inner;
    for (std::int64_t item = global_thread_index(); item < items; item += grid_stride()) {
        const std::int64_t i = item % g.inner;
        const std::int64_t rest = item / g.inner;
        const std::int64_t o = rest / chunks;
        const std::int64_t begin = (rest % chunks) * chunk_len;
        const std::int64_t end = std::min(begin + chunk_len, g.extent);
        Acc acc = identity;
        for (std::int64_t j = begin; j < end; ++j) acc = combine(acc, load((o * g.extent + j) * g.inner + i));
        store(item, acc);
    }
}

[[nodiscard]] std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return (a + b - 1) / b;
}

// Partial results, as raw bytes from the device's caching allocator.
template <typename Acc>
[[nodiscard]] Tensor partial_buffer(std::int64_t count, Device device) {
    return Tensor::empty({count * static_cast<std::int64_t>(sizeof(Acc))}, DType::UInt8, device);
}

template <typename Acc, typename Load, typename Combine, typename Out>
void run_reduction(ReduceGeometry g, Load load, Combine combine, Acc identity, ResultStore<Out, Acc> result,
                   Device device) {
    if (g.inner == 1) {
        // Pieces of at least 8 elements per thread, and about 1024 blocks in all when runs are few.
        constexpr std::int64_t min_chunk = threads_per_block * 8;
        const std::int64_t chunks =
            std::clamp<std::int64_t>(ceil_div(g.extent, min_chunk), 1, std::max<std::int64_t>(1, 1024 / g.outer));
        const std::int64_t chunk_len = ceil_div(g.extent, chunks);
        const auto blocks = [](std::int64_t items) {
            return static_cast<unsigned>(std::min<std::int64_t>(items, max_blocks));
        };
        if (chunks == 1) {
            reduce_runs_kernel<<<blocks(g.outer), threads_per_block>>>(load, combine, result, identity, g.extent,
                                                                       g.extent, 1, g.outer);
            LOCKSTEP_CUDA_LAUNCH_CHECK("reduce_runs");
            return;
        }
        Tensor partial = partial_buffer<Acc>(g.outer * chunks, device);
        Acc* p = static_cast<Acc*>(partial.data());
        reduce_runs_kernel<<<blocks(g.outer * chunks), threads_per_block>>>(
            load, combine, PartialStore<Acc>{p}, identity, g.extent, chunk_len, chunks, g.outer * chunks);
        LOCKSTEP_CUDA_LAUNCH_CHECK("reduce_runs (partials)");
        reduce_runs_kernel<<<blocks(g.outer), threads_per_block>>>(PartialLoad<Acc>{p}, combine, result, identity,
                                                                   chunks, chunks, 1, g.outer);
        LOCKSTEP_CUDA_LAUNCH_CHECK("reduce_runs (final)");
        return;
    }
    // Split the extent only when there are too few output columns to occupy the GPU.
    constexpr std::int64_t enough_items = 32768;
    const std::int64_t items = g.outer * g.inner;
    const std::int64_t chunks =
        items >= enough_items
            ? 1
            : std::clamp<std::int64_t>(ceil_div(g.extent, 32), 1, std::max<std::int64_t>(1, enough_items / items));
    if (chunks == 1) {
        reduce_slices_kernel<<<blocks_for(items), threads_per_block>>>(load, combine, result, identity, g, g.extent, 1);
        LOCKSTEP_CUDA_LAUNCH_CHECK("reduce_slices");
        return;
    }
    const std::int64_t chunk_len = ceil_div(g.extent, chunks);
    Tensor partial = partial_buffer<Acc>(items * chunks, device);
    Acc* p = static_cast<Acc*>(partial.data());
    reduce_slices_kernel<<<blocks_for(items * chunks), threads_per_block>>>(load, combine, PartialStore<Acc>{p},
                                                                            identity, g, chunk_len, chunks);
    LOCKSTEP_CUDA_LAUNCH_CHECK("reduce_slices (partials)");
    reduce_slices_kernel<<<blocks_for(items), threads_per_block>>>(PartialLoad<Acc>{p}, combine, result, identity,
                                                                   ReduceGeometry{g.outer, chunks, g.inner}, chunks, 1);
    LOCKSTEP_CUDA_LAUNCH_CHECK("reduce_slices (final)");
}

template <typename Acc>
[[nodiscard]] Acc lowest() {
    if constexpr (std::is_floating_point_v<Acc>) {
        return -std::numeric_limits<Acc>::infinity();
    } else {
        return std::numeric_limits<Acc>::lowest();
    }
}

template <typename Acc>
[[nodiscard]] Acc highest() {
    if constexpr (std::is_floating_point_v<Acc>) {
        return std::numeric_limits<Acc>::infinity();
    } else {
        return std::numeric_limits<Acc>::max();
    }
}

}  // namespace

void reduce(Reduction op, const Tensor& in, ReduceGeometry geometry, Tensor& out) {
    const DeviceScope scope(in.device());
    // bool reads as uint8 (0 or 1); a bool max/min writes 0 or 1 back, which is a valid bool.
    const DType in_dtype = in.dtype() == DType::Bool ? DType::UInt8 : in.dtype();
    visit_arithmetic(in_dtype, [&](auto zero) {
        using T = decltype(zero);
        const T* src = device_data<T>(in);
        if (op == Reduction::Sum || op == Reduction::Mean) {
            using Acc = std::conditional_t<std::is_integral_v<T>, unsigned long long, compute_t<T>>;
            using Out = std::conditional_t<std::is_integral_v<T>, std::int64_t, T>;
            const ResultStore<Out, Acc> result{static_cast<Out*>(out.data()), op == Reduction::Mean, geometry.extent};
            run_reduction(geometry, ElementLoad<T, Acc>{src}, SumOp{}, Acc(0), result, in.device());
        } else {
            using Acc = std::conditional_t<std::is_integral_v<T>, long long, compute_t<T>>;
            const ResultStore<T, Acc> result{static_cast<T*>(out.data()), false, geometry.extent};
            if (op == Reduction::Max) {
                run_reduction(geometry, ElementLoad<T, Acc>{src}, MaxOp{}, lowest<Acc>(), result, in.device());
            } else {
                run_reduction(geometry, ElementLoad<T, Acc>{src}, MinOp{}, highest<Acc>(), result, in.device());
            }
        }
    });
}

void mse_loss(const Tensor& pred, const Tensor& target, Tensor& out) {
    const DeviceScope scope(pred.device());
    visit_floating(pred.dtype(), [&](auto zero) {
        using T = decltype(zero);
        using Acc = compute_t<T>;
        const ResultStore<T, Acc> result{static_cast<T*>(out.data()), true, pred.numel()};
        run_reduction(ReduceGeometry{1, pred.numel(), 1},
                      SquaredDifferenceLoad<T>{device_data<T>(pred), device_data<T>(target)}, SumOp{}, Acc(0), result,
                      pred.device());
    });
}

}  // namespace lockstep::kernels::cuda
