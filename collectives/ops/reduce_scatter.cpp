// reduce_scatter: the reduction of every rank's [size * k, ...] tensor, of which rank i keeps rows [i k, (i + 1) k)
// (MPI_Reduce_scatter_block); float16/bfloat16 accumulate in float32. The _into form writes into the caller's tensor.

#include "../communicator_impl.hpp"

namespace lockstep {

namespace {
void reduce_scatter_payload(auto& impl, const Tensor& in, Tensor& out, ReduceOp op) {
    if (detail::ShmGroup* shm = impl.shm_for(in.nbytes()); shm != nullptr && shm->reduce_scatter(in, out, op)) return;
    const int n = detail::checked_count(out.numel(), "reduce_scatter");
    detail::with_host_buffers(in, out, [&](const void* src, void* dst) {
        impl.mpi(
            MPI_Reduce_scatter_block(src, dst, n, mpi_datatype(in.dtype()), detail::mpi_op(op, in.dtype()), impl.comm),
            "MPI_Reduce_scatter_block");
    });
}
}  // namespace

Tensor Communicator::reduce_scatter(const Tensor& t, Reduction op, CallSite site) {
    detail::WidenedResult r;
    impl_->run(
        {.op = OpKind::ReduceScatter, .input = &t, .reduce_op = op.op, .site = site},
        [&] {
            t.check_defined("reduce_scatter");
            detail::check_reducible(t, op.op, OpKind::ReduceScatter);
            impl_->check_divisible(t, OpKind::ReduceScatter);
            r = detail::widened_result(t, detail::split_shape(t, impl_->size), op);
        },
        [&] { reduce_scatter_payload(*impl_, r.input.of(t), r.result, op.op); });
    return detail::finish_reduce(r, op.op, impl_->size);
}

Tensor& Communicator::reduce_scatter_into(const Tensor& t, Tensor& out, Reduction op, CallSite site) {
    detail::Widened premultiplied;  // premul_sum's scaled copy of t
    impl_->run(
        {.op = OpKind::ReduceScatter, .input = &t, .output = &out, .reduce_op = op.op, .site = site},
        [&] {
            t.check_defined("reduce_scatter_into");
            out.check_defined("reduce_scatter_into");
            out.check_writable("reduce_scatter_into");
            detail::check_reducible(t, op.op, OpKind::ReduceScatter);
            impl_->check_divisible(t, OpKind::ReduceScatter);
            if (detail::is_half(t.dtype())) {
                throw DTypeError(fmt::format(
                    "reduce_scatter_into: {} accumulates in float32 through a temporary; use reduce_scatter "
                    "for float16 and bfloat16",
                    t.str()));
            }
            detail::check_output(out, t, 1, impl_->size, impl_->size, "reduce_scatter_into");
            premultiplied = detail::widen(t, op);
        },
        [&] {
            reduce_scatter_payload(*impl_, premultiplied.of(t), out, op.op);
            if (op.op == ReduceOp::Mean) detail::scale_elements_(out, 1.0 / impl_->size);
        });
    return out;
}

}  // namespace lockstep
