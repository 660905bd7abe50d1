#include "wait_statistics.hpp"

#include "tick_clock.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

namespace lockstep::detail {

namespace {

using Clock = std::chrono::steady_clock;

// Kept apart from the call path, which only adds to its communicator's counter.
struct WaitTotals {
    std::mutex mutex;
    std::vector<const std::atomic<std::int64_t>*> live;
    std::int64_t retired = 0;
};
WaitTotals& wait_totals() {
    static WaitTotals totals;
    return totals;
}

std::atomic<std::int64_t> world_start_nanoseconds{0};

std::int64_t now_nanoseconds() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

void attach_wait_counter(const std::atomic<std::int64_t>* ticks) {
    WaitTotals& totals = wait_totals();
    std::scoped_lock lock(totals.mutex);
    totals.live.push_back(ticks);
}

void detach_wait_counter(const std::atomic<std::int64_t>* ticks) {
    WaitTotals& totals = wait_totals();
    std::scoped_lock lock(totals.mutex);
    std::erase(totals.live, ticks);
    totals.retired += ticks->load(std::memory_order_relaxed);
}

double process_wait_seconds() {
    WaitTotals& totals = wait_totals();
    std::scoped_lock lock(totals.mutex);
    std::int64_t ticks = totals.retired;
    for (const auto* counter : totals.live) ticks += counter->load(std::memory_order_relaxed);
    return ticks_to_seconds(ticks);
}

void mark_world_start() {
    world_start_nanoseconds = now_nanoseconds();
}

double seconds_since_world_start() {
    const std::int64_t start = world_start_nanoseconds.load();
    if (start == 0) return 0.0;
    return static_cast<double>(now_nanoseconds() - start) * 1e-9;
}

}  // namespace lockstep::detail
