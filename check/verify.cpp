// The signature record of a collective and the comparison every process runs over all records (collective.hpp).
//
// Which arguments count follows MPI: the buffer of a broadcast is compared with the root's; a gather's receive
// arguments only at the root, against every process's send; a scatter's the other way round; allgather and alltoall
// compare every send with every receive; reductions compare count, type and op everywhere. MPI_IN_PLACE replaces a
// process's send by what it receives. The v-variants first agree on everything else, then each process compares its
// per-peer counts with its peers' (a second exchange gathers the outcome, so that every process reports the same).

#include "collective.hpp"
#include "reduce_ops.hpp"

#include <lockstep/base/rank_groups.hpp>

#include <fmt/format.h>

namespace lockstep::check {
namespace {

bool rooted(Rule rule) {
    return rule == Rule::Bcast || rule == Rule::Gather || rule == Rule::Gatherv || rule == Rule::Scatter ||
           rule == Rule::Scatterv || rule == Rule::Reduce;
}
bool reduces(Rule rule) {
    return rule == Rule::Reduce || rule == Rule::Allreduce || rule == Rule::ReduceScatter;
}

std::uint64_t hash_counts(const int* counts, int size) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < size; ++i) {
        h ^= static_cast<std::uint32_t>(counts[i]);
        h *= 0x100000001b3ULL;
    }
    return h | 1;  // never 0 (none)
}

std::uint64_t hash_text(const char* text) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (; *text != '\0'; ++text) {
        h ^= static_cast<unsigned char>(*text);
        h *= 0x100000001b3ULL;
    }
    return h;
}

std::string side_text(const SideSignature& s) {
    return describe(s);
}

// What a digest and a record share: `side(count, type)` makes a side of either kind.
template <class Record, class Side>
void fill(Record& r, const CollectiveCall& call, const CommunicatorRecord& comm, Side side) {
    r.caller = reinterpret_cast<std::uintptr_t>(call.caller);
    r.root = rooted(call.rule) ? call.root : -1;
    r.in_place = call.in_place ? 1 : 0;
    r.rule = static_cast<std::int16_t>(call.rule);
    const bool is_root = call.root == comm.rank;
    switch (call.rule) {
        case Rule::Barrier:
        case Rule::Alltoallv:
        case Rule::Alltoallw:
            break;
        case Rule::Bcast:
        case Rule::Reduce:
        case Rule::Allreduce:
            r.send = side(call.sendcount, call.sendtype);
            break;
        case Rule::ReduceScatter:
            r.send = side(1, call.sendtype);
            r.counts_hash = hash_counts(call.recvcounts, comm.size);
            break;
        case Rule::Gather:
            if (!(is_root && call.in_place)) r.send = side(call.sendcount, call.sendtype);
            if (is_root) r.recv = side(call.recvcount, call.recvtype);
            break;
        case Rule::Gatherv:
            if (!(is_root && call.in_place)) r.send = side(call.sendcount, call.sendtype);
            break;
        case Rule::Scatter:
            if (is_root) r.send = side(call.sendcount, call.sendtype);
            if (!(is_root && call.in_place)) r.recv = side(call.recvcount, call.recvtype);
            break;
        case Rule::Scatterv:
            if (!(is_root && call.in_place)) r.recv = side(call.recvcount, call.recvtype);
            break;
        case Rule::Allgather:
        case Rule::Alltoall:
            r.recv = side(call.recvcount, call.recvtype);
            r.send = call.in_place ? r.recv : side(call.sendcount, call.sendtype);
            break;
        case Rule::Allgatherv:
            r.send =
                call.in_place ? side(call.recvcounts[comm.rank], call.recvtype) : side(call.sendcount, call.sendtype);
            break;
    }
}

}  // namespace

CheckDigest make_digest(const CollectiveCall& call, const CommunicatorRecord& comm) {
    CheckDigest d{};
    d.call_number = comm.collectives;
    d.function = hash_text(call.function);
    if (reduces(call.rule)) d.reduce_op_key = reduce_op_key(call.op);
    fill(d, call, comm, side_digest);
    return d;
}

CheckRecord make_record(const CollectiveCall& call, const CommunicatorRecord& comm, std::uint64_t call_number) {
    CheckRecord r{};
    r.call_number = call_number;
    r.function.assign(call.function);
    if (reduces(call.rule)) {
        const ReduceOpIdentity op = reduce_op_identity(call.op);
        r.reduce_op_key = op.key;
        r.reduce_op.assign(op.name);
    }
    fill(r, call, comm, side_signature);
    return r;
}

std::optional<Disagreement> compare_records(Rule rule, const std::vector<CheckDigest>& all) {
    using Kind = Disagreement::Kind;
    const CheckDigest& first = all.front();
    for (const auto& r : all) {
        if (r.function != first.function) return Disagreement{Kind::Function};
    }
    for (const auto& r : all) {
        if (r.root != first.root) return Disagreement{Kind::Root};
    }
    for (const auto& r : all) {
        if (r.reduce_op_key != first.reduce_op_key) return Disagreement{Kind::ReduceOp};
    }
    for (const auto& r : all) {
        if (r.counts_hash != first.counts_hash) return Disagreement{Kind::Counts};
    }
    const CheckDigest& root_record = all[static_cast<std::size_t>(std::max(first.root, 0))];
    const std::size_t n = all.size();
    switch (rule) {
        case Rule::Bcast:
            for (std::size_t i = 0; i < n; ++i) {
                if (!signatures_match(all[i].send, root_record.send)) return Disagreement{Kind::Bcast, i};
            }
            break;
        case Rule::Reduce:
        case Rule::Allreduce:
        case Rule::ReduceScatter:
            for (std::size_t i = 1; i < n; ++i) {
                if (!signatures_match(all[i].send, first.send) || all[i].send.reps != first.send.reps ||
                    all[i].send.bytes != first.send.bytes) {
                    return Disagreement{Kind::Reduction};
                }
            }
            break;
        case Rule::Gather:
            for (std::size_t i = 0; i < n; ++i) {
                if (all[i].send.present != 0 && !signatures_match(all[i].send, root_record.recv)) {
                    return Disagreement{Kind::Gather, i};
                }
            }
            break;
        case Rule::Scatter:
            for (std::size_t i = 0; i < n; ++i) {
                if (all[i].recv.present != 0 && !signatures_match(all[i].recv, root_record.send)) {
                    return Disagreement{Kind::Scatter, i};
                }
            }
            break;
        case Rule::Allgather:
        case Rule::Alltoall:
            for (std::size_t i = 0; i < n; ++i) {
                for (std::size_t j = 0; j < n; ++j) {
                    if (!signatures_match(all[i].send, all[j].recv)) return Disagreement{Kind::Pair, i, j};
                }
            }
            break;
        default:
            break;
    }
    return std::nullopt;
}

std::string headline(const Disagreement& d, const std::vector<CheckRecord>& all) {
    const CheckRecord& first = all.front();
    const CheckRecord& root_record = all[static_cast<std::size_t>(std::max(first.root, 0))];
    const CheckRecord& r = all[d.i];
    switch (d.kind) {
        case Disagreement::Kind::Function:
            return "the processes called different collectives";
        case Disagreement::Kind::Root:
            return "the processes name different roots";
        case Disagreement::Kind::ReduceOp:
            return "the processes name different reduce ops";
        case Disagreement::Kind::Counts:
            return "the processes pass different recvcounts";
        case Disagreement::Kind::Bcast:
            return fmt::format("process {} receives {}, the root (process {}) sends {}", d.i, side_text(r.send),
                               first.root, side_text(root_record.send));
        case Disagreement::Kind::Reduction:
            return "the processes pass different counts or datatypes";
        case Disagreement::Kind::Gather:
            return fmt::format("process {} sends {}, the root (process {}) expects {} from each process", d.i,
                               side_text(r.send), first.root, side_text(root_record.recv));
        case Disagreement::Kind::Scatter:
            return fmt::format("process {} expects {}, the root (process {}) sends {} to each process", d.i,
                               side_text(r.recv), first.root, side_text(root_record.send));
        case Disagreement::Kind::Pair:
            return fmt::format("process {} sends {}, process {} expects {} from each process", d.i, side_text(r.send),
                               d.j, side_text(all[d.j].recv));
    }
    return "the processes disagree";
}

bool needs_verdicts(Rule rule) noexcept {
    return rule == Rule::Gatherv || rule == Rule::Scatterv || rule == Rule::Allgatherv || rule == Rule::Alltoallv ||
           rule == Rule::Alltoallw;
}

bool needs_transpose(Rule rule) noexcept {
    return rule == Rule::Alltoallv || rule == Rule::Alltoallw;
}

std::vector<SideSignature> sends_to_peers(const CollectiveCall& call, int size) {
    std::vector<SideSignature> sends(static_cast<std::size_t>(size));
    for (int j = 0; j < size; ++j) {
        // In place, a process sends from its receive buffer what it receives.
        const int count = call.in_place ? call.recvcounts[j] : call.sendcounts[j];
        const MPI_Datatype type = call.rule == Rule::Alltoallw ? (call.in_place ? call.recvtypes[j] : call.sendtypes[j])
                                                               : (call.in_place ? call.recvtype : call.sendtype);
        sends[static_cast<std::size_t>(j)] = side_signature(count, type);
    }
    return sends;
}

Verdict local_verdict(const CollectiveCall& call, const CommunicatorRecord& comm, const std::vector<CheckDigest>& all,
                      const std::vector<SideSignature>& received) {
    Verdict v{};
    const auto note = [&](int peer, bool root_sends, const SideSignature& mine, const SideSignature& theirs) {
        if (v.mismatches < 2) v.first[v.mismatches] = PeerMismatch{peer, root_sends ? 1 : 0, mine, theirs};
        ++v.mismatches;
    };
    const int size = comm.size;
    const bool is_root = call.root == comm.rank;
    switch (call.rule) {
        case Rule::Gatherv:
            if (!is_root) break;
            for (int i = 0; i < size; ++i) {
                if (i == comm.rank && call.in_place) continue;
                const SideSignature expected = side_signature(call.recvcounts[i], call.recvtype);
                if (!signatures_match(digest(expected), all[static_cast<std::size_t>(i)].send)) {
                    note(i, false, expected, with_names(all[static_cast<std::size_t>(i)].send, {}));
                }
            }
            break;
        case Rule::Scatterv:
            if (!is_root) break;
            for (int i = 0; i < size; ++i) {
                if (i == comm.rank && call.in_place) continue;
                const SideSignature sent = side_signature(call.sendcounts[i], call.sendtype);
                if (!signatures_match(digest(sent), all[static_cast<std::size_t>(i)].recv)) {
                    note(i, true, sent, with_names(all[static_cast<std::size_t>(i)].recv, {}));
                }
            }
            break;
        case Rule::Allgatherv:
            for (int i = 0; i < size; ++i) {
                const SideSignature expected = side_signature(call.recvcounts[i], call.recvtype);
                if (!signatures_match(digest(expected), all[static_cast<std::size_t>(i)].send)) {
                    note(i, false, expected, with_names(all[static_cast<std::size_t>(i)].send, {}));
                }
            }
            break;
        case Rule::Alltoallv:
        case Rule::Alltoallw:
            for (int i = 0; i < size; ++i) {
                const SideSignature expected = side_signature(
                    call.recvcounts[i], call.rule == Rule::Alltoallw ? call.recvtypes[i] : call.recvtype);
                if (!signatures_match(expected, received[static_cast<std::size_t>(i)])) {
                    note(i, false, expected, received[static_cast<std::size_t>(i)]);
                }
            }
            break;
        default:
            break;
    }
    return v;
}

void name_peer_sides(Rule rule, std::vector<Verdict>& verdicts, const std::vector<CheckRecord>& all) {
    if (needs_transpose(rule)) return;  // what a peer sends to each process travelled with its names
    for (Verdict& v : verdicts) {
        for (int k = 0; k < std::min(v.mismatches, 2); ++k) {
            PeerMismatch& m = v.first[k];
            const CheckRecord& peer = all[static_cast<std::size_t>(m.peer)];
            m.theirs = with_names(digest(m.theirs), m.this_is_root != 0 ? peer.recv : peer.send);
        }
    }
}

std::string verdict_headline(const CheckRecord& first, const std::vector<Verdict>& verdicts) {
    std::string text = "the per-process counts disagree:";
    const std::string function = first.function.str();
    const bool scatter = function.find("catterv") != std::string::npos;
    const std::string counts = scatter ? "sendcounts" : "recvcounts";
    for (std::size_t r = 0; r < verdicts.size(); ++r) {
        const Verdict& v = verdicts[r];
        for (int k = 0; k < std::min(v.mismatches, 2); ++k) {
            const PeerMismatch& m = v.first[k];
            if (m.this_is_root != 0) {
                text += fmt::format("\n    the root (process {}) sends {} to process {} ({}[{}]), which expects {}", r,
                                    describe(m.mine), m.peer, counts, m.peer, describe(m.theirs));
            } else {
                text += fmt::format("\n    process {} expects {} from process {} ({}[{}]), which sends {}", r,
                                    describe(m.mine), m.peer, counts, m.peer, describe(m.theirs));
            }
        }
        if (v.mismatches > 2) text += fmt::format("\n    process {}: {} more", r, v.mismatches - 2);
    }
    return text;
}

std::string mismatch_report(const CommunicatorRecord& comm, const std::string& headline,
                            const std::vector<CheckRecord>& all, const std::vector<std::string>& sites) {
    std::vector<std::string> calls;
    calls.reserve(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        const CheckRecord& r = all[i];
        std::vector<std::string> args;
        // One buffer (a broadcast's, a reduction's): its count and type; else what is sent and what received.
        const auto rule = static_cast<Rule>(r.rule);
        const bool one_buffer =
            rule == Rule::Bcast || rule == Rule::Reduce || rule == Rule::Allreduce || rule == Rule::ReduceScatter;
        if (r.send.present != 0) args.push_back((one_buffer ? "" : "send ") + describe(r.send));
        if (r.recv.present != 0) args.push_back("recv " + describe(r.recv));
        if (r.in_place != 0) args.emplace_back("MPI_IN_PLACE");
        if (r.root >= 0) args.push_back(fmt::format("root {}", r.root));
        if (r.reduce_op_key != 0) args.push_back(r.reduce_op.str());
        if (args.empty() && (rule == Rule::Alltoallv || rule == Rule::Alltoallw)) args.emplace_back("counts per peer");
        std::string joined;
        for (const auto& a : args) joined += (joined.empty() ? "" : ", ") + a;
        calls.push_back(fmt::format("{}({}) at {}", r.function.str(), joined, sites[i]));
    }
    return fmt::format("lockstep check: {} #{} on {}: {}.\n{}", all.front().function.str(), all.front().call_number,
                       communicator_label(comm), headline, base::grouped_by_value(calls));
}

}  // namespace lockstep::check
