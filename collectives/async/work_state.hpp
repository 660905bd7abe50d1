#pragma once
// The shared state of one non-blocking operation (internal), behind every copy of its Work handle, and the process's
// registry of operations not yet settled, which the watchdog's board and the warnings at free and finalize read.
//
// A collective's state holds the blocking form to run (body) and is completed by the communicator's queue
// (queue.hpp); a send's or receive's holds its MPI request and is completed by whichever thread tests it first.

#include "../call_info.hpp"
#include "../recorder/ring.hpp"
#include "../watchdog/board.hpp"

#include <lockstep/communicator.hpp>
#include <lockstep/work.hpp>

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lockstep::detail {

class AsyncQueue;

enum class WorkPhase : int { Queued, Running, Done };

struct WorkState {
    // Fixed when issued.
    std::uint64_t id = 0;
    CallRecord record;  // op, dtype, shape, call site and communicator, as the boards keep them
    std::chrono::steady_clock::time_point issued;
    bool debug = false;  // the communicator's debug mode and step when issued: the signature carries them
    std::uint64_t step = 0;

    // The flight recorder (recorder/ring.hpp), when on: the communicator's rings, and the number of this operation's
    // entry in them (a collective's: its call number, set when the queue runs it; a send's or receive's: its entry
    // in the shared ring). A completion or wait seen by any thread is an update entry that names it.
    std::shared_ptr<RecordedComm> recorded;
    std::int64_t issued_ticks = 0;
    mutable std::uint64_t recorded_sequence = 0;  // 0: no entry (yet)
    // A blocking collective that on_timeout raise runs through the queue while its caller waits (Impl::via_queue):
    // recorded as the blocking call it is, not as a non-blocking one.
    bool blocking_caller = false;

    // A collective: the blocking form, run by the queue on its view of the communicator; it sets `result`.
    std::function<void(Communicator&, WorkState&)> body;
    AsyncQueue* queue = nullptr;  // valid until the state is complete (a communicator drains its queue when freed)

    // A send or receive.
    MPI_Request request = MPI_REQUEST_NULL;
    Tensor buffer;  // what MPI reads or writes: the tensor itself, or a host copy of a device tensor
    Tensor target;  // a receive's tensor, when `buffer` is a host copy
    MPI_Datatype datatype = MPI_DATATYPE_NULL;
    int expected = 0;            // elements a receive expects
    Board* p2p_board = nullptr;  // the communicator's board of sends and receives, shown while a thread waits
    std::mutex progress_mutex;   // one thread at a time tests the MPI request

    // The outcome; `phase` turns Done (release) after the fields below are written.
    std::atomic<WorkPhase> phase{WorkPhase::Queued};
    std::exception_ptr error;
    Tensor result;
    int source = -1;
    std::mutex done_mutex;
    std::condition_variable done_cv;

    // The handles (copies of Work) alive, whether a wait or test saw the completion, threads inside wait().
    std::atomic<int> handles{0};
    std::atomic<bool> observed{false};
    std::atomic<int> waiting{0};
    std::atomic<bool> dropped{false};

    [[nodiscard]] bool collective() const noexcept { return !record.point_to_point(); }
    [[nodiscard]] bool done() const noexcept { return phase.load(std::memory_order_acquire) == WorkPhase::Done; }
    // Publishes the outcome and wakes the waiters; once only (a later call is ignored).
    void complete(std::exception_ptr failure);
    // "request #3: lockstep::allreduce float32[4] issued at x.cpp:12"
    [[nodiscard]] std::string text() const;
    // "`lockstep::allreduce` float32[1024]" and "train.cpp:88", made when asked for (not at issue).
    [[nodiscard]] std::string what() const;
    [[nodiscard]] std::string site() const;
    [[nodiscard]] const char* phase_text() const noexcept;
};

// The process's registry of operations: every state from its issue until a wait or test has seen it complete, or,
// for one never waited for, until its communicator is freed or the runtime finalizes (then it is named in a warning).
std::uint64_t next_work_id() noexcept;
void register_work(const std::shared_ptr<WorkState>& state);
void settle_work(const WorkState& state);  // a wait or test saw it complete
// Removes the states of one communicator (or of every one: comm_id 0) still registered and names them in a warning:
// `when` is "its communicator was freed" or "the runtime finalized". Sends and receives still pending are cancelled.
void retire_unsettled(std::uint64_t comm_id, std::string_view when);
// The unsettled states of this process, for the watchdog's board.
nlohmann::json requests_json();
// The queues alive, which the runtime's finalization drains (their communicators may outlive it).
void register_queue(AsyncQueue* queue);
void forget_queue(AsyncQueue* queue);

}  // namespace lockstep::detail
