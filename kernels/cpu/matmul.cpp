// Matrix product on the CPU: Eigen's blocked GEMM on row-major maps of the operands, with transposition as a view.
// float16/bfloat16 operands are widened to float once, multiplied in float and rounded once into the result.

#include "cpu_kernels.hpp"
#include "eigen_types.hpp"

namespace lockstep::kernels::cpu {

namespace {

template <typename S>
using RowMatrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename S>
[[nodiscard]] Eigen::Map<const RowMatrix<S>> matrix(const Tensor& t) {
    return {static_cast<const S*>(t.data()), t.shape()[0], t.shape()[1]};
}

// c = op(a) @ op(b) for any Eigen matrix expressions a, b.
template <typename C, typename A, typename B>
void product(C& c, const A& a, const B& b, bool transpose_a, bool transpose_b) {
    if (transpose_a && transpose_b) {
        c.noalias() = a.transpose() * b.transpose();
    } else if (transpose_a) {
        c.noalias() = a.transpose() * b;
    } else if (transpose_b) {
        c.noalias() = a * b.transpose();
    } else {
        c.noalias() = a * b;
    }
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, Tensor& out) {
    visit_floating(a.dtype(), [&](auto zero) {
        using E = decltype(zero);
        Eigen::Map<RowMatrix<E>> c(static_cast<E*>(out.data()), out.shape()[0], out.shape()[1]);
        if constexpr (is_half_v<E>) {
            const RowMatrix<float> a32 = matrix<E>(a).template cast<float>();
            const RowMatrix<float> b32 = matrix<E>(b).template cast<float>();
            RowMatrix<float> c32(c.rows(), c.cols());
            product(c32, a32, b32, transpose_a, transpose_b);
            c = c32.template cast<E>();
        } else {
            product(c, matrix<E>(a), matrix<E>(b), transpose_a, transpose_b);
        }
    });
}

}  // namespace lockstep::kernels::cpu
