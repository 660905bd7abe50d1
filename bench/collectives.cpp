// OSU-style collective benchmark: the raw MPI call against lockstep, lockstep with the hang watchdog, and lockstep in
// debug mode, side by side in one run. The raw call runs on std::vector buffers, as a program written against MPI
// would; a second raw column runs it on lockstep's own tensor memory, so that the per-call cost of lockstep and the
// effect of where the buffers live (lockstep's host allocator maps large blocks on huge pages) can be told apart.
//
//   mpirun -n 2 build/bench/bench_collectives [--quick] [--out bench/results/collectives.md]
//
// For each op and message size, the variants run in interleaved batches (so drift of the machine hits them alike);
// a batch's latency is the slowest rank's mean time per call, and the table gives the median over batches. Bus
// bandwidth follows nccl-tests: allreduce 2(n-1)/n x algbw, allgather and reduce_scatter (n-1)/n x algbw over the
// whole buffer, broadcast algbw. lockstep calls the forms that reuse their buffers, as the raw calls do: allreduce_,
// broadcast_, allgather_into, reduce_scatter_into.

#include <lockstep.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

struct Variant {
    std::string name;
    std::function<void()> call;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// Latency of each variant in seconds: interleaved batches, slowest rank's mean per call, median over batches.
std::vector<double> measure(MPI_Comm comm, std::vector<Variant>& variants, int iterations, int batches) {
    for (auto& v : variants) {
        for (int i = 0; i < std::max(2, iterations / 10); ++i) v.call();  // warm-up: caches, connections
    }
    std::vector<std::vector<double>> samples(variants.size());
    for (int b = 0; b < batches; ++b) {
        for (std::size_t k = 0; k < variants.size(); ++k) {
            MPI_Barrier(comm);
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iterations; ++i) variants[k].call();
            const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
            double slowest = 0.0;
            MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
            samples[k].push_back(slowest);
        }
    }
    std::vector<double> out;
    for (auto& s : samples) out.push_back(median(s));
    return out;
}

std::string size_text(std::size_t bytes) {
    if (bytes >= (1u << 20)) return fmt::format("{} MiB", bytes >> 20);
    if (bytes >= (1u << 10)) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{} B", bytes);
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string out_path = "bench/results/collectives.md";
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--quick") {
            quick = true;
        } else if (arg == "--out" && i + 1 < argc) {
            out_path = argv[++i];
        } else {
            std::fprintf(stderr, "usage: bench_collectives [--quick] [--out PATH]\n");
            return 2;
        }
    }
    ScopedRuntime rt;
    const int n = rt->identity().size;
    MPI_Comm raw_comm = MPI_COMM_NULL;
    MPI_Comm_dup(rt->comm(), &raw_comm);
    Communicator plain(rt->comm(), {false, 0.0});     // no watchdog, no debug
    Communicator watched(rt->comm(), {false, 600.0});  // watchdog on
    Communicator debug(rt->comm(), {true, 600.0});     // debug mode (and watchdog)

    const std::size_t max_bytes = quick ? (std::size_t{4} << 20) : (std::size_t{64} << 20);
    std::vector<std::size_t> sizes;
    for (std::size_t b = 4; b <= max_bytes; b *= 4) sizes.push_back(b);

    std::string report = fmt::format(
        "Collectives on {} ranks ({}), float32; latency in microseconds (median over batches of the slowest rank's "
        "mean), ratios against raw MPI.\n\n",
        n, rt->identity().node_count == 1 ? "one node" : fmt::format("{} nodes", rt->identity().node_count));

    const char* ops[] = {"allreduce", "broadcast", "allgather", "reduce_scatter"};
    for (const char* op : ops) {
        report += fmt::format("### {}\n\n| size | raw MPI µs | lockstep µs | ratio | Δ µs | + watchdog µs | ratio | "
                              "debug µs | ratio | Δ µs | raw on tensor memory µs | lockstep / that | "
                              "raw busbw GB/s | lockstep busbw GB/s |\n"
                              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                              op);
        for (std::size_t bytes : sizes) {
            const std::string o = op;
            // Per-rank element count; allgather sends `bytes` per rank, reduce_scatter needs a multiple of n.
            std::int64_t count = static_cast<std::int64_t>(bytes / 4);
            if (o == "reduce_scatter") count = std::max<std::int64_t>(n, count / n * n);
            Tensor t = Tensor::ones({count});
            std::vector<float> raw_in(static_cast<std::size_t>(count), 1.0f);
            std::vector<float> raw_out(static_cast<std::size_t>(count) * static_cast<std::size_t>(n), 0.0f);
            // The forms that write into existing tensors, like the raw calls they are compared with.
            Tensor gathered = Tensor::empty({count * n});
            Tensor scattered = Tensor::empty({std::max<std::int64_t>(count / n, 1)});
            auto lockstep_call = [&](Communicator& c) -> std::function<void()> {
                if (o == "allreduce") return [&c, &t] { c.allreduce_(t); };
                if (o == "broadcast") return [&c, &t] { c.broadcast_(t, 0); };
                if (o == "allgather") return [&c, &t, &gathered] { c.allgather_into(t, gathered); };
                return [&c, &t, &scattered] { c.reduce_scatter_into(t, scattered); };
            };
            const int c32 = static_cast<int>(count);
            // The raw MPI call on the given input and output buffers (allreduce and broadcast work in place on `in`).
            auto raw_call = [&](float* in, float* out) -> std::function<void()> {
                if (o == "allreduce") {
                    return [=] { MPI_Allreduce(MPI_IN_PLACE, in, c32, MPI_FLOAT, MPI_SUM, raw_comm); };
                }
                if (o == "broadcast") return [=] { MPI_Bcast(in, c32, MPI_FLOAT, 0, raw_comm); };
                if (o == "allgather") {
                    return [=] { MPI_Allgather(in, c32, MPI_FLOAT, out, c32, MPI_FLOAT, raw_comm); };
                }
                return [=] { MPI_Reduce_scatter_block(in, out, c32 / n, MPI_FLOAT, MPI_SUM, raw_comm); };
            };
            Tensor raw_t = Tensor::ones({count});
            Tensor raw_gathered = Tensor::empty({count * n});
            std::vector<Variant> variants = {
                {"raw", raw_call(raw_in.data(), raw_out.data())},
                {"lockstep", lockstep_call(plain)},
                {"watchdog", lockstep_call(watched)},
                {"debug", lockstep_call(debug)},
                {"raw on tensor memory", raw_call(raw_t.data<float>(), raw_gathered.data<float>())}};
            const std::size_t payload = static_cast<std::size_t>(count) * 4;
            const int iterations = payload <= (64u << 10) ? (quick ? 100 : 400)
                                   : payload <= (4u << 20) ? (quick ? 10 : 40)
                                                           : 6;
            const int batches = quick ? 5 : (payload <= (4u << 20) ? 15 : 7);
            const auto lat = measure(raw_comm, variants, iterations, batches);
            // Bytes over which nccl-tests defines algbw: the per-rank buffer, or the gathered whole.
            double bus_factor = 1.0, algbw_bytes = static_cast<double>(payload);
            if (o == "allreduce") bus_factor = 2.0 * (n - 1) / n;
            if (o == "allgather") {
                bus_factor = static_cast<double>(n - 1) / n;
                algbw_bytes = static_cast<double>(payload) * n;
            }
            if (o == "reduce_scatter") bus_factor = static_cast<double>(n - 1) / n;
            const auto busbw = [&](double s) { return algbw_bytes / s * bus_factor / 1e9; };
            report += fmt::format("| {} | {:.2f} | {:.2f} | {:.3f} | {:+.2f} | {:.2f} | {:.3f} | {:.2f} | {:.3f} | {:+.2f} "
                                  "| {:.2f} | {:.3f} | {:.2f} | {:.2f} |\n",
                                  size_text(payload), lat[0] * 1e6, lat[1] * 1e6, lat[1] / lat[0],
                                  (lat[1] - lat[0]) * 1e6, lat[2] * 1e6, lat[2] / lat[0], lat[3] * 1e6,
                                  lat[3] / lat[0], (lat[3] - lat[0]) * 1e6, lat[4] * 1e6, lat[1] / lat[4],
                                  busbw(lat[0]), busbw(lat[1]));
        }
        report += "\n";
    }
    MPI_Comm_free(&raw_comm);
    if (rt->identity().is_main_process()) {
        std::fputs(report.c_str(), stdout);
        const std::filesystem::path path(out_path);
        if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
        std::ofstream(path) << report;
        std::fprintf(stderr, "written to %s\n", out_path.c_str());
    }
    return 0;
}
