// Builds the launcher command. The flags become the same LOCKSTEP_* variables a user could set, listed in
// LOCKSTEP_LAUNCHER_FLAGS so that every rank can tell a launcher flag from an inherited variable; every LOCKSTEP_*
// variable is then forwarded explicitly, because only the launcher's own forwarding reaches ranks on other nodes.

#include "launcher.hpp"

#include <lockstep/config.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

extern char** environ;

namespace lockstep::launch {

std::vector<std::string> split_shell_words(std::string_view text, std::string_view what) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    std::size_t i = 0;
    auto unterminated = [&](std::string_view kind, std::size_t at) {
        return UsageError(
            fmt::format("{}: unterminated {} starting at character {} of '{}'; close it or escape it "
                        "with a backslash",
                        what, kind, at + 1, text));
    };
    while (i < text.size()) {
        const char c = text[i];
        if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) words.push_back(std::move(word));
            word.clear();
            in_word = false;
            ++i;
        } else if (c == '\'') {
            // Everything up to the next single quote is literal.
            const std::size_t end = text.find('\'', i + 1);
            if (end == std::string_view::npos) throw unterminated("single quote", i);
            word.append(text.substr(i + 1, end - i - 1));
            in_word = true;
            i = end + 1;
        } else if (c == '"') {
            // Inside double quotes a backslash escapes only \, ", $ and `, as in sh.
            std::size_t j = i + 1;
            for (;; ++j) {
                if (j >= text.size()) throw unterminated("double quote", i);
                if (text[j] == '"') break;
                if (text[j] == '\\' && j + 1 < text.size() &&
                    std::string_view("\\\"$`").find(text[j + 1]) != std::string_view::npos) {
                    ++j;
                }
                word.push_back(text[j]);
            }
            in_word = true;
            i = j + 1;
        } else if (c == '\\') {
            if (i + 1 >= text.size()) {
                throw UsageError(fmt::format("{}: a trailing backslash in '{}' escapes nothing", what, text));
            }
            word.push_back(text[i + 1]);
            in_word = true;
            i += 2;
        } else {
            word.push_back(c);
            in_word = true;
            ++i;
        }
    }
    if (in_word) words.push_back(std::move(word));
    return words;
}

std::string shell_quote(std::string_view word) {
    const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
    });
    if (plain) return std::string(word);
    std::string out = "'";
    for (char c : word) {
        if (c == '\'') {
            out += "'\\''";
        } else {
            out.push_back(c);
        }
    }
    out += "'";
    return out;
}

Environment current_environment() {
    Environment env;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const std::string_view text(*entry);
        const std::size_t eq = text.find('=');
        if (eq == std::string_view::npos) continue;
        env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
    }
    return env;
}

namespace {

bool is_lockstep_variable(std::string_view name) {
    return name.starts_with("LOCKSTEP_");
}

// A positive count from a Slurm variable; nullopt when unset, empty or not a plain positive number.
std::optional<int> slurm_count(const Environment& environment, const char* name) {
    const auto it = environment.find(name);
    if (it == environment.end() || it->second.empty() || it->second.size() > 9) return std::nullopt;
    int value = 0;
    for (const char c : it->second) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    return value > 0 ? std::optional<int>(value) : std::nullopt;
}

std::optional<std::string> allocation(const Environment& environment) {
    const auto job = environment.find("SLURM_JOB_ID");
    if (job == environment.end() || job->second.empty()) return std::nullopt;
    return job->second;
}

// torch's rendezvous (MASTER_ADDR, MASTER_PORT): the user's when set, else chosen here and forwarded to every rank.
// Rank 0 runs on the first host of the hostfile (mpirun and srun place ranks in order), on this node without one; in
// Slurm the node list is known only on the ranks, where lockstep-rank-env reads it.
void plan_rendezvous(const Request& request, mpi_launcher::Launcher launcher, Plan& plan) {
    auto set = [&](const char* name, const std::string& value) {
        plan.environment[name] = value;
        plan.set_variables[name] = value;
    };
    const auto user_address = plan.environment.find("MASTER_ADDR");
    if (user_address != plan.environment.end() && !user_address->second.empty()) {
        plan.master_addr_source = "environment MASTER_ADDR";
        plan.set_variables["MASTER_ADDR"] = user_address->second;
    } else if (request.hostfile) {
        if (const auto host = first_hostfile_host(*request.hostfile)) {
            set("MASTER_ADDR", *host);
            plan.master_addr_source = "first host of the hostfile " + *request.hostfile;
        } else {
            plan.master_addr_source = "none: the hostfile names no host";
            plan.warnings.push_back(
                fmt::format("cannot read a first host from the hostfile {} for MASTER_ADDR; set "
                            "MASTER_ADDR to rank 0's host",
                            *request.hostfile));
        }
    } else if (launcher == mpi_launcher::Launcher::Srun || allocation(plan.environment)) {
        plan.master_addr_source = "first host of the Slurm node list, read on each rank";
    } else {
        set("MASTER_ADDR", "127.0.0.1");
        plan.master_addr_source = "127.0.0.1: every rank on this node";
    }
    const auto user_port = plan.environment.find("MASTER_PORT");
    if (user_port != plan.environment.end() && !user_port->second.empty()) {
        plan.set_variables["MASTER_PORT"] = user_port->second;
    } else if (request.master_port) {
        set("MASTER_PORT", std::to_string(*request.master_port));
    }
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
        if (plan.set_variables.contains(name)) plan.forwarded.emplace_back(name);
    }
}

}  // namespace

std::optional<std::string> first_hostfile_host(const std::string& path) {
    std::ifstream file(path);
    std::string line;
    while (std::getline(file, line)) {
        line = line.substr(0, line.find('#'));
        const std::size_t start = line.find_first_not_of(" \t\r");
        if (start == std::string::npos) continue;
        std::string host = line.substr(start, line.find_first_of(" \t\r", start) - start);
        // Hydra's "host:N"; an IPv6 address has more than one colon and stays whole.
        if (const std::size_t colon = host.find(':');
            colon != std::string::npos && host.find(':', colon + 1) == std::string::npos) {
            host.resize(colon);
        }
        if (!host.empty()) return host;
    }
    return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> user_pmi_choice(const std::vector<std::string>& launcher_arguments,
                                                                   const Environment& environment) {
    for (std::size_t i = 0; i < launcher_arguments.size(); ++i) {
        const std::string& word = launcher_arguments[i];
        if (word.starts_with("--mpi=")) return std::pair(word.substr(6), std::string("--mpirun-args ") + word);
        if (word == "--mpi" && i + 1 < launcher_arguments.size()) {
            return std::pair(launcher_arguments[i + 1], "--mpirun-args --mpi " + launcher_arguments[i + 1]);
        }
    }
    if (const auto type = environment.find("SLURM_MPI_TYPE"); type != environment.end() && !type->second.empty()) {
        return std::pair(type->second, std::string("environment SLURM_MPI_TYPE"));
    }
    return std::nullopt;
}

std::string_view built_mpi_launcher() noexcept {
    return LOCKSTEP_MPI_LAUNCHER;
}

std::string default_launcher_program(mpi_launcher::Launcher launcher) {
    if (launcher == mpi_launcher::Launcher::Srun) return "srun";
    if (mpi_launcher::to_string(launcher) == LOCKSTEP_MPI_LAUNCHER_KIND) return std::string(built_mpi_launcher());
    return "mpirun";
}

Plan plan_launch(const Request& request, mpi_launcher::Launcher launcher, const Environment& environment,
                 bool as_root) {
    if (request.program.empty())
        throw UsageError("no program to launch; usage: lockstep launch [options] [--] program [args...]");
    if (request.num_processes && *request.num_processes < 1) {
        throw UsageError(fmt::format("--num-processes {}: give at least 1", *request.num_processes));
    }
    if (request.npernode && *request.npernode < 1) {
        throw UsageError(fmt::format("--npernode {}: give at least 1", *request.npernode));
    }

    Plan plan;
    plan.launcher = launcher;
    plan.environment = environment;

    // Flags become variables, in the library's own spelling, so that ranks parse them with the same rules.
    std::vector<std::string> flag_variables;
    auto set_flag = [&](const char* name, std::string value) {
        plan.environment[name] = value;
        plan.set_variables[name] = std::move(value);
        flag_variables.emplace_back(name);
    };
    if (request.debug) set_flag(env_names::debug, *request.debug ? "1" : "0");
    if (request.log_level) set_flag(env_names::log_level, *request.log_level);
    if (request.timeout) set_flag(env_names::timeout, *request.timeout);
    if (request.config_file) {
        // Absolute, so that ranks started in another directory (or on another node) read the same file.
        std::error_code ec;
        const auto absolute = std::filesystem::absolute(*request.config_file, ec);
        set_flag(env_names::config_file, ec ? *request.config_file : absolute.string());
    }
    if (request.trace_file) {
        std::error_code ec;
        const auto absolute = std::filesystem::absolute(*request.trace_file, ec);
        set_flag(env_names::trace_file, ec ? *request.trace_file : absolute.lexically_normal().string());
    }
    if (request.job_id && !plan.environment.contains("LOCKSTEP_JOB_ID"))
        plan.environment["LOCKSTEP_JOB_ID"] = *request.job_id;
    std::string list;
    for (const auto& name : flag_variables) list += (list.empty() ? "" : ",") + name;
    plan.environment[env_names::launcher_flags] = list;
    plan.set_variables[env_names::launcher_flags] = list;

    // Resolve exactly as a rank will: this checks every flag value and the config file before anything starts, and
    // gives the config file's num_processes.
    Config config;
    try {
        config = Config::resolve({}, map_environment(plan.environment));
    } catch (const ConfigError& e) {
        throw UsageError(e.what());
    }
    plan.config_file = config.config_file;
    plan.warnings = config.warnings;

    // An allocation's task count is an environment setting, above the config file; its node count is srun's own
    // default (one task per node), below it.
    const auto job = allocation(environment);
    // 0: not inside an allocation, or the variable is not a positive count.
    const int slurm_tasks = job ? slurm_count(environment, "SLURM_NTASKS").value_or(0) : 0;
    const int slurm_nodes = job ? slurm_count(environment, "SLURM_JOB_NUM_NODES").value_or(0) : 0;
    bool from_allocation = false;
    if (request.num_processes) {
        plan.num_processes = *request.num_processes;
        plan.num_processes_source = "flag --num-processes";
    } else if (slurm_tasks > 0) {
        plan.num_processes = slurm_tasks;
        plan.num_processes_source = fmt::format("SLURM_NTASKS of Slurm allocation {}", *job);
        from_allocation = true;
    } else if (config.num_processes) {
        plan.num_processes = *config.num_processes;
        const auto source = config.sources.find("num_processes");
        plan.num_processes_source = source != config.sources.end() ? source->second : "config file";
    } else if (slurm_nodes > 0) {
        plan.num_processes = slurm_nodes;
        plan.num_processes_source = fmt::format("one per node of Slurm allocation {} (SLURM_JOB_NUM_NODES)", *job);
        from_allocation = true;
    } else {
        plan.num_processes = 1;
        plan.num_processes_source = "default";
    }
    // The allocation's nodes too, unless the user placed the ranks (a hostfile, ranks per node).
    if (launcher == mpi_launcher::Launcher::Srun && from_allocation && slurm_nodes > 0 && !request.hostfile &&
        !request.npernode && slurm_nodes <= plan.num_processes) {
        plan.num_nodes = slurm_nodes;
        plan.num_nodes_source = fmt::format("SLURM_JOB_NUM_NODES of Slurm allocation {}", *job);
    }

    // Only a plugin lockstep chose is passed: the user's own travels in the arguments or the environment.
    bool pass_pmi = false;
    if (launcher == mpi_launcher::Launcher::Srun) {
        if (const auto chosen = user_pmi_choice(request.mpirun_args, environment)) {
            plan.pmi_plugin = chosen->first;
            plan.pmi_source = chosen->second;
        } else if (request.pmi) {
            plan.pmi_plugin = request.pmi->plugin;
            plan.pmi_source = request.pmi->reason;
            pass_pmi = request.pmi->plugin.has_value();
            if (request.pmi->warning) plan.warnings.push_back(*request.pmi->warning);
        } else {
            plan.pmi_source = "not chosen; Slurm's MpiDefault applies";
        }
    }

    for (const auto& [name, value] : plan.environment) {
        if (!is_lockstep_variable(name)) continue;
        plan.forwarded.push_back(name);
        plan.set_variables[name] = value;
    }
    if (request.rank_env_program) plan_rendezvous(request, launcher, plan);

    mpi_launcher::LauncherCommand command(launcher, request.launcher_path.value_or(default_launcher_program(launcher)));
    if (as_root) command.allow_run_as_root();
    command.processes(static_cast<std::size_t>(plan.num_processes));
    if (plan.num_nodes) command.nodes(static_cast<std::size_t>(*plan.num_nodes));
    if (pass_pmi) command.pmi(*plan.pmi_plugin);
    if (request.hostfile) command.hostfile(*request.hostfile);
    if (request.npernode) command.per_node(static_cast<std::size_t>(*request.npernode));
    if (request.oversubscribe) command.oversubscribe();
    std::vector<std::pair<std::string, std::string>> forwarded;
    for (const auto& name : plan.forwarded) forwarded.emplace_back(name, plan.environment.at(name));
    // Open MPI and srun forward the value the launcher itself was started with, which is the one set above.
    command.forward(forwarded);
    if (request.check_library) {
        const auto existing = environment.find("LD_PRELOAD");
        const std::string preload = existing != environment.end() && !existing->second.empty()
                                        ? existing->second + ":" + *request.check_library
                                        : *request.check_library;
        plan.set_variables["LD_PRELOAD"] = preload;
        command.set_on_ranks("LD_PRELOAD", preload);
    }
    command.arguments(request.mpirun_args);
    if (request.rank_env_program) {
        command.arguments({*request.rank_env_program, "--from", std::string(mpi_launcher::to_string(launcher)), "--"});
    }
    command.arguments(request.program);
    plan.command = command.argv();
    return plan;
}

}  // namespace lockstep::launch
