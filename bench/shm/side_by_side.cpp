// Shared-memory collectives side by side: lockstep through the node's shared-memory arena, lockstep's MPI path on the
// very same tensors, the raw MPI C API on malloc'ed and on huge-page buffers, and two floors: a minimal shared-memory
// implementation of each op written for this benchmark (independent of lockstep's code) and one memcpy per process of
// the same bytes. One process run, every variant interleaved size by size, so that they share the machine's state.
//
//   LOCKSTEP_SHM_ARENA_SIZE=1GiB mpirun -n 2 build/bench/bench_shm [--op NAME]... [--max-bytes N]
//                                    [--note TEXT] [--out bench/shm/results/cpp_2.csv]
//
// CSV columns: ranks,op,bytes,variant,seconds_median,seconds_min,iterations,note.
//
// "bytes" is the op's whole buffer, as nccl-tests counts it (and as bench/shm/side_by_side.py does):
//   allreduce, broadcast   the buffer every rank holds (in place: MPI_IN_PLACE, allreduce_, broadcast_);
//   allgather              the gathered output; every rank contributes bytes / ranks;
//   reduce_scatter         the input every rank holds; every rank keeps bytes / ranks of the reduction.
// Every rank holds at least one float32 element per block, so at 4 B allgather and reduce_scatter move one float per
// rank (the note says so).
//
// Timing. A sample is one batch: MPI_Barrier, then k back-to-back calls of one variant, each rank's mean time per call,
// and the maximum of that over ranks (MPI_Allreduce MAX): a collective is done when its slowest rank is, and
// back-to-back calls are what a program makes. A barrier's exit skew (microseconds: more than a 4-byte collective)
// is spread over the k calls of a batch instead of being charged to every call, as a barrier before each call would.
// k is set per variant from the fastest of three timed rounds (each the slowest rank's, so that all ranks make the
// same calls) so that a batch lasts about 2 ms; from about 1 MiB up k = 1 and every sample is a single call. 15 batches
// up to 1 MiB, 9 up to 16 MiB, 5 at 64 MiB, 3 at 256 MiB. The variants take turns batch by batch in an order that
// rotates, so that slow drift of a shared machine hits them all alike. seconds_median: the median over batches;
// seconds_min: the fastest batch; iterations: k x batches.
//
// Each variant's result is checked once per size against the closed form before timing (note: check=ok or
// check=WRONG); the timed calls then run on zeros.

#include <lockstep.hpp>

#include <fcntl.h>
#include <fmt/core.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

void check_mpi(int rc, const char* what) {
    if (rc != MPI_SUCCESS) throw Error(fmt::format("bench_shm: {} failed (MPI error {})", what, rc));
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

std::size_t round_up(std::size_t n, std::size_t to) {
    return (n + to - 1) / to * to;
}

// The op's shape at one nominal size: `in` elements per rank in, `out` elements per rank out (0: in place).
struct Shape {
    std::size_t in = 0, out = 0, block = 0;  // block: a rank's share (allgather, reduce_scatter)
};
Shape shape_of(const std::string& op, std::size_t bytes, int n) {
    const std::size_t count = std::max<std::size_t>(1, bytes / 4);
    const std::size_t block = std::max<std::size_t>(1, count / static_cast<std::size_t>(n));
    if (op == "allgather") return {block, block * static_cast<std::size_t>(n), block};
    if (op == "reduce_scatter") return {block * static_cast<std::size_t>(n), block, block};
    if (op == "reduce") return {count, count, 0};  // out of place, to rank 0
    return {count, 0, 0};
}

// ------------------------------------------------------------------------------------------------ buffers

// A private buffer from malloc, as a program written against MPI allocates it.
struct MallocBuffer {
    std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
    explicit MallocBuffer(std::size_t elems)
        : p(static_cast<float*>(std::malloc(std::max<std::size_t>(elems, 1) * 4)), &std::free) {
        if (!p) throw Error("bench_shm: malloc failed");
    }
    float* data() const noexcept { return p.get(); }
};

// Kilobytes of [p, p + 1) 's mapping backed by transparent huge pages, from /proc/self/smaps (-1 if not found).
long anon_huge_kb(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    while (std::getline(smaps, line)) {
        std::uintptr_t lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
            inside = addr >= lo && addr < hi;
        } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
            return std::strtol(line.c_str() + 14, nullptr, 10);
        }
    }
    return -1;
}

// A private buffer on huge pages: MAP_HUGETLB from the reserved pool where there is one, else an anonymous mapping
// aligned to 2 MiB with madvise(MADV_HUGEPAGE) (transparent huge pages in "madvise" mode). `how` says which.
class HugePageBuffer {
public:
    explicit HugePageBuffer(std::size_t elems) {
        constexpr std::size_t huge = std::size_t{2} << 20;
        bytes_ = round_up(std::max<std::size_t>(elems, 1) * 4, huge);
        void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (p != MAP_FAILED) {
            how_ = "MAP_HUGETLB";
            base_ = p;
            mapped_ = bytes_;
            data_ = static_cast<float*>(p);
            return;
        }
        // Over-map by 2 MiB so that the buffer can start on a huge-page boundary.
        mapped_ = bytes_ + huge;
        p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw Error("bench_shm: mmap of a huge-page buffer failed");
        base_ = p;
        data_ = reinterpret_cast<float*>(round_up(reinterpret_cast<std::uintptr_t>(p), huge));
        how_ = madvise(data_, bytes_, MADV_HUGEPAGE) == 0 ? "MADV_HUGEPAGE" : "madvise failed: 4 KiB pages";
    }
    ~HugePageBuffer() { munmap(base_, mapped_); }
    HugePageBuffer(const HugePageBuffer&) = delete;
    HugePageBuffer& operator=(const HugePageBuffer&) = delete;
    float* data() const noexcept { return data_; }
    // After first touch: which mechanism, and how much of the buffer transparent huge pages back.
    std::string describe() const {
        if (how_ != "MADV_HUGEPAGE") return how_;
        return fmt::format("MADV_HUGEPAGE {} of {} KiB on THP", anon_huge_kb(data_), bytes_ >> 10);
    }

private:
    void* base_ = nullptr;
    float* data_ = nullptr;
    std::size_t bytes_ = 0, mapped_ = 0;
    std::string how_;
};

// ------------------------------------------------------------------------------------------------ the floor program
//
// The minimal shared-memory collectives, written for this benchmark and sharing nothing with lockstep: the processes
// of the node map one POSIX shared-memory object holding a barrier and, per rank, an input and an output region. Each
// call is: barrier (every input is ready), the work, barrier (every output is complete and inputs may be reused). The
// work splits the elements evenly: rank r handles slice r of every buffer.
//   allreduce (in place)  rank r sums slice r of all n buffers and writes the sum into slice r of all n buffers
//   reduce_scatter        rank r sums block r of all n inputs into its own output
//   allgather             rank r copies every rank's input into its own output (a pull)
//   broadcast             every rank but the root copies the root's buffer into its own
// The barrier is a central sense-reversing one on two atomics in the shared object; waiting spins briefly, then
// yields the core (so that oversubscribed runs still progress).

struct alignas(64) SharedBarrier {
    std::atomic<std::uint32_t> arrived{0};
    alignas(64) std::atomic<std::uint32_t> generation{0};

    void wait(int n) noexcept {
        const std::uint32_t gen = generation.load(std::memory_order_acquire);
        if (arrived.fetch_add(1, std::memory_order_acq_rel) == static_cast<std::uint32_t>(n - 1)) {
            arrived.store(0, std::memory_order_relaxed);
            generation.store(gen + 1, std::memory_order_release);
            return;
        }
        for (int spins = 0; generation.load(std::memory_order_acquire) == gen; ++spins) {
            if (spins > 2000) sched_yield();
        }
    }
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

class FloorSegment {
public:
    // Collective over `node` (every process of one node): each rank gets `in` + `out` floats that every rank can
    // address; `tag` makes the object's name unique within the run (one segment per op and size).
    FloorSegment(MPI_Comm node, std::size_t in, std::size_t out, const std::string& tag) {
        check_mpi(MPI_Comm_rank(node, &rank_), "MPI_Comm_rank");
        check_mpi(MPI_Comm_size(node, &n_), "MPI_Comm_size");
        long pid = static_cast<long>(getpid());
        check_mpi(MPI_Bcast(&pid, 1, MPI_LONG, 0, node), "MPI_Bcast");
        const std::string name = fmt::format("/lockstep-bench-shm-floor-{}-{}", pid, tag);
        in_bytes_ = round_up(std::max<std::size_t>(in, 1) * 4, 4096);
        out_bytes_ = round_up(out * 4, 4096);
        segment_ = in_bytes_ + out_bytes_;
        bytes_ = 4096 + segment_ * static_cast<std::size_t>(n_);
        int fd = -1;
        int failed = 0;
        if (rank_ == 0) {
            fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
            failed = fd < 0 || ftruncate(fd, static_cast<off_t>(bytes_)) != 0;
        }
        check_mpi(MPI_Bcast(&failed, 1, MPI_INT, 0, node), "MPI_Bcast");
        if (failed) throw Error(fmt::format("bench_shm: shm_open/ftruncate of {} failed", name));
        if (rank_ != 0) fd = shm_open(name.c_str(), O_RDWR, 0600);
        void* p = fd < 0 ? MAP_FAILED : mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
        int bad = p == MAP_FAILED;
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, node), "MPI_Allreduce");
        if (rank_ == 0) shm_unlink(name.c_str());  // every process has it mapped (or failed): nothing stays in /dev/shm
        if (bad) {
            if (p != MAP_FAILED) munmap(p, bytes_);
            throw Error(fmt::format("bench_shm: mapping {} failed", name));
        }
        base_ = static_cast<char*>(p);
        if (rank_ == 0) new (base_) SharedBarrier();
        check_mpi(MPI_Barrier(node), "MPI_Barrier");
    }
    ~FloorSegment() {
        if (base_) munmap(base_, bytes_);
    }
    FloorSegment(const FloorSegment&) = delete;
    FloorSegment& operator=(const FloorSegment&) = delete;

    float* in(int r) const noexcept {
        return reinterpret_cast<float*>(base_ + 4096 + segment_ * static_cast<std::size_t>(r));
    }
    float* out(int r) const noexcept { return reinterpret_cast<float*>(reinterpret_cast<char*>(in(r)) + in_bytes_); }
    void barrier() const noexcept { reinterpret_cast<SharedBarrier*>(base_)->wait(n_); }
    int rank() const noexcept { return rank_; }
    int size() const noexcept { return n_; }

private:
    char* base_ = nullptr;
    std::size_t bytes_ = 0, segment_ = 0, in_bytes_ = 0, out_bytes_ = 0;
    int rank_ = 0, n_ = 1;
};

// Sum of `n` sources over [0, len), written to every destination: chunks of 2048 floats accumulate in a local buffer
// (in L1), so that each source is read once and each destination written once.
void sum_to_all(const std::vector<const float*>& src, const std::vector<float*>& dst, std::size_t len) {
    constexpr std::size_t chunk = 2048;
    alignas(64) float acc[chunk];
    for (std::size_t off = 0; off < len; off += chunk) {
        const std::size_t m = std::min(chunk, len - off);
        std::memcpy(acc, src[0] + off, m * 4);
        for (std::size_t j = 1; j < src.size(); ++j) {
            const float* __restrict s = src[j] + off;
            for (std::size_t i = 0; i < m; ++i) acc[i] += s[i];
        }
        for (float* d : dst) std::memcpy(d + off, acc, m * 4);
    }
}

std::function<void()> floor_call(const std::string& op, const FloorSegment& seg, const Shape& s) {
    const int n = seg.size(), r = seg.rank();
    if (op == "allreduce") {
        const std::size_t lo = s.in * static_cast<std::size_t>(r) / n, hi = s.in * static_cast<std::size_t>(r + 1) / n;
        std::vector<const float*> src;
        std::vector<float*> dst;
        for (int j = 0; j < n; ++j) {
            src.push_back(seg.in(j) + lo);
            dst.push_back(seg.in(j) + lo);
        }
        return [&seg, src, dst, len = hi - lo] {
            seg.barrier();
            sum_to_all(src, dst, len);
            seg.barrier();
        };
    }
    if (op == "reduce_scatter") {
        std::vector<const float*> src;
        for (int j = 0; j < n; ++j) src.push_back(seg.in(j) + s.block * static_cast<std::size_t>(r));
        std::vector<float*> dst = {seg.out(r)};
        return [&seg, src, dst, len = s.block] {
            seg.barrier();
            sum_to_all(src, dst, len);
            seg.barrier();
        };
    }
    if (op == "reduce") {  // each process sums its slice of every input into rank 0's output
        const std::size_t lo = s.in * static_cast<std::size_t>(r) / n, hi = s.in * static_cast<std::size_t>(r + 1) / n;
        std::vector<const float*> src;
        for (int j = 0; j < n; ++j) src.push_back(seg.in(j) + lo);
        std::vector<float*> dst = {seg.out(0) + lo};
        return [&seg, src, dst, len = hi - lo] {
            seg.barrier();
            sum_to_all(src, dst, len);
            seg.barrier();
        };
    }
    if (op == "allgather") {
        return [&seg, n, r, block = s.block] {
            seg.barrier();
            for (int j = 0; j < n; ++j)
                std::memcpy(seg.out(r) + block * static_cast<std::size_t>(j), seg.in(j), block * 4);
            seg.barrier();
        };
    }
    return [&seg, r, count = s.in] {  // broadcast from rank 0
        seg.barrier();
        if (r != 0) std::memcpy(seg.in(r), seg.in(0), count * 4);
        seg.barrier();
    };
}

// ------------------------------------------------------------------------------------------------ the variants

// Buffers of one variant: in (and out where the op has one), and how to call the op on them.
struct Variant {
    std::string name;
    float* in = nullptr;
    float* out = nullptr;
    std::function<void()> call;
    std::function<void()> before_batch = [] {};  // e.g. switch the communicator's shared-memory path
    std::function<const float*()> result;        // where the result is, when not in `out` (or `in`)
    std::string note;
    bool has_data = true;  // false: the memcpy floor, whose result is not the op's
};

std::function<void()> raw_call(const std::string& op, float* in, float* out, const Shape& s, MPI_Comm comm) {
    const int in_count = static_cast<int>(s.in), block = static_cast<int>(s.block);
    if (op == "allreduce")
        return [=] { check_mpi(MPI_Allreduce(MPI_IN_PLACE, in, in_count, MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce"); };
    if (op == "broadcast") return [=] { check_mpi(MPI_Bcast(in, in_count, MPI_FLOAT, 0, comm), "MPI_Bcast"); };
    if (op == "reduce")
        return [=] { check_mpi(MPI_Reduce(in, out, in_count, MPI_FLOAT, MPI_SUM, 0, comm), "MPI_Reduce"); };
    if (op == "allgather")
        return [=] { check_mpi(MPI_Allgather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, comm), "MPI_Allgather"); };
    return [=] {
        check_mpi(MPI_Reduce_scatter_block(in, out, block, MPI_FLOAT, MPI_SUM, comm), "MPI_Reduce_scatter_block");
    };
}

std::function<void()> lockstep_call(const std::string& op, Communicator& c, Tensor& in, Tensor& out) {
    if (op == "allreduce") return [&c, &in] { c.allreduce_(in); };
    if (op == "broadcast") return [&c, &in] { c.broadcast_(in, 0); };
    if (op == "allgather") return [&c, &in, &out] { c.allgather_into(in, out); };
    if (op == "reduce") return [&c, &in, &out] { out = c.reduce(in, ReduceOp::Sum, 0); };  // out: the result tensor
    return [&c, &in, &out] { c.reduce_scatter_into(in, out); };
}

// Closed-form inputs and this rank's expected result (the buffer itself for allreduce and broadcast, the output
// otherwise): small integers, exact in float32. Built once per size, shared by the variants.
struct Reference {
    std::vector<float> input, expected;
    bool compared = true;  // false: this rank gets no result (a reduce's other ranks)
};
Reference reference_of(const std::string& op, int rank, int n, const Shape& s) {
    Reference ref{std::vector<float>(s.in), std::vector<float>(s.out ? s.out : s.in)};
    ref.compared = op != "reduce" || rank == 0;
    const bool bcast = op == "broadcast", gather = op == "allgather", scatter = op == "reduce_scatter";
    for (std::size_t i = 0; i < s.in; ++i) {
        ref.input[i] = bcast    ? (rank == 0 ? static_cast<float>(i % 251 + 1) : -1.0f)
                       : gather ? static_cast<float>(rank * 1000 + static_cast<int>(i % 97))
                                : static_cast<float>(rank + 1 + static_cast<int>(i % 13));
    }
    for (std::size_t i = 0; i < ref.expected.size(); ++i) {
        const std::size_t global = scatter ? s.block * static_cast<std::size_t>(rank) + i : i;
        ref.expected[i] =
            bcast    ? static_cast<float>(i % 251 + 1)
            : gather ? static_cast<float>(static_cast<int>(i / s.block) * 1000 + static_cast<int>(i % s.block % 97))
                     : static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(global % 13));
    }
    return ref;
}

// Runs one call on the reference inputs and compares; true on every rank when every rank's result is right.
bool check(const Reference& ref, Variant& v, const Shape& s, MPI_Comm comm) {
    std::memcpy(v.in, ref.input.data(), s.in * 4);
    if (s.out) std::fill(v.out, v.out + s.out, -7.0f);
    v.before_batch();
    v.call();
    const float* result = v.result ? v.result() : s.out ? v.out : v.in;
    int wrong = ref.compared && std::memcmp(result, ref.expected.data(), ref.expected.size() * 4) != 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
    return !wrong;
}

struct Sample {
    std::vector<std::vector<double>> batches;  // [variant][batch]: slowest rank's mean seconds per call
    std::vector<int> calls_per_batch;          // [variant]
    std::vector<std::uint64_t> calls_made;     // [variant]: warm-up and calibration included
};

Sample measure(MPI_Comm comm, std::vector<Variant>& variants, int batches) {
    Sample sample;
    for (auto& v : variants) {
        v.before_batch();
        v.call();  // after the check's call: caches, connections
        // k: a batch of about 2 ms, from the fastest of up to three timed rounds (1 call, then 16 calls while one
        // takes under 1 ms), so that one disturbed round does not leave a variant with single-call batches. Each
        // round counts at the slowest rank, so that every rank makes the same calls.
        double per_call = 1e30;
        std::uint64_t made = 1;
        for (int round = 0; round < 3; ++round) {
            const int calls = per_call < 1e-3 ? 16 : 1;
            made += static_cast<std::uint64_t>(calls);
            check_mpi(MPI_Barrier(comm), "MPI_Barrier");
            const auto w0 = std::chrono::steady_clock::now();
            for (int i = 0; i < calls; ++i) v.call();
            double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() / calls;
            check_mpi(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
            per_call = std::min(per_call, t);
            if (per_call >= 2e-3) break;  // k = 1 whatever another round would say
        }
        sample.calls_per_batch.push_back(static_cast<int>(std::clamp(0.002 / per_call, 1.0, 2000.0)));
        sample.calls_made.push_back(made + static_cast<std::uint64_t>(sample.calls_per_batch.back()) * batches);
    }
    sample.batches.resize(variants.size());
    for (int b = 0; b < batches; ++b) {
        for (std::size_t j = 0; j < variants.size(); ++j) {
            const std::size_t k = (j + static_cast<std::size_t>(b)) % variants.size();
            Variant& v = variants[k];
            const int calls = sample.calls_per_batch[k];
            v.before_batch();
            check_mpi(MPI_Barrier(comm), "MPI_Barrier");
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < calls; ++i) v.call();
            double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
            check_mpi(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
            sample.batches[k].push_back(t);
        }
    }
    return sample;
}

std::string size_text(std::size_t bytes) {
    if (bytes >= (std::size_t{1} << 20)) return fmt::format("{} MiB", bytes >> 20);
    if (bytes >= (std::size_t{1} << 10)) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{} B", bytes);
}

struct Context {
    Communicator& comm;
    Communicator& debug;                // the same processes in debug mode (the signature exchange before every call)
    MPI_Comm raw_comm = MPI_COMM_NULL;  // the raw variants' and the timing's own communicator
    MPI_Comm node = MPI_COMM_NULL;
    bool one_node = true;
    int rank = 0, n = 1;
    bool quick = false;
    std::string note;    // added to every row
    std::string suffix;  // added to every variant's name (_mt: MPI at MPI_THREAD_MULTIPLE)
    bool verbose = false;
};

// Every variant of one op at one size; returns the CSV rows. Buffers live only for this call.
std::string run_size(const Context& cx, const std::string& op, std::size_t bytes) {
    const Shape s = shape_of(op, bytes, cx.n);
    const int rank = cx.rank, n = cx.n;
    Communicator& comm = cx.comm;
    const auto started = std::chrono::steady_clock::now();
    const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    std::string size_note;
    if (s.block && s.block * 4 * static_cast<std::size_t>(n) != bytes) {
        size_note =
            fmt::format("{} float per rank ({} B in all); ", s.block, s.block * 4 * static_cast<std::size_t>(n));
    }

    Tensor t_in = Tensor::empty({static_cast<std::int64_t>(s.in)});
    Tensor t_out = Tensor::empty({static_cast<std::int64_t>(std::max<std::size_t>(s.out, 1))});
    MallocBuffer m_in(s.in), m_out(s.out);
    HugePageBuffer h_in(s.in), h_out(std::max<std::size_t>(s.out, 1));
    const std::size_t copy_elems = std::max(s.in, s.out);
    MallocBuffer c_src(copy_elems), c_dst(copy_elems);
    std::optional<FloorSegment> floor;
    if (cx.one_node) floor.emplace(cx.node, s.in, s.out, fmt::format("{}-{}", op, bytes));

    std::vector<Variant> variants;
    variants.push_back(
        {"mpi_malloc", m_in.data(), m_out.data(), raw_call(op, m_in.data(), m_out.data(), s, cx.raw_comm)});
    variants.push_back(
        {"mpi_hugepage", h_in.data(), h_out.data(), raw_call(op, h_in.data(), h_out.data(), s, cx.raw_comm)});
    Variant arena{"lockstep_shm", t_in.data<float>(), t_out.data<float>(), lockstep_call(op, comm, t_in, t_out)};
    arena.before_batch = [&comm] { comm.set_shared_memory(true); };
    variants.push_back(arena);
    Variant via_mpi{"lockstep_mpi", t_in.data<float>(), t_out.data<float>(), lockstep_call(op, comm, t_in, t_out)};
    via_mpi.before_batch = [&comm] { comm.set_shared_memory(false); };
    variants.push_back(via_mpi);
    // Debug mode on the same tensors (through the arena where lockstep_shm goes): what leaving it on costs. Up to
    // 1 MiB, where the exchange is a visible part of a call.
    if (bytes <= (std::size_t{1} << 20)) {
        variants.push_back(
            {"lockstep_debug", t_in.data<float>(), t_out.data<float>(), lockstep_call(op, cx.debug, t_in, t_out)});
    }
    // lockstep's reduce returns its result: a tensor of its own on rank 0 (no copy into t_out).
    Tensor t_reduced;
    if (op == "reduce") {
        for (auto& v : variants) {
            if (!v.name.starts_with("lockstep_")) continue;
            Communicator& c = v.name == "lockstep_debug" ? cx.debug : comm;
            v.call = lockstep_call(op, c, t_in, t_reduced);
            v.result = [&t_reduced]() -> const float* {
                return t_reduced.defined() ? t_reduced.data<float>() : nullptr;
            };
        }
    }
    // A/A: raw MPI a second time, on the same buffers: its ratio to mpi_malloc is the noise of the row. Up to 16 MiB
    // (above, every call costs the run seconds).
    if (bytes <= (std::size_t{16} << 20)) {
        variants.push_back(
            {"mpi_malloc_again", m_in.data(), m_out.data(), raw_call(op, m_in.data(), m_out.data(), s, cx.raw_comm)});
    }
    if (floor) variants.push_back({"shm_floor", floor->in(rank), floor->out(rank), floor_call(op, *floor, s)});
    // One memcpy per process of the op's bytes, every process at once (as every process works in a collective).
    const std::size_t copy_bytes = copy_elems * 4;
    Variant copy{"memcpy", c_src.data(), c_dst.data(),
                 [src = c_src.data(), dst = c_dst.data(), copy_bytes] { std::memcpy(dst, src, copy_bytes); }};
    copy.has_data = false;
    std::memset(c_src.data(), 0, copy_bytes);
    std::memset(c_dst.data(), 0, copy_bytes);
    variants.push_back(copy);

    // Check each variant once (this also maps every page), and whether the arena variant took the arena.
    const Reference ref = reference_of(op, rank, n, s);
    for (auto& v : variants) {
        if (!v.has_data) continue;
        const std::uint64_t shm_before = comm.stats().shm_calls, small_before = comm.stats().small_calls;
        v.note = check(ref, v, s, cx.raw_comm) ? "check=ok" : "check=WRONG";
        if (v.name == "lockstep_shm") {
            v.note += fmt::format("; tensors {}{} the arena", t_in.in_shared_memory() ? "in" : "NOT in",
                                  s.out ? (t_out.in_shared_memory() ? " (out: in)" : " (out: NOT in)") : "");
            v.note += comm.stats().small_calls > small_before ? "; path=small"
                      : comm.stats().shm_calls > shm_before   ? "; path=arena"
                                                              : "; path=MPI";
        }
        std::fill(v.in, v.in + s.in, 0.0f);
        if (s.out) std::fill(v.out, v.out + s.out, 0.0f);
    }
    variants[1].note += "; " + h_in.describe();
    const double setup_seconds = seconds_since(started);

    const int batches = cx.quick                           ? 3
                        : bytes <= (std::size_t{1} << 20)  ? 15
                        : bytes <= (std::size_t{16} << 20) ? 9
                        : bytes <= (std::size_t{64} << 20) ? 5
                                                           : 3;
    const std::uint64_t shm_start = comm.stats().shm_calls;
    const auto timing_started = std::chrono::steady_clock::now();
    const Sample sample = measure(cx.raw_comm, variants, batches);
    const double timing_seconds = seconds_since(timing_started);
    const std::uint64_t shm_timed = comm.stats().shm_calls - shm_start;
    std::uint64_t arena_calls = 0;
    for (std::size_t k = 0; k < variants.size(); ++k) {
        if (variants[k].name == "lockstep_shm") arena_calls = sample.calls_made[k];
    }
    std::string rows;
    for (std::size_t k = 0; k < variants.size(); ++k) {
        Variant& v = variants[k];
        if (v.name == "lockstep_shm") v.note += fmt::format("; shm_calls +{} of {}", shm_timed, arena_calls);
        if (v.name == "lockstep_mpi" && shm_timed > arena_calls) v.note += "; WARNING: arena used while switched off";
        const auto& b = sample.batches[k];
        const double med = median(b), fastest = *std::min_element(b.begin(), b.end());
        if (k != 0) {  // the median of the per-batch ratios to mpi_malloc (variant 0), each pair from the same round
            std::vector<double> pairs;
            for (std::size_t i = 0; i < b.size(); ++i) pairs.push_back(b[i] / sample.batches[0][i]);
            v.note += fmt::format("{}paired ratio {:.3f}", v.note.empty() ? "" : "; ", median(pairs));
        }
        rows += fmt::format("{},{},{},{},{:.9e},{:.9e},{},\"{}{}{}\"\n", n, op, bytes, v.name + cx.suffix, med, fastest,
                            sample.calls_per_batch[k] * batches, cx.note, size_note, v.note);
        if (cx.verbose) {
            std::fprintf(stderr, "%-14s %8s %-16s %12.3f us  %s\n", op.c_str(), size_text(bytes).c_str(),
                         v.name.c_str(), med * 1e6, v.note.c_str());
        }
    }
    if (cx.verbose) {
        std::fprintf(stderr, "%-14s %8s took %.1f s: %.1f s allocation and checks, %.1f s timing\n", op.c_str(),
                     size_text(bytes).c_str(), seconds_since(started), setup_seconds, timing_seconds);
    }
    return rows;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> all_ops = {"allreduce", "broadcast", "allgather", "reduce_scatter", "reduce"};
    std::vector<std::string> ops;
    std::vector<std::size_t> sizes = {4,        64,       256,     1 << 10, 4 << 10,  8 << 10,  16 << 10,
                                      32 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, std::size_t{256} << 20};
    std::size_t max_bytes = std::size_t{256} << 20;
    std::string out_path = "bench/shm/results/cpp.csv";
    std::string note;
    bool quick = false;
    CLI::App app{
        "Shared-memory collectives side by side: lockstep through the arena, lockstep's MPI path, raw MPI on malloc "
        "and huge pages, a minimal shared-memory floor and memcpy (run under mpirun; writes CSV)"};
    app.add_option("--op", ops, "Only this op (repeatable)")->check(CLI::IsMember(all_ops));
    app.add_option("--max-bytes", max_bytes, "Largest size in bytes")->capture_default_str();
    std::size_t min_bytes = 0;
    app.add_option("--min-bytes", min_bytes, "Smallest size in bytes")->capture_default_str();
    app.add_option("--out", out_path, "CSV file, written by the main process")->capture_default_str();
    app.add_option("--note", note, "Text put at the start of every row's note (e.g. oversubscribed)");
    app.add_flag("--quick", quick, "3 batches per size");
    std::string thread_level = "multiple";
    app.add_option("--thread-level", thread_level,
                   "The MPI thread level this program initialises MPI at (the raw variants' and lockstep's)")
        ->check(CLI::IsMember({"single", "multiple"}))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    int provided = 0;
    check_mpi(
        MPI_Init_thread(&argc, &argv, thread_level == "single" ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE, &provided),
        "MPI_Init_thread");
    if (!note.empty()) note += "; ";
    note += "thread=" + thread_level;
    if (ops.empty()) ops = all_ops;
    std::erase_if(sizes, [&](std::size_t b) { return b > max_bytes || b < min_bytes; });

    std::optional<ScopedRuntime> scoped(std::in_place);  // ended before this program's MPI_Finalize
    ScopedRuntime& rt = *scoped;
    {
        // Debug mode and the watchdog off: this measures the data path (bench_collectives measures those).
        Communicator comm(rt->comm(), {.debug = false, .timeout = 0.0});
        Communicator debug(rt->comm(), {.debug = true, .timeout = 0.0});
        Context cx{comm, debug};
        cx.n = rt->identity().size;
        cx.rank = rt->identity().rank;
        cx.quick = quick;
        cx.note = note.empty() ? "" : note + "; ";
        cx.suffix = thread_level == "multiple" ? "_mt" : "";
        cx.verbose = rt->identity().is_main_process();
        check_mpi(MPI_Comm_dup(rt->comm(), &cx.raw_comm), "MPI_Comm_dup");
        check_mpi(MPI_Comm_split_type(rt->comm(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &cx.node),
                  "MPI_Comm_split_type");
        int node_size = 0;
        check_mpi(MPI_Comm_size(cx.node, &node_size), "MPI_Comm_size");
        cx.one_node = node_size == cx.n;

        const SharedMemoryStatus status = shared_memory_status();
        if (cx.verbose) {
            std::fprintf(
                stderr, "%s\n",
                fmt::format("bench_shm: {} ranks on {}; arena {} (mode {}, {} MiB per process, threshold {} B, "
                            "{} local processes, {}){}{}; shared memory on the communicator: {}",
                            cx.n, cx.one_node ? "one node" : "several nodes", status.active ? "active" : "NOT active",
                            shm_mode_name(status.mode), status.arena_bytes >> 20, status.threshold_bytes,
                            status.local_processes, status.backing, status.reason.empty() ? "" : "; ", status.reason,
                            comm.shared_memory())
                    .c_str());
        }
        std::string csv = "ranks,op,bytes,variant,seconds_median,seconds_min,iterations,note\n";
        for (const std::string& op : ops) {
            for (const std::size_t bytes : sizes) {
                csv += run_size(cx, op, bytes);
                empty_all_caches();  // the next size starts from an empty arena
            }
        }
        check_mpi(MPI_Comm_free(&cx.node), "MPI_Comm_free");
        check_mpi(MPI_Comm_free(&cx.raw_comm), "MPI_Comm_free");
        if (cx.verbose) {
            const std::filesystem::path path(out_path);
            if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
            std::ofstream(path) << csv;
            std::fprintf(stderr, "bench_shm: written to %s\n", out_path.c_str());
        }
    }
    scoped.reset();
    MPI_Finalize();
    return 0;
}
