#pragma once
// The result of a hostcheck run and its two renderings: a table for people and JSON for programs. The JSON layout is
// the stable schema documented in docs/hostcheck.md (schema id "lockstep.hostcheck/1"); fields are only ever added.

#include "hostfile.hpp"
#include "mesh.hpp"
#include "mpi_install.hpp"
#include "mpirun_check.hpp"
#include "probe.hpp"
#include "problem.hpp"
#include "ssh_agent.hpp"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::hostcheck {

inline constexpr std::string_view schema_id = "lockstep.hostcheck/1";

enum class HostStatus { Ok, Warning, Failed, Skipped };
[[nodiscard]] std::string_view to_string(HostStatus s) noexcept;

struct HostReport {
    std::string host;
    std::optional<std::string> user;
    std::vector<int> lines;
    int slots = 0;  // as OpenMPI counts them
    std::vector<std::string> addresses;
    HostStatus status = HostStatus::Skipped;
    std::optional<Problem> problem;
    std::string evidence;       // exact text
    std::string evidence_line;  // the decisive line, for the table
    std::string remedy;
    std::vector<std::string> details;          // local findings and secondary observations
    std::vector<std::string> same_machine_as;  // other hostfile names of the same machine
    std::optional<RemoteFacts> remote;
    std::optional<mpi_launcher::Seconds> probe_elapsed;
};

// Nodes that answered the probe alike, as `clush -b` groups identical output.
struct EnvironmentGroup {
    std::string mpi;                              // "Open MPI 4.1.4", or "none"
    std::map<std::string, std::string> programs;  // MPI programs and their paths
    std::vector<std::string> hosts;
};

struct RunSettings {
    SshAgent agent;
    std::size_t fanout = 64;
    std::chrono::seconds timeout{10};
    std::optional<std::chrono::seconds> max_time;
    mpi_launcher::Seconds time_bound{0};
    mpi_launcher::MpiInstall local_mpi;
    bool tree_spawn = false;
    std::vector<std::string> skipped_stages;
};

struct Report {
    std::string tool_version;
    Hostfile hostfile;
    RunSettings settings;
    std::vector<HostReport> hosts;
    std::vector<EnvironmentGroup> environment;
    MeshResult mesh;
    MpirunResult mpirun;
    mpi_launcher::Seconds elapsed{0};

    [[nodiscard]] bool environment_consistent() const { return environment.size() <= 1; }
    [[nodiscard]] std::size_t mesh_failures() const;
    [[nodiscard]] bool mpirun_failed() const;
    // 0: nothing wrong; 1: a host, a mesh pair or the mpirun check has a problem.
    [[nodiscard]] int exit_code() const;
    // One unchecked entry in `hosts` per target of the hostfile, in its order.
    void add_hostfile_targets();
};

[[nodiscard]] nlohmann::json to_json(const Report& report);
// The same document written to `out` item by item (as dump(2), except that each host and each hostfile line is one
// line), without ever holding the whole tree: the way to print a report of many hosts. Bytes that are not UTF-8
// become U+FFFD.
void write_json(std::ostream& out, const Report& report);
// The JSON document for a run that could not start (exit code 2).
[[nodiscard]] nlohmann::json error_json(std::string_view kind, const std::string& message,
                                        const std::vector<LineError>& lines = {});

struct TextStyle {
    bool colour = false;
    bool all_lines = false;  // print every hostfile line's reading, not only the notable ones
};
void print_text(std::ostream& out, const Report& report, const TextStyle& style);

}  // namespace lockstep::hostcheck
