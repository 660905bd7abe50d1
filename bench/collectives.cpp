// OSU-style collective benchmark: the raw MPI call against lockstep, lockstep with the hang watchdog, and lockstep in
// debug mode, side by side in one run; and the flight recorder on against off (--recorder: that table alone). The raw
// call runs on std::vector buffers, as a program written against MPI would; a second raw column runs it on the very
// tensors lockstep uses, so that the per-call cost of lockstep (lockstep against raw on the same memory) and the effect
// of where the buffers live (lockstep's host allocator maps large blocks on huge pages) can be told apart.
//
//   mpirun -n 2 build/bench/bench_collectives [--quick] [--recorder] [--op NAME]... [--out
//   bench/results/collectives.md]
//
// For each op and message size, the variants run in interleaved batches whose order rotates (so drift of the machine
// hits them alike); a batch's latency is the slowest rank's mean time per call, the table gives the median over
// batches, and ratios are medians of the per-batch pairs. "raw again" repeats the raw call as its own variant: its
// ratio to raw is the noise of the row, against which the other ratios can be read. Bus
// bandwidth follows nccl-tests: allreduce 2(n-1)/n x algbw, allgather and reduce_scatter (n-1)/n x algbw over the
// whole buffer, broadcast algbw. lockstep calls the forms that reuse their buffers, as the raw calls do: allreduce_,
// broadcast_, allgather_into, reduce_scatter_into.

#include <lockstep.hpp>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

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

struct Measured {
    std::vector<std::vector<double>> samples;  // samples[variant][batch] in seconds per call
    int iterations = 0;                        // calls per batch
};

// Interleaved batches, each the slowest rank's mean per call. The number of calls per batch is set from a timed
// warm-up of the first variant so that a batch lasts about `batch_seconds` (between min_iterations and 5000 calls):
// every size gets batches long enough to average out scheduler noise.
Measured measure(MPI_Comm comm, std::vector<Variant>& variants, double batch_seconds, int min_iterations, int batches) {
    for (auto& v : variants) {
        for (int i = 0; i < 2; ++i) v.call();  // first touch of the buffers, connections
    }
    // Time 1, 2, 4, ... calls of the first variant until a round lasts 2 ms. Every rank takes the slowest rank's time,
    // so all make the same number of calls (a rank-local decision would leave the ranks in different collectives).
    double per_call = 0.0;
    for (int calls = 1;; calls *= 2) {
        MPI_Barrier(comm);
        const auto w0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) variants[0].call();
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, comm);
        per_call = elapsed / calls;
        if (elapsed >= 0.002 || calls >= 4096) break;
    }
    Measured m;
    m.iterations = static_cast<int>(std::clamp(batch_seconds / per_call, static_cast<double>(min_iterations), 5000.0));
    m.samples.resize(variants.size());
    for (auto& v : variants) {
        for (int i = 0; i < std::max(2, m.iterations / 10); ++i) v.call();  // warm-up: caches
    }
    for (int b = 0; b < batches; ++b) {
        // The order rotates from batch to batch, so that no variant always runs right after the same other one.
        for (std::size_t j = 0; j < variants.size(); ++j) {
            const std::size_t k = (j + static_cast<std::size_t>(b)) % variants.size();
            MPI_Barrier(comm);
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < m.iterations; ++i) variants[k].call();
            const double local =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / m.iterations;
            double slowest = 0.0;
            MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
            m.samples[k].push_back(slowest);
        }
    }
    return m;
}

// Paired comparison of variant `a` against `b`: the median over batches of a/b (and of a-b), each pair measured in the
// same batch, so that slow drift of the machine cancels out.
double paired_ratio(const std::vector<std::vector<double>>& s, std::size_t a, std::size_t b) {
    std::vector<double> r;
    for (std::size_t i = 0; i < s[a].size(); ++i) r.push_back(s[a][i] / s[b][i]);
    return median(r);
}
double paired_difference(const std::vector<std::vector<double>>& s, std::size_t a, std::size_t b) {
    std::vector<double> d;
    for (std::size_t i = 0; i < s[a].size(); ++i) d.push_back(s[a][i] - s[b][i]);
    return median(d);
}

std::string size_text(std::size_t bytes) {
    if (bytes >= (1u << 20)) return fmt::format("{} MiB", bytes >> 20);
    if (bytes >= (1u << 10)) return fmt::format("{} KiB", bytes >> 10);
    return fmt::format("{} B", bytes);
}

// The raw MPI call of `op` on float buffers: `in` holds `count` elements per rank (allreduce and broadcast work in
// place on it), `out` receives the allgather's whole or the reduce_scatter's share (count / n elements).
std::function<void()> raw_call(const std::string& op, float* in, float* out, int count, int n, MPI_Comm comm) {
    if (op == "allreduce") return [=] { MPI_Allreduce(MPI_IN_PLACE, in, count, MPI_FLOAT, MPI_SUM, comm); };
    if (op == "broadcast") return [=] { MPI_Bcast(in, count, MPI_FLOAT, 0, comm); };
    if (op == "allgather") return [=] { MPI_Allgather(in, count, MPI_FLOAT, out, count, MPI_FLOAT, comm); };
    return [=] { MPI_Reduce_scatter_block(in, out, count / n, MPI_FLOAT, MPI_SUM, comm); };
}

// The lockstep call of `op`, through the forms that write into existing tensors, as the raw calls do.
std::function<void()> lockstep_call(const std::string& op, Communicator& c, Tensor& t, Tensor& gathered,
                                    Tensor& scattered) {
    if (op == "allreduce") return [&c, &t] { c.allreduce_(t); };
    if (op == "broadcast") return [&c, &t] { c.broadcast_(t, 0); };
    if (op == "allgather") return [&c, &t, &gathered] { c.allgather_into(t, gathered); };
    return [&c, &t, &scattered] { c.reduce_scatter_into(t, scattered); };
}

// lockstep's own cost per call, without a peer: each op on MPI_COMM_SELF (where MPI does almost nothing) with 1024
// floats, raw against lockstep, lockstep with the watchdog, and lockstep in debug mode. Every rank measures its own;
// the table is the main process's.
std::string per_call_cost_on_one_process(bool quick) {
    Communicator plain(MPI_COMM_SELF, {false, 0.0});
    Communicator watched(MPI_COMM_SELF, {false, 600.0});
    Communicator debug(MPI_COMM_SELF, {true, 600.0});
    MPI_Comm self = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    Tensor t = Tensor::ones({1024});
    Tensor out = Tensor::empty({1024});
    std::string text =
        "### Per-call cost on one process\n\nEach op on MPI_COMM_SELF with 1024 floats: what lockstep adds to the MPI "
        "call itself, in nanoseconds (median over batches).\n\n"
        "\"debug + set_step\" sets a new step before every call (Communicator::set_step, what a training loop does "
        "once per step): its Δ against \"debug\" is the step's own cost.\n\n"
        "| op | raw MPI ns | lockstep ns | Δ ns | + watchdog ns | Δ ns | debug ns | Δ ns | debug + set_step ns | Δ ns "
        "|\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    std::uint64_t step = 0;
    for (const std::string op : {"allreduce", "broadcast", "allgather", "reduce_scatter"}) {
        const auto call = [&](Communicator& c) { return lockstep_call(op, c, t, out, out); };
        const auto raw = raw_call(op, t.data<float>(), out.data<float>(), 1024, 1, self);
        const auto stepped = [&, debug_call = call(debug)] {
            debug.set_step(++step);
            debug_call();
        };
        std::vector<Variant> variants = {{"raw", raw},
                                         {"lockstep", call(plain)},
                                         {"watchdog", call(watched)},
                                         {"debug", call(debug)},
                                         {"debug + set_step", stepped}};
        const Measured m = measure(self, variants, quick ? 0.001 : 0.01, 1000, quick ? 5 : 21);
        std::vector<double> ns;
        for (const auto& v : m.samples) ns.push_back(median(v) * 1e9);
        text += fmt::format(
            "| {} | {:.1f} | {:.1f} | {:+.1f} | {:.1f} | {:+.1f} | {:.1f} | {:+.1f} | {:.1f} | {:+.1f} |\n", op, ns[0],
            ns[1], ns[1] - ns[0], ns[2], ns[2] - ns[0], ns[3], ns[3] - ns[0], ns[4], ns[4] - ns[3]);
    }
    MPI_Comm_free(&self);
    return text + "\n";
}

// The flight recorder's cost (collectives/recorder/): the same call on a communicator with its recorder on (the default
// 2048 entries) and on one with it off (trace_calls 0), in interleaved batches, on one process (MPI_COMM_SELF) and on
// every rank of `world`; "off again" is a second communicator without a recorder, the noise of the row. Watchdog and
// debug mode are off on all of them, so that the difference is the recorder's alone.
std::string recorder_cost(MPI_Comm world, bool quick) {
    std::string text =
        "### Flight recorder: on against off\n\nA 4-byte allreduce and a barrier on communicators whose recorder is "
        "on (2048 entries) or off (`trace_calls` 0), watchdog and debug mode off; nanoseconds per call (median over "
        "batches of the slowest rank's mean); Δ and ratio are medians of the per-batch pairs against \"off\". \"off "
        "again\" is a second communicator without a recorder: its Δ is the noise of the row.\n\n"
        "| ranks | op | off ns | on ns | Δ ns | ratio | off again ns | Δ ns "
        "|\n|---:|---|---:|---:|---:|---:|---:|---:|\n";
    for (MPI_Comm base : {MPI_COMM_SELF, world}) {
        int ranks = 1;
        MPI_Comm_size(base, &ranks);
        Communicator off(base, {.debug = false, .timeout = 0.0, .shared_memory = false, .trace_calls = 0});
        Communicator on(base, {.debug = false, .timeout = 0.0, .shared_memory = false});
        Communicator off_again(base, {.debug = false, .timeout = 0.0, .shared_memory = false, .trace_calls = 0});
        Tensor t = Tensor::ones({1});
        for (const std::string op : {"allreduce", "barrier"}) {
            const auto call = [&](Communicator& c) -> std::function<void()> {
                if (op == "allreduce") return [&c, &t] { c.allreduce_(t); };
                return [&c] { c.barrier(); };
            };
            std::vector<Variant> variants = {{"off", call(off)}, {"on", call(on)}, {"off again", call(off_again)}};
            const Measured m = measure(base, variants, quick ? 0.001 : 0.01, 1000, quick ? 5 : 41);
            std::vector<double> ns;
            for (const auto& v : m.samples) ns.push_back(median(v) * 1e9);
            text += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:+.1f} | {:.3f} | {:.1f} | {:+.1f} |\n", ranks, op,
                                ns[0], ns[1], paired_difference(m.samples, 1, 0) * 1e9, paired_ratio(m.samples, 1, 0),
                                ns[2], paired_difference(m.samples, 2, 0) * 1e9);
        }
    }
    return text + "\n";
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string out_path = "bench/results/collectives.md";
    const std::vector<std::string> all_ops = {"allreduce", "broadcast", "allgather", "reduce_scatter"};
    std::vector<std::string> ops;
    CLI::App app{"Collectives: raw MPI against lockstep, + watchdog and debug mode, side by side (run under mpirun)"};
    app.add_flag("--quick", quick, "Sizes up to 4 MiB, short batches");
    app.add_option("--op", ops, "Only this op (repeatable)")->check(CLI::IsMember(all_ops));
    app.add_option("--out", out_path, "Where the Markdown tables are written")->capture_default_str();
    bool recorder_only = false;
    app.add_flag("--recorder", recorder_only, "Only the flight recorder's cost (on against off)");
    CLI11_PARSE(app, argc, argv);
    if (ops.empty()) ops = all_ops;
    ScopedRuntime rt;
    const int n = rt->identity().size;
    MPI_Comm raw_comm = MPI_COMM_NULL;
    MPI_Comm_dup(rt->comm(), &raw_comm);
    // The same MPI call underneath as the raw column: the shared-memory arena's path is bench/shm's to measure.
    Communicator plain(rt->comm(), {false, 0.0, false});      // no watchdog, no debug
    Communicator watched(rt->comm(), {false, 600.0, false});  // watchdog on
    Communicator debug(rt->comm(), {true, 600.0, false});     // debug mode (and watchdog)

    const std::size_t max_bytes = quick ? (std::size_t{4} << 20) : (std::size_t{64} << 20);
    std::vector<std::size_t> sizes;
    for (std::size_t b = 4; b <= max_bytes; b *= 4) sizes.push_back(b);

    std::string report = fmt::format(
        "Collectives on {} ranks ({}), float32; latency in microseconds (median over batches of the slowest rank's "
        "mean); ratios and Δ are medians of the per-batch pairs against raw MPI on std::vector buffers; \"raw again\" "
        "times the same raw call a second time (its ratio is the noise of the row); \"raw on the same tensors\" runs "
        "the raw call on lockstep's own tensors, so \"lockstep / that\" is lockstep's per-call cost alone.\n\n",
        n, rt->identity().node_count == 1 ? "one node" : fmt::format("{} nodes", rt->identity().node_count));

    if (recorder_only) ops.clear();
    for (const std::string& op : ops) {
        report += fmt::format(
            "### {}\n\n| size | raw MPI µs | raw again (noise) | lockstep µs | ratio | Δ µs | "
            "+ watchdog µs | ratio | Δ µs | debug µs | ratio | Δ µs | raw on the same tensors µs | "
            "lockstep / that | raw busbw GB/s | lockstep busbw GB/s | calls per batch |\n"
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            op);
        for (std::size_t bytes : sizes) {
            const std::string o = op;
            // Per-rank element count; allgather sends `bytes` per rank, reduce_scatter needs a multiple of n.
            std::int64_t count = static_cast<std::int64_t>(bytes / 4);
            if (o == "reduce_scatter") count = std::max<std::int64_t>(n, count / n * n);
            Tensor t = Tensor::ones({count});
            std::vector<float> raw_in(static_cast<std::size_t>(count), 1.0f);
            std::vector<float> raw_out(static_cast<std::size_t>(count) * static_cast<std::size_t>(n), 0.0f);
            Tensor gathered = Tensor::empty({count * n});
            Tensor scattered = Tensor::empty({std::max<std::int64_t>(count / n, 1)});
            const auto lockstep_on = [&](Communicator& c) { return lockstep_call(o, c, t, gathered, scattered); };
            const auto raw_on = [&](float* in, float* out) {
                return raw_call(o, in, out, static_cast<int>(count), n, raw_comm);
            };
            std::vector<Variant> variants = {
                {"raw", raw_on(raw_in.data(), raw_out.data())},
                {"raw again", raw_on(raw_in.data(), raw_out.data())},  // A/A: the noise floor of this row
                {"lockstep", lockstep_on(plain)},
                {"watchdog", lockstep_on(watched)},
                {"debug", lockstep_on(debug)},
                // The raw call on the very tensors lockstep uses: the same memory, so only the per-call path differs.
                {"raw on tensor memory",
                 raw_on(t.data<float>(), (o == "allgather" ? gathered : scattered).data<float>())}};
            const std::size_t payload = static_cast<std::size_t>(count) * 4;
            // Up to 4 MiB: 41 batches of about 10 ms each (the median of 41 paired ratios resolves about 1 %); above,
            // 7 batches of at least 6 calls.
            const bool large = payload > (4u << 20);
            const int batches = quick ? 5 : (large ? 7 : 41);
            const Measured measured = measure(raw_comm, variants, quick ? 0.001 : 0.010, large ? 6 : 2, batches);
            const auto& samples = measured.samples;
            enum : std::size_t { raw, raw_again, ls, watchdog, dbg, raw_tensor };
            std::vector<double> lat;
            for (const auto& v : samples) lat.push_back(median(v));
            // Bytes over which nccl-tests defines algbw: the per-rank buffer, or the gathered whole.
            double bus_factor = 1.0, algbw_bytes = static_cast<double>(payload);
            if (o == "allreduce") bus_factor = 2.0 * (n - 1) / n;
            if (o == "allgather") {
                bus_factor = static_cast<double>(n - 1) / n;
                algbw_bytes = static_cast<double>(payload) * n;
            }
            if (o == "reduce_scatter") bus_factor = static_cast<double>(n - 1) / n;
            const auto busbw = [&](double sec) { return algbw_bytes / sec * bus_factor / 1e9; };
            const auto ratio = [&](std::size_t a, std::size_t b) { return paired_ratio(samples, a, b); };
            const auto delta_us = [&](std::size_t a, std::size_t b) { return paired_difference(samples, a, b) * 1e6; };
            report += fmt::format(
                "| {} | {:.2f} | {:.3f} | {:.2f} | {:.3f} | {:+.2f} | {:.2f} | {:.3f} | {:+.2f} "
                "| {:.2f} | {:.3f} | {:+.2f} | {:.2f} | {:.3f} | {:.2f} | {:.2f} | {} |\n",
                size_text(payload), lat[raw] * 1e6, ratio(raw_again, raw), lat[ls] * 1e6, ratio(ls, raw),
                delta_us(ls, raw), lat[watchdog] * 1e6, ratio(watchdog, raw), delta_us(watchdog, raw), lat[dbg] * 1e6,
                ratio(dbg, raw), delta_us(dbg, raw), lat[raw_tensor] * 1e6, ratio(ls, raw_tensor), busbw(lat[raw]),
                busbw(lat[ls]), measured.iterations);
        }
        report += "\n";
    }
    if (!recorder_only) report += per_call_cost_on_one_process(quick);
    report += recorder_cost(raw_comm, quick);
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
