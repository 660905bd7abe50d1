// The C interface's cost per call, side by side with the C++ API in one run: an in-place allreduce of 4 B and of
// 4 MiB (float32), through Communicator::allreduce_, through lockstep_allreduce without options, and through
// lockstep_allreduce with a call site (file, line, function) as the Python package passes one.
//
//   mpirun -n 2 build/bench/bench_c_api [--samples N] [--out bench/c_api/results/c_vs_cpp_2.csv]
//
// A sample is one batch: MPI_Barrier, then k back-to-back calls of one variant, each rank's mean time per call, and
// the maximum of that over ranks. k is chosen so that a batch lasts about 2 ms (k = 1 at 4 MiB is not enough to see a
// 0.1 us difference, so it is at least 20 there). The variants take turns batch by batch in a rotating order, so that
// drift of a shared machine hits them alike. Reported: the median over batches and its difference to the C++ API.

#include <lockstep.h>
#include <lockstep.hpp>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check(lockstep_status_t s, const char* what) {
    if (s != LOCKSTEP_OK)
        throw Error(fmt::format("{}: {} ({})", what, lockstep_status_string(s), lockstep_last_error()));
}

// Mean seconds per call over k calls, the slowest rank's.
double batch(const std::function<void()>& call, int k) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = now();
    for (int i = 0; i < k; ++i) call();
    double mine = (now() - start) / k;
    double slowest = 0.0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"bench_c_api: the C interface vs the C++ API, per in-place allreduce"};
    int samples = 41;
    std::string out_path;
    app.add_option("--samples", samples, "batches per variant and size");
    app.add_option("--out", out_path, "CSV file (rank 0 writes it)");
    CLI11_PARSE(app, argc, argv);

    check(lockstep_init(nullptr, nullptr), "lockstep_init");
    Communicator& cpp = Communicator::world();
    lockstep_comm_t c = nullptr;
    check(lockstep_comm_world(&c), "lockstep_comm_world");
    const int rank = cpp.rank();

    struct Row {
        std::size_t bytes;
        std::string variant;
        double median;
        double fastest;
        int k;
    };
    std::vector<Row> rows;
    for (const std::size_t bytes : {std::size_t{4}, std::size_t{4} << 20}) {
        const std::int64_t n = static_cast<std::int64_t>(bytes / 4);
        Tensor t = Tensor::zeros({n});
        lockstep_tensor_t h = nullptr;
        const lockstep_device_t cpu{LOCKSTEP_DEVICE_CPU, 0};
        check(lockstep_tensor_empty(&n, 1, LOCKSTEP_FLOAT32, cpu, &h), "lockstep_tensor_empty");
        std::vector<float> zeros(static_cast<std::size_t>(n), 0.0f);
        check(lockstep_tensor_copy_from_host(h, zeros.data(), bytes), "copy");
        lockstep_call_options_t site = LOCKSTEP_CALL_OPTIONS_INIT;
        site.file = "train.py";
        site.line = 42;
        site.function = "train_step";

        struct Variant {
            std::string name;
            std::function<void()> call;
            int k = 1;
            std::vector<double> samples;
        };
        std::vector<Variant> variants = {
            {"C++ Communicator::allreduce_", [&] { cpp.allreduce_(t); }},
            {"C lockstep_allreduce", [&] { check(lockstep_allreduce(c, h, h, LOCKSTEP_SUM, nullptr), "allreduce"); }},
            {"C lockstep_allreduce + call site",
             [&] { check(lockstep_allreduce(c, h, h, LOCKSTEP_SUM, &site), "allreduce"); }},
        };
        for (Variant& v : variants) {
            for (int i = 0; i < 20; ++i) v.call();  // warm-up
            double fastest = 1e9;
            for (int r = 0; r < 3; ++r) fastest = std::min(fastest, batch(v.call, 10));
            v.k = std::max(bytes > 4096 ? 20 : 1, static_cast<int>(0.002 / std::max(fastest, 1e-9)));
        }
        for (int s = 0; s < samples; ++s) {
            for (std::size_t j = 0; j < variants.size(); ++j) {
                Variant& v = variants[(j + static_cast<std::size_t>(s)) % variants.size()];
                v.samples.push_back(batch(v.call, v.k));
            }
        }
        for (Variant& v : variants) {
            rows.push_back(
                {bytes, v.name, median(v.samples), *std::min_element(v.samples.begin(), v.samples.end()), v.k});
        }
        check(lockstep_tensor_release(h), "release");
    }

    if (rank == 0) {
        std::printf("%d ranks; median over batches of the slowest rank's mean per call\n", cpp.size());
        std::printf("%-10s %-36s %12s %12s %14s\n", "bytes", "variant", "median_us", "fastest_us", "vs_C++_us");
        for (const Row& r : rows) {
            const auto base = std::find_if(rows.begin(), rows.end(), [&](const Row& b) {
                return b.bytes == r.bytes && b.variant.rfind("C++", 0) == 0;
            });
            std::printf("%-10zu %-36s %12.3f %12.3f %+14.3f\n", r.bytes, r.variant.c_str(), r.median * 1e6,
                        r.fastest * 1e6, (r.median - base->median) * 1e6);
        }
        if (!out_path.empty()) {
            std::ofstream f(out_path);
            f << "ranks,bytes,variant,seconds_median,seconds_min,calls_per_batch\n";
            for (const Row& r : rows) {
                f << cpp.size() << ',' << r.bytes << ",\"" << r.variant << "\"," << r.median << ',' << r.fastest << ','
                  << r.k << '\n';
            }
        }
    }
    check(lockstep_comm_free(c), "lockstep_comm_free");
    check(lockstep_finalize(), "lockstep_finalize");
    return 0;
}
