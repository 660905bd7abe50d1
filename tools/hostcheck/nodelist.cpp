#include "nodelist.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace lockstep::hostcheck {
namespace {

// One bracket group, expanded to its numbers as text (already padded).
std::vector<std::string> expand_ranges(std::string_view inside, std::string_view whole) {
    if (inside.empty()) throw NodelistError(fmt::format("empty brackets in '{}'", whole));
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= inside.size()) {
        const std::size_t comma = std::min(inside.find(',', start), inside.size());
        const std::string_view item = inside.substr(start, comma - start);
        const std::size_t dash = item.find('-');
        const std::string_view lo_text = item.substr(0, dash);
        const std::string_view hi_text = dash == std::string_view::npos ? lo_text : item.substr(dash + 1);
        auto is_number = [](std::string_view s) {
            return !s.empty() && s.size() <= 9 &&
                   std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
        };
        if (!is_number(lo_text) || !is_number(hi_text)) {
            throw NodelistError(fmt::format("'{}' in '{}' is not a number or a range N-M", item, whole));
        }
        long lo = 0;
        long hi = 0;
        std::from_chars(lo_text.data(), lo_text.data() + lo_text.size(), lo);
        std::from_chars(hi_text.data(), hi_text.data() + hi_text.size(), hi);
        if (hi < lo) throw NodelistError(fmt::format("range '{}' in '{}' runs backwards", item, whole));
        if (static_cast<std::size_t>(hi - lo) + out.size() >= max_nodelist_hosts) {
            throw NodelistError(fmt::format("'{}' expands to more than {} names", whole, max_nodelist_hosts));
        }
        const int width = static_cast<int>(lo_text.size());
        for (long n = lo; n <= hi; ++n) out.push_back(fmt::format("{:0{}}", n, width));
        start = comma + 1;
    }
    return out;
}

// Expands one name that may hold several bracket groups.
void expand_name(std::string_view name, std::string_view whole, std::vector<std::string>& out) {
    std::vector<std::string> partial{""};
    std::size_t pos = 0;
    while (pos < name.size()) {
        const std::size_t open = name.find('[', pos);
        const std::size_t stray_close = name.find(']', pos);
        if (stray_close != std::string_view::npos && (open == std::string_view::npos || stray_close < open)) {
            throw NodelistError(fmt::format("']' without '[' in '{}'", whole));
        }
        const std::string_view literal = name.substr(pos, open == std::string_view::npos ? name.npos : open - pos);
        for (auto& p : partial) p += literal;
        if (open == std::string_view::npos) break;
        const std::size_t close = name.find(']', open);
        if (close == std::string_view::npos) throw NodelistError(fmt::format("'[' never closed in '{}'", whole));
        const auto numbers = expand_ranges(name.substr(open + 1, close - open - 1), whole);
        if (partial.size() * numbers.size() > max_nodelist_hosts) {
            throw NodelistError(fmt::format("'{}' expands to more than {} names", whole, max_nodelist_hosts));
        }
        std::vector<std::string> next;
        next.reserve(partial.size() * numbers.size());
        for (const auto& p : partial) {
            for (const auto& n : numbers) next.push_back(p + n);
        }
        partial = std::move(next);
        pos = close + 1;
    }
    for (auto& p : partial) {
        if (p.empty()) throw NodelistError(fmt::format("empty name in '{}'", whole));
        out.push_back(std::move(p));
    }
}

}  // namespace

std::vector<std::string> expand_nodelist(std::string_view list) {
    std::vector<std::string> out;
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= list.size(); ++i) {
        const char c = i < list.size() ? list[i] : ',';
        if (c == '[') {
            if (++depth > 1) throw NodelistError(fmt::format("nested '[' in '{}'", list));
        } else if (c == ']') {
            --depth;
        } else if (c == ',' && depth <= 0) {
            const std::string_view name = list.substr(start, i - start);
            if (name.empty()) throw NodelistError(fmt::format("empty name between commas in '{}'", list));
            expand_name(name, list, out);
            if (out.size() > max_nodelist_hosts) {
                throw NodelistError(fmt::format("'{}' expands to more than {} names", list, max_nodelist_hosts));
            }
            start = i + 1;
            depth = 0;
        }
    }
    if (depth > 0) throw NodelistError(fmt::format("'[' never closed in '{}'", list));
    return out;
}

bool has_nodelist_brackets(std::string_view text) noexcept {
    const std::size_t open = text.find('[');
    if (open == std::string_view::npos) return false;
    // `[fe80::1]` is a bracketed IPv6 address, not a range.
    const std::size_t close = text.find(']', open);
    const std::string_view inside = text.substr(open + 1, close == text.npos ? text.npos : close - open - 1);
    return inside.find(':') == std::string_view::npos;
}

}  // namespace lockstep::hostcheck
