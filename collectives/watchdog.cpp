#include "watchdog.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
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
    std::string s = r.point_to_point() ? fmt::format("`{}` {} process {} (tag {})", op_name(r.op),
                                                     is_send(r) ? "to" : "from", r.root, r.message_tag)
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

// Reads until newline or EOF with an overall deadline. Returns nullopt on timeout or error.
std::optional<std::string> read_line(int fd, Clock::time_point deadline) {
    std::string out;
    char buf[4096];
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return std::nullopt;
        pollfd p{fd, POLLIN, 0};
        const int rc = ::poll(&p, 1, static_cast<int>(left));
        if (rc <= 0) return std::nullopt;
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) return std::nullopt;
        if (n == 0) return out;
        out.append(buf, static_cast<std::size_t>(n));
        if (out.find('\n') != std::string::npos) return out.substr(0, out.find('\n'));
    }
}

bool write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n <= 0) return false;
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

// Connects with a deadline; returns an invalid Fd on failure and the reason in `why`.
Fd connect_to(const std::string& host, int port, Clock::time_point deadline, std::string& why) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
        why = fmt::format("cannot resolve {}: {}", host, gai_strerror(rc));
        return {};
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
        if (!fd.valid()) continue;
        if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
            why = std::strerror(errno);
            continue;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd p{fd.get(), POLLOUT, 0};
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
            why = "no answer in time";
            continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            why = std::strerror(err);
            continue;
        }
        return fd;
    }
    return {};
}

// One line of "What each process is doing" from a process's board.
std::string process_line(const nlohmann::json& b, const Endpoint& member, int index) {
    std::string line = fmt::format("  - Process {}", index);
    if (member.world_rank != index) line += fmt::format(" (world rank {})", member.world_rank);
    if (b.contains("unreachable")) {
        line += fmt::format(": no answer ({}): the process has exited or its node is unreachable",
                            b["unreachable"].get<std::string>());
    } else {
        line += fmt::format(" (host {}, pid {}): ", b.value("host", "?"), b.value("pid", 0));
        if (b.value("in_collective", false)) {
            line += fmt::format("in {} for {:.1f} s at {}", b.value("op", "?"), b.value("seconds", 0.0),
                                b.value("site", "?"));
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
    if (peer.contains("unreachable")) {
        return fmt::format(
            "Process {} does not answer: it has exited or its node is unreachable, so the matching {} "
            "will never come. Look at its own output for an error.",
            p, want_call);
    }
    if (peer.value("in_collective", false) && is_toward_me("")) {
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
    if (peer.value("in_collective", false)) {
        return fmt::format(
            "Process {} is in {} at {} instead of the matching {}: the two processes disagree on the "
            "order of communication.",
            p, peer.value("op", "?"), peer.value("site", "?"), want_call);
    }
    if (is_toward_me("last_") && peer.value("last_p2p", "") == want) {
        return fmt::format(
            "Process {} is not communicating; its last completed call was {} at {}. If that was "
            "meant for this {}, the tags differ (this call uses tag {}).",
            p, peer.value("last_op", "?"), peer.value("last_site", "?"), sending ? "send" : "recv", stuck.message_tag);
    }
    return fmt::format("Process {} never posted the matching {}: look for a branch or an early exit that skips it.", p,
                       want_call);
}

}  // namespace

struct Watchdog::State {
    // What the watchdog thread knows of one board: the counts it last saw and when it saw them change. The calling
    // threads only count starts and ends; the times are stamped here, every 100 ms and when the board is asked for,
    // so the hot path reads no clock for the watchdog.
    struct Watched {
        std::unique_ptr<Board> board;
        std::uint64_t seen_begun = 0;
        std::uint64_t seen_ended = 0;
        Clock::time_point start;  // of the call in flight
        Clock::time_point end;    // of the last call completed
        std::optional<Board::Snapshot> snapshot;
    };
    struct Registered {
        std::vector<Endpoint> members;  // in the communicator's rank order
        Watched boards[2];              // collectives, sends and receives
        std::string label;  // what lockstep uses the communicator for, if it is its own (label_communicator)
    };
    // A call in flight (`when` it started) or completed (`when` it ended), with its communicator's label.
    struct Call {
        CallRecord record;
        Clock::time_point when;
        std::string label;
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
            }
            w.snapshot = std::move(snap);
        }
    }
    void observe(Clock::time_point now) {
        for (auto& [id, entry] : registered) observe(entry, now);
    }

    // The calls in flight, oldest first, and the most recently completed one (after observe).
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
    // The most recent completed call of one communicator's boards, or of all of them (and the freed ones).
    static void take_later(std::optional<Call>& best, const Registered& entry) {
        for (const Watched& w : entry.boards) {
            if (w.snapshot && w.snapshot->last && (!best || w.end >= best->when)) {
                best = Call{*w.snapshot->last, w.end, entry.label};
            }
        }
    }
    [[nodiscard]] std::optional<Call> last_completed() const {
        std::optional<Call> best = retired_last;
        for (const auto& [id, entry] : registered) take_later(best, entry);
        return best;
    }

    std::string phase;  // registry_mutex
    Endpoint self{};
    int world_rank = 0;
    int thread_level = MPI_THREAD_SINGLE;
    std::string host;

    Fd listener;
    int wake_pipe[2] = {-1, -1};
    std::thread thread;
    std::atomic<bool> started{false};
    std::atomic<bool> stop{false};
    bool reported = false;

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
            // as communicator and call number, for the check of who arrived.
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
                all.push_back(
                    {{"comm", c.record.comm_id}, {"sequence", c.record.sequence}, {"p2p", c.record.point_to_point()}});
            }
            j["in_flight"] = std::move(all);
        } else {
            j["in_collective"] = false;
            if (!phase.empty()) j["phase"] = phase;
        }
        if (const auto last = last_completed()) {
            j["last_op"] = last->text();
            add_p2p(last->record, "last_");
            j["last_site"] = site_text(last->record);
            j["last_seconds_ago"] = std::chrono::duration<double>(now - last->when).count();
        }
        return j;
    }

    void serve_one() {
        Fd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!client.valid()) return;
        const auto request = read_line(client.get(), Clock::now() + std::chrono::seconds(1));
        if (!request || *request != "BOARD") return;
        write_all(client.get(), board_json().dump() + "\n");
    }

    nlohmann::json ask(const Endpoint& e) {
        const int world_rank_of_peer = e.world_rank;
        if (e.pid == self.pid && e.host.str() == self.host.str() && e.port == self.port) return board_json();
        const auto deadline = Clock::now() + std::chrono::seconds(2);
        std::string why;
        Fd fd = connect_to(e.host.str(), e.port, deadline, why);
        if (!fd.valid()) return {{"rank", world_rank_of_peer}, {"unreachable", why}};
        if (!write_all(fd.get(), "BOARD\n")) return {{"rank", world_rank_of_peer}, {"unreachable", "write failed"}};
        const auto line = read_line(fd.get(), deadline);
        if (!line || line->empty()) return {{"rank", world_rank_of_peer}, {"unreachable", "no answer in time"}};
        try {
            return nlohmann::json::parse(*line);
        } catch (const nlohmann::json::exception&) {
            return {{"rank", world_rank_of_peer}, {"unreachable", "malformed answer"}};
        }
    }

    void loop(Watchdog& owner);
};

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
        ::close(state_->wake_pipe[0]);
        ::close(state_->wake_pipe[1]);
    }
}

bool Watchdog::running() const noexcept {
    return state_->started;
}

void Watchdog::ensure_started(int thread_level) {
    State& s = *state_;
    std::scoped_lock lock(s.registry_mutex);
    if (s.started) return;
    const ProcessIdentity id = current_identity();
    s.world_rank = id.rank;
    s.thread_level = thread_level;
    s.host = host_name();

    // One node: loopback only. Several: every interface, reached by host name. LOCKSTEP_WATCHDOG_HOST overrides both.
    std::string publish = id.node_count <= 1 ? "127.0.0.1" : s.host;
    if (const auto& forced = config().watchdog_host) publish = *forced;
    s.listener = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.listener.valid()) throw Error(fmt::format("watchdog: socket() failed: {}", std::strerror(errno)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = publish == "127.0.0.1" ? htonl(INADDR_LOOPBACK) : htonl(INADDR_ANY);
    if (::bind(s.listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(s.listener.get(), 64) != 0) {
        throw Error(fmt::format("watchdog: cannot listen for board queries: {}", std::strerror(errno)));
    }
    socklen_t len = sizeof addr;
    ::getsockname(s.listener.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    s.self.host.assign(publish);
    s.self.port = ntohs(addr.sin_port);
    s.self.pid = ::getpid();
    s.self.world_rank = id.rank;
    if (::pipe2(s.wake_pipe, O_CLOEXEC) != 0) {
        throw Error(fmt::format("watchdog: pipe2() failed: {}", std::strerror(errno)));
    }
    s.started = true;
    s.thread = std::thread([this] { state_->loop(*this); });
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
    for (auto& w : entry.boards) w.board = std::make_unique<Board>(comm_id, timeout);
    return Boards{entry.boards[0].board.get(), entry.boards[1].board.get()};
}

std::string Watchdog::build_report(const CallRecord& stuck, double waited, bool* is_reporter) {
    State& s = *state_;
    std::vector<Endpoint> members;
    std::string stuck_text = record_text(stuck);  // with its communicator's label, if lockstep's own
    {
        std::scoped_lock lock(s.registry_mutex);
        if (auto it = s.registered.find(stuck.comm_id); it != s.registered.end()) {
            members = it->second.members;
            stuck_text = State::Call{stuck, {}, it->second.label}.text();
        }
    }
    int my_index = -1;
    for (std::size_t i = 0; i < members.size(); ++i) {
        if (members[i].world_rank == s.world_rank && members[i].pid == s.self.pid) my_index = static_cast<int>(i);
    }
    if (stuck.point_to_point()) {
        if (is_reporter != nullptr) *is_reporter = true;  // only the two ends wait; each reports its own side
        std::string r = fmt::format("lockstep: point-to-point call timed out after {:.1f} s (timeout {:g} s)\n\n",
                                    waited, stuck.timeout);
        r += fmt::format("Operation: {} on a communicator of {} processes, called at {} by process {}\n", stuck_text,
                         members.size(), site_text(stuck), my_index);
        std::vector<nlohmann::json> boards;
        for (const auto& m : members) boards.push_back(s.ask(m));
        if (stuck.root >= 0 && stuck.root < static_cast<int>(boards.size())) {
            r += "\n" + point_to_point_diagnosis(stuck, boards[static_cast<std::size_t>(stuck.root)], my_index) + "\n";
        }
        r += "\nWhat each process is doing:\n";
        for (std::size_t i = 0; i < boards.size(); ++i) r += process_line(boards[i], members[i], static_cast<int>(i));
        return r;
    }
    std::vector<nlohmann::json> boards;
    std::vector<int> arrived, missing;
    for (std::size_t i = 0; i < members.size(); ++i) {
        nlohmann::json b = s.ask(members[i]);
        bool same_call = false;
        if (b.contains("in_flight") && b["in_flight"].is_array()) {
            for (const auto& call : b["in_flight"]) {
                same_call = same_call ||
                            (!call.value("p2p", false) && call.value("comm", std::uint64_t{~0ULL}) == stuck.comm_id &&
                             call.value("sequence", std::uint64_t{~0ULL}) == stuck.sequence);
            }
        }
        (same_call ? arrived : missing).push_back(static_cast<int>(i));
        boards.push_back(std::move(b));
    }
    // The lowest waiting rank writes the report; the others point to it.
    if (is_reporter != nullptr) *is_reporter = !arrived.empty() && arrived.front() == my_index;
    std::string r =
        fmt::format("lockstep: collective timed out after {:.1f} s (timeout {:g} s)\n\n", waited, stuck.timeout);
    r += fmt::format("Operation: {} on a communicator of {} processes, called at {}\n", stuck_text, members.size(),
                     site_text(stuck));
    const auto processes = [](const std::vector<int>& ranks) {
        if (ranks.empty()) return std::string("none");
        return (ranks.size() == 1 ? "Process " : "Processes ") + format_rank_ranges(ranks);
    };
    r += fmt::format("Arrived and waiting: {}\n", processes(arrived));
    r += fmt::format("Never arrived: {}\n", processes(missing));
    r += "\nWhat each process is doing:\n";
    for (std::size_t i = 0; i < boards.size(); ++i) r += process_line(boards[i], members[i], static_cast<int>(i));
    if (!missing.empty()) {
        r += fmt::format(
            "\n{} never called this collective: look for a branch, an early `break` or an exception that only some "
            "ranks take before {}. Setting LOCKSTEP_DEBUG_MODE=1 checks every call's signature.\n",
            processes(missing), site_text(stuck));
    }
    return r;
}

void Watchdog::State::loop(Watchdog& owner) {
    while (!stop) {
        pollfd fds[2] = {{listener.get(), POLLIN, 0}, {wake_pipe[0], POLLIN, 0}};
        const int rc = ::poll(fds, 2, 100);
        if (stop) break;
        if (rc > 0 && (fds[0].revents & POLLIN)) serve_one();

        std::optional<CallRecord> stuck;
        double waited = 0.0;
        if (!reported) {
            std::scoped_lock lock(registry_mutex);
            const auto now = Clock::now();
            observe(now);
            for (const Call& call : in_flight()) {
                const double seconds = std::chrono::duration<double>(now - call.when).count();
                if (call.record.timeout > 0.0 && seconds > call.record.timeout) {
                    stuck = call.record;
                    waited = seconds;
                    break;
                }
            }
        }
        if (!stuck) continue;
        reported = true;
        // Keep answering peers while asking them: a second thread serves queries during the report.
        std::atomic<bool> reporting{true};
        std::thread server([&] {
            while (reporting) {
                pollfd p{listener.get(), POLLIN, 0};
                if (::poll(&p, 1, 50) > 0) serve_one();
            }
        });
        bool reporter = false;
        std::string report = owner.build_report(*stuck, waited, &reporter);
        const Logger log = get_logger("lockstep.watchdog");
        if (reporter) {
            log.critical(every_rank, "{}\nEnding the job (exit code 124).", report);
        } else {
            log.error(every_rank, "{} timed out after {:.1f} s; the lowest waiting rank prints the report",
                      record_text(*stuck), waited);
        }
        std::fflush(stderr);
        // Give the reporter time to print before any process ends the job; peers keep being answered meanwhile.
        std::this_thread::sleep_for(reporter ? std::chrono::milliseconds(200) : std::chrono::seconds(2));
        reporting = false;
        server.join();
        if (thread_level == MPI_THREAD_MULTIPLE) {
            MPI_Abort(MPI_COMM_WORLD, 124);
        }
        std::_Exit(124);  // MPI_Abort is not allowed from this thread below MPI_THREAD_MULTIPLE
    }
}

}  // namespace lockstep::detail
