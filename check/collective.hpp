#pragma once
// A collective call as the checking core sees it (debug mode), its signature record, the comparison every process
// runs over every process's record, and the run of the call (internal).

#include "communicators.hpp"
#include "type_signature.hpp"

#include "../collectives/fixed_record.hpp"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::check {

// The rules a collective's signature follows (MPI's: which arguments are significant on which process).
enum class Rule : std::uint8_t {
    Barrier,
    Bcast,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    Alltoallw,
    Reduce,         // rooted reduction
    Allreduce,      // Allreduce, Scan, Exscan, Reduce_scatter_block: the same count and type everywhere
    ReduceScatter,  // the same recvcounts everywhere
};

struct CollectiveCall {
    Rule rule;
    const char* function;  // "MPI_Ibcast"
    MPI_Comm comm;
    const void* caller;
    int root = -1;
    MPI_Op op = MPI_OP_NULL;
    bool in_place = false;  // MPI_IN_PLACE where the rule allows it (sendbuf, or recvbuf at a scatter's root)
    long long sendcount = 0;
    MPI_Datatype sendtype = MPI_DATATYPE_NULL;
    long long recvcount = 0;
    MPI_Datatype recvtype = MPI_DATATYPE_NULL;
    const int* sendcounts = nullptr;
    const int* recvcounts = nullptr;
    const MPI_Datatype* sendtypes = nullptr;  // alltoallw
    const MPI_Datatype* recvtypes = nullptr;
    std::function<int()> run;                // the payload, blocking
    std::function<int(MPI_Request*)> start;  // the payload, non-blocking
};

// What each process contributes to the one exchange before the payload: the numbers that must agree, no names (small
// enough for MPI's fastest message size).
struct CheckDigest {
    std::uint64_t call_number;
    std::uint64_t caller;
    std::uint64_t function;       // a hash of the function's name
    std::uint64_t reduce_op_key;  // 0: no reduce op
    std::uint64_t counts_hash;    // reduce_scatter's recvcounts; 0: none
    SideDigest send;              // what this process sends (each peer the same), when the rule compares it
    SideDigest recv;              // what it expects from each peer
    std::int32_t root;            // -1: not rooted
    std::int16_t in_place;
    std::int16_t rule;  // Rule
};
static_assert(detail::FixedRecord<CheckDigest> && sizeof(CheckDigest) % 8 == 0);

// A process's call as a report names it, exchanged once a disagreement was found.
struct CheckRecord {
    std::uint64_t call_number;
    std::uint64_t caller;
    std::uint64_t reduce_op_key;  // 0: no reduce op
    std::uint64_t counts_hash;    // reduce_scatter's recvcounts; 0: none
    SideSignature send;           // what this process sends (each peer the same), when the rule compares it
    SideSignature recv;           // what it expects from each peer
    std::int32_t root;            // -1: not rooted
    std::int16_t in_place;
    std::int16_t rule;  // Rule
    detail::FixedText<32> function;
    detail::FixedText<64> reduce_op;
};
static_assert(detail::FixedRecord<CheckRecord> && sizeof(CheckRecord) % 8 == 0);

// A v-variant's per-peer comparison on one process: up to two of its disagreements with peers.
struct PeerMismatch {
    std::int32_t peer;
    std::int32_t this_is_root;  // 1: the root compared its per-peer sends (scatterv)
    SideSignature mine;         // what this process expects from (or sends to) the peer
    SideSignature theirs;       // what the peer sends (or expects)
};
struct Verdict {
    std::int32_t mismatches;  // how many peers disagree with this process
    std::int32_t pad;
    PeerMismatch first[2];
};
static_assert(detail::FixedRecord<Verdict> && sizeof(Verdict) % 8 == 0);

// This process's digest of `call` (the call_number: the communicator's count, already advanced).
[[nodiscard]] CheckDigest make_digest(const CollectiveCall& call, const CommunicatorRecord& comm);
// This process's record of `call`, numbered `call_number`.
[[nodiscard]] CheckRecord make_record(const CollectiveCall& call, const CommunicatorRecord& comm,
                                      std::uint64_t call_number);

// A disagreement between the digests: which kind, between which processes (every process finds the same).
struct Disagreement {
    enum class Kind : std::uint8_t { Function, Root, ReduceOp, Counts, Bcast, Reduction, Gather, Scatter, Pair } kind;
    std::size_t i = 0;  // the process named first (Bcast, Gather, Scatter, Pair)
    std::size_t j = 0;  // the second (Pair)
};
// The first disagreement between the digests, nullopt when they agree.
[[nodiscard]] std::optional<Disagreement> compare_records(Rule rule, const std::vector<CheckDigest>& all);
// Its headline, from every process's record.
[[nodiscard]] std::string headline(const Disagreement& d, const std::vector<CheckRecord>& all);
// Whether the rule compares per-peer counts after the records agree (the v-variants), and whether that needs each
// process's per-peer sends first (alltoallv, alltoallw).
[[nodiscard]] bool needs_verdicts(Rule rule) noexcept;
[[nodiscard]] bool needs_transpose(Rule rule) noexcept;
// What this process sends to each peer (alltoallv, alltoallw), in peer order.
[[nodiscard]] std::vector<SideSignature> sends_to_peers(const CollectiveCall& call, int size);
// This process's per-peer comparison: `all` the records, `received` what each peer sends to it (transposed).
// A peer's side taken from `all` carries no names: name_peer_sides gives it those of the peer's record.
[[nodiscard]] Verdict local_verdict(const CollectiveCall& call, const CommunicatorRecord& comm,
                                    const std::vector<CheckDigest>& all, const std::vector<SideSignature>& received);
void name_peer_sides(Rule rule, std::vector<Verdict>& verdicts, const std::vector<CheckRecord>& all);
// The report of a disagreement: the headline, each process's call grouped, the call sites (`sites`, one per process).
[[nodiscard]] std::string mismatch_report(const CommunicatorRecord& comm, const std::string& headline,
                                          const std::vector<CheckRecord>& all, const std::vector<std::string>& sites);
[[nodiscard]] std::string verdict_headline(const CheckRecord& first, const std::vector<Verdict>& verdicts);

// Runs `call` in debug mode: blocking (the exchange, then the payload) when `request` is null, else non-blocking (the
// exchange started, the payload deferred until it agreed; *request the program's handle). MPI's return code, or
// mismatch_error_code on every process where the program asked for errors to be returned.
[[nodiscard]] int run_checked(CollectiveCall call, MPI_Request* request);
// A blocking call's check done at once where nothing is deferred (no allocation once warm): MPI_SUCCESS to run the
// payload (also for a call that is not checked), else the code to return; nullopt where the call must go through
// run_checked (something is deferred). `call` needs no run or start.
[[nodiscard]] std::optional<int> check_blocking_now(const CollectiveCall& call);

// Ends the job after a disagreement on `comm` (the report printed on every process), or returns the error code for
// the call when the program set a non-fatal error handler on it.
[[nodiscard]] int handle_mismatch(const CommunicatorRecord& comm, const std::string& report);

}  // namespace lockstep::check
