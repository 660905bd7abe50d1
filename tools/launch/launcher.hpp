#pragma once
// `lockstep launch`: turns the launcher's flags into LOCKSTEP_* variables and builds the command of the MPI launcher
// that starts the job (OpenMPI's mpirun, MPICH/Intel's Hydra mpirun, or Slurm's srun). Building the command is a pure
// function of the request, the environment and the launcher, so that it can be tested without running anything.

#include "mpi_launcher/launcher_command.hpp"

#include <lockstep/errors.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::launch {

// A command line that cannot be acted on: a bad flag value, a malformed config file, an unknown launcher. Exit 2.
class UsageError : public Error {
public:
    using Error::Error;
};

// The launcher could not be found, asked or started. Exit 1.
class LaunchError : public Error {
public:
    using Error::Error;
};

// Splits a string into words the way a POSIX shell would (single and double quotes, backslash escapes), without
// expanding anything. Throws UsageError naming `what` for an unterminated quote or a trailing backslash.
[[nodiscard]] std::vector<std::string> split_shell_words(std::string_view text, std::string_view what);
// One word quoted so that a POSIX shell reads it back unchanged.
[[nodiscard]] std::string shell_quote(std::string_view word);

struct Request {
    std::optional<int> num_processes;
    std::optional<std::string> hostfile;
    std::optional<int> npernode;
    std::optional<bool> debug;
    std::optional<std::string> log_level;
    std::optional<std::string> timeout;  // as typed: the library's parser checks it, with the library's message
    std::optional<std::string> config_file;
    std::vector<std::string> mpirun_args;      // already split
    std::optional<std::string> launcher_path;  // the mpirun or srun to run; default: found on PATH
    std::vector<std::string> program;          // program and its arguments
};

using Environment = std::map<std::string, std::string>;

struct Plan {
    mpi_launcher::Launcher launcher = mpi_launcher::Launcher::OpenMpi;
    std::vector<std::string> command;  // argv of the launcher
    // The full environment the launcher runs with: the caller's plus the variables set from flags.
    Environment environment;
    // Variables set or changed by this launch (flags, LOCKSTEP_LAUNCHER_FLAGS), and every LOCKSTEP_* variable forwarded
    // to the ranks, with their values.
    Environment set_variables;
    std::vector<std::string> forwarded;  // names of the variables forwarded explicitly to every rank
    int num_processes = 1;
    std::string num_processes_source;  // "flag --num-processes", "/path/config.yaml:3:16", "default"
    std::optional<std::string> config_file;
    std::vector<std::string> warnings;  // from the config file (unknown keys)
};

// Builds the plan. `as_root` adds what OpenMPI needs to run as root. Throws UsageError for bad values (a flag's value
// checked by the library's own rules, or a malformed config file, with its file:line:column).
[[nodiscard]] Plan plan_launch(const Request& request, mpi_launcher::Launcher launcher, const Environment& environment,
                               bool as_root);

// The caller's environment as a map.
[[nodiscard]] Environment current_environment();

}  // namespace lockstep::launch
