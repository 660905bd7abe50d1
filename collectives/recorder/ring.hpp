#pragma once
// The flight recorder's rings (internal): the last calls of one communicator, kept in fixed-size entries that the
// calling thread writes with plain stores and any other thread reads (recorder.cpp's snapshot) without stopping it.
//
// Each entry carries a stamp, a sequence lock of its own: the writer makes it odd before it writes the entry's words
// and even, and larger than before, after; a reader copies the words between two loads of the stamp and drops the copy
// when they differ or are odd (a torn entry). The stamp's high bits number the entry within its ring.
//
// A communicator has two rings. Its collectives go in `calls`, written by one thread at a time (MPI orders a
// communicator's collectives), which also updates its own entries in place (payload started, completed, outcome).
// Everything else goes in `shared`, which several threads may write at once: sends and receives, and the updates
// that a thread other than the writer of `calls` makes to a call (a non-blocking collective seen complete by a wait, a
// carried call that another thread ends): an update entry names the call it completes, and the snapshot applies it.
// `shared` takes its slots by a relaxed fetch_add; `calls` needs no read-modify-write at all.
//
// Memory: capacity x sizeof(RecordedCall) per ring, allocated once, zero-filled by the system (calloc: pages that no
// call reached are never touched).

#include "../call_info.hpp"
#include "../tick_clock.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace lockstep::detail {

enum class RecordedKind : std::uint8_t { collective, send, recv, wait, update };
enum class Outcome : std::uint8_t { in_flight, ok, error };
// Which ring an update entry's call is in.
enum class RecordedStream : std::uint8_t { calls, shared };

// One call, as 8-byte words (every field is one word or packs into one, so that a reader and a writer meet only on
// whole words). Ticks are tick_clock.hpp's; 0 means "not reached".
struct RecordedCall {
    std::uint64_t stamp;     // the sequence lock (above); 0: never written
    std::uint64_t sequence;  // the call's number on its communicator (collectives), in its ring (shared), or the
                             // number of the call an update completes
    std::int64_t issued;
    std::int64_t signature;  // the debug-mode exchange done
    std::int64_t payload;    // the payload started
    std::int64_t completed;
    std::int64_t waited;                 // a non-blocking call: when a wait or test saw it complete
    std::uint64_t outcome;               // Outcome
    const char* error;                   // the exception's type (typeid name, mangled) when the outcome is an error
    std::int64_t count;                  // elements; -1: unknown
    std::uint64_t step;                  // Communicator::set_step; 0: unset
    std::int64_t dims[max_record_dims];  // the first min(ndim, 8)
    const char* file;                    // the call site's static strings
    const char* function;
    const char* name;      // a call lockstep does not carry: its function ("MPI_Allreduce"); else null
    const char* datatype;  // and its datatype's name, if known
    const void* caller;    // and its caller's return address, symbolised when a snapshot is taken
    struct Place {
        std::uint32_t line;
        std::int32_t root;  // -1: none
    } place;
    struct Message {
        std::int32_t peer;  // -1: none
        std::int32_t tag;
    } message;
    struct Traits {
        OpKind op;
        DType dtype;
        std::uint8_t ndim;
        RecordedKind kind;
        bool nonblocking;
        bool has_tensor;
        RecordedStream stream;  // an update: the ring of the call it completes
        std::uint8_t unused;
    } traits;
};
static_assert(std::is_trivially_copyable_v<RecordedCall> && std::is_standard_layout_v<RecordedCall>);
static_assert(sizeof(RecordedCall) % 8 == 0 && sizeof(RecordedCall::Traits) == 8 && sizeof(RecordedCall::Place) == 8);

using RecordWord = std::uint64_t;
inline constexpr std::size_t recorded_words = sizeof(RecordedCall) / sizeof(RecordWord);
// The stamp of entry n: n * stamp_step, plus 1 while its first write goes on, plus 2 after it; each update adds 2
// more (odd while it goes on). An entry has at most 3 updates of its own (signature, payload, completed).
inline constexpr std::uint64_t stamp_step = 16;

// A word of an entry, by the field's offset: one relaxed atomic store (a plain move on x86-64, and what TSan sees as
// the reader's partner).
template <class T>
inline void put_word(RecordWord* slot, std::size_t offset, T value) noexcept {
    static_assert(sizeof(T) == sizeof(RecordWord) && std::is_trivially_copyable_v<T>);
    RecordWord w;
    std::memcpy(&w, &value, sizeof w);
    std::atomic_ref<RecordWord>(slot[offset / sizeof(RecordWord)]).store(w, std::memory_order_relaxed);
}
#define LOCKSTEP_PUT(slot, field, value) ::lockstep::detail::put_word((slot), offsetof(RecordedCall, field), (value))

class CallRing {
public:
    explicit CallRing(std::size_t capacity)
        : capacity_(capacity), words_(static_cast<RecordWord*>(std::calloc(capacity * recorded_words, 8))) {
        if (capacity > 0 && words_ == nullptr) throw std::bad_alloc();
    }

    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    // Entries ever opened (recorded) and of those overwritten (dropped).
    [[nodiscard]] std::uint64_t opened() const noexcept { return opened_.load(std::memory_order_relaxed); }

    // The one writer's next entry (ring `calls`): its stamp is odd until close(). `number` is the entry's number.
    [[nodiscard]] RecordWord* open(std::uint64_t& number) noexcept {
        number = opened_.load(std::memory_order_relaxed);
        opened_.store(number + 1, std::memory_order_relaxed);
        RecordWord* slot = words_.get() + cursor_ * recorded_words;
        if (++cursor_ == capacity_) cursor_ = 0;
        begin_write(slot, number * stamp_step);
        return slot;
    }
    // Any thread's next entry (ring `shared`).
    [[nodiscard]] RecordWord* open_shared(std::uint64_t& number) noexcept {
        number = opened_.fetch_add(1, std::memory_order_relaxed);
        RecordWord* slot = words_.get() + (number % capacity_) * recorded_words;
        begin_write(slot, number * stamp_step);
        return slot;
    }
    static void close(RecordWord* slot) noexcept {
        std::atomic_ref<RecordWord> stamp(slot[0]);
        stamp.store(stamp.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    // An update of entry `number` in place by its writer: false (nothing written) when the entry was overwritten
    // meanwhile (a ring of fewer entries than calls nested in this one).
    [[nodiscard]] static bool reopen(RecordWord* slot, std::uint64_t number) noexcept {
        std::atomic_ref<RecordWord> stamp(slot[0]);
        const RecordWord now = stamp.load(std::memory_order_relaxed);
        if (now / stamp_step != number) return false;
        stamp.store(now + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        return true;
    }

    // The whole entries now in the ring, oldest first; `torn` counts those a writer was writing.
    [[nodiscard]] std::vector<RecordedCall> read(std::uint64_t& torn) const;

private:
    static void begin_write(RecordWord* slot, std::uint64_t base) noexcept {
        std::atomic_ref<RecordWord>(slot[0]).store(base + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
    }

    struct Free {
        void operator()(RecordWord* p) const noexcept { std::free(p); }
    };
    const std::size_t capacity_;
    const std::unique_ptr<RecordWord, Free> words_;
    std::size_t cursor_ = 0;  // the writer's next slot (ring `calls`)
    std::atomic<std::uint64_t> opened_{0};
};

// What the snapshot says of a communicator beside its calls.
struct RecordedComm {
    RecordedComm(std::size_t capacity, std::uint64_t comm_id) : id(comm_id), calls(capacity), shared(capacity) {}
    std::uint64_t id;
    std::string name;  // under the registry's mutex
    int size = 1;
    int rank = 0;
    std::vector<int> world_ranks;
    CallRing calls;
    CallRing shared;
};

// --- writing (the per-call paths)

// A lockstep call's entry: op, tensor, call site, issue time. The caller closes it (CallRing::close).
inline void write_call(RecordWord* slot, const CallInfo& call, std::uint64_t sequence, std::int64_t issued,
                       std::uint64_t step, RecordedKind kind, bool nonblocking) noexcept {
    LOCKSTEP_PUT(slot, sequence, sequence);
    LOCKSTEP_PUT(slot, issued, issued);
    LOCKSTEP_PUT(slot, signature, std::int64_t{0});
    LOCKSTEP_PUT(slot, payload, std::int64_t{0});
    LOCKSTEP_PUT(slot, completed, std::int64_t{0});
    LOCKSTEP_PUT(slot, waited, std::int64_t{0});
    LOCKSTEP_PUT(slot, outcome, static_cast<std::uint64_t>(Outcome::in_flight));
    LOCKSTEP_PUT(slot, step, step);
    LOCKSTEP_PUT(slot, file, call.site.file());
    LOCKSTEP_PUT(slot, function, call.site.function());
    LOCKSTEP_PUT(slot, name, static_cast<const char*>(nullptr));
    const bool point_to_point = kind != RecordedKind::collective;
    RecordedCall::Traits traits{call.op, DType::Float32, 0, kind, nonblocking, false, RecordedStream::calls, 0};
    std::int64_t count = -1;
    const Tensor* t = call.input != nullptr ? call.input : call.output;
    if (const ForeignCall* f = call.foreign; f != nullptr) {
        traits.has_tensor = f->dtype.has_value();
        traits.dtype = f->dtype.value_or(DType::Float32);
        const std::size_t n = std::min(f->shape.size(), max_record_dims);
        traits.ndim = static_cast<std::uint8_t>(n);
        count = 1;
        for (std::size_t i = 0; i < f->shape.size(); ++i) count *= f->shape[i];
        for (std::size_t i = 0; i < n; ++i) put_word(slot, offsetof(RecordedCall, dims) + 8 * i, f->shape[i]);
    } else if (t != nullptr) {
        traits.has_tensor = true;
        traits.dtype = t->dtype();
        const Shape& shape = t->shape();
        const std::size_t n = std::min(shape.size(), max_record_dims);
        traits.ndim = static_cast<std::uint8_t>(n);
        count = t->numel();
        for (std::size_t i = 0; i < n; ++i) put_word(slot, offsetof(RecordedCall, dims) + 8 * i, shape[i]);
    }
    LOCKSTEP_PUT(slot, count, count);
    LOCKSTEP_PUT(slot, place, (RecordedCall::Place{call.site.line(), point_to_point ? -1 : call.root}));
    LOCKSTEP_PUT(slot, message, (RecordedCall::Message{point_to_point ? call.root : -1, call.message_tag}));
    LOCKSTEP_PUT(slot, traits, traits);
}

// The end of a call in place: completion time and outcome (error: the exception's type name, or null when ok).
inline void write_end(RecordWord* slot, std::int64_t completed, const char* error) noexcept {
    LOCKSTEP_PUT(slot, completed, completed);
    LOCKSTEP_PUT(slot, outcome, static_cast<std::uint64_t>(error == nullptr ? Outcome::ok : Outcome::error));
    LOCKSTEP_PUT(slot, error, error);
}

// An update entry in `comm.shared` for call `sequence` of ring `stream`: its completion (completed != 0, with the
// outcome) and/or the moment a wait saw it (waited != 0).
void write_update(RecordedComm& comm, RecordedStream stream, std::uint64_t sequence, std::int64_t completed,
                  const char* error, std::int64_t waited) noexcept;

// The type name of the exception being handled (call inside a catch block): a static string, mangled.
[[nodiscard]] const char* current_exception_type() noexcept;

// --- the registry (recorder.cpp): made and freed with their communicators, under a mutex, never per call

// A ring pair for a new communicator of `size` processes, this one's `rank`, with `world_ranks`; capacity entries
// per ring (the setting trace_calls, or a communicator's own); null when capacity is 0. `world_rank` and `host` name
// this process in snapshots (from the first communicator made).
[[nodiscard]] std::shared_ptr<RecordedComm> record_communicator(std::uint64_t id, std::string name, int size, int rank,
                                                                std::vector<int> world_ranks, std::size_t capacity);
// Its name in snapshots ("world", "lockstep's start-up checks", "MPI_COMM_WORLD").
void name_recorded(const std::shared_ptr<RecordedComm>& comm, std::string name);
// Freed: its entries stay in snapshots among the last few freed communicators' (recorder.cpp says how many).
void retire_recorded(const std::shared_ptr<RecordedComm>& comm) noexcept;
// This process's world rank and host, as snapshots name it.
void set_recorded_process(int world_rank, std::string host);

// --- the run-long wait profile: time inside collectives per interval of the run, in constant memory

class WaitProfile {
public:
    static constexpr std::size_t bins = 256;

    // The run starts at `origin` (ticks); idempotent after the first.
    void start(std::int64_t origin) noexcept;
    // A collective that started at `start` and spent `spent` ticks. Relaxed loads and stores, no read-modify-write:
    // collectives of different communicators on different threads at the same moment may lose one of their additions.
    void add(std::int64_t start, std::int64_t spent) noexcept {
        const int shift = shift_.load(std::memory_order_relaxed);
        const std::int64_t since = start - origin_.load(std::memory_order_relaxed);
        std::uint64_t bin = since > 0 ? static_cast<std::uint64_t>(since) >> shift : 0;
        if (bin >= bins) [[unlikely]]
            bin = widen(static_cast<std::uint64_t>(since));
        wait_[bin].store(wait_[bin].load(std::memory_order_relaxed) + spent, std::memory_order_relaxed);
        calls_[bin].store(calls_[bin].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }

    struct View {
        std::int64_t origin = 0;
        int shift = 0;
        std::vector<std::int64_t> wait, calls;
    };
    [[nodiscard]] View view() const;

private:
    // Doubles the bin width (merging pairs) until `since` falls in a bin; returns that bin. Under a lock: a thread in
    // add() meanwhile may put its call in a bin about to be merged, and lose it.
    std::uint64_t widen(std::uint64_t since) noexcept;

    std::atomic<std::int64_t> origin_{0};
    std::atomic<int> shift_{20};  // 2^20 ticks: about 0.3 ms of a 3 GHz counter, 1 ms of nanoseconds
    std::atomic<std::int64_t> wait_[bins] = {};
    std::atomic<std::int64_t> calls_[bins] = {};
};

// The process's profile, fed by every communicator's collectives while its recorder is on.
extern WaitProfile process_wait_profile;

}  // namespace lockstep::detail
