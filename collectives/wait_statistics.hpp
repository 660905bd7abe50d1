#pragma once
// Where the straggler report's numbers come from (internal): each communicator counts the time its collectives take
// in its own counter (one plain add per call, on the time-stamp counter: tick_clock.hpp) and lends the counter here
// for its lifetime; the report reads the process-wide sum of live and freed communicators' counters, and the time
// since the world communicator was created.

#include <atomic>
#include <cstdint>

namespace lockstep::detail {

// A communicator's counter joins the process-wide total at creation and leaves it, with its final value, when freed.
void attach_wait_counter(const std::atomic<std::int64_t>* ticks);
void detach_wait_counter(const std::atomic<std::int64_t>* ticks);

// Seconds inside collectives of any communicator, live or freed.
[[nodiscard]] double process_wait_seconds();

// The straggler report's clock starts when the world communicator is created.
void mark_world_start();
[[nodiscard]] double seconds_since_world_start();

}  // namespace lockstep::detail
