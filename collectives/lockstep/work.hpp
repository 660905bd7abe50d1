#pragma once
// Work: the handle of a non-blocking operation (Communicator::iallreduce, isend, ...).
//
// A non-blocking collective is numbered and put in its communicator's queue when it is issued; the communicator's
// progress thread runs the queue in issue order (in debug mode the signature exchange first, on that thread, so
// that issuing never blocks), and the caller computes meanwhile. Without a progress thread (the `progress_thread`
// setting off, or MPI without MPI_THREAD_MULTIPLE) the queue runs, in order, inside wait() and test(). Sends and
// receives are MPI_Isend/MPI_Irecv posted at once; they match in any order.
//
// Errors of the operation surface at wait()/test(): for a collective, the same error on every rank (a debug-mode
// mismatch included). A Work is a shared handle: copies refer to the same operation, and any thread may wait on it.
// The tensors given to the operation stay alive until it completes; do not write to them (nor read an output) before
// it has. A Work dropped without being waited for is still completed, and named in a warning when its communicator is
// freed or the runtime finalizes; one whose operation failed names the error there.

#include <lockstep/export.hpp>
#include <lockstep/operation.hpp>
#include <lockstep/tensor.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace lockstep {

namespace detail {
struct WorkState;  // collectives/async/work_state.hpp
}

class LOCKSTEP_API Work {
public:
    Work() noexcept;  // refers to no operation: every call but valid() throws InvalidArgumentError
    ~Work();
    Work(const Work&) noexcept;
    Work& operator=(const Work&) noexcept;
    Work(Work&&) noexcept;
    Work& operator=(Work&&) noexcept;

    [[nodiscard]] bool valid() const noexcept;
    // Blocks until the operation has completed; throws its error, if any (every call that observes a completion
    // throws it again).
    void wait();
    // Waits at most `timeout`: true when the operation has completed (then as wait()), false when the time ran out.
    bool wait_for(std::chrono::duration<double> timeout);
    // Makes progress without blocking: true when completed (throwing its error, if any), false otherwise.
    bool test();
    // Whether the operation has completed, successfully or not. Never throws, makes no progress.
    [[nodiscard]] bool is_completed() const noexcept;
    // wait(), then what the operation produced: the new tensor of an out-of-place collective, the tensor written by
    // an in-place one or a receive, an undefined tensor for a barrier, a send or a non-root's reduce/gather.
    [[nodiscard]] Tensor result();
    // wait(), then the rank a receive got its message from (irecv_any); -1 for other operations.
    [[nodiscard]] int source();

    // The request's number in this process (1, 2, ...: reports say "request #3").
    [[nodiscard]] std::uint64_t id() const noexcept;
    [[nodiscard]] OpKind op() const;
    // "request #3: lockstep::allreduce float32[1024] issued at train.cpp:88 (queued|running|completed|failed)"
    [[nodiscard]] std::string describe() const;

    // A handle of an operation the communicator issued (collectives/async/work_state.hpp).
    explicit Work(std::shared_ptr<detail::WorkState> state) noexcept;

private:
    std::shared_ptr<detail::WorkState> state_;
};

}  // namespace lockstep
