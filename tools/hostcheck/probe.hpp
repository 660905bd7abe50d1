#pragma once
// The SSH probe: one ssh per host, through the launcher's own ssh command with batch options, running a short POSIX
// sh script on the node. The script prints a begin sentinel first, so that a run that printed it reached the node
// whatever the exit code says; without it, exit 255 is ssh's own failure and its stderr is classified. The rest of
// the script reports what the launcher will meet there: the node's name, its non-interactive PATH, where the MPI
// programs are and which MPI answers to --version.

#include "hostfile.hpp"
#include "mpi_install.hpp"
#include "mpi_launcher/child_process.hpp"
#include "problem.hpp"
#include "ssh_agent.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::hostcheck {

inline constexpr std::string_view probe_begin = "@@lockstep-hostcheck-begin@@";
inline constexpr std::string_view probe_end = "@@lockstep-hostcheck-end@@";

// What the probe script reported from one node.
struct RemoteFacts {
    std::string hostname;
    std::string path;                             // the non-interactive PATH
    std::map<std::string, std::string> programs;  // name -> path, for the MPI programs found
    std::string version_text;                     // what mpirun/mpiexec --version printed (first lines)
    mpi_launcher::MpiInstall mpi;
    bool complete = false;  // the end sentinel arrived
};

// The command given to ssh: `sh -c '<script>'`, so that it runs the same under any login shell (csh included).
[[nodiscard]] const std::string& probe_remote_command();

// Reads the probe's stdout; nullopt when the begin sentinel is missing (the node was never reached).
[[nodiscard]] std::optional<RemoteFacts> parse_probe_output(std::string_view out);

struct ProbeOutcome {
    bool reached = false;            // the script ran on the node
    std::optional<Problem> problem;  // nullopt: nothing wrong
    std::string evidence;            // exact text (ssh's stderr, or the facts that show the problem)
    std::string evidence_line;       // the decisive line, for the table
    std::string missing_daemon;      // for remote_mpi_missing
    std::optional<RemoteFacts> facts;
    mpi_launcher::Seconds elapsed{0};
};

// Judges one finished probe. `daemons`: the launcher programs of which one must be on the node's PATH (none for
// this machine, where the launcher starts its processes itself).
[[nodiscard]] ProbeOutcome judge_probe(const mpi_launcher::CommandResult& result,
                                       const std::vector<std::string>& daemons, std::chrono::milliseconds timeout);

struct ProbeOptions {
    std::size_t fanout = 64;
    std::chrono::seconds timeout{10};
    std::optional<mpi_launcher::Clock::time_point> deadline;
    std::function<void(std::size_t, std::size_t)> progress;
    // local[i]: target i is this machine; its script runs here under /bin/sh, without ssh.
    std::vector<bool> local;
};

[[nodiscard]] std::vector<ProbeOutcome> probe_hosts(const std::vector<HostTarget>& targets, const SshAgent& agent,
                                                    const std::vector<std::string>& daemons,
                                                    const ProbeOptions& options);

}  // namespace lockstep::hostcheck
