// `lockstep env [--json] [--all-ranks]`: the environment report for bug reports.

#include "../subcommand.hpp"
#include "../terminal.hpp"
#include "rank_comparison.hpp"
#include "report.hpp"

#include <lockstep/communicator.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>

namespace lockstep::tools {
namespace {

using nlohmann::json;

struct CommandLine {
    bool json = false;
    bool all_ranks = false;
    std::string colour = "auto";
};

// Every rank's report, in rank order, on every rank: lengths first, then the bytes (uneven gather).
std::vector<json> gather_reports(Communicator& comm, const json& local) {
    const std::string text = local.dump();
    const auto length = static_cast<std::int64_t>(text.size());
    const Tensor lengths = comm.allgather(Tensor::from_data<std::int64_t>({length}, {1}));
    Tensor bytes = Tensor::empty({length}, DType::UInt8);
    if (length > 0) std::memcpy(bytes.data(), text.data(), text.size());
    const Tensor all = comm.gather_uneven(bytes);
    const auto* data = static_cast<const char*>(all.data());
    std::vector<json> reports;
    std::int64_t offset = 0;
    for (const std::int64_t n : lengths.to_vector<std::int64_t>()) {
        reports.push_back(json::parse(data + offset, data + offset + n));
        offset += n;
    }
    return reports;
}

int run_all_ranks(const CommandLine& cl) {
    try {
        ScopedRuntime runtime;
        int code = 0;
        {
            // Debug checks and the hang watchdog of the job's Config apply; a private duplicate keeps this exchange
            // apart from anything else on the world communicator.
            Communicator comm(runtime->comm());
            const std::vector<json> reports = gather_reports(comm, env::collect_report());
            const env::RankComparison comparison = env::compare_reports(reports);
            const bool problem =
                comparison.has_unexpected() || std::any_of(reports.begin(), reports.end(), env::report_has_problem);
            code = problem ? 1 : 0;
            if (comm.rank() == 0) {
                if (cl.json) {
                    std::cout << env::all_ranks_json(reports, comparison).dump(2) << '\n';
                } else {
                    std::cout << env::render_all_ranks_markdown(reports, comparison, colour_wanted(cl.colour));
                }
                std::cout.flush();
            }
        }
        return code;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "lockstep env: {}\n", e.what());
        return 1;
    } catch (const Error& e) {
        fmt::print(stderr, "lockstep env --all-ranks: {}\n", e.what());
        return 1;
    }
}

int run(const CommandLine& cl) {
    if (cl.all_ranks) return run_all_ranks(cl);
    const json report = env::collect_report();
    if (cl.json) {
        std::cout << report.dump(2) << '\n';
    } else {
        std::cout << env::render_markdown(report, colour_wanted(cl.colour));
    }
    return env::report_has_problem(report) ? 1 : 0;
}

}  // namespace

Subcommand add_env_command(CLI::App& parent) {
    auto cl = std::make_shared<CommandLine>();
    CLI::App* app = parent.add_subcommand(
        "env",
        "Print the environment for a bug report: lockstep version and commit, OS and kernel, compiler, MPI library "
        "and whether it is CUDA-aware, CUDA versions and every GPU, CPU, RAM, /dev/shm, the config file and its "
        "resolved settings, and the LOCKSTEP_*, OMPI_*, PMI*, SLURM_* variables and SLURMD_NODENAME.");
    app->footer(
        "Exit status: 0 report printed; 1 the config file cannot be used, or (--all-ranks) ranks differ in a\n"
        "job-wide field (per-node and per-rank fields such as SLURMD_NODENAME or PMIX_RANK are expected to differ);\n"
        "2 usage error. The JSON schema is described in docs/cli.md.\n"
        "--all-ranks runs on every rank of a job: lockstep launch -n 4 -- lockstep env --all-ranks");
    app->add_flag("--json", cl->json, "Print JSON (schema lockstep.env/1) instead of Markdown");
    app->add_flag("--all-ranks", cl->all_ranks,
                  "Start MPI, gather the report of every rank and show where ranks differ (run under a launcher)");
    app->add_option("--color", cl->colour, "Colour warnings: auto (only on a terminal), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    return Subcommand{app, [cl] { return run(*cl); }};
}

}  // namespace lockstep::tools
