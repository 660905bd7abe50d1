#pragma once
// Reports that group ranks by what they have in common (internal): the debug-mode mismatch report, the device
// inventory warning and the watchdog's headline all print "Processes 0-2: X" lines through this one formatter.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::detail {

// "  - Process 0: value\n  - Processes 1-3: other\n": ranks of equal value on one line, in the order of each value's
// lowest rank. value_of_rank[r] is rank r's value.
[[nodiscard]] std::string grouped_by_value(const std::vector<std::string>& value_of_rank);

// "Process 3" or "Processes 0-2, 5"; "none" for no rank.
[[nodiscard]] std::string processes_text(const std::vector<int>& ranks);

// "1 process", "4 processes": a count with its noun in the number the count asks for.
[[nodiscard]] std::string count_text(std::uint64_t count, std::string_view singular, std::string_view plural);

}  // namespace lockstep::detail
