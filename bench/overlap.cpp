// Overlap of a non-blocking allreduce with computation: lockstep's iallreduce_ against raw MPI_Iallreduce, side by
// side in one run, for two kinds of computation between issue and wait.
//
//   mpirun -n 2 build/bench/bench_overlap [--quick] [--reps N] [--out-dir bench/results]
//
// Variants (float32, sum, in place):
//   mpi               MPI_Iallreduce on std::vector buffers and a duplicated communicator, then MPI_Wait: a plain
//                     program, which makes no MPI call while it computes;
//   lockstep          Communicator::iallreduce_ then Work::wait(), progress thread on, MPI path (the same MPI call
//                     underneath, run by the communicator's progress thread while the caller computes);
//   lockstep_arena    the same through the node's shared-memory arena (only where the arena is active: tensors of at
//                     least its threshold, 64 KiB by default, lie in it; smaller ones take the MPI path);
//   lockstep_no_thread  progress thread off: the collective runs inside wait(), after the computation.
// Computation:
//   cpu    a loop of arithmetic over a 16 KiB buffer (L1-resident: it takes CPU time, not memory bandwidth);
//   sleep  std::this_thread::sleep_for: the CPU is free, as the host thread is while a GPU kernel runs.
// For each size the computation is calibrated to last as long as that variant's communication alone. Each sample
// times k calls (k sets a sample to at least about 10 ms, so that a preemption by other work spreads over many calls)
// between two barriers, and takes the slowest rank's mean per call; every measurement of every variant runs once per
// repetition, the variants in an order that rotates from one repetition to the next, so that load on the machine hits
// them alike. The tables give medians over repetitions:
//   comm        issue, then wait at once;
//   compute     the computation alone;
//   overlapped  issue, compute, wait;
//   hidden      (comm + compute - overlapped) / min(comm, compute), clamped to [0, 1]: the share of the shorter
//               of the two that the overlap hid (of the communication, as the two are calibrated to be equal).
// Output: a Markdown table on stdout, overlap_<n>ranks.csv and overlap_<n>ranks.json under --out-dir;
// bench/overlap_plot.py draws hidden % against size from them.

#include <lockstep.hpp>
#include <lockstep/build_config.hpp>

#include <fmt/core.h>
#include <sched.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace lockstep;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// The CPU-bound computation: passes of a multiply-add over a buffer that stays in L1. The empty asm keeps the
// compiler from merging passes or dropping them.
class Arithmetic {
public:
    Arithmetic() : buffer_(4096, 1.0f) {}

    void passes(std::int64_t count) {
        for (std::int64_t p = 0; p < count; ++p) {
            for (float& x : buffer_) x = x * 0.999f + 0.001f;
            asm volatile("" : : "r"(buffer_.data()) : "memory");
        }
    }

    // Seconds per pass: the fastest of several timed rounds (the least disturbed by other work on the machine).
    double seconds_per_pass() {
        constexpr std::int64_t round = 2000;
        passes(round);
        double best = 1e9;
        for (int i = 0; i < 7; ++i) {
            const auto t0 = Clock::now();
            passes(round);
            best = std::min(best, seconds_since(t0) / round);
        }
        return best;
    }

private:
    std::vector<float> buffer_;
};

enum class Kind { Cpu, Sleep };
constexpr std::array kinds = {Kind::Cpu, Kind::Sleep};
const char* kind_name(Kind k) {
    return k == Kind::Cpu ? "cpu" : "sleep";
}

// One variant: how to issue the allreduce and how to wait for it.
struct Variant {
    std::string name;
    std::function<void()> issue;
    std::function<void()> wait;
};

std::string size_text(std::size_t bytes) {
    if (bytes >= (std::size_t{1} << 20)) return fmt::format("{} MiB", bytes >> 20);
    if (bytes >= (std::size_t{1} << 10)) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{} B", bytes);
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string first;
    return in >> first ? first : "unknown";
}

// Measurements of one variant at one size, per repetition, in seconds per call.
struct Samples {
    std::vector<double> comm;
    std::array<std::vector<double>, 2> compute;
    std::array<std::vector<double>, 2> overlapped;
};

struct Row {
    std::size_t bytes = 0;
    std::string variant;
    Kind kind = Kind::Cpu;
    double comm = 0, compute = 0, overlapped = 0, hidden = 0;
    int calls = 0;
};

double hidden_fraction(double comm, double compute, double overlapped) {
    const double shorter = std::min(comm, compute);
    if (shorter <= 0) return 0.0;
    return std::clamp((comm + compute - overlapped) / shorter, 0.0, 1.0);
}

// What issuing and waiting cost on one process (MPI_COMM_SELF, 1024 floats, where MPI itself does almost nothing):
// the blocking calls, the non-blocking ones waited for at once, with and without the progress thread. Every rank
// measures its own; the table is the main process's.
std::string per_call_cost_on_one_process(bool quick) {
    Communicator threaded(MPI_COMM_SELF, {false, 0.0, false, true});
    Communicator unthreaded(MPI_COMM_SELF, {false, 0.0, false, false});
    MPI_Comm self = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    Tensor t = Tensor::zeros({1024});
    std::vector<float> raw(1024, 0.0f);
    MPI_Request request = MPI_REQUEST_NULL;
    const std::vector<std::pair<std::string, std::function<void()>>> variants = {
        {"MPI_Allreduce", [&] { MPI_Allreduce(MPI_IN_PLACE, raw.data(), 1024, MPI_FLOAT, MPI_SUM, self); }},
        {"MPI_Iallreduce + MPI_Wait",
         [&] {
             MPI_Iallreduce(MPI_IN_PLACE, raw.data(), 1024, MPI_FLOAT, MPI_SUM, self, &request);
             MPI_Wait(&request, MPI_STATUS_IGNORE);
         }},
        {"lockstep allreduce_", [&] { threaded.allreduce_(t); }},
        {"lockstep iallreduce_ + wait, no progress thread", [&] { unthreaded.iallreduce_(t).wait(); }},
        {"lockstep iallreduce_ + wait, progress thread", [&] { threaded.iallreduce_(t).wait(); }},
    };
    const int calls = quick ? 100 : 2000;
    std::vector<std::vector<double>> ns(variants.size());
    for (int b = 0; b < (quick ? 1 : 11); ++b) {
        for (std::size_t j = 0; j < variants.size(); ++j) {
            const std::size_t v = (j + static_cast<std::size_t>(b)) % variants.size();
            const auto t0 = Clock::now();
            for (int i = 0; i < calls; ++i) variants[v].second();
            ns[v].push_back(seconds_since(t0) / calls * 1e9);
        }
    }
    MPI_Comm_free(&self);
    std::string text = "| call (one process, 1024 floats) | ns per call |\n|---|---:|\n";
    for (std::size_t v = 0; v < variants.size(); ++v) {
        text += fmt::format("| {} | {:.0f} |\n", variants[v].first, median(ns[v]));
    }
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    int reps = 0;
    std::string out_dir = "bench/results";
    std::size_t max_bytes = std::size_t{64} << 20;
    CLI::App app{"Overlap of a non-blocking allreduce with computation: lockstep against raw MPI (run under mpirun)"};
    app.add_flag("--quick", quick, "Three sizes (4, 16 and 64 KiB), one repetition: checks that the program runs");
    app.add_option("--reps", reps, "Repetitions per size (default 11; 1 with --quick)");
    app.add_option("--max-bytes", max_bytes, "Largest size in bytes (sizes go up by 4 from 4 KiB)")
        ->capture_default_str();
    app.add_option("--out-dir", out_dir, "Where overlap_<n>ranks.csv and .json are written")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    if (reps <= 0) reps = quick ? 1 : 11;
    if (quick) max_bytes = std::size_t{64} << 10;

    ScopedRuntime rt;
    const int n = rt->identity().size;
    const bool main_process = rt->identity().is_main_process();
    MPI_Comm raw_comm = MPI_COMM_NULL;   // the raw MPI variant's
    MPI_Comm ctrl_comm = MPI_COMM_NULL;  // barriers and the exchange of times
    MPI_Comm_dup(rt->comm(), &raw_comm);
    MPI_Comm_dup(rt->comm(), &ctrl_comm);
    // No debug mode, no watchdog: the overlap itself is measured (bench/collectives measures what those add).
    Communicator threaded(rt->comm(), {false, 0.0, false, true});
    Communicator arena(rt->comm(), {false, 0.0, std::nullopt, true});
    Communicator unthreaded(rt->comm(), {false, 0.0, false, false});
    const bool arena_active = arena.shared_memory();

    Arithmetic arithmetic;
    const double pass_seconds = arithmetic.seconds_per_pass();
    cpu_set_t affinity;
    CPU_ZERO(&affinity);
    sched_getaffinity(0, sizeof(affinity), &affinity);
    const int cpus_here = CPU_COUNT(&affinity);
    const unsigned cores = std::thread::hardware_concurrency();
    const bool oversubscribed = static_cast<unsigned>(rt->identity().local_size) > cores;
    const std::string header = fmt::format(
        "Overlap on {} ranks ({}{}), {} cores, each rank may run on {} of them; lockstep {} ({}); progress thread: "
        "{}; arena: {}; {} repetitions; load average {} at the start; one arithmetic pass {:.2f} µs.",
        n, rt->identity().node_count == 1 ? "one node" : fmt::format("{} nodes", rt->identity().node_count),
        oversubscribed ? ", oversubscribed" : "", cores, cpus_here, LOCKSTEP_VERSION, LOCKSTEP_GIT_COMMIT,
        threaded.progress_thread() ? "on" : "off (MPI without MPI_THREAD_MULTIPLE)",
        arena_active ? "active" : "not active", reps, load_average(), pass_seconds * 1e6);
    if (main_process) fmt::print("{}\n\n", header);

    std::vector<std::size_t> sizes;
    for (std::size_t b = 4096; b <= max_bytes; b *= 4) sizes.push_back(b);

    std::vector<Row> rows;
    for (const std::size_t bytes : sizes) {
        const auto count = static_cast<std::int64_t>(bytes / 4);
        // Zeros stay zeros under a sum, however many calls.
        std::vector<float> raw_buffer(static_cast<std::size_t>(count), 0.0f);
        Tensor t_threaded = Tensor::zeros({count});
        Tensor t_arena = Tensor::zeros({count});
        Tensor t_unthreaded = Tensor::zeros({count});
        MPI_Request request = MPI_REQUEST_NULL;
        Work work_threaded, work_arena, work_unthreaded;
        std::vector<Variant> variants;
        variants.push_back({"mpi",
                            [&] {
                                MPI_Iallreduce(MPI_IN_PLACE, raw_buffer.data(), static_cast<int>(count), MPI_FLOAT,
                                               MPI_SUM, raw_comm, &request);
                            },
                            [&] { MPI_Wait(&request, MPI_STATUS_IGNORE); }});
        variants.push_back(
            {"lockstep", [&] { work_threaded = threaded.iallreduce_(t_threaded); }, [&] { work_threaded.wait(); }});
        if (arena_active) {
            variants.push_back(
                {"lockstep_arena", [&] { work_arena = arena.iallreduce_(t_arena); }, [&] { work_arena.wait(); }});
        }
        variants.push_back({"lockstep_no_thread", [&] { work_unthreaded = unthreaded.iallreduce_(t_unthreaded); },
                            [&] { work_unthreaded.wait(); }});
        const std::size_t nv = variants.size();

        // Warm-up (connections, first touch), then each variant's communication alone, a few single calls: the
        // slowest rank's median sets the number of calls per sample.
        std::vector<double> comm_estimate(nv);
        for (std::size_t v = 0; v < nv; ++v) {
            for (int i = 0; i < 2; ++i) {
                variants[v].issue();
                variants[v].wait();
            }
            std::vector<double> times;
            for (int i = 0; i < (quick ? 3 : 7); ++i) {
                MPI_Barrier(ctrl_comm);
                const auto t0 = Clock::now();
                variants[v].issue();
                variants[v].wait();
                times.push_back(seconds_since(t0));
            }
            comm_estimate[v] = median(times);
        }
        MPI_Allreduce(MPI_IN_PLACE, comm_estimate.data(), static_cast<int>(nv), MPI_DOUBLE, MPI_MAX, ctrl_comm);
        // Calls per sample: enough that the longest communication fills about 10 ms (at most 100): a preemption by
        // other work then stretches every kind of sample alike instead of ruining single ones.
        const double longest = *std::max_element(comm_estimate.begin(), comm_estimate.end());
        const int calls = quick ? 1 : static_cast<int>(std::clamp(0.01 / longest, 1.0, 100.0));

        // One sample: `calls` times `body` between a barrier and the end, this rank's mean per call.
        const auto sample = [&](const std::function<void()>& body) {
            MPI_Barrier(ctrl_comm);
            const auto t0 = Clock::now();
            for (int i = 0; i < calls; ++i) body();
            return seconds_since(t0) / calls;
        };
        // The fastest of three samples: the least disturbed by other work on the machine, which only adds time.
        const auto fastest_of_samples = [&](const std::function<void()>& body) {
            double best = 1e9;
            for (int i = 0; i < 3; ++i) best = std::min(best, sample(body));
            return best;
        };

        // The computation of each variant, as long as its communication (its fastest time): arithmetic passes, or a
        // sleep. Each is timed as first set (fastest of three) and corrected by what it took (a sleep overshoots by
        // the wake-up latency, which is taken off the request where the request is longer).
        std::vector<std::function<void()>> compute_cpu(nv), compute_sleep(nv);
        std::vector<double> target(nv);
        for (std::size_t v = 0; v < nv; ++v) {
            target[v] = fastest_of_samples([&] {
                variants[v].issue();
                variants[v].wait();
            });
        }
        MPI_Allreduce(MPI_IN_PLACE, target.data(), static_cast<int>(nv), MPI_DOUBLE, MPI_MAX, ctrl_comm);
        for (std::size_t v = 0; v < nv; ++v) {
            // Both are the communication's time; other work on the machine only lengthens either.
            target[v] = std::min(target[v], comm_estimate[v]);
            auto passes = std::max<std::int64_t>(1, std::llround(target[v] / pass_seconds));
            const double took = fastest_of_samples([&] { arithmetic.passes(passes); });
            passes = std::max<std::int64_t>(1, std::llround(static_cast<double>(passes) * target[v] / took));
            compute_cpu[v] = [&arithmetic, passes] { arithmetic.passes(passes); };
            const double slept =
                fastest_of_samples([&] { std::this_thread::sleep_for(std::chrono::duration<double>(target[v])); });
            const auto request = std::chrono::duration<double>(std::max(target[v] / 4, 2 * target[v] - slept));
            compute_sleep[v] = [request] { std::this_thread::sleep_for(request); };
        }

        std::vector<Samples> samples(nv);
        for (int r = 0; r < reps; ++r) {
            for (std::size_t j = 0; j < nv; ++j) {
                const std::size_t v = (j + static_cast<std::size_t>(r)) % nv;
                Variant& var = variants[v];
                samples[v].comm.push_back(sample([&] {
                    var.issue();
                    var.wait();
                }));
                for (const Kind kind : kinds) {
                    const auto& compute = kind == Kind::Cpu ? compute_cpu[v] : compute_sleep[v];
                    const auto k = static_cast<std::size_t>(kind);
                    samples[v].compute[k].push_back(sample(compute));
                    samples[v].overlapped[k].push_back(sample([&] {
                        var.issue();
                        compute();
                        var.wait();
                    }));
                }
            }
        }
        // Every sample becomes the slowest rank's, in one exchange.
        std::vector<double> flat;
        for (const auto& s : samples) {
            flat.insert(flat.end(), s.comm.begin(), s.comm.end());
            for (std::size_t k = 0; k < kinds.size(); ++k) {
                flat.insert(flat.end(), s.compute[k].begin(), s.compute[k].end());
                flat.insert(flat.end(), s.overlapped[k].begin(), s.overlapped[k].end());
            }
        }
        MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_DOUBLE, MPI_MAX, ctrl_comm);
        std::size_t at = 0;
        const auto next_median = [&] {
            std::vector<double> part(flat.begin() + static_cast<std::ptrdiff_t>(at),
                                     flat.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(reps)));
            at += static_cast<std::size_t>(reps);
            return median(part);
        };
        for (std::size_t v = 0; v < nv; ++v) {
            const double comm = next_median();
            for (const Kind kind : kinds) {
                Row row{bytes, variants[v].name, kind, comm, 0, 0, 0, calls};
                row.compute = next_median();
                row.overlapped = next_median();
                row.hidden = hidden_fraction(row.comm, row.compute, row.overlapped);
                rows.push_back(row);
            }
        }
        if (main_process) std::fprintf(stderr, "bench_overlap: %s done\n", size_text(bytes).c_str());
    }
    MPI_Comm_free(&raw_comm);
    MPI_Comm_free(&ctrl_comm);
    const std::string per_call = per_call_cost_on_one_process(quick);

    if (main_process) {
        std::string table =
            "| size | variant | compute | comm µs | compute µs | overlapped µs | comm + compute µs | hidden % | calls "
            "per sample |\n|---:|---|---|---:|---:|---:|---:|---:|---:|\n";
        std::string csv =
            "ranks,bytes,variant,compute,comm_s,compute_s,overlapped_s,hidden_fraction,calls,reps,"
            "oversubscribed\n";
        std::string json = fmt::format(
            "{{\n  \"ranks\": {},\n  \"oversubscribed\": {},\n  \"cores\": {},\n  \"reps\": {},\n  \"commit\": "
            "\"{}\",\n  \"arena\": {},\n  \"header\": \"{}\",\n  \"rows\": [\n",
            n, oversubscribed, cores, reps, LOCKSTEP_GIT_COMMIT, arena_active, header);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            table += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.0f} | {} |\n",
                                 size_text(r.bytes), r.variant, kind_name(r.kind), r.comm * 1e6, r.compute * 1e6,
                                 r.overlapped * 1e6, (r.comm + r.compute) * 1e6, r.hidden * 100, r.calls);
            csv += fmt::format("{},{},{},{},{:.9f},{:.9f},{:.9f},{:.4f},{},{},{}\n", n, r.bytes, r.variant,
                               kind_name(r.kind), r.comm, r.compute, r.overlapped, r.hidden, r.calls, reps,
                               oversubscribed ? 1 : 0);
            json += fmt::format(
                "    {{\"bytes\": {}, \"variant\": \"{}\", \"compute\": \"{}\", \"comm_s\": {:.9f}, \"compute_s\": "
                "{:.9f}, \"overlapped_s\": {:.9f}, \"hidden_fraction\": {:.4f}, \"calls\": {}}}{}\n",
                r.bytes, r.variant, kind_name(r.kind), r.comm, r.compute, r.overlapped, r.hidden, r.calls,
                i + 1 < rows.size() ? "," : "");
        }
        json += "  ]\n}\n";
        table += "\n" + per_call;
        fmt::print("{}", table);
        const std::filesystem::path dir(out_dir);
        std::filesystem::create_directories(dir);
        const std::string stem = fmt::format("overlap_{}ranks", n);
        std::ofstream(dir / (stem + ".csv")) << csv;
        std::ofstream(dir / (stem + ".json")) << json;
        std::ofstream(dir / (stem + ".md")) << header << "\n\n"
                                            << table << "\nLoad average at the end: " << load_average() << "\n";
        std::fprintf(stderr, "written to %s/%s.{csv,json,md}\n", out_dir.c_str(), stem.c_str());
    }
    return 0;
}
