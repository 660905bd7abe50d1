#include "report.hpp"

#include "../rank_groups.hpp"
#include "state.hpp"

#include <dlfcn.h>

#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>

namespace lockstep::detail {

namespace {

std::string base_name(const char* path) {
    return std::filesystem::path(path).filename().string();
}

}  // namespace

bool is_send(const CallRecord& r) {
    return r.foreign == ForeignKind::none ? r.op == OpKind::Send : r.foreign == ForeignKind::send;
}

std::string call_name(const CallRecord& r) {
    return r.foreign == ForeignKind::none ? std::string(op_name(r.op)) : std::string(r.name != nullptr ? r.name : "?");
}

namespace {
std::atomic<std::string (*)(const void*)> code_address_namer{nullptr};
}  // namespace

void set_code_address_namer(std::string (*namer)(const void* address)) noexcept {
    code_address_namer.store(namer, std::memory_order_release);
}

std::string code_address_text(const void* address) {
    if (const auto namer = code_address_namer.load(std::memory_order_acquire); namer != nullptr && address != nullptr) {
        try {
            return namer(address);
        } catch (...) {  // the raw form below
        }
    }
    Dl_info info{};
    if (address != nullptr && ::dladdr(address, &info) != 0 && info.dli_fname != nullptr) {
        const auto offset =
            reinterpret_cast<std::uintptr_t>(address) - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
        std::string text = fmt::format("{}+{:#x}", base_name(info.dli_fname), offset);
        if (info.dli_sname != nullptr) text += fmt::format(" ({})", info.dli_sname);
        return text;
    }
    return fmt::format("{}", address);
}

namespace {

// A call lockstep does not carry: "`MPI_Recv` from process 1 (tag 5, 4 x MPI_INT)", "`MPI_Allreduce` #3 (4 x
// MPI_INT)", "`MPI_Wait` for the `MPI_Irecv` from process 1 (tag 5, 4 x MPI_INT) issued at app+0x1a2b (main)".
std::string foreign_record_text(const CallRecord& r) {
    std::vector<std::string> details;
    const bool point_to_point = r.point_to_point();
    if (!point_to_point && r.root >= 0) details.push_back(fmt::format("root {}", r.root));
    if (point_to_point && r.foreign != ForeignKind::request) {
        details.push_back(r.message_tag < 0 ? std::string("any tag") : fmt::format("tag {}", r.message_tag));
    }
    if (r.count >= 0) {
        details.push_back(r.datatype != nullptr ? fmt::format("{} x {}", r.count, r.datatype)
                                                : fmt::format("{} elements", r.count));
    }
    std::string what;
    if (!point_to_point) {
        what = fmt::format("#{}", r.sequence);
    } else if (r.foreign != ForeignKind::request) {
        const std::string peer = r.root >= 0 ? fmt::format("process {}", r.root) : std::string("any process");
        what = fmt::format("{} {}", is_send(r) ? "to" : "from", peer);
    }
    if (!details.empty()) what += fmt::format("{}({})", what.empty() ? "" : " ", fmt::join(details, ", "));
    const std::string name = call_name(r);
    if (r.request == nullptr) return what.empty() ? fmt::format("`{}`", name) : fmt::format("`{}` {}", name, what);
    std::string text = fmt::format("`{}` for the `{}`", name, r.request);
    if (!what.empty()) text += " " + what;
    if (r.request_caller != nullptr) text += fmt::format(" issued at {}", code_address_text(r.request_caller));
    return text;
}

}  // namespace

std::string record_text(const CallRecord& r) {
    if (r.foreign != ForeignKind::none) return foreign_record_text(r);
    const std::string peer = r.root >= 0 ? fmt::format("process {}", r.root) : std::string("any process");
    std::string s = r.point_to_point() ? fmt::format("`{}` {} {} (tag {})", op_name(r.op), is_send(r) ? "to" : "from",
                                                     peer, r.message_tag)
                                       : fmt::format("`{}` #{}", op_name(r.op), r.sequence);
    if (r.has_tensor) {
        Shape shape(r.dims, r.dims + std::min<int>(r.ndim, static_cast<int>(max_record_dims)));
        s += fmt::format(" {}{}", dtype_name(r.dtype), shape_str(shape));
    }
    return s;
}

std::string site_text(const CallRecord& r) {
    if (r.caller != nullptr && (r.file == nullptr || *r.file == '\0')) return code_address_text(r.caller);
    return fmt::format("{}:{}", base_name(r.file), r.line);
}

namespace {

// The non-blocking operations a process has issued and not yet seen complete, one line each under its line:
// "request #3 `lockstep::allreduce` float32[4] issued at train.cpp:88, 12.0 s ago: running; waited for in wait()".
std::string requests_lines(const nlohmann::json& b) {
    if (!b.contains("requests")) return {};
    std::string text;
    const auto& requests = b["requests"];
    // The oldest few, and those a thread waits for: a loop that issued thousands would bury the report.
    constexpr std::size_t shown_at_most = 8;
    std::size_t shown = 0;
    for (const auto& r : requests) {
        if (shown >= shown_at_most && !r.value("waiting", false)) continue;
        ++shown;
        text += fmt::format("\n      request #{} {} issued at {}, {:.1f} s ago: {}", r.value("id", 0),
                            r.value("op", "?"), r.value("site", "?"), r.value("seconds", 0.0), r.value("state", "?"));
        if (r.value("waiting", false)) {
            text += "; a thread waits for it in wait()";
        } else if (r.value("dropped", false)) {
            text += "; dropped without a wait";
        } else {
            text += "; never waited for so far";
        }
    }
    if (shown < requests.size()) {
        text += fmt::format("\n      ... and {} more {} not waited for", requests.size() - shown,
                            requests.size() - shown == 1 ? "request" : "requests");
    }
    return text;
}

// One line of "What each process is doing" from a process's board; `name` is "Process 2" or "World rank 5".
std::string process_line(const nlohmann::json& b, const std::string& name) {
    std::string line = "  - " + name;
    if (b.contains("unreachable")) {
        line += fmt::format(": no answer ({}): the process has exited or its node is unreachable",
                            b["unreachable"].get<std::string>());
    } else {
        line += fmt::format(" (host {}, pid {}): ", b.value("host", "?"), b.value("pid", 0));
        if (b.value("in_collective", false)) {
            line += fmt::format("in {} for {:.1f} s at {}", b.value("op", "?"), b.value("seconds", 0.0),
                                b.value("site", "?"));
            if (b.contains("phase")) line += fmt::format(" ({})", b["phase"].get<std::string>());
        } else {
            line += "not in a collective";
            if (b.contains("phase")) line += fmt::format(" ({})", b["phase"].get<std::string>());
        }
        if (b.contains("last_op")) {
            line += fmt::format("; last completed {} at {}, {:.1f} s ago", b.value("last_op", "?"),
                                b.value("last_site", "?"), b.value("last_seconds_ago", 0.0));
        } else {
            line += "; no collective completed yet";
        }
        line += requests_lines(b);
    }
    return line + "\n";
}

// What follows a call's text on its "Operation:" line: " on a communicator of 3 processes", or " (3 processes)" after a
// text that names the communicator ("... on MPI_COMM_WORLD").
std::string communicator_size_text(bool named, std::size_t size) {
    const std::string count = detail::count_text(size, "process", "processes");
    return named ? fmt::format(" ({})", count) : fmt::format(" on a communicator of {}", count);
}

std::string member_name(const Endpoint& member, int index) {
    std::string name = fmt::format("Process {}", index);
    if (member.world_rank != index) name += fmt::format(" (world rank {})", member.world_rank);
    return name;
}

// "Processes 0-1", with their world ranks when the communicator numbers them otherwise.
std::string members_text(const std::vector<int>& indices, const std::vector<Endpoint>& members) {
    std::string text = processes_text(indices);
    std::vector<int> world;
    bool renumbered = false;
    for (const int i : indices) {
        world.push_back(members[static_cast<std::size_t>(i)].world_rank);
        renumbered = renumbered || world.back() != i;
    }
    if (renumbered) text += fmt::format(" (world rank{} {})", world.size() == 1 ? "" : "s", format_rank_ranges(world));
    return text;
}

// "  - Processes 0-1: value" lines, members of equal value together, named as members_text does.
std::string members_grouped(const std::vector<std::string>& value_of_member, const std::vector<Endpoint>& members) {
    bool renumbered = false;
    for (std::size_t i = 0; i < members.size(); ++i) renumbered = renumbered || members[i].world_rank != int(i);
    if (!renumbered) return grouped_by_value(value_of_member);
    std::string out;
    for (const std::vector<int>& indices : base::ranks_by_value(value_of_member))
        out += fmt::format("  - {}: {}\n", members_text(indices, members), value_of_member[indices.front()]);
    return out;
}

// What the peer of a stuck send/recv is doing instead of the matching call, and what to do about it.
std::string point_to_point_diagnosis(const CallRecord& stuck, const nlohmann::json& peer, int me) {
    const bool sending = is_send(stuck);
    const bool foreign = stuck.foreign != ForeignKind::none;
    const std::string want = sending ? "recv" : "send";
    // lockstep's own calls name the call ("`lockstep::recv` from process 0"); a program's, what it must do ("receive
    // from process 0").
    const std::string want_call =
        fmt::format("{} {} process {}", foreign ? (sending ? "receive" : "send") : fmt::format("`lockstep::{}`", want),
                    sending ? "from" : "to", me);
    const auto is_toward_me = [&](const std::string& prefix) {
        return peer.contains(prefix + "p2p") && peer.value(prefix + "peer", -1) == me &&
               peer.value(prefix + "comm", std::uint64_t{~0ULL}) == stuck.comm_id;
    };
    const int p = stuck.root;
    // A peer in lockstep's finalisation has left the program's calls, whatever lockstep does there.
    const bool finalising = peer.contains("phase");
    if (peer.contains("unreachable")) {
        return fmt::format(
            "Process {} does not answer: it has exited or its node is unreachable, so the matching {} "
            "will never come. Look at its own output for an error.",
            p, want_call);
    }
    if (!finalising && peer.value("in_collective", false) && is_toward_me("")) {
        const std::string kind = peer.value("p2p", "");
        const int tag = peer.value("tag", 0);
        if (foreign && kind == want) {
            return fmt::format(
                "Process {} is in the matching {} ({}) but with tag {}, and this call uses {}: the tags "
                "must be equal.",
                p, want_call, peer.value("op", "?"), tag,
                stuck.message_tag < 0 ? std::string("any tag") : fmt::format("tag {}", stuck.message_tag));
        }
        if (foreign && kind != "wait") {
            return fmt::format(
                "Process {} is in {} at {}: both sides {}, so neither call can complete. Order the calls (for "
                "example, even ranks send first and odd ranks receive first), or make one of them non-blocking.",
                p, peer.value("op", "?"), peer.value("site", "?"), sending ? "send" : "wait to receive");
        }
        if (kind == want) {
            return fmt::format(
                "Process {} is in the matching {} but with tag {}, and this call uses tag {}: the tags "
                "must be equal.",
                p, want_call, tag, stuck.message_tag);
        }
        return fmt::format(
            "Process {} is in `lockstep::{}` {} this process too: both sides {}, so neither call can "
            "complete. Order the calls (for example, even ranks send first and odd ranks receive first).",
            p, kind, kind == "send" ? "to" : "from", sending ? "send" : "wait to receive");
    }
    if (!finalising && peer.value("in_collective", false)) {
        return fmt::format(
            "Process {} is in {} at {} instead of the matching {}: the two processes disagree on the "
            "order of communication.",
            p, peer.value("op", "?"), peer.value("site", "?"), want_call);
    }
    if (is_toward_me("last_") && peer.value("last_p2p", "") == want) {
        return fmt::format(
            "Process {} is not communicating{}; its last completed call was {} at {}. If that was "
            "meant for this {}, the tags differ (this call uses tag {}).",
            p, finalising ? fmt::format(" ({})", peer.value("phase", "")) : "", peer.value("last_op", "?"),
            peer.value("last_site", "?"), sending ? "send" : "recv", stuck.message_tag);
    }
    if (foreign) {
        const std::string now =
            finalising ? fmt::format("; it is {} now", peer.value("phase", ""))
            : peer.value("in_collective", false)
                ? fmt::format("; it is in {} at {} now", peer.value("op", "?"), peer.value("site", "?"))
                : std::string("; it is in none of its MPI calls now (computing?)");
        return fmt::format(
            "Process {} never posted the matching {}{}. Look for a branch or an early exit that skips it.", p,
            want_call, now);
    }
    return fmt::format("Process {} never posted the matching {}: look for a branch or an early exit that skips it.", p,
                       want_call);
}

}  // namespace

std::string Watchdog::build_report(const CallRecord& stuck, double waited, bool* is_reporter) {
    State::Verdict verdict = state_->build(stuck, waited);
    if (is_reporter != nullptr) *is_reporter = verdict.reporter;
    return verdict.text;
}

Watchdog::State::Verdict Watchdog::State::build_point_to_point(const CallRecord& stuck, double waited,
                                                               const std::vector<Endpoint>& members,
                                                               const std::string& stuck_text, bool named) {
    int my_index = -1;
    for (std::size_t i = 0; i < members.size(); ++i) {
        if (is_self(members[i])) my_index = static_cast<int>(i);
    }
    Verdict v;  // only the two ends wait; each reports its own side
    v.reporter_endpoint = self;
    std::string& r = v.text;
    r = fmt::format("lockstep: point-to-point call timed out after {:.1f} s (timeout {:g} s)\n\n", waited,
                    stuck.timeout);
    r += fmt::format("Operation: {}{}, called at {} by process {}\n", stuck_text,
                     communicator_size_text(named, members.size()), site_text(stuck), my_index);
    const std::vector<nlohmann::json> boards = ask_boards(members);
    if (stuck.root >= 0 && stuck.root < static_cast<int>(boards.size())) {
        const nlohmann::json& peer = boards[static_cast<std::size_t>(stuck.root)];
        r += "\n" + point_to_point_diagnosis(stuck, peer, my_index) + "\n";
        // A peer that waits for this process in a send or recv of its own prints its side when its timeout comes
        // (about now: the two calls wait for each other); the job ends after that.
        if (peer.contains("p2p") && peer.value("peer", -1) == my_index && !peer.contains("phase")) {
            v.linger = std::clamp(stuck.timeout - peer.value("seconds", 0.0), 0.0, 5.0) +
                       std::chrono::duration<double>(ask_deadline).count() + 0.5;
        }
    }
    r += "\nWhat each process is doing:\n";
    for (std::size_t i = 0; i < boards.size(); ++i) {
        r += process_line(boards[i], member_name(members[i], static_cast<int>(i)));
    }
    return v;
}

namespace {

// One stuck collective of a report: the call, its communicator's members, and where each member is on it.
struct StuckCall {
    std::uint64_t comm = 0;
    std::vector<Endpoint> members;
    std::string text;  // op, call number, dtype, shape, label
    std::string op;
    std::uint64_t sequence = 0;
    std::string site;
    double seconds = 0.0;
    double timeout = 0.0;
    std::string label;   // what lockstep uses the communicator for, if it is one of its own (label_communicator)
    bool named = false;  // the text names the communicator (name_communicator)
};

// A request of communicator `comm` on this board that is queued and that no thread waits for, if any.
const nlohmann::json* queued_request(const nlohmann::json& b, std::uint64_t comm) {
    if (!b.contains("requests")) return nullptr;
    for (const auto& r : b["requests"]) {
        if (r.value("comm", std::uint64_t{0}) == comm && r.value("collective", false) && !r.value("waiting", false) &&
            r.value("state", "").starts_with("queued")) {
            return &r;
        }
    }
    return nullptr;
}

// Whether every one of `missing` holds a queued, unwaited request on the stuck call's communicator.
bool queued_unwaited(const std::vector<int>& missing, const StuckCall& c, std::map<int, nlohmann::json>& boards) {
    return std::all_of(missing.begin(), missing.end(), [&](int i) {
        return queued_request(boards[c.members[static_cast<std::size_t>(i)].world_rank], c.comm) != nullptr;
    });
}

// A member's call in flight on communicator `comm`, from its board.
const nlohmann::json* call_on(const nlohmann::json& board, std::uint64_t comm) {
    if (!board.contains("in_flight") || !board["in_flight"].is_array()) return nullptr;
    for (const auto& call : board["in_flight"]) {
        if (!call.value("p2p", false) && call.value("comm", std::uint64_t{~0ULL}) == comm) return &call;
    }
    return nullptr;
}

// The label of the lockstep call (its check at finalize) that every one of these members waits in instead, if they all
// wait in the same one: they have left the program's calls.
std::optional<std::string> lockstep_call_of(const std::vector<int>& indices, const std::vector<Endpoint>& members,
                                            std::map<int, nlohmann::json>& boards) {
    std::set<std::string> labels;
    for (const int i : indices) {
        const nlohmann::json& b = boards[members[static_cast<std::size_t>(i)].world_rank];
        if (!b.contains("in_flight") || !b["in_flight"].is_array()) return std::nullopt;
        const auto& calls = b["in_flight"];
        const auto own = std::find_if(calls.begin(), calls.end(),
                                      [](const nlohmann::json& call) { return !call.value("label", "").empty(); });
        if (own == calls.end()) return std::nullopt;
        labels.insert(own->value("label", ""));
    }
    if (labels.size() != 1) return std::nullopt;
    return *labels.begin();
}

}  // namespace

Watchdog::State::Verdict Watchdog::State::build(const CallRecord& stuck, double waited) {
    std::vector<Endpoint> members;
    std::string stuck_text = record_text(stuck);  // with its communicator's label, if lockstep's own
    std::string stuck_label;
    bool named = false;
    std::map<int, Endpoint> known;
    {
        std::scoped_lock lock(registry_mutex);
        if (auto it = registered.find(stuck.comm_id); it != registered.end()) {
            members = it->second.members;
            stuck_text = Call{stuck, {}, it->second.label, 0, it->second.name}.text();
            stuck_label = it->second.label;
            named = !it->second.name.empty();
        }
        known = known_endpoints();
    }
    if (stuck.point_to_point()) return build_point_to_point(stuck, waited, members, stuck_text, named);

    // The stuck call, and every collective its missing members are stuck in instead, transitively: ranks 0-1 waiting
    // in one communicator for rank 2, which waits in another for them, are one hang and get one report.
    std::vector<StuckCall> calls = {{stuck.comm_id, members, stuck_text, call_name(stuck), stuck.sequence,
                                     site_text(stuck), waited, stuck.timeout, stuck_label, named}};
    std::map<int, nlohmann::json> boards;  // by world rank
    constexpr std::size_t most_calls = 8;
    for (int round = 0; round < 4; ++round) {
        std::vector<Endpoint> ask;
        for (const StuckCall& c : calls) {
            for (const Endpoint& m : c.members) {
                const bool asked = boards.contains(m.world_rank) ||
                                   std::any_of(ask.begin(), ask.end(),
                                               [&](const Endpoint& e) { return e.world_rank == m.world_rank; });
                if (!asked) ask.push_back(m);
            }
        }
        if (ask.empty()) break;
        const std::vector<nlohmann::json> answers = ask_boards(ask);
        for (std::size_t i = 0; i < ask.size(); ++i) boards[ask[i].world_rank] = answers[i];
        for (std::size_t i = 0; i < ask.size() && calls.size() < most_calls; ++i) {
            const nlohmann::json& b = answers[i];
            if (!b.contains("in_flight") || !b["in_flight"].is_array()) continue;
            for (const auto& call : b["in_flight"]) {
                const auto comm = call.value("comm", std::uint64_t{~0ULL});
                if (call.value("p2p", false) || call.value("timeout", 0.0) <= 0.0) continue;
                if (std::any_of(calls.begin(), calls.end(), [&](const StuckCall& c) { return c.comm == comm; })) {
                    continue;
                }
                StuckCall other{comm,
                                {},
                                call.value("text", "?"),
                                call.value("op", "?"),
                                call.value("sequence", std::uint64_t{0}),
                                call.value("site", "?"),
                                call.value("seconds", 0.0),
                                call.value("timeout", 0.0),
                                call.value("label", ""),
                                !call.value("name", "").empty()};
                if (!call.contains("members") || !call["members"].is_array()) continue;
                for (const auto& w : call["members"]) {
                    const int rank = w.get<int>();
                    Endpoint e{};
                    e.world_rank = rank;
                    if (const auto it = known.find(rank); it != known.end()) e = it->second;
                    other.members.push_back(e);
                }
                calls.push_back(std::move(other));
                if (calls.size() >= most_calls) break;
            }
        }
    }

    // A call of lockstep's own (its check at finalize) that waits for processes stuck in a call of the program only
    // follows from it: the program's call leads the report, with its communicator's members and its hint.
    const auto of_the_program = [](const StuckCall& c) { return c.label.empty(); };
    if (!of_the_program(calls.front())) {
        if (const auto it = std::find_if(calls.begin(), calls.end(), of_the_program); it != calls.end()) {
            std::rotate(calls.begin(), it, it + 1);
            members = calls.front().members;
        }
    }

    // Where each member of each stuck call is on that call's communicator.
    std::set<int> waiting;  // world ranks in a collective of one of the stuck calls' communicators
    std::vector<std::string> sections;
    std::set<int> missing_anywhere, waiting_in_another;
    std::string first_hint;
    for (std::size_t k = 0; k < calls.size(); ++k) {
        const StuckCall& c = calls[k];
        std::vector<int> arrived, elsewhere, missing;
        std::vector<std::string> value_of_member;
        std::set<std::uint64_t> sequences;
        std::set<std::string> ops, texts;
        for (std::size_t i = 0; i < c.members.size(); ++i) {
            const nlohmann::json& b = boards[c.members[i].world_rank];
            const nlohmann::json* call = call_on(b, c.comm);
            if (call == nullptr) {
                missing.push_back(static_cast<int>(i));
                value_of_member.push_back(b.contains("unreachable") ? "no answer" : "not in a call on it");
                continue;
            }
            waiting.insert(c.members[i].world_rank);
            const std::string text = call->value("text", "?");
            value_of_member.push_back(fmt::format("{} at {}", text, call->value("site", "?")));
            sequences.insert(call->value("sequence", std::uint64_t{0}));
            ops.insert(call->value("op", "?"));
            texts.insert(text);
            (text == c.text && call->value("sequence", std::uint64_t{0}) == c.sequence ? arrived : elsewhere)
                .push_back(static_cast<int>(i));
        }
        for (const int i : missing) missing_anywhere.insert(c.members[static_cast<std::size_t>(i)].world_rank);
        std::string s;
        if (k == 0) {
            s += fmt::format("Operation: {}{}, called at {}\n", c.text,
                             communicator_size_text(c.named, c.members.size()), c.site);
        } else {
            s += fmt::format("Operation: {}{}, called at {}, in flight for {:.1f} s\n", c.text,
                             communicator_size_text(c.named, c.members.size()), c.site, c.seconds);
        }
        std::string hint;
        if (elsewhere.empty()) {
            s += fmt::format("Arrived and waiting: {}\n", members_text(arrived, c.members));
            // Missing members that wait in a send or recv print that call's report themselves.
            std::vector<int> in_point_to_point;
            for (const int i : missing) {
                const nlohmann::json& b = boards[c.members[static_cast<std::size_t>(i)].world_rank];
                if (b.contains("p2p")) in_point_to_point.push_back(i);
            }
            if (!missing.empty() && in_point_to_point.size() == missing.size()) {
                s += fmt::format("Never arrived: {}\n", members_text(missing, c.members));
                hint = fmt::format(
                    "{} did not get here: {} stuck in a point-to-point call (its own report says why), so this "
                    "collective cannot complete either.",
                    members_text(missing, c.members), missing.size() == 1 ? "it is" : "they are");
            } else if (!missing.empty() && queued_unwaited(missing, c, boards)) {
                s += fmt::format("Never arrived: {}\n", members_text(missing, c.members));
                const nlohmann::json& b = boards[c.members[static_cast<std::size_t>(missing.front())].world_rank];
                const nlohmann::json& r = *queued_request(b, c.comm);
                hint = fmt::format(
                    "{} issued the call without blocking (request #{} {} at {}) but never waited for it: without a "
                    "progress thread (the progress_thread setting off, or MPI without MPI_THREAD_MULTIPLE) a "
                    "non-blocking collective runs only inside wait() or test(). Wait for every request.",
                    members_text(missing, c.members), r.value("id", 0), r.value("op", "?"), r.value("site", "?"));
            } else if (!missing.empty()) {
                s += fmt::format("Never arrived: {}\n", members_text(missing, c.members));
                const std::optional<std::string> gone_to = lockstep_call_of(missing, c.members, boards);
                hint = fmt::format(
                    "{} never called this collective{}: look for a branch, an early `break` or an exception that "
                    "only some ranks take before {}. Setting LOCKSTEP_DEBUG_MODE=1 checks every call's signature.",
                    members_text(missing, c.members),
                    gone_to ? fmt::format(" and went on to {}", *gone_to) : std::string(), c.site);
            } else {
                hint = "Every process is in this call, so it is stuck inside MPI (a lost process or network).";
            }
        } else {
            std::string reason, advice;
            if (sequences.size() > 1) {
                reason = "the ranks are at different call numbers";
                advice =
                    "A process skipped a collective (or made an extra one) that its peers completed without it (a "
                    "broadcast's root and a reduce's senders return as soon as their data is out), so the calls no "
                    "longer pair up. Setting LOCKSTEP_DEBUG_MODE=1 reports the first call where they part.";
            } else if (ops.size() > 1) {
                reason = "the ranks disagree on the operation";
                advice =
                    "The processes reached different collectives at the same point: look for a branch that only some "
                    "ranks take. Setting LOCKSTEP_DEBUG_MODE=1 reports such a mismatch at once, with every rank's "
                    "call.";
            } else if (stuck.foreign != ForeignKind::none) {
                reason = "the ranks disagree on the arguments (count, datatype or root)";
                advice =
                    "Every process must pass matching arguments. Setting LOCKSTEP_DEBUG_MODE=1 reports such a "
                    "mismatch at once, with every rank's call.";
            } else {
                reason = "the ranks disagree on the tensor (dtype or shape)";
                advice =
                    "Every process must pass the same dtype and shape. Setting LOCKSTEP_DEBUG_MODE=1 reports such a "
                    "mismatch at once, with every rank's call.";
            }
            s += fmt::format("The processes are in different calls on this communicator: {}\n", reason);
            s += members_grouped(value_of_member, c.members);
            if (!missing.empty()) s += fmt::format("Never arrived: {}\n", members_text(missing, c.members));
            hint = advice;
        }
        if (k == 0) first_hint = hint;
        sections.push_back(std::move(s));
    }
    for (const int rank : missing_anywhere) {
        if (waiting.contains(rank)) waiting_in_another.insert(rank);
    }

    Verdict v;
    // A member that waits in a send or recv instead reports that call itself when its timeout comes; the job ends
    // after its report, which may take as long as asking every board (ask_deadline) after the timeout.
    const double report_time = std::chrono::duration<double>(ask_deadline).count() + 0.5;
    for (const auto& [rank, b] : boards) {
        if (b.value("in_collective", false) && b.contains("p2p") && !b.contains("phase")) {
            v.linger =
                std::max(v.linger, std::clamp(b.value("timeout", stuck.timeout) - b.value("seconds", 0.0), 0.0, 5.0) +
                                       report_time);
        }
    }
    const int reporter = waiting.empty() ? world_rank : *waiting.begin();
    v.reporter = reporter == world_rank;
    if (const auto it = known.find(reporter); it != known.end()) v.reporter_endpoint = it->second;
    v.reporter_endpoint.world_rank = reporter;

    std::string& r = v.text;
    r = fmt::format("lockstep: collective timed out after {:.1f} s (timeout {:g} s)\n\n", calls.front().seconds,
                    calls.front().timeout);
    r += sections.front();
    if (calls.size() > 1) {
        r += "\nThe processes missing here are stuck in another collective:\n";
        for (std::size_t k = 1; k < sections.size(); ++k) r += sections[k];
        if (waiting_in_another.size() == missing_anywhere.size()) {
            r += fmt::format(
                "These {} calls wait for each other: every process missing from one of them waits in another, so "
                "none can complete.\n",
                calls.size());
        }
    }
    r += "\nWhat each process is doing:\n";
    for (std::size_t i = 0; i < members.size(); ++i) {
        r += process_line(boards[members[i].world_rank], member_name(members[i], static_cast<int>(i)));
    }
    for (const auto& [rank, b] : boards) {
        const bool member =
            std::any_of(members.begin(), members.end(), [&](const Endpoint& m) { return m.world_rank == rank; });
        if (!member) r += process_line(b, fmt::format("World rank {}", rank));
    }
    r += "\n" + first_hint + "\n";
    return v;
}

}  // namespace lockstep::detail
