// In-order logging: one in-order record per call, lockstep's gather to one writer against taking turns with one
// barrier per rank (the method of Accelerate's `in_order`: for each rank i, rank i logs, then everyone waits), all in
// one run. Two more variants split the in-order call's cost: the same call with the record filtered on every rank
// (only the two collectives and their bookkeeping, nothing written), set against two barriers, the target (the cost of
// two collective round trips); and one local record per rank without any coordination (formatting and writing).
//
//   for n in 2 4 8; do mpirun -n $n --oversubscribe build/bench/bench_logging [--quick] [--out PATH]; done
//
// The variants run in interleaved batches (so drift of the machine hits them alike); a batch's time is the slowest
// rank's mean time per call, and the row gives the median over batches, with the load average at the start. stderr
// goes to /dev/null while measuring, so that the logging variants pay for formatting and the write system call but not
// for a terminal. Prints one Markdown row; with --out, appends it to that file (writing the header first if the file
// is new).

#include <lockstep.hpp>

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Variant {
    std::string name;
    std::function<void(int)> call;  // argument: the iteration, logged in the record
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<double> measure(MPI_Comm comm, const std::vector<Variant>& variants, int iterations, int batches) {
    for (const auto& v : variants) {
        for (int i = 0; i < std::max(5, iterations / 10); ++i) v.call(i);  // warm-up: connections, the logging comm
    }
    std::vector<std::vector<double>> samples(variants.size());
    for (int b = 0; b < batches; ++b) {
        for (std::size_t k = 0; k < variants.size(); ++k) {
            MPI_Barrier(comm);
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iterations; ++i) variants[k].call(i);
            // The writer may still be behind the others; the call is only done for the job when it is done there.
            MPI_Barrier(comm);
            const double local =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
            double slowest = 0.0;
            MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
            samples[k].push_back(slowest);
        }
    }
    std::vector<double> result;
    for (auto& s : samples) result.push_back(median(s));
    return result;
}

// Points stderr at /dev/null while it lives.
class SilencedStderr {
public:
    SilencedStderr() {
        std::fflush(stderr);
        saved_ = ::dup(STDERR_FILENO);
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, STDERR_FILENO);
        ::close(null);
    }
    ~SilencedStderr() {
        std::fflush(stderr);
        ::dup2(saved_, STDERR_FILENO);
        ::close(saved_);
    }
    SilencedStderr(const SilencedStderr&) = delete;
    SilencedStderr& operator=(const SilencedStderr&) = delete;

private:
    int saved_ = -1;
};

// The machine's one-minute load average: on a shared machine it says how far the numbers can be trusted.
std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string first;
    return (in >> first) ? first : std::string("n/a");
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string out_path;
    CLI::App app{"bench_logging: cost of lockstep's rank-aware log calls (run under mpirun -n N)"};
    app.add_flag("--quick", quick, "Fewer repetitions");
    app.add_option("--out", out_path, "Also append the Markdown row to PATH");
    CLI11_PARSE(app, argc, argv);

    lockstep::ScopedRuntime runtime;
    const MPI_Comm comm = runtime->comm();
    const int rank = runtime->identity().rank;
    const int size = runtime->identity().size;
    const auto log = lockstep::get_logger("bench", lockstep::LogLevel::Info);
    const double loss = 0.4242;

    const std::vector<Variant> variants{
        {"in-order (gather)", [&](int i) { log.info(lockstep::in_rank_order, "step {} loss {:.4f}", i, loss); }},
        {"N barriers (take turns)",
         [&](int i) {
             for (int turn = 0; turn < size; ++turn) {
                 if (turn == rank) log.info(lockstep::every_rank, "step {} loss {:.4f}", i, loss);
                 MPI_Barrier(comm);
             }
         }},
        {"in-order, filtered on every rank",
         [&](int i) { log.debug(lockstep::in_rank_order, "step {} loss {:.4f}", i, loss); }},
        {"2 barriers (target)",
         [&](int) {
             MPI_Barrier(comm);
             MPI_Barrier(comm);
         }},
        {"one local record per rank", [&](int i) { log.info(lockstep::every_rank, "step {} loss {:.4f}", i, loss); }},
    };
    const std::string load = load_average();
    const int iterations = quick ? 100 : 1000;
    const int batches = quick ? 3 : 7;
    std::vector<double> seconds;
    {
        SilencedStderr silenced;
        seconds = measure(comm, variants, iterations, batches);
    }

    if (rank == 0) {
        const std::string header =
            "| ranks | in-order µs | N barriers µs | N barriers / in-order | in-order, all filtered µs | "
            "2 barriers (target) µs | all filtered / target | one local record µs | load |\n"
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        const std::string row =
            fmt::format("| {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.2f} | {:.1f} | {} |\n", size,
                        seconds[0] * 1e6, seconds[1] * 1e6, seconds[1] / seconds[0], seconds[2] * 1e6, seconds[3] * 1e6,
                        seconds[2] / seconds[3], seconds[4] * 1e6, load);
        std::cout << header << row;
        if (!out_path.empty()) {
            const std::filesystem::path path(out_path);
            const bool fresh = !std::filesystem::exists(path);
            if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
            std::ofstream out(path, std::ios::app);
            if (fresh) out << header;
            out << row;
            if (!out) {
                std::cerr << "cannot write " << out_path << "\n";
                return 1;
            }
        }
    }
    return 0;
}
