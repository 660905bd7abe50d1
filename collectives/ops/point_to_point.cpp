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

// A receive's message against the tensor it was posted with: a ShapeError when the sender sent fewer elements, or
// bytes that are not a whole number of elements (a tensor of another dtype).
void check_received(const char* what, const MPI_Status& status, MPI_Datatype type, int expected, const Tensor& out) {
    int received = 0;
    LOCKSTEP_MPI_CHECK(MPI_Get_count(&status, type, &received));
    if (received == expected) return;
    std::string sent;
    if (received == MPI_UNDEFINED) {
        int bytes = 0;
        LOCKSTEP_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &bytes));
        sent = fmt::format("{} bytes, not a whole number of {} elements", bytes, dtype_name(out.dtype()));
    } else {
        sent = fmt::format("{} elements", received);
    }
    throw ShapeError(
        fmt::format("{}: rank {} sent {} but {} expects {}; send and receive tensors of the same dtype "
                    "and shape",
                    what, status.MPI_SOURCE, sent, out.str(), expected));
}

}  // namespace

Work Communicator::Impl::post_receive(Tensor& out, int source, int tag, const CallSite& site) {
    Impl& impl = *this;
    auto w = impl.new_work({.op = OpKind::Recv,
                            .output = &out,
                            .root = source == MPI_ANY_SOURCE ? -1 : source,
                            .message_tag = tag,
                            .site = site});
    w->buffer = detail::nonblocking_buffer(out, detail::Direction::Out);
    w->target = out;
    w->datatype = mpi_datatype(out.dtype());
    w->p2p_board = impl.p2p_board;
    w->expected = detail::checked_count(out.numel(), "irecv");
    LOCKSTEP_MPI_CHECK(MPI_Irecv(w->expected == 0 ? nullptr : w->buffer.data(), w->expected, w->datatype, source, tag,
                                 impl.comm, &w->request));
    detail::register_work(w);
    return Work(std::move(w));
}

void Communicator::send(const Tensor& t, int dest, int tag, CallSite site) {
    t.check_defined("send");
    impl_->check_peer(dest, OpKind::Send);
    check_tag(impl_->comm, tag, "send");
    Impl::PointToPointWatch watch(*impl_,
                                  {.op = OpKind::Send, .input = &t, .root = dest, .message_tag = tag, .site = site});
    watch.run([&] {
        const int n = detail::checked_count(t.numel(), "send");
        detail::with_host_buffer(const_cast<Tensor&>(t), detail::Direction::In, [&](void* p) {
            LOCKSTEP_MPI_CHECK(MPI_Send(p, n, mpi_datatype(t.dtype()), dest, tag, impl_->comm));
        });
    });
}

Tensor& Communicator::recv(Tensor& out, int source, int tag, CallSite site) {
    out.check_defined("recv");
    out.check_writable("recv");
    impl_->check_peer(source, OpKind::Recv);
    check_tag(impl_->comm, tag, "recv", true);
    Impl::PointToPointWatch watch(
        *impl_, {.op = OpKind::Recv, .output = &out, .root = source, .message_tag = tag, .site = site});
    watch.run([&] {
        const int n = detail::checked_count(out.numel(), "recv");
        MPI_Status status;
        detail::with_host_buffer(out, detail::Direction::Out, [&](void* p) {
            LOCKSTEP_MPI_CHECK(MPI_Recv(p, n, mpi_datatype(out.dtype()), source, tag, impl_->comm, &status));
        });
        check_received("recv", status, mpi_datatype(out.dtype()), n, out);
    });
    return out;
}

// The non-blocking forms: MPI_Isend/MPI_Irecv posted at once, completed by the first test that sees them done
// (async/work.cpp). Arguments are checked at issue, as the blocking forms check them.
Work Communicator::isend(const Tensor& t, int dest, int tag, CallSite site) {
    t.check_defined("isend");
    impl_->check_peer(dest, OpKind::Send);
    check_tag(impl_->comm, tag, "isend");
    auto w = impl_->new_work({.op = OpKind::Send, .input = &t, .root = dest, .message_tag = tag, .site = site});
    w->buffer = detail::nonblocking_buffer(t, detail::Direction::In);
    w->datatype = mpi_datatype(t.dtype());
    w->p2p_board = impl_->p2p_board;
    const int n = detail::checked_count(t.numel(), "isend");
    LOCKSTEP_MPI_CHECK(
        MPI_Isend(n == 0 ? nullptr : w->buffer.data(), n, w->datatype, dest, tag, impl_->comm, &w->request));
    detail::register_work(w);
    return Work(std::move(w));
}

Work Communicator::irecv(Tensor& out, int source, int tag, CallSite site) {
    out.check_defined("irecv");
    out.check_writable("irecv");
    impl_->check_peer(source, OpKind::Recv);
    check_tag(impl_->comm, tag, "irecv", true);
    return impl_->post_receive(out, source, tag, site);
}

Work Communicator::irecv_any(Tensor& out, int tag, CallSite site) {
    out.check_defined("irecv");
    out.check_writable("irecv");
    check_tag(impl_->comm, tag, "irecv", true);
    return impl_->post_receive(out, MPI_ANY_SOURCE, tag, site);
}

namespace detail {

bool progress_point_to_point(WorkState& w) {
    if (w.done()) return true;
    const std::unique_lock lock(w.progress_mutex, std::try_to_lock);
    if (!lock.owns_lock() || w.done()) return w.done();  // another thread is testing it
    int flag = 0;
    MPI_Status status;
    std::exception_ptr failure;
    try {
        LOCKSTEP_MPI_CHECK(MPI_Test(&w.request, &flag, &status));
        if (flag == 0) return false;
        if (w.record.op == OpKind::Recv) {
            w.source = status.MPI_SOURCE;
            check_received("irecv", status, w.datatype, w.expected, w.target);
            copy_back_received(w.buffer, w.target);
            w.result = w.target;
        }
    } catch (...) {
        failure = std::current_exception();
    }
    w.buffer = Tensor();
    if (w.recorded != nullptr && w.recorded_sequence != 0) {
        write_update(*w.recorded, RecordedStream::shared, w.recorded_sequence, ticks(),
                     failure != nullptr ? failure.__cxa_exception_type()->name() : nullptr, 0);
    }
    w.complete(failure);
    return true;
}

}  // namespace detail

int Communicator::recv_any(Tensor& out, int tag, CallSite site) {
    out.check_defined("recv");
    out.check_writable("recv");
    check_tag(impl_->comm, tag, "recv", true);
    Impl::PointToPointWatch watch(*impl_,
                                  {.op = OpKind::Recv, .output = &out, .root = -1, .message_tag = tag, .site = site});
    MPI_Status status;
    watch.run([&] {
        const int n = detail::checked_count(out.numel(), "recv");
        detail::with_host_buffer(out, detail::Direction::Out, [&](void* p) {
            LOCKSTEP_MPI_CHECK(MPI_Recv(p, n, mpi_datatype(out.dtype()), MPI_ANY_SOURCE, tag, impl_->comm, &status));
        });
        check_received("recv", status, mpi_datatype(out.dtype()), n, out);
    });
    return status.MPI_SOURCE;
}

}  // namespace lockstep
