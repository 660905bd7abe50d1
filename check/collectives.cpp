// The collective entry points, blocking and non-blocking. With debug mode off each is the hooks around the PMPI_
// call; on, the call is described (CollectiveCall) and run checked (deferred.cpp). Intercommunicators pass unchecked.

#include "collective.hpp"
#include "entry.hpp"

using namespace lockstep::check;

namespace {

// A blocking collective: `describe` builds the CollectiveCall (debug mode only), `run` is the PMPI_ call and `start`
// its non-blocking form (for a blocking call made while non-blocking ones are deferred).
template <class Describe, class Run, class Start>
int blocking(const CallDescriptor& call, Describe describe, Run run, Start start) {
    CallScope scope(call);
    if (!debug_mode) return scope.returned(run());
    CollectiveCall c = describe();
    c.function = call.function;
    c.comm = call.comm;
    c.caller = call.caller;
    if (const auto checked = check_blocking_now(c)) return scope.returned(*checked != MPI_SUCCESS ? *checked : run());
    c.run = run;
    c.start = start;
    return scope.returned(run_checked(std::move(c), nullptr));
}

template <class Describe, class Start>
int nonblocking(const CallDescriptor& call, Describe describe, Start start, MPI_Request* request) {
    CallScope scope(call);
    int rc = MPI_SUCCESS;
    if (!debug_mode) {
        rc = start(request);
    } else {
        CollectiveCall c = describe();
        c.function = call.function;
        c.comm = call.comm;
        c.caller = call.caller;
        c.start = start;
        rc = run_checked(std::move(c), request);
    }
    if (rc == MPI_SUCCESS) request_started(*request, call);
    return scope.returned(rc);
}

CallDescriptor collective(const char* function, MPI_Comm comm, int root, long long count, MPI_Datatype type,
                          const void* caller) {
    return CallDescriptor{function, comm, root, kNoTag, count, type, caller, CallKind::Collective};
}

CollectiveCall described(Rule rule) {
    CollectiveCall c{};
    c.rule = rule;
    return c;
}

}  // namespace

// ------------------------------------------------------------------ barrier
LOCKSTEP_CHECK_ENTRY int MPI_Barrier(MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Barrier(comm));
    return blocking(
        collective("MPI_Barrier", comm, kNoPeer, 0, MPI_DATATYPE_NULL, LOCKSTEP_CHECK_CALLER()),
        [] { return described(Rule::Barrier); }, [=] { return PMPI_Barrier(comm); },
        [=](MPI_Request* r) { return PMPI_Ibarrier(comm, r); });
}

LOCKSTEP_CHECK_ENTRY int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Ibarrier(comm, request));
    return nonblocking(
        collective("MPI_Ibarrier", comm, kNoPeer, 0, MPI_DATATYPE_NULL, LOCKSTEP_CHECK_CALLER()),
        [] { return described(Rule::Barrier); }, [=](MPI_Request* r) { return PMPI_Ibarrier(comm, r); }, request);
}

// ------------------------------------------------------------------ broadcast
namespace {
CollectiveCall bcast_call(int count, MPI_Datatype type, int root) {
    CollectiveCall c = described(Rule::Bcast);
    c.root = root;
    c.sendcount = count;
    c.sendtype = type;
    return c;
}
}  // namespace

LOCKSTEP_CHECK_ENTRY int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Bcast(buffer, count, type, root, comm));
    return blocking(
        collective("MPI_Bcast", comm, root, count, type, LOCKSTEP_CHECK_CALLER()),
        [=] { return bcast_call(count, type, root); }, [=] { return PMPI_Bcast(buffer, count, type, root, comm); },
        [=](MPI_Request* r) { return PMPI_Ibcast(buffer, count, type, root, comm, r); });
}

LOCKSTEP_CHECK_ENTRY int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
                                    MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Ibcast(buffer, count, type, root, comm, request));
    return nonblocking(
        collective("MPI_Ibcast", comm, root, count, type, LOCKSTEP_CHECK_CALLER()),
        [=] { return bcast_call(count, type, root); },
        [=](MPI_Request* r) { return PMPI_Ibcast(buffer, count, type, root, comm, r); }, request);
}

// ------------------------------------------------------------------ gather, scatter, allgather, alltoall
namespace {
CollectiveCall pair_call(Rule rule, int sendcount, MPI_Datatype sendtype, int recvcount, MPI_Datatype recvtype,
                         int root, bool in_place) {
    CollectiveCall c = described(rule);
    c.root = root;
    c.sendcount = sendcount;
    c.sendtype = sendtype;
    c.recvcount = recvcount;
    c.recvtype = recvtype;
    c.in_place = in_place;
    return c;
}
}  // namespace

LOCKSTEP_CHECK_ENTRY int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                    int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
    return blocking(
        collective("MPI_Gather", comm, root, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Gather, sendcount, sendtype, recvcount, recvtype, root, sendbuf == MPI_IN_PLACE);
        },
        [=] { return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm); },
        [=](MPI_Request* r) {
            return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                                     MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request));
    return nonblocking(
        collective("MPI_Igather", comm, root, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Gather, sendcount, sendtype, recvcount, recvtype, root, sendbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
        },
        request);
}

LOCKSTEP_CHECK_ENTRY int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm));
    return blocking(
        collective("MPI_Scatter", comm, root, recvcount, recvtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Scatter, sendcount, sendtype, recvcount, recvtype, root, recvbuf == MPI_IN_PLACE);
        },
        [=] { return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm); },
        [=](MPI_Request* r) {
            return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                      int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                                      MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request));
    return nonblocking(
        collective("MPI_Iscatter", comm, root, recvcount, recvtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Scatter, sendcount, sendtype, recvcount, recvtype, root, recvbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
        },
        request);
}

LOCKSTEP_CHECK_ENTRY int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
    return blocking(
        collective("MPI_Allgather", comm, kNoPeer, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Allgather, sendcount, sendtype, recvcount, recvtype, -1, sendbuf == MPI_IN_PLACE);
        },
        [=] { return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); },
        [=](MPI_Request* r) {
            return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                        int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request));
    return nonblocking(
        collective("MPI_Iallgather", comm, kNoPeer, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Allgather, sendcount, sendtype, recvcount, recvtype, -1, sendbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
        },
        request);
}

LOCKSTEP_CHECK_ENTRY int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                      int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
    return blocking(
        collective("MPI_Alltoall", comm, kNoPeer, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Alltoall, sendcount, sendtype, recvcount, recvtype, -1, sendbuf == MPI_IN_PLACE);
        },
        [=] { return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); },
        [=](MPI_Request* r) {
            return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request));
    return nonblocking(
        collective("MPI_Ialltoall", comm, kNoPeer, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return pair_call(Rule::Alltoall, sendcount, sendtype, recvcount, recvtype, -1, sendbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
        },
        request);
}

// ------------------------------------------------------------------ the v-variants
namespace {
CollectiveCall v_call(Rule rule, int sendcount, const int* sendcounts, MPI_Datatype sendtype, int recvcount,
                      const int* recvcounts, MPI_Datatype recvtype, int root, bool in_place) {
    CollectiveCall c = pair_call(rule, sendcount, sendtype, recvcount, recvtype, root, in_place);
    c.sendcounts = sendcounts;
    c.recvcounts = recvcounts;
    return c;
}
}  // namespace

LOCKSTEP_CHECK_ENTRY int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                     const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                                     MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm));
    return blocking(
        collective("MPI_Gatherv", comm, root, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Gatherv, sendcount, nullptr, sendtype, 0, recvcounts, recvtype, root,
                          sendbuf == MPI_IN_PLACE);
        },
        [=] { return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm); },
        [=](MPI_Request* r) {
            return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                      const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                                      MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request));
    return nonblocking(
        collective("MPI_Igatherv", comm, root, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Gatherv, sendcount, nullptr, sendtype, 0, recvcounts, recvtype, root,
                          sendbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, r);
        },
        request);
}

LOCKSTEP_CHECK_ENTRY int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                                      MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                      int root, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm));
    return blocking(
        collective("MPI_Scatterv", comm, root, recvcount, recvtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Scatterv, 0, sendcounts, sendtype, recvcount, nullptr, recvtype, root,
                          recvbuf == MPI_IN_PLACE);
        },
        [=] { return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm); },
        [=](MPI_Request* r) {
            return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                                       MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                       int root, MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request));
    return nonblocking(
        collective("MPI_Iscatterv", comm, root, recvcount, recvtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Scatterv, 0, sendcounts, sendtype, recvcount, nullptr, recvtype, root,
                          recvbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
        },
        request);
}

LOCKSTEP_CHECK_ENTRY int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                        const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                        MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm));
    return blocking(
        collective("MPI_Allgatherv", comm, kNoPeer, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Allgatherv, sendcount, nullptr, sendtype, 0, recvcounts, recvtype, -1,
                          sendbuf == MPI_IN_PLACE);
        },
        [=] { return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm); },
        [=](MPI_Request* r) {
            return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                         const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                         MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request));
    return nonblocking(
        collective("MPI_Iallgatherv", comm, kNoPeer, sendcount, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Allgatherv, sendcount, nullptr, sendtype, 0, recvcounts, recvtype, -1,
                          sendbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
        },
        request);
}

LOCKSTEP_CHECK_ENTRY int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                       MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                                       const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm));
    return blocking(
        collective("MPI_Alltoallv", comm, kNoPeer, 0, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Alltoallv, 0, sendcounts, sendtype, 0, recvcounts, recvtype, -1,
                          sendbuf == MPI_IN_PLACE);
        },
        [=] {
            return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
        },
        [=](MPI_Request* r) {
            return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                                   r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                        MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                                        const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                                        MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request));
    return nonblocking(
        collective("MPI_Ialltoallv", comm, kNoPeer, 0, sendtype, LOCKSTEP_CHECK_CALLER()),
        [=] {
            return v_call(Rule::Alltoallv, 0, sendcounts, sendtype, 0, recvcounts, recvtype, -1,
                          sendbuf == MPI_IN_PLACE);
        },
        [=](MPI_Request* r) {
            return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                                   r);
        },
        request);
}

namespace {
CollectiveCall w_call(const int* sendcounts, const MPI_Datatype* sendtypes, const int* recvcounts,
                      const MPI_Datatype* recvtypes, bool in_place) {
    CollectiveCall c =
        v_call(Rule::Alltoallw, 0, sendcounts, MPI_DATATYPE_NULL, 0, recvcounts, MPI_DATATYPE_NULL, -1, in_place);
    c.sendtypes = sendtypes;
    c.recvtypes = recvtypes;
    return c;
}
}  // namespace

LOCKSTEP_CHECK_ENTRY int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                       const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                       const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm));
    return blocking(
        collective("MPI_Alltoallw", comm, kNoPeer, 0, MPI_DATATYPE_NULL, LOCKSTEP_CHECK_CALLER()),
        [=] { return w_call(sendcounts, sendtypes, recvcounts, recvtypes, sendbuf == MPI_IN_PLACE); },
        [=] {
            return PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                  comm);
        },
        [=](MPI_Request* r) {
            return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                   comm, r);
        });
}

LOCKSTEP_CHECK_ENTRY int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                        const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                        const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                        MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                                                recvtypes, comm, request));
    return nonblocking(
        collective("MPI_Ialltoallw", comm, kNoPeer, 0, MPI_DATATYPE_NULL, LOCKSTEP_CHECK_CALLER()),
        [=] { return w_call(sendcounts, sendtypes, recvcounts, recvtypes, sendbuf == MPI_IN_PLACE); },
        [=](MPI_Request* r) {
            return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                   comm, r);
        },
        request);
}

// ------------------------------------------------------------------ reductions
namespace {
CollectiveCall reduce_call(Rule rule, int count, MPI_Datatype type, MPI_Op op, int root, bool in_place,
                           const int* recvcounts = nullptr) {
    CollectiveCall c = described(rule);
    c.root = root;
    c.sendcount = count;
    c.sendtype = type;
    c.op = op;
    c.in_place = in_place;
    c.recvcounts = recvcounts;
    return c;
}
}  // namespace

LOCKSTEP_CHECK_ENTRY int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                                    int root, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm));
    return blocking(
        collective("MPI_Reduce", comm, root, count, type, LOCKSTEP_CHECK_CALLER()),
        [=] { return reduce_call(Rule::Reduce, count, type, op, root, sendbuf == MPI_IN_PLACE); },
        [=] { return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm); },
        [=](MPI_Request* r) { return PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, r); });
}

LOCKSTEP_CHECK_ENTRY int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                                     int root, MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request));
    return nonblocking(
        collective("MPI_Ireduce", comm, root, count, type, LOCKSTEP_CHECK_CALLER()),
        [=] { return reduce_call(Rule::Reduce, count, type, op, root, sendbuf == MPI_IN_PLACE); },
        [=](MPI_Request* r) { return PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, r); }, request);
}

// Allreduce, Scan and Exscan: the same count, type and op everywhere; the blocking and non-blocking entry points of
// each, from one pattern.
#define LOCKSTEP_CHECK_ALLREDUCE_LIKE(Name, IName)                                                                    \
    LOCKSTEP_CHECK_ENTRY int MPI_##Name(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,  \
                                        MPI_Comm comm) {                                                              \
        LOCKSTEP_CHECK_PASS_THROUGH(PMPI_##Name(sendbuf, recvbuf, count, type, op, comm));                            \
        return blocking(                                                                                              \
            collective("MPI_" #Name, comm, kNoPeer, count, type, LOCKSTEP_CHECK_CALLER()),                            \
            [=] { return reduce_call(Rule::Allreduce, count, type, op, -1, sendbuf == MPI_IN_PLACE); },               \
            [=] { return PMPI_##Name(sendbuf, recvbuf, count, type, op, comm); },                                     \
            [=](MPI_Request* r) { return PMPI_##IName(sendbuf, recvbuf, count, type, op, comm, r); });                \
    }                                                                                                                 \
    LOCKSTEP_CHECK_ENTRY int MPI_##IName(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, \
                                         MPI_Comm comm, MPI_Request* request) {                                       \
        LOCKSTEP_CHECK_PASS_THROUGH(PMPI_##IName(sendbuf, recvbuf, count, type, op, comm, request));                  \
        return nonblocking(                                                                                           \
            collective("MPI_" #IName, comm, kNoPeer, count, type, LOCKSTEP_CHECK_CALLER()),                           \
            [=] { return reduce_call(Rule::Allreduce, count, type, op, -1, sendbuf == MPI_IN_PLACE); },               \
            [=](MPI_Request* r) { return PMPI_##IName(sendbuf, recvbuf, count, type, op, comm, r); }, request);       \
    }

LOCKSTEP_CHECK_ALLREDUCE_LIKE(Allreduce, Iallreduce)
LOCKSTEP_CHECK_ALLREDUCE_LIKE(Scan, Iscan)
LOCKSTEP_CHECK_ALLREDUCE_LIKE(Exscan, Iexscan)
LOCKSTEP_CHECK_ALLREDUCE_LIKE(Reduce_scatter_block, Ireduce_scatter_block)

LOCKSTEP_CHECK_ENTRY int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                            MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm));
    return blocking(
        collective("MPI_Reduce_scatter", comm, kNoPeer, 0, type, LOCKSTEP_CHECK_CALLER()),
        [=] { return reduce_call(Rule::ReduceScatter, 1, type, op, -1, sendbuf == MPI_IN_PLACE, recvcounts); },
        [=] { return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm); },
        [=](MPI_Request* r) { return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, r); });
}

LOCKSTEP_CHECK_ENTRY int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                             MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request));
    return nonblocking(
        collective("MPI_Ireduce_scatter", comm, kNoPeer, 0, type, LOCKSTEP_CHECK_CALLER()),
        [=] { return reduce_call(Rule::ReduceScatter, 1, type, op, -1, sendbuf == MPI_IN_PLACE, recvcounts); },
        [=](MPI_Request* r) { return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, r); }, request);
}
