#pragma once
// The result of a hostcheck run (report.cpp) and its two renderings: a table for people (report_text.cpp) and JSON for
// programs (report_json.cpp). The JSON layout is the stable schema documented in docs/hostcheck.md (schema id
// "lockstep.hostcheck/1"); fields are only ever added.

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
    bool local = false;  // this machine: the launchers start its processes without ssh
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
    std::optional<mpi_launcher::Launcher> launcher;  // of the classic check; nullopt when it was not chosen
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
    // What the run could have checked and did not (skipped stages, a launch that did not run), one sentence each:
    // a run with none of these and exit code 0 is "all well"; with some, "no problems found" in what did run.
    [[nodiscard]] std::vector<std::string> unverified() const;
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
    // Hosts alike (status, problem, evidence and remedy but for the host's own name) share one line with their names
    // folded into a node list (`node[01-08,10]`), as `clush -b` groups identical output; false: one line per host.
    bool fold = true;
};

// Groups of hosts (indices into report.hosts) that the folded table shows as one line each, in order of their first
// host. Two hosts are alike when their status, problem, evidence line, details and remedy are equal once each host's
// own name and addresses are replaced by a placeholder.
[[nodiscard]] std::vector<std::vector<std::size_t>> alike_hosts(const Report& report);
void print_text(std::ostream& out, const Report& report, const TextStyle& style);

}  // namespace lockstep::hostcheck
