// Collectives through the node's shared-memory arena: the group's set-up, its barrier, and the operations (see
// shm_group.hpp for the protocol).

#include "shm_group.hpp"

#include "../operation_table.hpp"
#include "../watchdog.hpp"

#include <lockstep/errors.hpp>
#include <lockstep/internal/arena.hpp>
#include <lockstep/kernels.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace lockstep::detail {

namespace {

// A control line and its two slots take one block of the segment and are never given back: a slow peer may still be
// waiting on its counter, or reading the descriptor or slot of the communicator's last call, when this process has
// freed the communicator, and a reused block would be overwritten under it. 32.5 KiB per communicator ever created.
constexpr std::size_t slots_at = (sizeof(ShmLine) + 63) / 64 * 64;
constexpr std::size_t line_bytes = (slots_at + 2 * shm_slot_bytes + 511) / 512 * 512;

// Op values of a round's record that are not rows of the operation table: debug mode's signature exchange, and the
// later rounds of a call on the arena path.
constexpr std::uint8_t signature_exchange = 0xfe;
constexpr std::uint8_t inside_arena_call = 0xfd;

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

// Whether the processor has fast string moves (ERMS: CPUID leaf 7, EBX bit 9).
bool fast_string_moves() noexcept {
#if defined(__x86_64__)
    static const bool yes = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && ((b >> 9) & 1u) != 0;
    }();
    return yes;
#else
    return false;
#endif
}

// A copy of a tensor's bytes between the arena's mappings. From 1 MiB, with fast string moves, `rep movsb`: glibc's
// memcpy moves blocks this large with non-temporal stores, measured at 9.4-10.3 GB/s for 64 MiB between two mappings
// of a /dev/shm object (4 KiB pages: the kernel's shmem THP is off) against 13.7-17.7 GB/s (AMD EPYC, 2 cores).
void copy_bytes(void* dst, const void* src, std::size_t n) noexcept {
#if defined(__x86_64__)
    if (n >= (std::size_t{1} << 20) && fast_string_moves()) {
        asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
        return;
    }
#endif
    if (n > 0) std::memcpy(dst, src, n);
}

// Whether `count` has reached `target`, in wrapping 32-bit arithmetic.
bool reached(std::uint32_t count, std::uint32_t target) noexcept {
    return static_cast<std::int32_t>(count - target) >= 0;
}

// Whether the node's `members` processes can each have a core of the machine (its online processors: a process
// that mpirun bound to one core still has that core to itself).
bool cores_for_all(int members) noexcept {
    return ::sysconf(_SC_NPROCESSORS_ONLN) >= members;
}

// [lo, hi) of `count` elements for member `index` of `members`: equal slices of whole cache lines, the last shorter.
std::pair<std::int64_t, std::int64_t> slice_of(std::int64_t count, int members, int index, std::size_t element) {
    const auto per_line = static_cast<std::int64_t>(std::max<std::size_t>(64 / element, 1));
    std::int64_t slice = (count + members - 1) / members;
    slice = (slice + per_line - 1) / per_line * per_line;
    const std::int64_t lo = std::min(count, slice * index);
    return {lo, std::min(count, lo + slice)};
}

// The reduction of sources[0..n) (in that order, for every element) of `count` elements into each of targets[0..m),
// through a block small enough to stay in the first-level cache; a target may be one of the sources (in place). The
// caller has checked the pair of op and type (check_reducible): max and min take no complex type, the bitwise ops
// integers only.
template <typename T>
void reduce_blocks(const std::byte* const* sources, int n, std::byte* const* targets, int m, std::int64_t count,
                   ReduceOp op) {
    using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
    using Map = Eigen::Map<Array>;
    using ConstMap = Eigen::Map<const Array>;
    constexpr std::int64_t block = 16384 / sizeof(T);
    alignas(64) T acc_data[block];
    for (std::int64_t at = 0; at < count; at += block) {
        const std::int64_t len = std::min(block, count - at);
        Map acc(acc_data, len);
        const auto source = [&](int p) { return ConstMap(reinterpret_cast<const T*>(sources[p]) + at, len); };
        acc = source(0);
        for (int p = 1; p < n; ++p) {
            switch (op) {
                case ReduceOp::Sum:
                case ReduceOp::Mean:
                case ReduceOp::PremulSum:
                    acc += source(p);
                    break;
                case ReduceOp::Prod:
                    acc *= source(p);
                    break;
                case ReduceOp::Max:
                case ReduceOp::Min:
                    if constexpr (!is_complex_v<T>) {
                        if (op == ReduceOp::Max) {
                            acc = acc.max(source(p));
                        } else {
                            acc = acc.min(source(p));
                        }
                    }
                    break;
                case ReduceOp::BitwiseAnd:
                case ReduceOp::BitwiseOr:
                case ReduceOp::BitwiseXor:
                    if constexpr (std::is_integral_v<T>) {
                        const T* in = reinterpret_cast<const T*>(sources[p]) + at;
                        for (std::int64_t i = 0; i < len; ++i) {
                            acc_data[i] = op == ReduceOp::BitwiseAnd  ? static_cast<T>(acc_data[i] & in[i])
                                          : op == ReduceOp::BitwiseOr ? static_cast<T>(acc_data[i] | in[i])
                                                                      : static_cast<T>(acc_data[i] ^ in[i]);
                        }
                    }
                    break;
            }
        }
        for (int t = 0; t < m; ++t) {
            std::memcpy(reinterpret_cast<T*>(targets[t]) + at, acc_data, static_cast<std::size_t>(len) * sizeof(T));
        }
    }
}

// On bool (values 0 and 1), as mpi_op's logical operations: any is the largest, all the smallest, xor the bitwise one.
ReduceOp bool_reduction(ReduceOp op) noexcept {
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Max:
        case ReduceOp::BitwiseOr:
            return ReduceOp::Max;
        case ReduceOp::BitwiseXor:
            return ReduceOp::BitwiseXor;
        default:
            return ReduceOp::Min;
    }
}

void reduce_into(DType dtype, const std::byte* const* sources, int n, std::byte* const* targets, int m,
                 std::int64_t count, ReduceOp op) {
    switch (dtype) {
        case DType::Float32:
            return reduce_blocks<float>(sources, n, targets, m, count, op);
        case DType::Float64:
            return reduce_blocks<double>(sources, n, targets, m, count, op);
        case DType::Int8:
            return reduce_blocks<std::int8_t>(sources, n, targets, m, count, op);
        case DType::UInt8:
            return reduce_blocks<std::uint8_t>(sources, n, targets, m, count, op);
        case DType::Int16:
            return reduce_blocks<std::int16_t>(sources, n, targets, m, count, op);
        case DType::UInt16:
            return reduce_blocks<std::uint16_t>(sources, n, targets, m, count, op);
        case DType::Int32:
            return reduce_blocks<std::int32_t>(sources, n, targets, m, count, op);
        case DType::UInt32:
            return reduce_blocks<std::uint32_t>(sources, n, targets, m, count, op);
        case DType::Int64:
            return reduce_blocks<std::int64_t>(sources, n, targets, m, count, op);
        case DType::UInt64:
            return reduce_blocks<std::uint64_t>(sources, n, targets, m, count, op);
        case DType::Complex64:
            return reduce_blocks<std::complex<float>>(sources, n, targets, m, count, op);
        case DType::Complex128:
            return reduce_blocks<std::complex<double>>(sources, n, targets, m, count, op);
        case DType::Bool:
            return reduce_blocks<std::uint8_t>(sources, n, targets, m, count, bool_reduction(op));
        case DType::Float16:
        case DType::BFloat16:
            break;  // widened to float32 before they get here
    }
    throw DTypeError(fmt::format("shared-memory reduction reached with dtype {}", dtype_name(dtype)));
}

// Where a host tensor lies in the arena (its offset), if it does.
std::optional<std::uint64_t> place(const Tensor& t) noexcept {
    if (!t.device().is_cpu()) return std::nullopt;
    return arena_offset(t.data(), t.nbytes());
}

ShmDescriptor describe(OpKind op, const Tensor& in, std::optional<std::uint64_t> input, std::uint64_t output,
                       bool eligible, ReduceOp reduce_op = ReduceOp::Sum, int root = -1) noexcept {
    ShmDescriptor d;
    d.input = input.value_or(0);
    d.output = output;
    d.bytes = in.nbytes();
    d.eligible = eligible ? 1u : 0u;
    d.op = static_cast<std::uint8_t>(op);
    d.reduce_op = static_cast<std::uint8_t>(reduce_op);
    d.dtype = static_cast<std::uint8_t>(in.dtype());
    d.root = root;
    return d;
}

}  // namespace

ShmJoin prepare_shm_join(bool enabled) {
    ShmJoin join;
    join.enabled = enabled ? 1 : 0;
    join.threshold = arena_threshold();
    join.small_max = arena_small_max();
    if (!arena_active()) return join;
    void* line = arena_allocate(line_bytes);
    if (line == nullptr) return join;  // a full segment: this communicator goes without
    new (line) ShmLine();
    join.arena_id = arena_id();
    join.line = *arena_offset(line, line_bytes);
    return join;
}

std::unique_ptr<ShmGroup> ShmGroup::create(MPI_Comm comm, int rank, const std::vector<ShmJoin>& all,
                                           std::uint64_t* mpi_calls) {
    const ShmJoin& mine = all[static_cast<std::size_t>(rank)];
    // An unused line is never read by a peer: it goes back at once.
    const auto free_mine = [&] {
        if (mine.arena_id != 0) arena_free(arena_address(mine.line), line_bytes);
    };
    // Every process decides from the same records: the arena everywhere, and the same number of processes on every
    // node (so that the slices of a hierarchical call line up).
    std::map<std::uint64_t, std::vector<int>> nodes;  // arena id -> ranks, in rank order
    bool usable = true;
    for (std::size_t r = 0; r < all.size(); ++r) {
        if (all[r].arena_id == 0) usable = false;
        nodes[all[r].arena_id].push_back(static_cast<int>(r));
    }
    const std::size_t per_node = nodes.begin()->second.size();
    for (const auto& [id, ranks] : nodes) usable = usable && ranks.size() == per_node;
    if (!usable || all.size() < 2) {
        free_mine();
        return nullptr;
    }
    std::unique_ptr<ShmGroup> group(new ShmGroup());
    const std::vector<int>& node = nodes[mine.arena_id];
    group->members_ = static_cast<int>(node.size());
    group->spin_ = cores_for_all(group->members_);
    for (int r : node) {
        if (r == rank) group->index_ = static_cast<int>(group->lines_.size());
        group->lines_.push_back(reinterpret_cast<ShmLine*>(arena_address(all[static_cast<std::size_t>(r)].line)));
    }
    group->mine_ = group->lines_[static_cast<std::size_t>(group->index_)];
    group->mpi_calls_ = mpi_calls;
    group->enabled = true;
    group->small_max_ = all.front().small_max;
    for (const ShmJoin& j : all) {
        group->threshold_ = std::max<std::size_t>(group->threshold_, j.threshold);
        group->small_max_ = std::min<std::size_t>(group->small_max_, j.small_max);
        group->enabled = group->enabled && j.enabled != 0;
    }
    group->count_ = group->mine_->count.load(std::memory_order_relaxed);
    group->confirmed_ = group->count_;  // a new line: every peer's count starts where this one does
    if (nodes.size() > 1) {
        LOCKSTEP_MPI_CHECK(MPI_Comm_split(comm, group->index_, rank, &group->cross_));
        LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(group->cross_, MPI_ERRORS_RETURN));
        LOCKSTEP_MPI_CHECK(MPI_Comm_rank(group->cross_, &group->cross_rank_));
    }
    group->sources_.resize(node.size());
    group->targets_.resize(node.size());
    return group;
}

ShmGroup::~ShmGroup() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (cross_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&cross_);
    // The line stays allocated (line_bytes).
}

void ShmGroup::mpi(int rc, const char* call) {
    ++*mpi_calls_;
    check_mpi(rc, call);
}

// Waits until `member` has reached round `target` (its ring line for the round shows it). With a core of its own
// (spin_), it first spins for at most 10 microseconds, measured by the clock (a pause instruction lasts 10 to 140
// cycles depending on the processor), for a peer that is on its way; then it yields the core a while, which is all it
// does first when the node's processes outnumber its cores (the late peer may need this very core); then it sleeps on
// the peer's count (a futex), woken by its next round or after 2 ms at most. It never burns a core for long while a
// peer is late.
void ShmGroup::wait_round(int member, std::uint32_t target) const noexcept {
    ShmLine& line = *lines_[static_cast<std::size_t>(member)];
    const std::atomic<std::uint32_t>& round = line.rounds[target % shm_ring].round;
    const auto done = [&] { return reached(round.load(std::memory_order_acquire), target); };
    if (done()) return;
    if (spin_) {
        const auto start = std::chrono::steady_clock::now();
        do {
            for (int i = 0; i < 32; ++i) {
                if (done()) return;
                cpu_relax();
            }
        } while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(10));
    }
    for (int i = 0; i < (sleep_when_late_ ? 0 : 100); ++i) {
        if (done()) return;
        ::sched_yield();
    }
    for (;;) {
        line.waiters.fetch_add(1, std::memory_order_seq_cst);
        const std::uint32_t seen = line.count.load(std::memory_order_seq_cst);
        if (!reached(seen, target)) {
            const timespec nap{0, 2'000'000};
            (void)::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&line.count), FUTEX_WAIT, seen, &nap, nullptr,
                            0);
        }
        line.waiters.fetch_sub(1, std::memory_order_seq_cst);
        if (done()) return;
    }
}

void ShmGroup::wait_all(std::uint32_t target) {
    if (reached(confirmed_, target)) return;
    // Every peer has reached `target`, and as far as their counts say, further: the rounds up to the least of them
    // need no look at the peers' lines again (a process ahead of its peers reads one of their lines every few rounds,
    // not every round).
    std::uint32_t least = count_;
    for (int m = 0; m < members_; ++m) {
        if (m == index_) continue;
        wait_round(m, target);
        const std::uint32_t seen = lines_[static_cast<std::size_t>(m)]->count.load(std::memory_order_acquire);
        const std::uint32_t at = reached(seen, target) ? seen : target;
        if (!reached(at, least)) least = at;
    }
    confirmed_ = reached(least, target) ? least : target;
}

// Before this process writes round k: its ring line k was last read in round k - shm_ring, its slot and descriptor
// of k's parity in round k - 2, and a process has read everything of a round before it reaches the next.
void ShmGroup::ready_to_write(bool uses_slot) {
    const std::uint32_t next = count_ + 1u;
    wait_all(uses_slot ? next - 1u : next - static_cast<std::uint32_t>(shm_ring) + 1u);
}

std::uint32_t ShmGroup::post(const ShmRecord& record, const ShmDescriptor* descriptor) {
    ready_to_write(descriptor != nullptr);
    const std::uint32_t target = ++count_;
    round_ = target;
    ShmRound& line = mine_->rounds[target % shm_ring];
    line.record = record;
    if (descriptor != nullptr) mine_->descriptors[target & 1] = *descriptor;
    line.round.store(target, std::memory_order_release);
    mine_->count.store(target, std::memory_order_release);
    // A process that may sleep at once (the node's processes outnumber its cores) must see the count or be woken: the
    // fence orders the stores before the load of `waiters`. With a core each, a peer sleeps only after spinning 10 µs
    // and yielding, and a wake-up lost to the reordering costs it the futex's 2 ms timeout; without the fence the
    // stores do not wait for their lines, which is most of a small call's time.
    if (!spin_) std::atomic_thread_fence(std::memory_order_seq_cst);
    if (mine_->waiters.load(std::memory_order_relaxed) != 0) {
        (void)::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&mine_->count), FUTEX_WAKE, INT_MAX, nullptr,
                        nullptr, 0);
    }
    return target;
}

void ShmGroup::barrier() {
    // A round inside an arena call: its record says so, so that a process in another call never reads an old one.
    ShmRecord inside;
    inside.op = inside_arena_call;
    const std::uint32_t published = round_;
    wait_all(post(inside));
    round_ = published;  // the call's descriptors stay the ones its later steps read (the hierarchical copies)
}

namespace {
bool same_call(const ShmRecord& a, const ShmRecord& b) noexcept {
    return a.op == b.op && a.reduce_op == b.reduce_op && a.dtype == b.dtype && a.root == b.root && a.bytes == b.bytes;
}
ShmRecord compact(const ShmDescriptor& d) noexcept {
    return {static_cast<std::uint32_t>(d.bytes),   d.op,  d.reduce_op, d.dtype,
            static_cast<std::uint8_t>(d.eligible), d.root};
}
}  // namespace

bool ShmGroup::publish(const ShmDescriptor& mine) {
    wait_all(post(compact(mine), &mine));
    bool eligible = true;
    bool agree = true;
    for (int m = 0; m < members_; ++m) {
        const ShmDescriptor& d = descriptor_of(m);
        eligible = eligible && d.eligible != 0;
        agree = agree && same_call(compact(d), compact(mine)) && d.bytes == mine.bytes;
    }
    if (!agree) throw_mismatch();
    return eligible;
}

bool ShmGroup::publish_small(const ShmRecord& mine) {
    wait_all(post(mine));
    bool eligible = true;
    bool agree = true;
    for (int m = 0; m < members_; ++m) {
        const ShmRecord& r = record_of(m);
        eligible = eligible && r.eligible != 0;
        agree = agree && same_call(r, mine);
    }
    if (!agree) mismatch();
    return eligible;
}

void ShmGroup::mismatch(int member) const {
    if (watched) {
        // As on the MPI path: this process stays in the call, which the watchdog reports now rather than at its
        // timeout (every process's call and source line), and then ends the job.
        Watchdog::instance().report_now();
        for (;;) ::pause();
    }
    throw_mismatch(member);
}

void ShmGroup::throw_mismatch(int member) const {
    // Every process that read the same records throws the same text.
    std::string calls;
    for (int m = 0; m < members_; ++m) {
        if (member >= 0 && m != member && m != index_) continue;
        const ShmRecord& d = record_of(m);
        if (d.op == signature_exchange || d.op == inside_arena_call) {
            calls += fmt::format("  process {}: {}\n", m,
                                 d.op == signature_exchange ? "debug mode's signature exchange"
                                                            : "inside a collective through the arena");
            continue;
        }
        const auto op = static_cast<OpKind>(d.op);
        std::string what = fmt::format("{} {}", op_name(op), dtype_name(static_cast<DType>(d.dtype)));
        if (op == OpKind::Allreduce || op == OpKind::Reduce || op == OpKind::ReduceScatter) {
            what += fmt::format(" {}", reduce_op_name(static_cast<ReduceOp>(d.reduce_op)));
        }
        if (d.root >= 0) what += fmt::format(" to/from root {}", d.root);
        calls += fmt::format("  process {}: {} of {} bytes\n", m, what, d.bytes);
    }
    throw DistributedOperationError(fmt::format(
        "the processes of a communicator made different collective calls, met in the shared-memory arena:\n{}Every "
        "process must make the same collectives in the same order, with the same sizes; LOCKSTEP_DEBUG_MODE=1 names "
        "each call's source line.",
        calls));
}

const ShmDescriptor& ShmGroup::descriptor_of(int member) const noexcept {
    return lines_[static_cast<std::size_t>(member)]->descriptors[round_ & 1];
}

const ShmRecord& ShmGroup::record_of(int member) const noexcept {
    return lines_[static_cast<std::size_t>(member)]->rounds[round_ % shm_ring].record;
}

bool ShmGroup::allreduce(const Tensor& in, const Tensor& out, ReduceOp op) {
    if (small(in.nbytes())) return small_allreduce(in, out, op);
    if (!arena(in.nbytes())) return false;
    // A slice between nodes travels with an MPI count (an int).
    if (spans_nodes() && in.numel() / members_ >= INT_MAX) return false;
    const auto in_at = place(in);
    const auto out_at = place(out);
    const ShmDescriptor d = describe(OpKind::Allreduce, in, in_at, out_at.value_or(0), in_at && out_at, op);
    bool go = publish(d);
    if (spans_nodes()) {
        // Every node must take the same path: the processes of each index agree across nodes (each node's own
        // processes already agree), so one MIN over any of these communicators is the whole job's answer.
        int all = go ? 1 : 0;
        mpi(MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, cross_), "MPI_Allreduce");
        go = all != 0;
    }
    if (!go) return false;
    const std::size_t element = dtype_size(in.dtype());
    const auto [lo, hi] = slice_of(in.numel(), members_, index_, element);
    const auto at = [&](std::uint64_t offset, std::int64_t i) {
        return arena_address(offset) + static_cast<std::size_t>(i) * element;
    };
    for (int m = 0; m < members_; ++m) sources_[static_cast<std::size_t>(m)] = at(descriptor_of(m).input, lo);
    if (!spans_nodes()) {
        // My slice of every input, reduced in the order of the processes, into every output.
        for (int m = 0; m < members_; ++m) targets_[static_cast<std::size_t>(m)] = at(descriptor_of(m).output, lo);
        if (hi > lo) reduce_into(in.dtype(), sources_.data(), members_, targets_.data(), members_, hi - lo, op);
        barrier();
        ++calls;
        return true;
    }
    // Across nodes: my slice of this node's inputs into my output, then that slice reduced with the same slice of
    // every other node (MPI_Reduce then MPI_Bcast among the processes of my index: one result, the same bits on
    // every node), then the other slices copied from my node's peers.
    std::byte* mine_out = at(d.output, lo);
    if (hi > lo) {
        std::byte* const target[] = {mine_out};
        reduce_into(in.dtype(), sources_.data(), members_, target, 1, hi - lo, op);
        const int n = static_cast<int>(hi - lo);  // < INT_MAX: the caller checked the whole count
        const MPI_Datatype type = mpi_datatype(in.dtype());
        const MPI_Op mop = mpi_op(op, in.dtype());
        mpi(MPI_Reduce(cross_rank_ == 0 ? MPI_IN_PLACE : mine_out, cross_rank_ == 0 ? mine_out : nullptr, n, type, mop,
                       0, cross_),
            "MPI_Reduce");
        mpi(MPI_Bcast(mine_out, n, type, 0, cross_), "MPI_Bcast");
    }
    barrier();  // every slice is final in its owner's output
    for (int m = 0; m < members_; ++m) {
        if (m == index_) continue;
        const auto [plo, phi] = slice_of(in.numel(), members_, m, element);
        if (phi > plo) {
            copy_bytes(at(d.output, plo), at(descriptor_of(m).output, plo),
                       static_cast<std::size_t>(phi - plo) * element);
        }
    }
    barrier();  // no one reads my output any more
    ++calls;
    ++hierarchical_calls;
    return true;
}

bool ShmGroup::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
    if (small(in.nbytes())) return small_reduce_scatter(in, out, op);
    if (spans_nodes() || !arena(in.nbytes())) return false;
    const auto in_at = place(in);
    const ShmDescriptor d = describe(OpKind::ReduceScatter, in, in_at, 0, in_at && out.device().is_cpu(), op);
    if (!publish(d)) return false;
    // Rows [i k, (i + 1) k) of every input, reduced into my output.
    const std::size_t slice = out.nbytes();
    for (int m = 0; m < members_; ++m) {
        sources_[static_cast<std::size_t>(m)] =
            arena_address(descriptor_of(m).input) + slice * static_cast<std::size_t>(index_);
    }
    std::byte* const target[] = {static_cast<std::byte*>(out.data())};
    if (out.numel() > 0) reduce_into(in.dtype(), sources_.data(), members_, target, 1, out.numel(), op);
    barrier();
    ++calls;
    return true;
}

bool ShmGroup::allgather(const Tensor& in, const Tensor& out) {
    if (small_copy(out.nbytes())) return small_allgather(in, out);
    if (spans_nodes() || !arena(in.nbytes())) return false;
    const auto in_at = place(in);
    const ShmDescriptor d = describe(OpKind::Allgather, in, in_at, 0, in_at && out.device().is_cpu());
    if (!publish(d)) return false;
    auto* target = static_cast<std::byte*>(out.data());
    for (int m = 0; m < members_; ++m) {
        if (in.nbytes() > 0) {
            copy_bytes(target + in.nbytes() * static_cast<std::size_t>(m), arena_address(descriptor_of(m).input),
                       in.nbytes());
        }
    }
    barrier();
    ++calls;
    return true;
}

bool ShmGroup::broadcast(const Tensor& t, int root) {
    if (small_copy(t.nbytes())) return small_broadcast(t, root);
    if (spans_nodes() || !arena(t.nbytes())) return false;
    const bool is_root = index_ == root;
    const auto at = place(t);
    const bool eligible = t.device().is_cpu() && (!is_root || at);
    const ShmDescriptor d = describe(OpKind::Broadcast, t, at, 0, eligible, ReduceOp::Sum, root);
    if (!publish(d)) return false;
    if (!is_root && t.nbytes() > 0) copy_bytes(t.data(), arena_address(descriptor_of(root).input), t.nbytes());
    barrier();
    ++calls;
    return true;
}

bool ShmGroup::reduce(const Tensor& in, const Tensor* out, ReduceOp op, int root) {
    if (small_copy(in.nbytes())) return small_reduce(in, out, op, root);
    if (spans_nodes() || !arena(in.nbytes())) return false;
    const bool is_root = index_ == root;
    const auto in_at = place(in);
    const auto out_at = is_root && out != nullptr ? place(*out) : std::nullopt;
    const bool eligible = in_at && (!is_root || out_at);
    const ShmDescriptor d = describe(OpKind::Reduce, in, in_at, out_at.value_or(0), eligible, op, root);
    if (!publish(d)) return false;
    // My slice of every input, reduced into the root's output.
    const std::size_t element = dtype_size(in.dtype());
    const auto [lo, hi] = slice_of(in.numel(), members_, index_, element);
    for (int m = 0; m < members_; ++m) {
        sources_[static_cast<std::size_t>(m)] =
            arena_address(descriptor_of(m).input) + static_cast<std::size_t>(lo) * element;
    }
    std::byte* const target[] = {arena_address(descriptor_of(root).output) + static_cast<std::size_t>(lo) * element};
    if (hi > lo) reduce_into(in.dtype(), sources_.data(), members_, target, 1, hi - lo, op);
    barrier();
    ++calls;
    return true;
}

// The small-message path: a call goes in rounds of at most a slot per process. In each round a process that has
// something to hand over copies it into its round line (up to shm_inline_bytes) or into its slot of the round's
// parity, writes its record into the round line and stores the round's number there and into its count (no MPI call,
// no lock), then waits for the processes it reads from: every one for allreduce, allgather, reduce_scatter and
// barrier, only the root for a broadcast's other processes, every one for a reduce's root, none for a broadcast's root
// or a reduce's other processes (these return at once, as MPI's small messages do). A round line is written again
// shm_ring rounds later, a slot two rounds later, each only once every peer has finished reading it (ready_to_write).
// Whoever reads a record checks it against its own.

namespace {
ShmRecord small_record(OpKind op, const Tensor& in, bool eligible, ReduceOp reduce_op = ReduceOp::Sum,
                       int root = -1) noexcept {
    return compact(describe(op, in, std::nullopt, 0, eligible, reduce_op, root));
}
}  // namespace

std::byte* ShmGroup::next_slot(std::size_t len) {
    const std::uint32_t next = count_ + 1u;
    const bool inline_data = len <= shm_inline_bytes;
    ready_to_write(!inline_data);
    if (inline_data) return mine_->rounds[next % shm_ring].data;
    return reinterpret_cast<std::byte*>(mine_) + slots_at + (next & 1u) * shm_slot_bytes;
}

const std::byte* ShmGroup::slot_of(int member, std::size_t len) const noexcept {
    ShmLine* line = lines_[static_cast<std::size_t>(member)];
    if (len <= shm_inline_bytes) return line->rounds[round_ % shm_ring].data;
    return reinterpret_cast<const std::byte*>(line) + slots_at + (round_ & 1u) * shm_slot_bytes;
}

bool ShmGroup::small_allreduce(const Tensor& in, const Tensor& out, ReduceOp op) {
    const bool eligible = in.device().is_cpu() && out.device().is_cpu();
    const ShmRecord r = small_record(OpKind::Allreduce, in, eligible, op);
    const std::size_t element = dtype_size(in.dtype());
    const auto per_round = static_cast<std::int64_t>(shm_slot_bytes / element);
    const auto* src = static_cast<const std::byte*>(in.data());
    auto* dst = static_cast<std::byte*>(out.data());
    const std::int64_t count = in.numel();
    std::int64_t at = 0;
    do {
        const std::int64_t len = std::min(per_round, count - at);
        const std::size_t offset = static_cast<std::size_t>(at) * element;
        const std::size_t bytes = static_cast<std::size_t>(len) * element;
        if (eligible && len > 0) std::memcpy(next_slot(bytes), src + offset, bytes);
        if (!publish_small(r)) return false;  // only ever in the first round: eligibility is the call's
        // Every process reduces every element, in the order of the processes: the same bits everywhere.
        for (int m = 0; m < members_; ++m) sources_[static_cast<std::size_t>(m)] = slot_of(m, bytes);
        std::byte* const target[] = {dst + offset};
        if (len > 0) reduce_into(in.dtype(), sources_.data(), members_, target, 1, len, op);
        at += len;
    } while (at < count);
    ++calls;
    ++small_calls;
    return true;
}

bool ShmGroup::small_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
    const bool eligible = in.device().is_cpu() && out.device().is_cpu();
    const ShmRecord r = small_record(OpKind::ReduceScatter, in, eligible, op);
    const std::size_t element = dtype_size(in.dtype());
    // Each round carries the same stretch of every process's block: members x len elements per slot.
    const auto per_round = static_cast<std::int64_t>(shm_slot_bytes / element / static_cast<std::size_t>(members_));
    const auto* src = static_cast<const std::byte*>(in.data());
    auto* dst = static_cast<std::byte*>(out.data());
    const std::int64_t block = out.numel();
    std::int64_t at = 0;
    do {
        const std::int64_t len = std::min(per_round, block - at);
        const std::size_t stretch = static_cast<std::size_t>(len) * element;
        const std::size_t bytes = stretch * static_cast<std::size_t>(members_);
        if (eligible && len > 0) {
            std::byte* slot = next_slot(bytes);
            for (int m = 0; m < members_; ++m) {
                std::memcpy(slot + stretch * static_cast<std::size_t>(m),
                            src + static_cast<std::size_t>(block * m + at) * element, stretch);
            }
        }
        if (!publish_small(r)) return false;
        if (len > 0) {
            for (int m = 0; m < members_; ++m) {
                sources_[static_cast<std::size_t>(m)] = slot_of(m, bytes) + stretch * static_cast<std::size_t>(index_);
            }
            std::byte* const target[] = {dst + static_cast<std::size_t>(at) * element};
            reduce_into(in.dtype(), sources_.data(), members_, target, 1, len, op);
        }
        at += len;
    } while (at < block);
    ++calls;
    ++small_calls;
    return true;
}

bool ShmGroup::small_allgather(const Tensor& in, const Tensor& out) {
    const bool eligible = in.device().is_cpu() && out.device().is_cpu();
    const ShmRecord r = small_record(OpKind::Allgather, in, eligible);
    const auto* src = static_cast<const std::byte*>(in.data());
    auto* dst = static_cast<std::byte*>(out.data());
    const std::size_t total = in.nbytes();
    std::size_t at = 0;
    do {
        const std::size_t len = std::min(shm_slot_bytes, total - at);
        if (eligible && len > 0) std::memcpy(next_slot(len), src + at, len);
        if (!publish_small(r)) return false;
        if (len > 0) {
            for (int m = 0; m < members_; ++m) {
                std::memcpy(dst + total * static_cast<std::size_t>(m) + at, slot_of(m, len), len);
            }
        }
        at += len;
    } while (at < total);
    ++calls;
    ++small_calls;
    return true;
}

// No process waits for the others' agreement here, so every process takes this path whatever its tensor's device: a
// device tensor goes through a host copy.
bool ShmGroup::small_broadcast(const Tensor& t, int root) {
    const bool is_root = index_ == root;
    const bool host_tensor = t.device().is_cpu();
    Tensor host = t;
    if (!host_tensor) host = is_root ? t.to(Device::cpu()) : Tensor::empty(t.shape(), t.dtype(), Device::cpu());
    const ShmRecord r = small_record(OpKind::Broadcast, t, true, ReduceOp::Sum, root);
    auto* data = static_cast<std::byte*>(host.data());
    const std::size_t total = t.nbytes();
    std::size_t at = 0;
    do {
        const std::size_t len = std::min(shm_slot_bytes, total - at);
        if (is_root && len > 0) std::memcpy(next_slot(len), data + at, len);
        const std::uint32_t round = post(r);
        if (!is_root) {
            wait_round(root, round);
            if (!same_call(record_of(root), r)) mismatch(root);
            if (len > 0) std::memcpy(data + at, slot_of(root, len), len);
        }
        at += len;
    } while (at < total);
    if (!is_root && !host_tensor) {
        Tensor target = t;
        ops::copy_(target, host);
    }
    ++calls;
    ++small_calls;
    return true;
}

bool ShmGroup::small_reduce(const Tensor& in, const Tensor* out, ReduceOp op, int root) {
    const bool is_root = index_ == root;
    if (is_root && out == nullptr) return false;  // (the root always has one)
    const Tensor host_in = in.device().is_cpu() ? in : in.to(Device::cpu());
    Tensor host_out;
    if (is_root) host_out = out->device().is_cpu() ? *out : Tensor::empty(out->shape(), out->dtype(), Device::cpu());
    const ShmRecord r = small_record(OpKind::Reduce, in, true, op, root);
    const std::size_t element = dtype_size(in.dtype());
    const auto per_round = static_cast<std::int64_t>(shm_slot_bytes / element);
    const auto* src = static_cast<const std::byte*>(host_in.data());
    const std::int64_t count = in.numel();
    std::int64_t at = 0;
    do {
        const std::int64_t len = std::min(per_round, count - at);
        const std::size_t offset = static_cast<std::size_t>(at) * element;
        const std::size_t bytes = static_cast<std::size_t>(len) * element;
        if (!is_root && len > 0) std::memcpy(next_slot(bytes), src + offset, bytes);
        const std::uint32_t round = post(r);
        if (is_root) {
            wait_all(round);
            for (int m = 0; m < members_; ++m) {
                if (!same_call(record_of(m), r)) mismatch();
                sources_[static_cast<std::size_t>(m)] = m == index_ ? src + offset : slot_of(m, bytes);
            }
            std::byte* const target[] = {static_cast<std::byte*>(host_out.data()) + offset};
            if (len > 0) reduce_into(in.dtype(), sources_.data(), members_, target, 1, len, op);
        }
        at += len;
    } while (at < count);
    if (is_root && !out->device().is_cpu()) {
        Tensor target = *out;
        ops::copy_(target, host_out);
    }
    ++calls;
    ++small_calls;
    return true;
}

bool ShmGroup::barrier_call() {
    if (!small(0)) return false;
    ShmRecord r;
    r.eligible = 1;
    r.op = static_cast<std::uint8_t>(OpKind::Barrier);
    publish_small(r);
    ++calls;
    ++small_calls;
    return true;
}

std::optional<bool> ShmGroup::exchange_record(const void* mine, std::size_t bytes, std::uint64_t key, void* all,
                                              bool sleep_when_late) {
    if (!small(0) || bytes > shm_slot_bytes) return std::nullopt;
    sleep_when_late_ = sleep_when_late;
    struct Reset {
        bool& flag;
        ~Reset() { flag = false; }
    } reset{sleep_when_late_};
    ShmRecord r;
    r.bytes = static_cast<std::uint32_t>(bytes);
    r.eligible = 1;
    r.op = signature_exchange;
    // The whole record into the slot, its key beside the count: when every key is the same, no process reads another's
    // record (the line of the count is all that moves).
    std::memcpy(next_slot(bytes + shm_inline_bytes), mine, bytes);
    std::memcpy(mine_->rounds[(count_ + 1u) % shm_ring].data, &key, sizeof key);
    publish_small(r);
    ++exchanges;
    bool same = key != 0;
    for (int m = 0; m < members_ && same; ++m) {
        std::uint64_t theirs = 0;
        std::memcpy(&theirs, lines_[static_cast<std::size_t>(m)]->rounds[round_ % shm_ring].data, sizeof theirs);
        same = theirs == key;
    }
    if (same) return true;
    auto* dst = static_cast<std::byte*>(all);
    for (int m = 0; m < members_; ++m) {
        std::memcpy(dst + bytes * static_cast<std::size_t>(m), slot_of(m, bytes + shm_inline_bytes), bytes);
    }
    return false;
}

}  // namespace lockstep::detail
