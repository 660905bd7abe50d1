#pragma once
// What the watchdog knows and runs (internal): the communicators it watches with their boards and members, the
// serving thread's clients, and the report thread. Shared by the watchdog's parts: the registry (watchdog.cpp),
// the thread (thread.cpp) and the reports (report.cpp).

#include "../async/work_state.hpp"
#include "../watchdog.hpp"
#include "channel.hpp"
#include "report.hpp"

#include <unistd.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace lockstep::detail {

struct Watchdog::State {
    struct Watched {
        std::unique_ptr<Board> board;
        std::uint64_t seen_begun = 0;
        std::uint64_t seen_ended = 0;
        Clock::time_point start;  // of the call in flight
        Clock::time_point end;    // of the last call completed
        std::string last_label;   // the communicator's label when that call was seen completed
        std::string last_name;    // and its name
        std::optional<Board::Snapshot> snapshot;
    };
    struct Registered {
        std::vector<Endpoint> members;  // in the communicator's rank order
        Watched boards[2];              // collectives, sends and receives
        std::string label;         // what lockstep uses the communicator for, if it is its own (label_communicator)
        std::string name;          // what the program calls it, if lockstep does not carry it (name_communicator)
        TimeoutAction on_timeout;  // on_timeout raise: what to do with a stuck collective's report
        bool timed_out = false;    // on_timeout raise: a collective was found stuck; not checked again
    };
    // A call in flight (`when` it started) or completed (`when` it ended, `order` among completions), with its
    // communicator's label and name.
    struct Call {
        CallRecord record;
        Clock::time_point when;
        std::string label;
        std::uint64_t order = 0;
        std::string name;
        [[nodiscard]] std::string text() const {
            std::string text = record_text(record);
            if (!name.empty()) text += fmt::format(" on {}", name);
            if (!label.empty()) text += fmt::format(" in {}", label);
            return text;
        }
    };

    // Everything below registry_mutex: the calling threads take it only to create and free communicators.
    std::mutex registry_mutex;
    std::map<std::uint64_t, Registered> registered;  // comm id -> members and boards
    // The last call completed on a communicator that has been freed since (a process that freed its communicators and
    // went on to MPI_Finalize still shows its last call).
    std::optional<Call> retired_last;
    std::atomic<std::uint64_t> completions{0};  // the boards' shared count of completed calls

    // A fresh look at one communicator's boards, or at all of them: snapshots, and stamps of the counts that changed
    // (registry_mutex held).
    static void observe(Registered& entry, Clock::time_point now) {
        for (Watched& w : entry.boards) {
            auto snap = w.board->read();
            if (!snap) continue;  // raced with writes on every try: keep the previous look
            if (snap->begun != w.seen_begun) {
                w.seen_begun = snap->begun;
                w.start = now;
            }
            if (snap->ended != w.seen_ended) {
                w.seen_ended = snap->ended;
                w.end = now;
                w.last_label = entry.label;
                w.last_name = entry.name;
            }
            w.snapshot = std::move(snap);
        }
    }
    void observe(Clock::time_point now) {
        for (auto& [id, entry] : registered) observe(entry, now);
    }

    // The calls in flight, oldest first (after observe).
    [[nodiscard]] std::vector<Call> in_flight() const {
        std::vector<Call> calls;
        for (const auto& [id, entry] : registered) {
            for (const Watched& w : entry.boards) {
                if (w.snapshot && w.snapshot->current) {
                    calls.push_back({*w.snapshot->current, w.start, entry.label, 0, entry.name});
                }
            }
        }
        std::stable_sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.when < b.when; });
        return calls;
    }
    // The most recent completed call of one communicator's boards, or of all of them (and the freed ones): by the
    // boards' count of completions, which orders calls that ended within one 100 ms look.
    static void take_later(std::optional<Call>& best, const Registered& entry) {
        for (const Watched& w : entry.boards) {
            if (!w.snapshot || !w.snapshot->last) continue;
            const std::uint64_t order = w.snapshot->last_order;
            const bool later = !best || (order != 0 && best->order != 0 ? order > best->order : w.end >= best->when);
            if (later) best = Call{*w.snapshot->last, w.end, w.last_label, order, w.last_name};
        }
    }
    [[nodiscard]] std::optional<Call> last_completed() const {
        std::optional<Call> best = retired_last;
        for (const auto& [id, entry] : registered) take_later(best, entry);
        return best;
    }
    // Every process this one knows an endpoint of, by world rank (registry_mutex held).
    [[nodiscard]] std::map<int, Endpoint> known_endpoints() const {
        std::map<int, Endpoint> known;
        for (const auto& [id, entry] : registered) {
            for (const Endpoint& e : entry.members) known.emplace(e.world_rank, e);
        }
        return known;
    }

    std::string phase;                   // registry_mutex
    const void* phase_caller = nullptr;  // registry_mutex: where the program entered the phase, if known
    Endpoint self{};
    std::string key;  // self.key as the request carries it
    int world_rank = 0;
    std::string host;

    Fd listener;
    int wake_pipe[2] = {-1, -1};
    std::thread thread;                // serves the channel and checks the boards
    std::thread report;                // builds and prints a report, then ends the job
    std::vector<std::thread> raising;  // build the reports of communicators in on_timeout raise mode (the loop's)
    std::atomic<bool> started{false};
    std::atomic<bool> stop{false};
    std::atomic<bool> nudged{false};  // a peer found this process to be the one that prints the report
    bool reporting = false;           // the serving thread's

    nlohmann::json board_json() {
        std::scoped_lock lock(registry_mutex);
        const auto now = Clock::now();
        observe(now);
        nlohmann::json j = {{"rank", world_rank}, {"host", host}, {"pid", ::getpid()}};
        // Send and receive: direction, peer and tag as data, for the report of a stuck peer.
        const auto add_p2p = [&](const CallRecord& r, const std::string& prefix) {
            if (!r.point_to_point()) return;
            j[prefix + "p2p"] = is_send(r) ? "send" : r.foreign == ForeignKind::request ? "wait" : "recv";
            j[prefix + "peer"] = r.root;
            j[prefix + "tag"] = r.message_tag;
            j[prefix + "comm"] = r.comm_id;
        };
        const std::vector<Call> calls = in_flight();
        if (!calls.empty()) {
            // The oldest call in flight; every call in flight (threads may be in calls on several communicators)
            // with its communicator's members by world rank, for the check of who arrived and for following a member
            // that waits elsewhere.
            const CallRecord& current = calls.front().record;
            j["in_collective"] = true;
            j["op"] = calls.front().text();
            j["comm"] = current.comm_id;
            j["sequence"] = current.sequence;
            add_p2p(current, "");
            j["site"] = site_text(current);
            j["seconds"] = std::chrono::duration<double>(now - calls.front().when).count();
            nlohmann::json all = nlohmann::json::array();
            for (const auto& c : calls) {
                std::vector<int> members;
                if (const auto it = registered.find(c.record.comm_id); it != registered.end()) {
                    for (const Endpoint& e : it->second.members) members.push_back(e.world_rank);
                }
                all.push_back({{"comm", c.record.comm_id},
                               {"sequence", c.record.sequence},
                               {"p2p", c.record.point_to_point()},
                               {"op", call_name(c.record)},
                               {"text", c.text()},
                               {"site", site_text(c.record)},
                               {"seconds", std::chrono::duration<double>(now - c.when).count()},
                               {"timeout", c.record.timeout},
                               {"label", c.label},
                               {"name", c.name},
                               {"members", members}});
            }
            j["in_flight"] = std::move(all);
        } else {
            j["in_collective"] = false;
        }
        if (!phase.empty()) {
            j["phase"] = phase_caller != nullptr
                             ? fmt::format("{}, called at {}", phase, code_address_text(phase_caller))
                             : phase;
        }
        if (nlohmann::json requests = requests_json(); !requests.empty()) j["requests"] = std::move(requests);
        if (const auto last = last_completed()) {
            j["last_op"] = last->text();
            add_p2p(last->record, "last_");
            j["last_site"] = site_text(last->record);
            j["last_seconds_ago"] = std::chrono::duration<double>(now - last->when).count();
        }
        return j;
    }

    // The boards of these processes, in their order; this process answers for itself without the network.
    std::vector<nlohmann::json> ask_boards(const std::vector<Endpoint>& endpoints) {
        std::vector<Endpoint> remote;
        for (const Endpoint& e : endpoints) {
            if (!is_self(e)) remote.push_back(e);
        }
        std::vector<Query> answers = ask_all(remote, "BOARD", Clock::now() + ask_deadline);
        std::vector<nlohmann::json> boards;
        std::size_t next = 0;
        for (const Endpoint& e : endpoints) {
            if (is_self(e)) {
                boards.push_back(board_json());
                continue;
            }
            const Query& q = answers[next++];
            nlohmann::json b;
            if (q.answer) {
                try {
                    b = nlohmann::json::parse(*q.answer);
                } catch (const nlohmann::json::exception&) {
                    b = {{"unreachable", "malformed answer"}};
                }
                if (!b.is_object()) b = {{"unreachable", "malformed answer"}};
            } else {
                b = {{"unreachable", q.failure}};
            }
            b["rank"] = e.world_rank;
            boards.push_back(std::move(b));
        }
        return boards;
    }
    [[nodiscard]] bool is_self(const Endpoint& e) const {
        return e.pid == self.pid && e.host.str() == self.host.str() && e.port == self.port;
    }

    struct Verdict {
        std::string text;
        bool reporter = true;
        Endpoint reporter_endpoint{};
        double linger = 0.0;  // seconds to wait before ending the job, for a peer's own report
    };
    Verdict build(const CallRecord& stuck, double waited);
    Verdict build_point_to_point(const CallRecord& stuck, double waited, const std::vector<Endpoint>& members,
                                 const std::string& stuck_text, bool named);

    // The channel: every connection is non-blocking and has a deadline; one poll serves them all.
    struct Client {
        Fd fd;
        std::string in;
        std::string out;
        Clock::time_point deadline;
        bool answered = false;
    };
    std::vector<Client> clients;
    void accept_clients();
    // Reads and answers what a client sent; false when the connection is to be closed.
    bool serve(Client& c, short revents);
    void answer(Client& c, std::string_view line);
    std::string trace_answer();
    std::string peers_answer();
    std::string dump_hang_trace(nlohmann::json stacks);  // the report's closing lines; the stacks go in the file

    void loop();
    void check(Clock::time_point now);
    void run_report(CallRecord stuck, double waited);
    void raise_timeout(const CallRecord& stuck, double waited);
    [[noreturn]] void end_job();
};

}  // namespace lockstep::detail
