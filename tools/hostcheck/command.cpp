// `lockstep hostcheck HOSTFILE`: the command line of the hostfile checker. Parsing only; the work is in hostcheck.cpp.

#include "../subcommand.hpp"
#include "hostcheck.hpp"
#include "mpi_launcher/display_text.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

namespace lockstep::tools {
namespace {

namespace hc = lockstep::hostcheck;
namespace ml = lockstep::mpi_launcher;

struct CommandLine {
    hc::Options options;
    std::string format = "auto";
    int timeout = 10;
    int max_time = 0;
    int mpirun_timeout = 60;
    std::size_t mesh_sample = 0;
    bool mesh = false;
    bool no_mesh = false;
    std::string launcher = "auto";
    std::string ssh_command;
    std::vector<std::string> skip;
    bool json = false;
    bool all_lines = false;
    bool no_fold = false;
    std::string nodelist;
    std::string colour = "auto";
};

bool colour_wanted(const std::string& setting) {
    if (setting == "always") return true;
    if (setting == "never") return false;
    const char* term = std::getenv("TERM");
    return ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr &&
           !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

// A one-line progress display on stderr, redrawn at most ten times a second; only on a terminal.
class Progress {
public:
    Progress() : enabled_(::isatty(STDERR_FILENO) == 1) {}
    ~Progress() { clear(); }
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    void update(std::string_view stage, std::size_t done, std::size_t total) {
        if (!enabled_) return;
        const auto now = ml::Clock::now();
        if (done != total && now - last_ < std::chrono::milliseconds(100)) return;
        last_ = now;
        fmt::print(stderr, "\r\033[K{}: {}/{}", stage, done, total);
        std::fflush(stderr);
        shown_ = true;
    }
    void clear() {
        if (shown_) fmt::print(stderr, "\r\033[K");
        shown_ = false;
    }

private:
    bool enabled_;
    bool shown_ = false;
    ml::Clock::time_point last_{};
};

void print_json(const nlohmann::json& j) {
    // Replace, not throw, on bytes that are not UTF-8: ssh's evidence is whatever the remote side printed.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

int run(CommandLine& cl) {
    auto& o = cl.options;
    try {
        if (cl.format != "auto") o.format = hc::parse_hostfile_format(cl.format);
        o.timeout = std::chrono::seconds(cl.timeout);
        if (cl.max_time > 0) o.max_time = std::chrono::seconds(cl.max_time);
        o.mpirun_timeout = std::chrono::seconds(cl.mpirun_timeout);
        if (cl.mesh_sample > 0) o.mesh_sample = cl.mesh_sample;
        o.mesh = cl.mesh ? hc::MeshMode::On : cl.no_mesh ? hc::MeshMode::Off : hc::MeshMode::Automatic;
        if (!cl.ssh_command.empty()) o.ssh_command = cl.ssh_command;
        o.launcher = ml::parse_launcher(cl.launcher);  // nullopt for "auto"
        o.skip.insert(cl.skip.begin(), cl.skip.end());
        if (!cl.nodelist.empty()) {
            o.nodelist = cl.nodelist;
            o.nodelist_origin = "-w";
        } else if (const char* allocation = std::getenv("SLURM_JOB_NODELIST");
                   o.hostfile.empty() && allocation != nullptr && *allocation != '\0') {
            // Inside an allocation the job's nodes are the hosts to check, as srun would use them.
            o.nodelist = allocation;
            o.nodelist_origin = "SLURM_JOB_NODELIST";
        }

        Progress progress;
        o.progress = [&progress](std::string_view stage, std::size_t done, std::size_t total) {
            progress.update(stage, done, total);
        };
        const hc::Report report = hc::run_hostcheck(o);
        progress.clear();
        if (cl.json) {
            hc::write_json(std::cout, report);
        } else {
            hc::print_text(std::cout, report, hc::TextStyle{colour_wanted(cl.colour), cl.all_lines, !cl.no_fold});
        }
        std::cout.flush();
        return report.exit_code();
    } catch (const hc::HostfileError& e) {
        fmt::print(stderr, "lockstep hostcheck: {}\n", ml::escape_control(e.what(), true));
        if (cl.json) print_json(hc::error_json("hostfile", e.what(), e.errors()));
        return 2;
    } catch (const hc::UsageError& e) {
        fmt::print(stderr, "lockstep hostcheck: {}\n", ml::escape_control(e.what(), true));
        if (cl.json) print_json(hc::error_json("usage", e.what()));
        return 2;
    } catch (const ml::InterruptedError& e) {
        fmt::print(stderr,
                   "\nlockstep hostcheck: interrupted by signal {}; every check that was running has been stopped\n",
                   e.signal_number());
        return 128 + e.signal_number();
    }
}

}  // namespace

Subcommand add_hostcheck_command(CLI::App& parent) {
    auto cl = std::make_shared<CommandLine>();
    CLI::App* app = parent.add_subcommand(
        "hostcheck", "Check that every host of a hostfile can take part in an MPI job (names, ssh, MPI, mpirun)");
    app->footer(
        "Parses the hostfile as each MPI would, resolves the names, probes passwordless ssh to every host (and\n"
        "between hosts), compares the MPI installed on each, and runs the classic 'mpirun ... hostname' check. Every\n"
        "failure comes with ssh's exact text and a remedy; the whole run ends within a known time bound. Hosts that\n"
        "are this machine need no ssh; srun needs none at all.\n\n"
        "Exit status: 0 no problem found ('all well' only when no check was skipped), 1 problems found, 2 usage\n"
        "or hostfile error. Alike hosts share one line of the table, their names folded (node[01-08,10]).\n"
        "The ssh command is the one mpirun uses: --ssh-command, else Open MPI's plm_rsh_agent (OMPI_MCA_plm_rsh_agent\n"
        "or mca-params.conf), else Hydra's HYDRA_LAUNCHER_EXEC, else ssh. The JSON schema is in docs/hostcheck.md.");
    app->add_option("hostfile", cl->options.hostfile,
                    "The hostfile (OpenMPI, Hydra, plain or Slurm node-list form); '-' reads it from stdin. "
                    "Default inside a Slurm allocation: the job's nodes (SLURM_JOB_NODELIST)");
    app->add_option("--nodelist,-w", cl->nodelist,
                    "Check these hosts instead of a hostfile's: a Slurm node list, e.g. node[01-08,10],login1");
    app->add_option("--format", cl->format, "Hostfile form; detected from the lines when auto")
        ->check(CLI::IsMember({"auto", "openmpi", "hydra", "plain", "slurm"}))
        ->capture_default_str();
    app->add_option("--fanout,-f", cl->options.fanout, "How many hosts to check at once")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    app->add_option("--timeout,-t", cl->timeout, "Seconds allowed for each host (ssh ConnectTimeout and the check)")
        ->check(CLI::Range(1, 3600))
        ->capture_default_str();
    app->add_option("--max-time", cl->max_time,
                    "Seconds the whole run may take; hosts not checked by then are reported as timeout "
                    "(default: the sum of each stage's own bound)")
        ->check(CLI::Range(1, 86400));
    app->add_option("--ssh-command", cl->ssh_command,
                    "The ssh command to probe with, e.g. 'ssh -F ~/cluster/ssh_config' (default: what mpirun uses)");
    auto* mesh = app->add_flag(
        "--mesh", cl->mesh, "Check ssh between every pair of nodes (on by default when Open MPI's tree spawn is on)");
    auto* no_mesh = app->add_flag("--no-mesh", cl->no_mesh, "Never check ssh between nodes");
    mesh->excludes(no_mesh);
    app->add_option("--mesh-sample", cl->mesh_sample,
                    "Each node tries only this many others (default: all, or 16 when more than 32 nodes)")
        ->check(CLI::Range(1, 100000));
    app->add_option("--mpirun-timeout", cl->mpirun_timeout, "Seconds the mpirun check may take before it is a hang")
        ->check(CLI::Range(1, 3600))
        ->capture_default_str();
    app->add_option("--launcher", cl->launcher, "Launcher for the mpirun check")
        ->check(CLI::IsMember({"auto", "openmpi", "hydra", "srun"}))
        ->capture_default_str();
    app->add_option("--skip", cl->skip, "Stages to leave out: resolve, probe, mesh, mpirun (repeat or comma-separate)")
        ->delimiter(',')
        ->allow_extra_args(false)  // one word per --skip: the hostfile after it is not a stage
        ->check(CLI::IsMember({"resolve", "probe", "mesh", "mpirun"}));
    app->add_flag("--json", cl->json, "Print the report as JSON (schema lockstep.hostcheck/1) instead of a table");
    app->add_flag("--no-fold", cl->no_fold,
                  "One table line per host; by default alike hosts share one line with their names folded into a "
                  "node list (node[01-08,10])");
    app->add_flag("--lines", cl->all_lines,
                  "Show how OpenMPI and Hydra read every hostfile line, not only notable ones");
    app->add_option("--color", cl->colour,
                    "Colour the table: auto (only on a terminal, not with NO_COLOR), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    return Subcommand{app, [cl] { return run(*cl); }};
}

}  // namespace lockstep::tools
