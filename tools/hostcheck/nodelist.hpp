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

// A hostfile names at most this many hosts, and their names hold at most max_hostfile_name_bytes in all, however they
// are spread over its lines and node lists: a typo such as `n[1-99999999]`, or a few short lines that each expand to
// a million names, is then an error naming the line, not minutes of work and gigabytes of memory.
inline constexpr std::size_t max_nodelist_hosts = 1'000'000;
inline constexpr std::size_t max_nodelist_bytes = std::size_t{32} << 20;

class NodelistError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// The budget ran out: more names, or more bytes of names, than one hostfile may hold.
class NodelistBudgetError : public NodelistError {
public:
    using NodelistError::NodelistError;
};

// What is left of one hostfile's allowance of names. Expansion takes from it before it builds anything, so the work
// done is bounded by the allowance, not by what the text asks for.
class NodelistBudget {
public:
    // Takes `names` names of `bytes` bytes in all; throws NodelistBudgetError (taking nothing) when they do not fit.
    void take(std::size_t names, std::size_t bytes);
    [[nodiscard]] std::size_t names_taken() const noexcept { return names_taken_; }

private:
    std::size_t names_taken_ = 0;
    std::size_t bytes_taken_ = 0;
};

// Expands a node list. Throws NodelistError saying what is wrong (unclosed bracket, reversed range, ...), and
// NodelistBudgetError when the names do not fit in `budget` (a fresh one when none is given).
[[nodiscard]] std::vector<std::string> expand_nodelist(std::string_view list);
[[nodiscard]] std::vector<std::string> expand_nodelist(std::string_view list, NodelistBudget& budget);

// The inverse of expand_nodelist, as `nodeset -f` and `scontrol show hostlist` write it: names that differ only in
// their numbers become one name with bracket ranges (`node01`..`node08`, `node10` give `node[01-08,10]`), a number
// keeping its zero padding (`08-10`, never `8-10`). Every run of at most 9 digits is a dimension; names with several
// fold the last dimension first, then the one before it among the names whose later ranges came out alike
// (`rack1-gpu1`..`rack2-gpu2` give `rack[1-2]-gpu[1-2]`). Repeated names count once; the result lists the names in
// natural order (numbers by value) and expands back to exactly the same set. Names holding ':' (IPv6 addresses),
// '[', ']' or ',' are listed as they are.
[[nodiscard]] std::string fold_nodelist(const std::vector<std::string>& names);

// True when the text uses bracket ranges, i.e. looks like a Slurm node list rather than a host name.
[[nodiscard]] bool has_nodelist_brackets(std::string_view text) noexcept;

}  // namespace lockstep::hostcheck
