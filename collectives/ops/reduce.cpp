// reduce: the reduction of all ranks' tensors, at the root only (MPI_Reduce); other ranks get an undefined tensor.

#include "../communicator_impl.hpp"

namespace lockstep {

Tensor Communicator::reduce(const Tensor& t, Reduction op, int root, CallSite site) {
    const bool is_root = impl_->rank == root;
    detail::WidenedResult r;
    impl_->run(
        {.op = OpKind::Reduce, .input = &t, .root = root, .reduce_op = op.op, .site = site},
        [&] {
            t.check_defined("reduce");
            detail::check_reducible(t, op.op, OpKind::Reduce);
            r = detail::widened_result(t, t.shape(), op, /*receives=*/is_root);  // MPI ignores non-roots' buffer
        },
        [&] {
            const Tensor& in = r.input.of(t);
            if (detail::ShmGroup* shm = impl_->shm_for(in.nbytes());
                shm != nullptr && shm->reduce(in, is_root ? &r.result : nullptr, op.op, root)) {
                return;
            }
            const int n = detail::checked_count(in.numel(), "reduce");
            detail::with_host_buffers(
                in, r.result,
                [&](const void* src, void* dst) {
                    impl_->mpi(MPI_Reduce(src, is_root ? dst : nullptr, n, mpi_datatype(in.dtype()),
                                          detail::mpi_op(op.op, in.dtype()), root, impl_->comm),
                               "MPI_Reduce");
                },
                /*copy_back=*/is_root);
        });
    return detail::finish_reduce(r, op.op, impl_->size);
}

}  // namespace lockstep
