#pragma once
// Slurm node lists: `node[01-10,12]` expands to node01 ... node10, node12. The width of the lower bound fixes the
// width of every number in its range (`[08-10]` gives 08 09 10), as scontrol does. Several bracket groups in one
// name multiply (`r[1-2]n[1-2]` gives r1n1 r1n2 r2n1 r2n2); commas outside brackets separate names.

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::hostcheck {

// Refuses to expand beyond this many names, so that a typo such as `n[1-99999999]` is an error, not an OOM.
inline constexpr std::size_t max_nodelist_hosts = 1'000'000;

class NodelistError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// Expands a node list. Throws NodelistError saying what is wrong (unclosed bracket, reversed range, ...).
[[nodiscard]] std::vector<std::string> expand_nodelist(std::string_view list);

// True when the text uses bracket ranges, i.e. looks like a Slurm node list rather than a host name.
[[nodiscard]] bool has_nodelist_brackets(std::string_view text) noexcept;

}  // namespace lockstep::hostcheck
