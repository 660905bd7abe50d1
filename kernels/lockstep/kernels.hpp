#pragma once
// Tensor math. One dispatch point (kernels/dispatch.cpp) sends each call to the CPU implementation (Eigen, mapping
// tensor storage without copies) or the CUDA one (grid-stride kernels, cuBLAS for matmul) by the tensors' device.
// A CUDA tensor in a build without CUDA is a DeviceError.
//
// Rules shared by every operation:
// - Operands must be on the same device (DeviceError) and, unless stated, of the same dtype (DTypeError naming both).
// - Binary elementwise operations take equal shapes, or a right operand whose shape is a suffix of the left one's
//   (a bias [H] added to every row of [N, H]); anything else is a ShapeError naming both shapes.
// - float16/bfloat16 compute in float32 and round once on store. Integer division by zero is an
//   InvalidArgumentError. Arithmetic on bool tensors is a DTypeError (fill, copy and cast accept bool).
// - Results are new tensors on the inputs' device; functions ending in `_` write in place and return their target,
//   which must not be read-only (ReadOnlyError, before anything is checked or written).

#include <lockstep/export.hpp>
#include <lockstep/tensor.hpp>

#include <cstdint>

namespace lockstep::ops {

// ---- fill, copy, cast. Conversions between dtypes: floating to integer truncates toward zero into int64 (saturating
// at its bounds, NaN becomes 0) and then wraps into the target width, as C++ converts one integer type to another;
// anything to bool is `!= 0`; anything to float16/bfloat16 rounds once, to nearest even, from the exact value.
// fill_ converts `value` by the same rules.
LOCKSTEP_API Tensor& fill_(Tensor& t, double value);
// Copies src into dst elementwise, converting dtype if they differ; equal element counts required (shapes may differ).
LOCKSTEP_API Tensor& copy_(Tensor& dst, const Tensor& src);
[[nodiscard]] LOCKSTEP_API Tensor cast(const Tensor& t, DType dtype);

// ---- elementwise. Integer arithmetic wraps modulo 2^bits (two's complement) and division truncates toward zero.
// A scalar applied to an integer tensor must be an integer value (InvalidArgumentError otherwise: cast first).
[[nodiscard]] LOCKSTEP_API Tensor add(const Tensor& a, const Tensor& b);
[[nodiscard]] LOCKSTEP_API Tensor sub(const Tensor& a, const Tensor& b);
[[nodiscard]] LOCKSTEP_API Tensor mul(const Tensor& a, const Tensor& b);
[[nodiscard]] LOCKSTEP_API Tensor div(const Tensor& a, const Tensor& b);
[[nodiscard]] LOCKSTEP_API Tensor add(const Tensor& a, double scalar);
[[nodiscard]] LOCKSTEP_API Tensor sub(const Tensor& a, double scalar);
[[nodiscard]] LOCKSTEP_API Tensor mul(const Tensor& a, double scalar);
[[nodiscard]] LOCKSTEP_API Tensor div(const Tensor& a, double scalar);
LOCKSTEP_API Tensor& add_(Tensor& a, const Tensor& b);
LOCKSTEP_API Tensor& sub_(Tensor& a, const Tensor& b);
LOCKSTEP_API Tensor& mul_(Tensor& a, const Tensor& b);
LOCKSTEP_API Tensor& div_(Tensor& a, const Tensor& b);
// y += alpha * x (equal shapes).
LOCKSTEP_API Tensor& axpy_(double alpha, const Tensor& x, Tensor& y);
// t *= alpha.
LOCKSTEP_API Tensor& scale_(Tensor& t, double alpha);

// ---- reductions. Whole-tensor reductions return a 0-d tensor. Integer and bool sums accumulate and return int64;
// floating sums keep the dtype (float16/bfloat16 accumulate in float32). mean is floating only (DTypeError on
// integers). max/min keep the dtype (bool included) and propagate NaN; max/min of an empty tensor is an
// InvalidArgumentError. Along a dimension (negative counts from the end), the dimension is removed unless keepdim.
[[nodiscard]] LOCKSTEP_API Tensor sum(const Tensor& t);
[[nodiscard]] LOCKSTEP_API Tensor mean(const Tensor& t);
[[nodiscard]] LOCKSTEP_API Tensor max(const Tensor& t);
[[nodiscard]] LOCKSTEP_API Tensor min(const Tensor& t);
[[nodiscard]] LOCKSTEP_API Tensor sum(const Tensor& t, std::int64_t dim, bool keepdim = false);
[[nodiscard]] LOCKSTEP_API Tensor mean(const Tensor& t, std::int64_t dim, bool keepdim = false);
[[nodiscard]] LOCKSTEP_API Tensor max(const Tensor& t, std::int64_t dim, bool keepdim = false);
[[nodiscard]] LOCKSTEP_API Tensor min(const Tensor& t, std::int64_t dim, bool keepdim = false);

// ---- linear algebra: op(a) @ op(b) for 2-d tensors, op = transpose when the flag is set. Floating dtypes.
[[nodiscard]] LOCKSTEP_API Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                                         bool transpose_b = false);

// ---- activations and losses (floating dtypes)
[[nodiscard]] LOCKSTEP_API Tensor relu(const Tensor& t);
// grad_output where input > 0, else 0.
[[nodiscard]] LOCKSTEP_API Tensor relu_backward(const Tensor& grad_output, const Tensor& input);
// mean((pred - target)^2) as a 0-d tensor of pred's dtype.
[[nodiscard]] LOCKSTEP_API Tensor mse_loss(const Tensor& pred, const Tensor& target);
// d mse / d pred = 2 (pred - target) / numel.
[[nodiscard]] LOCKSTEP_API Tensor mse_loss_backward(const Tensor& pred, const Tensor& target);

}  // namespace lockstep::ops

namespace lockstep {
inline Tensor operator+(const Tensor& a, const Tensor& b) {
    return ops::add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
    return ops::sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
    return ops::mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
    return ops::div(a, b);
}
inline Tensor operator+(const Tensor& a, double s) {
    return ops::add(a, s);
}
inline Tensor operator-(const Tensor& a, double s) {
    return ops::sub(a, s);
}
inline Tensor operator*(const Tensor& a, double s) {
    return ops::mul(a, s);
}
inline Tensor operator/(const Tensor& a, double s) {
    return ops::div(a, s);
}
}  // namespace lockstep
