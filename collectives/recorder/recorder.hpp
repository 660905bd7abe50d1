#pragma once
// The flight recorder (internal): every communicator keeps the last calls made on it in a ring of fixed-size entries,
// written with plain stores on the per-call path, and read from any thread (the watchdog's, a dump at exit) without
// stopping the calls. docs/tracing.md describes what an entry holds and the snapshot's JSON.

#include <nlohmann/json.hpp>

namespace lockstep::detail {

// This process's recorded calls, of every communicator, as one JSON object: the per-rank snapshot of
// docs/tracing.md ("rank", "host", "pid", "snapshot_us", "capacity", "communicators", "calls"). Safe from any thread
// while calls go on: an entry being written at that moment is left out.
[[nodiscard]] nlohmann::json recorder_snapshot();

}  // namespace lockstep::detail
