// alltoall: block i of dimension 0 ([size * k, ...]) goes to rank i; the result holds the blocks received, in rank
// order (MPI_Alltoall).

#include "../communicator_impl.hpp"

namespace lockstep {

Tensor Communicator::alltoall(const Tensor& t, CallSite site) {
    if (impl_->via_queue()) return ialltoall(t, site).result();
    Tensor out;
    impl_->run(
        {.op = OpKind::Alltoall, .input = &t, .site = site},
        [&] {
            t.check_defined("alltoall");
            impl_->check_divisible(t, OpKind::Alltoall);
            out = Tensor::empty(t.shape(), t.dtype(), t.device());
        },
        [&] {
            const int n = detail::checked_count(t.numel() / impl_->size, "alltoall");
            const MPI_Datatype dt = mpi_datatype(t.dtype());
            detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
                impl_->mpi(MPI_Alltoall(src, n, dt, dst, n, dt, impl_->comm), "MPI_Alltoall");
            });
        });
    return out;
}

}  // namespace lockstep
