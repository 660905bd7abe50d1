#pragma once
// Byte counts as people write and read them: "512MiB", "1.5GB", "64k"; printed as "2.00 GiB".

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::base {

// Formats a byte count for people: "512 B", "1.50 KiB", "2.00 GiB", up to EiB, cut (not rounded) to two decimals;
// parse_bytes reads every result back, to within its last decimal.
[[nodiscard]] std::string format_bytes(std::size_t bytes);

// Parses "512MiB", "2GiB", "1.5GB", "64k", "1048576" (binary units for K/M/G/T/P/E with or without "iB", decimal for
// KB/MB/GB/TB/PB/EB, any case, spaces around the number and the unit allowed), up to the largest std::size_t; a whole
// number is exact, a fraction is rounded to the nearest byte. Anything else is nullopt, and `why` (when given) says
// what is wrong in words that complete "invalid memory size 'x': ...".
[[nodiscard]] std::optional<std::size_t> parse_bytes(std::string_view text, std::string* why = nullptr);

}  // namespace lockstep::base
