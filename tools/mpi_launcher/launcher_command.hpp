#pragma once
// The command line of an MPI launcher, spelled for the launcher at hand. Callers say what they want (N processes,
// this hostfile, K per node, these variables on every rank) in the order they want it on the command line; this is
// the one place that knows how each launcher spells it:
//
//                      Open MPI / PRRTE mpirun     Hydra mpirun/mpiexec      Slurm srun
//   processes N        -np N                       -n N                      --ntasks=N
//   nodes N            -                           -                         -N N
//   hostfile H         --hostfile H                -f H                      --nodefile=H
//   host list a,b      --host a,b                  -hosts a,b                -w a,b
//   per node K         --map-by ppr:K:node         -ppn K                    --ntasks-per-node=K
//   forward NAME=V     -x NAME (value inherited)   -genv NAME V              --export=ALL,NAME,... (inherited)
//   on ranks NAME=V    -x NAME=V                   -genv NAME V              --export=ALL,...,NAME=V
//   remote shell C     --mca plm_rsh_agent C       -launcher ssh             -
//                      (plm_ssh_agent on PRRTE)    -launcher-exec C
//   as root            --allow-run-as-root         (nothing needed)          (nothing needed)
//   more ranks than    --oversubscribe             (nothing needed)          --overcommit
//     slots (cores)
//   PMI plugin P       -                           -                         --mpi=P  (see pmi.hpp)
//
// Open MPI 5's mpirun is PRRTE's prterun and takes the same options; only MCA parameter names differ.

#include "flavour.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::mpi_launcher {

enum class Launcher { OpenMpi, Hydra, Srun };

// "openmpi", "hydra", "srun"
[[nodiscard]] std::string_view to_string(Launcher launcher) noexcept;
// Parses "openmpi", "hydra" or "srun"; nullopt otherwise.
[[nodiscard]] std::optional<Launcher> parse_launcher(std::string_view name) noexcept;
// The launcher an installation's mpirun is: Open MPI's for Open MPI and PRRTE, Hydra for MPICH, Intel MPI and
// MVAPICH; nullopt when the flavour is unknown or there is no MPI.
[[nodiscard]] std::optional<Launcher> launcher_for(MpiFlavour flavour) noexcept;

class LauncherCommand {
public:
    // `program`: the launcher to run, by name or path.
    LauncherCommand(Launcher launcher, std::string program);

    [[nodiscard]] Launcher launcher() const noexcept { return launcher_; }

    LauncherCommand& processes(std::size_t count);
    // srun only: the mpirun launchers take their nodes from the hostfile or host list. Throws std::logic_error.
    LauncherCommand& nodes(std::size_t count);
    LauncherCommand& hostfile(const std::string& path);
    LauncherCommand& host_list(const std::vector<std::string>& hosts);
    LauncherCommand& per_node(std::size_t count);
    // Variables every rank gets, on every node. Open MPI and srun pass on the value the launcher itself was started
    // with (so the launcher must run with these values); Hydra gets them on its command line. srun's --export splits
    // on commas, so values that hold commas can only travel this way.
    LauncherCommand& forward(const std::vector<std::pair<std::string, std::string>>& variables);
    // A variable the ranks get with this value while the launcher itself runs without it (LD_PRELOAD of the checking
    // library, which the launcher must not load). For srun it joins the --export list of forward(), if any.
    LauncherCommand& set_on_ranks(const std::string& name, const std::string& value);
    // The remote shell the launcher starts its daemons with. Not for srun (Slurm starts them): std::logic_error.
    LauncherCommand& remote_shell(const std::string& command, const MpiInstall& mpi);
    // Open MPI refuses to start as root without this; the other launchers need nothing.
    LauncherCommand& allow_run_as_root();
    // More ranks than slots (cores, or a hostfile's slots=): Open MPI and srun refuse without it; Hydra never does.
    LauncherCommand& oversubscribe();
    // srun only: the PMI plugin the ranks' MPI library talks to (pmi.hpp). Throws std::logic_error for mpirun.
    LauncherCommand& pmi(const std::string& plugin);
    // Words passed as they are: the user's own launcher options, then the program and its arguments.
    LauncherCommand& arguments(const std::vector<std::string>& words);

    [[nodiscard]] const std::vector<std::string>& argv() const noexcept { return argv_; }

private:
    Launcher launcher_;
    std::vector<std::string> argv_;
};

}  // namespace lockstep::mpi_launcher
