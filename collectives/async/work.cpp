// Work: the handle of a non-blocking operation (work.hpp). Collectives complete in their communicator's queue
// (queue.cpp), sends and receives when a test of their MPI request succeeds (ops/point_to_point.cpp).

#include "queue.hpp"

#include <lockstep/errors.hpp>

#include <fmt/core.h>

#include <thread>

namespace lockstep {

namespace detail {
// Tests a send's or receive's MPI request once (ops/point_to_point.cpp); true once the state is complete.
bool progress_point_to_point(WorkState& state);
}  // namespace detail

namespace {

detail::WorkState& checked(const std::shared_ptr<detail::WorkState>& state, const char* what) {
    if (state == nullptr) {
        throw InvalidArgumentError(
            fmt::format("Work::{}: this Work refers to no operation (default-constructed or moved from)", what));
    }
    return *state;
}

// The caller has seen the operation complete: it leaves the registry, the recorder notes when (its `waited`), and its
// error, if any, is thrown.
void observe(detail::WorkState& state) {
    if (!state.observed.exchange(true, std::memory_order_acq_rel)) {
        detail::settle_work(state);
        if (state.recorded != nullptr && state.recorded_sequence != 0) {
            detail::write_update(*state.recorded,
                                 state.collective() ? detail::RecordedStream::calls : detail::RecordedStream::shared,
                                 state.recorded_sequence, 0, nullptr, detail::ticks());
        }
    }
    if (state.error != nullptr) std::rethrow_exception(state.error);
}

// Makes progress on `state` until it completes or `deadline` passes; true when complete.
bool progress(detail::WorkState& state, std::chrono::steady_clock::time_point deadline) {
    if (state.done()) return true;
    if (state.collective()) return state.queue->run_through(state, deadline);
    // A send or receive: MPI_Test until it completes, yielding in between; the communicator's board shows the call
    // while a thread waits in it, so that the watchdog reports a peer that never answers like a stuck recv.
    struct Shown {
        detail::Board* board;
        explicit Shown(detail::WorkState& s) : board(s.p2p_board) {
            if (board != nullptr) board->begin_shared(s.record);
        }
        ~Shown() {
            if (board != nullptr) board->end_shared();
        }
    } shown(state);
    int spins = 0;
    while (!detail::progress_point_to_point(state)) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        if (++spins < 64) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
    return true;
}

// Counts threads inside wait(), for the watchdog's board.
struct Waiting {
    detail::WorkState& state;
    explicit Waiting(detail::WorkState& s) : state(s) { state.waiting.fetch_add(1, std::memory_order_relaxed); }
    ~Waiting() { state.waiting.fetch_sub(1, std::memory_order_relaxed); }
};

}  // namespace

Work::Work() noexcept = default;
Work::Work(std::shared_ptr<detail::WorkState> state) noexcept : state_(std::move(state)) {
    if (state_ != nullptr) state_->handles.fetch_add(1, std::memory_order_relaxed);
}
Work::~Work() {
    if (state_ != nullptr && state_->handles.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
        !state_->observed.load(std::memory_order_acquire)) {
        state_->dropped.store(true, std::memory_order_release);
    }
}
Work::Work(const Work& other) noexcept : Work(other.state_) {}
Work& Work::operator=(const Work& other) noexcept {
    if (this != &other) {
        Work copy(other);
        *this = std::move(copy);
    }
    return *this;
}
Work::Work(Work&& other) noexcept : state_(std::move(other.state_)) {}
Work& Work::operator=(Work&& other) noexcept {
    if (this != &other) {
        Work old(std::move(*this));
        state_ = std::move(other.state_);
    }
    return *this;
}

bool Work::valid() const noexcept {
    return state_ != nullptr;
}

void Work::wait() {
    detail::WorkState& s = checked(state_, "wait");
    const Waiting waiting(s);
    progress(s, std::chrono::steady_clock::time_point::max());
    observe(s);
}

bool Work::wait_for(std::chrono::duration<double> timeout) {
    detail::WorkState& s = checked(state_, "wait_for");
    if (!(timeout.count() >= 0.0)) {
        throw InvalidArgumentError(
            fmt::format("Work::wait_for: the timeout must be >= 0 seconds, got {}", timeout.count()));
    }
    const Waiting waiting(s);
    const auto now = std::chrono::steady_clock::now();
    const auto limit = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::min(timeout, std::chrono::duration<double>(std::chrono::hours(24 * 365))));
    if (!progress(s, now + limit)) return false;
    observe(s);
    return true;
}

bool Work::test() {
    detail::WorkState& s = checked(state_, "test");
    if (!s.done()) {
        if (s.collective()) {
            // With a progress thread, test never blocks; without one it runs the queue up to this operation.
            if (s.queue->threaded()) return false;
            s.queue->run_through(s, std::chrono::steady_clock::time_point::max());
        } else if (!detail::progress_point_to_point(s)) {
            return false;
        }
    }
    observe(s);
    return true;
}

bool Work::is_completed() const noexcept {
    return state_ != nullptr && state_->done();
}

Tensor Work::result() {
    wait();
    return state_->result;
}

int Work::source() {
    wait();
    return state_->source;
}

std::uint64_t Work::id() const noexcept {
    return state_ != nullptr ? state_->id : 0;
}

OpKind Work::op() const {
    return checked(state_, "op").record.op;
}

std::string Work::describe() const {
    const detail::WorkState& s = checked(state_, "describe");
    return fmt::format("{} ({})", s.text(), s.phase_text());
}

}  // namespace lockstep
