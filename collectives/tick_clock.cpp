#include "tick_clock.hpp"

#include <chrono>
#include <thread>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace lockstep::detail {

namespace {

using Steady = std::chrono::steady_clock;

bool detect_invariant_tsc() noexcept {
#if defined(__x86_64__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // CPUID 0x80000007, EDX bit 8: the counter runs at a constant rate in every power state.
    if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return false;
    if (__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (edx & (1u << 8)) != 0;
#else
    return false;
#endif
}

// Read once at load: the hot path then tests a plain bool.
const bool use_tsc = detect_invariant_tsc();

// Where the counter and steady_clock stood when the library loaded; the rate is measured from here.
struct Anchor {
    std::int64_t ticks;
    Steady::time_point time;
};
const Anchor anchor{ticks(), Steady::now()};

}  // namespace

bool ticks_are_tsc() noexcept {
    return use_tsc;
}

std::int64_t steady_ticks() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now().time_since_epoch()).count();
}

double ticks_to_seconds(std::int64_t span) noexcept {
    if (span <= 0) return 0.0;
    if (!use_tsc) return static_cast<double>(span) * 1e-9;
    // Counter ticks per second over at least 1 ms since the anchor (only a read right after load waits for it).
    auto elapsed = Steady::now() - anchor.time;
    if (elapsed < std::chrono::milliseconds(1)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1) - elapsed);
    }
    const std::int64_t now_ticks = ticks();
    elapsed = Steady::now() - anchor.time;
    const double seconds = std::chrono::duration<double>(elapsed).count();
    const double rate = static_cast<double>(now_ticks - anchor.ticks) / seconds;
    return rate > 0.0 ? static_cast<double>(span) / rate : 0.0;
}

}  // namespace lockstep::detail
