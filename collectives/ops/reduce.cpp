// reduce: the reduction of all ranks' tensors, at the root only (MPI_Reduce); other ranks get an undefined tensor.

#include "../communicator_impl.hpp"

namespace lockstep {

Tensor Communicator::reduce(const Tensor& t, ReduceOp op, int root, CallSite site) {
    t.check_defined("reduce");
    Tensor out;
    impl_->run({.op = OpKind::Reduce, .input = &t, .root = root, .reduce_op = op, .site = site}, [&] {
        detail::check_reducible(t, op, OpKind::Reduce);
        const bool is_root = impl_->rank == root;
        // Non-roots allocate an empty result only: MPI ignores their receive buffer.
        const Shape result_shape = is_root ? t.shape() : Shape{0};
        out = detail::widened_reduce(t, op, impl_->size, result_shape, [&](const Tensor& in, Tensor& result) {
            const int n = detail::checked_count(in.numel(), "reduce");
            detail::with_host_buffers(
                in, result,
                [&](const void* src, void* dst) {
                    impl_->mpi(MPI_Reduce(src, is_root ? dst : nullptr, n, mpi_datatype(in.dtype()),
                                          detail::mpi_op(op, in.dtype()), root, impl_->comm),
                               "MPI_Reduce");
                },
                /*copy_back=*/is_root);
            return is_root;
        });
    });
    return out;
}

}  // namespace lockstep
