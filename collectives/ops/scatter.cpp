// scatter: the root's [size * k, ...] tensor split along dimension 0; rank i gets rows [i k, (i + 1) k) (MPI_Scatter).

#include "../communicator_impl.hpp"

namespace lockstep {

Tensor Communicator::scatter(const Tensor& t, int root, CallSite site) {
    if (impl_->via_queue()) return iscatter(t, root, site).result();
    Tensor out;
    impl_->run(
        {.op = OpKind::Scatter, .input = &t, .root = root, .site = site},
        [&] {
            t.check_defined("scatter");
            impl_->check_divisible(t, OpKind::Scatter);
            out = Tensor::empty(detail::split_shape(t, impl_->size), t.dtype(), t.device());
        },
        [&] {
            const int n = detail::checked_count(out.numel(), "scatter");
            const MPI_Datatype dt = mpi_datatype(t.dtype());
            detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
                impl_->mpi(MPI_Scatter(impl_->rank == root ? src : nullptr, n, dt, dst, n, dt, root, impl_->comm),
                           "MPI_Scatter");
            });
        });
    return out;
}

}  // namespace lockstep
