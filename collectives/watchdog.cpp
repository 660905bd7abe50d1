#include "watchdog.hpp"

#include "rank_groups.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace lockstep::detail {

namespace {

using Clock = std::chrono::steady_clock;

// An owned file descriptor.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    void reset() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    [[nodiscard]] int get() const { return fd_; }
    [[nodiscard]] bool valid() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

std::string base_name(const char* path) {
    return std::filesystem::path(path).filename().string();
}

bool is_send(const CallRecord& r) {
    return r.op == OpKind::Send;
}

std::string record_text(const CallRecord& r) {
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
    return fmt::format("{}:{}", base_name(r.file), r.line);
}

// --- The channel's wire format: one request line "VERB KEY\n", answered by one line (a board as JSON, or "OK").

constexpr std::size_t longest_request = 256;
// A connection that has not sent its request (or taken its answer) by then is dropped: the server never waits on a
// client, so idle or half-open connections cannot delay the answers to peers.
constexpr auto client_deadline = std::chrono::milliseconds(500);
constexpr std::size_t most_clients = 256;
// How long a query of peers waits for their answers: long enough for a loaded node, short enough for a report.
constexpr auto ask_deadline = std::chrono::seconds(2);
// How long a waiting process that is not the reporter waits for the reporter to end the job before it reports itself.
constexpr auto reporter_grace = std::chrono::seconds(5);

std::string key_text(const std::array<std::uint8_t, 16>& key) {
    std::string text;
    for (const std::uint8_t byte : key) text += fmt::format("{:02x}", byte);
    return text;
}

// Compares in time independent of where the texts differ.
bool same_key(std::string_view presented, const std::string& expected) {
    if (presented.size() != expected.size()) return false;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
    }
    return diff == 0;
}

std::array<std::uint8_t, 16> random_key() {
    std::array<std::uint8_t, 16> key{};
    std::size_t filled = 0;
    while (filled < key.size()) {
        const ssize_t n = ::getrandom(key.data() + filled, key.size() - filled, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error(fmt::format("watchdog: getrandom() failed: {}", std::strerror(errno)));
        filled += static_cast<std::size_t>(n);
    }
    return key;
}

int milliseconds_until(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 1000 * 1000));
}

// One query in flight to one peer: connect, send the request, read one line; all non-blocking.
struct Query {
    Fd fd;
    std::string out;
    std::string in;
    bool connected = false;
    std::optional<std::string> answer;  // the line received
    std::string failure;                // why there is none
    [[nodiscard]] bool done() const { return answer.has_value() || !failure.empty(); }
};

void start_query(Query& q, const Endpoint& to, std::string_view verb) {
    addrinfo hints{};
    hints.ai_family = AF_INET;  // the listener is IPv4
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string host = to.host.str();
    if (to.port <= 0) {
        q.failure = "no known endpoint";
        return;
    }
    if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(to.port).c_str(), &hints, &found); rc != 0) {
        q.failure = fmt::format("cannot resolve {}: {}", host, gai_strerror(rc));
        return;
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
    q.fd = Fd(::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol));
    if (!q.fd.valid()) {
        q.failure = std::strerror(errno);
        return;
    }
    if (::connect(q.fd.get(), found->ai_addr, found->ai_addrlen) == 0) {
        q.connected = true;
    } else if (errno != EINPROGRESS) {
        q.failure = std::strerror(errno);
        return;
    }
    q.out = watchdog_request(verb, to);
}

// Sends `verb` to every endpoint at once and collects the answer lines until `deadline`. A slow or dead peer costs
// the deadline once, not once per peer.
std::vector<Query> ask_all(const std::vector<Endpoint>& to, std::string_view verb, Clock::time_point deadline) {
    std::vector<Query> queries(to.size());
    for (std::size_t i = 0; i < to.size(); ++i) start_query(queries[i], to[i], verb);
    while (true) {
        std::vector<pollfd> fds;
        std::vector<std::size_t> which;
        for (std::size_t i = 0; i < queries.size(); ++i) {
            const Query& q = queries[i];
            if (q.done()) continue;
            fds.push_back({q.fd.get(), static_cast<short>(!q.connected || !q.out.empty() ? POLLOUT : POLLIN), 0});
            which.push_back(i);
        }
        if (fds.empty()) break;
        const int wait = milliseconds_until(deadline);
        if (wait <= 0 || ::poll(fds.data(), fds.size(), wait) < 0) {
            if (wait > 0 && errno == EINTR) continue;
            for (const std::size_t i : which) queries[i].failure = "no answer in time";
            break;
        }
        for (std::size_t k = 0; k < fds.size(); ++k) {
            Query& q = queries[which[k]];
            if (fds[k].revents == 0) continue;
            if (!q.connected) {
                int err = 0;
                socklen_t len = sizeof err;
                ::getsockopt(q.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
                if (err != 0) {
                    q.failure = std::strerror(err);
                    continue;
                }
                q.connected = true;
            }
            if (!q.out.empty()) {
                const ssize_t n = ::send(q.fd.get(), q.out.data(), q.out.size(), MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN) q.failure = "the connection broke";
                if (n > 0) q.out.erase(0, static_cast<std::size_t>(n));
                continue;
            }
            char buf[4096];
            const ssize_t n = ::read(q.fd.get(), buf, sizeof buf);
            if (n < 0 && errno == EAGAIN) continue;
            if (n <= 0) {
                q.failure = q.in.empty() ? "the connection was closed without an answer" : "a truncated answer";
                continue;
            }
            q.in.append(buf, static_cast<std::size_t>(n));
            if (const auto newline = q.in.find('\n'); newline != std::string::npos) q.answer = q.in.substr(0, newline);
        }
    }
    return queries;
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
    }
    return line + "\n";
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
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (std::size_t i = 0; i < value_of_member.size(); ++i) {
        auto it =
            std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == value_of_member[i]; });
        if (it == groups.end()) {
            groups.push_back({value_of_member[i], {static_cast<int>(i)}});
        } else {
            it->second.push_back(static_cast<int>(i));
        }
    }
    std::string out;
    for (const auto& [value, indices] : groups)
        out += fmt::format("  - {}: {}\n", members_text(indices, members), value);
    return out;
}

// What the peer of a stuck send/recv is doing instead of the matching call, and what to do about it.
std::string point_to_point_diagnosis(const CallRecord& stuck, const nlohmann::json& peer, int me) {
    const bool sending = is_send(stuck);
    const std::string want = sending ? "recv" : "send";
    const std::string want_call = fmt::format("`lockstep::{}` {} process {}", want, sending ? "from" : "to", me);
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
    return fmt::format("Process {} never posted the matching {}: look for a branch or an early exit that skips it.", p,
                       want_call);
}

}  // namespace

std::string watchdog_request(std::string_view verb, const Endpoint& to) {
    return fmt::format("{} {}\n", verb, key_text(to.key));
}

struct Watchdog::State {
    struct Watched {
        std::unique_ptr<Board> board;
        std::uint64_t seen_begun = 0;
        std::uint64_t seen_ended = 0;
        Clock::time_point start;  // of the call in flight
        Clock::time_point end;    // of the last call completed
        std::string last_label;   // the communicator's label when that call was seen completed
        std::optional<Board::Snapshot> snapshot;
    };
    struct Registered {
        std::vector<Endpoint> members;  // in the communicator's rank order
        Watched boards[2];              // collectives, sends and receives
        std::string label;  // what lockstep uses the communicator for, if it is its own (label_communicator)
    };
    // A call in flight (`when` it started) or completed (`when` it ended, `order` among completions), with its
    // communicator's label.
    struct Call {
        CallRecord record;
        Clock::time_point when;
        std::string label;
        std::uint64_t order = 0;
        [[nodiscard]] std::string text() const {
            return label.empty() ? record_text(record) : fmt::format("{} in {}", record_text(record), label);
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
                if (w.snapshot && w.snapshot->current) calls.push_back({*w.snapshot->current, w.start, entry.label});
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
            if (later) best = Call{*w.snapshot->last, w.end, w.last_label, order};
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

    std::string phase;  // registry_mutex
    Endpoint self{};
    std::string key;  // self.key as the request carries it
    int world_rank = 0;
    std::string host;

    Fd listener;
    int wake_pipe[2] = {-1, -1};
    std::thread thread;  // serves the channel and checks the boards
    std::thread report;  // builds and prints a report, then ends the job
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
            j[prefix + "p2p"] = is_send(r) ? "send" : "recv";
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
                               {"op", std::string(op_name(c.record.op))},
                               {"text", c.text()},
                               {"site", site_text(c.record)},
                               {"seconds", std::chrono::duration<double>(now - c.when).count()},
                               {"timeout", c.record.timeout},
                               {"members", members}});
            }
            j["in_flight"] = std::move(all);
        } else {
            j["in_collective"] = false;
        }
        if (!phase.empty()) j["phase"] = phase;
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
                                 const std::string& stuck_text);

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

    void loop();
    void check(Clock::time_point now);
    void run_report(CallRecord stuck, double waited);
    [[noreturn]] void end_job();
};

void Watchdog::State::accept_clients() {
    while (true) {
        Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!fd.valid()) return;
        if (clients.size() >= most_clients) clients.erase(clients.begin());  // the oldest waits the longest anyway
        clients.push_back({std::move(fd), {}, {}, Clock::now() + client_deadline});
    }
}

bool Watchdog::State::serve(Client& c, short revents) {
    if ((revents & POLLIN) != 0 && !c.answered) {
        char buf[longest_request];
        const ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
        if (n < 0) return errno == EAGAIN || errno == EINTR;
        if (n == 0) return false;
        c.in.append(buf, static_cast<std::size_t>(n));
        const auto newline = c.in.find('\n');
        if (newline == std::string::npos) return c.in.size() < longest_request;
        c.answered = true;
        answer(c, std::string_view(c.in).substr(0, newline));
        if (c.out.empty()) return false;
    }
    if ((revents & (POLLERR | POLLHUP)) != 0 && c.out.empty()) return false;
    if (!c.out.empty()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n < 0) return errno == EAGAIN || errno == EINTR;
        c.out.erase(0, static_cast<std::size_t>(n));
        return !c.out.empty();
    }
    return true;
}

namespace {
std::mutex verdict_mutex;
std::optional<std::string> verdict_text;  // under verdict_mutex
void record_verdict(std::string text) {
    std::scoped_lock lock(verdict_mutex);
    if (!verdict_text) verdict_text = std::move(text);
}
}  // namespace

std::optional<std::string> watchdog_verdict() {
    std::scoped_lock lock(verdict_mutex);
    return verdict_text;
}

void Watchdog::State::answer(Client& c, std::string_view line) {
    const auto space = line.find(' ');
    if (space == std::string_view::npos || !same_key(line.substr(space + 1), key)) return;  // not of this job
    const std::string_view verb = line.substr(0, space);
    if (verb == "BOARD") {
        c.out = board_json().dump() + "\n";
    } else if (verb == "NUDGE") {
        nudged = true;
        c.out = "OK\n";
    } else if (verb == "END") {
        // The reporter has printed the report and ends the job: this process ends itself, whatever its threads do
        // (a thread inside MPI_Finalize included).
        (void)::send(c.fd.get(), "OK\n", 3, MSG_NOSIGNAL);
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(124);
    }
}

void Watchdog::State::loop() {
    auto next_check = Clock::now();
    while (!stop) {
        std::vector<pollfd> fds = {{listener.get(), POLLIN, 0}, {wake_pipe[0], POLLIN, 0}};
        auto wake_at = next_check;
        for (const Client& c : clients) {
            fds.push_back({c.fd.get(), static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
            wake_at = std::min(wake_at, c.deadline);
        }
        const int rc = ::poll(fds.data(), fds.size(), milliseconds_until(wake_at));
        if (stop) break;
        const auto now = Clock::now();
        if (rc > 0) {
            std::vector<Client> kept;
            for (std::size_t i = 0; i < clients.size(); ++i) {
                const short revents = fds[i + 2].revents;
                if ((revents == 0 || serve(clients[i], revents)) && now < clients[i].deadline) {
                    kept.push_back(std::move(clients[i]));
                }
            }
            clients = std::move(kept);
            if ((fds[0].revents & POLLIN) != 0) accept_clients();
            if ((fds[1].revents & POLLIN) != 0) {
                char drain[64];
                (void)::read(wake_pipe[0], drain, sizeof drain);
            }
        } else {
            std::erase_if(clients, [&](const Client& c) { return now >= c.deadline; });
        }
        if (now >= next_check) {
            check(now);
            next_check = now + std::chrono::milliseconds(100);
        }
    }
}

// Starts the report when a call in flight has outlived its timeout, or when a peer asks this process to report its
// call in flight.
void Watchdog::State::check(Clock::time_point now) {
    if (reporting) return;
    std::optional<CallRecord> stuck;
    double waited = 0.0;
    {
        std::scoped_lock lock(registry_mutex);
        observe(now);
        const bool asked = nudged.exchange(false);
        for (const Call& call : in_flight()) {
            const double seconds = std::chrono::duration<double>(now - call.when).count();
            if (call.record.timeout > 0.0 && (seconds > call.record.timeout || asked)) {
                stuck = call.record;
                waited = seconds;
                break;
            }
        }
    }
    if (!stuck) return;
    reporting = true;
    report = std::thread([this, s = *stuck, waited] { run_report(s, waited); });
}

void Watchdog::State::run_report(CallRecord stuck, double waited) {
    Verdict verdict = build(stuck, waited);
    const Logger log = get_logger("lockstep.watchdog");
    if (!verdict.reporter) {
        log.error(every_rank, "{} timed out after {:.1f} s; process {} prints the report", record_text(stuck), waited,
                  verdict.reporter_endpoint.world_rank);
        record_verdict(fmt::format("{} timed out after {:.1f} s; process {} prints the report", record_text(stuck),
                                   waited, verdict.reporter_endpoint.world_rank));
        std::fflush(stderr);
        // The reporter may not have timed out yet (its call started later): ask it to report now, and report from
        // here if the job has not ended when the grace period is over.
        (void)ask_all({verdict.reporter_endpoint}, "NUDGE", Clock::now() + ask_deadline);
        const auto until = Clock::now() + reporter_grace;
        while (!stop && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (stop) return;
        verdict = build(stuck, waited + std::chrono::duration<double>(reporter_grace).count());
        verdict.text += fmt::format("\n(Process {} was to print this report but did not end the job within {} s.)\n",
                                    verdict.reporter_endpoint.world_rank,
                                    std::chrono::duration_cast<std::chrono::seconds>(reporter_grace).count());
    }
    record_verdict(verdict.text);
    log.critical(every_rank, "{}\nEnding the job (exit code 124).", verdict.text);
    std::fflush(stderr);
    const auto until = Clock::now() + std::chrono::duration<double>(verdict.linger);
    while (!stop && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (stop) return;
    end_job();
}

// Every process ends itself with exit code 124. MPI_Abort is not used: when a peer is already inside MPI_Finalize,
// Open MPI's mpirun can hang for good in its own finalisation after an abort (PMIx_server_finalize), whereas
// processes that exit give the launcher plain non-zero exits to act on; every process is told at once (leaving the
// ones outside a call to the launcher hung mpirun more often, not less). A process that does not answer is ended by
// the launcher when the others exit non-zero.
void Watchdog::State::end_job() {
    std::fflush(stdout);
    std::fflush(stderr);
    std::vector<Endpoint> others;
    {
        std::scoped_lock lock(registry_mutex);
        for (const auto& [rank, e] : known_endpoints()) {
            if (!is_self(e)) others.push_back(e);
        }
    }
    (void)ask_all(others, "END", Clock::now() + std::chrono::seconds(1));
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(124);
}

Watchdog& Watchdog::instance() {
    static Watchdog watchdog;
    return watchdog;
}

Watchdog::Watchdog() : state_(std::make_unique<State>()) {}

Watchdog::~Watchdog() {
    if (state_->started) {
        state_->stop = true;
        const char byte = 1;
        (void)::write(state_->wake_pipe[1], &byte, 1);
        if (state_->thread.joinable()) state_->thread.join();
        if (state_->report.joinable()) state_->report.join();
        ::close(state_->wake_pipe[0]);
        ::close(state_->wake_pipe[1]);
    }
}

bool Watchdog::running() const noexcept {
    return state_->started;
}

void Watchdog::ensure_started(int /*thread_level*/) {
    State& s = *state_;
    std::scoped_lock lock(s.registry_mutex);
    if (s.started) return;
    const ProcessIdentity id = current_identity();
    s.world_rank = id.rank;
    s.host = host_name();

    // One node: loopback only. Several: every interface, reached by host name. LOCKSTEP_WATCHDOG_HOST overrides both.
    std::string publish = id.node_count <= 1 ? "127.0.0.1" : s.host;
    if (const auto& forced = config().watchdog_host) publish = *forced;
    s.listener = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.listener.valid()) throw Error(fmt::format("watchdog: socket() failed: {}", std::strerror(errno)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = publish == "127.0.0.1" ? htonl(INADDR_LOOPBACK) : htonl(INADDR_ANY);
    if (::bind(s.listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(s.listener.get(), 128) != 0) {
        throw Error(fmt::format("watchdog: cannot listen for board queries: {}", std::strerror(errno)));
    }
    socklen_t len = sizeof addr;
    ::getsockname(s.listener.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    s.self.host.assign(publish);
    s.self.port = ntohs(addr.sin_port);
    s.self.pid = ::getpid();
    s.self.world_rank = id.rank;
    s.self.key = random_key();
    s.key = key_text(s.self.key);
    if (::pipe2(s.wake_pipe, O_CLOEXEC) != 0) {
        throw Error(fmt::format("watchdog: pipe2() failed: {}", std::strerror(errno)));
    }
    s.started = true;
    s.thread = std::thread([this] { state_->loop(); });
}

Endpoint Watchdog::endpoint() const {
    std::scoped_lock lock(state_->registry_mutex);
    return state_->self;
}

void Watchdog::forget_communicator(std::uint64_t comm_id) {
    State& s = *state_;
    std::scoped_lock lock(s.registry_mutex);
    const auto it = s.registered.find(comm_id);
    if (it == s.registered.end()) return;
    State::observe(it->second, Clock::now());
    State::take_later(s.retired_last, it->second);
    s.registered.erase(it);
}

void Watchdog::label_communicator(std::uint64_t comm_id, std::string label) {
    std::scoped_lock lock(state_->registry_mutex);
    if (auto it = state_->registered.find(comm_id); it != state_->registered.end()) it->second.label = std::move(label);
}

void Watchdog::set_phase(std::string phase) {
    std::scoped_lock lock(state_->registry_mutex);
    state_->phase = std::move(phase);
}

Boards Watchdog::register_communicator(std::uint64_t comm_id, std::vector<Endpoint> members, double timeout) {
    std::scoped_lock lock(state_->registry_mutex);
    State::Registered& entry = state_->registered[comm_id];
    entry.members = std::move(members);
    for (auto& w : entry.boards) w.board = std::make_unique<Board>(comm_id, timeout, &state_->completions);
    return Boards{entry.boards[0].board.get(), entry.boards[1].board.get()};
}

std::string Watchdog::build_report(const CallRecord& stuck, double waited, bool* is_reporter) {
    State::Verdict verdict = state_->build(stuck, waited);
    if (is_reporter != nullptr) *is_reporter = verdict.reporter;
    return verdict.text;
}

Watchdog::State::Verdict Watchdog::State::build_point_to_point(const CallRecord& stuck, double waited,
                                                               const std::vector<Endpoint>& members,
                                                               const std::string& stuck_text) {
    int my_index = -1;
    for (std::size_t i = 0; i < members.size(); ++i) {
        if (is_self(members[i])) my_index = static_cast<int>(i);
    }
    Verdict v;  // only the two ends wait; each reports its own side
    v.reporter_endpoint = self;
    std::string& r = v.text;
    r = fmt::format("lockstep: point-to-point call timed out after {:.1f} s (timeout {:g} s)\n\n", waited,
                    stuck.timeout);
    r += fmt::format("Operation: {} on a communicator of {}, called at {} by process {}\n", stuck_text,
                     detail::count_text(members.size(), "process", "processes"), site_text(stuck), my_index);
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
};

// A member's call in flight on communicator `comm`, from its board.
const nlohmann::json* call_on(const nlohmann::json& board, std::uint64_t comm) {
    if (!board.contains("in_flight") || !board["in_flight"].is_array()) return nullptr;
    for (const auto& call : board["in_flight"]) {
        if (!call.value("p2p", false) && call.value("comm", std::uint64_t{~0ULL}) == comm) return &call;
    }
    return nullptr;
}

}  // namespace

Watchdog::State::Verdict Watchdog::State::build(const CallRecord& stuck, double waited) {
    std::vector<Endpoint> members;
    std::string stuck_text = record_text(stuck);  // with its communicator's label, if lockstep's own
    std::map<int, Endpoint> known;
    {
        std::scoped_lock lock(registry_mutex);
        if (auto it = registered.find(stuck.comm_id); it != registered.end()) {
            members = it->second.members;
            stuck_text = Call{stuck, {}, it->second.label}.text();
        }
        known = known_endpoints();
    }
    if (stuck.point_to_point()) return build_point_to_point(stuck, waited, members, stuck_text);

    // The stuck call, and every collective its missing members are stuck in instead, transitively: ranks 0-1 waiting
    // in one communicator for rank 2, which waits in another for them, are one hang and get one report.
    std::vector<StuckCall> calls = {{stuck.comm_id, members, stuck_text, std::string(op_name(stuck.op)), stuck.sequence,
                                     site_text(stuck), waited, stuck.timeout}};
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
                                call.value("timeout", 0.0)};
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
            s += fmt::format("Operation: {} on a communicator of {}, called at {}\n", c.text,
                             detail::count_text(c.members.size(), "process", "processes"), c.site);
        } else {
            s += fmt::format("Operation: {} on a communicator of {}, called at {}, in flight for {:.1f} s\n", c.text,
                             detail::count_text(c.members.size(), "process", "processes"), c.site, c.seconds);
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
            } else if (!missing.empty()) {
                s += fmt::format("Never arrived: {}\n", members_text(missing, c.members));
                hint = fmt::format(
                    "{} never called this collective: look for a branch, an early `break` or an exception that only "
                    "some ranks take before {}. Setting LOCKSTEP_DEBUG_MODE=1 checks every call's signature.",
                    members_text(missing, c.members), c.site);
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
    r = fmt::format("lockstep: collective timed out after {:.1f} s (timeout {:g} s)\n\n", waited, stuck.timeout);
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
