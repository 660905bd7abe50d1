// allgather: every rank's tensor concatenated along dimension 0 in rank order, on every rank (MPI_Allgather); the
// _into form writes into the caller's tensor.

#include "../communicator_impl.hpp"

namespace lockstep {

namespace {
void allgather_payload(auto& impl, const Tensor& t, Tensor& out) {
    if (detail::ShmGroup* shm = impl.shm_for(t.nbytes()); shm != nullptr && shm->allgather(t, out)) return;
    const int n = detail::checked_count(t.numel(), "allgather");
    const MPI_Datatype dt = mpi_datatype(t.dtype());
    detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
        impl.mpi(MPI_Allgather(src, n, dt, dst, n, dt, impl.comm), "MPI_Allgather");
    });
}
}  // namespace

Tensor Communicator::allgather(const Tensor& t, CallSite site) {
    if (impl_->via_queue()) return iallgather(t, site).result();
    Tensor out;
    impl_->run(
        {.op = OpKind::Allgather, .input = &t, .site = site},
        [&] {
            t.check_defined("allgather");
            out = Tensor::empty(detail::stacked_shape(t, impl_->size), t.dtype(), t.device());
        },
        [&] { allgather_payload(*impl_, t, out); });
    return out;
}

Tensor& Communicator::allgather_into(const Tensor& t, Tensor& out, CallSite site) {
    if (impl_->via_queue()) return detail::waited(iallgather_into(t, out, site), out);
    impl_->run(
        {.op = OpKind::Allgather, .input = &t, .output = &out, .site = site},
        [&] {
            t.check_defined("allgather_into");
            out.check_defined("allgather_into");
            out.check_writable("allgather_into");
            detail::check_output(out, t, impl_->size, 1, impl_->size, "allgather_into");
        },
        [&] { allgather_payload(*impl_, t, out); });
    return out;
}

}  // namespace lockstep
