#pragma once
// The trace file (internal): every rank's recorder snapshot (recorder.hpp) merged into one Chrome trace-event JSON
// object, which Perfetto and chrome://tracing open, and the compact text summary beside it. docs/tracing.md describes
// both.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace lockstep::detail {

// Why and for which job a trace was taken.
struct TraceContext {
    std::string reason;      // "hang", "error", "exit", "demand", "straggler"
    std::string job;         // the job's name or id, if known
    int expected_ranks = 0;  // the world size: ranks without a snapshot are named missing
    nlohmann::json stacks;   // optional: the hang report's stacks, kept in the file as they are
    // The world ranks that were asked, when not every rank of the job (a sub-communicator's dump): only these can
    // be missing. Empty: 0 .. expected_ranks - 1.
    std::vector<int> asked;
};

// Merges per-rank snapshots (each with "clock_offset_us": microseconds to add to its times to put them on the
// merger's clock; absent means 0) into the Chrome trace-event JSON object: one track per rank, one slice per call,
// the last arriver of each collective marked, flows from the last arriver to the ranks that waited for it, and the
// snapshots themselves under "lockstep".
[[nodiscard]] nlohmann::json merge_trace(const std::vector<nlohmann::json>& ranks, const TraceContext& context);

// The compact text summary of a merged trace.
[[nodiscard]] std::string trace_summary(const nlohmann::json& merged);

// Writes the merged trace to `file` and its summary to `file` with ".txt" appended, each through a temporary file
// renamed into place; throws lockstep::Error naming the path and the reason when it cannot.
void write_trace(const std::filesystem::path& file, const nlohmann::json& merged);

}  // namespace lockstep::detail
