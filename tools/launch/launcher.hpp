#pragma once
// `lockstep launch`: turns the launcher's flags into LOCKSTEP_* variables and builds the command of the MPI launcher
// that starts the job (OpenMPI's mpirun, MPICH/Intel's Hydra mpirun, or Slurm's srun). Building the command is a pure
// function of the request, the environment and the launcher, so that it can be tested without running anything.

#include "mpi_launcher/launcher_command.hpp"
#include "mpi_launcher/pmi.hpp"

#include <lockstep/errors.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
    std::optional<std::string> hostfile;  // passed as given: the caller makes it absolute
    std::optional<int> npernode;
    bool oversubscribe = false;
    std::optional<bool> debug;
    std::optional<std::string> log_level;
    std::optional<std::string> timeout;  // as typed: the library's parser checks it, with the library's message
    std::optional<std::string> config_file;
    std::optional<std::string> trace_file;  // --trace: made absolute here, so every rank writes the same file
    // The job's id for the job directory of on-demand traces (LOCKSTEP_JOB_ID), unless the environment has one.
    std::optional<std::string> job_id;
    std::vector<std::string> mpirun_args;      // already split
    std::optional<std::string> launcher_path;  // the mpirun or srun to run; default: found on PATH
    std::vector<std::string> program;          // program and its arguments
    // srun only: the PMI plugin chosen for the MPI library (pmi.hpp), used unless the user chose one (--mpi among
    // mpirun_args, or SLURM_MPI_TYPE). nullopt: not asked.
    std::optional<mpi_launcher::PmiChoice> pmi;
    // torchrun's variables on every rank: the absolute path of lockstep-rank-env, which the launcher starts in front
    // of the program (rank_env/rank_env.hpp); nullopt: the program is started as it is.
    std::optional<std::string> rank_env_program;
    // The checking library (liblockstep_check.so, absolute) that every rank preloads; nullopt: none. It is appended to
    // an LD_PRELOAD the caller has, and given to the ranks only, never to the launcher.
    std::optional<std::string> check_library;
    // The rendezvous port the ranks get as MASTER_PORT unless MASTER_PORT is set: one free on this machine.
    std::optional<int> master_port;
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
    // "flag --num-processes", "SLURM_NTASKS of allocation 42", "/path/config.yaml:3:16", "default"
    std::string num_processes_source;
    // srun inside an allocation, when the processes come from it too: its node count (SLURM_JOB_NUM_NODES).
    std::optional<int> num_nodes;
    std::string num_nodes_source;
    // srun only: the PMI plugin the ranks get (passed as --mpi, or left to srun's SLURM_MPI_TYPE or --mpi argument),
    // and why; nullopt when srun's MpiDefault applies.
    std::optional<std::string> pmi_plugin;
    std::string pmi_source;
    std::optional<std::string> config_file;
    std::vector<std::string> warnings;  // from the config file (unknown keys), or a hostfile that cannot be read
    // With torchrun's variables: where MASTER_ADDR comes from ("environment", "127.0.0.1: one node", "first host of
    // the hostfile H", "first host of the Slurm node list, on each rank"); empty without them.
    std::string master_addr_source;
};

// The first host a hostfile names (Open MPI's "host slots=N", Hydra's "host:N", comments and blank lines skipped);
// nullopt when the file cannot be read or names none.
[[nodiscard]] std::optional<std::string> first_hostfile_host(const std::string& path);

// Builds the plan. `as_root` adds what OpenMPI needs to run as root. Throws UsageError for bad values (a flag's value
// checked by the library's own rules, or a malformed config file, with its file:line:column).
// With request.rank_env_program, MASTER_ADDR and MASTER_PORT are set (unless set already) and forwarded: MASTER_ADDR is
// 127.0.0.1 for a job on this node, the hostfile's first host, or left to lockstep-rank-env (the first host of the
// Slurm node list) under srun or inside a Slurm allocation.
// Without -n, the process count is, in this order: SLURM_NTASKS inside a Slurm allocation (SLURM_JOB_ID set), the
// config file's num_processes, one per node of the allocation (SLURM_JOB_NUM_NODES), 1.
[[nodiscard]] Plan plan_launch(const Request& request, mpi_launcher::Launcher launcher, const Environment& environment,
                               bool as_root);

// The PMI plugin the user chose already: `--mpi=P` or `--mpi P` among the launcher arguments, else SLURM_MPI_TYPE.
// First the plugin, then where it was found.
[[nodiscard]] std::optional<std::pair<std::string, std::string>> user_pmi_choice(
    const std::vector<std::string>& launcher_arguments, const Environment& environment);

// The launcher of the MPI this program was built against, by the name the build found it under: Open MPI's "mpirun",
// MPICH's Hydra "mpiexec.mpich" (Debian's name beside Open MPI; "mpiexec.hydra" or "mpiexec" elsewhere). `launch`
// asks it what it is when no launcher is named.
[[nodiscard]] std::string_view built_mpi_launcher() noexcept;
// The program a plan runs when none is named (--mpirun): "srun" for srun, the built-against MPI's launcher for a
// launcher of its kind (hydra for MPICH), else "mpirun".
[[nodiscard]] std::string default_launcher_program(mpi_launcher::Launcher launcher);

// The caller's environment as a map.
[[nodiscard]] Environment current_environment();

}  // namespace lockstep::launch
