// The program's point-to-point calls: sends, receives, probes, on the watchdog's point-to-point board of their
// communicator for as long as they block (watch.cpp), so that a receive that is never matched becomes the hang report
// (which process waits, in which call, for which peer and tag, from which call site, and what the peer does instead).
// The non-blocking ones return at once: their requests are recorded, so that a wait for one is reported with what it
// waits for (the wait and test entry points are the checking core's), and in debug mode tracked (a request never
// completed is named at MPI_Finalize). In debug mode, while deferred non-blocking collectives are in flight, a blocking
// call runs as its non-blocking form and a wait that moves them on (hooks.hpp), so that it cannot deadlock against
// them.

#include "entry.hpp"

#include <lockstep/foreign_watch.hpp>

namespace lockstep::check {

// watch.cpp's.
CallToken point_to_point_begin(const CallDescriptor& call, foreign::Direction direction) noexcept;
void request_begun(MPI_Request request, const CallDescriptor& call, foreign::Direction direction) noexcept;

namespace {

using foreign::Direction;

// A blocking point-to-point call on its board for its duration.
class PointToPointScope : public CallScope {
public:
    PointToPointScope(const CallDescriptor& call, Direction direction) noexcept
        : CallScope(point_to_point_begin(call, direction)) {}
};

// A probe that tests until a message is there, moving deferred calls on.
template <class Test>
int probe_progressing(Test test) {
    for (;;) {
        progress_deferred();
        int found = 0;
        const int rc = test(&found);
        if (rc != MPI_SUCCESS || found != 0) return rc;
    }
}

// A non-blocking call that posted `request`: what the watchdog and the check at finalize know of it.
void started(MPI_Request request, const CallDescriptor& call, Direction direction) {
    request_begun(request, call, direction);
    track_request(request, call);
}

CallDescriptor descriptor(const char* function, MPI_Comm comm, int peer, int tag, int count, MPI_Datatype datatype,
                          const void* caller) noexcept {
    return {.function = function,
            .comm = comm,
            .peer = peer,
            .tag = tag,
            .count = count,
            .datatype = datatype,
            .caller = caller,
            .kind = CallKind::PointToPoint};
}

}  // namespace
}  // namespace lockstep::check

using namespace lockstep::check;

// Blocking sends: MPI_Send may return at once (buffered) or wait for the receive; either way it is on the board while
// it is in MPI.
#define LOCKSTEP_CHECK_SEND(NAME, INAME)                                                                             \
    LOCKSTEP_CHECK_ENTRY int NAME(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,              \
                                  MPI_Comm comm) {                                                                   \
        LOCKSTEP_CHECK_PASS_THROUGH(P##NAME(buf, count, datatype, dest, tag, comm));                                 \
        PointToPointScope scope(descriptor(#NAME, comm, dest, tag, count, datatype, LOCKSTEP_CHECK_CALLER()),        \
                                Direction::send);                                                                    \
        return scope.returned(run_blocking(                                                                          \
            [&] { return P##NAME(buf, count, datatype, dest, tag, comm); },                                          \
            [&](MPI_Request* r) { return P##INAME(buf, count, datatype, dest, tag, comm, r); }, MPI_STATUS_IGNORE)); \
    }
LOCKSTEP_CHECK_SEND(MPI_Send, MPI_Isend)
LOCKSTEP_CHECK_SEND(MPI_Ssend, MPI_Issend)
LOCKSTEP_CHECK_SEND(MPI_Bsend, MPI_Ibsend)
LOCKSTEP_CHECK_SEND(MPI_Rsend, MPI_Irsend)
#undef LOCKSTEP_CHECK_SEND

// Non-blocking sends: recorded with their request.
#define LOCKSTEP_CHECK_ISEND(NAME)                                                                                     \
    LOCKSTEP_CHECK_ENTRY int NAME(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, \
                                  MPI_Request* request) {                                                              \
        LOCKSTEP_CHECK_PASS_THROUGH(P##NAME(buf, count, datatype, dest, tag, comm, request));                          \
        const void* caller = LOCKSTEP_CHECK_CALLER();                                                                  \
        const int rc = P##NAME(buf, count, datatype, dest, tag, comm, request);                                        \
        if (rc == MPI_SUCCESS) {                                                                                       \
            started(*request, descriptor(#NAME, comm, dest, tag, count, datatype, caller), Direction::send);           \
        }                                                                                                              \
        return rc;                                                                                                     \
    }
LOCKSTEP_CHECK_ISEND(MPI_Isend)
LOCKSTEP_CHECK_ISEND(MPI_Issend)
LOCKSTEP_CHECK_ISEND(MPI_Ibsend)
LOCKSTEP_CHECK_ISEND(MPI_Irsend)
#undef LOCKSTEP_CHECK_ISEND

LOCKSTEP_CHECK_ENTRY int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                                  MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Recv(buf, count, datatype, source, tag, comm, status));
    PointToPointScope scope(descriptor("MPI_Recv", comm, source, tag, count, datatype, LOCKSTEP_CHECK_CALLER()),
                            Direction::receive);
    return scope.returned(
        run_blocking([&] { return PMPI_Recv(buf, count, datatype, source, tag, comm, status); },
                     [&](MPI_Request* r) { return PMPI_Irecv(buf, count, datatype, source, tag, comm, r); }, status));
}

LOCKSTEP_CHECK_ENTRY int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                                   MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Irecv(buf, count, datatype, source, tag, comm, request));
    const void* caller = LOCKSTEP_CHECK_CALLER();
    const int rc = PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
    if (rc == MPI_SUCCESS) {
        started(*request, descriptor("MPI_Irecv", comm, source, tag, count, datatype, caller), Direction::receive);
    }
    return rc;
}

// A send and a receive in one call: on the board as its receive (the part that waits for the peer).
// MPI_Sendrecv_replace stays blocking in debug mode (its non-blocking form needs MPI 4).
LOCKSTEP_CHECK_ENTRY int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                                      void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                                      MPI_Comm comm, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                                              source, recvtag, comm, status));
    PointToPointScope scope(
        descriptor("MPI_Sendrecv", comm, source, recvtag, recvcount, recvtype, LOCKSTEP_CHECK_CALLER()),
        Direction::receive);
    if (deferred_pending()) {
        // Both halves posted before either is waited for, as MPI_Sendrecv itself cannot deadlock on them.
        MPI_Request receive = MPI_REQUEST_NULL;
        MPI_Request send = MPI_REQUEST_NULL;
        int rc = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &receive);
        if (rc != MPI_SUCCESS) return scope.returned(rc);
        rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &send);
        if (rc == MPI_SUCCESS) rc = wait_progressing(&send, MPI_STATUS_IGNORE);
        const int received = wait_progressing(&receive, status);
        return scope.returned(rc != MPI_SUCCESS ? rc : received);
    }
    return scope.returned(PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                                        source, recvtag, comm, status));
}

LOCKSTEP_CHECK_ENTRY int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                                              int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status));
    PointToPointScope scope(
        descriptor("MPI_Sendrecv_replace", comm, source, recvtag, count, datatype, LOCKSTEP_CHECK_CALLER()),
        Direction::receive);
    return scope.returned(PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status));
}

// Probes wait for a message as a receive does (MPI_Iprobe and MPI_Improbe return at once: not watched).
LOCKSTEP_CHECK_ENTRY int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Probe(source, tag, comm, status));
    PointToPointScope scope(descriptor("MPI_Probe", comm, source, tag, -1, MPI_DATATYPE_NULL, LOCKSTEP_CHECK_CALLER()),
                            Direction::receive);
    if (deferred_pending()) {
        return scope.returned(
            probe_progressing([&](int* found) { return PMPI_Iprobe(source, tag, comm, found, status); }));
    }
    return scope.returned(PMPI_Probe(source, tag, comm, status));
}

LOCKSTEP_CHECK_ENTRY int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Mprobe(source, tag, comm, message, status));
    PointToPointScope scope(descriptor("MPI_Mprobe", comm, source, tag, -1, MPI_DATATYPE_NULL, LOCKSTEP_CHECK_CALLER()),
                            Direction::receive);
    if (deferred_pending()) {
        return scope.returned(
            probe_progressing([&](int* found) { return PMPI_Improbe(source, tag, comm, found, message, status); }));
    }
    return scope.returned(PMPI_Mprobe(source, tag, comm, message, status));
}
