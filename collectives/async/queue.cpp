#include "queue.hpp"

namespace lockstep::detail {

namespace {
thread_local const WorkState* running_on_this_thread = nullptr;
}

const WorkState* AsyncQueue::running_here() noexcept {
    return running_on_this_thread;
}

AsyncQueue::AsyncQueue(Communicator view, void (*release_view)(Communicator&), bool threaded, bool caller_runs)
    : view_(std::move(view)), release_view_(release_view), caller_runs_(caller_runs || !threaded) {
    if (threaded) thread_ = std::thread([this] { loop(); });
    register_queue(this);
}

AsyncQueue::~AsyncQueue() {
    shutdown();
    release_view_(view_);
}

void AsyncQueue::shutdown() {
    forget_queue(this);
    drain();
    {
        std::scoped_lock lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (!thread_.joinable()) return;
    // A failed queue's thread may be inside an MPI call that never returns: it is left behind.
    if (failed()) {
        thread_.detach();
    } else {
        thread_.join();
    }
}

void AsyncQueue::fail(const std::exception_ptr& error) {
    std::deque<std::shared_ptr<WorkState>> queued;
    std::shared_ptr<WorkState> running;
    {
        std::scoped_lock lock(mutex_);
        failure_ = error;
        failed_.store(true, std::memory_order_release);
        queued.swap(queue_);
        running = running_;
    }
    if (running != nullptr) running->complete(error);
    for (const auto& state : queued) {
        state->body = nullptr;
        state->complete(error);
    }
    idle_.notify_all();
}

void AsyncQueue::submit(std::shared_ptr<WorkState> state) {
    state->queue = this;
    pending_.fetch_add(1, std::memory_order_acq_rel);
    unfinished_.fetch_add(1, std::memory_order_acq_rel);
    {
        std::scoped_lock lock(mutex_);
        if (failed_.load(std::memory_order_acquire)) {  // the thread may never come back to the queue
            state->body = nullptr;
            state->complete(failure_);
            return;
        }
        queue_.push_back(std::move(state));
    }
    wake_.notify_one();
}

void AsyncQueue::execute(const std::shared_ptr<WorkState>& state) {
    {
        std::scoped_lock lock(mutex_);
        // Failed while queued, or taken off the queue just before the queue failed: it never starts.
        if (failed_.load(std::memory_order_acquire)) {
            state->body = nullptr;
            state->complete(failure_);
            return;
        }
        running_ = state;
    }
    state->phase.store(WorkPhase::Running, std::memory_order_release);
    running_on_this_thread = state.get();
    std::exception_ptr failure;
    try {
        state->body(view_, *state);
    } catch (...) {
        failure = std::current_exception();
    }
    running_on_this_thread = nullptr;
    state->body = nullptr;  // lets go of the tensors it held
    // Off outstanding() before it is seen complete, and off pending() (what drain waits for) after: a wait that
    // returned sees it gone from outstanding(), and a blocking call that drained sees it complete.
    {
        std::scoped_lock lock(mutex_);
        unfinished_.fetch_sub(1, std::memory_order_acq_rel);
        running_ = nullptr;
        state->complete(failure);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
    idle_.notify_all();
}

void AsyncQueue::loop() {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, and nothing left
        }
        // A waiting caller may be running the queue itself (run_through): then this waits for it, and finds what is
        // left.
        const std::scoped_lock running(exec_mutex_);
        (void)run_next();
    }
}

bool AsyncQueue::run_next() {
    std::shared_ptr<WorkState> next;
    {
        std::scoped_lock lock(mutex_);
        if (queue_.empty()) return false;
        next = std::move(queue_.front());
        queue_.pop_front();
    }
    execute(next);
    return true;
}

void AsyncQueue::drain() {
    // What is queued runs here unless the thread is running it: a blocking call after non-blocking ones does not wait
    // for the thread to be woken.
    if (std::unique_lock running(exec_mutex_, std::try_to_lock); caller_runs_ && (running.owns_lock() || !threaded())) {
        if (!running.owns_lock()) running.lock();
        while (run_next()) {
        }
        if (!threaded()) return;
    }
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0 || failed(); });
}

bool AsyncQueue::run_through(WorkState& state, std::chrono::steady_clock::time_point deadline) {
    const bool forever = deadline == std::chrono::steady_clock::time_point::max();
    while (!state.done()) {
        // A wait without a time limit runs the queue up to `state` on the calling thread when the progress thread is
        // not running it (the one way without a thread): a collective issued and waited for at once costs no thread
        // wake-up. One with a limit leaves it to the thread, since a collective cannot be left half done.
        if ((forever && caller_runs_) || !threaded()) {
            std::unique_lock running(exec_mutex_, std::try_to_lock);
            if (!threaded() && !running.owns_lock()) running.lock();
            if (running.owns_lock()) {
                while (!state.done() && run_next()) {
                }
                if (state.done() || !threaded()) return state.done();
            }
        }
        std::unique_lock lock(state.done_mutex);
        const auto until = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(1));
        if (state.done_cv.wait_until(lock, until, [&] { return state.done(); })) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
    }
    return true;
}

}  // namespace lockstep::detail
