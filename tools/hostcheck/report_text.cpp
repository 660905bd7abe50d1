// The report as a table for people: the hostfile's notable lines, the hosts (folded into groups of alike hosts, or
// one line each), the remote environment, the mesh, the launch and the summary.

#include "report.hpp"

#include "mpi_launcher/display_text.hpp"
#include "nodelist.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <ostream>

namespace lockstep::hostcheck {

namespace {

// Everything the table shows that came from outside (the hostfile, ssh, the nodes, the environment) goes through
// these: a terminal must print it, never obey it.
// The table's one line of evidence per host or pair; the JSON has the whole text.
constexpr std::size_t evidence_line_limit = 500;

std::string safe(std::string_view text) {
    return mpi_launcher::escape_control(text);
}
std::string safe_lines(std::string_view text) {
    return mpi_launcher::escape_control(text, true);
}
std::string safe_list(const std::vector<std::string>& items, std::string_view separator = ", ") {
    return safe(fmt::format("{}", fmt::join(items, separator)));
}

struct Palette {
    bool on = false;
    [[nodiscard]] std::string paint(std::string_view text, std::string_view code) const {
        return on ? fmt::format("\033[{}m{}\033[0m", code, text) : std::string(text);
    }
    [[nodiscard]] std::string status(HostStatus s) const {
        const std::string text(to_string(s));
        switch (s) {
            case HostStatus::Ok:
                return paint(text, "32");
            case HostStatus::Warning:
                return paint(text, "33");
            case HostStatus::Failed:
                return paint(text, "31");
            case HostStatus::Skipped:
                return paint(text, "2");
        }
        return text;
    }
};

// Pads by visible width: the colour codes take no room on screen.
std::string pad(const std::string& shown, std::size_t visible, std::size_t width) {
    return shown + std::string(width > visible ? width - visible : 0, ' ');
}

void print_hostfile(std::ostream& out, const Report& r, const TextStyle& style, const Palette& p) {
    const auto& hf = r.hostfile;
    if (hf.source == "option" || hf.source == "environment") {
        // A node list is not a hostfile for mpirun: how the launchers would read it as one is beside the point.
        fmt::print(out, "hosts from {}: Slurm node list, {} host{}\n", safe(hf.path), hf.targets.size(),
                   hf.targets.size() == 1 ? "" : "s");
        if (!style.all_lines) return;
    } else {
        fmt::print(out, "hostfile {}: {} format{}, {} line{}, {} host{}\n",
                   hf.source == "stdin" ? std::string("(stdin)") : safe(hf.path), to_string(hf.format),
                   hf.format_detected ? " (detected)" : " (forced)", hf.lines.size(), hf.lines.size() == 1 ? "" : "s",
                   hf.targets.size(), hf.targets.size() == 1 ? "" : "s");
    }
    std::size_t shown = 0;
    for (const auto& l : hf.lines) {
        const bool notable = !l.openmpi.usable || !l.hydra.usable ||
                             l.openmpi.summary.find("in all") != std::string::npos ||
                             l.hydra.summary.find("not merged") != std::string::npos ||
                             l.openmpi.summary.find("renames") != std::string::npos;
        if (!style.all_lines && !notable) continue;
        if (!style.all_lines && shown == 20) {
            fmt::print(out, "  ... more lines with notes: --lines shows every line\n");
            break;
        }
        ++shown;
        fmt::print(out, "  line {}: {}\n", l.number, mpi_launcher::shown_value(l.text));
        const std::string openmpi = safe(l.openmpi.summary);
        const std::string hydra = safe(l.hydra.summary);
        fmt::print(out, "    openmpi: {}\n", l.openmpi.usable ? openmpi : p.paint(openmpi, "33"));
        fmt::print(out, "    hydra:   {}\n", l.hydra.usable ? hydra : p.paint(hydra, "33"));
    }
}

void print_hosts(std::ostream& out, const Report& r, const Palette& p) {
    std::size_t host_w = 4;
    std::size_t addr_w = 7;
    std::size_t problem_w = 7;
    auto name_of = [](const HostReport& h) { return safe(h.user ? *h.user + "@" + h.host : h.host); };
    auto address_of = [](const HostReport& h) { return h.addresses.empty() ? "-" : safe(h.addresses.front()); };
    for (const auto& h : r.hosts) {
        host_w = std::max(host_w, std::min<std::size_t>(name_of(h).size(), 40));
        addr_w = std::max(addr_w, std::min<std::size_t>(address_of(h).size(), 40));
        if (h.problem) problem_w = std::max(problem_w, to_string(*h.problem).size());
    }
    fmt::print(out, "\n{} {} {} {} {}\n", pad("HOST", 4, host_w), pad("ADDRESS", 7, addr_w), pad("STATUS", 6, 7),
               pad("PROBLEM", 7, problem_w), "EVIDENCE");
    const std::string indent(host_w + addr_w + 7 + 3, ' ');
    for (const auto& h : r.hosts) {
        const std::string name = name_of(h);
        const std::string address = address_of(h);
        std::string evidence;
        if (h.problem) {
            evidence = mpi_launcher::shown_value(h.evidence_line, evidence_line_limit);
        } else if (h.remote) {
            evidence = safe(fmt::format("{}, {}", h.remote->hostname, h.remote->mpi.describe()));
        }
        const std::string status = p.status(h.status);
        fmt::print(out, "{} {} {} {} {}\n", pad(name, name.size(), host_w), pad(address, address.size(), addr_w),
                   pad(status, to_string(h.status).size(), 7),
                   pad(h.problem ? std::string(to_string(*h.problem)) : "-",
                       h.problem ? to_string(*h.problem).size() : 1, problem_w),
                   evidence);
        for (const auto& d : h.details) fmt::print(out, "{}{} {}\n", indent, p.paint("note:", "2"), safe(d));
        if (!h.same_machine_as.empty()) {
            fmt::print(out, "{}same machine as: {}\n", indent, safe_list(h.same_machine_as));
        }
        if (h.problem) fmt::print(out, "{}{} {}\n", indent, p.paint("remedy:", "1"), safe(h.remedy));
    }
}

// The longest node list a folded line shows; the JSON names every host.
constexpr std::size_t folded_list_limit = 2000;

std::string host_name(const HostReport& h) {
    return h.user ? *h.user + "@" + h.host : h.host;
}

std::string folded(const std::vector<std::string>& names, const TextStyle& style) {
    if (!style.fold) return safe_list(names);
    return mpi_launcher::shown_value(fold_nodelist(names), folded_list_limit);
}

// A host's line of evidence, or what it answered when nothing is wrong.
std::string evidence_of(const HostReport& h, bool with_node_name) {
    if (h.problem) return mpi_launcher::shown_value(h.evidence_line, evidence_line_limit);
    if (!h.remote) return {};
    return safe(with_node_name ? fmt::format("{}, {}", h.remote->hostname, h.remote->mpi.describe())
                               : h.remote->mpi.describe());
}

// The folded table: one line per group of alike hosts.
void print_host_groups(std::ostream& out, const Report& r, const Palette& p, const TextStyle& style) {
    const auto groups = alike_hosts(r);
    fmt::print(out, "\nhosts: {} in {} group{} of alike hosts (--no-fold: one line per host)\n", r.hosts.size(),
               groups.size(), groups.size() == 1 ? "" : "s");
    for (const auto& g : groups) {
        const HostReport& first = r.hosts[g.front()];
        std::vector<std::string> names;
        names.reserve(g.size());
        for (auto i : g) names.push_back(host_name(r.hosts[i]));
        const std::string code = first.problem ? std::string(to_string(*first.problem)) : std::string();
        const std::string evidence = evidence_of(first, g.size() == 1);
        fmt::print(out, "  {}{} ({}): {}{}\n", p.status(first.status), code.empty() ? "" : " " + code, g.size(),
                   folded(names, style), !first.problem && !evidence.empty() ? "  " + evidence : "");
        // Text that names the host is shown for the first one; the others' differs only in their own names.
        const std::string as_for =
            g.size() > 1 ? fmt::format("  [shown for {}; alike for all {}]", safe(host_name(first)), g.size()) : "";
        auto names_host = [&](const std::string& text) {
            return text.find(first.host) != std::string::npos ||
                   std::any_of(first.addresses.begin(), first.addresses.end(),
                               [&](const std::string& a) { return text.find(a) != std::string::npos; });
        };
        if (first.problem) {
            fmt::print(out, "    evidence: {}{}\n", evidence, names_host(first.evidence_line) ? as_for : "");
        }
        for (const auto& d : first.details) {
            fmt::print(out, "    {} {}{}\n", p.paint("note:", "2"), safe(d), names_host(d) ? as_for : "");
        }
        if (!first.same_machine_as.empty()) {
            fmt::print(out, "    same machine as: {}\n", safe_list(first.same_machine_as));
        }
        if (first.problem) {
            fmt::print(out, "    {} {}{}\n", p.paint("remedy:", "1"), safe(first.remedy),
                       names_host(first.remedy) ? as_for : "");
        }
    }
}

void print_environment(std::ostream& out, const Report& r, const TextStyle& style) {
    if (r.environment.empty()) return;
    fmt::print(out, "\nremote environment ({} group{}{}):\n", r.environment.size(),
               r.environment.size() == 1 ? "" : "s",
               r.environment_consistent() ? ", all nodes alike" : ", nodes differ");
    for (const auto& g : r.environment) {
        fmt::print(out, "  ---------------\n  {} ({})\n  ---------------\n",
                   style.fold ? folded(g.hosts, style) : safe_list(g.hosts, ","), g.hosts.size());
        std::vector<std::string> programs;
        for (const auto& [name, path] : g.programs) programs.push_back(name + "=" + path);
        fmt::print(out, "  {}; {}\n", g.mpi == "none" ? "no MPI on PATH" : safe(g.mpi),
                   programs.empty() ? "no MPI programs" : safe_list(programs, " "));
    }
}

void print_mesh(std::ostream& out, const Report& r, const Palette& p) {
    const auto& m = r.mesh;
    if (!m.ran) {
        if (!m.reason.empty()) fmt::print(out, "\nmesh: not run ({})\n", safe(m.reason));
        return;
    }
    const auto& targets = r.hostfile.targets;
    fmt::print(out, "\nmesh ({}; {} nodes, {}): {} of {} pairs failed\n", m.reason, m.nodes.size(),
               m.sample ? fmt::format("{} targets per node", *m.sample) : std::string("all pairs"), r.mesh_failures(),
               m.pairs.size());
    if (m.nodes.size() <= 24 && r.mesh_failures() > 0) {
        // The matrix: row = from, column = to; '.' reached, 'x' failed, ' ' not tried.
        std::map<std::pair<std::size_t, std::size_t>, bool> tried;
        for (const auto& pair : m.pairs) tried[{pair.from, pair.to}] = pair.ok;
        std::size_t w = 4;
        for (auto n : m.nodes) w = std::max(w, targets[n].host.size());
        fmt::print(out, "  {} ", pad("from\\to", 7, w + 3));
        for (std::size_t j = 0; j < m.nodes.size(); ++j) fmt::print(out, "{:>3}", j + 1);
        fmt::print(out, "\n");
        for (std::size_t i = 0; i < m.nodes.size(); ++i) {
            fmt::print(out, "  {} ",
                       pad(fmt::format("{} {}", i + 1, targets[m.nodes[i]].host),
                           fmt::format("{} {}", i + 1, targets[m.nodes[i]].host).size(), w + 3));
            for (auto to : m.nodes) {
                const auto it = tried.find({m.nodes[i], to});
                fmt::print(out, "{:>3}",
                           it == tried.end() ? std::string(m.nodes[i] == to ? "-" : " ")
                           : it->second      ? std::string(".")
                                             : p.paint("x", "31"));
            }
            fmt::print(out, "\n");
        }
    }
    for (const auto& pair : m.pairs) {
        if (pair.ok) continue;
        const std::string first_line = pair.evidence.substr(0, pair.evidence.find('\n'));
        fmt::print(out, "  {} -> {}: {}: {}\n    remedy: {}\n", safe(targets[pair.from].host),
                   safe(targets[pair.to].host), to_string(pair.problem.value_or(Problem::Other)),
                   mpi_launcher::shown_value(first_line, evidence_line_limit), safe(pair.remedy));
    }
}

void print_mpirun(std::ostream& out, const Report& r, const Palette& p, const TextStyle& style) {
    const auto& m = r.mpirun;
    if (!m.ran) {
        fmt::print(out, "\nmpirun: not run{}\n", m.reason.empty() ? "" : " (" + safe(m.reason) + ")");
        if (!m.remedy.empty()) fmt::print(out, "  remedy: {}\n", safe(m.remedy));
        return;
    }
    const std::string status = m.status == "ok" ? p.paint(m.status, "32") : p.paint(m.status, "31");
    fmt::print(out, "\nmpirun: {} ({} of {} nodes answered in {:.1f} s): {}\n", status,
               m.expected.size() - m.missing.size(), m.expected.size(), m.elapsed.count(), safe_list(m.command, " "));
    if (!m.missing.empty()) fmt::print(out, "  no answer from: {}\n", folded(m.missing, style));
    if (m.status != "ok") {
        fmt::print(out, "  evidence: {}\n  remedy: {}\n", safe_lines(m.evidence), safe(m.remedy));
    }
}

}  // namespace

namespace {

bool name_character(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

// `text` with every whole occurrence of `name` (not part of a longer name) replaced by a placeholder.
std::string without_name(std::string text, const std::string& name) {
    if (name.empty()) return text;
    constexpr char placeholder = '\x01';
    for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at)) {
        const std::size_t end = at + name.size();
        const bool starts = at == 0 || (!name_character(text[at - 1]) && text[at - 1] != '.');
        const bool ends =
            end == text.size() || (!name_character(text[end]) &&
                                   !(text[end] == '.' && end + 1 < text.size() && name_character(text[end + 1])));
        if (starts && ends) {
            text.replace(at, name.size(), 1, placeholder);
            at += 1;
        } else {
            at += 1;
        }
    }
    return text;
}

std::string without_own_names(const std::string& text, const HostReport& h) {
    // Longest first, so that a name is never cut by a shorter one inside it.
    std::vector<std::string> names = h.addresses;
    names.push_back(h.host);
    std::sort(names.begin(), names.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    std::string out = text;
    for (const auto& n : names) out = without_name(std::move(out), n);
    return out;
}

}  // namespace

std::vector<std::vector<std::size_t>> alike_hosts(const Report& r) {
    std::map<std::string, std::size_t> group_of;
    std::vector<std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < r.hosts.size(); ++i) {
        const HostReport& h = r.hosts[i];
        std::string key = fmt::format("{}\n{}\n{}\n", to_string(h.status), h.problem ? to_string(*h.problem) : "-",
                                      h.local ? "local" : "");
        key += without_own_names(h.evidence_line, h) + "\n";
        key += without_own_names(h.remedy, h) + "\n";
        for (const auto& d : h.details) key += without_own_names(d, h) + "\n";
        for (const auto& m : h.same_machine_as) key += m + ",";
        key += "\n";
        if (!h.problem && h.remote) key += h.remote->mpi.describe();
        auto [it, inserted] = group_of.try_emplace(std::move(key), groups.size());
        if (inserted) groups.emplace_back();
        groups[it->second].push_back(i);
    }
    return groups;
}

void print_text(std::ostream& out, const Report& r, const TextStyle& style) {
    const Palette p{style.colour};
    const std::string ssh =
        r.settings.agent.argv.empty()
            ? r.settings.agent.source
            : fmt::format("'{}' (from {})", fmt::join(r.settings.agent.argv, " "), r.settings.agent.source);
    fmt::print(out, "lockstep hostcheck {}: ssh command {}; local MPI: {}\n", r.tool_version, safe(ssh),
               safe(r.settings.local_mpi.describe()));
    print_hostfile(out, r, style, p);
    if (style.fold) {
        print_host_groups(out, r, p, style);
    } else {
        print_hosts(out, r, p);
    }
    print_environment(out, r, style);
    print_mesh(out, r, p);
    print_mpirun(out, r, p, style);

    std::map<std::string, int> problems;
    std::size_t ok = 0;
    std::size_t warn = 0;
    std::size_t failed = 0;
    for (const auto& h : r.hosts) {
        ok += h.status == HostStatus::Ok;
        warn += h.status == HostStatus::Warning;
        failed += h.status == HostStatus::Failed;
        if (h.problem) ++problems[std::string(to_string(*h.problem))];
    }
    std::vector<std::string> counts;
    for (const auto& [code, n] : problems) counts.push_back(fmt::format("{} {}", code, n));
    // "all well" only when every check ran: a skipped stage proves nothing either way.
    const auto unverified = r.unverified();
    if (!unverified.empty()) {
        fmt::print(out, "\nnot verified:\n");
        for (const auto& u : unverified) fmt::print(out, "  {}\n", safe(u));
    }
    const std::string verdict = r.exit_code() != 0   ? p.paint("problems found", "31")
                                : unverified.empty() ? p.paint("all well", "32")
                                                     : p.paint("no problems found in what ran, not all verified", "33");
    fmt::print(
        out,
        "\nsummary: {}: {} host{}: {} ok, {} warning{}, {} failed{}; mesh: {}; mpirun: {}; {:.1f} s (bound {:.0f} s)\n",
        verdict, r.hosts.size(), r.hosts.size() == 1 ? "" : "s", ok, warn, warn == 1 ? "" : "s", failed,
        counts.empty() ? "" : fmt::format(" ({})", fmt::join(counts, ", ")),
        r.mesh.ran ? fmt::format("{} failure{}", r.mesh_failures(), r.mesh_failures() == 1 ? "" : "s")
                   : std::string("not run"),
        r.mpirun.ran ? r.mpirun.status : (r.mpirun_failed() ? std::string("failed") : std::string("not run")),
        r.elapsed.count(), r.settings.time_bound.count());
}

}  // namespace lockstep::hostcheck
