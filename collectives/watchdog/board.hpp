#pragma once
// The watchdog's progress boards (internal).
//
// Each communicator has two progress boards, one for its collectives and one for its sends and receives: the call in
// flight (call number, op, shape, call site) and the last one completed. The calling thread writes a board at the
// start and end of each call without a lock, an atomic read-modify-write, a system call or a clock read: a sequence
// lock (Board below), which the watchdog thread reads and retries if it raced with a write. The watchdog thread
// stamps the start and end times itself when it sees them (within its 100 ms period).

#include "../call_info.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <type_traits>

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

}  // namespace lockstep::detail
