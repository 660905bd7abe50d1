#pragma once
// Which MPI implementation a launcher belongs to, read from what `mpirun --version` (or `mpiexec --version`) prints:
//   Open MPI   "mpirun (Open MPI) 4.1.4" (Open MPI 5 too: its mpirun is PRRTE's, but it names Open MPI)
//   PRRTE      "prterun (PRRTE) 3.0.5"
//   Intel MPI  "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619"
//   MVAPICH    any text that names MVAPICH (it ships MPICH's Hydra, so it is read before MPICH)
//   MPICH      "HYDRA build details:\n    Version: 4.0.2", "MPICH Version: 4.0.2"
// Only the first version_text_lines lines are read: the implementation names itself there, and a remote node's answer
// (cut to these lines) must read exactly like the local one, or the two would seem to differ.

#include "child_process.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::mpi_launcher {

enum class MpiFlavour { OpenMpi, Mpich, IntelMpi, Mvapich, Prrte, Unknown, None };

// "openmpi", "mpich", "intelmpi", "mvapich", "prrte", "unknown", "none"
[[nodiscard]] std::string_view to_string(MpiFlavour flavour) noexcept;

inline constexpr std::size_t version_text_lines = 4;
// The version and the first line are kept up to this many bytes (a remote node may print anything).
inline constexpr std::size_t version_text_limit = 200;

struct MpiInstall {
    MpiFlavour flavour = MpiFlavour::None;
    std::string version;        // "4.1.4"; empty when unknown
    std::string launcher_path;  // the mpirun / mpiexec found; empty when none
    std::string version_text;   // the first line of --version, as printed

    // "Open MPI 4.1.4", "MPICH 4.0.2", "unknown MPI (first line)", "none"
    [[nodiscard]] std::string describe() const;
    [[nodiscard]] int major_version() const;  // 0 when unknown
    // Whether its daemons and MCA parameters are PRRTE's (prted, plm_ssh_agent): PRRTE itself and Open MPI 5.
    [[nodiscard]] bool runs_on_prrte() const;
};

// Reads the output of `mpirun --version` / `mpiexec --version`. Empty text: None; text that names no known MPI:
// Unknown. Linear in the text, whatever it holds: it is read by hand, never with std::regex.
[[nodiscard]] MpiInstall parse_mpi_version(std::string_view text);

// What `launcher --version` prints, stdout and stderr as a terminal would show them, with stdin from /dev/null;
// stopped after `timeout` (or at `deadline`). Empty when it cannot be started or prints nothing.
[[nodiscard]] std::string version_output(const std::string& launcher, std::chrono::milliseconds timeout,
                                         std::optional<Clock::time_point> deadline = std::nullopt);

}  // namespace lockstep::mpi_launcher
