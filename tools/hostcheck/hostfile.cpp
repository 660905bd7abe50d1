#include "hostfile.hpp"

#include "nodelist.hpp"

#include "mpi_launcher/display_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace lockstep::hostcheck {

std::string_view to_string(HostfileFormat format) noexcept {
    switch (format) {
        case HostfileFormat::OpenMpi:
            return "openmpi";
        case HostfileFormat::Hydra:
            return "hydra";
        case HostfileFormat::Plain:
            return "plain";
        case HostfileFormat::Slurm:
            return "slurm";
    }
    return "plain";
}

HostfileFormat parse_hostfile_format(std::string_view name) {
    for (auto f : {HostfileFormat::OpenMpi, HostfileFormat::Hydra, HostfileFormat::Plain, HostfileFormat::Slurm}) {
        if (name == to_string(f)) return f;
    }
    throw UsageError(fmt::format("unknown hostfile format '{}': use openmpi, hydra, plain or slurm", name));
}

bool looks_like_ipv6(std::string_view name) noexcept {
    return std::count(name.begin(), name.end(), ':') >= 2;
}

bool is_valid_host_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > 253 || name.front() == '-' || name.front() == '.') return false;
    const bool ipv6 = looks_like_ipv6(name);
    return std::all_of(name.begin(), name.end(), [ipv6](unsigned char c) {
        return std::isalnum(c) != 0 || c == '.' || c == '-' || c == '_' || (ipv6 && (c == ':' || c == '%'));
    });
}

bool is_valid_user_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > 64 || name.front() == '-') return false;
    return std::all_of(name.begin(), name.end(),
                       [](unsigned char c) { return std::isalnum(c) != 0 || c == '.' || c == '-' || c == '_'; });
}

namespace {

using mpi_launcher::cut_value;

constexpr std::array openmpi_count_keys{"slots", "count", "cpu"};
constexpr std::array openmpi_max_keys{"max_slots", "max-slots", "slots_max", "slots-max"};
constexpr std::array openmpi_other_keys{"boards", "sockets_per_board", "sockets", "cores_per_socket", "cores",
                                        "cpu_set"};
constexpr std::array openmpi_user_keys{"username", "user"};

template <std::size_t N>
bool one_of(std::string_view key, const std::array<const char*, N>& keys) {
    return std::any_of(keys.begin(), keys.end(), [key](const char* k) { return key == k; });
}

bool is_openmpi_only_key(std::string_view key) {
    return one_of(key, openmpi_count_keys) || one_of(key, openmpi_max_keys) || one_of(key, openmpi_other_keys) ||
           key == "username";
}

// A line after comment removal, split into words; `key = value` is joined into one `key=value` word.
struct Words {
    int number = 0;
    std::string text;
    std::vector<std::string> words;
};

std::vector<std::string> split_words(std::string_view body) {
    std::vector<std::string> raw;
    std::istringstream in{std::string(body)};
    for (std::string w; in >> w;) raw.push_back(std::move(w));
    std::vector<std::string> words;
    for (std::size_t i = 0; i < raw.size(); ++i) {
        const bool joins = !words.empty() && (raw[i].front() == '=' || words.back().back() == '=');
        if (joins) {
            words.back() += raw[i];
        } else {
            words.push_back(raw[i]);
        }
    }
    return words;
}

std::optional<int> parse_count(std::string_view text) {
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
    return value;
}

// `[fe80::1]` -> `fe80::1`; anything else unchanged.
std::string strip_ipv6_brackets(std::string_view host) {
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        return std::string(host.substr(1, host.size() - 2));
    return std::string(host);
}

struct Hints {
    std::optional<int> slurm_line;
    std::optional<int> openmpi_line;
    std::optional<int> hydra_line;       // `host:N` or `binding=`: Hydra only
    std::optional<int> hydra_weak_line;  // `user=`: Hydra's keyword, also read by OpenMPI
};

void collect_hints(const Words& w, Hints& hints) {
    const std::string& first = w.words.front();
    auto mark = [&](std::optional<int>& slot) {
        if (!slot) slot = w.number;
    };
    if (has_nodelist_brackets(first) || (first.find(',') != std::string::npos && !looks_like_ipv6(first))) {
        mark(hints.slurm_line);
    }
    if (first.find('@') != std::string::npos) mark(hints.openmpi_line);
    const std::size_t colon = first.find(':');
    if (colon != std::string::npos && !looks_like_ipv6(first) && first.front() != '[') mark(hints.hydra_line);
    for (std::size_t i = 1; i < w.words.size(); ++i) {
        const std::string key = w.words[i].substr(0, w.words[i].find('='));
        if (is_openmpi_only_key(key)) mark(hints.openmpi_line);
        if (key == "binding") mark(hints.hydra_line);
        if (key == "user") mark(hints.hydra_weak_line);
    }
}

HostfileFormat detect_format(const std::vector<Words>& lines, const std::string& path) {
    Hints hints;
    for (const auto& w : lines) collect_hints(w, hints);
    auto conflict = [&](int a, std::string_view what_a, int b, std::string_view what_b) {
        const auto& line = *std::find_if(lines.begin(), lines.end(), [b](const Words& w) { return w.number == b; });
        throw HostfileError({LineError{
            path, b, line.text,
            fmt::format("this line is {} syntax but line {} is {} syntax; no launcher reads both (force one with "
                        "--format, or make the lines agree)",
                        what_b, a, what_a)}});
    };
    if (hints.slurm_line && hints.openmpi_line)
        conflict(*hints.openmpi_line, "OpenMPI", *hints.slurm_line, "Slurm node-list");
    if (hints.slurm_line && hints.hydra_line)
        conflict(*hints.hydra_line, "Hydra", *hints.slurm_line, "Slurm node-list");
    if (hints.openmpi_line && hints.hydra_line) {
        if (*hints.openmpi_line < *hints.hydra_line)
            conflict(*hints.openmpi_line, "OpenMPI", *hints.hydra_line, "Hydra");
        conflict(*hints.hydra_line, "Hydra", *hints.openmpi_line, "OpenMPI");
    }
    if (hints.slurm_line) return HostfileFormat::Slurm;
    if (hints.openmpi_line) return HostfileFormat::OpenMpi;
    if (hints.hydra_line || hints.hydra_weak_line) return HostfileFormat::Hydra;
    return HostfileFormat::Plain;
}

// Parses one line in the given form; throws LineError (by value) for a malformed one. Every name the line adds is
// taken from `budget`.
HostfileLine parse_line(const Words& w, HostfileFormat format, const std::string& path, NodelistBudget& budget) {
    HostfileLine line{w.number, w.text, {}, {}, {}, {}};
    auto fail = [&](std::string message) { throw LineError{path, w.number, w.text, std::move(message)}; };
    auto check_host = [&](const std::string& host) {
        if (!is_valid_host_name(host)) {
            fail(
                fmt::format("'{}' is not a host name or address (letters, digits, '.', '-', '_'; ':' only in IPv6 "
                            "addresses; no leading '-'; at most 253 characters)",
                            cut_value(host)));
        }
    };
    const std::string& first = w.words.front();

    switch (format) {
        case HostfileFormat::Plain: {
            if (w.words.size() != 1) {
                fail(
                    fmt::format("a plain hostfile holds one host per line, this line has {} words (use --format "
                                "openmpi or hydra for slot counts)",
                                w.words.size()));
            }
            HostEntry e;
            e.host = strip_ipv6_brackets(first);
            check_host(e.host);
            e.ipv6 = looks_like_ipv6(e.host);
            line.hosts.push_back(std::move(e));
            break;
        }
        case HostfileFormat::OpenMpi: {
            HostEntry e;
            std::string host_part = first;
            if (const auto at = first.find('@'); at != std::string::npos) {
                if (first.find('@', at + 1) != std::string::npos)
                    fail(fmt::format("'{}' has more than one '@'", cut_value(first)));
                e.user = first.substr(0, at);
                host_part = first.substr(at + 1);
                if (!is_valid_user_name(*e.user))
                    fail(fmt::format("'{}' is not a valid user name", cut_value(*e.user)));
            }
            if (host_part.starts_with('^')) {
                fail("'^host' exclusions name no host to check; list the hosts to check instead");
            }
            e.host = strip_ipv6_brackets(host_part);
            check_host(e.host);
            e.ipv6 = looks_like_ipv6(e.host);
            for (std::size_t i = 1; i < w.words.size(); ++i) {
                const std::string& word = w.words[i];
                const auto eq = word.find('=');
                if (eq == std::string::npos || eq == 0 || eq + 1 == word.size()) {
                    fail(fmt::format("'{}' is not key=value (OpenMPI lines are 'host slots=N max_slots=M')",
                                     cut_value(word)));
                }
                const std::string key = word.substr(0, eq);
                const std::string value = word.substr(eq + 1);
                if (!line.keyword) line.keyword = word;
                if (one_of(key, openmpi_count_keys) || one_of(key, openmpi_max_keys)) {
                    const auto n = parse_count(value);
                    if (!n || *n < 1) {
                        fail(fmt::format("'{}' needs a whole number from 1 to {}", cut_value(word), INT_MAX));
                    }
                    (one_of(key, openmpi_count_keys) ? e.slots : e.max_slots) = *n;
                } else if (one_of(key, openmpi_user_keys)) {
                    if (!is_valid_user_name(value))
                        fail(fmt::format("'{}' is not a valid user name", cut_value(value)));
                    e.user = value;
                } else if (!one_of(key, openmpi_other_keys)) {
                    fail(
                        fmt::format("unknown keyword '{}' (OpenMPI knows slots, max_slots, count, cpu, username, "
                                    "boards, sockets_per_board, cores_per_socket, cpu_set)",
                                    cut_value(key)));
                }
            }
            if (e.slots && e.max_slots && *e.max_slots < *e.slots) {
                fail(
                    fmt::format("max_slots={} is below slots={}; OpenMPI refuses such a line", *e.max_slots, *e.slots));
            }
            line.hosts.push_back(std::move(e));
            break;
        }
        case HostfileFormat::Hydra: {
            HostEntry e;
            if (looks_like_ipv6(first) || first.front() == '[') {
                fail(
                    "Hydra cannot read IPv6 addresses: it splits the word at ':' for the process count (use a host "
                    "name)");
            }
            const auto colon = first.find(':');
            e.host = first.substr(0, colon);
            if (e.host.find('@') != std::string::npos) {
                fail("Hydra hostfiles have no user@host form; write 'host user=NAME'");
            }
            check_host(e.host);
            if (colon != std::string::npos) {
                const auto n = parse_count(first.substr(colon + 1));
                if (!n || *n < 1) fail(fmt::format("'{}' needs a process count of at least 1 after ':'", first));
                e.slots = *n;
            }
            for (std::size_t i = 1; i < w.words.size(); ++i) {
                const std::string& word = w.words[i];
                const auto eq = word.find('=');
                const std::string key = word.substr(0, eq);
                if (eq == std::string::npos || eq + 1 == word.size() || (key != "user" && key != "binding")) {
                    fail(fmt::format("Hydra stops at '{}': after 'host:N' it reads only user=NAME and binding=...",
                                     word));
                }
                if (key == "user") {
                    const std::string value = word.substr(eq + 1);
                    if (!is_valid_user_name(value))
                        fail(fmt::format("'{}' is not a valid user name", cut_value(value)));
                    e.user = value;
                }
            }
            line.hosts.push_back(std::move(e));
            break;
        }
        case HostfileFormat::Slurm: {
            for (const auto& word : w.words) {
                std::vector<std::string> names;
                try {
                    names = expand_nodelist(word, budget);
                } catch (const NodelistBudgetError& err) {
                    throw;
                } catch (const NodelistError& err) {
                    fail(fmt::format("not a Slurm node list: {}", err.what()));
                }
                for (auto& name : names) {
                    check_host(name);
                    HostEntry e;
                    e.host = std::move(name);
                    line.hosts.push_back(std::move(e));
                }
            }
            break;
        }
    }
    return line;
}

// The other lines naming a host, the first few of them: a host named on every line of a long file would otherwise
// make every line's summary list every other line (quadratic in the file). `lines` is in ascending order (as
// interpret collects them), so the work is the same for every line whatever the number of lines: the first few
// entries, and a binary search for `except`.
std::string join_lines(const std::vector<int>& lines, int except) {
    constexpr std::size_t shown = 8;
    std::vector<int> others;
    for (auto it = lines.begin(); it != lines.end() && others.size() < shown; ++it) {
        if (*it != except) others.push_back(*it);
    }
    const std::size_t all_others = lines.size() - (std::binary_search(lines.begin(), lines.end(), except) ? 1 : 0);
    if (all_others <= shown) return fmt::format("{}", fmt::join(others, ", "));
    return fmt::format("{} and {} more", fmt::join(others, ", "), all_others - shown);
}

// Fills in what OpenMPI and Hydra would each make of every line, and the list of distinct targets.
void interpret(Hostfile& hf) {
    // OpenMPI: slots of all lines naming a host are summed (hostfile.c adds each line's count to the node's). The sum
    // is checked: OpenMPI counts slots in an int, and a sum past INT_MAX would wrap to a negative count.
    std::map<std::string, int> openmpi_total;
    std::map<std::string, std::vector<int>> lines_of_host;
    std::vector<LineError> overflows;
    std::set<std::string> overflowed;  // one message per host, at the line where its sum passes the limit
    for (const auto& line : hf.lines) {
        for (const auto& e : line.hosts) {
            const int own = e.slots.value_or(e.max_slots.value_or(1));
            int& total = openmpi_total[e.host];
            auto& ls = lines_of_host[e.host];
            if (total > INT_MAX - own) {
                if (overflowed.insert(e.host).second) {
                    overflows.push_back(LineError{
                        hf.path, line.number, line.text,
                        fmt::format("the slots of '{}' add up to more than {} with this line ({} from line{} {}, {} "
                                    "here); no launcher counts that many: give each line the host's real slots",
                                    e.host, INT_MAX, total, ls.size() > 1 ? "s" : "", join_lines(ls, 0), own)});
                }
                total = INT_MAX;
            } else {
                total += own;
            }
            if (ls.empty() || ls.back() != line.number) ls.push_back(line.number);
        }
    }
    if (!overflows.empty()) throw HostfileError(std::move(overflows));

    std::string previous_host;  // Hydra merges a line into the block above only when the host is the same
    int previous_line = 0;
    int block = 0;
    std::map<std::string, int> hydra_first_line;
    for (auto& line : hf.lines) {
        const bool bracket_list =
            line.hosts.size() > 1 || (hf.format == HostfileFormat::Slurm && has_nodelist_brackets(line.text));
        if (bracket_list) {
            const std::string list = line.text.substr(0, line.text.find('#'));
            const std::string msg = fmt::format(
                "would take the node list for one host name: expand it to its {} hosts first, one per line "
                "(scontrol show hostnames '{}')",
                line.hosts.size(), cut_value(list.substr(0, list.find_last_not_of(" \t") + 1)));
            line.openmpi = {false, "mpirun " + msg};
            line.hydra = {false, "mpiexec " + msg};
            previous_host.clear();
            continue;
        }
        const HostEntry& e = line.hosts.front();
        const auto& ls = lines_of_host[e.host];
        const int own = e.slots.value_or(e.max_slots.value_or(1));

        // OpenMPI.
        if (hf.format == HostfileFormat::Hydra && e.slots) {
            line.openmpi = {false, fmt::format("OpenMPI has no 'host:N' form: it would take '{}:{}' for a host "
                                               "name; write '{} slots={}'",
                                               e.host, *e.slots, e.host, *e.slots)};
        } else {
            std::string s = fmt::format("{} slot{}", own, own == 1 ? "" : "s");
            if (!e.slots && !e.max_slots)
                s += " (no slots= given: 1 slot per line in OpenMPI 4; OpenMPI 5 counts cores)";
            if (ls.size() > 1) {
                s += fmt::format("; {} in all with line{} {}", openmpi_total[e.host], ls.size() > 2 ? "s" : "",
                                 join_lines(ls, line.number));
            }
            if (e.host == "localhost" || e.host == "127.0.0.1" || e.host == "::1") {
                s += "; OpenMPI renames it to this machine's name, merging it with any line that names this machine";
            }
            line.openmpi = {true, std::move(s)};
        }

        // Hydra.
        if (e.ipv6) {
            line.hydra = {false, fmt::format("Hydra cannot read the IPv6 address '{}': it splits at ':' for the "
                                             "process count",
                                             e.host)};
            previous_host.clear();
        } else if (line.keyword && !line.keyword->starts_with("user=")) {
            line.hydra = {false, fmt::format("Hydra stops at '{}' (\"token not supported\"); write '{}:{}'",
                                             *line.keyword, e.host, own)};
            previous_host.clear();
        } else {
            std::string s;
            if (e.host == previous_host) {
                s = fmt::format("{} process{} merged into block {} with line {} above", own, own == 1 ? "" : "es",
                                block, previous_line);
            } else {
                ++block;
                s = fmt::format("block {}: {} process{}", block, own, own == 1 ? "" : "es");
                if (const auto it = hydra_first_line.find(e.host); it != hydra_first_line.end()) {
                    s += fmt::format(
                        " (not merged with line {}: Hydra merges adjacent lines only, so this host gets "
                        "a second block in the round-robin)",
                        it->second);
                }
            }
            if (e.user && hf.format == HostfileFormat::OpenMpi) {
                s += fmt::format("; Hydra hands '{}@{}' to ssh as the host name", *e.user, e.host);
            }
            hydra_first_line.try_emplace(e.host, line.number);
            previous_host = e.host;
            previous_line = line.number;
            line.hydra = {true, std::move(s)};
        }
    }

    // Targets: distinct (user, host) pairs in order of first appearance.
    std::map<std::pair<std::string, std::string>, std::size_t> index;
    for (const auto& line : hf.lines) {
        for (const auto& e : line.hosts) {
            const auto key = std::make_pair(e.user.value_or(""), e.host);
            auto [it, inserted] = index.try_emplace(key, hf.targets.size());
            if (inserted) hf.targets.push_back(HostTarget{e.host, e.user, {}, openmpi_total[e.host], e.ipv6});
            auto& t = hf.targets[it->second];
            if (t.lines.empty() || t.lines.back() != line.number) t.lines.push_back(line.number);
        }
    }
}

}  // namespace

Hostfile parse_hostfile(std::string_view text, const std::string& path, std::optional<HostfileFormat> forced) {
    std::vector<Words> lines;
    int number = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t end = std::min(text.find('\n', pos), text.size());
        std::string raw(text.substr(pos, end - pos));
        pos = end + 1;
        ++number;
        if (!raw.empty() && raw.back() == '\r') raw.pop_back();
        const std::string body = raw.substr(0, raw.find('#'));
        auto words = split_words(body);
        if (words.empty()) continue;
        lines.push_back(Words{number, std::move(raw), std::move(words)});
    }
    if (lines.empty()) throw HostfileError(path, "names no host (only blank or comment lines); add one host per line");

    Hostfile hf;
    hf.path = path;
    hf.format_detected = !forced.has_value();
    hf.format = forced ? *forced : detect_format(lines, path);

    // One budget for the whole file: the names of every line together, however they are spread over the lines.
    NodelistBudget budget;
    std::vector<LineError> errors;
    std::size_t more_errors = 0;
    for (const auto& w : lines) {
        try {
            HostfileLine line = parse_line(w, hf.format, path, budget);
            if (hf.format != HostfileFormat::Slurm) budget.take(line.hosts.size(), line.hosts.front().host.size());
            hf.lines.push_back(std::move(line));
        } catch (LineError& e) {
            // Every bad line counts, but a file of a million bad lines need not be a million messages.
            if (errors.size() < max_listed_line_errors) {
                errors.push_back(std::move(e));
            } else {
                ++more_errors;
            }
        } catch (const NodelistBudgetError& e) {
            // Every later line would be refused alike: this line is the one to name.
            errors.push_back(LineError{path, w.number, w.text, e.what()});
            break;
        }
    }
    if (more_errors > 0) {
        errors.push_back(LineError{path, 0, "", fmt::format("and {} more malformed lines", more_errors)});
    }
    if (!errors.empty()) throw HostfileError(std::move(errors));
    interpret(hf);
    return hf;
}

namespace {

// At most one byte past the limit, so that /dev/zero or an endless pipe is refused, not read forever.
std::string read_limited(std::istream& in, const std::string& path) {
    std::string text;
    std::array<char, 65536> chunk{};
    while (text.size() <= max_hostfile_bytes && in.read(chunk.data(), chunk.size()).gcount() > 0) {
        text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) {
        throw HostfileError(path, fmt::format("cannot be read ({}); give the path of an existing hostfile",
                                              std::error_code(errno, std::generic_category()).message()));
    }
    if (text.size() > max_hostfile_bytes) {
        throw HostfileError(path, fmt::format("is larger than {} MiB, more than any hostfile of {} hosts needs",
                                              max_hostfile_bytes >> 20, max_hostfile_hosts));
    }
    return text;
}

}  // namespace

Hostfile nodelist_hosts(const std::string& list, const std::string& origin, const std::string& source) {
    if (list.find('\n') != std::string::npos) {
        throw HostfileError(origin, "a node list is one line; give a file of several lines as the hostfile");
    }
    Hostfile hf = parse_hostfile(list, origin, HostfileFormat::Slurm);
    hf.format_detected = true;
    hf.source = source;
    return hf;
}

Hostfile read_hostfile(const std::string& path, std::optional<HostfileFormat> forced) {
    if (path == "-") {
        std::cin.exceptions(std::ios::goodbit);
        Hostfile hf = parse_hostfile(read_limited(std::cin, "-"), "-", forced);
        hf.source = "stdin";
        return hf;
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        throw HostfileError(path, "is a directory; give the path of a hostfile");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw HostfileError(path, fmt::format("cannot be read ({}); give the path of an existing hostfile",
                                              std::error_code(errno, std::generic_category()).message()));
    }
    return parse_hostfile(read_limited(in, path), path, forced);
}

}  // namespace lockstep::hostcheck
