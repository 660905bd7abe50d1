// Builds the launcher command. The flags become the same LOCKSTEP_* variables a user could set, listed in
// LOCKSTEP_LAUNCHER_FLAGS so that every rank can tell a launcher flag from an inherited variable; every LOCKSTEP_*
// variable is then forwarded explicitly, because only the launcher's own forwarding reaches ranks on other nodes.

#include "launcher.hpp"

#include <lockstep/config.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
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

}  // namespace

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

    if (request.num_processes) {
        plan.num_processes = *request.num_processes;
        plan.num_processes_source = "flag --num-processes";
    } else if (config.num_processes) {
        plan.num_processes = *config.num_processes;
        const auto source = config.sources.find("num_processes");
        plan.num_processes_source = source != config.sources.end() ? source->second : "config file";
    } else {
        plan.num_processes = 1;
        plan.num_processes_source = "default";
    }

    for (const auto& [name, value] : plan.environment) {
        if (!is_lockstep_variable(name)) continue;
        plan.forwarded.push_back(name);
        plan.set_variables[name] = value;
    }

    // The Open MPI and Hydra launchers are found on PATH as "mpirun"; Slurm's as "srun".
    mpi_launcher::LauncherCommand command(
        launcher, request.launcher_path.value_or(launcher == mpi_launcher::Launcher::Srun ? "srun" : "mpirun"));
    if (as_root) command.allow_run_as_root();
    command.processes(static_cast<std::size_t>(plan.num_processes));
    if (request.hostfile) command.hostfile(*request.hostfile);
    if (request.npernode) command.per_node(static_cast<std::size_t>(*request.npernode));
    std::vector<std::pair<std::string, std::string>> forwarded;
    for (const auto& name : plan.forwarded) forwarded.emplace_back(name, plan.environment.at(name));
    // Open MPI and srun forward the value the launcher itself was started with, which is the one set above.
    command.forward(forwarded);
    command.arguments(request.mpirun_args);
    command.arguments(request.program);
    plan.command = command.argv();
    return plan;
}

}  // namespace lockstep::launch
