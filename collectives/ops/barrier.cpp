// barrier: every rank waits until all have arrived (MPI_Barrier).

#include "../communicator_impl.hpp"

namespace lockstep {

void Communicator::barrier(CallSite site) {
    if (impl_->via_queue()) return ibarrier(site).wait();
    impl_->run({.op = OpKind::Barrier, .site = site}, [&] {
        if (detail::ShmGroup* shm = impl_->shm_for(0); shm != nullptr && shm->barrier_call()) return;
        impl_->mpi(MPI_Barrier(impl_->comm), "MPI_Barrier");
    });
}

}  // namespace lockstep
