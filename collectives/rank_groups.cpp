#include "rank_groups.hpp"

#include <lockstep/signature.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

namespace lockstep {

std::string format_rank_ranges(const std::vector<int>& ranks) {
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < sorted.size();) {
        std::size_t j = i;
        while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
        parts.push_back(j == i ? fmt::format("{}", sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]));
        i = j + 1;
    }
    return fmt::format("{}", fmt::join(parts, ", "));
}

namespace detail {

std::string processes_text(const std::vector<int>& ranks) {
    if (ranks.empty()) return "none";
    return fmt::format("{} {}", ranks.size() == 1 ? "Process" : "Processes", format_rank_ranges(ranks));
}

std::string count_text(std::uint64_t count, std::string_view singular, std::string_view plural) {
    return fmt::format("{} {}", count, count == 1 ? singular : plural);
}

std::string grouped_by_value(const std::vector<std::string>& value_of_rank) {
    std::vector<std::pair<const std::string*, std::vector<int>>> groups;
    for (std::size_t r = 0; r < value_of_rank.size(); ++r) {
        const std::string& v = value_of_rank[r];
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return *g.first == v; });
        if (it == groups.end()) {
            groups.push_back({&v, {static_cast<int>(r)}});
        } else {
            it->second.push_back(static_cast<int>(r));
        }
    }
    std::string out;
    for (const auto& [v, ranks] : groups) out += fmt::format("  - {}: {}\n", processes_text(ranks), *v);
    return out;
}

}  // namespace detail
}  // namespace lockstep
