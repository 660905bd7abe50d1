#pragma once
// Which MPI launches the job, found the way a user's shell would find it: the first mpirun (or mpiexec) on PATH and
// what its --version says. The same parser reads the answer of every remote node, so that the nodes can be compared
// with the launching node and with each other.

#include "fanout.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::hostcheck {

enum class MpiFlavour { openmpi, mpich, intelmpi, unknown, none };

[[nodiscard]] std::string_view to_string(MpiFlavour flavour) noexcept;

struct MpiInstall {
    MpiFlavour flavour = MpiFlavour::none;
    std::string version;        // "4.1.4"; empty when unknown
    std::string launcher_path;  // the mpirun / mpiexec found; empty when none
    std::string version_text;   // the first line of --version, as printed

    // "Open MPI 4.1.4", "MPICH 4.0.2", "none"
    [[nodiscard]] std::string describe() const;
    [[nodiscard]] int major_version() const;
};

// Reads the output of `mpirun --version` / `mpiexec --version` of any of the three implementations.
[[nodiscard]] MpiInstall parse_mpi_version(std::string_view text);

// Runs the local launcher's --version (bounded by `deadline`).
[[nodiscard]] MpiInstall detect_local_mpi(Clock::time_point deadline);

// The programs the launcher starts on every node through ssh, any one of which must be found there: orted (Open MPI
// up to 4), prted (Open MPI 5), hydra_pmi_proxy (MPICH, Intel MPI). An unknown flavour accepts any of them.
[[nodiscard]] std::vector<std::string> launcher_daemons(const MpiInstall& mpi);

// An Open MPI MCA parameter as the launcher would see it: OMPI_MCA_/PRTE_MCA_ variables first, then
// ~/.openmpi/mca-params.conf, then the installation's openmpi-mca-params.conf.
struct McaParameter {
    std::string value;
    std::string source;  // "OMPI_MCA_plm_rsh_agent", "/etc/openmpi/openmpi-mca-params.conf:12", ...
};
[[nodiscard]] std::optional<McaParameter> openmpi_parameter(const std::vector<std::string>& names,
                                                            const MpiInstall& mpi);

// Open MPI's tree spawn: daemons started by other daemons over ssh, so every node must reach every other node.
// On unless plm_rsh_no_tree_spawn (plm_ssh_no_tree_spawn in Open MPI 5) is true.
[[nodiscard]] bool openmpi_tree_spawn(const MpiInstall& mpi);

}  // namespace lockstep::hostcheck
