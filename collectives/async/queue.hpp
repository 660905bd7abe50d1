#pragma once
// A communicator's queue of non-blocking collectives (internal).
//
// Collectives must start in the same order on every rank, so the queue runs them one at a time in issue order, each
// as its blocking form (the funnel: board, debug-mode signature exchange, payload) on a view of the communicator.
// With a progress thread (the default where MPI gives MPI_THREAD_MULTIPLE) the thread runs them while the caller
// computes: it sleeps on a condition variable while the queue is empty and costs nothing then; while a collective
// runs it is inside MPI, which polls. A wait() that finds its operation not started yet runs the queue up to it
// itself (no wake-up to pay when a call is issued and waited for at once). Without a thread, wait() and test() run
// the queue up to the operation they are asked about, on the calling thread. A blocking collective on the communicator
// first waits for the queue to empty (drain), so that it starts after the non-blocking ones issued before it, as on
// every other rank.
//
// A communicator whose timeout raises (on_timeout raise) has every collective run here, on the thread, with the caller
// waiting: the caller never runs the queue itself, so that when the watchdog finds the running collective stuck it
// can fail it and everything queued behind it (fail()) and the callers return with a TimeoutError while the stuck MPI
// call stays on the thread (MPI cannot cancel it).

#include "work_state.hpp"

#include <lockstep/communicator.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace lockstep::detail {

class AsyncQueue {
public:
    // `view` refers to the communicator's Impl without owning it; `release_view` gives up that reference when the
    // queue goes (the Impl outlives its queue).
    // `caller_runs`: whether a waiting caller may run the queue itself (not in on_timeout raise mode).
    AsyncQueue(Communicator view, void (*release_view)(Communicator&), bool threaded, bool caller_runs = true);
    ~AsyncQueue();  // shutdown()
    // Runs what is queued, then stops the thread (idempotent): the communicator calls it while its pointer to the
    // queue is still intact, since the collectives that run meanwhile read it.
    void shutdown();
    AsyncQueue(const AsyncQueue&) = delete;
    AsyncQueue& operator=(const AsyncQueue&) = delete;

    void submit(std::shared_ptr<WorkState> state);
    // Returns once every collective submitted so far has completed, or the queue failed.
    void drain();
    // Completes the running collective and every queued one with `error` (their waiters return with it); the running
    // one's MPI call goes on on the thread, which shutdown() then leaves behind rather than joins.
    void fail(const std::exception_ptr& error);
    [[nodiscard]] bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
    // Returns once `state` has completed: with a thread, waits (at most until `deadline`, returning false when it
    // passed); without one, runs the queue up to it here.
    bool run_through(WorkState& state, std::chrono::steady_clock::time_point deadline);
    [[nodiscard]] bool idle() const noexcept { return pending_.load(std::memory_order_acquire) == 0; }
    // Collectives submitted and not yet complete.
    [[nodiscard]] std::size_t outstanding() const noexcept { return unfinished_.load(std::memory_order_acquire); }
    [[nodiscard]] bool threaded() const noexcept { return thread_.joinable(); }

    // The queued collective the calling thread is running, if any (the funnel reads its debug mode and step).
    [[nodiscard]] static const WorkState* running_here() noexcept;

private:
    void loop();
    void execute(const std::shared_ptr<WorkState>& state);
    // Pops and runs the next queued state on this thread (no thread): false when the queue is empty.
    bool run_next();

    Communicator view_;
    void (*release_view_)(Communicator&);
    std::mutex mutex_;
    std::condition_variable wake_;  // the thread: work or stop
    std::condition_variable idle_;  // drain: pending_ reached 0
    std::deque<std::shared_ptr<WorkState>> queue_;
    std::atomic<std::size_t> pending_{0};     // until complete() has returned
    std::atomic<std::size_t> unfinished_{0};  // until just before complete()
    bool stop_ = false;
    std::shared_ptr<WorkState> running_;  // under mutex_: the collective the thread runs, for fail()
    std::atomic<bool> failed_{false};
    std::exception_ptr failure_;  // under mutex_: what fail() gave
    bool caller_runs_ = true;
    std::mutex exec_mutex_;  // held by whichever thread runs the queue: one collective of the communicator at a time
    std::thread thread_;
};

}  // namespace lockstep::detail
