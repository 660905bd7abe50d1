// The report as JSON, the stable schema of docs/hostcheck.md: as one tree (to_json) or written item by item
// (write_json), and the document of a run that could not start (error_json).

#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>

namespace lockstep::hostcheck {

using nlohmann::json;

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

}  // namespace lockstep::hostcheck
