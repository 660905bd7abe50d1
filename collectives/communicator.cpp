#include <lockstep/communicator.hpp>
#include <lockstep/config.hpp>
#include <lockstep/inventory.hpp>
#include <lockstep/straggler.hpp>
#include <lockstep/kernels.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include "device_staging.hpp"
#include "tick_clock.hpp"
#include "watchdog.hpp"

#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;

MPI_Op mpi_op(ReduceOp op, DType dtype) {
    if (dtype == DType::Bool) {
        // Logical reductions: any (sum, max) and all (prod, min).
        return (op == ReduceOp::Sum || op == ReduceOp::Max) ? MPI_LOR : MPI_LAND;
    }
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean: return MPI_SUM;
        case ReduceOp::Prod: return MPI_PROD;
        case ReduceOp::Max: return MPI_MAX;
        case ReduceOp::Min: return MPI_MIN;
    }
    return MPI_SUM;
}

bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

int checked_count(std::int64_t n, std::string_view what) {
    if (n > INT_MAX) {
        throw InvalidArgumentError(fmt::format("{}: {} elements exceed MPI's int count limit ({}); split the tensor",
                                               what, n, INT_MAX));
    }
    return static_cast<int>(n);
}

std::uint64_t& communicator_counter() {
    static std::uint64_t counter = 0;
    return counter;
}

// When the world was created (for the straggler report).
std::atomic<std::int64_t> world_start_nanoseconds{0};

// The process-wide time inside collectives (straggler report): the sum over live communicators, read from each one's
// own counter, plus what freed ones left. Kept apart from the call path, which only adds to its communicator's counter.
struct WaitTotals {
    std::mutex mutex;
    std::vector<const std::atomic<std::int64_t>*> live;
    std::int64_t retired = 0;
};
WaitTotals& wait_totals() {
    static WaitTotals totals;
    return totals;
}

}  // namespace

namespace detail {
double process_wait_seconds() {
    WaitTotals& totals = wait_totals();
    std::scoped_lock lock(totals.mutex);
    std::int64_t ticks = totals.retired;
    for (const auto* counter : totals.live) ticks += counter->load(std::memory_order_relaxed);
    return ticks_to_seconds(ticks);
}
double seconds_since_world_start() {
    const std::int64_t start = world_start_nanoseconds.load();
    if (start == 0) return 0.0;
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    return static_cast<double>(now - start) * 1e-9;
}
}  // namespace detail

// -------------------------------------------------------------------------------------------------- Impl

struct alignas(64) Communicator::Impl {
    // What every call reads or writes, in the first cache line: a call on host memory touches this line, the tensor's
    // first line and MPI's own state, and (with the watchdog on) its board.
    MPI_Comm comm = MPI_COMM_NULL;  // payload traffic
    int size = 1;
    bool debug = false;
    bool tsc = false;                           // detail::ticks_are_tsc(), read once
    detail::Board* board = nullptr;             // the watchdog's board of collectives; null when the timeout is 0
    std::uint64_t sequence = 0;
    std::uint64_t collectives = 0;              // CommunicatorStats::collectives
    std::uint64_t mpi_calls = 0;                // CommunicatorStats::mpi_calls
    std::atomic<std::int64_t> wait_ticks{0};    // time inside collectives (also read by the straggler report)

    MPI_Comm control = MPI_COMM_NULL;  // signature exchanges: never matches payload messages
    int rank = 0;
    std::uint64_t id = 0;
    double timeout = 0.0;
    std::uint64_t signature_checks = 0;
    detail::Board* p2p_board = nullptr;  // sends and receives; null when the timeout is 0
    int thread_level = MPI_THREAD_SINGLE;
    std::vector<WireSignature> exchanged;  // reused by every signature exchange

    Impl(MPI_Comm base, const CommunicatorOptions& options) {
        const Config& cfg = config();
        debug = options.debug.value_or(cfg.debug);
        timeout = options.timeout.value_or(cfg.timeout);
        tsc = detail::ticks_are_tsc();
        LOCKSTEP_MPI_CHECK(MPI_Comm_dup(base, &comm));
        LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
        LOCKSTEP_MPI_CHECK(MPI_Comm_dup(comm, &control));
        LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
        LOCKSTEP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
        LOCKSTEP_MPI_CHECK(MPI_Comm_size(comm, &size));
        LOCKSTEP_MPI_CHECK(MPI_Query_thread(&thread_level));

        // One exchange sets up the watchdog's view of this communicator and agrees on its id.
        auto& watchdog = detail::Watchdog::instance();
        watchdog.ensure_started(thread_level);
        detail::Endpoint mine = watchdog.endpoint();
        mine.next_comm_id = communicator_counter();
        std::vector<detail::Endpoint> members(static_cast<std::size_t>(size));
        LOCKSTEP_MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, members.data(), sizeof mine, MPI_BYTE, control));
        for (const auto& m : members) id = std::max(id, m.next_comm_id);
        communicator_counter() = id + 1;
        const detail::Boards boards = watchdog.register_communicator(id, std::move(members), timeout);
        if (timeout > 0.0) {
            board = boards.collectives;
            p2p_board = boards.point_to_point;
        }
        WaitTotals& totals = wait_totals();
        std::scoped_lock lock(totals.mutex);
        totals.live.push_back(&wait_ticks);
    }

    ~Impl() {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) {
            if (control != MPI_COMM_NULL) MPI_Comm_free(&control);
            if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
        }
        detail::Watchdog::instance().forget_communicator(id);
        WaitTotals& totals = wait_totals();
        std::scoped_lock lock(totals.mutex);
        std::erase(totals.live, &wait_ticks);
        totals.retired += wait_ticks.load(std::memory_order_relaxed);
    }

    // Counts, then checks, one MPI call made for a collective.
    void mpi(int rc, std::string_view call, std::source_location where = std::source_location::current()) {
        ++mpi_calls;
        detail::check_mpi(rc, call, where);
    }

    // The signature goes straight into its wire form: no strings or allocations on the hot path.
    WireSignature wire_signature(OpKind op, const Tensor* t, int root, std::optional<ReduceOp> reduce_op,
                                 int varying_dim, const CallSite& site) const {
        Signature s;
        s.sequence = sequence;
        s.op = op;
        if (t != nullptr) {
            s.dtype = t->dtype();
            s.rank_of_shape = t->dim();
            s.shape_hash = shape_hash(t->shape());
            s.trailing_hash = varying_dim >= 0 ? shape_hash(t->shape(), varying_dim) : s.shape_hash;
            s.numel = t->numel();
            s.device_type = t->device().type();
        }
        s.root = root;
        s.varying_dim = varying_dim;
        s.reduce_op = reduce_op;
        s.line = site.where.line();
        WireSignature w = to_wire(s);
        if (t != nullptr) {
            for (std::size_t d = 0; d < std::min<std::size_t>(t->shape().size(), max_wire_dims); ++d) {
                w.dims[d] = t->shape()[d];
            }
        }
        const char* file = site.where.file_name();
        if (const char* slash = std::strrchr(file, '/'); slash != nullptr) file = slash + 1;
        copy_c_string(w.file, file);
        copy_c_string(w.function, site.where.function_name());
        copy_c_string(w.tag, site.tag);
        return w;
    }

    template <std::size_t N>
    static void copy_c_string(char (&dst)[N], std::string_view src) {
        if (src.size() >= N) src = src.substr(src.size() - (N - 1));  // keep the end: the innermost name
        std::memcpy(dst, src.data(), src.size());
        dst[src.size()] = '\0';
    }

    // A watchdog record of a call's tensor (if any) and call site; comm_id and timeout are the board's.
    static detail::OpRecord board_record(const Tensor* t, const CallSite& site) {
        detail::OpRecord record;
        if (t != nullptr) {
            record.has_tensor = true;
            record.dtype = t->dtype();
            record.ndim = static_cast<int>(t->dim());
            for (std::size_t d = 0; d < std::min<std::size_t>(t->shape().size(), max_wire_dims); ++d) {
                record.dims[d] = t->shape()[d];
            }
        }
        record.file = site.where.file_name();
        record.line = site.where.line();
        record.function = site.where.function_name();
        return record;
    }

    // The funnel every collective goes through (see communicator.hpp).
    template <typename Payload>
    void run(OpKind op, const Tensor* t, int root, std::optional<ReduceOp> reduce_op, int varying_dim,
             const CallSite& site, Payload&& payload) {
        ++sequence;
        ++collectives;
        const std::int64_t start = detail::ticks(tsc);
        detail::Board* const watched = board;
        if (watched != nullptr) {
            detail::OpRecord record = board_record(t, site);
            record.sequence = sequence;
            record.op = op;
            record.root = root;
            watched->begin(record);
        }
        struct EndGuard {
            Impl* self;
            detail::Board* watched;
            std::int64_t start;
            ~EndGuard() {
                if (watched != nullptr) watched->end();
                const std::int64_t spent = std::max<std::int64_t>(detail::ticks(self->tsc) - start, 0);
                // A plain load and store, not a locked add: the collectives of a communicator are never concurrent
                // (MPI's rule), and the straggler report only reads.
                self->wait_ticks.store(self->wait_ticks.load(std::memory_order_relaxed) + spent,
                                       std::memory_order_relaxed);
            }
        } guard{this, watched, start};

        if (debug) exchange_and_check(wire_signature(op, t, root, reduce_op, varying_dim, site));
        if (root >= size || (root < 0 && root != -1)) {
            throw InvalidArgumentError(fmt::format("{}: root {} is not a rank of this communicator of {} processes",
                                                   op_name(op), root, size));
        }
        payload();
    }

    void exchange_and_check(const WireSignature& wire) {
        ++signature_checks;
        std::vector<WireSignature>& all = exchanged;
        all.resize(static_cast<std::size_t>(size));
        mpi(MPI_Allgather(&wire, sizeof wire, MPI_BYTE, all.data(), sizeof wire, MPI_BYTE, control), "MPI_Allgather");
        if (wire_signatures_agree(all)) return;
        std::vector<Signature> sigs;
        sigs.reserve(all.size());
        for (const auto& w : all) sigs.push_back(from_wire(w));
        if (auto report = check_signatures(sigs)) {
            get_logger("lockstep.debug").error("{}", *report);  // the main process logs it; every rank throws it
            throw SignatureMismatchError(std::move(*report), std::move(sigs));
        }
    }

    // Puts a send or receive on the watchdog's board for its duration: a lost peer is reported like a lost collective.
    class PointToPointWatch {
    public:
        PointToPointWatch(const Impl& impl, const char* name, int peer, int tag, const Tensor& t, const CallSite& site)
            : board_(impl.p2p_board) {
            if (board_ == nullptr) return;
            detail::OpRecord record = board_record(&t, site);
            record.point_to_point = true;
            record.p2p_name = name;
            record.root = peer;
            record.tag = tag;
            board_->begin_shared(record);  // several threads may send and receive on one communicator
        }
        ~PointToPointWatch() {
            if (board_ != nullptr) board_->end_shared();
        }
        PointToPointWatch(const PointToPointWatch&) = delete;
        PointToPointWatch& operator=(const PointToPointWatch&) = delete;

    private:
        detail::Board* board_;
    };

    void check_divisible(const Tensor& t, OpKind op) const {
        if (t.dim() == 0 || t.size(0) % size != 0) {
            throw ShapeError(fmt::format("{}: the first dimension of {} must be a multiple of the {} processes",
                                         op_name(op), t.str(), size));
        }
    }
};

// -------------------------------------------------------------------------------------------------- construction

Communicator::Communicator(MPI_Comm comm, CommunicatorOptions options)
    : impl_(std::make_unique<Impl>(comm, options)) {}
Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

Communicator& Communicator::world() {
    static std::mutex mutex;
    static std::unique_ptr<Communicator> world;
    std::scoped_lock lock(mutex);
    if (!world) {
        world = std::make_unique<Communicator>(Runtime::get().comm());
        world_start_nanoseconds =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
        // On a duplicate, so that the checks' collectives do not count among the world's call numbers.
        Communicator checks = world->dup();
        detail::Watchdog::instance().label_communicator(checks.impl_->id, "lockstep's start-up checks");
        run_startup_checks(checks);
        detail::at_runtime_report([] { return straggler_report(Communicator::world()); });
        // Freed while MPI still runs; the watchdog shows the phase if another rank is still waiting for this one.
        detail::at_runtime_finalize([] {
            detail::Watchdog::instance().set_phase("in lockstep::Runtime::finalize / MPI_Finalize");
            std::scoped_lock inner(mutex);
            world.reset();
        });
    }
    return *world;
}

int Communicator::rank() const noexcept { return impl_->rank; }
int Communicator::size() const noexcept { return impl_->size; }
MPI_Comm Communicator::mpi_comm() const noexcept { return impl_->comm; }
bool Communicator::debug() const noexcept { return impl_->debug; }
double Communicator::timeout() const noexcept { return impl_->timeout; }
void Communicator::set_debug(bool on) noexcept { impl_->debug = on; }
CommunicatorStats Communicator::stats() const noexcept {
    CommunicatorStats s;
    s.collectives = impl_->collectives;
    s.signature_checks = impl_->signature_checks;
    s.mpi_calls = impl_->mpi_calls;
    s.wait_seconds = detail::ticks_to_seconds(impl_->wait_ticks.load(std::memory_order_relaxed));
    return s;
}

Communicator Communicator::split(int color, int key) const {
    if (color < 0) {
        throw InvalidArgumentError(fmt::format("split: color {} must be >= 0 (every rank joins one sub-group)", color));
    }
    MPI_Comm part = MPI_COMM_NULL;
    LOCKSTEP_MPI_CHECK(MPI_Comm_split(impl_->comm, color, key, &part));
    CommunicatorOptions options{impl_->debug, impl_->timeout};
    auto impl = std::make_unique<Impl>(part, options);
    LOCKSTEP_MPI_CHECK(MPI_Comm_free(&part));
    return Communicator(std::move(impl));
}

Communicator Communicator::dup() const {
    return Communicator(std::make_unique<Impl>(impl_->comm, CommunicatorOptions{impl_->debug, impl_->timeout}));
}

// -------------------------------------------------------------------------------------------------- collectives

void Communicator::barrier(CallSite site) {
    impl_->run(OpKind::Barrier, nullptr, -1, std::nullopt, -1, site,
               [&] { impl_->mpi(MPI_Barrier(impl_->comm), "MPI_Barrier"); });
}

Tensor& Communicator::broadcast_(Tensor& t, int root, CallSite site) {
    t.check_defined("broadcast");
    impl_->run(OpKind::Broadcast, &t, root, std::nullopt, -1, site, [&] {
        detail::with_host_chunks(t, [&](void* p, std::int64_t count) {
            impl_->mpi(MPI_Bcast(p, checked_count(count, "broadcast"), mpi_datatype(t.dtype()), root, impl_->comm),
                       "MPI_Bcast");
        });
    });
    return t;
}

Tensor Communicator::broadcast(const Tensor& t, int root, CallSite site) {
    t.check_defined("broadcast");
    Tensor out = impl_->rank == root ? t.clone() : Tensor::empty(t.shape(), t.dtype(), t.device());
    impl_->run(OpKind::Broadcast, &t, root, std::nullopt, -1, site, [&] {
        detail::with_host_chunks(out, [&](void* p, std::int64_t count) {
            impl_->mpi(MPI_Bcast(p, checked_count(count, "broadcast"), mpi_datatype(out.dtype()), root, impl_->comm),
                       "MPI_Bcast");
        });
    });
    return out;
}

namespace {
void check_reducible(const Tensor& t, ReduceOp op, OpKind kind) {
    if (op == ReduceOp::Mean && !is_floating(t.dtype())) {
        throw DTypeError(fmt::format("{}: the mean of {} is not defined on dtype {}; cast to a floating dtype first "
                                     "(ops::cast) or reduce with sum",
                                     op_name(kind), t.str(), dtype_name(t.dtype())));
    }
}
}  // namespace

Tensor& Communicator::allreduce_(Tensor& t, ReduceOp op, CallSite site) {
    t.check_defined("allreduce");
    impl_->run(OpKind::Allreduce, &t, -1, op, -1, site, [&] {
        check_reducible(t, op, OpKind::Allreduce);
        const auto reduce_in_place = [&](Tensor& work) {
            detail::with_host_chunks(work, [&](void* p, std::int64_t count) {
                impl_->mpi(MPI_Allreduce(MPI_IN_PLACE, p, checked_count(count, "allreduce"),
                                         mpi_datatype(work.dtype()), mpi_op(op, work.dtype()), impl_->comm),
                           "MPI_Allreduce");
            });
            if (op == ReduceOp::Mean) ops::scale_(work, 1.0 / impl_->size);
        };
        if (is_half(t.dtype())) {
            // float16/bfloat16: accumulate in float32, round once at the end.
            Tensor work = ops::cast(t, DType::Float32);
            reduce_in_place(work);
            ops::copy_(t, work);
        } else {
            reduce_in_place(t);
        }
    });
    return t;
}

Tensor Communicator::allreduce(const Tensor& t, ReduceOp op, CallSite site) {
    t.check_defined("allreduce");
    Tensor out;
    impl_->run(OpKind::Allreduce, &t, -1, op, -1, site, [&] {
        check_reducible(t, op, OpKind::Allreduce);
        const bool half = is_half(t.dtype());
        Tensor in = half ? ops::cast(t, DType::Float32) : t;
        Tensor result = Tensor::empty(in.shape(), in.dtype(), in.device());
        const int n = checked_count(in.numel(), "allreduce");
        detail::with_host_buffers(in, result, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Allreduce(src, dst, n, mpi_datatype(in.dtype()), mpi_op(op, in.dtype()), impl_->comm),
                       "MPI_Allreduce");
        });
        if (op == ReduceOp::Mean) ops::scale_(result, 1.0 / impl_->size);
        out = half ? ops::cast(result, t.dtype()) : result;
    });
    return out;
}

Tensor Communicator::reduce(const Tensor& t, ReduceOp op, int root, CallSite site) {
    t.check_defined("reduce");
    Tensor out;
    impl_->run(OpKind::Reduce, &t, root, op, -1, site, [&] {
        check_reducible(t, op, OpKind::Reduce);
        const bool half = is_half(t.dtype());
        Tensor in = half ? ops::cast(t, DType::Float32) : t;
        const bool is_root = impl_->rank == root;
        // Non-roots pass their own input as the unused receive buffer: MPI ignores it there.
        Tensor result = is_root ? Tensor::empty(in.shape(), in.dtype(), in.device()) : in;
        const int n = checked_count(in.numel(), "reduce");
        detail::with_host_buffers(in, result, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Reduce(src, is_root ? dst : nullptr, n, mpi_datatype(in.dtype()), mpi_op(op, in.dtype()),
                                  root, impl_->comm),
                       "MPI_Reduce");
        }, /*copy_back=*/is_root);
        if (!is_root) return;
        if (op == ReduceOp::Mean) ops::scale_(result, 1.0 / impl_->size);
        out = half ? ops::cast(result, t.dtype()) : result;
    });
    return out;
}

namespace {
Shape stacked_shape(const Tensor& t, std::int64_t parts) {
    if (t.dim() == 0) return {parts};
    Shape s = t.shape();
    s[0] *= parts;
    return s;
}
Shape split_shape(const Tensor& t, std::int64_t parts) {
    Shape s = t.shape();
    s[0] /= parts;
    return s;
}
// Whether `shape` equals t's shape with the first dimension multiplied by `mul` and divided by `div` (a 0-d t counts
// as [1]); the *_into forms check their output with it on every call, so it builds no Shape.
bool has_scaled_shape(const Shape& shape, const Tensor& t, std::int64_t mul, std::int64_t div) {
    const Shape& in = t.shape();
    if (in.empty()) return shape.size() == 1 && shape[0] == mul / div;
    if (shape.size() != in.size() || shape[0] != in[0] * mul / div) return false;
    return std::equal(in.begin() + 1, in.end(), shape.begin() + 1);
}
}  // namespace

Tensor Communicator::gather(const Tensor& t, int root, CallSite site) {
    t.check_defined("gather");
    Tensor out;
    impl_->run(OpKind::Gather, &t, root, std::nullopt, -1, site, [&] {
        const bool is_root = impl_->rank == root;
        const int n = checked_count(t.numel(), "gather");
        Tensor result = is_root ? Tensor::empty(stacked_shape(t, impl_->size), t.dtype(), t.device()) : t;
        const MPI_Datatype dt = mpi_datatype(t.dtype());
        detail::with_host_buffers(t, result, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Gather(src, n, dt, is_root ? dst : nullptr, n, dt, root, impl_->comm), "MPI_Gather");
        }, is_root);
        if (is_root) out = result;
    });
    return out;
}

Tensor Communicator::allgather(const Tensor& t, CallSite site) {
    t.check_defined("allgather");
    Tensor out = Tensor::empty(stacked_shape(t, impl_->size), t.dtype(), t.device());
    impl_->run(OpKind::Allgather, &t, -1, std::nullopt, -1, site, [&] {
        const int n = checked_count(t.numel(), "allgather");
        const MPI_Datatype dt = mpi_datatype(t.dtype());
        detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Allgather(src, n, dt, dst, n, dt, impl_->comm), "MPI_Allgather");
        });
    });
    return out;
}

Tensor& Communicator::allgather_into(const Tensor& t, Tensor& out, CallSite site) {
    t.check_defined("allgather_into");
    out.check_defined("allgather_into");
    impl_->run(OpKind::Allgather, &t, -1, std::nullopt, -1, site, [&] {
        if (!has_scaled_shape(out.shape(), t, impl_->size, 1) || out.dtype() != t.dtype() ||
            out.device() != t.device()) {
            throw ShapeError(
                fmt::format("allgather_into: the output must be {}{} {} for input {} on {} processes; got {}",
                            dtype_name(t.dtype()), shape_str(stacked_shape(t, impl_->size)), t.device().str(), t.str(),
                            impl_->size, out.str()));
        }
        const int n = checked_count(t.numel(), "allgather_into");
        const MPI_Datatype dt = mpi_datatype(t.dtype());
        detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Allgather(src, n, dt, dst, n, dt, impl_->comm), "MPI_Allgather");
        });
    });
    return out;
}

Tensor Communicator::scatter(const Tensor& t, int root, CallSite site) {
    t.check_defined("scatter");
    Tensor out;
    impl_->run(OpKind::Scatter, &t, root, std::nullopt, -1, site, [&] {
        impl_->check_divisible(t, OpKind::Scatter);
        out = Tensor::empty(split_shape(t, impl_->size), t.dtype(), t.device());
        const int n = checked_count(out.numel(), "scatter");
        const MPI_Datatype dt = mpi_datatype(t.dtype());
        detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Scatter(impl_->rank == root ? src : nullptr, n, dt, dst, n, dt, root, impl_->comm),
                       "MPI_Scatter");
        });
    });
    return out;
}

Tensor Communicator::reduce_scatter(const Tensor& t, ReduceOp op, CallSite site) {
    t.check_defined("reduce_scatter");
    Tensor out;
    impl_->run(OpKind::ReduceScatter, &t, -1, op, -1, site, [&] {
        check_reducible(t, op, OpKind::ReduceScatter);
        impl_->check_divisible(t, OpKind::ReduceScatter);
        const bool half = is_half(t.dtype());
        Tensor in = half ? ops::cast(t, DType::Float32) : t;
        Tensor result = Tensor::empty(split_shape(in, impl_->size), in.dtype(), in.device());
        const int n = checked_count(result.numel(), "reduce_scatter");
        detail::with_host_buffers(in, result, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Reduce_scatter_block(src, dst, n, mpi_datatype(in.dtype()), mpi_op(op, in.dtype()),
                                                impl_->comm),
                       "MPI_Reduce_scatter_block");
        });
        if (op == ReduceOp::Mean) ops::scale_(result, 1.0 / impl_->size);
        out = half ? ops::cast(result, t.dtype()) : result;
    });
    return out;
}

Tensor& Communicator::reduce_scatter_into(const Tensor& t, Tensor& out, ReduceOp op, CallSite site) {
    t.check_defined("reduce_scatter_into");
    out.check_defined("reduce_scatter_into");
    impl_->run(OpKind::ReduceScatter, &t, -1, op, -1, site, [&] {
        check_reducible(t, op, OpKind::ReduceScatter);
        impl_->check_divisible(t, OpKind::ReduceScatter);
        if (is_half(t.dtype())) {
            throw DTypeError(fmt::format("reduce_scatter_into: {} accumulates in float32 through a temporary; use "
                                         "reduce_scatter for float16 and bfloat16",
                                         t.str()));
        }
        if (!has_scaled_shape(out.shape(), t, 1, impl_->size) || out.dtype() != t.dtype() ||
            out.device() != t.device()) {
            throw ShapeError(fmt::format("reduce_scatter_into: the output must be {}{} {} for input {} on {} "
                                         "processes; got {}",
                                         dtype_name(t.dtype()), shape_str(split_shape(t, impl_->size)),
                                         t.device().str(), t.str(), impl_->size, out.str()));
        }
        const int n = checked_count(out.numel(), "reduce_scatter_into");
        detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Reduce_scatter_block(src, dst, n, mpi_datatype(t.dtype()), mpi_op(op, t.dtype()),
                                                impl_->comm),
                       "MPI_Reduce_scatter_block");
        });
        if (op == ReduceOp::Mean) ops::scale_(out, 1.0 / impl_->size);
    });
    return out;
}

Tensor Communicator::alltoall(const Tensor& t, CallSite site) {
    t.check_defined("alltoall");
    Tensor out;
    impl_->run(OpKind::Alltoall, &t, -1, std::nullopt, -1, site, [&] {
        impl_->check_divisible(t, OpKind::Alltoall);
        out = Tensor::empty(t.shape(), t.dtype(), t.device());
        const int n = checked_count(t.numel() / impl_->size, "alltoall");
        const MPI_Datatype dt = mpi_datatype(t.dtype());
        detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Alltoall(src, n, dt, dst, n, dt, impl_->comm), "MPI_Alltoall");
        });
    });
    return out;
}

void Communicator::send(const Tensor& t, int dest, int tag, CallSite site) {
    t.check_defined("send");
    if (dest < 0 || dest >= impl_->size) {
        throw InvalidArgumentError(fmt::format("send: destination {} is not a rank of this communicator of {} "
                                               "processes",
                                               dest, impl_->size));
    }
    const Impl::PointToPointWatch watch(*impl_, "lockstep::send", dest, tag, t, site);
    const int n = checked_count(t.numel(), "send");
    detail::with_host_buffer(const_cast<Tensor&>(t), detail::Direction::In, [&](void* p) {
        LOCKSTEP_MPI_CHECK(MPI_Send(p, n, mpi_datatype(t.dtype()), dest, tag, impl_->comm));
    });
}

Tensor& Communicator::recv(Tensor& out, int source, int tag, CallSite site) {
    out.check_defined("recv");
    if (source < 0 || source >= impl_->size) {
        throw InvalidArgumentError(fmt::format("recv: source {} is not a rank of this communicator of {} processes",
                                               source, impl_->size));
    }
    const Impl::PointToPointWatch watch(*impl_, "lockstep::recv", source, tag, out, site);
    const int n = checked_count(out.numel(), "recv");
    int received = 0;
    detail::with_host_buffer(out, detail::Direction::Out, [&](void* p) {
        MPI_Status status;
        LOCKSTEP_MPI_CHECK(MPI_Recv(p, n, mpi_datatype(out.dtype()), source, tag, impl_->comm, &status));
        LOCKSTEP_MPI_CHECK(MPI_Get_count(&status, mpi_datatype(out.dtype()), &received));
    });
    if (received != n) {
        throw ShapeError(fmt::format("recv: rank {} sent {} elements but {} expects {}; send and receive tensors of "
                                     "the same shape",
                                     source, received, out.str(), n));
    }
    return out;
}

// -------------------------------------------------------------------------------------------------- helpers

Tensor Communicator::gather_uneven(const Tensor& t, CallSite site) {
    t.check_defined("gather_uneven");
    if (t.dim() == 0) {
        throw ShapeError(fmt::format("gather_uneven: {} has no first dimension to concatenate along", t.str()));
    }
    Tensor out;
    impl_->run(OpKind::GatherUneven, &t, -1, std::nullopt, 0, site, [&] {
        const std::int64_t row = t.size(0) == 0 ? shape_numel(Shape(t.shape().begin() + 1, t.shape().end()))
                                                : t.numel() / t.size(0);
        std::int64_t mine = t.size(0);
        std::vector<std::int64_t> rows(static_cast<std::size_t>(impl_->size));
        impl_->mpi(MPI_Allgather(&mine, 1, MPI_INT64_T, rows.data(), 1, MPI_INT64_T, impl_->comm), "MPI_Allgather");
        std::vector<int> counts(rows.size()), displs(rows.size());
        std::int64_t total = 0;
        for (std::size_t r = 0; r < rows.size(); ++r) {
            counts[r] = checked_count(rows[r] * row, "gather_uneven");
            displs[r] = checked_count(total * row, "gather_uneven");
            total += rows[r];
        }
        Shape shape = t.shape();
        shape[0] = total;
        out = Tensor::empty(shape, t.dtype(), t.device());
        const MPI_Datatype dt = mpi_datatype(t.dtype());
        detail::with_host_buffers(t, out, [&](const void* src, void* dst) {
            impl_->mpi(MPI_Allgatherv(src, counts[static_cast<std::size_t>(impl_->rank)], dt, dst, counts.data(),
                                      displs.data(), dt, impl_->comm),
                       "MPI_Allgatherv");
        });
    });
    return out;
}

Tensor Communicator::pad_across_processes(const Tensor& t, std::int64_t dim, double pad_value, bool pad_first,
                                          CallSite site) {
    t.check_defined("pad_across_processes");
    if (t.dim() == 0) {  // nothing to pad; still a collective call, so debug mode checks that every rank makes it
        Tensor out;
        impl_->run(OpKind::PadAcrossProcesses, &t, -1, std::nullopt, -1, site, [&] { out = t.clone(); });
        return out;
    }
    const std::int64_t d = dim < 0 ? dim + t.dim() : dim;
    if (d < 0 || d >= t.dim()) {
        throw InvalidArgumentError(fmt::format("pad_across_processes: dimension {} is out of range for {}", dim,
                                               t.str()));
    }
    Tensor out;
    impl_->run(OpKind::PadAcrossProcesses, &t, -1, std::nullopt, static_cast<int>(d), site, [&] {
        std::int64_t mine = t.size(d), largest = 0;
        impl_->mpi(MPI_Allreduce(&mine, &largest, 1, MPI_INT64_T, MPI_MAX, impl_->comm), "MPI_Allreduce");
        if (largest == mine) {
            out = t.clone();
            return;
        }
        Shape shape = t.shape();
        shape[static_cast<std::size_t>(d)] = largest;
        out = Tensor::full(shape, pad_value, t.dtype(), t.device());
        // View both as [outer, size(d) * inner]: each outer slice is one contiguous block to place.
        std::int64_t outer = 1, inner = 1;
        for (std::int64_t i = 0; i < d; ++i) outer *= t.size(i);
        for (std::int64_t i = d + 1; i < t.dim(); ++i) inner *= t.size(i);
        const std::size_t elem = dtype_size(t.dtype());
        const std::size_t src_block = static_cast<std::size_t>(mine * inner) * elem;
        const std::size_t dst_block = static_cast<std::size_t>(largest * inner) * elem;
        const std::size_t offset = pad_first ? dst_block - src_block : 0;
        auto* dst = static_cast<char*>(out.data());
        const auto* src = static_cast<const char*>(t.data());
        for (std::int64_t o = 0; o < outer; ++o) {
            copy_bytes(dst + static_cast<std::size_t>(o) * dst_block + offset, out.device(),
                       src + static_cast<std::size_t>(o) * src_block, t.device(), src_block);
        }
    });
    return out;
}

Tensor Communicator::gather_for_metrics(const Tensor& t, std::int64_t valid_rows, CallSite site) {
    if (valid_rows < 0) {
        throw InvalidArgumentError(fmt::format("gather_for_metrics: valid_rows ({}) must be >= 0", valid_rows));
    }
    Tensor all = gather_uneven(t, site);
    return valid_rows >= all.size(0) ? all : all.narrow_rows(0, valid_rows);
}

}  // namespace lockstep
