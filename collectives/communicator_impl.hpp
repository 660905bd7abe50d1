#pragma once
// The funnel every Communicator operation goes through (internal), and what the operations share.
//
// An operation is its public entry point in ops/: it fills one CallInfo (call_info.hpp) with designated initialisers
// and hands it, with its payload, to Impl::run:
//
//     impl_->run({.op = OpKind::Allreduce, .input = &t, .reduce_op = op, .site = site}, [&] { ...MPI call... });
//
// run() numbers the call, puts its record on the watchdog's board, in debug mode exchanges and compares the call's
// signature with every rank (one MPI_Allgather on the control communicator; on a mismatch every rank throws the same
// SignatureMismatchError before any payload moves), checks the root, then runs the payload and takes the call off
// the board. Sends and receives go on their own board through PointToPointWatch instead.
//
// The per-call contract (what a collective may and may not do on host memory with debug mode off): no allocation
// other than its result tensor, no lock, atomic read-modify-write, system call or clock read other than three reads of
// the time-stamp counter (tick_clock.hpp) for the wait statistics and the flight recorder, no std::function, no Shape
// built to check an argument; the watchdog board and the recorder's ring are written with plain stores (watchdog.hpp,
// recorder/ring.hpp). What a call touches is this struct's first cache line, the tensor's first line, its board, its
// ring entry and MPI's own state. bench/collectives measures it.

#include "async/queue.hpp"
#include "call_info.hpp"
#include "device_staging.hpp"
#include "fixed_record.hpp"
#include "operation_table.hpp"
#include "rank_groups.hpp"
#include "recorder/ring.hpp"
#include "shm/shm_group.hpp"
#include "tick_clock.hpp"
#include "watchdog.hpp"
#include "wire_signature.hpp"

#include <lockstep/communicator.hpp>
#include <lockstep/kernels.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <source_location>
#include <string_view>
#include <vector>

namespace lockstep {

struct alignas(64) Communicator::Impl {
    // What every call reads or writes, in the first cache line.
    MPI_Comm comm = MPI_COMM_NULL;  // payload traffic
    int size = 1;
    bool debug = false;
    bool tsc = false;                // detail::ticks_are_tsc(), read once
    bool raising = false;            // on_timeout raise: every collective runs in the queue (via_queue)
    detail::Board* board = nullptr;  // the watchdog's board of collectives; null when the timeout is 0
    std::uint64_t sequence = 0;
    std::uint64_t collectives = 0;            // CommunicatorStats::collectives
    std::uint64_t mpi_calls = 0;              // CommunicatorStats::mpi_calls
    std::atomic<std::int64_t> wait_ticks{0};  // time inside collectives (lent to the wait statistics)
    detail::CallRing* ring = nullptr;         // the flight recorder's ring of collectives; null when it is off

    MPI_Comm control = MPI_COMM_NULL;  // signature exchanges: never matches payload messages
    int rank = 0;
    std::uint64_t id = 0;
    double timeout = 0.0;
    std::uint64_t signature_checks = 0;
    detail::Board* p2p_board = nullptr;  // sends and receives; null when the timeout is 0
    int thread_level = MPI_THREAD_SINGLE;
    std::vector<detail::WireSignature> exchanged;    // reused by every signature exchange
    std::shared_ptr<detail::RecordedComm> recorded;  // the flight recorder's rings (ring is its `calls`)

    // The life cycle (communicator.cpp).
    Impl(MPI_Comm base, const CommunicatorOptions& options);
    // The constructor's one exchange also compares the settings that change the protocol: unequal on any process,
    // every process throws the same ConfigError (rather than hanging in the first collective that differs).
    ~Impl();
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;

    // Counts, then checks, one MPI call made for a collective.
    void mpi(int rc, std::string_view call, std::source_location where = std::source_location::current()) {
        ++mpi_calls;
        detail::check_mpi(rc, call, where);
    }

    // prepare() validates the arguments and allocates what the call returns; payload() moves the data. Every check a
    // process can make on its own arguments belongs in prepare (or in the root check below), on every process, root
    // or not: a check made on some processes only, or after a first MPI call, lets an argument that is wrong on every
    // process fail on some and leave the others waiting in the payload. In debug mode prepare's outcome travels in
    // the signature, so that a call one process cannot start (an invalid argument, no memory) raises the same
    // CallRejectedError on every process before any payload moves; when every process failed with the same type of
    // error, every process raises that type instead (signature.cpp), as it would without debug mode.
    template <typename Prepare, typename Payload>
    void run(const detail::CallInfo& call, Prepare&& prepare, Payload&& payload) {
        bool checked = debug;
        std::uint64_t current_step = step;
        const detail::WorkState* queued = nullptr;
        if (async != nullptr) [[unlikely]] {
            // A queued non-blocking collective carries the debug mode and step of its issue; a blocking one starts
            // after the non-blocking ones issued before it.
            if (queued = detail::AsyncQueue::running_here(); queued != nullptr && queued->queue == async.get()) {
                checked = queued->debug;
                current_step = queued->step;
            } else {
                queued = nullptr;
                if (!async->idle()) async->drain();
            }
        }
        ++sequence;
        ++collectives;
        const std::int64_t start = detail::ticks(tsc);
        detail::Board* const watched = board;
        if (watched != nullptr) watched->begin(detail::board_record(call, sequence));
        struct EndGuard {
            Impl* self;
            detail::Board* watched;
            std::int64_t start;
            detail::RecordWord* entry = nullptr;  // in the recorder's ring; null when it is off
            std::uint64_t entry_number = 0;
            const char* error = nullptr;  // the type of the exception that leaves the call
            ~EndGuard() {
                if (watched != nullptr) watched->end();
                const std::int64_t now = detail::ticks(self->tsc);
                const std::int64_t spent = std::max<std::int64_t>(now - start, 0);
                // A plain load and store, not a locked add: the collectives of a communicator are never concurrent
                // (MPI's rule), and the wait statistics only read.
                self->wait_ticks.store(self->wait_ticks.load(std::memory_order_relaxed) + spent,
                                       std::memory_order_relaxed);
                if (entry != nullptr) {
                    if (detail::CallRing::reopen(entry, entry_number)) {
                        detail::write_end(entry, now, error);
                        detail::CallRing::close(entry);
                    }
                    detail::process_wait_profile.add(start, spent);
                }
            }
        } guard{this, watched, start};
        if (detail::CallRing* const recording = ring; recording != nullptr) {
            guard.entry = recording->open(guard.entry_number);
            std::int64_t issued = start;
            if (queued != nullptr) [[unlikely]] {
                issued = queued->issued_ticks;
                queued->recorded_sequence = sequence;
            }
            detail::write_call(guard.entry, call, sequence, issued, current_step, detail::RecordedKind::collective,
                               queued != nullptr && !queued->blocking_caller);
            detail::CallRing::close(guard.entry);
        }

        try {
            if (checked) {
                std::optional<detail::LocalFailure> failure;
                std::exception_ptr error;
                try {
                    prepare();
                } catch (...) {
                    failure = detail::current_failure();
                    error = std::current_exception();
                }
                exchange_and_check(
                    detail::encode_signature(call, sequence, current_step, failure ? &*failure : nullptr), error);
                record_time(guard.entry, guard.entry_number, offsetof(detail::RecordedCall, signature));
            } else {
                prepare();
            }
            const bool rooted = detail::traits(call.op).rooted();
            if (call.root >= size || (call.root < 0 && (call.root != -1 || rooted))) {
                throw InvalidArgumentError(fmt::format("{}: root {} is not a rank of this communicator of {}",
                                                       op_name(call.op), call.root,
                                                       detail::count_text(size, "process", "processes")));
            }
            record_time(guard.entry, guard.entry_number, offsetof(detail::RecordedCall, payload));
            payload();
        } catch (...) {
            if (guard.entry != nullptr) guard.error = detail::current_exception_type();
            throw;
        }
    }

    // A time of the call's recorder entry (signature or payload), now.
    void record_time(detail::RecordWord* entry, std::uint64_t number, std::size_t field) const noexcept {
        if (entry == nullptr || !detail::CallRing::reopen(entry, number)) return;
        detail::put_word(entry, field, detail::ticks(tsc));
        detail::CallRing::close(entry);
    }

    template <typename Payload>
    void run(const detail::CallInfo& call, Payload&& payload) {
        run(
            call, [] {}, std::forward<Payload>(payload));
    }

    // Debug mode: every rank's signature of this call, compared by the same rule everywhere (signature.cpp). `error`
    // is what this process's prepare step threw, if anything; `foreign`: the call is another library's
    // (ShmGroup::exchange_record's sleep_when_late).
    void exchange_and_check(const detail::WireSignature& mine, const std::exception_ptr& error = nullptr,
                            bool foreign = false);

    std::uint64_t step = 0;        // Communicator::set_step: compared in debug mode; 0 is unset
    std::vector<int> world_ranks;  // of this communicator's ranks, for reports
    // Collectives through the node's shared-memory arena; null where the communicator cannot use it. A payload
    // tries it first when the call is large enough (shm_group.hpp), and takes the MPI path when it declines.
    std::unique_ptr<detail::ShmGroup> shm;
    [[nodiscard]] detail::ShmGroup* shm_for(std::size_t bytes) const noexcept {
        return shm != nullptr && shm->reaches(bytes) ? shm.get() : nullptr;
    }
    // What split and dup pass on: this communicator's switch where it has the arena, otherwise the default.
    [[nodiscard]] std::optional<bool> inherited_shared_memory() const noexcept {
        if (shm == nullptr) return std::nullopt;
        return shm->enabled;
    }

    // on_timeout raise (communicator.cpp). Every blocking collective's entry point starts with
    //     if (impl_->via_queue()) return i<op>(...).result();
    // so that the call runs on the progress thread and the caller waits on its Work, which the watchdog fails with a
    // TimeoutError when the call outlives the timeout (timed_out); the communicator is then broken, and every later
    // call on it throws at once (check_usable).
    // The Work that the caller's thread makes next on this communicator is then that blocking call's (new_work reads
    // and clears blocking_via_queue), so that the flight recorder keeps it as blocking. Should the non-blocking form
    // throw before it makes its Work (a bad argument), the mark stays until this thread's next Work here.
    [[nodiscard]] bool via_queue() const noexcept {
        if (!raising) return false;
        const detail::WorkState* here = detail::AsyncQueue::running_here();
        const bool queued = here == nullptr || here->queue != async.get();
        if (queued) blocking_via_queue = this;
        return queued;
    }
    static thread_local const Impl* blocking_via_queue;
    void timed_out(const std::string& report);  // the watchdog's thread, registry lock held
    void check_usable() const {
        if (broken.load(std::memory_order_acquire)) [[unlikely]]
            throw_broken();
    }
    [[noreturn]] void throw_broken() const;
    std::atomic<bool> broken{false};
    mutable std::mutex broken_mutex;
    std::string broken_headline;  // under broken_mutex: the report's first line and the line naming the call

    // Calls another library carries (foreign.cpp): those begun and not yet ended, oldest first, under
    // foreign_mutex (a carrier's completion may come on any thread). The board shows the oldest.
    struct ForeignPending {
        std::uint64_t number = 0;
        detail::CallRecord record;
        bool ended = false;
    };
    std::mutex foreign_mutex;
    std::deque<ForeignPending> foreign_pending;
    // `error`: the type of the exception that ended it before the carrier issued it (a static string), or null.
    void end_foreign(std::uint64_t number, const char* error = nullptr) noexcept;

    // Non-blocking collectives: the queue, made at the first one (async/queue.hpp), and whether it gets a thread.
    std::unique_ptr<detail::AsyncQueue> async;
    bool progress_thread = true;
    [[nodiscard]] detail::AsyncQueue& queue();
    // A blocking operation other than a funnelled collective (split, dup) waits for the queue first.
    void drain() {
        if (async != nullptr && !async->idle() && detail::AsyncQueue::running_here() == nullptr) async->drain();
    }
    // The state of a non-blocking operation about to be issued: numbered, described, registered.
    [[nodiscard]] std::shared_ptr<detail::WorkState> new_work(const detail::CallInfo& call);
    // Posts a non-blocking receive of `out` (checked by the caller) from `source` (or MPI_ANY_SOURCE).
    Work post_receive(Tensor& out, int source, int tag, const CallSite& site);
    // Issues a non-blocking collective whose blocking form `body` runs in the queue.
    Work submit(const detail::CallInfo& call, std::function<void(Communicator&, detail::WorkState&)> body);

    // Puts a send or receive on the watchdog's board for its duration: a lost peer is reported like a lost collective.
    // The recorder keeps it in the communicator's shared ring (several threads may post).
    class PointToPointWatch {
    public:
        PointToPointWatch(const Impl& impl, const detail::CallInfo& call)
            : board_(impl.p2p_board), recorded_(impl.recorded.get()), tsc_(impl.tsc) {
            if (board_ != nullptr) board_->begin_shared(detail::board_record(call, 0));  // several threads may post
            if (recorded_ != nullptr) {
                entry_ = recorded_->shared.open_shared(number_);
                const std::int64_t now = detail::ticks(tsc_);
                detail::write_call(entry_, call, number_ + 1, now, impl.step,
                                   call.op == OpKind::Send ? detail::RecordedKind::send : detail::RecordedKind::recv,
                                   false);
                detail::put_word(entry_, offsetof(detail::RecordedCall, payload), now);
                detail::CallRing::close(entry_);
            }
        }
        ~PointToPointWatch() {
            if (board_ != nullptr) board_->end_shared();
            if (recorded_ != nullptr && detail::CallRing::reopen(entry_, number_)) {
                detail::write_end(entry_, detail::ticks(tsc_), error_);
                detail::CallRing::close(entry_);
            }
        }
        PointToPointWatch(const PointToPointWatch&) = delete;
        PointToPointWatch& operator=(const PointToPointWatch&) = delete;

        // Runs the call's body; an exception that leaves it is the recorded outcome (its type).
        template <typename Body>
        void run(Body&& body) {
            try {
                body();
            } catch (...) {
                error_ = detail::current_exception_type();
                throw;
            }
        }

    private:
        detail::Board* board_;
        detail::RecordedComm* recorded_;
        bool tsc_;
        detail::RecordWord* entry_ = nullptr;
        std::uint64_t number_ = 0;
        const char* error_ = nullptr;
    };

    void check_divisible(const Tensor& t, OpKind op) const {
        if (t.dim() == 0 || t.size(0) % size != 0) {
            throw ShapeError(
                fmt::format("{}: the first dimension of {} must be a multiple of the number of processes, {}",
                            op_name(op), t.str(), size));
        }
    }
    void check_peer(int peer, OpKind op) const {
        if (peer < 0 || peer >= size) {
            const bool send = op == OpKind::Send;
            throw InvalidArgumentError(fmt::format("{}: {} {} is not a rank of this communicator of {}",
                                                   send ? "send" : "recv", send ? "destination" : "source", peer,
                                                   detail::count_text(size, "process", "processes")));
        }
    }
};

namespace detail {

// The in-place forms' raise-mode path (Impl::via_queue): waits for the queued call, then returns its tensor.
inline Tensor& waited(Work work, Tensor& t) {
    work.wait();
    return t;
}

// MPI counts are ints.
[[nodiscard]] inline int checked_count(std::int64_t n, std::string_view what) {
    if (n > INT_MAX) {
        throw InvalidArgumentError(
            fmt::format("{}: {} elements exceed MPI's int count limit ({}); split the tensor", what, n, INT_MAX));
    }
    return static_cast<int>(n);
}

[[nodiscard]] inline bool is_half(DType d) noexcept {
    return d == DType::Float16 || d == DType::BFloat16;
}

// A reduce op of the table (an enum value cast from anything else has no MPI operation) on a dtype its row takes
// (operation_table.hpp: mean and premul_sum on floating and complex dtypes, max and min on real ones, the bitwise
// ops on integers and bool; on bool, sum and max are any, prod and min all).
inline void check_reducible(const Tensor& t, ReduceOp op, OpKind kind) {
    if (static_cast<std::size_t>(op) >= reduce_op_table.size()) [[unlikely]] {
        throw InvalidArgumentError(
            fmt::format("{}: {} is not a reduce op; use sum, prod, max, min, mean, band, bor, bxor or premul_sum",
                        op_name(kind), static_cast<int>(op)));
    }
    const ReduceOpTraits& row = reduce_op_table[static_cast<std::size_t>(op)];
    if (!row.reduces(t.dtype())) [[unlikely]] {
        throw DTypeError(fmt::format("{}: the {} of {} is not defined on dtype {}; {} takes {}", op_name(kind),
                                     row.name, t.str(), dtype_name(t.dtype()), row.name, row.takes));
    }
}

// Multiplies every element of t by `factor` in place; a complex tensor through a view of its real and imaginary parts
// as reals (the tensor math computes on real dtypes only).
inline void scale_elements_(Tensor& t, double factor) {
    if (!is_complex(t.dtype())) {
        ops::scale_(t, factor);
        return;
    }
    Tensor parts = Tensor::from_blob(t.data(), {2 * t.numel()}, real_dtype(t.dtype()), t.device());
    ops::scale_(parts, factor);
}

// t's shape with dimension 0 multiplied by `parts` (a 0-d t gives [parts]), or divided by it.
[[nodiscard]] inline Shape stacked_shape(const Tensor& t, std::int64_t parts) {
    if (t.dim() == 0) return {parts};
    Shape s = t.shape();
    s[0] *= parts;
    return s;
}
[[nodiscard]] inline Shape split_shape(const Tensor& t, std::int64_t parts) {
    Shape s = t.shape();
    s[0] /= parts;
    return s;
}

// Whether `shape` equals t's shape with the first dimension multiplied by `mul` and divided by `div` (a 0-d t counts
// as [1]); the *_into forms check their output with it on every call, so it builds no Shape.
[[nodiscard]] inline bool has_scaled_shape(const Shape& shape, const Tensor& t, std::int64_t mul, std::int64_t div) {
    const Shape& in = t.shape();
    if (in.empty()) return shape.size() == 1 && shape[0] == mul / div;
    if (shape.size() != in.size() || shape[0] != in[0] * mul / div) return false;
    return std::equal(in.begin() + 1, in.end(), shape.begin() + 1);
}

// The output of an *_into form against its input: the shape `t`'s scaled as has_scaled_shape does, the dtype and the
// device of `t`. A wrong dtype is a DTypeError, anything else a ShapeError; the message is the same.
inline void check_output(const Tensor& out, const Tensor& t, std::int64_t mul, std::int64_t div, int processes,
                         std::string_view what) {
    const bool dtype_ok = out.dtype() == t.dtype();
    if (dtype_ok && has_scaled_shape(out.shape(), t, mul, div) && out.device() == t.device()) [[likely]] {
        return;
    }
    Shape expected = t.dim() == 0 ? Shape{mul / div} : t.shape();
    if (t.dim() != 0) expected[0] = expected[0] * mul / div;
    std::string text =
        fmt::format("{}: the output must be {}{} {} for input {} on {}; got {}", what, dtype_name(t.dtype()),
                    shape_str(expected), t.device().str(), t.str(),
                    count_text(static_cast<std::uint64_t>(processes), "process", "processes"), out.str());
    if (!dtype_ok) throw DTypeError(std::move(text));
    throw ShapeError(std::move(text));
}

// The reductions' one sequence for every dtype: float16 and bfloat16 accumulate in float32 and are rounded once at
// the end; mean is a sum divided by the number of processes afterwards. What the sequence allocates (the float32
// copy, the accumulator, the rounded result) is allocated in the call's prepare step, before any data moves, so that
// running out of memory is a failure every rank learns of in debug mode, not one rank's surprise after the exchange.

// The float32 copy of a half-precision tensor; nothing for other dtypes (the tensor itself is used).
struct Widened {
    Tensor copy;
    [[nodiscard]] Tensor& of(Tensor& t) noexcept { return copy.defined() ? copy : t; }
    [[nodiscard]] const Tensor& of(const Tensor& t) const noexcept { return copy.defined() ? copy : t; }
};
[[nodiscard]] inline Widened widen(const Tensor& t) {
    return is_half(t.dtype()) ? Widened{ops::cast(t, DType::Float32)} : Widened{};
}
// What an out-of-place reduction sends: for premul_sum, a copy of t (widened if half) multiplied by the factor, so
// that the caller's tensor is never written; otherwise as widen.
[[nodiscard]] inline Widened widen(const Tensor& t, const Reduction& op) {
    if (op.op != ReduceOp::PremulSum) return widen(t);
    Widened w{is_half(t.dtype()) ? ops::cast(t, DType::Float32) : t.clone()};
    scale_elements_(w.copy, op.factor);
    return w;
}
// In place, before the data moves: premul_sum multiplies `work.of(t)` (the tensor itself, or its float32 copy).
inline void premultiply_(Tensor& t, Widened& work, const Reduction& op) {
    if (op.op == ReduceOp::PremulSum) scale_elements_(work.of(t), op.factor);
}
// In place: after MPI reduced `work.of(t)`, the mean's division and the copy back into a half-precision t.
inline void finish_reduce_(Tensor& t, Widened& work, ReduceOp op, int processes) {
    Tensor& target = work.of(t);
    if (op == ReduceOp::Mean) scale_elements_(target, 1.0 / processes);
    if (work.copy.defined()) ops::copy_(t, work.copy);
}

// Out of place: MPI reads `input.of(t)` and writes `result` (in the accumulation dtype); `out` is the rounded
// half-precision result. A process that receives nothing (a reduce's non-root) gets an empty result.
struct WidenedResult {
    Widened input;
    Tensor result;
    Tensor out;
    bool receives = true;
};
[[nodiscard]] inline WidenedResult widened_result(const Tensor& t, const Shape& shape, const Reduction& op,
                                                  bool receives = true) {
    WidenedResult r;
    r.input = widen(t, op);
    const Tensor& in = r.input.of(t);
    r.result = Tensor::empty(receives ? shape : Shape{0}, in.dtype(), in.device());
    if (receives && is_half(t.dtype())) r.out = Tensor::empty(shape, t.dtype(), t.device());
    r.receives = receives;
    return r;
}
[[nodiscard]] inline Tensor finish_reduce(WidenedResult& r, ReduceOp op, int processes) {
    if (!r.receives) return {};
    if (op == ReduceOp::Mean) scale_elements_(r.result, 1.0 / processes);
    if (!r.out.defined()) return r.result;
    ops::copy_(r.out, r.result);
    return r.out;
}

}  // namespace detail
}  // namespace lockstep
