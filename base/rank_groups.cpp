#include <lockstep/base/rank_groups.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace lockstep::base {

std::string format_rank_ranges(const std::vector<int>& ranks) {
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    std::string out;
    for (std::size_t i = 0; i < sorted.size();) {
        std::size_t j = i;
        while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
        if (!out.empty()) out += ", ";
        out += j == i ? fmt::format("{}", sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
        i = j + 1;
    }
    return out;
}

std::string processes_text(const std::vector<int>& ranks) {
    if (ranks.empty()) return "none";
    return fmt::format("{} {}", ranks.size() == 1 ? "Process" : "Processes", format_rank_ranges(ranks));
}

std::string count_text(std::uint64_t count, std::string_view singular, std::string_view plural) {
    return fmt::format("{} {}", count, count == 1 ? singular : plural);
}

std::string grouped_by_value(const std::vector<std::string>& value_of_rank) {
    std::string out;
    for (const auto& ranks : ranks_by_value(value_of_rank)) {
        out +=
            fmt::format("  - {}: {}\n", processes_text(ranks), value_of_rank[static_cast<std::size_t>(ranks.front())]);
    }
    return out;
}

}  // namespace lockstep::base
