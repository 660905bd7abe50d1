#pragma once
// The node-to-node check. Open MPI's tree spawn has daemons start other daemons over ssh, so a job needs every node
// to reach every other node, not only the head node to reach them all. Each source node is reached over ssh and runs
// a small sh loop that tries the same ssh command (with the same batch options) to each of its targets, 16 at a
// time. The targets travel on the loop's stdin, never inside the remote command, so no host name is shell text.
//
// With K = --mesh-sample, node i tries the K nodes after it in hostfile order (wrapping around), so every node is
// a source K times and a target K times; without it, every ordered pair is tried.

#include "hostfile.hpp"
#include "mpi_launcher/child_process.hpp"
#include "problem.hpp"
#include "ssh_agent.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lockstep::hostcheck {

inline constexpr std::string_view mesh_ok = "@@lockstep-mesh-ok@@";
inline constexpr std::string_view mesh_line = "@@lockstep-mesh@@";
inline constexpr std::size_t mesh_parallel_per_node = 16;

struct MeshPair {
    std::size_t from = 0;  // index into the targets of the hostfile
    std::size_t to = 0;
    bool ok = false;
    std::optional<Problem> problem;
    std::string evidence;
    std::string remedy;
};

struct MeshResult {
    bool ran = false;
    std::string reason;                 // why it ran or did not ("--mesh", "Open MPI tree spawn is on", ...)
    std::optional<std::size_t> sample;  // K, or nullopt for all pairs
    std::vector<std::size_t> nodes;     // the nodes taking part (those the probe reached)
    std::vector<MeshPair> pairs;        // every pair tried
};

// The ordered pairs to try among `nodes` (indices), all or K per source.
[[nodiscard]] std::vector<std::pair<std::size_t, std::size_t>> mesh_pairs(const std::vector<std::size_t>& nodes,
                                                                          std::optional<std::size_t> sample);

// The sh loop run on each source node (wrapped in sh -c '...').
[[nodiscard]] const std::string& mesh_remote_command();

// Reads a source's output into the pairs it reported; pairs with no line get the source's failure.
void read_mesh_output(std::string_view out, std::size_t from, const std::vector<HostTarget>& targets,
                      std::vector<MeshPair>& pairs);

struct MeshOptions {
    std::size_t fanout = 64;
    std::chrono::seconds timeout{10};
    std::optional<std::size_t> sample;
    std::optional<mpi_launcher::Clock::time_point> deadline;
    std::function<void(std::size_t, std::size_t)> progress;
};

[[nodiscard]] MeshResult run_mesh(const std::vector<HostTarget>& targets, const std::vector<std::size_t>& nodes,
                                  const SshAgent& agent, const MeshOptions& options);

}  // namespace lockstep::hostcheck
