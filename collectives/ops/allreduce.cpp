// allreduce: every rank gets the reduction of all ranks' tensors (MPI_Allreduce), float16/bfloat16 accumulated in
// float32; in place in chunks when a CUDA tensor is staged through the host. premul_sum multiplies the input (in
// place: the tensor itself; otherwise a copy) by the factor, then sums.

#include "../communicator_impl.hpp"

namespace lockstep {

Tensor& Communicator::allreduce_(Tensor& t, Reduction op, CallSite site) {
    detail::Widened work;
    impl_->run(
        {.op = OpKind::Allreduce, .input = &t, .reduce_op = op.op, .site = site},
        [&] {
            t.check_defined("allreduce");
            t.check_writable("allreduce_");
            detail::check_reducible(t, op.op, OpKind::Allreduce);
            work = detail::widen(t);
        },
        [&] {
            Tensor& target = work.of(t);
            detail::premultiply_(t, work, op);
            detail::ShmGroup* shm = impl_->shm_for(target.nbytes());
            if (shm == nullptr || !shm->allreduce(target, target, op.op)) {
                detail::with_host_chunks(target, [&](void* p, std::int64_t count) {
                    impl_->mpi(
                        MPI_Allreduce(MPI_IN_PLACE, p, detail::checked_count(count, "allreduce"),
                                      mpi_datatype(target.dtype()), detail::mpi_op(op.op, target.dtype()), impl_->comm),
                        "MPI_Allreduce");
                });
            }
            detail::finish_reduce_(t, work, op.op, impl_->size);
        });
    return t;
}

Tensor Communicator::allreduce(const Tensor& t, Reduction op, CallSite site) {
    detail::WidenedResult r;
    impl_->run(
        {.op = OpKind::Allreduce, .input = &t, .reduce_op = op.op, .site = site},
        [&] {
            t.check_defined("allreduce");
            detail::check_reducible(t, op.op, OpKind::Allreduce);
            r = detail::widened_result(t, t.shape(), op);
        },
        [&] {
            const Tensor& in = r.input.of(t);
            if (detail::ShmGroup* shm = impl_->shm_for(in.nbytes());
                shm != nullptr && shm->allreduce(in, r.result, op.op)) {
                return;
            }
            const int n = detail::checked_count(in.numel(), "allreduce");
            detail::with_host_buffers(in, r.result, [&](const void* src, void* dst) {
                impl_->mpi(MPI_Allreduce(src, dst, n, mpi_datatype(in.dtype()), detail::mpi_op(op.op, in.dtype()),
                                         impl_->comm),
                           "MPI_Allreduce");
            });
        });
    return detail::finish_reduce(r, op.op, impl_->size);
}

}  // namespace lockstep
