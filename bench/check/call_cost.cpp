// What the interposition library (liblockstep_check.so) adds to an MPI call, side by side in one run: the same call
// through its MPI_ name (intercepted when the library is preloaded) and through its PMPI_ name (the MPI library's own
// entry point, never intercepted), in interleaved batches whose order rotates, so that drift of the machine hits both
// alike. "raw again" repeats the raw call as its own variant: its difference to raw is the noise of the row.
//
//   mpirun -n 2 -x LD_PRELOAD=build/check/liblockstep_check.so build/bench/bench_check_cost [--batches N] [--calls N]
//
// bench/check/run.sh runs it without the library, with the watchdog only, and in debug mode, and writes the tables.
// A batch's time is the slowest rank's mean per call; a row gives the median over batches, and the difference to raw
// is the median of the per-batch differences. This program is plain MPI: it links no lockstep library.

#include <mpi.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

void check(int code, const char* what) {
    if (code != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        PMPI_Error_string(code, text, &length);
        std::fprintf(stderr, "bench_check_cost: %s failed: %s\n", what, text);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Row {
    std::string name;
    std::function<void()> raw;
    std::function<void()> intercepted;
};

}  // namespace

int main(int argc, char** argv) {
    int batches = 31;
    int calls = 2000;
    std::string out_path;
    std::string label = "run";
    CLI::App app{"Per-call cost of the MPI interposition library, the intercepted call against the raw PMPI_ call"};
    app.add_option("--batches", batches, "Batches per variant")->capture_default_str()->check(CLI::Range(3, 100000));
    app.add_option("--calls", calls, "Calls per batch")->capture_default_str()->check(CLI::Range(1, 100000000));
    app.add_option("--label", label, "What this run is (printed as the table's heading)");
    app.add_option("--out", out_path, "Append the Markdown table to this file");
    CLI11_PARSE(app, argc, argv);

    check(MPI_Init(&argc, &argv), "MPI_Init");
    int rank = 0;
    int size = 0;
    check(PMPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(PMPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");

    int in = rank + 1;
    int out = 0;
    int self_in = 7;
    int self_out = 0;
    MPI_Request requests[2];
    std::vector<Row> rows = {
        {"MPI_Allreduce 4 B, world",
         [&] { check(PMPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "PMPI_Allreduce"); },
         [&] { check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce"); }},
        {"MPI_Allreduce 4 B, self",
         [&] { check(PMPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF), "PMPI_Allreduce"); },
         [&] { check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF), "MPI_Allreduce"); }},
        {"MPI_Bcast 4 B, world", [&] { check(PMPI_Bcast(&in, 1, MPI_INT, 0, MPI_COMM_WORLD), "PMPI_Bcast"); },
         [&] { check(MPI_Bcast(&in, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast"); }},
        {"MPI_Barrier, world", [&] { check(PMPI_Barrier(MPI_COMM_WORLD), "PMPI_Barrier"); },
         [&] { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }},
        {"MPI_Iallreduce + MPI_Wait 4 B, world",
         [&] {
             check(PMPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[0]), "PMPI_Iallreduce");
             check(PMPI_Wait(&requests[0], MPI_STATUS_IGNORE), "PMPI_Wait");
         },
         [&] {
             check(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[0]), "MPI_Iallreduce");
             check(MPI_Wait(&requests[0], MPI_STATUS_IGNORE), "MPI_Wait");
         }},
        {"MPI_Isend + MPI_Irecv + MPI_Waitall 4 B, to itself",
         [&] {
             check(PMPI_Irecv(&self_out, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &requests[0]), "PMPI_Irecv");
             check(PMPI_Isend(&self_in, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &requests[1]), "PMPI_Isend");
             check(PMPI_Waitall(2, requests, MPI_STATUSES_IGNORE), "PMPI_Waitall");
         },
         [&] {
             check(MPI_Irecv(&self_out, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &requests[0]), "MPI_Irecv");
             check(MPI_Isend(&self_in, 1, MPI_INT, rank, 5, MPI_COMM_WORLD, &requests[1]), "MPI_Isend");
             check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
         }},
    };

    // One batch of one variant: the slowest rank's mean seconds per call.
    const auto batch = [&](const std::function<void()>& call) {
        check(PMPI_Barrier(MPI_COMM_WORLD), "PMPI_Barrier");
        const double start = PMPI_Wtime();
        for (int i = 0; i < calls; ++i) call();
        double mean = (PMPI_Wtime() - start) / calls;
        double slowest = 0;
        check(PMPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "PMPI_Allreduce");
        return slowest;
    };

    std::string table = fmt::format("\n### {} ({} ranks, {} batches of {} calls)\n\n", label, size, batches, calls);
    table += "| call | raw (µs) | through the library (µs) | added (µs) | raw again, added (µs): noise |\n";
    table += "|---|---:|---:|---:|---:|\n";
    for (const Row& row : rows) {
        for (int i = 0; i < 3; ++i) batch(row.intercepted);  // warm-up: first-call setup of both paths
        for (int i = 0; i < 3; ++i) batch(row.raw);
        std::vector<double> raw, intercepted, again, added, noise;
        for (int b = 0; b < batches; ++b) {
            double t[3] = {};
            for (int k = 0; k < 3; ++k) {  // the order rotates from batch to batch
                const int variant = (b + k) % 3;
                t[variant] = batch(variant == 1 ? row.intercepted : row.raw);
            }
            raw.push_back(t[0]);
            intercepted.push_back(t[1]);
            again.push_back(t[2]);
            added.push_back(t[1] - t[0]);
            noise.push_back(t[2] - t[0]);
        }
        table += fmt::format("| {} | {:.3f} | {:.3f} | {:+.3f} | {:+.3f} |\n", row.name, median(raw) * 1e6,
                             median(intercepted) * 1e6, median(added) * 1e6, median(noise) * 1e6);
    }
    if (rank == 0) {
        std::fputs(table.c_str(), stdout);
        if (!out_path.empty()) {
            std::FILE* f = std::fopen(out_path.c_str(), "a");
            if (f == nullptr) {
                std::fprintf(stderr, "bench_check_cost: cannot append to %s\n", out_path.c_str());
                PMPI_Abort(MPI_COMM_WORLD, 1);
            }
            std::fputs(table.c_str(), f);
            std::fclose(f);
        }
    }
    check(MPI_Finalize(), "MPI_Finalize");
    return 0;
}
