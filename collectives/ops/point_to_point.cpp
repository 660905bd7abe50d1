// send and recv: one tensor between two ranks (MPI_Send, MPI_Recv). Not collective, so never signature-checked;
// each call is on the communicator's point-to-point board while it lasts, so that the watchdog reports a lost peer.

#include "../communicator_impl.hpp"

namespace lockstep {

namespace {

// A message tag MPI takes: 0 up to the communicator's MPI_TAG_UB (at least 32767 by the standard); a receive also
// takes MPI_ANY_TAG.
void check_tag(MPI_Comm comm, int tag, const char* what, bool any_allowed = false) {
    if (any_allowed && tag == MPI_ANY_TAG) return;
    int* upper = nullptr;
    int found = 0;
    LOCKSTEP_MPI_CHECK(MPI_Comm_get_attr(comm, MPI_TAG_UB, &upper, &found));
    const int largest = found != 0 && upper != nullptr ? *upper : 32767;
    if (tag < 0 || tag > largest) {
        throw InvalidArgumentError(fmt::format(
            "{}: tag {} is out of range; MPI message tags run from 0 to {} on this communicator", what, tag, largest));
    }
}

}  // namespace

void Communicator::send(const Tensor& t, int dest, int tag, CallSite site) {
    t.check_defined("send");
    impl_->check_peer(dest, OpKind::Send);
    check_tag(impl_->comm, tag, "send");
    const Impl::PointToPointWatch watch(
        *impl_, {.op = OpKind::Send, .input = &t, .root = dest, .message_tag = tag, .site = site});
    const int n = detail::checked_count(t.numel(), "send");
    detail::with_host_buffer(const_cast<Tensor&>(t), detail::Direction::In, [&](void* p) {
        LOCKSTEP_MPI_CHECK(MPI_Send(p, n, mpi_datatype(t.dtype()), dest, tag, impl_->comm));
    });
}

Tensor& Communicator::recv(Tensor& out, int source, int tag, CallSite site) {
    out.check_defined("recv");
    out.check_writable("recv");
    impl_->check_peer(source, OpKind::Recv);
    check_tag(impl_->comm, tag, "recv", true);
    const Impl::PointToPointWatch watch(
        *impl_, {.op = OpKind::Recv, .output = &out, .root = source, .message_tag = tag, .site = site});
    const int n = detail::checked_count(out.numel(), "recv");
    int received = 0;
    detail::with_host_buffer(out, detail::Direction::Out, [&](void* p) {
        MPI_Status status;
        LOCKSTEP_MPI_CHECK(MPI_Recv(p, n, mpi_datatype(out.dtype()), source, tag, impl_->comm, &status));
        LOCKSTEP_MPI_CHECK(MPI_Get_count(&status, mpi_datatype(out.dtype()), &received));
    });
    if (received != n) {
        throw ShapeError(
            fmt::format("recv: rank {} sent {} elements but {} expects {}; send and receive tensors of "
                        "the same shape",
                        source, received, out.str(), n));
    }
    return out;
}

int Communicator::recv_any(Tensor& out, int tag, CallSite site) {
    out.check_defined("recv");
    out.check_writable("recv");
    check_tag(impl_->comm, tag, "recv", true);
    const Impl::PointToPointWatch watch(
        *impl_, {.op = OpKind::Recv, .output = &out, .root = -1, .message_tag = tag, .site = site});
    const int n = detail::checked_count(out.numel(), "recv");
    int received = 0;
    int source = -1;
    detail::with_host_buffer(out, detail::Direction::Out, [&](void* p) {
        MPI_Status status;
        LOCKSTEP_MPI_CHECK(MPI_Recv(p, n, mpi_datatype(out.dtype()), MPI_ANY_SOURCE, tag, impl_->comm, &status));
        LOCKSTEP_MPI_CHECK(MPI_Get_count(&status, mpi_datatype(out.dtype()), &received));
        source = status.MPI_SOURCE;
    });
    if (received != n) {
        throw ShapeError(
            fmt::format("recv: rank {} sent {} elements but {} expects {}; send and receive tensors of "
                        "the same shape",
                        source, received, out.str(), n));
    }
    return source;
}

}  // namespace lockstep
