// The one dispatch point of the tensor math: every public operation checks its arguments here, allocates its result
// and hands the work to the backend of the operands' device (cpu:: always, cuda:: when the build has CUDA).
// Backends may therefore assume defined, same-device, same-dtype operands with compatible shapes.

#include <lockstep/build_config.hpp>
#include <lockstep/kernels.hpp>

#include "cpu/cpu_kernels.hpp"
#if LOCKSTEP_HAVE_CUDA
#include "cuda/cuda_kernels.hpp"
#endif

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <string_view>

namespace lockstep::ops {

namespace {

using kernels::BinaryOp;
using kernels::ReduceGeometry;
using kernels::Reduction;
namespace cpu = kernels::cpu;
#if LOCKSTEP_HAVE_CUDA
namespace cuda = kernels::cuda;
#endif

// Runs `call` (a backend function call) on the backend of `device`.
#if LOCKSTEP_HAVE_CUDA
#define LOCKSTEP_BACKEND(device, call) ((device).is_cuda() ? cuda::call : cpu::call)
#else
#define LOCKSTEP_BACKEND(device, call) cpu::call
#endif

std::string_view binary_name(BinaryOp op) {
    switch (op) {
        case BinaryOp::Add:
            return "add";
        case BinaryOp::Sub:
            return "sub";
        case BinaryOp::Mul:
            return "mul";
        case BinaryOp::Div:
            return "div";
    }
    return "binary op";
}

std::string_view reduce_name(Reduction op) {
    switch (op) {
        case Reduction::Sum:
            return "sum";
        case Reduction::Mean:
            return "mean";
        case Reduction::Max:
            return "max";
        case Reduction::Min:
            return "min";
    }
    return "reduction";
}

void check_operand(std::string_view op, const Tensor& t) {
    if (!t.defined()) {
        throw InvalidArgumentError(fmt::format("{}: an operand is an undefined (default-constructed) tensor", op));
    }
#if !LOCKSTEP_HAVE_CUDA
    if (t.device().is_cuda()) {
        throw DeviceError(
            fmt::format("{}: {} is on a CUDA device, but this build of lockstep has CUDA disabled; "
                        "rebuild with `meson setup -Dcuda=enabled` on a machine with the CUDA toolkit",
                        op, t.str()));
    }
#endif
}

void check_same_device(std::string_view op, const Tensor& a, const Tensor& b) {
    if (a.device() != b.device()) {
        throw DeviceError(
            fmt::format("{}: operands are on different devices ({} and {}); move one with .to(device) "
                        "first",
                        op, a.str(), b.str()));
    }
}

void check_same_dtype(std::string_view op, const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype()) {
        throw DTypeError(
            fmt::format("{}: operands have different dtypes, {} and {} ({} and {}); convert one with "
                        "ops::cast first",
                        op, dtype_name(a.dtype()), dtype_name(b.dtype()), a.str(), b.str()));
    }
}

void check_pair(std::string_view op, const Tensor& a, const Tensor& b) {
    check_operand(op, a);
    check_operand(op, b);
    check_same_device(op, a, b);
    check_same_dtype(op, a, b);
}

void check_arithmetic(std::string_view op, const Tensor& t) {
    if (t.dtype() == DType::Bool) {
        throw DTypeError(
            fmt::format("{}: arithmetic on bool tensors is not supported ({}); cast to an integer or "
                        "floating dtype first",
                        op, t.str()));
    }
}

void check_floating(std::string_view op, const Tensor& t) {
    if (!is_floating(t.dtype())) {
        throw DTypeError(
            fmt::format("{}: needs a floating dtype (float32, float64, float16 or bfloat16), got {} ({}); "
                        "cast the tensor first",
                        op, dtype_name(t.dtype()), t.str()));
    }
}

void check_equal_shapes(std::string_view op, const Tensor& a, const Tensor& b) {
    if (a.shape() != b.shape()) {
        throw ShapeError(fmt::format("{}: shapes {} and {} differ; this operation needs equal shapes", op,
                                     shape_str(a.shape()), shape_str(b.shape())));
    }
}

// The right operand's shape must equal the left one's or be a suffix of it (a bias [H] for every row of [N, H]).
void check_broadcast(std::string_view op, const Tensor& a, const Tensor& b) {
    const Shape& sa = a.shape();
    const Shape& sb = b.shape();
    if (sb.size() <= sa.size() && std::equal(sb.rbegin(), sb.rend(), sa.rbegin())) return;
    throw ShapeError(
        fmt::format("{}: shapes {} and {} do not match; the right operand's shape must equal the left "
                    "one's or be a suffix of it (for example [3] or [2, 3] with [2, 3])",
                    op, shape_str(sa), shape_str(sb)));
}

// Integer tensors take integer scalars: 2.5 has no meaning in int32 arithmetic without a cast the caller should see.
void check_scalar(std::string_view op, const Tensor& t, double scalar) {
    if (!is_integral(t.dtype())) return;
    constexpr double two_63 = 9223372036854775808.0;
    if (!std::isfinite(scalar) || std::trunc(scalar) != scalar || scalar < -two_63 || scalar >= two_63) {
        throw InvalidArgumentError(
            fmt::format("{}: scalar {} cannot be applied to the {} tensor {}: integer tensors "
                        "take integer scalars; cast the tensor to a floating dtype first",
                        op, scalar, dtype_name(t.dtype()), t.str()));
    }
}

void check_divisor_tensor(const Tensor& divisor) {
    if (!is_integral(divisor.dtype())) return;
    if (LOCKSTEP_BACKEND(divisor.device(), any_zero(divisor))) {
        throw InvalidArgumentError(
            fmt::format("div: integer division by zero: the divisor {} holds a zero element; "
                        "mask the zeros or divide in a floating dtype",
                        divisor.str()));
    }
}

void check_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
    const std::string_view name = binary_name(op);
    check_pair(name, a, b);
    check_arithmetic(name, a);
    check_broadcast(name, a, b);
    if (op == BinaryOp::Div) check_divisor_tensor(b);
}

void check_binary_scalar(BinaryOp op, const Tensor& a, double scalar) {
    const std::string_view name = binary_name(op);
    check_operand(name, a);
    check_arithmetic(name, a);
    check_scalar(name, a, scalar);
    if (op == BinaryOp::Div && is_integral(a.dtype()) && scalar == 0.0) {
        throw InvalidArgumentError(
            fmt::format("div: integer division of {} by the scalar 0; divide in a floating "
                        "dtype if infinities are wanted",
                        a.str()));
    }
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
    check_binary(op, a, b);
    Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
    LOCKSTEP_BACKEND(a.device(), binary(op, a, b, out));
    return out;
}

Tensor& binary_inplace(BinaryOp op, Tensor& a, const Tensor& b) {
    a.check_writable(binary_name(op));
    check_binary(op, a, b);
    LOCKSTEP_BACKEND(a.device(), binary(op, a, b, a));
    return a;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, double scalar) {
    check_binary_scalar(op, a, scalar);
    Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
    LOCKSTEP_BACKEND(a.device(), binary_scalar(op, a, scalar, out));
    return out;
}

// Integer and bool sums widen to int64; every other reduction keeps the input dtype.
DType reduce_result_dtype(Reduction op, DType input) {
    return op == Reduction::Sum && !is_floating(input) ? DType::Int64 : input;
}

void check_reduce(Reduction op, const Tensor& t) {
    const std::string_view name = reduce_name(op);
    check_operand(name, t);
    if (op == Reduction::Mean) check_floating(name, t);
}

Tensor reduce_all(Reduction op, const Tensor& t) {
    check_reduce(op, t);
    if ((op == Reduction::Max || op == Reduction::Min) && t.numel() == 0) {
        throw InvalidArgumentError(fmt::format("{}: {} is empty and has no {}imum; check numel() before reducing",
                                               reduce_name(op), t.str(), reduce_name(op)));
    }
    Tensor out = Tensor::empty({}, reduce_result_dtype(op, t.dtype()), t.device());
    LOCKSTEP_BACKEND(t.device(), reduce(op, t, ReduceGeometry{1, t.numel(), 1}, out));
    return out;
}

Tensor reduce_dim(Reduction op, const Tensor& t, std::int64_t dim, bool keepdim) {
    check_reduce(op, t);
    const std::string_view name = reduce_name(op);
    const std::int64_t rank = t.dim();
    if (rank == 0) {
        throw InvalidArgumentError(
            fmt::format("{}: {} is 0-d and has no dimension {} to reduce; use the whole-tensor "
                        "{}(t) instead",
                        name, t.str(), dim, name));
    }
    if (dim < -rank || dim >= rank) {
        throw InvalidArgumentError(
            fmt::format("{}: dimension {} is out of range for shape {}; valid dimensions are "
                        "{}..{}",
                        name, dim, shape_str(t.shape()), -rank, rank - 1));
    }
    const auto d = static_cast<std::size_t>(dim < 0 ? dim + rank : dim);
    const Shape& shape = t.shape();
    ReduceGeometry geometry{1, shape[d], 1};
    for (std::size_t i = 0; i < d; ++i) geometry.outer *= shape[i];
    for (std::size_t i = d + 1; i < shape.size(); ++i) geometry.inner *= shape[i];

    Shape out_shape = shape;
    if (keepdim) {
        out_shape[d] = 1;
    } else {
        out_shape.erase(out_shape.begin() + static_cast<std::ptrdiff_t>(d));
    }
    Tensor out = Tensor::empty(out_shape, reduce_result_dtype(op, t.dtype()), t.device());
    if (out.numel() == 0) return out;
    if ((op == Reduction::Max || op == Reduction::Min) && geometry.extent == 0) {
        throw InvalidArgumentError(fmt::format("{}: dimension {} of shape {} is empty, so there is no {}imum along it",
                                               name, dim, shape_str(shape), name));
    }
    LOCKSTEP_BACKEND(t.device(), reduce(op, t, geometry, out));
    return out;
}

}  // namespace

// ---- fill, copy, cast

Tensor& fill_(Tensor& t, double value) {
    t.check_writable("fill_");
    check_operand("fill_", t);
    LOCKSTEP_BACKEND(t.device(), fill(t, value));
    return t;
}

Tensor& copy_(Tensor& dst, const Tensor& src) {
    dst.check_writable("copy_");
    check_operand("copy_", dst);
    check_operand("copy_", src);
    check_same_device("copy_", dst, src);
    if (dst.numel() != src.numel()) {
        throw ShapeError(
            fmt::format("copy_: destination shape {} holds {} elements but source shape {} holds {}; "
                        "reshape one so that the counts agree",
                        shape_str(dst.shape()), dst.numel(), shape_str(src.shape()), src.numel()));
    }
    if (dst.dtype() == src.dtype()) {
        if (dst.data() != src.data()) copy_bytes(dst.data(), dst.device(), src.data(), src.device(), src.nbytes());
    } else {
        LOCKSTEP_BACKEND(dst.device(), cast(src, dst));
    }
    return dst;
}

Tensor cast(const Tensor& t, DType dtype) {
    check_operand("cast", t);
    Tensor out = Tensor::empty(t.shape(), dtype, t.device());
    if (dtype == t.dtype()) {
        copy_bytes(out.data(), out.device(), t.data(), t.device(), t.nbytes());
    } else {
        LOCKSTEP_BACKEND(t.device(), cast(t, out));
    }
    return out;
}

// ---- elementwise

Tensor add(const Tensor& a, const Tensor& b) {
    return binary(BinaryOp::Add, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
    return binary(BinaryOp::Sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
    return binary(BinaryOp::Mul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
    return binary(BinaryOp::Div, a, b);
}
Tensor add(const Tensor& a, double scalar) {
    return binary_scalar(BinaryOp::Add, a, scalar);
}
Tensor sub(const Tensor& a, double scalar) {
    return binary_scalar(BinaryOp::Sub, a, scalar);
}
Tensor mul(const Tensor& a, double scalar) {
    return binary_scalar(BinaryOp::Mul, a, scalar);
}
Tensor div(const Tensor& a, double scalar) {
    return binary_scalar(BinaryOp::Div, a, scalar);
}
Tensor& add_(Tensor& a, const Tensor& b) {
    return binary_inplace(BinaryOp::Add, a, b);
}
Tensor& sub_(Tensor& a, const Tensor& b) {
    return binary_inplace(BinaryOp::Sub, a, b);
}
Tensor& mul_(Tensor& a, const Tensor& b) {
    return binary_inplace(BinaryOp::Mul, a, b);
}
Tensor& div_(Tensor& a, const Tensor& b) {
    return binary_inplace(BinaryOp::Div, a, b);
}

Tensor& axpy_(double alpha, const Tensor& x, Tensor& y) {
    y.check_writable("axpy_");
    check_pair("axpy_", x, y);
    check_arithmetic("axpy_", y);
    check_equal_shapes("axpy_", x, y);
    check_scalar("axpy_", y, alpha);
    LOCKSTEP_BACKEND(y.device(), axpy(alpha, x, y));
    return y;
}

Tensor& scale_(Tensor& t, double alpha) {
    t.check_writable("scale_");
    check_binary_scalar(BinaryOp::Mul, t, alpha);
    LOCKSTEP_BACKEND(t.device(), binary_scalar(BinaryOp::Mul, t, alpha, t));
    return t;
}

// ---- reductions

Tensor sum(const Tensor& t) {
    return reduce_all(Reduction::Sum, t);
}
Tensor mean(const Tensor& t) {
    return reduce_all(Reduction::Mean, t);
}
Tensor max(const Tensor& t) {
    return reduce_all(Reduction::Max, t);
}
Tensor min(const Tensor& t) {
    return reduce_all(Reduction::Min, t);
}
Tensor sum(const Tensor& t, std::int64_t dim, bool keepdim) {
    return reduce_dim(Reduction::Sum, t, dim, keepdim);
}
Tensor mean(const Tensor& t, std::int64_t dim, bool keepdim) {
    return reduce_dim(Reduction::Mean, t, dim, keepdim);
}
Tensor max(const Tensor& t, std::int64_t dim, bool keepdim) {
    return reduce_dim(Reduction::Max, t, dim, keepdim);
}
Tensor min(const Tensor& t, std::int64_t dim, bool keepdim) {
    return reduce_dim(Reduction::Min, t, dim, keepdim);
}

// ---- linear algebra

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
    check_pair("matmul", a, b);
    check_floating("matmul", a);
    if (a.dim() != 2 || b.dim() != 2) {
        throw ShapeError(
            fmt::format("matmul: needs two 2-d tensors, got shapes {} and {}; reshape them to "
                        "[rows, columns] first",
                        shape_str(a.shape()), shape_str(b.shape())));
    }
    const std::int64_t m = transpose_a ? a.shape()[1] : a.shape()[0];
    const std::int64_t k = transpose_a ? a.shape()[0] : a.shape()[1];
    const std::int64_t kb = transpose_b ? b.shape()[1] : b.shape()[0];
    const std::int64_t n = transpose_b ? b.shape()[0] : b.shape()[1];
    if (k != kb) {
        throw ShapeError(
            fmt::format("matmul: inner dimensions differ: op(a) is [{}, {}] and op(b) is [{}, {}] "
                        "(shapes {} and {}, transpose_a={}, transpose_b={})",
                        m, k, kb, n, shape_str(a.shape()), shape_str(b.shape()), transpose_a, transpose_b));
    }
    Tensor out = Tensor::empty({m, n}, a.dtype(), a.device());
    LOCKSTEP_BACKEND(a.device(), matmul(a, b, transpose_a, transpose_b, out));
    return out;
}

// ---- activations and losses

Tensor relu(const Tensor& t) {
    check_operand("relu", t);
    check_floating("relu", t);
    Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
    LOCKSTEP_BACKEND(t.device(), relu(t, out));
    return out;
}

Tensor relu_backward(const Tensor& grad_output, const Tensor& input) {
    check_pair("relu_backward", grad_output, input);
    check_floating("relu_backward", input);
    check_equal_shapes("relu_backward", grad_output, input);
    Tensor out = Tensor::empty(input.shape(), input.dtype(), input.device());
    LOCKSTEP_BACKEND(input.device(), relu_backward(grad_output, input, out));
    return out;
}

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
    check_pair("mse_loss", pred, target);
    check_floating("mse_loss", pred);
    check_equal_shapes("mse_loss", pred, target);
    Tensor out = Tensor::empty({}, pred.dtype(), pred.device());
    LOCKSTEP_BACKEND(pred.device(), mse_loss(pred, target, out));
    return out;
}

Tensor mse_loss_backward(const Tensor& pred, const Tensor& target) {
    check_pair("mse_loss_backward", pred, target);
    check_floating("mse_loss_backward", pred);
    check_equal_shapes("mse_loss_backward", pred, target);
    Tensor out = Tensor::empty(pred.shape(), pred.dtype(), pred.device());
    LOCKSTEP_BACKEND(pred.device(), mse_loss_backward(pred, target, out));
    return out;
}

}  // namespace lockstep::ops
