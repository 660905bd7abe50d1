#include "ssh_agent.hpp"

#include "errors.hpp"
#include "mpi_launcher/launcher_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace lockstep::hostcheck {

std::vector<std::string> split_command(std::string_view command) {
    std::vector<std::string> words;
    std::istringstream in{std::string(command)};
    for (std::string w; in >> w;) words.push_back(std::move(w));
    return words;
}

namespace {

bool looks_like_ssh(const std::string& program) {
    const std::string base = std::filesystem::path(program).filename().string();
    return base == "ssh" || base.starts_with("ssh.");
}

SshAgent make_agent(std::vector<std::string> argv, std::string source) {
    SshAgent agent;
    agent.is_ssh = !argv.empty() && looks_like_ssh(argv.front());
    agent.argv = std::move(argv);
    agent.source = std::move(source);
    return agent;
}

void require_installed(const SshAgent& agent) {
    if (agent.argv.empty()) throw UsageError(fmt::format("the ssh command from {} is empty", agent.source));
    if (mpi_launcher::find_program(agent.argv.front()).empty()) {
        throw UsageError(
            fmt::format("the ssh command '{}' (from {}) is not installed or not on PATH; install "
                        "openssh-client or correct {}",
                        fmt::join(agent.argv, " "), agent.source, agent.source));
    }
}

const char* env(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

SshAgent resolve_ssh_agent(const std::optional<std::string>& ssh_command, const mpi_launcher::MpiInstall& mpi) {
    if (ssh_command) {
        auto agent = make_agent(split_command(*ssh_command), "--ssh-command");
        require_installed(agent);
        return agent;
    }
    const bool hydra = mpi_launcher::launcher_for(mpi.flavour) == mpi_launcher::Launcher::Hydra;
    if (!hydra) {
        if (auto p = openmpi_parameter({"plm_rsh_agent", "plm_ssh_agent", "orte_rsh_agent", "pls_rsh_agent"}, mpi)) {
            // "ssh : rsh": the first alternative that is installed.
            std::string_view rest = p->value;
            while (true) {
                const auto colon = rest.find(':');
                auto words = split_command(rest.substr(0, colon));
                if (!words.empty() && !mpi_launcher::find_program(words.front()).empty()) {
                    if (auto args = openmpi_parameter({"plm_rsh_args", "plm_ssh_args"}, mpi)) {
                        for (auto& w : split_command(args->value)) words.push_back(std::move(w));
                    }
                    return make_agent(std::move(words), p->source);
                }
                if (colon == std::string_view::npos) break;
                rest.remove_prefix(colon + 1);
            }
            throw UsageError(
                fmt::format("none of the commands in {}='{}' is installed; install openssh-client or "
                            "correct the setting",
                            p->source, p->value));
        }
    }
    for (const char* var : {"HYDRA_LAUNCHER_EXEC", "I_MPI_HYDRA_BOOTSTRAP_EXEC"}) {
        if (const char* v = env(var)) {
            auto words = split_command(v);
            if (const char* extra = env("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS")) {
                for (auto& w : split_command(extra)) words.push_back(std::move(w));
            }
            auto agent = make_agent(std::move(words), var);
            require_installed(agent);
            return agent;
        }
    }
    for (const char* var : {"HYDRA_LAUNCHER", "I_MPI_HYDRA_BOOTSTRAP"}) {
        if (const char* v = env(var); v != nullptr && (std::string_view(v) == "ssh" || std::string_view(v) == "rsh")) {
            auto agent = make_agent({v}, var);
            require_installed(agent);
            return agent;
        }
    }
    auto agent = make_agent({"ssh"}, "default");
    require_installed(agent);
    return agent;
}

std::vector<std::string> batch_options(const SshAgent& agent, std::chrono::seconds connect_timeout) {
    if (!agent.is_ssh) return {};
    return {"-o", "BatchMode=yes",
            "-o", fmt::format("ConnectTimeout={}", std::max<long>(1, connect_timeout.count())),
            "-o", "NumberOfPasswordPrompts=0"};
}

std::vector<std::string> remote_argv(const SshAgent& agent, std::chrono::seconds connect_timeout,
                                     const std::string& host, const std::optional<std::string>& user,
                                     const std::string& remote_command) {
    std::vector<std::string> argv = agent.argv;
    for (auto& o : batch_options(agent, connect_timeout)) argv.push_back(std::move(o));
    if (user) {
        argv.push_back("-l");
        argv.push_back(*user);
    }
    argv.push_back(host);
    argv.push_back(remote_command);
    return argv;
}

}  // namespace lockstep::hostcheck
