// Kernel throughput against the ceilings that matter: elementwise add and sum over 64 MiB of float32 against memcpy
// of the same bytes (memory bandwidth), float32 matmul against Eigen's own product on the same sizes (the library
// that the CPU backend wraps). Each measurement is the median of several repetitions after a warm-up; outputs come
// from the caching allocator, which hands back the same block from the second iteration on, as memcpy reuses its
// destination. Prints a Markdown table and writes it to --out (default bench/results/kernels.md).
//
//   bench_kernels [--quick] [--out PATH]

#include <lockstep/build_config.hpp>
#include <lockstep/kernels.hpp>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

using namespace lockstep;

namespace {

struct Options {
    bool quick = false;
    std::string out = "bench/results/kernels.md";
};

// Median seconds per function over `reps` rounds after `warmup` untimed ones. Each round times every function once,
// in turn, so that a reference and the code compared with it see the same machine load. `sync` runs inside the timed
// region after each call (a device synchronisation for CUDA work, nothing on the host).
std::vector<double> median_seconds(
    int warmup, int reps, const std::vector<std::function<void()>>& fns, const std::function<void()>& sync = [] {}) {
    for (int i = 0; i < warmup; ++i) {
        for (const auto& fn : fns) fn();
    }
    sync();
    std::vector<std::vector<double>> times(fns.size());
    for (int i = 0; i < reps; ++i) {
        for (std::size_t f = 0; f < fns.size(); ++f) {
            const auto start = std::chrono::steady_clock::now();
            fns[f]();
            sync();
            times[f].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
    }
    std::vector<double> medians;
    for (auto& t : times) {
        std::sort(t.begin(), t.end());
        medians.push_back(t[t.size() / 2]);
    }
    return medians;
}

struct Row {
    std::string name;
    std::string size;
    double seconds;
    std::string rate;
    std::string reference;
};

std::string table(const std::vector<Row>& rows) {
    std::string out = "| Benchmark | Size | Median time | Throughput | Relative to reference |\n";
    out += "|---|---|---:|---:|---|\n";
    for (const Row& r : rows) {
        out += fmt::format("| {} | {} | {:.3f} ms | {} | {} |\n", r.name, r.size, r.seconds * 1e3, r.rate, r.reference);
    }
    return out;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown CPU";
}

// The 1-minute load average: other work on the machine shifts absolute numbers, not the interleaved ratios.
std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string first;
    return in >> first ? first : "unknown";
}

// Elementwise add, in-place add and sum against memcpy on one device. GB/s counts bytes moved: memcpy reads and
// writes N bytes (2N), add reads two operands and writes one (3N), sum reads N.
void bandwidth_rows(Device device, int reps, std::vector<Row>& rows) {
    constexpr std::int64_t bytes = std::int64_t{64} << 20;
    constexpr std::int64_t n = bytes / 4;
    const double gb = static_cast<double>(bytes) / 1e9;
    Tensor a = Tensor::full({n}, 1.5, DType::Float32, device);
    Tensor b = Tensor::full({n}, 2.25, DType::Float32, device);
    Tensor dst = Tensor::zeros({n}, DType::Float32, device);
    // A small device-to-host copy waits for all earlier work on the device's default stream.
    Tensor probe = Tensor::zeros({1}, DType::Float32, device);
    const auto sync = [&] {
        if (device.is_cuda()) (void)probe.to(Device::cpu());
    };
    const std::string where = device.str();
    const std::string size = "64 MiB float32";

    // Each result is dropped at the end of its call, so the allocator hands the same block to the next call, as
    // memcpy writes the same destination every time.
    const std::vector<double> t = median_seconds(2, reps,
                                                 {
                                                     [&] { copy_bytes(dst.data(), device, a.data(), device, bytes); },
                                                     [&] { const Tensor c = a + b; },
                                                     [&] { ops::add_(dst, b); },
                                                     [&] { const Tensor s = ops::sum(a); },
                                                 },
                                                 sync);
    const double copy_rate = 2 * gb / t[0];
    const auto row = [&](std::string name, double seconds, double moved) {
        const double rate = moved / seconds;
        rows.push_back({fmt::format("{} ({})", name, where), size, seconds, fmt::format("{:.1f} GB/s", rate),
                        fmt::format("{:.0f} % of memcpy", 100 * rate / copy_rate)});
    };
    rows.push_back({fmt::format("memcpy ({})", where), size, t[0], fmt::format("{:.1f} GB/s", copy_rate), "reference"});
    row("add a + b", t[1], 3 * gb);
    row("add_ in place", t[2], 3 * gb);
    row("sum", t[3], gb);
}

void matmul_rows(bool quick, std::vector<Row>& rows) {
    for (std::int64_t size : {512, 1024, 2048}) {
        const int reps = quick ? 3 : (size >= 2048 ? 5 : 9);
        const double flops = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
        Generator gen(42);
        Tensor a = Tensor::uniform({size, size}, -1, 1, DType::Float32, Device::cpu(), &gen);
        Tensor b = Tensor::uniform({size, size}, -1, 1, DType::Float32, Device::cpu(), &gen);
        // Eigen directly, on its own column-major matrices holding the same values.
        using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        const Eigen::MatrixXf ea = Eigen::Map<const RowMajor>(a.data<float>(), size, size);
        const Eigen::MatrixXf eb = Eigen::Map<const RowMajor>(b.data<float>(), size, size);
        Eigen::MatrixXf ec(size, size);
        const std::vector<double> t = median_seconds(1, reps,
                                                     {
                                                         [&] { ec.noalias() = ea * eb; },
                                                         [&] { const Tensor c = ops::matmul(a, b); },
                                                     });
        const double t_eigen = t[0];
        const double t_ours = t[1];

        const std::string dims = fmt::format("{0}x{0}x{0} float32", size);
        rows.push_back({"Eigen product (direct)", dims, t_eigen, fmt::format("{:.1f} GFLOP/s", flops / t_eigen / 1e9),
                        "reference"});
        rows.push_back({"ops::matmul (cpu)", dims, t_ours, fmt::format("{:.1f} GFLOP/s", flops / t_ours / 1e9),
                        fmt::format("{:.0f} % of Eigen", 100 * t_eigen / t_ours)});
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    CLI::App app{"bench_kernels: elementwise and sum bandwidth against memcpy, matmul against Eigen"};
    app.add_flag("--quick", options.quick, "Fewer repetitions");
    app.add_option("--out", options.out, "Also write the Markdown table there")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    const int reps = options.quick ? 3 : 11;
    std::vector<Row> rows;
    bandwidth_rows(Device::cpu(), reps, rows);
    matmul_rows(options.quick, rows);
    std::string cuda_note;
    if (cuda_device_count() > 0) {
        bandwidth_rows(Device::cuda(0), reps * 3, rows);
    } else {
        cuda_note = cuda_built() ? "CUDA: built, but no CUDA device is visible; GPU rows skipped.\n"
                                 : "CUDA: not built (meson setup -Dcuda=enabled); GPU rows skipped.\n";
    }

    const std::string report =
        fmt::format("Host: {}, 1 thread (Eigen threads: {}), load average {}; lockstep {} ({}), {} run.\n\n{}{}{}",
                    cpu_model(), Eigen::nbThreads(), load_average(), LOCKSTEP_VERSION, LOCKSTEP_GIT_COMMIT,
                    options.quick ? "quick" : "full", table(rows), cuda_note.empty() ? "" : "\n", cuda_note);
    std::cout << report;

    const std::filesystem::path path(options.out);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream file(path);
    file << report;
    if (!file) {
        std::cerr << "bench_kernels: cannot write " << path << "\n";
        return 1;
    }
    return 0;
}
