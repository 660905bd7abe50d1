#include "probe.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace lockstep::hostcheck {

const std::string& probe_remote_command() {
    // POSIX sh only, no single quote and no '!' inside (it is wrapped in single quotes, and csh expands '!').
    static const std::string command = fmt::format(
        "sh -c '"
        "echo {}; "
        "echo \"hostname $(uname -n 2>/dev/null || hostname 2>/dev/null)\"; "
        "echo \"path $PATH\"; "
        "for c in mpirun mpiexec orted prted prterun hydra_pmi_proxy srun; do "
        "p=$(command -v $c 2>/dev/null) && echo \"program $c $p\"; done; "
        "if command -v mpirun >/dev/null 2>&1; then m=mpirun; "
        "elif command -v mpiexec >/dev/null 2>&1; then m=mpiexec; else m=; fi; "
        "if [ -n \"$m\" ]; then $m --version 2>&1 </dev/null | head -n {} | sed \"s/^/version /\"; fi; "
        "echo {}'",
        probe_begin, mpi_launcher::version_text_lines, probe_end);
    return command;
}

std::optional<RemoteFacts> parse_probe_output(std::string_view out) {
    const auto begin = out.find(probe_begin);
    if (begin == std::string_view::npos) return std::nullopt;
    RemoteFacts facts;
    std::string_view rest = out.substr(begin + probe_begin.size());
    std::vector<std::string> version_lines;
    while (!rest.empty()) {
        const auto nl = rest.find('\n');
        std::string_view line = rest.substr(0, nl);
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line == probe_end) {
            facts.complete = true;
            break;
        }
        const auto space = line.find(' ');
        const std::string_view key = line.substr(0, space);
        const std::string_view value = space == std::string_view::npos ? std::string_view{} : line.substr(space + 1);
        if (key == "hostname") {
            facts.hostname = std::string(value);
        } else if (key == "path") {
            facts.path = std::string(value);
        } else if (key == "program") {
            const auto sp = value.find(' ');
            if (sp != std::string_view::npos) facts.programs[std::string(value.substr(0, sp))] = value.substr(sp + 1);
        } else if (key == "version") {
            version_lines.emplace_back(value);
        }
    }
    facts.version_text = fmt::format("{}", fmt::join(version_lines, "\n"));
    facts.mpi = mpi_launcher::parse_mpi_version(facts.version_text);
    if (auto it = facts.programs.find("mpirun"); it != facts.programs.end()) {
        facts.mpi.launcher_path = it->second;
    } else if (auto it2 = facts.programs.find("mpiexec"); it2 != facts.programs.end()) {
        facts.mpi.launcher_path = it2->second;
    }
    return facts;
}

ProbeOutcome judge_probe(const mpi_launcher::CommandResult& result, const std::vector<std::string>& daemons,
                         std::chrono::milliseconds timeout) {
    ProbeOutcome o;
    o.elapsed = result.elapsed;
    o.facts = parse_probe_output(result.out);
    o.reached = o.facts.has_value();
    if (o.reached) {
        const auto& programs = o.facts->programs;
        const bool has_daemon =
            std::any_of(daemons.begin(), daemons.end(), [&](const std::string& d) { return programs.contains(d); });
        if (!daemons.empty() && !has_daemon) {
            o.problem = Problem::RemoteMpiMissing;
            o.missing_daemon = fmt::format("{}", fmt::join(daemons, " or "));
            std::vector<std::string> found;
            for (const auto& [name, path] : programs) found.push_back(name + "=" + path);
            o.evidence =
                fmt::format("{} not found on the non-interactive PATH={}; MPI programs found: {}", o.missing_daemon,
                            o.facts->path, found.empty() ? "none" : fmt::format("{}", fmt::join(found, ", ")));
            o.evidence_line = fmt::format("{} not on PATH={}", o.missing_daemon, o.facts->path);
        } else if (result.ending == mpi_launcher::CommandResult::Ending::TimedOut && !o.facts->complete) {
            o.problem = Problem::Timeout;
            o.evidence = fmt::format("the node answered but the check did not finish within {} s:\n{}",
                                     mpi_launcher::Seconds(timeout).count(), clip_evidence(result.out + result.err));
            o.evidence_line = "answered, then stopped responding";
        }
        return o;
    }
    switch (result.ending) {
        case mpi_launcher::CommandResult::Ending::TimedOut: {
            o.problem = Problem::Timeout;
            o.evidence = result.err.empty() ? fmt::format("no answer within {} s (ssh printed nothing)",
                                                          mpi_launcher::Seconds(timeout).count())
                                            : clip_evidence(result.err);
            const auto c = classify_ssh_error(result.err);
            o.evidence_line =
                c.line.empty() ? fmt::format("no answer within {} s", mpi_launcher::Seconds(timeout).count()) : c.line;
            return o;
        }
        case mpi_launcher::CommandResult::Ending::NotStarted:
            o.problem = Problem::Timeout;
            o.evidence = "not checked: the run's --max-time ran out before this host's turn";
            o.evidence_line = o.evidence;
            return o;
        case mpi_launcher::CommandResult::Ending::SpawnFailed:
            o.problem = Problem::Other;
            o.evidence = result.spawn_error;
            o.evidence_line = result.spawn_error;
            return o;
        case mpi_launcher::CommandResult::Ending::Signalled:
            o.problem = Problem::Other;
            o.evidence = fmt::format("ssh was killed by signal {}\n{}", result.signal, clip_evidence(result.err));
            o.evidence_line = fmt::format("ssh killed by signal {}", result.signal);
            return o;
        case mpi_launcher::CommandResult::Ending::Exited:
            break;
    }
    const auto c = classify_ssh_error(result.err);
    o.problem = c.problem;
    o.evidence = clip_evidence(result.err.empty() ? result.out : result.err);
    if (o.evidence.empty()) o.evidence = fmt::format("ssh exited with {} and printed nothing", result.exit_code);
    o.evidence_line = c.line.empty() ? fmt::format("ssh exited with {}", result.exit_code) : c.line;
    if (result.exit_code != 255 && c.problem == Problem::Other) {
        // The remote shell itself failed before the script started (a broken login shell, a forced command).
        o.evidence_line =
            fmt::format("remote command exited with {} before the check ran: {}", result.exit_code, c.line);
    }
    return o;
}

std::vector<ProbeOutcome> probe_hosts(const std::vector<HostTarget>& targets, const SshAgent& agent,
                                      const std::vector<std::string>& daemons, const ProbeOptions& options) {
    std::vector<mpi_launcher::Command> commands;
    commands.reserve(targets.size());
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const auto& t = targets[i];
        mpi_launcher::Command c;
        if (i < options.local.size() && options.local[i]) {
            // This machine: the launcher starts its processes here without ssh, and so does the probe.
            c.argv = {"/bin/sh", "-c", probe_remote_command()};
        } else {
            c.argv = remote_argv(agent, options.timeout, t.host, t.user, probe_remote_command());
        }
        // ConnectTimeout covers the TCP connect and the banner; the extra second lets ssh print its own message
        // before the hard limit stops it.
        c.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout) + std::chrono::seconds(1);
        commands.push_back(std::move(c));
    }
    mpi_launcher::FanoutOptions fo;
    fo.fanout = options.fanout;
    fo.deadline = options.deadline;
    fo.progress = options.progress;
    const auto results = mpi_launcher::run_fanout(commands, fo);
    std::vector<ProbeOutcome> outcomes;
    outcomes.reserve(results.size());
    static const std::vector<std::string> no_daemons;
    for (std::size_t i = 0; i < results.size(); ++i) {
        const bool local = i < options.local.size() && options.local[i];
        outcomes.push_back(judge_probe(results[i], local ? no_daemons : daemons, commands[i].timeout));
    }
    return outcomes;
}

}  // namespace lockstep::hostcheck
