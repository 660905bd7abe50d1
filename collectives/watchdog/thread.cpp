#include "stacks.hpp"
#include "state.hpp"

#include "../recorder/collect.hpp"
#include "../recorder/dump.hpp"
#include "../recorder/job_directory.hpp"
#include "../recorder/recorder.hpp"

#include <mpi.h>

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace lockstep::detail {

namespace {

// How long the reporter, once it told every process to end, waits for the launcher to end the job before it aborts it.
constexpr auto launcher_grace = std::chrono::seconds(3);
// How long a waiting process that is not the reporter waits for the reporter to end the job before it reports itself.
constexpr auto reporter_grace = std::chrono::seconds(5);

}  // namespace

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
        c.deadline = Clock::now() + answer_deadline;  // a large answer (TRACE) takes longer than a request
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
    } else if (verb == "TRACE" || verb == "PEERS") {
        c.out = verb == "TRACE" ? trace_answer() : peers_answer();
    } else if (verb == "NUDGE") {
        nudged = true;
        c.out = "OK\n";
    } else if (verb == "STACK") {  // answered from a thread of its own, on a copy of the connection (stacks.hpp)
        answer_stack_request(Fd(::fcntl(c.fd.get(), F_DUPFD_CLOEXEC, 0)));
    } else if (verb == "END") {
        // The reporter has printed the report and ends the job: this process ends itself, whatever its threads do
        // (a thread inside MPI_Finalize included).
        (void)::send(c.fd.get(), "OK\n", 3, MSG_NOSIGNAL);
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(124);
    }
}

// This process's recorder snapshot with its clock at the time of the answer, as one line; never throws (the serving
// thread must go on).
std::string Watchdog::State::trace_answer() {
    try {
        nlohmann::json snapshot = recorder_snapshot();
        snapshot["clock_us"] = realtime_us();
        return snapshot.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } catch (const std::exception& e) {
        return nlohmann::json({{"rank", world_rank}, {"error", e.what()}}).dump() + "\n";
    }
}

// Every process this one knows, with its key: a tool that holds one rank's key reaches them all.
std::string Watchdog::State::peers_answer() {
    std::scoped_lock lock(registry_mutex);
    std::map<int, Endpoint> known = known_endpoints();
    known.emplace(self.world_rank, self);
    nlohmann::json peers = nlohmann::json::array();
    for (const auto& [rank, e] : known) peers.push_back(endpoint_json(e));
    return nlohmann::json({{"peers", std::move(peers)}}).dump() + "\n";
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
            if (call.record.timeout <= 0.0) continue;
            // A collective of a communicator in on_timeout raise mode: this process reports it to its own callers once
            // it outlived the timeout (a nudge does not hurry it), and the job goes on.
            if (const auto it = registered.find(call.record.comm_id);
                it != registered.end() && it->second.on_timeout && !call.record.point_to_point()) {
                if (!it->second.timed_out && seconds > call.record.timeout) {
                    it->second.timed_out = true;
                    raising.emplace_back([this, s = call.record, seconds] { raise_timeout(s, seconds); });
                }
                continue;
            }
            if (seconds > call.record.timeout || asked) {
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

void Watchdog::State::raise_timeout(const CallRecord& stuck, double waited) {
    const Verdict verdict = build(stuck, waited);
    std::scoped_lock lock(registry_mutex);
    const auto it = registered.find(stuck.comm_id);
    if (it == registered.end() || !it->second.on_timeout) return;  // freed meanwhile
    // The call may have completed while the report was built (the late process arrived): then nothing is raised, and
    // the communicator is watched again.
    observe(it->second, Clock::now());
    const auto& now_in_flight = it->second.boards[0].snapshot;
    if (!now_in_flight || !now_in_flight->current || now_in_flight->current->sequence != stuck.sequence) {
        it->second.timed_out = false;
        return;
    }
    it->second.on_timeout(verdict.text);
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
    std::vector<Endpoint> job;  // every process of the job, in a lockstep call or not: what each one runs
    {
        std::scoped_lock lock(registry_mutex);
        for (const auto& [rank, e] : known_endpoints()) job.push_back(e);
    }
    // hang_stacks off: no process is asked (each answers by its own setting otherwise, stacks.cpp).
    nlohmann::json stacks = config().hang_stacks == HangStacks::Off ? nlohmann::json::object() : ask_stacks(job, self);
    verdict.text += stacks_text(stacks);
    verdict.text += dump_hang_trace(std::move(stacks));
    record_verdict(verdict.text);
    log.critical(every_rank, "{}\nEnding the job (exit code 124).", verdict.text);
    std::fflush(stderr);
    const auto until = Clock::now() + std::chrono::duration<double>(verdict.linger);
    while (!stop && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (stop) return;
    end_job();
}

// Every known process's recorded calls, collected over the channel after the report (a process that does not answer
// within a few seconds is named missing), in a trace file that the report's last lines name.
std::string Watchdog::State::dump_hang_trace(nlohmann::json stacks) {
    std::vector<Endpoint> ranks;
    {
        std::scoped_lock lock(registry_mutex);
        for (const auto& [rank, e] : known_endpoints()) ranks.push_back(e);
    }
    return "\n" + dump_trace(ranks, "hang", trace_destination("hang"), std::move(stacks));
}

// Every other process ends itself with exit code 124. MPI_Abort is not their way out: when a peer is already inside
// MPI_Finalize, Open MPI's mpirun can hang for good in its own finalisation after an abort (PMIx_server_finalize),
// whereas processes that exit give the launcher plain non-zero exits to act on; every process is told at once
// (leaving the ones outside a call to the launcher hung mpirun more often, not less). A process that does not answer
// is ended by the launcher when the others exit non-zero.
//
// A launcher may be told to let a job run on when its processes exit non-zero (mpirun --mca
// orte_abort_on_non_zero_status 0, --enable-recovery), and then ends with exit status 0 once they all have. So this
// process, which printed the report, waits for the launcher to end it, and if it is still running after
// launcher_grace, ends the job with MPI_Abort, whose error code every launcher passes on as the job's exit status (its
// peers have exited by then: none is left inside MPI_Finalize).
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
    if (!others.empty()) std::this_thread::sleep_for(launcher_grace);
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized == 0 || finalized != 0) std::_Exit(124);
    // MPI_Abort does not return; should it hang instead (its launcher gone), the process still ends.
    std::thread([] {
        std::this_thread::sleep_for(launcher_grace);
        std::_Exit(124);
    }).detach();
    MPI_Abort(MPI_COMM_WORLD, 124);
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
        for (std::thread& t : state_->raising) t.join();
        ::close(state_->wake_pipe[0]);
        ::close(state_->wake_pipe[1]);
        withdraw_endpoint(state_->self);
    }
}

bool Watchdog::running() const noexcept {
    return state_->started;
}

void Watchdog::ensure_started(int /*thread_level*/, int world_rank) {
    State& s = *state_;
    std::scoped_lock lock(s.registry_mutex);
    if (s.started) return;
    remember_initial_thread();  // the thread whose stack the hang report shows
    ProcessIdentity id = current_identity();
    if (world_rank >= 0) id.rank = world_rank;
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
    s.self.started_s = static_cast<std::uint32_t>(std::time(nullptr));
    s.key = key_text(s.self.key);
    publish_endpoint(s.self);
    if (::pipe2(s.wake_pipe, O_CLOEXEC) != 0) {
        throw Error(fmt::format("watchdog: pipe2() failed: {}", std::strerror(errno)));
    }
    s.started = true;
    s.thread = std::thread([this] { state_->loop(); });
}

}  // namespace lockstep::detail
