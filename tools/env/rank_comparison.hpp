#pragma once
// `lockstep env --all-ranks`: every rank's report side by side. Each field is compared across ranks and identical
// answers are grouped by rank ranges, like `clush -b` groups identical output of nodes.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::env {

// Which ranks a field must agree between. A job-wide field that differs is a problem; per-node fields (a node's name,
// its PMIx server, its session directories) differ between nodes of a healthy job, per-rank fields (rank numbers,
// process ids) between any two ranks.
enum class FieldScope { Job, Node, Rank };

// "job", "node", "rank"
[[nodiscard]] std::string_view to_string(FieldScope scope) noexcept;

struct FieldGroup {
    std::vector<int> ranks;
    nlohmann::json value;  // null when the field is absent on these ranks
};

struct FieldDifference {
    std::string path;                // "cuda.driver", "environment.OMPI_COMM_WORLD_RANK", "cuda.gpus[1].name"
    std::vector<FieldGroup> groups;  // largest group first
    FieldScope scope = FieldScope::Job;
    bool expected = false;  // scope is Node or Rank: the field is meant to differ
};

struct RankComparison {
    int ranks = 0;
    std::vector<FieldDifference> differences;
    [[nodiscard]] bool has_unexpected() const;
};

// Compares reports indexed by rank.
[[nodiscard]] RankComparison compare_reports(const std::vector<nlohmann::json>& reports);
// The scope of a flattened report field ("environment.SLURMD_NODENAME", "host.hostname", "mpi.library").
[[nodiscard]] FieldScope field_scope(const std::string& path);
// Whether a field is expected to differ between ranks of one job: its scope is Node or Rank.
[[nodiscard]] bool is_expected_difference(const std::string& path);

[[nodiscard]] std::string render_all_ranks_markdown(const std::vector<nlohmann::json>& reports,
                                                    const RankComparison& comparison, bool colour);
// {"schema": "lockstep.env-all-ranks/1", "ranks": [report...], "differences": [{"path", "scope", "expected",
// "groups": [{"ranks": [..], "value": ...}]}]}
[[nodiscard]] nlohmann::json all_ranks_json(const std::vector<nlohmann::json>& reports,
                                            const RankComparison& comparison);

}  // namespace lockstep::env
