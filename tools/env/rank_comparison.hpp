#pragma once
// `lockstep env --all-ranks`: every rank's report side by side. Each field is compared across ranks and identical
// answers are grouped by rank ranges, like `clush -b` groups identical output of nodes.

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace lockstep::env {

struct FieldGroup {
    std::vector<int> ranks;
    nlohmann::json value;  // null when the field is absent on these ranks
};

struct FieldDifference {
    std::string path;                // "cuda.driver", "environment.OMPI_COMM_WORLD_RANK", "cuda.gpus[1].name"
    std::vector<FieldGroup> groups;  // largest group first
    bool expected = false;           // a field that names the rank itself (rank numbers, hostnames)
};

struct RankComparison {
    int ranks = 0;
    std::vector<FieldDifference> differences;
    [[nodiscard]] bool has_unexpected() const;
};

// Compares reports indexed by rank.
[[nodiscard]] RankComparison compare_reports(const std::vector<nlohmann::json>& reports);
// Whether a field is expected to differ between ranks of one job (rank numbers, host names).
[[nodiscard]] bool is_expected_difference(const std::string& path);

[[nodiscard]] std::string render_all_ranks_markdown(const std::vector<nlohmann::json>& reports,
                                                    const RankComparison& comparison, bool colour);
// {"schema": "lockstep.env-all-ranks/1", "ranks": [report...], "differences": [{"path", "expected", "groups":
// [{"ranks": [..], "value": ...}]}]}
[[nodiscard]] nlohmann::json all_ranks_json(const std::vector<nlohmann::json>& reports,
                                            const RankComparison& comparison);

}  // namespace lockstep::env
