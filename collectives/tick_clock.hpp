#pragma once
// The clock of the per-call wait statistics (internal).
//
// Every collective reads a clock when it starts and when it ends, to add its duration to the wait statistics
// (CommunicatorStats::wait_seconds, the straggler report). On x86-64 with an invariant time-stamp counter that clock
// is the counter itself (RDTSC, about 12 ns in a virtual machine against about 28 ns for a vDSO clock_gettime there);
// elsewhere it is std::chrono::steady_clock in nanoseconds. Ticks become seconds only where statistics are read, at a
// rate measured against steady_clock between the library's load and that moment. Nothing that ends a job depends on
// this clock: the watchdog times collectives with steady_clock in its own thread.

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace lockstep::detail {

// Whether ticks() reads the time-stamp counter (decided once, when the library loads).
[[nodiscard]] bool ticks_are_tsc() noexcept;

[[nodiscard]] std::int64_t steady_ticks() noexcept;  // steady_clock, nanoseconds

// `tsc` is ticks_are_tsc(), which a caller on the hot path keeps beside its own data (one cache line fewer).
[[nodiscard]] inline std::int64_t ticks(bool tsc) noexcept {
#if defined(__x86_64__)
    if (tsc) return static_cast<std::int64_t>(__rdtsc());
#endif
    return steady_ticks();
}
[[nodiscard]] inline std::int64_t ticks() noexcept {
    return ticks(ticks_are_tsc());
}

// The duration of `ticks` ticks in seconds. Negative spans (a thread that moved to a core whose counter lags) count
// as zero.
[[nodiscard]] double ticks_to_seconds(std::int64_t ticks) noexcept;

}  // namespace lockstep::detail
