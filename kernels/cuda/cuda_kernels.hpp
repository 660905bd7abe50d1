#pragma once
// The CUDA backend: grid-stride kernels on the default stream of the tensors' device, cuBLAS for matmul. The dispatch
// point (kernels/dispatch.cpp) has already checked devices, dtypes and shapes and allocated every output; these
// functions only compute. Tensors are contiguous, so each one is read as a flat array of numel() elements.
// Plain C++ (no CUDA headers): dispatch.cpp includes it with g++.

#include "../op_kinds.hpp"

#include <lockstep/tensor.hpp>

namespace lockstep::kernels::cuda {

void fill(Tensor& t, double value);
// Converts every element of src into dst's dtype (equal element counts).
void cast(const Tensor& src, Tensor& dst);

// out = a op b[i % b.numel()]: b's shape is a suffix of a's. out may be a (in place).
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
// out = a op scalar. For integer dtypes the scalar is an integer value (checked by the caller).
void binary_scalar(BinaryOp op, const Tensor& a, double scalar, Tensor& out);
// y += alpha * x.
void axpy(double alpha, const Tensor& x, Tensor& y);
// True when some element equals zero (the integer division check).
[[nodiscard]] bool any_zero(const Tensor& t);

// out[o, i] = op over j of in[o, j, i]; out has the dtype the dispatch chose (int64 for integer sums).
void reduce(Reduction op, const Tensor& in, ReduceGeometry geometry, Tensor& out);

// out = op(a) @ op(b) for 2-d row-major tensors of one floating dtype.
void matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, Tensor& out);

void relu(const Tensor& in, Tensor& out);
void relu_backward(const Tensor& grad_output, const Tensor& input, Tensor& out);
// out (0-d) = mean((pred - target)^2).
void mse_loss(const Tensor& pred, const Tensor& target, Tensor& out);
void mse_loss_backward(const Tensor& pred, const Tensor& target, Tensor& out);

}  // namespace lockstep::kernels::cuda
