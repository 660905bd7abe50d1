#pragma once
// The classic check, run for the user: start `hostname` once per node through the real launcher and compare the
// names printed with the names the nodes gave the probe. Open MPI: `mpirun --hostfile H -np N --map-by ppr:1:node
// hostname`; Hydra: `mpiexec -f H -n N -ppn 1 hostname`; Slurm: `srun -N N -n N --ntasks-per-node=1 -w LIST
// printenv SLURMD_NODENAME`. It runs under a time limit; a launch that outlives it is reported as a hang, with the
// nodes that never answered. The hostfile given to the launcher is written fresh (one slot per host), holding this
// machine and the hosts the probe passed. srun prints SLURMD_NODENAME, not the host name: Slurm node names are what
// -w names, and several slurmd may share one machine. Inside an allocation srun inherits SLURM_NTASKS and the like;
// the explicit node and task counts override them.

#include "hostfile.hpp"
#include "mpi_install.hpp"
#include "mpi_launcher/child_process.hpp"
#include "mpi_launcher/launcher_command.hpp"
#include "problem.hpp"
#include "ssh_agent.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lockstep::hostcheck {

struct MpirunResult {
    bool ran = false;
    std::string status = "skipped";  // ok, hang, failed, missing_hosts, skipped
    std::string reason;              // why it was skipped
    std::vector<std::string> command;
    std::vector<std::string> hosts;     // the hostfile names given to the launcher
    std::vector<std::string> expected;  // the names those nodes reported (uname -n)
    std::vector<std::string> answered;  // names printed by the launched processes
    std::vector<std::string> missing;   // hosts whose name was expected but never printed
    std::optional<int> exit_code;
    mpi_launcher::Seconds elapsed{0};
    std::string evidence;
    std::string remedy;
};

struct MpirunOptions {
    std::chrono::seconds timeout{60};
    std::optional<mpi_launcher::Clock::time_point> deadline;
    std::optional<mpi_launcher::Launcher> launcher;  // nullopt: from the local MPI
    std::optional<std::string> ssh_command;          // passed on to the launcher when given with --ssh-command
    std::string work_dir;                            // where the launcher's hostfile is written
};

// The launcher of the classic check when none is asked for: the local MPI's own, else srun inside a Slurm allocation
// (SLURM_JOB_ID set and srun on PATH), else Open MPI's.
[[nodiscard]] mpi_launcher::Launcher choose_launcher(const mpi_launcher::MpiInstall& mpi);

// The launcher's argv for these hosts (hostfile written at `hostfile_path`).
[[nodiscard]] std::vector<std::string> mpirun_argv(mpi_launcher::Launcher launcher, const mpi_launcher::MpiInstall& mpi,
                                                   const std::string& hostfile_path, std::size_t nodes,
                                                   const std::vector<std::string>& host_list,
                                                   const std::optional<std::string>& ssh_command);

// The hostfile text for the launcher: one slot per host, in its own syntax.
[[nodiscard]] std::string launcher_hostfile(mpi_launcher::Launcher launcher, const std::vector<HostTarget>& hosts);

// Compares the printed names with the expected ones, filling answered/missing and the status.
void judge_mpirun(MpirunResult& result, const mpi_launcher::CommandResult& run,
                  const std::vector<std::string>& host_names);

// hosts[i] reported expected_names[i] to the probe.
[[nodiscard]] MpirunResult run_mpirun_check(const std::vector<HostTarget>& hosts,
                                            const std::vector<std::string>& expected_names,
                                            const mpi_launcher::MpiInstall& mpi, const MpirunOptions& options);

}  // namespace lockstep::hostcheck
