#include "nodelist.hpp"

#include "mpi_launcher/display_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace lockstep::hostcheck {

void NodelistBudget::take(std::size_t names, std::size_t bytes) {
    if (names > max_nodelist_hosts - names_taken_) {
        throw NodelistBudgetError(
            fmt::format("the hostfile names more than {} hosts (the most one hostfile may name; "
                        "{} before this line): split it, or check the ranges for a typo",
                        max_nodelist_hosts, names_taken_));
    }
    if (bytes > max_nodelist_bytes - bytes_taken_) {
        throw NodelistBudgetError(
            fmt::format("the host names of the hostfile take more than {} MiB (the most one "
                        "hostfile may hold): split it, or check the ranges for a typo",
                        max_nodelist_bytes >> 20));
    }
    names_taken_ += names;
    bytes_taken_ += bytes;
}

namespace {

using mpi_launcher::cut_value;

// Numbers of at most 9 digits: the products below never overflow.
bool is_number(std::string_view s) {
    return !s.empty() && s.size() <= 9 &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// One bracket group, expanded to its numbers as text (already padded); at most max_nodelist_hosts of them, counted
// before any is built.
std::vector<std::string> expand_ranges(std::string_view inside, std::string_view whole) {
    if (inside.empty()) throw NodelistError(fmt::format("empty brackets in '{}'", cut_value(whole)));
    struct Range {
        long lo;
        long hi;
        int width;
    };
    std::vector<Range> ranges;
    std::size_t count = 0;
    std::size_t start = 0;
    while (start <= inside.size()) {
        const std::size_t comma = std::min(inside.find(',', start), inside.size());
        const std::string_view item = inside.substr(start, comma - start);
        const std::size_t dash = item.find('-');
        const std::string_view lo_text = item.substr(0, dash);
        const std::string_view hi_text = dash == std::string_view::npos ? lo_text : item.substr(dash + 1);
        if (!is_number(lo_text) || !is_number(hi_text)) {
            throw NodelistError(
                fmt::format("'{}' in '{}' is not a number or a range N-M", cut_value(item), cut_value(whole)));
        }
        long lo = 0;
        long hi = 0;
        std::from_chars(lo_text.data(), lo_text.data() + lo_text.size(), lo);
        std::from_chars(hi_text.data(), hi_text.data() + hi_text.size(), hi);
        if (hi < lo) {
            throw NodelistError(fmt::format("range '{}' in '{}' runs backwards", cut_value(item), cut_value(whole)));
        }
        const auto n = static_cast<std::size_t>(hi - lo) + 1;
        if (n > max_nodelist_hosts || count + n > max_nodelist_hosts) {
            throw NodelistBudgetError(
                fmt::format("'{}' expands to more than {} names", cut_value(whole), max_nodelist_hosts));
        }
        count += n;
        ranges.push_back(Range{lo, hi, static_cast<int>(lo_text.size())});
        start = comma + 1;
    }
    std::vector<std::string> out;
    out.reserve(count);
    for (const auto& r : ranges) {
        for (long n = r.lo; n <= r.hi; ++n) out.push_back(fmt::format("{:0{}}", n, r.width));
    }
    return out;
}

std::size_t total_size(const std::vector<std::string>& texts) {
    std::size_t n = 0;
    for (const auto& t : texts) n += t.size();
    return n;
}

// Expands one name that may hold several bracket groups. The names are charged to the budget once, when their
// number and length are known and before they are built; the groups alone are small (at most the budget's names).
void expand_name(std::string_view name, std::string_view whole, std::vector<std::string>& out, NodelistBudget& budget) {
    std::vector<std::string> literals;             // the text before each group, and after the last one
    std::vector<std::vector<std::string>> groups;  // each group's numbers
    std::size_t pos = 0;
    std::size_t names = 1;
    while (true) {
        const std::size_t open = name.find('[', pos);
        const std::size_t stray_close = name.find(']', pos);
        if (stray_close != std::string_view::npos && (open == std::string_view::npos || stray_close < open)) {
            throw NodelistError(fmt::format("']' without '[' in '{}'", cut_value(whole)));
        }
        literals.emplace_back(name.substr(pos, open == std::string_view::npos ? name.npos : open - pos));
        if (open == std::string_view::npos) break;
        const std::size_t close = name.find(']', open);
        if (close == std::string_view::npos) {
            throw NodelistError(fmt::format("'[' never closed in '{}'", cut_value(whole)));
        }
        groups.push_back(expand_ranges(name.substr(open + 1, close - open - 1), whole));
        if (groups.back().size() > max_nodelist_hosts / names) {
            throw NodelistBudgetError(
                fmt::format("'{}' expands to more than {} names", cut_value(whole), max_nodelist_hosts));
        }
        names *= groups.back().size();
        pos = close + 1;
    }
    // Bytes of all names: every literal appears in every name, and each number of a group in names / group-size of
    // them.
    std::size_t bytes = names * total_size(literals);
    for (const auto& g : groups) bytes += names / g.size() * total_size(g);
    budget.take(names, bytes);

    std::vector<std::string> partial{literals.front()};
    for (std::size_t i = 0; i < groups.size(); ++i) {
        std::vector<std::string> next;
        next.reserve(partial.size() * groups[i].size());
        for (const auto& p : partial) {
            for (const auto& n : groups[i]) next.push_back(p + n + literals[i + 1]);
        }
        partial = std::move(next);
    }
    for (auto& p : partial) {
        if (p.empty()) throw NodelistError(fmt::format("empty name in '{}'", cut_value(whole)));
        out.push_back(std::move(p));
    }
}

}  // namespace

std::vector<std::string> expand_nodelist(std::string_view list) {
    NodelistBudget budget;
    return expand_nodelist(list, budget);
}

std::vector<std::string> expand_nodelist(std::string_view list, NodelistBudget& budget) {
    std::vector<std::string> out;
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= list.size(); ++i) {
        const char c = i < list.size() ? list[i] : ',';
        if (c == '[') {
            if (++depth > 1) throw NodelistError(fmt::format("nested '[' in '{}'", cut_value(list)));
        } else if (c == ']') {
            --depth;
        } else if (c == ',' && depth <= 0) {
            const std::string_view name = list.substr(start, i - start);
            if (name.empty()) {
                throw NodelistError(fmt::format("empty name between commas in '{}'", cut_value(list)));
            }
            expand_name(name, list, out, budget);
            start = i + 1;
            depth = 0;
        }
    }
    if (depth > 0) throw NodelistError(fmt::format("'[' never closed in '{}'", cut_value(list)));
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
