#include <lockstep/base/byte_size.hpp>
#include <lockstep/base/escape.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <system_error>

namespace lockstep::base {

std::string format_bytes(std::size_t bytes) {
    static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) return fmt::format("{} B", bytes);
    int unit = 0;
    while (unit < 5 && (bytes >> (10 * (unit + 1))) >= 1024) ++unit;
    // Hundredths of the unit, in integers and cut rather than rounded, so that the text never names more than the
    // count: rounded (or through a double), the largest counts would read "16.00 EiB", which no std::size_t holds.
    const auto hundredths =
        static_cast<std::uint64_t>((static_cast<unsigned __int128>(bytes) * 100) >> (10 * (unit + 1)));
    return fmt::format("{}.{:02} {}", hundredths / 100, hundredths % 100, units[unit]);
}

std::optional<std::size_t> parse_bytes(std::string_view text, std::string* why) {
    auto fail = [&](std::string reason) -> std::optional<std::size_t> {
        if (why != nullptr) *why = std::move(reason);
        return std::nullopt;
    };
    auto is_digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
    std::size_t pos = 0;
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    const std::size_t number_start = pos;
    while (pos < text.size() && (is_digit(text[pos]) || text[pos] == '.')) ++pos;
    const std::string_view number = text.substr(number_start, pos - number_start);
    if (std::none_of(number.begin(), number.end(), is_digit) || std::count(number.begin(), number.end(), '.') > 1) {
        return fail("no number");
    }
    std::string unit;
    for (char c : text.substr(pos)) {
        if (!std::isspace(static_cast<unsigned char>(c)))
            unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    struct UnitScale {
        std::string_view name;
        std::uint64_t scale;
    };
    constexpr std::uint64_t Ki = 1024, K = 1000;
    static constexpr UnitScale scales[] = {
        {"", 1},
        {"b", 1},
        {"k", Ki},
        {"ki", Ki},
        {"kib", Ki},
        {"kb", K},
        {"m", Ki * Ki},
        {"mi", Ki * Ki},
        {"mib", Ki * Ki},
        {"mb", K * K},
        {"g", Ki * Ki * Ki},
        {"gi", Ki * Ki * Ki},
        {"gib", Ki * Ki * Ki},
        {"gb", K * K * K},
        {"t", Ki * Ki * Ki * Ki},
        {"ti", Ki * Ki * Ki * Ki},
        {"tib", Ki * Ki * Ki * Ki},
        {"tb", K * K * K * K},
        {"p", Ki * Ki * Ki * Ki * Ki},
        {"pi", Ki * Ki * Ki * Ki * Ki},
        {"pib", Ki * Ki * Ki * Ki * Ki},
        {"pb", K * K * K * K * K},
        {"e", Ki * Ki * Ki * Ki * Ki * Ki},
        {"ei", Ki * Ki * Ki * Ki * Ki * Ki},
        {"eib", Ki * Ki * Ki * Ki * Ki * Ki},
        {"eb", K * K * K * K * K * K},
    };
    const auto found =
        std::find_if(std::begin(scales), std::end(scales), [&](const UnitScale& s) { return s.name == unit; });
    if (found == std::end(scales)) return fail(fmt::format("unknown unit {}", quote_value(unit)));
    const auto too_large = [] { return fmt::format("more than {} bytes", std::numeric_limits<std::size_t>::max()); };
    if (number.find('.') == std::string_view::npos) {
        // Whole numbers are exact to the last byte, so that every count that is printed reads back as itself.
        std::uint64_t count = 0;
        const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), count);
        std::uint64_t bytes = 0;
        if (ec != std::errc{} || end != number.data() + number.size() ||
            __builtin_mul_overflow(count, found->scale, &bytes) || bytes > std::numeric_limits<std::size_t>::max()) {
            return fail(too_large());
        }
        return static_cast<std::size_t>(bytes);
    }
    // A fraction is rounded to the nearest byte; long double holds every 64-bit count exactly on x86-64.
    const long double value =
        std::round(std::strtold(std::string(number).c_str(), nullptr) * static_cast<long double>(found->scale));
    if (!std::isfinite(value) || value > static_cast<long double>(std::numeric_limits<std::size_t>::max())) {
        return fail(too_large());
    }
    return static_cast<std::size_t>(value);
}

}  // namespace lockstep::base
