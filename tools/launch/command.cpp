// `lockstep launch [options] [--] program [args...]`: the command line of the launcher. The command is built in
// launcher.cpp; this file parses the flags, picks the MPI flavour and runs (or prints) the result.

#include "../subcommand.hpp"
#include "launcher.hpp"
#include "mpi_launcher/child_process.hpp"
#include "mpi_launcher/flavour.hpp"
#include "mpi_launcher/launcher_command.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <memory>

namespace lockstep::tools {
namespace {

namespace ln = lockstep::launch;
namespace ml = lockstep::mpi_launcher;

struct CommandLine {
    std::optional<int> num_processes;
    std::optional<std::string> hostfile;
    std::optional<int> npernode;
    bool debug = false;
    bool no_debug = false;
    std::optional<std::string> log_level;
    std::optional<std::string> timeout;
    std::optional<std::string> config_file;
    std::string mpirun_args;
    std::string launcher = "auto";
    std::optional<std::string> launcher_path;
    bool dry_run = false;
    bool json = false;
};

struct Detection {
    ml::Launcher launcher;
    std::string reason;
};

// Inside a Slurm allocation srun is the launcher that knows the allocation; elsewhere mpirun says what it is.
Detection detect_launcher(const CommandLine& cl, const ln::Environment& env) {
    if (cl.launcher != "auto") return {*ml::parse_launcher(cl.launcher), "--launcher " + cl.launcher};
    if (const auto job = env.find("SLURM_JOB_ID"); job != env.end() && !job->second.empty()) {
        return {ml::Launcher::Srun, fmt::format("inside Slurm allocation {} (SLURM_JOB_ID)", job->second)};
    }
    const std::string mpirun = cl.launcher_path.value_or("mpirun");
    if (ml::find_program(mpirun).empty()) {
        throw ln::LaunchError(
            fmt::format("'{}' was not found{}; install OpenMPI or MPICH, put its bin directory on "
                        "PATH, or name the launcher with --mpirun PATH",
                        mpirun, mpirun.find('/') == std::string::npos ? " on PATH" : ""));
    }
    const std::string version = ml::version_output(mpirun, std::chrono::seconds(20));
    if (const auto launcher = ml::launcher_for(ml::parse_mpi_version(version).flavour)) {
        const std::string first_line = version.substr(0, version.find('\n'));
        return {*launcher, fmt::format("'{} --version' says: {}", mpirun, first_line)};
    }
    throw ln::LaunchError(
        fmt::format("cannot tell which MPI '{}' belongs to: '{} --version' printed '{}'; name it "
                    "with --launcher openmpi or --launcher hydra",
                    mpirun, mpirun, version.substr(0, 200)));
}

void print_plan_text(const ln::Plan& plan, const Detection& detection) {
    fmt::print("# launcher: {} ({})\n", ml::to_string(plan.launcher), detection.reason);
    fmt::print("# processes: {} ({})\n", plan.num_processes, plan.num_processes_source);
    fmt::print("# config file: {}\n", plan.config_file.value_or("none"));
    for (const auto& [name, value] : plan.set_variables) fmt::print("export {}={}\n", name, ln::shell_quote(value));
    std::string line;
    for (const auto& word : plan.command) line += (line.empty() ? "" : " ") + ln::shell_quote(word);
    fmt::print("{}\n", line);
}

void print_plan_json(const ln::Plan& plan, const Detection& detection) {
    nlohmann::json j;
    j["launcher"] = ml::to_string(plan.launcher);
    j["detected_from"] = detection.reason;
    j["num_processes"] = plan.num_processes;
    j["num_processes_source"] = plan.num_processes_source;
    j["config_file"] = plan.config_file ? nlohmann::json(*plan.config_file) : nlohmann::json(nullptr);
    j["environment"] = plan.set_variables;
    j["forwarded"] = plan.forwarded;
    j["command"] = plan.command;
    j["warnings"] = plan.warnings;
    std::cout << j.dump(2) << '\n';
}

int run(const CommandLine& cl, const std::vector<std::string>& program) {
    try {
        ln::Request request;
        request.num_processes = cl.num_processes;
        request.hostfile = cl.hostfile;
        request.npernode = cl.npernode;
        if (cl.debug) request.debug = true;
        if (cl.no_debug) request.debug = false;
        request.log_level = cl.log_level;
        request.timeout = cl.timeout;
        request.config_file = cl.config_file;
        request.mpirun_args = ln::split_shell_words(cl.mpirun_args, "--mpirun-args");
        request.launcher_path = cl.launcher_path;
        request.program = program;

        const ln::Environment env = ln::current_environment();
        // A usage problem in the flags is reported before the MPI installation is asked anything.
        const ln::Plan checked = ln::plan_launch(request, ml::Launcher::OpenMpi, env, false);
        const Detection detection = detect_launcher(cl, env);
        const ln::Plan plan = ln::plan_launch(request, detection.launcher, env, ::geteuid() == 0);
        for (const auto& warning : checked.warnings) fmt::print(stderr, "lockstep launch: warning: {}\n", warning);
        if (cl.dry_run) {
            if (cl.json) {
                print_plan_json(plan, detection);
            } else {
                print_plan_text(plan, detection);
            }
            return 0;
        }
        std::cout.flush();
        return ml::run_in_foreground(plan.command, plan.environment);
    } catch (const ln::UsageError& e) {
        fmt::print(stderr, "lockstep launch: {}\n", e.what());
        return 2;
    } catch (const ln::LaunchError& e) {
        fmt::print(stderr, "lockstep launch: {}\n", e.what());
        return 1;
    } catch (const ml::SpawnError& e) {
        fmt::print(stderr, "lockstep launch: {}\n", e.what());
        return 1;
    } catch (const ml::InterruptedError& e) {
        // Interrupted while asking mpirun what it is; nothing was launched. The status a shell gives a signalled
        // program.
        return 128 + e.signal_number();
    }
}

// Cuts the program and its arguments off the command line before it is parsed, so that the program's own options
// (say, its --debug) are never read as the launcher's: the program starts after '--', or at the first word that is
// neither an option of `launch` nor an option's value.
std::vector<std::string> set_aside_program(const CLI::App& launch, std::vector<std::string> args,
                                           std::vector<std::string>& program) {
    const auto command =
        std::find_if(args.begin(), args.end(), [](const std::string& a) { return !a.starts_with("-"); });
    if (command == args.end() || *command != launch.get_name()) return args;
    for (auto it = command + 1; it != args.end(); ++it) {
        const std::string& arg = *it;
        if (arg == "--") {
            program.assign(it + 1, args.end());
            args.erase(it, args.end());
            return args;
        }
        if (arg.size() < 2 || arg.front() != '-') {
            program.assign(it, args.end());
            args.erase(it, args.end());
            return args;
        }
        // "--name=value" and "-n4" carry their value; "--name value" and "-n 4" take the next word.
        const bool long_form = arg.starts_with("--");
        const std::size_t eq = arg.find('=');
        if (long_form && eq != std::string::npos) continue;
        if (!long_form && arg.size() > 2) continue;
        const CLI::Option* option = launch.get_option_no_throw(long_form ? arg.substr(0, eq) : arg);
        if (option != nullptr && option->get_expected_min() > 0 && it + 1 != args.end()) ++it;
    }
    return args;
}

}  // namespace

Subcommand add_launch_command(CLI::App& parent) {
    auto cl = std::make_shared<CommandLine>();
    CLI::App* app = parent.add_subcommand(
        "launch",
        "lockstep launch [OPTIONS] [--] PROGRAM [ARGS...]\n"
        "Start a program on every rank with the MPI launcher of this machine (OpenMPI's or MPICH/Intel's mpirun, or "
        "srun inside a Slurm allocation). The flags become LOCKSTEP_* variables forwarded to every rank on every "
        "node; they override the config file.");
    app->footer(
        "Settings, highest first: flag > LOCKSTEP_* variable > config file > default. Without -n the config file's\n"
        "num_processes is used, else 1.\n"
        "Exit status: the program's (128+N when signal N ended it); 1 when the launcher cannot be found or started;\n"
        "2 for a usage error or a malformed config file.");
    app->add_option("-n,--num-processes", cl->num_processes, "How many ranks to start (default: config file, else 1)")
        ->check(CLI::Range(1, 1 << 24));
    app->add_option("--hostfile", cl->hostfile,
                    "Hostfile of the machines to run on (mpirun --hostfile / -f, srun --nodefile)");
    app->add_option("--npernode", cl->npernode, "Ranks per node")->check(CLI::Range(1, 1 << 20));
    auto* debug = app->add_flag("--debug", cl->debug, "Debug mode on: check every collective's arguments across ranks");
    auto* no_debug = app->add_flag("--no-debug", cl->no_debug, "Debug mode off, whatever the config file says");
    debug->excludes(no_debug);
    app->add_option("--log-level", cl->log_level, "DEBUG, INFO, WARNING, ERROR or CRITICAL");
    app->add_option("--timeout", cl->timeout, "Seconds a collective may take before it is reported as a hang");
    app->add_option("--config", cl->config_file,
                    "Config file to use instead of the default one (forwarded to every rank)");
    app->add_option("--mpirun-args", cl->mpirun_args,
                    "More arguments for mpirun/srun, split like a shell would (quotes kept, nothing expanded)");
    app->add_option("--launcher", cl->launcher,
                    "Launcher flavour; auto: srun inside Slurm, else what mpirun says it is")
        ->check(CLI::IsMember({"auto", "openmpi", "hydra", "srun"}))
        ->capture_default_str();
    app->add_option("--mpirun", cl->launcher_path, "The mpirun or srun program to run (default: found on PATH)");
    app->add_flag("--dry-run", cl->dry_run, "Print the exact command and the variables it gets; run nothing");
    app->add_flag("--json", cl->json, "With --dry-run: print the plan as JSON");
    auto program = std::make_shared<std::vector<std::string>>();
    Subcommand sub{app, [cl, program] {
                       if (program->empty()) {
                           fmt::print(stderr,
                                      "lockstep launch: no program given; usage: lockstep launch [OPTIONS] "
                                      "[--] PROGRAM [ARGS...]\n");
                           return 2;
                       }
                       return run(*cl, *program);
                   }};
    sub.take_arguments = [app, program](std::vector<std::string> args) {
        return set_aside_program(*app, std::move(args), *program);
    };
    return sub;
}

}  // namespace lockstep::tools
