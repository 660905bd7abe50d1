#pragma once
// What went wrong when a launch failed, read from what the launcher and the ranks wrote to stderr. MPI launchers
// explain their failures in long help texts that never name the flag that fixes them; recognising the text lets the
// caller add one line that does. Recognition is by fixed phrases of Open MPI (4 and 5) and Slurm, searched in one
// pass each: the text is the job's own output, of any length. Hydra's way of reporting a rank's signal is read here
// too.

#include <charconv>
#include <initializer_list>
#include <string_view>

namespace lockstep::mpi_launcher {

enum class LaunchFailure {
    None,
    // Open MPI's mpirun: more processes than slots (cores, or the hostfile's slots=), without --oversubscribe.
    NotEnoughSlots,
    // Ranks started by srun found no PMI server they can talk to: Open MPI's "not built with SLURM's PMI support" (it
    // prints this whatever the reason: no --mpi, or a plugin it was not built for).
    PmiMissing,
    // A rank failed while its MPI library connected to the PMI/PMIx server (a plugin of the wrong version, a server
    // that is not reachable).
    PmiInit,
    // The launcher (or lockstep-rank-env in front of the program) could not execute the program on some node.
    ProgramNotFound,
};

namespace detail {

inline bool contains_any(std::string_view text, std::initializer_list<std::string_view> phrases) {
    for (std::string_view phrase : phrases) {
        if (text.find(phrase) != std::string_view::npos) return true;
    }
    return false;
}

}  // namespace detail

// The first failure the text shows, in order of how specific its phrase is.
[[nodiscard]] inline LaunchFailure recognise_launch_failure(std::string_view text) {
    if (detail::contains_any(text, {"There are not enough slots available in the system"})) {
        return LaunchFailure::NotEnoughSlots;
    }
    if (detail::contains_any(text, {"not built with SLURM's PMI support", "was not built with SLURM's PMI"})) {
        return LaunchFailure::PmiMissing;
    }
    const bool in_init = detail::contains_any(text, {"MPI_Init", "MPI_INIT"});
    if (in_init && detail::contains_any(text, {"PMIx_Init", "PMIX_ERR", "PMI2_Init", "PMI_Init", "PMIX ERROR",
                                               "ext3x_client", "ext2x_client", "ext4x_client", "pmix_init"})) {
        return LaunchFailure::PmiInit;
    }
    if (detail::contains_any(text, {"could not access\nor execute an executable", "could not access or execute",
                                    "execve(): ", "lockstep-rank-env: cannot execute"})) {
        return LaunchFailure::ProgramNotFound;
    }
    return LaunchFailure::None;
}

// Hydra exits with the number of the signal that ended a rank, as if the rank had exited with it, and names the
// signal in one line of its stdout: "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)". Given
// Hydra's exit status and the end of its stdout: 128+N, as a shell and Open MPI's mpirun give it, when that line names
// signal N and the status is N; the status unchanged otherwise (a rank that exited 9 itself).
[[nodiscard]] inline int hydra_exit_status(int status, std::string_view text) {
    constexpr std::string_view line_mark = "TERMINATED WITH THE EXIT STRING:";
    constexpr std::string_view signal_mark = "(signal ";
    const std::size_t line = text.find(line_mark);
    if (line == std::string_view::npos) return status;
    const std::string_view rest = text.substr(line, text.find('\n', line) - line);
    const std::size_t at = rest.find(signal_mark);
    if (at == std::string_view::npos) return status;
    int signal_number = 0;
    const char* first = rest.data() + at + signal_mark.size();
    const auto [end, ec] = std::from_chars(first, rest.data() + rest.size(), signal_number);
    if (ec != std::errc{} || end == rest.data() + rest.size() || *end != ')') return status;
    return signal_number == status && status > 0 && status < 128 ? 128 + status : status;
}

}  // namespace lockstep::mpi_launcher
