// broadcast: the root's tensor to every rank (MPI_Bcast), in chunks when a CUDA tensor is staged through the host.

#include "../communicator_impl.hpp"

namespace lockstep {

namespace {
void broadcast_chunks(auto& impl, Tensor& t, int root) {
    if (detail::ShmGroup* shm = impl.shm_for(t.nbytes()); shm != nullptr && shm->broadcast(t, root)) return;
    detail::with_host_chunks(t, [&](void* p, std::int64_t count) {
        impl.mpi(MPI_Bcast(p, detail::checked_count(count, "broadcast"), mpi_datatype(t.dtype()), root, impl.comm),
                 "MPI_Bcast");
    });
}
}  // namespace

Tensor& Communicator::broadcast_(Tensor& t, int root, CallSite site) {
    if (impl_->via_queue()) return detail::waited(ibroadcast_(t, root, site), t);
    impl_->run(
        {.op = OpKind::Broadcast, .input = &t, .root = root, .site = site},
        [&] {
            t.check_defined("broadcast");
            if (impl_->rank != root) t.check_writable("broadcast_");  // the root only reads
        },
        [&] { broadcast_chunks(*impl_, t, root); });
    return t;
}

Tensor Communicator::broadcast(const Tensor& t, int root, CallSite site) {
    if (impl_->via_queue()) return ibroadcast(t, root, site).result();
    Tensor out;
    impl_->run(
        {.op = OpKind::Broadcast, .input = &t, .root = root, .site = site},
        [&] {
            t.check_defined("broadcast");
            out = impl_->rank == root ? t.clone() : Tensor::empty(t.shape(), t.dtype(), t.device());
        },
        [&] { broadcast_chunks(*impl_, out, root); });
    return out;
}

}  // namespace lockstep
