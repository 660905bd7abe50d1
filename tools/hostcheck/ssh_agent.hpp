#pragma once
// The remote shell command that mpirun will use, so that the probe tests exactly what the launch will do. Looked up
// in the launcher's own order: --ssh-command, then Open MPI's plm_rsh_agent (plm_ssh_agent in Open MPI 5) with
// plm_rsh_args, or Hydra's launcher settings (HYDRA_LAUNCHER_EXEC, I_MPI_HYDRA_BOOTSTRAP_EXEC, ...), then plain ssh.
// Open MPI's value may list alternatives ("ssh : rsh"); the first one installed is the one it uses.

#include "mpi_install.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::hostcheck {

struct SshAgent {
    std::vector<std::string> argv;  // program and its own arguments, e.g. {"ssh", "-F", "/etc/cluster/ssh_config"}
    std::string source;             // where it came from: "--ssh-command", "OMPI_MCA_plm_rsh_agent", "default"
    bool is_ssh = true;             // OpenSSH: takes -o options, -G, BatchMode
};

// Splits a command the way the launchers do: on blanks, no quoting.
[[nodiscard]] std::vector<std::string> split_command(std::string_view command);

// Throws UsageError when the chosen program is not installed.
[[nodiscard]] SshAgent resolve_ssh_agent(const std::optional<std::string>& ssh_command,
                                         const mpi_launcher::MpiInstall& mpi);

// ssh options that make a probe fail fast instead of asking: no password prompt, no passphrase prompt, a connect
// time limit. StrictHostKeyChecking is deliberately left as configured.
[[nodiscard]] std::vector<std::string> batch_options(const SshAgent& agent, std::chrono::seconds connect_timeout);

// The full argv that runs `remote_command` on `host`: host and user are single arguments, never shell text.
[[nodiscard]] std::vector<std::string> remote_argv(const SshAgent& agent, std::chrono::seconds connect_timeout,
                                                   const std::string& host, const std::optional<std::string>& user,
                                                   const std::string& remote_command);

}  // namespace lockstep::hostcheck
