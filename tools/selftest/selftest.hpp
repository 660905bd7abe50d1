#pragma once
// `lockstep test`: every collective across the launched ranks on several dtypes, each result checked against its
// closed form, and debug mode shown to catch a deliberate shape mismatch on every rank; on host tensors, and again on
// CUDA tensors where every rank has a CUDA device.

#include <lockstep/communicator.hpp>

#include <string>
#include <vector>

namespace lockstep::selftest {

struct CheckResult {
    std::string name;    // "allreduce max"
    std::string dtype;   // "float32", or "-" for checks without one
    std::string device;  // "cpu" or "cuda": where the check's tensors lived
    bool skipped = false;
    std::string skip_reason;
    std::vector<int> failed_ranks;
    std::string detail;  // the lowest failing rank's explanation, when that is this rank; else empty
    [[nodiscard]] bool passed() const noexcept { return !skipped && failed_ranks.empty(); }
};

// The devices the checks run on, the same decision on every rank (collective): cpu, then this rank's CUDA device
// `own` when every rank has one. `note` is the table's line about CUDA: which device each rank's cuda rows used and
// whether MPI took device pointers or the library staged them through pinned host memory, or why they were skipped
// ("cuda: skipped (no CUDA device)").
struct DevicePlan {
    std::vector<Device> devices;
    std::string note;
};
[[nodiscard]] DevicePlan plan_devices(Communicator& comm, Device own);

// Collective over `comm` (debug mode off on entry; switched on and off again for the mismatch check): every check on
// each of `devices` (this rank's, from plan_devices; the same kinds in the same order on every rank). Every rank
// gets the same list: which ranks failed which check.
[[nodiscard]] std::vector<CheckResult> run_selftest(Communicator& comm,
                                                    const std::vector<Device>& devices = {Device::cpu()});

// The pass/fail table, with a summary line; `note` (the plan's) above it when not empty. `colour` for a terminal.
[[nodiscard]] std::string render_table(const std::vector<CheckResult>& results, int ranks, bool colour,
                                       const std::string& note = "");

}  // namespace lockstep::selftest
