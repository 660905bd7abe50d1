#pragma once
// Reports that name ranks by what they have in common print them one way: "Processes 0-2, 5: value" lines, ranks of
// equal value together, as `clush -b` groups nodes of identical output.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::base {

// "0, 2-7": ranks as ascending ranges, in any order given; "" for no rank.
[[nodiscard]] std::string format_rank_ranges(const std::vector<int>& ranks);

// "Process 3" or "Processes 0-2, 5"; "none" for no rank.
[[nodiscard]] std::string processes_text(const std::vector<int>& ranks);

// "1 process", "4 processes": a count with its noun in the number the count asks for.
[[nodiscard]] std::string count_text(std::uint64_t count, std::string_view singular, std::string_view plural);

// The ranks of each distinct value (value_of_rank[r] is rank r's value; values compared with ==), ascending, in the
// order of each value's lowest rank.
template <class Value>
[[nodiscard]] std::vector<std::vector<int>> ranks_by_value(const std::vector<Value>& value_of_rank) {
    std::vector<std::vector<int>> groups;
    for (std::size_t r = 0; r < value_of_rank.size(); ++r) {
        std::size_t g = 0;
        while (g < groups.size() && !(value_of_rank[static_cast<std::size_t>(groups[g].front())] == value_of_rank[r])) {
            ++g;
        }
        if (g == groups.size()) groups.emplace_back();
        groups[g].push_back(static_cast<int>(r));
    }
    return groups;
}

// "  - Process 0: value\n  - Processes 1-3: other\n": ranks of equal value on one line, in the order of each value's
// lowest rank.
[[nodiscard]] std::string grouped_by_value(const std::vector<std::string>& value_of_rank);

}  // namespace lockstep::base
