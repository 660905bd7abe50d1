// Flattens every report into path -> leaf value, then groups ranks by value for each path that differs.

#include "rank_comparison.hpp"

#include "report.hpp"

#include <lockstep/signature.hpp>

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

bool is_expected_difference(const std::string& path) {
    if (path.starts_with("identity.") || path == "host.hostname") return true;
    if (!path.starts_with("environment.")) return false;
    std::string name = path.substr(std::string("environment.").size());
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    // The launcher tells each rank who it is through these; they differ by design.
    for (std::string_view mark : {"RANK", "PMIX_ID", "VPID", "PROCID", "LOCALID", "NODEID", "TASK_PID"}) {
        if (name.find(mark) != std::string::npos) return true;
    }
    return false;
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
        FieldDifference difference{path, {}, is_expected_difference(path)};
        for (std::size_t r = 0; r < reports.size(); ++r) {
            const auto it = flat[r].find(path);
            const json value = it == flat[r].end() ? json(nullptr) : it->second;
            auto group = std::find_if(difference.groups.begin(), difference.groups.end(),
                                      [&](const FieldGroup& g) { return g.value == value; });
            if (group == difference.groups.end()) {
                difference.groups.push_back({{static_cast<int>(r)}, value});
            } else {
                group->ranks.push_back(static_cast<int>(r));
            }
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
    std::string out = fmt::format("# lockstep environment of {} ranks\n\n", comparison.ranks);
    std::vector<const FieldDifference*> unexpected;
    std::vector<const FieldDifference*> expected;
    for (const auto& d : comparison.differences) (d.expected ? expected : unexpected).push_back(&d);

    out += "## Differences between ranks\n\n";
    if (unexpected.empty()) {
        out += "None: every rank reports the same environment.\n";
    } else {
        for (const auto* d : unexpected) {
            out += fmt::format("- {}**{}**{}\n", on, d->path, off);
            for (const auto& g : d->groups) {
                out += fmt::format("  - rank{} {}: {}\n", g.ranks.size() == 1 ? "" : "s", format_rank_ranges(g.ranks),
                                   value_text(g.value));
            }
        }
    }
    if (!expected.empty()) {
        out += "\n## Per-rank fields (expected to differ)\n\n";
        for (const auto* d : expected) {
            std::string line;
            for (const auto& g : d->groups) {
                line +=
                    fmt::format("{}{}={}", line.empty() ? "" : "; ", format_rank_ranges(g.ranks), value_text(g.value));
            }
            out += fmt::format("- {}: {}\n", d->path, line);
        }
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
        differences.push_back({{"path", d.path}, {"expected", d.expected}, {"groups", groups}});
    }
    return {{"schema", "lockstep.env-all-ranks/1"}, {"ranks", reports}, {"differences", differences}};
}

}  // namespace lockstep::env
