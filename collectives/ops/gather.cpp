// gather: every rank's tensor concatenated along dimension 0 in rank order, at the root only (MPI_Gather).

#include "../communicator_impl.hpp"

namespace lockstep {

Tensor Communicator::gather(const Tensor& t, int root, CallSite site) {
    if (impl_->via_queue()) return igather(t, root, site).result();
    const bool is_root = impl_->rank == root;
    Tensor out;
    impl_->run(
        {.op = OpKind::Gather, .input = &t, .root = root, .site = site},
        [&] {
            t.check_defined("gather");
            if (is_root) out = Tensor::empty(detail::stacked_shape(t, impl_->size), t.dtype(), t.device());
        },
        [&] {
            const int n = detail::checked_count(t.numel(), "gather");
            const MPI_Datatype dt = mpi_datatype(t.dtype());
            // Non-roots pass their input as the receive buffer MPI ignores there.
            Tensor& result = is_root ? out : const_cast<Tensor&>(t);
            detail::with_host_buffers(
                t, result,
                [&](const void* src, void* dst) {
                    impl_->mpi(MPI_Gather(src, n, dt, is_root ? dst : nullptr, n, dt, root, impl_->comm), "MPI_Gather");
                },
                is_root);
        });
    return out;
}

}  // namespace lockstep
