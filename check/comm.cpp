// The communicator constructors and MPI_Comm_free: each new communicator gets its shadow (debug mode) and is
// announced to the watchdog side.

#include "collective.hpp"
#include "communicators.hpp"
#include "entry.hpp"

namespace lockstep::check {
namespace {

void created(MPI_Comm comm, MPI_Comm parent, const char* function, const void* caller, std::uint64_t color = 0,
             Derivation derivation = Derivation::EveryMember) {
    if (debug_mode) {
        const InsideLockstep inside;
        register_communicator(comm, parent, function, caller, color, derivation);
    }
    if (comm != MPI_COMM_NULL) communicator_created(comm, parent, function, caller);
}

// The rank in `parent` of the first member of `comm` (one of its groups): the colour of a split whose colours MPI
// chooses.
std::uint64_t first_member(MPI_Comm comm, MPI_Comm parent) {
    const InsideLockstep inside;
    MPI_Group parent_group;
    MPI_Group group;
    PMPI_Comm_group(parent, &parent_group);
    PMPI_Comm_group(comm, &group);
    int zero = 0;
    int first = 0;
    PMPI_Group_translate_ranks(group, 1, &zero, parent_group, &first);
    PMPI_Group_free(&group);
    PMPI_Group_free(&parent_group);
    return static_cast<std::uint64_t>(first);
}

// A blocking constructor's call, on the watchdog's board while it runs. In debug mode it is a collective of its parent
// like any other: its signature (the function) is exchanged first, so that processes that make different constructors
// are reported instead of hanging, and, while collectives are deferred, it waits for its turn moving them on: once
// its exchange is through, every process of the parent is in the constructor too, and none waits for this one's
// deferred calls. MPI_Comm_create_group, which only the group's members call, is not checked (`whole_parent`).
template <class Make>
int construct(const char* function, MPI_Comm parent, int tag, const void* caller, Make make, bool whole_parent = true) {
    CallScope scope(CallDescriptor{function, parent, kNoPeer, tag, 0, MPI_DATATYPE_NULL, caller, CallKind::Collective});
    if (!debug_mode || !whole_parent) {
        if (deferred_pending()) progress_deferred();
        return scope.returned(make());
    }
    CollectiveCall call{};
    call.rule = Rule::Barrier;
    call.function = function;
    call.comm = parent;
    call.caller = caller;
    call.run = make;
    return scope.returned(run_checked(std::move(call), nullptr));
}

}  // namespace
}  // namespace lockstep::check

using namespace lockstep::check;

#define LOCKSTEP_CHECK_CONSTRUCTOR(name, parent, color, pmpi_call)                         \
    do {                                                                                   \
        const void* caller = LOCKSTEP_CHECK_CALLER();                                      \
        const int rc = construct(name, parent, kNoTag, caller, [&] { return pmpi_call; }); \
        if (rc == MPI_SUCCESS) created(*newcomm, parent, name, caller, color);             \
        return rc;                                                                         \
    } while (false)

LOCKSTEP_CHECK_ENTRY int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_dup(comm, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Comm_dup", comm, 0, PMPI_Comm_dup(comm, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_dup_with_info(comm, info, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Comm_dup_with_info", comm, 0, PMPI_Comm_dup_with_info(comm, info, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_idup(comm, newcomm, request));
    const void* caller = LOCKSTEP_CHECK_CALLER();
    const CallDescriptor call{"MPI_Comm_idup",     comm, kNoPeer, kNoTag, 0, MPI_DATATYPE_NULL, caller,
                              CallKind::Collective};
    const int rc = PMPI_Comm_idup(comm, newcomm, request);
    if (rc != MPI_SUCCESS) return rc;
    if (debug_mode) {
        const InsideLockstep inside;
        register_nonblocking_dup(*newcomm, comm, "MPI_Comm_idup", caller);
    }
    request_started(*request, call);
    communicator_created(*newcomm, comm, "MPI_Comm_idup", caller);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_split(comm, color, key, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Comm_split", comm, static_cast<std::uint64_t>(static_cast<unsigned>(color)),
                               PMPI_Comm_split(comm, color, key, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_split_type(comm, split_type, key, info, newcomm));
    // The colour (the node, for MPI_COMM_TYPE_SHARED) is MPI's choice: members of one new communicator share the rank
    // of its first member in the parent.
    const void* caller = LOCKSTEP_CHECK_CALLER();
    const int rc = construct("MPI_Comm_split_type", comm, kNoTag, caller,
                             [&] { return PMPI_Comm_split_type(comm, split_type, key, info, newcomm); });
    if (rc != MPI_SUCCESS) return rc;
    const std::uint64_t color = *newcomm == MPI_COMM_NULL ? 0 : first_member(*newcomm, comm);
    created(*newcomm, comm, "MPI_Comm_split_type", caller, color);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_create(comm, group, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Comm_create", comm, 0, PMPI_Comm_create(comm, group, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_create_group(comm, group, tag, newcomm));
    // Only the group's members call it: the tag and the group's first member (which the members share) tell it from
    // its siblings; the parent's creation count, which the other members do not advance, stays as it is.
    const void* caller = LOCKSTEP_CHECK_CALLER();
    const int rc = construct(
        "MPI_Comm_create_group", comm, tag, caller, [&] { return PMPI_Comm_create_group(comm, group, tag, newcomm); },
        false);
    if (rc != MPI_SUCCESS || *newcomm == MPI_COMM_NULL) return rc;
    std::uint64_t color = 0;
    {
        const InsideLockstep inside;
        MPI_Group parent_group;
        PMPI_Comm_group(comm, &parent_group);
        int zero = 0;
        int first = 0;
        PMPI_Group_translate_ranks(group, 1, &zero, parent_group, &first);
        PMPI_Group_free(&parent_group);
        color = mix_id(static_cast<std::uint64_t>(static_cast<unsigned>(tag)), static_cast<std::uint64_t>(first));
    }
    created(*newcomm, comm, "MPI_Comm_create_group", caller, color, Derivation::GroupOnly);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                                         MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Cart_create", comm, 0,
                               PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Cart_sub(comm, remain_dims, newcomm));
    // Like a split whose colour is the coordinates left out: the members of one sub-grid share the parent rank of
    // their first member.
    const void* caller = LOCKSTEP_CHECK_CALLER();
    const int rc =
        construct("MPI_Cart_sub", comm, kNoTag, caller, [&] { return PMPI_Cart_sub(comm, remain_dims, newcomm); });
    if (rc != MPI_SUCCESS) return rc;
    const std::uint64_t color = *newcomm == MPI_COMM_NULL ? 0 : first_member(*newcomm, comm);
    created(*newcomm, comm, "MPI_Cart_sub", caller, color);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                                          MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Graph_create", comm, 0,
                               PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                                        const int sourceweights[], int outdegree,
                                                        const int destinations[], const int destweights[],
                                                        MPI_Info info, int reorder, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                                                destinations, destweights, info, reorder, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Dist_graph_create_adjacent", comm, 0,
                               PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                                               destinations, destweights, info, reorder, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                                               const int destinations[], const int weights[], MPI_Info info,
                                               int reorder, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR(
        "MPI_Dist_graph_create", comm, 0,
        PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm));
}

// Intercommunicators are not checked (no shadow, docs/checking.md); the watchdog side still hears of them. Their
// merge is an intracommunicator like any other.
LOCKSTEP_CHECK_ENTRY int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                                              int remote_leader, int tag, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(
        PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newcomm));
    LOCKSTEP_CHECK_CONSTRUCTOR("MPI_Intercomm_create", local_comm, 0,
                               PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newcomm));
}

LOCKSTEP_CHECK_ENTRY int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newcomm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Intercomm_merge(intercomm, high, newcomm));
    // The two groups' records have different parents' identifiers: the merged one is named by its size alone.
    const void* caller = LOCKSTEP_CHECK_CALLER();
    const int rc = construct("MPI_Intercomm_merge", intercomm, kNoTag, caller,
                             [&] { return PMPI_Intercomm_merge(intercomm, high, newcomm); });
    if (rc == MPI_SUCCESS) created(*newcomm, MPI_COMM_NULL, "MPI_Intercomm_merge", caller);
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Comm_free(MPI_Comm* comm) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Comm_free(comm));
    const MPI_Comm freed = *comm;
    if (debug_mode) {
        const InsideLockstep inside;
        forget_communicator(freed);
    }
    communicator_freed(freed);
    return PMPI_Comm_free(comm);
}
