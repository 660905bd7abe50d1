#include "mesh.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <map>

namespace lockstep::hostcheck {

std::vector<std::pair<std::size_t, std::size_t>> mesh_pairs(const std::vector<std::size_t>& nodes,
                                                            std::optional<std::size_t> sample) {
    std::vector<std::pair<std::size_t, std::size_t>> pairs;
    const std::size_t n = nodes.size();
    if (n < 2) return pairs;
    const std::size_t k = sample ? std::min(*sample, n - 1) : n - 1;
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t step = 1; step <= k; ++step) pairs.emplace_back(nodes[i], nodes[(i + step) % n]);
    }
    return pairs;
}

const std::string& mesh_remote_command() {
    // Line 1 of stdin: the ssh command and its options. Then one "host user" line per target ("-" for no user).
    // Every target is tried in a background subshell, 16 at a time; each prints one line shorter than PIPE_BUF, so
    // lines from parallel subshells never interleave.
    static const std::string command = fmt::format(
        "sh -c '"
        "IFS= read -r agent; n=0; "
        "while read -r h u; do [ -n \"$h\" ] || continue; "
        "( if [ \"$u\" = - ]; then o=$($agent \"$h\" echo {ok} 2>&1 </dev/null); "
        "else o=$($agent -l \"$u\" \"$h\" echo {ok} 2>&1 </dev/null); fi; r=$?; "
        "o=$(printf \"%s\" \"$o\" | tr \"\\t\\n\" \"  \" | cut -c1-2000); "
        "printf \"{line}\\t%s\\t%s\\t%s\\n\" \"$h\" \"$r\" \"$o\" ) & "
        "n=$((n+1)); if [ $((n % {parallel})) -eq 0 ]; then wait; fi; "
        "done; wait'",
        fmt::arg("ok", mesh_ok), fmt::arg("line", mesh_line), fmt::arg("parallel", mesh_parallel_per_node));
    return command;
}

void read_mesh_output(std::string_view out, std::size_t from, const std::vector<HostTarget>& targets,
                      std::vector<MeshPair>& pairs) {
    std::map<std::string, std::string> text_of;  // target host -> its line's evidence
    std::map<std::string, int> rc_of;
    std::size_t pos = 0;
    while (pos < out.size()) {
        const auto nl = std::min(out.find('\n', pos), out.size());
        std::string_view line = out.substr(pos, nl - pos);
        pos = nl + 1;
        if (!line.starts_with(mesh_line)) continue;
        line.remove_prefix(mesh_line.size());
        if (line.starts_with('\t')) line.remove_prefix(1);
        const auto tab1 = line.find('\t');
        if (tab1 == std::string_view::npos) continue;
        const std::string host(line.substr(0, tab1));
        const std::string_view rest = line.substr(tab1 + 1);
        const auto tab2 = rest.find('\t');
        // The exit status as the source node's shell wrote it; from_chars has no undefined overflow, unlike atoi.
        const std::string_view rc_text = rest.substr(0, tab2);
        int rc = -1;
        (void)std::from_chars(rc_text.data(), rc_text.data() + rc_text.size(), rc);
        rc_of[host] = rc;
        text_of[host] = tab2 == std::string_view::npos ? std::string{} : std::string(rest.substr(tab2 + 1));
    }
    for (auto& p : pairs) {
        if (p.from != from) continue;
        const std::string& to_host = targets[p.to].host;
        const auto it = text_of.find(to_host);
        if (it == text_of.end()) continue;  // the caller fills in why the source said nothing
        if (it->second.find(mesh_ok) != std::string::npos) {
            p.ok = true;
            p.problem.reset();
            continue;
        }
        const auto c = classify_ssh_error(it->second);
        p.ok = false;
        p.problem = c.problem;
        p.evidence =
            it->second.empty() ? fmt::format("ssh exited with {} and printed nothing", rc_of[to_host]) : it->second;
        RemedyContext rc;
        rc.host = to_host;
        p.remedy = fmt::format("from {}: {}", targets[p.from].host, remedy_for(c.problem, rc));
    }
}

MeshResult run_mesh(const std::vector<HostTarget>& targets, const std::vector<std::size_t>& nodes,
                    const SshAgent& agent, const MeshOptions& options) {
    MeshResult result;
    result.ran = true;
    result.sample = options.sample;
    result.nodes = nodes;
    const auto pairs = mesh_pairs(nodes, options.sample);
    for (const auto& [from, to] : pairs) result.pairs.push_back(MeshPair{from, to, false, Problem::Other, {}, {}});

    // One command per source, its targets on stdin.
    std::map<std::size_t, std::vector<std::size_t>> targets_of;
    for (const auto& [from, to] : pairs) targets_of[from].push_back(to);
    std::string agent_line = fmt::format("{}", fmt::join(agent.argv, " "));
    for (const auto& o : batch_options(agent, options.timeout)) agent_line += " " + o;

    std::vector<mpi_launcher::Command> commands;
    std::vector<std::size_t> sources;
    for (const auto& [from, tos] : targets_of) {
        mpi_launcher::Command c;
        c.argv = remote_argv(agent, options.timeout, targets[from].host, targets[from].user, mesh_remote_command());
        c.input = agent_line + "\n";
        for (auto to : tos) c.input += fmt::format("{} {}\n", targets[to].host, targets[to].user.value_or("-"));
        const auto rounds = (tos.size() + mesh_parallel_per_node - 1) / mesh_parallel_per_node;
        c.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout) * (rounds + 1) +
                    std::chrono::seconds(2);
        commands.push_back(std::move(c));
        sources.push_back(from);
    }
    mpi_launcher::FanoutOptions fo;
    fo.fanout = options.fanout;
    fo.deadline = options.deadline;
    fo.progress = options.progress;
    const auto results = mpi_launcher::run_fanout(commands, fo);
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        read_mesh_output(r.out, sources[i], targets, result.pairs);
        // Pairs the source never reported on: the source itself failed or ran out of time.
        for (auto& p : result.pairs) {
            if (p.from != sources[i] || p.ok || !p.evidence.empty()) continue;
            if (r.ending == mpi_launcher::CommandResult::Ending::TimedOut ||
                r.ending == mpi_launcher::CommandResult::Ending::NotStarted) {
                p.problem = Problem::Timeout;
                p.evidence = fmt::format("{} did not report on {} in time", targets[p.from].host, targets[p.to].host);
            } else {
                const auto c = classify_ssh_error(r.err);
                p.problem = c.problem;
                p.evidence =
                    fmt::format("the check could not run on {}: {}", targets[p.from].host,
                                r.err.empty() ? fmt::format("exit {}", r.exit_code) : clip_evidence(r.err, 500));
            }
            RemedyContext rc;
            rc.host = targets[p.from].host;
            p.remedy = remedy_for(*p.problem, rc);
        }
    }
    return result;
}

}  // namespace lockstep::hostcheck
