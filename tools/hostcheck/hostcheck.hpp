#pragma once
// `lockstep hostcheck`: parse the hostfile, resolve every name, probe every host over ssh, check node-to-node ssh,
// compare the nodes' MPI, and run the classic `mpirun ... hostname` check, each stage bounded in time, so that the
// whole run ends by a known bound whatever the hosts do. This machine needs no ssh (the launchers start its processes
// themselves), and the launch check runs on it and through srun whatever the ssh probe found or whether it ran.

#include "hostfile.hpp"
#include "mpirun_check.hpp"
#include "report.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>

namespace lockstep::hostcheck {

enum class MeshMode { Automatic, On, Off };

inline const std::set<std::string> stage_names{"resolve", "probe", "mesh", "mpirun"};

struct Options {
    std::string hostfile;  // a path, or "-" for stdin; empty when the hosts come from `nodelist`
    // A Slurm node list instead of a hostfile (-w, or SLURM_JOB_NODELIST inside an allocation), and where it came from.
    std::optional<std::string> nodelist;
    std::string nodelist_origin = "-w";
    std::optional<HostfileFormat> format;
    std::size_t fanout = 64;
    std::chrono::seconds timeout{10};
    std::optional<std::chrono::seconds> max_time;
    std::optional<std::string> ssh_command;
    MeshMode mesh = MeshMode::Automatic;
    std::optional<std::size_t> mesh_sample;
    std::chrono::seconds mpirun_timeout{60};
    std::optional<mpi_launcher::Launcher> launcher;
    std::set<std::string> skip;  // stage names
    // (stage, done, total) after each host of a stage.
    std::function<void(std::string_view, std::size_t, std::size_t)> progress;
};

// In automatic mode above this many nodes, each node tries a sample of the others, not all of them.
inline constexpr std::size_t mesh_full_limit = 32;
inline constexpr std::size_t mesh_auto_sample = 16;
// Local explanations (ssh -G, key checks) are made for this many failing hosts per problem; the rest fail alike.
inline constexpr std::size_t explained_per_problem = 16;

// Throws HostfileError or UsageError (exit 2) before anything is probed, mpi_launcher::InterruptedError on
// SIGINT/SIGTERM.
[[nodiscard]] Report run_hostcheck(const Options& options);

// The time a run with these options and this many hosts is bound to end by.
[[nodiscard]] mpi_launcher::Seconds time_bound(const Options& options, std::size_t hosts);

}  // namespace lockstep::hostcheck
