#pragma once
// Which MPI launches the job, found the way a user's shell would find it: the first mpirun (or mpiexec) on PATH and
// what its --version says. The same parser (mpi_launcher::parse_mpi_version) reads the answer of every remote node, so
// that the nodes can be compared with the launching node and with each other.

#include "mpi_launcher/flavour.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::hostcheck {

// Runs the local launcher's --version (bounded by `deadline`).
[[nodiscard]] mpi_launcher::MpiInstall detect_local_mpi(mpi_launcher::Clock::time_point deadline);

// The programs the launcher starts on every node through ssh, any one of which must be found there: orted (Open MPI
// up to 4), prted (Open MPI 5, PRRTE), hydra_pmi_proxy (MPICH, Intel MPI, MVAPICH). An unknown flavour accepts any
// of them; Open MPI of an unknown version, either of its two.
[[nodiscard]] std::vector<std::string> launcher_daemons(const mpi_launcher::MpiInstall& mpi);

// An Open MPI MCA parameter as the launcher would see it: OMPI_MCA_/PRTE_MCA_ variables first, then
// ~/.openmpi/mca-params.conf, then the installation's openmpi-mca-params.conf.
struct McaParameter {
    std::string value;
    std::string source;  // "OMPI_MCA_plm_rsh_agent", "/etc/openmpi/openmpi-mca-params.conf:12", ...
};
[[nodiscard]] std::optional<McaParameter> openmpi_parameter(const std::vector<std::string>& names,
                                                            const mpi_launcher::MpiInstall& mpi);

// Open MPI's tree spawn: daemons started by other daemons over ssh, so every node must reach every other node.
// On unless plm_rsh_no_tree_spawn (plm_ssh_no_tree_spawn in Open MPI 5) is true.
[[nodiscard]] bool openmpi_tree_spawn(const mpi_launcher::MpiInstall& mpi);

}  // namespace lockstep::hostcheck
