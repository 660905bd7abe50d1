// `lockstep launch [options] [--] program [args...]`: the command line of the launcher. The command is built in
// launcher.cpp; this file parses the flags, picks the MPI flavour and runs (or prints) the result.

#include "../subcommand.hpp"
#include "launcher.hpp"
#include "mpi_launcher/child_process.hpp"
#include "mpi_launcher/flavour.hpp"
#include "mpi_launcher/launch_failure.hpp"
#include "mpi_launcher/launcher_command.hpp"
#include "mpi_launcher/pmi.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string_view>

namespace lockstep::tools {
namespace {

namespace ln = lockstep::launch;
namespace ml = lockstep::mpi_launcher;

struct CommandLine {
    std::optional<int> num_processes;
    std::optional<std::string> hostfile;
    std::optional<int> npernode;
    bool oversubscribe = false;
    bool debug = false;
    bool no_debug = false;
    std::optional<std::string> log_level;
    std::optional<std::string> timeout;
    std::optional<std::string> config_file;
    std::optional<std::string> trace_file;
    std::string mpirun_args;
    std::string launcher = "auto";
    std::optional<std::string> launcher_path;
    bool dry_run = false;
    bool json = false;
    bool no_torch_env = false;
    bool check = false;
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
    const std::string mpirun = cl.launcher_path.value_or(std::string(ln::built_mpi_launcher()));
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

constexpr auto query_timeout = std::chrono::seconds(20);
// srun retries a configuration it cannot read for a minute; the choice is then made from the MPI library alone.
constexpr auto srun_query_timeout = std::chrono::seconds(10);

// What a query printed, when it ran and exited 0.
std::optional<std::string> query_output(std::vector<std::string> argv,
                                        std::chrono::milliseconds timeout = query_timeout) {
    ml::Command query;
    query.argv = std::move(argv);
    query.timeout = timeout;
    const ml::CommandResult result = ml::run_command(query);
    if (result.ending != ml::CommandResult::Ending::Exited || result.exit_code != 0) return std::nullopt;
    return result.out;
}

// srun's PMI plugin for the MPI on PATH: `mpirun --version` (the launcher of the MPI lockstep is built against) says
// which MPI it is, Open MPI's ompi_info (next to that mpirun, else on PATH) what it was built for, and `srun
// --mpi=list` what this Slurm has.
ml::PmiChoice choose_pmi(const std::string& srun) {
    ml::MpiInstall mpi;
    const std::string mpirun = ml::find_program(std::string(ln::built_mpi_launcher()));
    if (!mpirun.empty()) mpi = ml::parse_mpi_version(ml::version_output(mpirun, query_timeout));
    std::optional<ml::OpenMpiPmi> open_mpi;
    if (mpi.flavour == ml::MpiFlavour::OpenMpi || mpi.flavour == ml::MpiFlavour::None) {
        std::string ompi_info;
        if (!mpirun.empty()) ompi_info = ml::find_program(std::filesystem::path(mpirun).replace_filename("ompi_info"));
        if (ompi_info.empty()) ompi_info = ml::find_program("ompi_info");
        if (!ompi_info.empty()) {
            if (const auto text = query_output({ompi_info, "--parsable"})) {
                open_mpi = ml::parse_ompi_info_pmi(*text);
                if (open_mpi->version.empty() && open_mpi->components.empty()) open_mpi.reset();
            }
        }
    }
    std::optional<std::vector<std::string>> offered;
    if (const auto text = query_output({srun, "--mpi=list"}, srun_query_timeout))
        offered = ml::parse_srun_mpi_list(*text);
    return ml::choose_srun_pmi(mpi, open_mpi, offered);
}

// The program must exist here before a launcher is started for it (the launchers' own messages for a missing
// program are long, and mpirun's exit status for it is its own). Found as execvp finds it: a name with a '/' as a
// path, any other on PATH. Returns the exit status a shell gives (127 not found, 126 not executable) and a message.
std::optional<std::pair<int, std::string>> check_program(const std::string& program) {
    if (program.find('/') == std::string::npos) {
        if (!ml::find_program(program).empty()) return std::nullopt;
        return std::pair(127, fmt::format("'{}' was not found on PATH; give its path (./{} for one in this "
                                          "directory) or put its directory on PATH",
                                          program, program));
    }
    struct stat st {};
    if (::stat(program.c_str(), &st) != 0) {
        return std::pair(127, fmt::format("'{}' does not exist{}", program,
                                          program.starts_with("/") ? "" : " (relative to this directory)"));
    }
    if (S_ISDIR(st.st_mode)) return std::pair(126, fmt::format("'{}' is a directory, not a program", program));
    if (::access(program.c_str(), X_OK) != 0) {
        return std::pair(126, fmt::format("'{}' is not executable; chmod +x it", program));
    }
    return std::nullopt;
}

// lockstep-rank-env, installed next to this program (and built next to it).
std::string rank_env_program() {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw ln::LaunchError(fmt::format("cannot find this program's own path: {}", ec.message()));
    const auto wrapper = self.parent_path() / "lockstep-rank-env";
    if (::access(wrapper.c_str(), X_OK) != 0) {
        throw ln::LaunchError(
            fmt::format("'{}' is missing or not executable: it gives every rank torchrun's variables and is "
                        "installed next to lockstep; reinstall lockstep, or launch without them (--no-torch-env)",
                        wrapper.string()));
    }
    return wrapper.string();
}

// liblockstep_check.so: LOCKSTEP_CHECK_LIBRARY if set, else in this build tree (check/ beside tools/), else in the
// installation's libdir (found from this program's folder, wherever the installation was moved).
std::string check_library() {
    const char* chosen = std::getenv("LOCKSTEP_CHECK_LIBRARY");
    std::vector<std::filesystem::path> candidates;
    if (chosen != nullptr && *chosen != '\0') {
        candidates.emplace_back(chosen);
    } else {
        std::error_code ec;
        const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
        if (ec) throw ln::LaunchError(fmt::format("cannot find this program's own path: {}", ec.message()));
        candidates.push_back(self.parent_path().parent_path() / "check" / "liblockstep_check.so");
        candidates.push_back(self.parent_path() / LOCKSTEP_LIBDIR_FROM_BINDIR / "liblockstep_check.so");
    }
    std::string tried;
    for (const auto& candidate : candidates) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(candidate, ec)) {
            return std::filesystem::absolute(candidate, ec).lexically_normal().string();
        }
        tried += (tried.empty() ? "" : ", ") + candidate.lexically_normal().string();
    }
    throw ln::LaunchError(
        fmt::format("--check: the checking library liblockstep_check.so is not at {}; build or "
                    "install it, or name it in LOCKSTEP_CHECK_LIBRARY",
                    tried));
}

// A TCP port free on this machine now, for torch's rendezvous: the one the kernel gives a socket bound to port 0.
std::optional<int> free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::nullopt;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    std::optional<int> port;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
        port = ntohs(address.sin_port);
    }
    ::close(fd);
    return port;
}

// One line after a failed job that says what the launcher's own text does not: which flag fixes it.
void print_failure_hint(const ln::Plan& plan, const ml::ForegroundResult& result, const std::string& program) {
    auto failure = ml::recognise_launch_failure(result.stderr_head);
    if (failure == ml::LaunchFailure::None) failure = ml::recognise_launch_failure(result.stderr_tail);
    switch (failure) {
        case ml::LaunchFailure::None:
            return;
        case ml::LaunchFailure::NotEnoughSlots:
            fmt::print(stderr,
                       "lockstep launch: there are fewer slots than the {} processes asked for ({}); a slot is a "
                       "core of this machine, or a hostfile's slots=N. Start fewer processes (-n), give more hosts or "
                       "slots in "
                       "the hostfile, or start more processes than slots with --oversubscribe (they then share "
                       "cores).\n",
                       plan.num_processes, plan.num_processes_source);
            return;
        case ml::LaunchFailure::PmiMissing:
        case ml::LaunchFailure::PmiInit: {
            if (plan.launcher != ml::Launcher::Srun) {
                fmt::print(stderr,
                           "lockstep launch: the ranks failed in MPI_Init while connecting to the launcher's PMI "
                           "server; is '{}' built against the MPI of the mpirun that started it ({})?\n",
                           program, plan.command.front());
                return;
            }
            const std::string used = plan.pmi_plugin
                                         ? fmt::format("srun's PMI plugin '{}' ({})", *plan.pmi_plugin, plan.pmi_source)
                                         : fmt::format("no srun PMI plugin ({})", plan.pmi_source);
            const bool used_pmix = plan.pmi_plugin && plan.pmi_plugin->starts_with("pmix");
            const std::string advice =
                used_pmix ? "Slurm's PMIx plugin and the PMIx of the MPI library may not work together: try another "
                            "version that 'srun --mpi=list' shows (--mpirun-args=--mpi=pmix_vN), or start the job "
                            "with mpirun (--launcher openmpi)"
                          : "Open MPI needs 'pmix' (or 'pmi2' when built with Slurm's PMI-2), MPICH and Intel MPI "
                            "'pmi2': try --mpirun-args=--mpi=pmix (or set SLURM_MPI_TYPE)";
            fmt::print(stderr,
                       "lockstep launch: the ranks failed in MPI_Init: they were started with {}. {}; 'srun "
                       "--mpi=list' shows the plugins this Slurm has, 'ompi_info | grep pmix' what Open MPI was built "
                       "for.\n",
                       used, advice);
            return;
        }
        case ml::LaunchFailure::ProgramNotFound:
            fmt::print(stderr,
                       "lockstep launch: '{}' could not be executed on some node, though it exists here; install it "
                       "at the same path on every node (or on a shared file system).\n",
                       program);
            return;
    }
}

// Whether lockstep's watchdog ended the job (the last line of its report, which every rank's stderr reaches the
// launcher's through). Some launchers exit 0 whatever their processes' exits: Open MPI 4.1's mpirun with
// --enable-recovery does even after MPI_Abort, so the watchdog cannot make that job end non-zero from inside it.
bool ended_by_watchdog(const ml::ForegroundResult& result) {
    constexpr std::string_view ending = "Ending the job (exit code 124).";
    return result.stderr_head.find(ending) != std::string::npos || result.stderr_tail.find(ending) != std::string::npos;
}

void print_plan_text(const ln::Plan& plan, const Detection& detection) {
    fmt::print("# launcher: {} ({})\n", ml::to_string(plan.launcher), detection.reason);
    fmt::print("# processes: {} ({})\n", plan.num_processes, plan.num_processes_source);
    if (plan.num_nodes) fmt::print("# nodes: {} ({})\n", *plan.num_nodes, plan.num_nodes_source);
    if (plan.launcher == ml::Launcher::Srun) {
        fmt::print("# pmi: {} ({})\n", plan.pmi_plugin.value_or("none passed"), plan.pmi_source);
    }
    fmt::print("# config file: {}\n", plan.config_file.value_or("none"));
    if (!plan.master_addr_source.empty()) fmt::print("# MASTER_ADDR: {}\n", plan.master_addr_source);
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
    j["num_nodes"] = plan.num_nodes ? nlohmann::json(*plan.num_nodes) : nlohmann::json(nullptr);
    j["num_nodes_source"] = plan.num_nodes ? nlohmann::json(plan.num_nodes_source) : nlohmann::json(nullptr);
    if (plan.launcher == ml::Launcher::Srun) {
        j["pmi"] = {{"plugin", plan.pmi_plugin ? nlohmann::json(*plan.pmi_plugin) : nlohmann::json(nullptr)},
                    {"source", plan.pmi_source}};
    } else {
        j["pmi"] = nullptr;
    }
    j["config_file"] = plan.config_file ? nlohmann::json(*plan.config_file) : nlohmann::json(nullptr);
    j["master_addr_source"] =
        plan.master_addr_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.master_addr_source);
    j["environment"] = plan.set_variables;
    j["forwarded"] = plan.forwarded;
    j["command"] = plan.command;
    j["warnings"] = plan.warnings;
    std::cout << j.dump(2) << '\n';
}

// After a job launched with --trace: where its trace is, or why there is none.
void say_where_the_trace_went(const std::string& file, std::filesystem::file_time_type launched, int status) {
    std::error_code ec;
    const auto written = std::filesystem::last_write_time(file, ec);
    if (!ec && written >= launched) {
        fmt::print(stderr,
                   "lockstep launch: the trace of every rank's last calls is in {} (summary in {}.txt); draw it with "
                   "`lockstep trace show {}` or open it in https://ui.perfetto.dev\n",
                   file, file, file);
    } else if (status == 0) {
        fmt::print(stderr,
                   "lockstep launch: warning: no trace was written to {}: the program ended without finalizing "
                   "lockstep (Runtime::finalize; MPI_Finalize under --check)\n",
                   file);
    }
}

int run(const CommandLine& cl, const std::vector<std::string>& program) {
    try {
        ln::Request request;
        request.num_processes = cl.num_processes;
        if (cl.hostfile) {
            // Absolute, so that the launcher (and srun's slurmstepd) read the same file whatever their directory.
            std::error_code ec;
            const auto absolute = std::filesystem::absolute(*cl.hostfile, ec);
            request.hostfile = ec ? *cl.hostfile : absolute.lexically_normal().string();
        }
        request.npernode = cl.npernode;
        request.oversubscribe = cl.oversubscribe;
        if (cl.debug) request.debug = true;
        if (cl.no_debug) request.debug = false;
        request.log_level = cl.log_level;
        request.timeout = cl.timeout;
        request.config_file = cl.config_file;
        request.trace_file = cl.trace_file;
        request.job_id = fmt::format("launch-{}", ::getpid());
        request.mpirun_args = ln::split_shell_words(cl.mpirun_args, "--mpirun-args");
        request.launcher_path = cl.launcher_path;
        request.program = program;
        if (cl.check) request.check_library = check_library();
        if (!cl.no_torch_env) {
            request.rank_env_program = rank_env_program();
            request.master_port = free_port();
        }

        const ln::Environment env = ln::current_environment();
        // A usage problem in the flags is reported before the MPI installation is asked anything.
        (void)ln::plan_launch(request, ml::Launcher::OpenMpi, env, false);
        const Detection detection = detect_launcher(cl, env);
        if (detection.launcher == ml::Launcher::Srun && !ln::user_pmi_choice(request.mpirun_args, env)) {
            request.pmi = choose_pmi(cl.launcher_path.value_or("srun"));
        }
        const ln::Plan plan = ln::plan_launch(request, detection.launcher, env, ::geteuid() == 0);
        for (const auto& warning : plan.warnings) fmt::print(stderr, "lockstep launch: warning: {}\n", warning);
        const auto missing = check_program(program.front());
        if (cl.dry_run) {
            if (missing) fmt::print(stderr, "lockstep launch: warning: {}\n", missing->second);
            if (cl.json) {
                print_plan_json(plan, detection);
            } else {
                print_plan_text(plan, detection);
            }
            return 0;
        }
        if (missing) {
            fmt::print(stderr, "lockstep launch: {}\n", missing->second);
            return missing->first;
        }
        std::cout.flush();
        // Hydra names the signal that ended a rank on its stdout.
        const bool hydra = plan.launcher == ml::Launcher::Hydra;
        const auto launched = std::filesystem::file_time_type::clock::now();
        const ml::ForegroundResult result =
            ml::run_in_foreground_watching_stderr(plan.command, plan.environment, hydra);
        if (result.status != 0) print_failure_hint(plan, result, program.front());
        if (request.trace_file) say_where_the_trace_went(*request.trace_file, launched, result.status);
        if (hydra && result.status != 0) return ml::hydra_exit_status(result.status, result.stdout_end);
        if (result.status == 0 && ended_by_watchdog(result)) {
            fmt::print(stderr,
                       "lockstep launch: lockstep's watchdog ended the job (exit code 124), though {} exited 0 (its "
                       "settings let a job run on when processes exit non-zero)\n",
                       plan.command.front());
            return 124;
        }
        return result.status;
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
        "Start a program on every rank with the MPI launcher of this machine (OpenMPI's or MPICH/Intel's mpirun, or "
        "srun inside a Slurm allocation). The flags become LOCKSTEP_* variables forwarded to every rank on every "
        "node; they override the config file.");
    app->footer(
        "Settings, highest first: flag > LOCKSTEP_* variable > config file > default. Without -n the config file's\n"
        "num_processes is used, else 1.\n"
        "Inside a Slurm allocation (SLURM_JOB_ID) without -n, SLURM_NTASKS comes before the config file, and srun "
        "gets\n"
        "the PMI plugin the MPI on PATH was built for (ompi_info, srun --mpi=list) unless --mpirun-args has --mpi or\n"
        "SLURM_MPI_TYPE is set.\n"
        "Every rank gets torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
        "GROUP_WORLD_SIZE, ROLE_*, MASTER_ADDR, MASTER_PORT) from lockstep-rank-env, which runs in front of PROGRAM,\n"
        "so that a script written for torchrun runs unchanged; MASTER_ADDR and MASTER_PORT set by the user are kept.\n"
        "MASTER_ADDR is 127.0.0.1 on one node, else the hostfile's first host or the Slurm node list's first host.\n"
        "Exit status: the program's (128+N when signal N ended it; 124 when lockstep's watchdog ended a hung job, "
        "even\n"
        "where the launcher exits 0); 127 when PROGRAM is not found, 126 when it is not executable; 1 when the "
        "launcher\n"
        "cannot be found or started; 2 for a usage error or a malformed config file.");
    app->add_option("-n,--num-processes", cl->num_processes,
                    "How many ranks to start (default: SLURM_NTASKS in an allocation, config file, else 1)")
        ->check(CLI::Range(1, 1 << 24));
    app->add_option("--hostfile", cl->hostfile,
                    "Hostfile of the machines to run on (mpirun --hostfile / -f, srun --nodefile)")
        ->option_text("FILE");
    app->add_option("--npernode", cl->npernode, "Ranks per node")->check(CLI::Range(1, 1 << 20));
    app->add_flag("--oversubscribe", cl->oversubscribe,
                  "Allow more ranks than slots (cores): mpirun --oversubscribe, srun --overcommit");
    auto* debug = app->add_flag("--debug", cl->debug, "Debug mode on: check every collective's arguments across ranks");
    auto* no_debug = app->add_flag("--no-debug", cl->no_debug, "Debug mode off, whatever the config file says");
    debug->excludes(no_debug);
    app->add_option("--log-level", cl->log_level, "DEBUG, INFO, WARNING, ERROR or CRITICAL");
    app->add_option("--timeout", cl->timeout, "Seconds a collective may take before it is reported as a hang")
        ->option_text("SECONDS");
    app->add_option("--config", cl->config_file,
                    "Config file to use instead of the default one (forwarded to every rank)")
        ->option_text("FILE");
    app->add_option("--trace", cl->trace_file,
                    "Write a trace of every rank's last calls to this file when the job ends (LOCKSTEP_TRACE_FILE)");
    app->add_option("--mpirun-args", cl->mpirun_args,
                    "More arguments for mpirun/srun, split like a shell would (quotes kept, nothing expanded)");
    app->add_option("--launcher", cl->launcher,
                    "Launcher flavour; auto: srun inside Slurm, else what mpirun (mpiexec.mpich in a build against "
                    "MPICH) says it is")
        ->check(CLI::IsMember({"auto", "openmpi", "hydra", "srun"}))
        ->capture_default_str();
    app->add_option("--mpirun", cl->launcher_path, "The mpirun or srun program to run (default: found on PATH)")
        ->option_text("PATH");
    app->add_flag("--no-torch-env", cl->no_torch_env,
                  "Start the program as it is, without torchrun's variables (RANK, LOCAL_RANK, MASTER_ADDR, ...)");
    app->add_flag("--check", cl->check,
                  "Preload the checking library (liblockstep_check.so) on every rank of an unmodified MPI program: the "
                  "watchdog for its MPI calls; with --debug, every collective's signature checked too");
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
