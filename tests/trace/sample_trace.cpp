// Writes a sample trace file (FILE and FILE.txt) from the synthetic training job of sample_job.hpp, through the same
// merge_trace and write_trace a dump uses: a file to open in Perfetto, to render, and to feed the trace validator.
//
// Usage: sample_trace FILE [--ranks N] [--steps N] [--straggler R] [--no-hang] [--missing R]
//   --ranks N      ranks of the job (default 4)
//   --steps N      training steps (default 8)
//   --straggler R  the slow rank (default 2)
//   --no-hang      the job does not hang at the end (reason "exit" instead of "hang")
//   --missing R    leave rank R's snapshot out, as a dump does for a rank that did not answer

#include "sample_job.hpp"

#include <collectives/recorder/trace_format.hpp>
#include <lockstep/errors.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

int main(int argc, char** argv) {
    lockstep::trace_test::SampleJob job;
    std::string file;
    int missing = -1;
    const auto usage = [] {
        std::fprintf(stderr,
                     "usage: sample_trace FILE [--ranks N] [--steps N] [--straggler R] [--no-hang] [--missing R]\n");
        return 2;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--ranks" && has_value) {
            job.ranks = std::atoi(argv[++i]);
        } else if (arg == "--steps" && has_value) {
            job.steps = std::atoi(argv[++i]);
        } else if (arg == "--straggler" && has_value) {
            job.straggler = std::atoi(argv[++i]);
        } else if (arg == "--missing" && has_value) {
            missing = std::atoi(argv[++i]);
        } else if (arg == "--no-hang") {
            job.hang = false;
        } else if (arg == "--help" || arg == "-h") {
            usage();
            return 0;
        } else if (!arg.starts_with("-") && file.empty()) {
            file = arg;
        } else {
            return usage();
        }
    }
    if (file.empty() || job.ranks < 1 || job.steps < 0) return usage();
    std::vector<nlohmann::json> snapshots;
    for (nlohmann::json& s : lockstep::trace_test::sample_job(job)) {
        if (s["rank"] != missing) snapshots.push_back(std::move(s));
    }
    const lockstep::detail::TraceContext context{
        .reason = job.hang ? "hang" : "exit", .job = "sample", .expected_ranks = job.ranks, .stacks = nullptr};
    try {
        lockstep::detail::write_trace(file, lockstep::detail::merge_trace(snapshots, context));
    } catch (const lockstep::Error& e) {
        std::fprintf(stderr, "sample_trace: %s\n", e.what());
        return 1;
    }
    std::printf("%s\n%s.txt\n", file.c_str(), file.c_str());
    return 0;
}
