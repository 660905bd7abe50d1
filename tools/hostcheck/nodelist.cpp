#include "nodelist.hpp"

#include "mpi_launcher/display_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <utility>

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

namespace {

// A name cut into its dimensions: literals[0] numbers[0] literals[1] ... numbers[k-1] literals[k].
struct NameParts {
    std::vector<std::string> literals{std::string()};
    std::vector<std::string> numbers;
};

constexpr std::size_t max_dimension_digits = 9;  // what expand_nodelist reads as one number

NameParts split_name(const std::string& name) {
    NameParts parts;
    if (name.find_first_of(":[],") != std::string::npos) {
        parts.literals.front() = name;
        return parts;
    }
    std::size_t i = 0;
    while (i < name.size()) {
        std::size_t end = i;
        while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end])) != 0) ++end;
        if (end == i) {
            parts.literals.back() += name[i++];
        } else if (end - i > max_dimension_digits) {
            parts.literals.back().append(name, i, end - i);
            i = end;
        } else {
            parts.numbers.push_back(name.substr(i, end - i));
            parts.literals.emplace_back();
            i = end;
        }
    }
    return parts;
}

long number_value(const std::string& digits) {
    long value = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return value;
}

// Natural order: literals as text, numbers by value (then by width, `8` before `08`).
bool natural_less(const NameParts& a, const NameParts& b) {
    const std::size_t n = std::min(a.numbers.size(), b.numbers.size());
    for (std::size_t i = 0; i < n; ++i) {
        if (a.literals[i] != b.literals[i]) return a.literals[i] < b.literals[i];
        const long x = number_value(a.numbers[i]);
        const long y = number_value(b.numbers[i]);
        if (x != y) return x < y;
        if (a.numbers[i].size() != b.numbers[i].size()) return a.numbers[i].size() < b.numbers[i].size();
    }
    if (a.literals[n] != b.literals[n]) return a.literals[n] < b.literals[n];
    return a.numbers.size() < b.numbers.size();
}

// One dimension's numbers as a range set: `7`, or `[01-08,10]`. A range keeps the width of its lower bound, as
// expand_ranges reads it, so each range grows only by numbers written at that width.
std::string fold_numbers(const std::vector<std::string>& texts) {
    std::set<std::pair<long, std::string>> left;
    for (const auto& t : texts) left.emplace(number_value(t), t);
    std::vector<std::string> items;
    while (!left.empty()) {
        const auto [lo, lo_text] = *left.begin();
        left.erase(left.begin());
        const int width = static_cast<int>(lo_text.size());
        long hi = lo;
        for (auto next = left.find({hi + 1, fmt::format("{:0{}}", hi + 1, width)}); next != left.end();
             next = left.find({hi + 1, fmt::format("{:0{}}", hi + 1, width)})) {
            left.erase(next);
            ++hi;
        }
        items.push_back(hi == lo ? lo_text : fmt::format("{}-{:0{}}", lo_text, hi, width));
    }
    if (items.size() == 1 && items.front().find('-') == std::string::npos) return items.front();
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : ",") + items[i];
    return out + "]";
}

// A partly folded name: its dimensions as text (a number, or a range set once folded) and the position of its first
// name in natural order, which orders the output.
struct FoldedEntry {
    std::vector<std::string> dimensions;
    std::size_t first = 0;
};

}  // namespace

std::string fold_nodelist(const std::vector<std::string>& names) {
    std::vector<NameParts> parts;
    parts.reserve(names.size());
    for (const auto& n : names) parts.push_back(split_name(n));
    std::sort(parts.begin(), parts.end(), natural_less);
    // Repeats are adjacent now; equal parts are equal names.
    parts.erase(std::unique(parts.begin(), parts.end(),
                            [](const NameParts& a, const NameParts& b) {
                                return a.literals == b.literals && a.numbers == b.numbers;
                            }),
                parts.end());

    // Names of one pattern (the same literals) fold together.
    std::map<std::vector<std::string>, std::vector<FoldedEntry>> patterns;
    std::vector<const std::vector<std::string>*> pattern_order;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        auto [it, inserted] = patterns.try_emplace(parts[i].literals);
        if (inserted) pattern_order.push_back(&it->first);
        it->second.push_back(FoldedEntry{parts[i].numbers, i});
    }

    std::vector<std::pair<std::size_t, std::string>> out;  // (first, folded text)
    for (const auto* literals : pattern_order) {
        std::vector<FoldedEntry> entries = std::move(patterns[*literals]);
        const std::size_t k = literals->size() - 1;
        for (std::size_t d = k; d-- > 0;) {
            // Entries alike in every other dimension become one, with dimension d folded.
            std::map<std::vector<std::string>, std::size_t> slot;
            std::vector<FoldedEntry> next;
            std::vector<std::vector<std::string>> numbers;
            for (auto& e : entries) {
                std::vector<std::string> key = e.dimensions;
                key[d].clear();
                auto [it, inserted] = slot.try_emplace(std::move(key), next.size());
                if (inserted) {
                    next.push_back(FoldedEntry{e.dimensions, e.first});
                    numbers.emplace_back();
                }
                numbers[it->second].push_back(std::move(e.dimensions[d]));
            }
            for (std::size_t i = 0; i < next.size(); ++i) next[i].dimensions[d] = fold_numbers(numbers[i]);
            entries = std::move(next);
        }
        for (const auto& e : entries) {
            std::string text = (*literals)[0];
            for (std::size_t d = 0; d < k; ++d) text += e.dimensions[d] + (*literals)[d + 1];
            out.emplace_back(e.first, std::move(text));
        }
    }
    std::sort(out.begin(), out.end());
    std::string joined;
    for (const auto& [first, text] : out) {
        if (!joined.empty()) joined += ',';
        joined += text;
    }
    return joined;
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
