#pragma once
// The hang watchdog (internal).
//
// Each communicator has two progress boards, one for its collectives and one for its sends and receives: the call in
// flight (call number, op, shape, call site) and the last one completed. The calling thread writes a board at the
// start and end of each call without a lock, an atomic read-modify-write, a system call or a clock read: a sequence
// lock (Board below), which the watchdog thread reads and retries if it raced with a write. The watchdog thread
// stamps the start and end times itself when it sees them (within its 100 ms period).
//
// A watchdog thread per process serves those boards over a TCP socket (loopback when the job is on one node) and checks
// every 100 ms whether a call in flight has outlived its communicator's timeout. When it has, it asks every process of
// the stuck communicator for its board, through those sockets: a channel that does not depend on MPI, so it answers
// while the collective is stuck and while a process computes or waits in MPI_Finalize. A member that is stuck in a
// collective of another communicator brings that call into the same report (two calls that wait for each other are
// one hang). The lowest world rank waiting in any of those calls prints the report (op, call number, shape, seconds
// waited, where the processes are on each communicator, what each process is doing); then it tells every process of
// the job to end, and each ends itself with exit code 124. A stuck send or recv is reported by the process that waits,
// with what its peer is doing instead (the matching call with another tag, the same direction, a collective, nothing).
//
// The channel answers only the processes of the job: each process draws a random key at start-up and publishes it
// with its endpoint in the MPI exchange every new communicator makes, so only a process that took part in that
// exchange can present it. It serves many clients at once, each with a short deadline, so idle or malformed
// connections cannot hold up a report.

#include "call_info.hpp"
#include "fixed_record.hpp"

#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lockstep::detail {

// The board of one kind of call on one communicator: a sequence lock with one writer at a time. The collectives of a
// communicator are ordered by MPI's rules, so they have one writer; sends and receives, which several threads may
// post on one communicator, serialize on writers_mutex (begin_shared/end_shared). Writing a record is ~20 plain
// stores; nothing on the writer's side is a locked instruction. The record is the fixed part of the call record
// (call_info.hpp).
class Board {
public:
    // completions, if given, is the process's count of completed calls over all boards: the order in which calls of
    // different communicators completed, which the watchdog's 100 ms stamps cannot tell apart.
    Board(std::uint64_t comm_id, double timeout, std::atomic<std::uint64_t>* completions = nullptr)
        : comm_id_(comm_id), timeout_(timeout), completions_(completions) {}

    // The start of call number begun()+1 (its record goes to slot (begun()+1) % 2, which held the call before the last
    // completed one), and its end.
    void begin(const CallRecord& record) noexcept {
        const std::uint64_t call = begun_.load(std::memory_order_relaxed) + 1;
        const std::uint64_t version = version_.load(std::memory_order_relaxed);
        version_.store(version + 1, std::memory_order_relaxed);  // odd: a write is in progress
        std::atomic_thread_fence(std::memory_order_release);
        Words words;
        std::memcpy(words.data(), &record, sizeof record);
        auto& slot = slots_[call % 2];
        for (std::size_t i = 0; i < words.size(); ++i) {
            std::atomic_ref<std::uint64_t>(slot[i]).store(words[i], std::memory_order_relaxed);
        }
        version_.store(version + 2, std::memory_order_release);
        begun_.store(call, std::memory_order_release);
    }
    void end() noexcept {
        if (completions_ != nullptr) {
            // A load and a store, not an increment: threads that complete at the same moment may share a number,
            // which only makes their order a tie.
            const std::uint64_t order = completions_->load(std::memory_order_relaxed) + 1;
            completions_->store(order, std::memory_order_relaxed);
            last_order_.store(order, std::memory_order_relaxed);
        }
        ended_.store(ended_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }

    void begin_shared(const CallRecord& record) {
        std::scoped_lock lock(writers_mutex_);
        begin(record);
    }
    void end_shared() {
        std::scoped_lock lock(writers_mutex_);
        end();
    }

    struct Snapshot {
        std::uint64_t begun = 0;
        std::uint64_t ended = 0;
        std::optional<CallRecord> current;  // the call in flight
        std::optional<CallRecord> last;     // the last call completed
        std::uint64_t last_order = 0;       // its place among the process's completed calls (0: not counted)
    };
    // A consistent view, or nullopt if every try raced with a write (the caller looks again on its next round).
    [[nodiscard]] std::optional<Snapshot> read() const noexcept {
        for (int attempt = 0; attempt < 1000; ++attempt) {
            const std::uint64_t before = version_.load(std::memory_order_acquire);
            if (before % 2 != 0) continue;
            Snapshot snap;
            snap.begun = begun_.load(std::memory_order_acquire);
            snap.ended = ended_.load(std::memory_order_acquire);
            snap.last_order = last_order_.load(std::memory_order_relaxed);
            const auto load = [this](std::uint64_t call) {
                Words words;
                auto& slot = slots_[call % 2];
                for (std::size_t i = 0; i < words.size(); ++i) {
                    words[i] = std::atomic_ref<std::uint64_t>(slot[i]).load(std::memory_order_relaxed);
                }
                CallRecord r;
                std::memcpy(static_cast<void*>(&r), words.data(), sizeof r);  // trivially copyable (asserted)
                r.comm_id = comm_id_;
                r.timeout = timeout_;
                return r;
            };
            if (snap.begun > snap.ended) snap.current = load(snap.begun);
            if (snap.ended > 0) snap.last = load(snap.ended);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (version_.load(std::memory_order_relaxed) == before) return snap;
        }
        return std::nullopt;
    }

private:
    static_assert(std::is_trivially_copyable_v<CallRecord> && sizeof(CallRecord) % 8 == 0);
    using Words = std::array<std::uint64_t, sizeof(CallRecord) / 8>;

    alignas(64) std::atomic<std::uint64_t> version_{0};
    std::atomic<std::uint64_t> begun_{0};
    std::atomic<std::uint64_t> ended_{0};
    const std::uint64_t comm_id_;
    const double timeout_;
    std::atomic<std::uint64_t>* const completions_;
    std::atomic<std::uint64_t> last_order_{0};
    mutable Words slots_[2] = {};
    std::mutex writers_mutex_;
};

// A communicator's boards (owned by the watchdog from register_communicator to forget_communicator).
struct Boards {
    Board* collectives = nullptr;
    Board* point_to_point = nullptr;
};

// Where a process's watchdog answers, exchanged by every new communicator over its members.
struct Endpoint {
    FixedText<64> host;
    std::int32_t port;
    std::int32_t pid;
    std::int32_t world_rank;
    std::int32_t unused;
    std::uint64_t next_comm_id;  // the sender's counter of communicators; the new one takes the largest
    // The key a query to this process's watchdog must present: random per process, it travels only inside this MPI
    // exchange, never on a command line or in the environment.
    std::array<std::uint8_t, 16> key;
};

// The request line that asks the watchdog at `to` for `verb` (BOARD, NUDGE or END), with its key.
[[nodiscard]] std::string watchdog_request(std::string_view verb, const Endpoint& to);

// The watchdog's verdict on this process, once it found a call stuck (the report it printed or was told of); nullopt
// before. Communicator::async_error reads it.
[[nodiscard]] std::optional<std::string> watchdog_verdict();

class Watchdog {
public:
    // The process-wide watchdog. ensure_started() opens the listening socket and starts the thread (local, no MPI).
    static Watchdog& instance();
    void ensure_started(int thread_level);
    [[nodiscard]] bool running() const noexcept;
    // This process's endpoint, to be exchanged over a new communicator.
    [[nodiscard]] Endpoint endpoint() const;
    // The members of a communicator, in its rank order, and its watchdog timeout (0: never reported). The boards stay
    // valid until forget_communicator.
    [[nodiscard]] Boards register_communicator(std::uint64_t comm_id, std::vector<Endpoint> members, double timeout);
    void forget_communicator(std::uint64_t comm_id);
    // Names what lockstep uses one of its own communicators for (e.g. its start-up checks): reports then say
    // "`lockstep::allgather` #1 ... in <label>" rather than show an internal call as if it were the program's.
    void label_communicator(std::uint64_t comm_id, std::string label);
    // A note shown while no collective is in flight (e.g. "in MPI_Finalize"); empty clears it.
    void set_phase(std::string phase);

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
