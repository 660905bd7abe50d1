// Elementwise CPU kernels: fill, cast, the four binary operations (tensor-tensor with suffix broadcast, and
// tensor-scalar), axpy, relu with its gradient and the gradient of the mean squared error.
//
// Floating types evaluate one Eigen expression per call, in float for float16/bfloat16 and cast once on store.
// A broadcast right operand of n elements is applied to the left operand viewed as an [n, rows] column-major array,
// so `colwise()` adds it to every row of the original without copying. Integer addition, subtraction and
// multiplication run on the unsigned type of the same width, which wraps exactly like two's complement arithmetic
// but without signed overflow; division truncates toward zero, and INT_MIN / -1 wraps to INT_MIN.

#include "cpu_kernels.hpp"
#include "eigen_types.hpp"

#include <cstdint>
#include <type_traits>

namespace lockstep::kernels::cpu {

namespace {

// dst = (lhs op rhs) cast to the storage type S. lhs and rhs are Eigen expressions, vectorwise ops or scalars.
template <typename S, typename Dst, typename Lhs, typename Rhs>
void assign_binary(BinaryOp op, Dst&& dst, const Lhs& lhs, const Rhs& rhs) {
    switch (op) {
        case BinaryOp::Add:
            dst = (lhs + rhs).template cast<S>();
            return;
        case BinaryOp::Sub:
            dst = (lhs - rhs).template cast<S>();
            return;
        case BinaryOp::Mul:
            dst = (lhs * rhs).template cast<S>();
            return;
        case BinaryOp::Div:
            dst = (lhs / rhs).template cast<S>();
            return;
    }
}

// out = a op b over C, where a and out have n elements and b has nb (nb divides n).
template <typename S, typename C>
void binary_mapped(BinaryOp op, const S* a, const S* b, S* out, std::int64_t n, std::int64_t nb) {
    if (n == 0) return;
    if (nb == n) {
        Eigen::Map<const Array1<S>> A(a, n), B(b, n);
        Eigen::Map<Array1<S>> O(out, n);
        assign_binary<S>(op, O, A.template cast<C>(), B.template cast<C>());
    } else if (nb == 1) {
        Eigen::Map<const Array1<S>> A(a, n);
        Eigen::Map<Array1<S>> O(out, n);
        assign_binary<S>(op, O, A.template cast<C>(), static_cast<C>(b[0]));
    } else {
        using Grid = Eigen::Array<S, Eigen::Dynamic, Eigen::Dynamic>;
        Eigen::Map<const Grid> A(a, nb, n / nb);
        Eigen::Map<const Array1<S>> B(b, nb);
        Eigen::Map<Grid> O(out, nb, n / nb);
        assign_binary<S>(op, O, A.template cast<C>().colwise(), B.template cast<C>());
    }
}

template <typename T>
[[nodiscard]] T wrapping_div(T x, T y) noexcept {
    if constexpr (std::is_signed_v<T>) {
        if (y == T(-1)) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(x));
    }
    return static_cast<T>(x / y);
}

template <typename T>
void integer_div(const T* a, const T* b, T* out, std::int64_t n, std::int64_t nb) {
    if (n == 0) return;
    for (std::int64_t row = 0; row < n / nb; ++row) {
        const T* arow = a + row * nb;
        T* orow = out + row * nb;
        for (std::int64_t j = 0; j < nb; ++j) orow[j] = wrapping_div(arow[j], b[j]);
    }
}

template <typename T>
[[nodiscard]] auto as_unsigned(T* p) noexcept {
    using U = std::make_unsigned_t<std::remove_const_t<T>>;
    if constexpr (std::is_const_v<T>) {
        return reinterpret_cast<const U*>(p);
    } else {
        return reinterpret_cast<U*>(p);
    }
}

// An integer scalar (checked integral by the dispatch point) in T's arithmetic modulo 2^bits.
template <typename T>
[[nodiscard]] T wrap_scalar(double scalar) noexcept {
    return static_cast<T>(saturate_to_int64(scalar));
}

}  // namespace

void fill(Tensor& t, double value) {
    visit_eigen(t.dtype(), [&](auto zero) {
        using E = decltype(zero);
        flat<E>(t).setConstant(convert<E>(value));
    });
}

void cast(const Tensor& src, Tensor& dst) {
    visit_eigen(src.dtype(), [&](auto src_zero) {
        using From = decltype(src_zero);
        visit_eigen(dst.dtype(), [&](auto dst_zero) {
            using To = decltype(dst_zero);
            flat<To>(dst) = flat<From>(src).unaryExpr([](From v) { return convert<To>(v); });
        });
    });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
    visit_arithmetic(a.dtype(), [&](auto zero) {
        using E = decltype(zero);
        const auto* pa = static_cast<const E*>(a.data());
        const auto* pb = static_cast<const E*>(b.data());
        auto* po = static_cast<E*>(out.data());
        if constexpr (std::is_integral_v<E>) {
            if (op == BinaryOp::Div) {
                integer_div(pa, pb, po, a.numel(), b.numel());
            } else {
                using U = std::make_unsigned_t<E>;
                binary_mapped<U, U>(op, as_unsigned(pa), as_unsigned(pb), as_unsigned(po), a.numel(), b.numel());
            }
        } else {
            binary_mapped<E, float_compute_t<E>>(op, pa, pb, po, a.numel(), b.numel());
        }
    });
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, Tensor& out) {
    visit_arithmetic(a.dtype(), [&](auto zero) {
        using E = decltype(zero);
        const std::int64_t n = a.numel();
        if constexpr (std::is_integral_v<E>) {
            const auto* pa = static_cast<const E*>(a.data());
            auto* po = static_cast<E*>(out.data());
            if (op == BinaryOp::Div) {
                // In int64, so that a divisor outside E's range (7 / 300 for int8) still truncates correctly.
                const std::int64_t divisor = saturate_to_int64(scalar);
                for (std::int64_t i = 0; i < n; ++i) {
                    po[i] = static_cast<E>(wrapping_div(static_cast<std::int64_t>(pa[i]), divisor));
                }
            } else {
                using U = std::make_unsigned_t<E>;
                Eigen::Map<const Array1<U>> A(as_unsigned(pa), n);
                Eigen::Map<Array1<U>> O(as_unsigned(po), n);
                assign_binary<U>(op, O, A, static_cast<U>(wrap_scalar<E>(scalar)));
            }
        } else {
            using C = float_compute_t<E>;
            assign_binary<E>(op, flat<E>(out), flat<E>(a).template cast<C>(), static_cast<C>(scalar));
        }
    });
}

void axpy(double alpha, const Tensor& x, Tensor& y) {
    visit_arithmetic(y.dtype(), [&](auto zero) {
        using E = decltype(zero);
        const std::int64_t n = y.numel();
        if constexpr (std::is_integral_v<E>) {
            using U = std::make_unsigned_t<E>;
            Eigen::Map<const Array1<U>> X(as_unsigned(static_cast<const E*>(x.data())), n);
            Eigen::Map<Array1<U>> Y(as_unsigned(static_cast<E*>(y.data())), n);
            Y = (Y + static_cast<U>(wrap_scalar<E>(alpha)) * X).template cast<U>();
        } else {
            using C = float_compute_t<E>;
            auto Y = flat<E>(y);
            Y = (Y.template cast<C>() + static_cast<C>(alpha) * flat<E>(x).template cast<C>()).template cast<E>();
        }
    });
}

bool any_zero(const Tensor& t) {
    bool found = false;
    visit_eigen(t.dtype(), [&](auto zero) {
        using E = decltype(zero);
        found = (flat<E>(t) == E{0}).any();
    });
    return found;
}

void relu(const Tensor& in, Tensor& out) {
    visit_floating(in.dtype(), [&](auto zero) {
        using E = decltype(zero);
        using C = float_compute_t<E>;
        const auto X = flat<E>(in).template cast<C>();
        // x < 0 ? 0 : x keeps NaN (the comparison is false) instead of hiding it as 0.
        flat<E>(out) = (X < C(0)).select(C(0), X).template cast<E>();
    });
}

void relu_backward(const Tensor& grad_output, const Tensor& input, Tensor& out) {
    visit_floating(input.dtype(), [&](auto zero) {
        using E = decltype(zero);
        using C = float_compute_t<E>;
        const auto X = flat<E>(input).template cast<C>();
        const auto G = flat<E>(grad_output).template cast<C>();
        flat<E>(out) = (X > C(0)).select(G, C(0)).template cast<E>();
    });
}

void mse_loss_backward(const Tensor& pred, const Tensor& target, Tensor& out) {
    visit_floating(pred.dtype(), [&](auto zero) {
        using E = decltype(zero);
        using C = float_compute_t<E>;
        if (pred.numel() == 0) return;
        const C scale = static_cast<C>(2.0 / static_cast<double>(pred.numel()));
        flat<E>(out) =
            ((flat<E>(pred).template cast<C>() - flat<E>(target).template cast<C>()) * scale).template cast<E>();
    });
}

}  // namespace lockstep::kernels::cpu
