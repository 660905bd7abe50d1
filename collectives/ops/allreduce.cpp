// allreduce: every rank gets the reduction of all ranks' tensors (MPI_Allreduce), float16/bfloat16 accumulated in
// float32; in place in chunks when a CUDA tensor is staged through the host.

#include "../communicator_impl.hpp"

namespace lockstep {

Tensor& Communicator::allreduce_(Tensor& t, ReduceOp op, CallSite site) {
    t.check_defined("allreduce");
    impl_->run({.op = OpKind::Allreduce, .input = &t, .reduce_op = op, .site = site}, [&] {
        detail::check_reducible(t, op, OpKind::Allreduce);
        detail::widened_reduce_(t, op, impl_->size, [&](Tensor& work) {
            detail::with_host_chunks(work, [&](void* p, std::int64_t count) {
                impl_->mpi(MPI_Allreduce(MPI_IN_PLACE, p, detail::checked_count(count, "allreduce"),
                                         mpi_datatype(work.dtype()), detail::mpi_op(op, work.dtype()), impl_->comm),
                           "MPI_Allreduce");
            });
        });
    });
    return t;
}

Tensor Communicator::allreduce(const Tensor& t, ReduceOp op, CallSite site) {
    t.check_defined("allreduce");
    Tensor out;
    impl_->run({.op = OpKind::Allreduce, .input = &t, .reduce_op = op, .site = site}, [&] {
        detail::check_reducible(t, op, OpKind::Allreduce);
        out = detail::widened_reduce(t, op, impl_->size, t.shape(), [&](const Tensor& in, Tensor& result) {
            const int n = detail::checked_count(in.numel(), "allreduce");
            detail::with_host_buffers(in, result, [&](const void* src, void* dst) {
                impl_->mpi(
                    MPI_Allreduce(src, dst, n, mpi_datatype(in.dtype()), detail::mpi_op(op, in.dtype()), impl_->comm),
                    "MPI_Allreduce");
            });
            return true;
        });
    });
    return out;
}

}  // namespace lockstep
