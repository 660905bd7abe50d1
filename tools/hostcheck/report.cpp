#include "report.hpp"

#include "mpi_launcher/display_text.hpp"
#include "nodelist.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ostream>
#include <set>

namespace lockstep::hostcheck {

using nlohmann::json;

std::string_view to_string(HostStatus s) noexcept {
    switch (s) {
        case HostStatus::Ok:
            return "ok";
        case HostStatus::Warning:
            return "warning";
        case HostStatus::Failed:
            return "failed";
        case HostStatus::Skipped:
            return "skipped";
    }
    return "skipped";
}

std::size_t Report::mesh_failures() const {
    return static_cast<std::size_t>(
        std::count_if(mesh.pairs.begin(), mesh.pairs.end(), [](const MeshPair& p) { return !p.ok; }));
}

bool Report::mpirun_failed() const {
    if (mpirun.ran) return mpirun.status != "ok";
    // Not run because MPI is missing here: the job cannot start from this machine either (srun needs no MPI here).
    return settings.local_mpi.flavour == mpi_launcher::MpiFlavour::None &&
           settings.launcher != mpi_launcher::Launcher::Srun &&
           std::find(settings.skipped_stages.begin(), settings.skipped_stages.end(), "mpirun") ==
               settings.skipped_stages.end();
}

std::vector<std::string> Report::unverified() const {
    auto skipped = [&](std::string_view stage) {
        return std::find(settings.skipped_stages.begin(), settings.skipped_stages.end(), stage) !=
               settings.skipped_stages.end();
    };
    const auto remote = static_cast<std::size_t>(
        std::count_if(hosts.begin(), hosts.end(), [](const HostReport& h) { return !h.local; }));
    auto hosts_text = [](std::size_t k) { return fmt::format("{} host{}", k, k == 1 ? "" : "s"); };
    std::vector<std::string> out;
    if (skipped("resolve") && remote > 0) {
        out.push_back(fmt::format("names: {} not resolved (--skip resolve)", hosts_text(remote)));
    }
    const bool srun = settings.launcher == mpi_launcher::Launcher::Srun;
    if (skipped("probe") && remote > 0) {
        out.push_back(fmt::format("ssh: {} not probed (--skip probe); their MPI not compared{}", hosts_text(remote),
                                  srun ? " (srun itself needs no ssh)" : ""));
    }
    const bool mesh_wanted =
        mesh.reason == "skipped" || mesh.reason == "--no-mesh" || mesh.reason == "--max-time reached";
    if (!mesh.ran && mesh_wanted && settings.tree_spawn && !srun && remote >= 2) {
        out.push_back(fmt::format("node-to-node ssh (Open MPI tree spawn): not checked ({})", mesh.reason));
    }
    if (!mpirun.ran && !mpirun_failed() && !hosts.empty()) {
        const std::string which =
            settings.launcher ? std::string(mpi_launcher::to_string(*settings.launcher)) : std::string("mpirun");
        out.push_back(
            fmt::format("launch ({}): not run ({})", which, mpirun.reason.empty() ? "skipped" : mpirun.reason));
    }
    return out;
}

int Report::exit_code() const {
    const bool host_problem = std::any_of(hosts.begin(), hosts.end(), [](const HostReport& h) {
        return h.status == HostStatus::Failed || h.status == HostStatus::Warning;
    });
    return host_problem || mesh_failures() > 0 || mpirun_failed() ? 1 : 0;
}

void Report::add_hostfile_targets() {
    hosts.reserve(hosts.size() + hostfile.targets.size());
    for (const auto& t : hostfile.targets) {
        HostReport h;
        h.host = t.host;
        h.user = t.user;
        h.lines = t.lines;
        h.slots = t.openmpi_slots;
        hosts.push_back(std::move(h));
    }
}

namespace {

double round_ms(mpi_launcher::Seconds s) {
    return std::round(s.count() * 1000.0) / 1000.0;
}

json optional_string(const std::optional<std::string>& s) {
    return s ? json(*s) : json(nullptr);
}

json mpi_json(const mpi_launcher::MpiInstall& mpi) {
    return json{{"flavour", to_string(mpi.flavour)},
                {"version", mpi.version.empty() ? json(nullptr) : json(mpi.version)},
                {"launcher", mpi.launcher_path.empty() ? json(nullptr) : json(mpi.launcher_path)},
                {"description", mpi.describe()}};
}

json reading_json(const LineReading& r) {
    return json{{"usable", r.usable}, {"summary", r.summary}};
}

json host_json(const HostReport& h) {
    json remote = nullptr;
    if (h.remote) {
        remote = json{{"hostname", h.remote->hostname},
                      {"path", h.remote->path},
                      {"programs", h.remote->programs},
                      {"mpi", mpi_json(h.remote->mpi)},
                      {"complete", h.remote->complete}};
    }
    return json{{"host", h.host},
                {"user", optional_string(h.user)},
                {"lines", h.lines},
                {"slots", h.slots},
                {"address", h.addresses.empty() ? json(nullptr) : json(h.addresses.front())},
                {"addresses", h.addresses},
                {"status", to_string(h.status)},
                {"problem", h.problem ? json(to_string(*h.problem)) : json(nullptr)},
                {"evidence", h.problem ? json(h.evidence) : json(nullptr)},
                {"remedy", h.problem ? json(h.remedy) : json(nullptr)},
                {"details", h.details},
                {"same_machine_as", h.same_machine_as},
                {"remote", remote},
                {"elapsed_s", h.probe_elapsed ? json(round_ms(*h.probe_elapsed)) : json(nullptr)},
                {"local", h.local}};
}

json line_json(const HostfileLine& l) {
    json hosts = json::array();
    for (const auto& e : l.hosts) hosts.push_back(e.host);
    return json{{"line", l.number},
                {"text", l.text},
                {"hosts", hosts},
                {"openmpi", reading_json(l.openmpi)},
                {"hydra", reading_json(l.hydra)}};
}

// The document without its two long arrays (the hostfile's lines and the hosts), which the caller fills in.
json document_json(const Report& r, json lines, json hosts) {
    std::map<std::string, int> problem_counts;
    std::map<std::string, int> status_counts{{"ok", 0}, {"warning", 0}, {"failed", 0}, {"skipped", 0}};
    for (const auto& h : r.hosts) {
        ++status_counts[std::string(to_string(h.status))];
        if (h.problem) ++problem_counts[std::string(to_string(*h.problem))];
    }
    json groups = json::array();
    for (const auto& g : r.environment) {
        groups.push_back(json{{"mpi", g.mpi}, {"programs", g.programs}, {"hosts", g.hosts}});
    }
    json failures = json::array();
    for (const auto& p : r.mesh.pairs) {
        if (p.ok) continue;
        failures.push_back(json{{"from", r.hostfile.targets[p.from].host},
                                {"to", r.hostfile.targets[p.to].host},
                                {"problem", to_string(p.problem.value_or(Problem::Other))},
                                {"evidence", p.evidence},
                                {"remedy", p.remedy}});
    }
    json mesh_nodes = json::array();
    for (auto i : r.mesh.nodes) mesh_nodes.push_back(r.hostfile.targets[i].host);
    const auto& m = r.mpirun;
    const std::vector<std::string> unverified = r.unverified();
    return json{
        {"schema", schema_id},
        {"tool", {{"name", "lockstep hostcheck"}, {"version", r.tool_version}}},
        {"hostfile",
         {{"path", r.hostfile.path},
          {"source", r.hostfile.source},
          {"format", to_string(r.hostfile.format)},
          {"format_detected", r.hostfile.format_detected},
          {"lines", lines}}},
        {"settings",
         {{"ssh_command", r.settings.agent.argv},
          {"ssh_command_source", r.settings.agent.source},
          {"fanout", r.settings.fanout},
          {"timeout_s", r.settings.timeout.count()},
          {"max_time_s", r.settings.max_time ? json(r.settings.max_time->count()) : json(nullptr)},
          {"time_bound_s", round_ms(r.settings.time_bound)},
          {"mpi", mpi_json(r.settings.local_mpi)},
          {"tree_spawn", r.settings.tree_spawn},
          {"skipped_stages", r.settings.skipped_stages},
          {"launcher", r.settings.launcher ? json(mpi_launcher::to_string(*r.settings.launcher)) : json(nullptr)}}},
        {"hosts", hosts},
        {"environment", {{"consistent", r.environment_consistent()}, {"groups", groups}}},
        {"mesh",
         {{"ran", r.mesh.ran},
          {"reason", r.mesh.reason},
          {"sample", r.mesh.sample ? json(*r.mesh.sample) : json(nullptr)},
          {"nodes", mesh_nodes},
          {"pairs_checked", r.mesh.pairs.size()},
          {"failures", failures}}},
        {"mpirun",
         {{"ran", m.ran},
          {"status", m.status},
          {"reason", m.reason},
          {"command", m.command},
          {"hosts", m.hosts},
          {"expected", m.expected},
          {"answered", m.answered},
          {"missing", m.missing},
          {"exit_code", m.exit_code ? json(*m.exit_code) : json(nullptr)},
          {"elapsed_s", round_ms(m.elapsed)},
          {"evidence", m.evidence},
          {"remedy", m.remedy}}},
        {"summary",
         {{"hosts", r.hosts.size()},
          {"ok", status_counts["ok"]},
          {"warning", status_counts["warning"]},
          {"failed", status_counts["failed"]},
          {"skipped", status_counts["skipped"]},
          {"problems", problem_counts},
          {"mesh_failures", r.mesh_failures()},
          {"mpirun", m.ran ? m.status : (r.mpirun_failed() ? "failed" : "skipped")},
          {"elapsed_s", round_ms(r.elapsed)},
          {"time_bound_s", round_ms(r.settings.time_bound)},
          {"exit_code", r.exit_code()},
          {"verdict", r.exit_code() != 0   ? "problems_found"
                      : unverified.empty() ? "all_well"
                                           : "not_verified"},
          {"unverified", unverified}}},
    };
}

constexpr std::string_view lines_placeholder = "\"@@lockstep-hostcheck-lines@@\"";
constexpr std::string_view hosts_placeholder = "\"@@lockstep-hostcheck-hosts@@\"";

std::string dump(const json& j) {
    // Replace, not throw, on bytes that are not UTF-8: ssh's evidence is whatever the remote side printed.
    return j.dump(2, ' ', false, json::error_handler_t::replace);
}

// Writes `items` as a JSON array, one item per line (each dumped compactly on its own), so that the whole array never
// exists as one tree and a report of many hosts costs little more than its bytes.
template <class Items, class ToJson>
void write_array(std::ostream& out, const Items& items, std::size_t indent, ToJson to_json_item) {
    if (items.empty()) {
        out << "[]";
        return;
    }
    std::string inner(indent + 3, ' ');
    inner.front() = '\n';
    out << '[';
    bool first = true;
    for (const auto& item : items) {
        out << (first ? "" : ",") << inner << to_json_item(item).dump(-1, ' ', false, json::error_handler_t::replace);
        first = false;
    }
    out << '\n' << std::string(indent, ' ') << ']';
}

}  // namespace

json to_json(const Report& r) {
    json lines = json::array();
    for (const auto& l : r.hostfile.lines) lines.push_back(line_json(l));
    json hosts = json::array();
    for (const auto& h : r.hosts) hosts.push_back(host_json(h));
    return document_json(r, std::move(lines), std::move(hosts));
}

void write_json(std::ostream& out, const Report& r) {
    // A report of 10^5 hosts as one nlohmann tree takes gigabytes and seconds to build and free; written host by
    // host it takes a fraction of that, which keeps --max-time a bound on the whole run, output included.
    const std::string skeleton = dump(document_json(r, json(lines_placeholder.substr(1, lines_placeholder.size() - 2)),
                                                    json(hosts_placeholder.substr(1, hosts_placeholder.size() - 2))));
    auto occurrences = [&](std::string_view what) {
        std::size_t n = 0;
        for (auto at = skeleton.find(what); at != std::string::npos; at = skeleton.find(what, at + 1)) ++n;
        return n;
    };
    if (occurrences(lines_placeholder) != 1 || occurrences(hosts_placeholder) != 1) {
        // A value from outside that reads like a placeholder: the slow way is the safe one.
        out << dump(to_json(r)) << '\n';
        return;
    }
    std::size_t pos = 0;
    while (pos < skeleton.size()) {
        const std::size_t lines_at = skeleton.find(lines_placeholder, pos);
        const std::size_t hosts_at = skeleton.find(hosts_placeholder, pos);
        const std::size_t at = std::min(lines_at, hosts_at);
        if (at == std::string::npos) {
            out << std::string_view(skeleton).substr(pos);
            break;
        }
        out << std::string_view(skeleton).substr(pos, at - pos);
        const std::size_t line_start = skeleton.rfind('\n', at) + 1;
        const std::size_t indent = skeleton.find_first_not_of(' ', line_start) - line_start;
        if (at == lines_at) {
            write_array(out, r.hostfile.lines, indent, line_json);
            pos = at + lines_placeholder.size();
        } else {
            write_array(out, r.hosts, indent, host_json);
            pos = at + hosts_placeholder.size();
        }
    }
    out << '\n';
}

json error_json(std::string_view kind, const std::string& message, const std::vector<LineError>& lines) {
    json errors = json::array();
    for (const auto& e : lines) {
        errors.push_back(json{{"path", e.path}, {"line", e.line}, {"text", e.text}, {"message", e.message}});
    }
    return json{{"schema", schema_id},
                {"error", {{"kind", kind}, {"message", message}, {"lines", errors}}},
                {"summary", {{"exit_code", 2}}}};
}

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
