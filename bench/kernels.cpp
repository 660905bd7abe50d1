// Kernel throughput against the ceilings that matter: elementwise add and sum over 64 MiB of float32 against memcpy
// of the same bytes (memory bandwidth), float32 matmul against Eigen's own product on the same sizes (the library
// that the CPU backend wraps). With a CUDA device, the same bandwidth rows on the device, and matmul through cuBLAS
// (lockstep's CUDA matmul kernel) against the device's peak: the FP32 peak computed from the device's properties,
// the tensor-core peaks from the vendor's datasheet for the devices tabulated here. Each measurement is the median of
// several repetitions after a warm-up; outputs come from the caching allocator, which hands back the same block from
// the second iteration on, as memcpy reuses its destination. Host work is timed with the steady clock around each
// call; device work with CUDA events recorded on the stream around a batch of calls, so that no host synchronisation
// or copy is inside the timed region. Prints a Markdown table and writes it to --out (default
// bench/results/kernels.md).
//
//   bench_kernels [--quick] [--out PATH]

#include <lockstep/build_config.hpp>
#include <lockstep/kernels.hpp>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <Eigen/Core>

#if LOCKSTEP_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

using namespace lockstep;

namespace {

struct Options {
    bool quick = false;
    std::string out = "bench/results/kernels.md";
};

std::vector<double> medians_of(std::vector<std::vector<double>>& times) {
    std::vector<double> medians;
    for (auto& t : times) {
        std::sort(t.begin(), t.end());
        medians.push_back(t[t.size() / 2]);
    }
    return medians;
}

// Median seconds per function over `reps` rounds after `warmup` untimed ones, on the host's steady clock. Each round
// times every function once, in turn, so that a reference and the code compared with it see the same machine load.
std::vector<double> median_seconds(int warmup, int reps, const std::vector<std::function<void()>>& fns) {
    for (int i = 0; i < warmup; ++i) {
        for (const auto& fn : fns) fn();
    }
    std::vector<std::vector<double>> times(fns.size());
    for (int i = 0; i < reps; ++i) {
        for (std::size_t f = 0; f < fns.size(); ++f) {
            const auto start = std::chrono::steady_clock::now();
            fns[f]();
            times[f].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
    }
    return medians_of(times);
}

#if LOCKSTEP_BENCH_CUDA
void check_cuda(cudaError_t status, const char* call) {
    if (status != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", call, cudaGetErrorString(status)));
}

// Two CUDA events, destroyed with the object.
class EventPair {
public:
    EventPair() {
        check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
        check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
    }
    ~EventPair() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    EventPair(const EventPair&) = delete;
    EventPair& operator=(const EventPair&) = delete;
    // Device seconds between the two events around `work`. The events go on the legacy default stream, the stream
    // lockstep's kernels, cuBLAS handle and copies use; the wait for the stop event comes after it is recorded, so
    // it is outside the measured interval.
    double time(const std::function<void()>& work) {
        check_cuda(cudaEventRecord(start_, nullptr), "cudaEventRecord");
        work();
        check_cuda(cudaEventRecord(stop_, nullptr), "cudaEventRecord");
        check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        return ms * 1e-3;
    }

private:
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
};

// Median device seconds per call: each round times, per function, `batch` calls issued back to back between two
// events and divides by `batch`, so the device's queue stays full and a launch's host-side latency does not open a
// gap in the interval. Warm-up calls run first and are waited for outside any interval.
std::vector<double> median_device_seconds(int warmup, int reps, int batch,
                                          const std::vector<std::function<void()>>& fns) {
    for (int i = 0; i < warmup; ++i) {
        for (const auto& fn : fns) fn();
    }
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    EventPair events;
    std::vector<std::vector<double>> times(fns.size());
    for (int i = 0; i < reps; ++i) {
        for (std::size_t f = 0; f < fns.size(); ++f) {
            const double seconds = events.time([&] {
                for (int b = 0; b < batch; ++b) fns[f]();
            });
            times[f].push_back(seconds / batch);
        }
    }
    return medians_of(times);
}
#endif

// Host functions on the steady clock, device functions with CUDA events (batches of 10 calls per interval).
std::vector<double> median_seconds_on(Device device, int warmup, int reps,
                                      const std::vector<std::function<void()>>& fns) {
    if (!device.is_cuda()) return median_seconds(warmup, reps, fns);
#if LOCKSTEP_BENCH_CUDA
    return median_device_seconds(warmup, reps, 10, fns);
#else
    throw std::runtime_error("bench_kernels was built without CUDA");
#endif
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
    const std::string where = device.str();
    const std::string size = "64 MiB float32";

    // Each result is dropped at the end of its call, so the allocator hands the same block to the next call, as
    // memcpy writes the same destination every time.
    const std::vector<double> t =
        median_seconds_on(device, 2, reps,
                          {
                              [&] { copy_bytes(dst.data(), device, a.data(), device, bytes); },
                              [&] { const Tensor c = a + b; },
                              [&] { ops::add_(dst, b); },
                              [&] { const Tensor s = ops::sum(a); },
                          });
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

#if LOCKSTEP_BENCH_CUDA
// FP32 operations per clock per multiprocessor (2 per fused multiply-add on each FP32 lane), by compute capability,
// from NVIDIA's CUDA C++ Programming Guide (arithmetic instructions' throughput table); 0 where not tabulated here.
int fp32_flops_per_clock_per_sm(int major, int minor) {
    if (major == 7 || (major == 8 && minor == 0)) return 128;  // Volta, Turing, A100: 64 FP32 lanes
    if (major == 8 || major == 9 || major == 10 || major == 12)
        return 256;  // Ampere GA10x, Ada, Hopper, Blackwell: 128
    return 0;
}

// Dense tensor-core peaks are not derivable from cudaDeviceProp (the throughput per tensor core and its clock differ
// by product), so they are table values: NVIDIA's datasheet of each product, whose TF32 and FP16/BF16 figures are
// given with 2:4 sparsity; the dense figures here are half of them. Only the devices named are tabulated.
struct TensorPeak {
    std::string_view name;  // as cudaDeviceProp::name reports it
    double tf32;            // dense TFLOP/s
    double fp16;            // dense FP16/BF16 TFLOP/s
    std::string_view source;
};
constexpr TensorPeak tensor_peaks[] = {
    // NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: FP32 67 TFLOPS, TF32 Tensor Core 989 TFLOPS*,
    // BFLOAT16/FP16 Tensor Core 1,979 TFLOPS* (* with sparsity).
    {"NVIDIA H200", 494.5, 989.5, "NVIDIA H200 datasheet, H200 SXM (989 / 1,979 TFLOPS with sparsity, halved)"},
    // Same datasheet, H200 NVL column: FP32 60 TFLOPS, TF32 835 TFLOPS*, BFLOAT16/FP16 1,671 TFLOPS*.
    {"NVIDIA H200 NVL", 417.5, 835.5, "NVIDIA H200 datasheet, H200 NVL (835 / 1,671 TFLOPS with sparsity, halved)"},
};

struct DevicePeak {
    std::string description;             // the header line
    double fp32 = 0;                     // computed, TFLOP/s; 0 when the architecture is not tabulated
    const TensorPeak* tensor = nullptr;  // table values, when the device is tabulated
};

DevicePeak device_peak(int index) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    int clock_khz = 0;  // the peak clock (cudaDeviceProp lost its clockRate field in CUDA 13)
    check_cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index), "cudaDeviceGetAttribute");
    DevicePeak peak;
    const int per_clock = fp32_flops_per_clock_per_sm(prop.major, prop.minor);
    const double ghz = clock_khz / 1e6;
    peak.fp32 = prop.multiProcessorCount * ghz * per_clock / 1e3;
    peak.description = fmt::format("GPU: {} (sm_{}{}), {} SMs at {:.3f} GHz peak clock. ", prop.name, prop.major,
                                   prop.minor, prop.multiProcessorCount, ghz);
    if (per_clock > 0) {
        peak.description += fmt::format(
            "FP32 peak computed from the device's properties: {} SMs x {:.3f} GHz x {} FLOP/clock/SM = "
            "{:.1f} TFLOP/s. ",
            prop.multiProcessorCount, ghz, per_clock, peak.fp32);
    } else {
        peak.description +=
            fmt::format("FP32 FLOP/clock/SM not tabulated for sm_{}{}: no FP32 peak. ", prop.major, prop.minor);
    }
    for (const TensorPeak& t : tensor_peaks) {
        if (prop.name == t.name) peak.tensor = &t;
    }
    if (peak.tensor != nullptr) {
        peak.description += fmt::format(
            "Dense tensor-core peaks are table values ({}): TF32 {:.1f}, FP16/BF16 {:.1f} "
            "TFLOP/s. lockstep's float32 matmul is cuBLAS's Sgemm in its default math "
            "mode (FP32, no TF32), so its row compares with the FP32 peak.",
            peak.tensor->source, peak.tensor->tf32, peak.tensor->fp16);
    } else {
        peak.description += "No tensor-core peak tabulated for this device: 16-bit rows show no fraction of peak.";
    }
    return peak;
}

// Square matmul through ops::matmul on the device (cuBLAS: Sgemm for float32, GemmEx with float accumulation for
// bfloat16 and float16), against the device's peak for that precision.
void gpu_matmul_rows(bool quick, Device device, std::vector<Row>& rows, std::string& note) {
    const DevicePeak peak = device_peak(device.index());
    note += peak.description + "\n";
    for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
        for (std::int64_t size : {std::int64_t{4096}, std::int64_t{8192}}) {
            if (quick && size > 4096) continue;
            const double flops =
                2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
            Generator gen(42);
            const Tensor a = Tensor::uniform({size, size}, -1, 1, dtype, Device::cpu(), &gen).to(device);
            const Tensor b = Tensor::uniform({size, size}, -1, 1, dtype, Device::cpu(), &gen).to(device);
            const int reps = quick ? 3 : 9;
            const std::vector<double> t =
                median_seconds_on(device, 1, reps, {[&] { const Tensor c = ops::matmul(a, b); }});
            const double tflops = flops / t[0] / 1e12;
            const bool fp32 = dtype == DType::Float32;
            const double reference = fp32 ? peak.fp32 : (peak.tensor != nullptr ? peak.tensor->fp16 : 0.0);
            const std::string versus =
                reference > 0
                    ? fmt::format("{:.0f} % of {} peak {:.1f} TFLOP/s ({})", 100 * tflops / reference,
                                  fp32 ? "FP32" : "dense FP16/BF16 tensor", reference, fp32 ? "computed" : "datasheet")
                    : std::string("no peak tabulated");
            rows.push_back({fmt::format("ops::matmul, cuBLAS ({})", device.str()),
                            fmt::format("{0}x{0}x{0} {1}", size, dtype_name(dtype)), t[0],
                            fmt::format("{:.1f} TFLOP/s", tflops), versus});
        }
    }
}
#endif

}  // namespace

int main(int argc, char** argv) {
    Options options;
    CLI::App app{
        "bench_kernels: elementwise and sum bandwidth against memcpy, matmul against Eigen and the GPU's peak"};
    app.add_flag("--quick", options.quick, "Fewer repetitions");
    app.add_option("--out", options.out, "Also write the Markdown table there")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    const int reps = options.quick ? 3 : 11;
    std::vector<Row> rows;
    bandwidth_rows(Device::cpu(), reps, rows);
    matmul_rows(options.quick, rows);
    std::string cuda_note;
    if (cuda_device_count() > 0) {
#if LOCKSTEP_BENCH_CUDA
        bandwidth_rows(Device::cuda(0), reps * 3, rows);
        gpu_matmul_rows(options.quick, Device::cuda(0), rows, cuda_note);
#else
        cuda_note =
            "CUDA: a device is visible, but bench_kernels was built without the CUDA runtime; GPU rows skipped.\n";
#endif
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
