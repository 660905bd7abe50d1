// Reductions on the CPU, including the mean squared error loss (its gradient is elementwise).
//
// The input is read as [outer, extent, inner]. With inner == 1 (a whole tensor, or the last dimension) each of the
// `outer` runs is contiguous: Eigen reduces it in blocks of `block` elements, and floating block sums are added in
// double, so rounding error grows with the number of blocks rather than with the number of elements. With inner > 1
// the `extent` slices of `inner` contiguous elements are combined one after another into an accumulator row, which
// keeps every memory access sequential.
//
// Accumulators: int64 (as uint64, which wraps without overflow) for integer and bool sums, float for float32 and the
// 16-bit floats, double for float64. max/min propagate NaN.

#include "cpu_kernels.hpp"
#include "eigen_types.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace lockstep::kernels::cpu {

namespace {

// Short enough that the float partial of a block stays accurate (relative error near 1e-7 on 10^6 equal values),
// long enough that Eigen's vectorised sum runs at memory bandwidth.
constexpr std::int64_t block = 256;

template <typename E>
using sum_acc_t = std::conditional_t<std::is_integral_v<E>, std::uint64_t, float_compute_t<E>>;

template <typename E>
using Segment = Eigen::Map<const Array1<E>>;

// The floating sum of one contiguous run, in double across blocks.
template <typename E>
[[nodiscard]] double floating_sum(const E* p, std::int64_t count) {
    double total = 0.0;
    for (std::int64_t start = 0; start < count; start += block) {
        const std::int64_t len = std::min(block, count - start);
        total += static_cast<double>(Segment<E>(p + start, len).template cast<sum_acc_t<E>>().sum());
    }
    return total;
}

// The type max/min compare in: the integer itself, or float for the 16-bit floats.
template <typename E>
using extreme_t = std::conditional_t<std::is_integral_v<E>, E, float_compute_t<E>>;

template <typename Xpr>
[[nodiscard]] auto extreme(Reduction op, const Xpr& values) {
    using Acc = typename Xpr::Scalar;
    if constexpr (std::is_floating_point_v<Acc>) {
        return op == Reduction::Max ? values.template maxCoeff<Eigen::PropagateNaN>()
                                    : values.template minCoeff<Eigen::PropagateNaN>();
    } else {
        return op == Reduction::Max ? values.maxCoeff() : values.minCoeff();
    }
}

template <typename Acc, typename Xpr>
void combine_extreme(Reduction op, Array1<Acc>& acc, const Xpr& slice) {
    if constexpr (std::is_floating_point_v<Acc>) {
        if (op == Reduction::Max) {
            acc = acc.binaryExpr(slice, Eigen::internal::scalar_max_op<Acc, Acc, Eigen::PropagateNaN>());
        } else {
            acc = acc.binaryExpr(slice, Eigen::internal::scalar_min_op<Acc, Acc, Eigen::PropagateNaN>());
        }
    } else {
        if (op == Reduction::Max) {
            acc = acc.max(slice);
        } else {
            acc = acc.min(slice);
        }
    }
}

// One value per contiguous run of `extent` elements: out[o] for o < outer.
template <typename E, typename Out>
void reduce_runs(Reduction op, const E* in, std::int64_t outer, std::int64_t extent, Out* out) {
    for (std::int64_t o = 0; o < outer; ++o) {
        const Segment<E> run(in + o * extent, extent);
        if (op == Reduction::Max || op == Reduction::Min) {
            out[o] = convert<Out>(extreme(op, run.template cast<extreme_t<E>>()));
        } else if constexpr (std::is_integral_v<E>) {
            out[o] = static_cast<Out>(run.template cast<std::uint64_t>().sum());
        } else {
            const double total = floating_sum(run.data(), extent);
            out[o] = convert<Out>(op == Reduction::Mean ? total / static_cast<double>(extent) : total);
        }
    }
}

// One row of `inner` values per outer index, combining the `extent` slices in order into an Acc row.
template <typename Acc, typename E, typename Out>
void reduce_slices(Reduction op, const E* in, ReduceGeometry g, Out* out) {
    Array1<Acc> acc(g.inner);
    for (std::int64_t o = 0; o < g.outer; ++o) {
        const E* base = in + o * g.extent * g.inner;
        auto slice = [&](std::int64_t j) { return Segment<E>(base + j * g.inner, g.inner).template cast<Acc>(); };
        if (op == Reduction::Max || op == Reduction::Min) {
            acc = slice(0);
            for (std::int64_t j = 1; j < g.extent; ++j) combine_extreme(op, acc, slice(j));
        } else {
            acc.setZero();
            for (std::int64_t j = 0; j < g.extent; ++j) acc += slice(j);
            if (op == Reduction::Mean) acc /= static_cast<Acc>(g.extent);
        }
        Eigen::Map<Array1<Out>>(out + o * g.inner, g.inner) = acc.unaryExpr([](Acc v) { return convert<Out>(v); });
    }
}

}  // namespace

void reduce(Reduction op, const Tensor& in, ReduceGeometry geometry, Tensor& out) {
    // bool reads as uint8 (0 or 1); a bool max/min writes 0 or 1 back, which is a valid bool.
    const DType in_dtype = in.dtype() == DType::Bool ? DType::UInt8 : in.dtype();
    const DType out_dtype = out.dtype() == DType::Bool ? DType::UInt8 : out.dtype();
    visit_arithmetic(in_dtype, [&](auto in_zero) {
        using E = decltype(in_zero);
        visit_arithmetic(out_dtype, [&](auto out_zero) {
            using Out = decltype(out_zero);
            // The dispatch point pairs each input only with its own dtype or, for integer sums, int64.
            if constexpr (std::is_same_v<Out, E> || (std::is_integral_v<E> && std::is_same_v<Out, std::int64_t>)) {
                const auto* src = static_cast<const E*>(in.data());
                auto* dst = static_cast<Out*>(out.data());
                if (geometry.inner == 1) {
                    reduce_runs(op, src, geometry.outer, geometry.extent, dst);
                } else if (op == Reduction::Max || op == Reduction::Min) {
                    reduce_slices<extreme_t<E>>(op, src, geometry, dst);
                } else {
                    reduce_slices<sum_acc_t<E>>(op, src, geometry, dst);
                }
            } else {
                throw DTypeError(
                    fmt::format("reduce: no kernel from {} to {}", dtype_name(in.dtype()), dtype_name(out.dtype())));
            }
        });
    });
}

void mse_loss(const Tensor& pred, const Tensor& target, Tensor& out) {
    visit_floating(pred.dtype(), [&](auto zero) {
        using E = decltype(zero);
        using C = float_compute_t<E>;
        const auto* p = static_cast<const E*>(pred.data());
        const auto* t = static_cast<const E*>(target.data());
        const std::int64_t n = pred.numel();
        double total = 0.0;
        for (std::int64_t start = 0; start < n; start += block) {
            const std::int64_t len = std::min(block, n - start);
            const auto diff =
                Segment<E>(p + start, len).template cast<C>() - Segment<E>(t + start, len).template cast<C>();
            total += static_cast<double>(diff.square().sum());
        }
        // 0 / 0 for an empty tensor: NaN, as for the mean of nothing.
        *static_cast<E*>(out.data()) = convert<E>(total / static_cast<double>(n));
    });
}

}  // namespace lockstep::kernels::cpu
