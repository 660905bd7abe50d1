// Jobs for tests/collectives/shm_test.py: the shared-memory arena under settings and failures that one Boost.Test
// program cannot cover (each needs its own environment or ends the job). Every process prints "FAIL: ..." for a check
// that fails, and the job exits 1 when any process failed one.
//
//   shm_program hash     inexact float sums and the other ops through the arena (the default threshold: 64 KiB and
//                        up): prints "hash <case> <hash of rank 0> ... <hash of rank n-1>" lines on rank 0, which must
//                        be the same run after run; checks that every process got the same bits, that the MPI path
//                        is close, and that the threshold decides which tensors lie in the arena.
//   shm_program skip     the last rank leaves the loop before the third allreduce of arena tensors; the others wait on
//                        the arena's flags until the watchdog reports.
//   shm_program kill     the last rank is killed (SIGKILL) while it waits in the third allreduce.
//   shm_program small_skip, small_kill
//                        the same with an allreduce of 16 bytes, through the small-message path (shm_small_max).
// Every mode but the small_* ones runs with LOCKSTEP_SHM_SMALL_MAX=0 unless the environment sets it: they are about
// the arena's own path, which the small-message path would otherwise take over below 32 KiB.
//   shm_program status   prints the arena's status on every rank, then an allreduce (which path, right result).
//   shm_program exhaust  with a small LOCKSTEP_SHM_ARENA_SIZE: blocks beyond the segment come from private memory.
//   shm_program limit    with LOCKSTEP_CPU_MEMORY_LIMIT below the arena size: the cap still applies to arena blocks.
#include <lockstep.hpp>
#include <lockstep/shared_memory.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace lockstep;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    if (ok) return;
    ++failures;
    std::printf("FAIL: rank %d: %s\n", Communicator::world().rank(), what.c_str());
    std::fflush(stdout);
}

std::vector<std::uint8_t> bytes_of(const Tensor& t) {
    std::vector<std::uint8_t> b(t.nbytes());
    if (!b.empty()) t.copy_to_host(b.data());
    return b;
}

std::uint64_t fnv1a(const Tensor& t) {
    std::uint64_t h = 14695981039346656037ull;
    for (std::uint8_t x : bytes_of(t)) {
        h ^= x;
        h *= 1099511628211ull;
    }
    return h;
}

std::vector<double> values(const Tensor& t) {
    return ops::cast(t, DType::Float64).to_vector<double>();
}

// The /dev/shm object that holds `p`, as /proc/self/maps names it ("" when none).
std::string mapping_of(const void* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream in(line);
        in >> std::hex >> lo >> dash >> hi;
        if (address >= lo && address < hi) {
            const auto at = line.find("/dev/shm/");
            return at == std::string::npos ? line : line.substr(at);
        }
    }
    return "";
}

// Prints the arena object's name (each process's view), for the driver to look for in /dev/shm after the job.
void print_arena_name(const Tensor& in_arena) {
    std::printf("arena-mapping rank %d: %s\n", Communicator::world().rank(), mapping_of(in_arena.data()).c_str());
    std::fflush(stdout);
}

// Noisy values whose float sums round: element i of process r.
Tensor noisy(DType dtype, std::int64_t numel, int r, double scale = 100.0, double offset = 0.0) {
    std::vector<double> v(static_cast<std::size_t>(numel));
    for (std::int64_t i = 0; i < numel; ++i)
        v[static_cast<std::size_t>(i)] = offset + std::sin(0.37 * double(i) + 1.3 * r) * scale + 0.001 * r;
    return ops::cast(Tensor::from_data<double>(v, {numel}), dtype);
}

int hash_job() {
    Communicator& comm = Communicator::world();
    const int n = comm.size(), me = comm.rank();
    const SharedMemoryStatus status = shared_memory_status();
    check(status.active, "the arena is not active: " + status.reason);
    check(status.threshold_bytes == 64 * 1024, "the default threshold is not 64 KiB");

    // The threshold: 64 KiB and more in the arena, less not. (The allocator rounds requests below 1 MiB up to 512
    // bytes and compares the block with the threshold: 64 KiB - 512 bytes is the largest tensor that stays private.)
    const Tensor small = Tensor::ones({16});
    const Tensor below = Tensor::ones({16256});
    const Tensor at = Tensor::ones({16384});
    check(!small.in_shared_memory(), "a 64-byte tensor is in the arena");
    check(!below.in_shared_memory(), "a tensor of 64 KiB - 512 bytes is in the arena");
    check(at.in_shared_memory(), "a tensor of 64 KiB is not in the arena");
    print_arena_name(at);
    std::uint64_t shm = comm.stats().shm_calls;
    check(values(comm.allreduce(small)) == std::vector<double>(16, n), "allreduce of a small tensor");
    check(comm.stats().shm_calls == shm, "a tensor below the threshold went through the arena");
    check(values(comm.allreduce(at)) == std::vector<double>(16384, n), "allreduce of a 64 KiB tensor");
    check(comm.stats().shm_calls == shm + 1, "a tensor of 64 KiB did not go through the arena");

    struct Job {
        std::string name;
        bool same_everywhere;  // the result is the same on every process
        double tolerance;      // of the MPI path's result, relative to the largest magnitude
        std::function<Tensor()> call;
    };
    const Tensor f32 = noisy(DType::Float32, 100003, me);
    const Tensor near_one = noisy(DType::Float32, 100003, me, 0.01, 1.0);
    const Tensor f64 = noisy(DType::Float64, 70001, me);
    const Tensor f16 = noisy(DType::Float16, 100003, me, 10.0);
    const Tensor bf16 = noisy(DType::BFloat16, 100003, me, 10.0);
    const Tensor i32 = noisy(DType::Int32, 100003, me, 1e6);
    const Tensor rows = noisy(DType::Float32, 25001 * n, me);
    const Tensor rows_bf16 = noisy(DType::BFloat16, 40001 * n, me, 10.0);
    const Tensor part = noisy(DType::Float32, 25001, me);
    const std::vector<Job> jobs = {
        {"allreduce_float32_sum", true, 1e-6, [&] { return comm.allreduce(f32); }},
        {"allreduce_float32_mean", true, 1e-6, [&] { return comm.allreduce(f32, ReduceOp::Mean); }},
        {"allreduce_float32_prod", true, 1e-6, [&] { return comm.allreduce(near_one, ReduceOp::Prod); }},
        {"allreduce_float32_max", true, 0.0, [&] { return comm.allreduce(f32, ReduceOp::Max); }},
        {"allreduce_float64_sum", true, 1e-14, [&] { return comm.allreduce(f64); }},
        {"allreduce_float16_sum", true, 2e-3, [&] { return comm.allreduce(f16); }},
        {"allreduce_bfloat16_mean", true, 1e-2, [&] { return comm.allreduce(bf16, ReduceOp::Mean); }},
        {"allreduce_int32_sum", true, 0.0, [&] { return comm.allreduce(i32); }},
        {"allreduce__float32_sum", true, 1e-6,
         [&] {
             Tensor y = f32.clone();
             comm.allreduce_(y);
             return y;
         }},
        {"reduce_scatter_float32_sum", false, 1e-6, [&] { return comm.reduce_scatter(rows); }},
        {"reduce_scatter_bfloat16_sum", false, 1e-2, [&] { return comm.reduce_scatter(rows_bf16); }},
        {"reduce_float32_sum_to_0", false, 1e-6, [&] { return comm.reduce(f32, ReduceOp::Sum, 0); }},
        {"allgather_float32", true, 0.0, [&] { return comm.allgather(part); }},
        {"broadcast_float32_from_last", true, 0.0, [&] { return comm.broadcast(f32, n - 1); }},
    };
    for (const Job& job : jobs) {
        shm = comm.stats().shm_calls;
        const Tensor result = job.call();
        check(comm.stats().shm_calls == shm + 1, job.name + " did not go through the arena");
        const std::uint64_t h = result.defined() ? fnv1a(result) : 0;
        std::vector<std::uint64_t> all(static_cast<std::size_t>(n));
        MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
        if (job.same_everywhere) {
            for (std::uint64_t x : all) check(x == h, job.name + ": the processes hold different bits");
        }
        if (me == 0) {
            std::printf("hash %s", job.name.c_str());
            for (std::uint64_t x : all) std::printf(" %016" PRIx64, x);
            std::printf("\n");
            std::fflush(stdout);
        }
        comm.set_shared_memory(false);
        const Tensor by_mpi = job.call();
        comm.set_shared_memory(true);
        if (!result.defined()) continue;
        const std::vector<double> got = values(result), want = values(by_mpi);
        check(got.size() == want.size(), job.name + ": the MPI path gives another element count");
        if (got.size() != want.size()) continue;
        double largest = 0, worst = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
            largest = std::max(largest, std::abs(want[i]));
            worst = std::max(worst, std::abs(got[i] - want[i]));
        }
        check(worst <= job.tolerance * std::max(1.0, largest),
              job.name + ": differs from the MPI path by " + std::to_string(worst));
    }
    if (me == 0) std::printf("shm_calls %" PRIu64 "\n", comm.stats().shm_calls);
    return 0;
}

// The last rank leaves the loop before the third allreduce (skip), or is killed while it waits in it (kill). `small`:
// 16 bytes through the small-message path instead of 256 KiB through the arena.
int hang_job(bool kill, bool small) {
    Communicator& comm = Communicator::world();
    const int me = comm.rank(), last = comm.size() - 1;
    const Tensor big = Tensor::ones({1 << 16});  // 256 KiB: in the arena
    check(big.in_shared_memory(), "the gradient is not in the arena");
    print_arena_name(big);
    Tensor grad = small ? Tensor::ones({4}) : big;
    std::thread killer;
    for (int step = 0; step < 3; ++step) {
        if (step == 2) {
            if (me == 0) {
                std::printf("shm_calls before the hang: %" PRIu64 "\n", comm.stats().shm_calls);
                std::fflush(stdout);
            }
            if (me == last && !kill) break;  // e.g. early stopping seen by one rank
            if (me == last) {
                killer = std::thread([me] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(500));
                    std::printf("rank %d: killing itself in the allreduce\n", me);
                    std::fflush(stdout);
                    std::raise(SIGKILL);
                });
            }
            // Process 0 comes late, so that the others (the victim too) wait on the arena's flags.
            if (me == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        }
        comm.allreduce_(grad, ReduceOp::Mean);
    }
    if (killer.joinable()) killer.join();
    std::printf("rank %d left the loop\n", me);
    std::fflush(stdout);
    return 0;
}

// Prints the status, then an allreduce of 256 KiB and one of 4 MiB: which path each took. `survivor` gets an arena
// tensor that outlives the runtime (main reads it after Runtime::finalize).
int status_job(Tensor& survivor) {
    Communicator& comm = Communicator::world();
    const int n = comm.size();
    const SharedMemoryStatus s = shared_memory_status();
    std::printf(
        "status rank %d: active=%d mode=%s arena_bytes=%zu threshold_bytes=%zu used_bytes=%zu "
        "fallbacks=%" PRIu64 " local_processes=%d local_index=%d backing='%s' reason='%s'\n",
        comm.rank(), int(s.active), std::string(shm_mode_name(s.mode)).c_str(), s.arena_bytes, s.threshold_bytes,
        s.used_bytes, s.fallbacks, s.local_processes, s.local_index, s.backing.c_str(), s.reason.c_str());
    std::fflush(stdout);
    for (std::int64_t numel : {std::int64_t{1} << 16, std::int64_t{1} << 20}) {
        const Tensor grad = Tensor::full({numel}, comm.rank() + 1);
        const std::uint64_t shm = comm.stats().shm_calls;
        const Tensor sum = comm.allreduce(grad);
        check(values(sum) == std::vector<double>(std::size_t(numel), n * (n + 1) / 2.0),
              "allreduce: not the closed form");
        std::printf("%s rank %d: in_arena=%d shm_calls=%" PRIu64 " shared_memory=%d\n",
                    numel == 1 << 16 ? "path" : "path4M", comm.rank(), int(grad.in_shared_memory()),
                    comm.stats().shm_calls - shm, int(comm.shared_memory()));
    }
    survivor = Tensor::full({1 << 16}, 7.0);
    return 0;
}

int exhaust_job() {
    Communicator& comm = Communicator::world();
    const int n = comm.size();
    const SharedMemoryStatus s0 = shared_memory_status();
    check(s0.active, "the arena is not active: " + s0.reason);
    check(s0.fallbacks == 0, "fallbacks before any allocation");
    // 256 KiB blocks until one comes from private memory.
    std::vector<Tensor> blocks;
    while (blocks.size() < 64) {
        blocks.push_back(Tensor::full({1 << 16}, comm.rank() + 1));
        if (!blocks.back().in_shared_memory()) break;
    }
    const std::size_t in_arena = blocks.size() - 1;
    const SharedMemoryStatus s1 = shared_memory_status();
    std::printf("exhaust rank %d: %zu blocks of 256 KiB in a segment of %zu bytes, used %zu, fallbacks %" PRIu64 "\n",
                comm.rank(), in_arena, s1.arena_bytes, s1.used_bytes, s1.fallbacks);
    std::fflush(stdout);
    check(!blocks.back().in_shared_memory(), "64 blocks of 256 KiB all lie in the arena");
    check(in_arena >= 1 && in_arena * (256u << 10) <= s1.arena_bytes, "blocks in the arena beyond its size");
    check(s1.used_bytes <= s1.arena_bytes, "used_bytes beyond the segment");
    check(s1.fallbacks == 1, "fallbacks is not 1 after one block went to private memory");
    blocks.push_back(Tensor::full({1 << 16}, comm.rank() + 1));
    check(!blocks.back().in_shared_memory(), "a block in a full arena");
    check(shared_memory_status().fallbacks == 2, "fallbacks is not 2 after a second private block");

    // Collectives: a private tensor takes the MPI path, an arena tensor in place the arena.
    std::uint64_t shm = comm.stats().shm_calls;
    comm.allreduce_(blocks.back());
    check(values(blocks.back()) == std::vector<double>(1 << 16, n * (n + 1) / 2.0), "allreduce_ of a private tensor");
    check(comm.stats().shm_calls == shm, "a private tensor went through the arena");
    shm = comm.stats().shm_calls;
    comm.allreduce_(blocks.front());
    check(values(blocks.front()) == std::vector<double>(1 << 16, n * (n + 1) / 2.0), "allreduce_ of an arena tensor");
    check(comm.stats().shm_calls == shm + 1, "an arena tensor in place did not go through the arena");

    // Freed blocks go back to the segment.
    blocks.clear();
    empty_all_caches();
    const Tensor again = Tensor::full({1 << 16}, comm.rank() + 1);
    check(again.in_shared_memory(), "the segment is still full after every block was freed");

    // Only process 0's segment full: the output allreduce and reduce allocate there, and then its input, are private on
    // process 0 alone. Every process must take the same path (the MPI one), with the right result.
    std::vector<Tensor> hog;
    if (comm.rank() == 0) {
        while (hog.size() < 64) {
            hog.push_back(Tensor::empty({1 << 16}));
            if (!hog.back().in_shared_memory()) break;
        }
    }
    const std::uint64_t before = comm.stats().shm_calls;
    const Tensor sum = comm.allreduce(again);
    check(values(sum) == std::vector<double>(1 << 16, n * (n + 1) / 2.0),
          "allreduce with a private output on process 0 only");
    const Tensor reduced = comm.reduce(again, ReduceOp::Sum, 0);
    check(comm.rank() != 0 || values(reduced) == std::vector<double>(1 << 16, n * (n + 1) / 2.0),
          "reduce to process 0, whose output is private");
    Tensor mine = Tensor::full({1 << 16}, comm.rank() + 1);
    check(mine.in_shared_memory() == (comm.rank() != 0), "only process 0's new tensor is private");
    comm.allreduce_(mine, ReduceOp::Max);
    check(values(mine) == std::vector<double>(1 << 16, n), "allreduce_ with a private input on process 0 only");
    const Tensor gathered = comm.allgather(mine.narrow_rows(0, 2));
    check(values(gathered) == std::vector<double>(2 * n, n), "allgather with a private input on process 0 only");
    std::uint64_t calls = comm.stats().shm_calls - before, most = 0, least = 0;
    MPI_Allreduce(&calls, &most, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&calls, &least, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    check(most == 0 && least == 0, "a call with one private tensor went through the arena on some process (" +
                                       std::to_string(least) + " to " + std::to_string(most) + " calls)");
    return 0;
}

int limit_job() {
    const SharedMemoryStatus s = shared_memory_status();
    check(s.active, "the arena is not active: " + s.reason);
    const auto limit = config().cpu_memory_limit;
    check(limit.has_value(), "LOCKSTEP_CPU_MEMORY_LIMIT is not set");
    if (!limit || !s.active) return 0;
    check(s.arena_bytes > 2 * *limit, "the test needs an arena larger than the cap");
    // Half the cap fits, and lies in the arena; the host allocator counts it.
    const Tensor half = Tensor::zeros({std::int64_t(*limit / 2)}, DType::UInt8);
    check(half.in_shared_memory(), "a block of half the cap is not in the arena");
    check(allocator_for(Device::cpu()).stats().allocated_bytes >= *limit / 2,
          "the host allocator does not count the arena block");
    // Past the cap: OutOfMemoryError, although the arena has room.
    bool out_of_memory = false;
    try {
        (void)Tensor::zeros({std::int64_t(*limit)}, DType::UInt8);
    } catch (const OutOfMemoryError& e) {
        out_of_memory = true;
        std::printf("rank %d: OutOfMemoryError: %s\n", Communicator::world().rank(), e.what());
    }
    check(out_of_memory, "no OutOfMemoryError past LOCKSTEP_CPU_MEMORY_LIMIT for an arena block");
    check(shared_memory_status().fallbacks == 0, "the refused block counts as a fallback");
    // The job goes on.
    Communicator& comm = Communicator::world();
    Tensor grad = Tensor::full({1 << 16}, 1.0);
    comm.allreduce_(grad);
    check(grad.to_vector<float>()[0] == float(comm.size()), "allreduce after the OutOfMemoryError");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "hash";
    Tensor survivor;  // an arena tensor that outlives the runtime (status): still readable, freed after finalize
    int code = 2;
    if (!mode.starts_with("small")) ::setenv("LOCKSTEP_SHM_SMALL_MAX", "0", 0);
    {
        ScopedRuntime rt;
        if (mode == "hash") {
            code = hash_job();
        } else if (mode == "skip" || mode == "kill" || mode == "small_skip" || mode == "small_kill") {
            // No exchange of failures: the others are stuck until the watchdog.
            return hang_job(mode.ends_with("kill"), mode.starts_with("small"));
        } else if (mode == "status") {
            code = status_job(survivor);
        } else if (mode == "exhaust") {
            code = exhaust_job();
        } else if (mode == "limit") {
            code = limit_job();
        } else {
            std::fprintf(stderr, "shm_program: unknown mode '%s'\n", mode.c_str());
            return 2;
        }
        int any = failures, total = 0;
        MPI_Allreduce(&any, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (total > 0) code = 1;
    }
    if (survivor.defined()) {
        const bool intact = values(survivor) == std::vector<double>(1 << 16, 7.0);
        std::printf("survivor after finalize: %s\n", intact ? "intact" : "FAIL: changed");
        if (!intact) code = 1;
    }
    std::fflush(stdout);
    return code;
}
