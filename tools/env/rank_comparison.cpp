// Flattens every report into path -> leaf value, then groups ranks by value for each path that differs.

#include "rank_comparison.hpp"

#include "report.hpp"

#include <lockstep/base/rank_groups.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace lockstep::env {
namespace {

using nlohmann::json;

// Multi-line copies of fields that are compared one by one elsewhere in the report.
bool is_redundant(const std::string& path) {
    return path == "config.described" || path == "mpi.library_full";
}

void flatten(const json& node, const std::string& path, std::map<std::string, json>& out) {
    if (node.is_object()) {
        for (const auto& [key, value] : node.items()) flatten(value, path.empty() ? key : path + "." + key, out);
    } else if (node.is_array() && !node.empty()) {
        for (std::size_t i = 0; i < node.size(); ++i) flatten(node[i], fmt::format("{}[{}]", path, i), out);
    } else if (!is_redundant(path)) {
        out[path] = node;
    }
}

std::string value_text(const json& value) {
    if (value.is_null()) return "(not set)";
    if (value.is_string()) return value.get<std::string>();
    return value.dump();
}

}  // namespace

std::string_view to_string(FieldScope scope) noexcept {
    switch (scope) {
        case FieldScope::Job:
            return "job";
        case FieldScope::Node:
            return "node";
        case FieldScope::Rank:
            return "rank";
    }
    return "job";
}

FieldScope field_scope(const std::string& path) {
    if (path.starts_with("identity.")) return FieldScope::Rank;
    if (path == "host.hostname") return FieldScope::Node;
    // The shared-memory arena: each process's own segment and use of it, and what each node could set up.
    if (path.starts_with("shared_memory.")) {
        const std::string field = path.substr(std::string("shared_memory.").size());
        if (field == "local_index" || field == "used_bytes" || field == "fallbacks") return FieldScope::Rank;
        if (field == "active" || field == "arena_bytes" || field == "local_processes" || field == "reason" ||
            field == "dev_shm_free_bytes") {
            return FieldScope::Node;
        }
        return FieldScope::Job;
    }
    if (!path.starts_with("environment.")) return FieldScope::Job;
    std::string name = path.substr(std::string("environment.").size());
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    auto mentions = [&name](std::initializer_list<std::string_view> marks) {
        return std::any_of(marks.begin(), marks.end(),
                           [&name](std::string_view mark) { return name.find(mark) != std::string::npos; });
    };
    // What a node's daemon (slurmd and its PMIx server, Open MPI's orted) tells the ranks it starts: the node's name
    // and number, its server's address and files, the ranks it holds. Checked before the per-rank marks, because
    // SLURM_NODEID and OMPI_COMM_WORLD_LOCAL_SIZE name a node, not a rank.
    static const std::set<std::string, std::less<>> node_names = {
        "SLURMD_NODENAME", "SLURM_NODEID",    "SLURM_TOPOLOGY_ADDR", "SLURM_GTIDS", "SLURM_CPUS_ON_NODE",
        "SLURM_JOB_GPUS",  "SLURM_STEP_GPUS", "PMIX_HOSTNAME",       "PMIX_NODEID", "OMPI_COMM_WORLD_LOCAL_SIZE",
        "PMI_LOCAL_SIZE",  "MPI_LOCALNRANKS",
    };
    if (node_names.contains(name)) return FieldScope::Node;
    if (mentions({"SERVER_URI", "DAEMON_URI", "TMPDIR", "TMP_DIR", "SESSION_DIR", "DSTORE", "SERVER_PIDINFO"})) {
        return FieldScope::Node;
    }
    // The launcher tells each rank who it is through these. Open MPI's app context number and its program and
    // arguments differ between the parts of an MPMD launch (`mpirun -n 1 a : -n 1 b`).
    if (mentions({"RANK", "PMIX_ID", "VPID", "PROCID", "LOCALID", "TASK_PID", "CPU_BIND", "OMPI_FILE_LOCATION",
                  "PMI_FD", "APP_NUM"}) ||
        name == "OMPI_ARGV" || name == "OMPI_COMMAND") {
        return FieldScope::Rank;
    }
    return FieldScope::Job;
}

bool is_expected_difference(const std::string& path) {
    return field_scope(path) != FieldScope::Job;
}

bool RankComparison::has_unexpected() const {
    return std::any_of(differences.begin(), differences.end(), [](const FieldDifference& d) { return !d.expected; });
}

RankComparison compare_reports(const std::vector<json>& reports) {
    RankComparison comparison;
    comparison.ranks = static_cast<int>(reports.size());
    std::vector<std::map<std::string, json>> flat(reports.size());
    std::set<std::string> paths;
    for (std::size_t r = 0; r < reports.size(); ++r) {
        flatten(reports[r], "", flat[r]);
        for (const auto& entry : flat[r]) paths.insert(entry.first);
    }
    for (const auto& path : paths) {
        const FieldScope scope = field_scope(path);
        FieldDifference difference{path, {}, scope, scope != FieldScope::Job};
        std::vector<json> value_of_rank;
        value_of_rank.reserve(reports.size());
        for (const auto& fields : flat) {
            const auto it = fields.find(path);
            value_of_rank.push_back(it == fields.end() ? json(nullptr) : it->second);
        }
        for (auto& ranks : base::ranks_by_value(value_of_rank)) {
            json value = std::move(value_of_rank[static_cast<std::size_t>(ranks.front())]);
            difference.groups.push_back({std::move(ranks), std::move(value)});
        }
        if (difference.groups.size() < 2) continue;
        std::stable_sort(difference.groups.begin(), difference.groups.end(),
                         [](const FieldGroup& a, const FieldGroup& b) { return a.ranks.size() > b.ranks.size(); });
        comparison.differences.push_back(std::move(difference));
    }
    return comparison;
}

std::string render_all_ranks_markdown(const std::vector<json>& reports, const RankComparison& comparison, bool colour) {
    const std::string on = colour ? "\033[1;31m" : "";
    const std::string off = colour ? "\033[0m" : "";
    std::string out =
        fmt::format("# lockstep environment of {} {}\n\n", comparison.ranks, comparison.ranks == 1 ? "rank" : "ranks");
    std::vector<const FieldDifference*> unexpected;
    std::vector<const FieldDifference*> per_node;
    std::vector<const FieldDifference*> per_rank;
    for (const auto& d : comparison.differences) {
        switch (d.scope) {
            case FieldScope::Job:
                unexpected.push_back(&d);
                break;
            case FieldScope::Node:
                per_node.push_back(&d);
                break;
            case FieldScope::Rank:
                per_rank.push_back(&d);
                break;
        }
    }

    out += "## Differences between ranks\n\n";
    if (unexpected.empty()) {
        out += "None: every job-wide field is the same on every rank.\n";
    } else {
        for (const auto* d : unexpected) {
            out += fmt::format("- {}**{}**{}\n", on, d->path, off);
            for (const auto& g : d->groups) {
                out += fmt::format("  - rank{} {}: {}\n", g.ranks.size() == 1 ? "" : "s",
                                   base::format_rank_ranges(g.ranks), value_text(g.value));
            }
        }
    }
    auto list = [&out](const std::vector<const FieldDifference*>& fields) {
        for (const auto* d : fields) {
            std::string line;
            for (const auto& g : d->groups) {
                line += fmt::format("{}{}={}", line.empty() ? "" : "; ", base::format_rank_ranges(g.ranks),
                                    value_text(g.value));
            }
            out += fmt::format("- {}: {}\n", d->path, line);
        }
    };
    if (!per_node.empty()) {
        out += "\n## Per-node fields (expected to differ between nodes)\n\n";
        list(per_node);
    }
    if (!per_rank.empty()) {
        out += "\n## Per-rank fields (expected to differ)\n\n";
        list(per_rank);
    }
    out += "\n## Report of rank 0\n\n";
    if (!reports.empty()) out += render_markdown(reports.front(), colour);
    return out;
}

json all_ranks_json(const std::vector<json>& reports, const RankComparison& comparison) {
    json differences = json::array();
    for (const auto& d : comparison.differences) {
        json groups = json::array();
        for (const auto& g : d.groups) groups.push_back({{"ranks", g.ranks}, {"value", g.value}});
        differences.push_back(
            {{"path", d.path}, {"scope", to_string(d.scope)}, {"expected", d.expected}, {"groups", groups}});
    }
    return {{"schema", "lockstep.env-all-ranks/1"}, {"ranks", reports}, {"differences", differences}};
}

}  // namespace lockstep::env
