#pragma once
// `lockstep test`: every collective across the launched ranks on several dtypes, each result checked against its
// closed form, and debug mode shown to catch a deliberate shape mismatch on every rank.

#include <lockstep/communicator.hpp>

#include <string>
#include <vector>

namespace lockstep::selftest {

struct CheckResult {
    std::string name;   // "allreduce max"
    std::string dtype;  // "float32", or "-" for checks without one
    bool skipped = false;
    std::string skip_reason;
    std::vector<int> failed_ranks;
    std::string detail;  // the lowest failing rank's explanation, when that is this rank; else empty
    [[nodiscard]] bool passed() const noexcept { return !skipped && failed_ranks.empty(); }
};

// Collective over `comm` (debug mode off on entry; switched on and off again for the mismatch check). Every rank
// gets the same list: which ranks failed which check.
[[nodiscard]] std::vector<CheckResult> run_selftest(Communicator& comm);

// The pass/fail table, with a summary line. `colour` for a terminal.
[[nodiscard]] std::string render_table(const std::vector<CheckResult>& results, int ranks, bool colour);

}  // namespace lockstep::selftest
