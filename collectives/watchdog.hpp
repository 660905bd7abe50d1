#pragma once
// The hang watchdog (internal).
//
// A watchdog thread per process serves those boards over a TCP socket (loopback when the job is on one node) and checks
// every 100 ms whether a call in flight has outlived its communicator's timeout. When it has, it asks every process of
// the stuck communicator for its board, through those sockets: a channel that does not depend on MPI, so it answers
// while the collective is stuck and while a process computes or waits in MPI_Finalize. A member that is stuck in a
// collective of another communicator brings that call into the same report (two calls that wait for each other are
// one hang). The lowest world rank waiting in any of those calls prints the report (op, call number, shape, seconds
// waited, where the processes are on each communicator, what each process is doing); then it tells every process of
// the job to end, and each ends itself with exit code 124 (the reporter, if the launcher lets the job run on after
// those exits, aborts it with that code). A communicator registered with a TimeoutAction (on_timeout raise) is
// handled apart: when its collective outlives the timeout, each waiting process builds the same report itself and
// hands it to the action (which fails the waiting calls with a TimeoutError); nothing ends, and the communicator's
// calls are not checked again. A stuck send or recv is reported by the process that waits,
// with what its peer is doing instead (the matching call with another tag, the same direction, a collective, nothing).
//
// Calls that lockstep does not carry (an MPI program's own, through the check library; gloo's) reach the same boards
// through lockstep/foreign_watch.hpp (foreign_watch.cpp): their records name the MPI function, count, datatype, peer,
// tag and the caller's return address, which the reports symbolise.
//
// The parts: the boards (watchdog/board.hpp), the channel (watchdog/channel.hpp), the thread (watchdog/thread.cpp)
// and the reports (watchdog/report.cpp), over what they share (watchdog/state.hpp).

#include "call_info.hpp"
#include "watchdog/board.hpp"
#include "watchdog/endpoint.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::detail {

// What a communicator in on_timeout raise mode does with the report of its stuck collective (called on a watchdog
// thread, once, with the registry lock held: it must not call the watchdog back).
using TimeoutAction = std::function<void(const std::string& report)>;

// The watchdog's verdict on this process, once it found a call stuck (the report it printed or was told of); nullopt
// before. Communicator::async_error reads it.
[[nodiscard]] std::optional<std::string> watchdog_verdict();

class Watchdog {
public:
    // The process-wide watchdog. ensure_started() opens the listening socket and starts the thread (local, no MPI).
    static Watchdog& instance();
    // world_rank names this process in reports; -1 takes it from the launcher's environment.
    void ensure_started(int thread_level, int world_rank = -1);
    [[nodiscard]] bool running() const noexcept;
    // This process's endpoint, to be exchanged over a new communicator.
    [[nodiscard]] Endpoint endpoint() const;
    // The members of a communicator, in its rank order, and its watchdog timeout (0: never reported); with an action,
    // a stuck collective of it is handed to the action instead of ending the job. The boards stay valid until
    // forget_communicator.
    [[nodiscard]] Boards register_communicator(std::uint64_t comm_id, std::vector<Endpoint> members, double timeout,
                                               TimeoutAction on_timeout = {});
    void forget_communicator(std::uint64_t comm_id);
    // The members of a registered communicator, in its rank order (empty when it is not registered).
    [[nodiscard]] std::vector<Endpoint> members(std::uint64_t comm_id) const;
    // Names what lockstep uses one of its own communicators for (e.g. its start-up checks): reports then say
    // "`lockstep::allgather` #1 ... in <label>" rather than show an internal call as if it were the program's.
    void label_communicator(std::uint64_t comm_id, std::string label);
    // Names a communicator of the program in reports ("`MPI_Allreduce` #3 ... on MPI_COMM_WORLD"): for communicators
    // lockstep does not carry (lockstep/foreign_watch.hpp), whose calls are the program's own.
    void name_communicator(std::uint64_t comm_id, std::string name);
    // A note shown while no collective is in flight (e.g. "in MPI_Finalize"), with the return address of the call that
    // entered it, if known (symbolised in reports); empty clears it.
    void set_phase(std::string phase, const void* caller = nullptr);
    // This process's call in flight is known to be stuck (its processes met different calls): report it at the next
    // check, without waiting for its timeout.
    void report_now() noexcept;

    // The report text for a stuck record, asking every member of its communicator (used by the thread; public for
    // tests that want the text without ending the job).
    [[nodiscard]] std::string build_report(const CallRecord& stuck, double waited_seconds, bool* is_reporter);

    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;
    ~Watchdog();

    struct State;

private:
    Watchdog();
    std::unique_ptr<State> state_;
};

}  // namespace lockstep::detail
