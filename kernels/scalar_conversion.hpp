#pragma once
// The conversion rules that both backends share, so that a cast gives the same bits on the CPU and on a GPU:
// - floating to integer truncates toward zero into int64, saturating at its bounds (NaN becomes 0), then wraps into
//   the target width the way C++ converts one integer type to another;
// - anything to float16/bfloat16 rounds once, to nearest even, from the exact source value. Going through float would
//   round twice; rounding to float "to odd" first keeps enough information for the second rounding to be exact.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__CUDACC__)
#define LOCKSTEP_HOST_DEVICE __host__ __device__
#else
#define LOCKSTEP_HOST_DEVICE
#endif

namespace lockstep::kernels {

// Also compiled for the GPU, where the CUDA backend applies the same rule.
[[nodiscard]] LOCKSTEP_HOST_DEVICE inline std::int64_t saturate_to_int64(double v) noexcept {
    constexpr double two_63 = 9223372036854775808.0;
    if (v != v) return 0;  // NaN
    if (v >= two_63) return std::numeric_limits<std::int64_t>::max();
    if (v < -two_63) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(v);
}

// v rounded to float "to odd": exact values stay, inexact ones become the neighbour toward zero with its lowest bit
// set. A later round-to-nearest-even to a format with at most 22 significand bits is then correctly rounded.
[[nodiscard]] inline float round_to_odd_float(double v) noexcept {
    float f = static_cast<float>(v);
    if (!std::isfinite(f) || static_cast<double>(f) == v) return f;
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

// The same for an integer, which a double may not hold exactly above 2^53.
[[nodiscard]] inline float round_to_odd_float(std::int64_t v) noexcept {
    constexpr std::uint64_t exact_limit = std::uint64_t{1} << 53;
    const bool negative = v < 0;
    const std::uint64_t magnitude =
        negative ? std::uint64_t{0} - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    if (magnitude <= exact_limit) return round_to_odd_float(static_cast<double>(v));
    // Keep the top 24 bits and fold every dropped bit into the lowest kept one (the sticky bit).
    const int shift = std::bit_width(magnitude) - 24;
    std::uint64_t kept = magnitude >> shift;
    if ((magnitude & ((std::uint64_t{1} << shift) - 1)) != 0) kept |= 1;
    const float f = std::ldexp(static_cast<float>(kept), shift);
    return negative ? -f : f;
}

}  // namespace lockstep::kernels
