#include "hostcheck.hpp"

#include "local_checks.hpp"
#include "mesh.hpp"
#include "probe.hpp"
#include "resolve.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>

#ifndef LOCKSTEP_TOOL_VERSION
#define LOCKSTEP_TOOL_VERSION "unknown"
#endif

namespace lockstep::hostcheck {
namespace {

using std::chrono::seconds;

constexpr seconds local_detection_budget{10};
constexpr seconds local_checks_budget{10};
constexpr seconds mpirun_grace{3};
constexpr seconds slack{2};
// Other names of the same machine listed per host: thousands of names that reach one machine (or nodes that all
// answer with one name) would otherwise make every host list every other, quadratic in the hosts.
constexpr std::size_t same_machine_listed = 16;

// The report is judged and written after the checks stop, at a cost that grows with the hosts: about 10 us per host
// on an idle machine, and about twice what reading the hostfile took on a busy one (the same kind of work: strings
// and small allocations per host). The checks stop early by the larger of 60 us per host and four times the reading
// time, so that the whole run, output included, ends by the bound; at most three quarters of it go to the report.
mpi_launcher::Seconds output_reserve(std::size_t hosts, mpi_launcher::Seconds reading, mpi_launcher::Seconds bound) {
    const mpi_launcher::Seconds per_host = std::chrono::microseconds(60) * hosts;
    const mpi_launcher::Seconds reserve = std::chrono::milliseconds(250) + std::max(per_host, reading * 4);
    return std::min(reserve, bound * 0.75);
}

std::size_t rounds(std::size_t items, std::size_t per_round) {
    return (items + per_round - 1) / std::max<std::size_t>(per_round, 1);
}

std::optional<std::size_t> mesh_sample_for(const Options& o, std::size_t nodes) {
    if (o.mesh_sample) return o.mesh_sample;
    if (o.mesh == MeshMode::Automatic && nodes > mesh_full_limit) return mesh_auto_sample;
    return std::nullopt;
}

mpi_launcher::Seconds mesh_bound(const Options& o, std::size_t hosts) {
    const std::size_t k = mesh_sample_for(o, hosts).value_or(hosts > 0 ? hosts - 1 : 0);
    const auto per_source = o.timeout * static_cast<long>(rounds(k, mesh_parallel_per_node) + 1) + seconds(2);
    return per_source * static_cast<long>(rounds(hosts, o.fanout));
}

// A temporary directory removed with everything in it when the run ends.
class TemporaryDirectory {
public:
    TemporaryDirectory() {
        std::string pattern = (std::filesystem::temp_directory_path() / "lockstep-hostcheck-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::system_error(errno, std::generic_category(), "cannot create a temporary directory");
        }
        path_ = pattern;
    }
    ~TemporaryDirectory() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TemporaryDirectory(const TemporaryDirectory&) = delete;
    TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
    [[nodiscard]] const std::string& path() const { return path_; }

private:
    std::string path_;
};

void validate(const Options& o) {
    if (o.fanout < 1) throw UsageError("--fanout must be at least 1");
    if (o.timeout.count() < 1) throw UsageError("--timeout must be at least 1 second");
    if (o.max_time && o.max_time->count() < 1) throw UsageError("--max-time must be at least 1 second");
    if (o.mesh_sample && *o.mesh_sample < 1) throw UsageError("--mesh-sample must be at least 1");
    if (o.nodelist && !o.hostfile.empty()) {
        throw UsageError(fmt::format("give either a hostfile or {} NODELIST, not both", o.nodelist_origin));
    }
    if (!o.nodelist && o.hostfile.empty()) {
        throw UsageError(
            "no hosts to check: give a hostfile ('-' reads stdin), or -w NODELIST, or run inside a Slurm "
            "allocation (SLURM_JOB_NODELIST)");
    }
    if (o.nodelist && o.format) throw UsageError("--format is for hostfiles; a node list is always in Slurm form");
    for (const auto& s : o.skip) {
        if (!stage_names.contains(s)) {
            throw UsageError(
                fmt::format("unknown stage '{}' in --skip: the stages are {}", s, fmt::join(stage_names, ", ")));
        }
    }
}

void set_problem(HostReport& h, Problem p, std::string evidence, std::string line) {
    h.problem = p;
    h.evidence = std::move(evidence);
    h.evidence_line = std::move(line);
    h.status = p == Problem::SameMachine ? HostStatus::Warning : HostStatus::Failed;
}

// Hosts that are this machine need no ssh: they are ok as far as ssh goes, with a note saying why they are local.
void mark_local(Report& r, const ThisMachine& machine, const std::vector<Resolution>* resolutions) {
    for (std::size_t i = 0; i < r.hosts.size(); ++i) {
        auto& h = r.hosts[i];
        const auto why = local_reason(h.host, resolutions != nullptr ? &(*resolutions)[i] : nullptr, machine);
        if (!why) continue;
        h.local = true;
        h.status = HostStatus::Ok;
        h.details.push_back(
            fmt::format("local: this machine ({}); the launcher starts its processes here without ssh", *why));
    }
}

void resolve_stage(Report& r, const Options& o, mpi_launcher::Clock::time_point deadline) {
    std::vector<std::string> names;
    for (const auto& t : r.hostfile.targets) names.push_back(t.host);
    // This machine's own name too: its canonical name (the FQDN) is one of its names.
    names.push_back(this_machine_name());
    auto resolutions = resolve_names(names, o.fanout, deadline);
    const ThisMachine machine = this_machine(resolutions.back().canonical_name);
    names.pop_back();
    resolutions.pop_back();
    mark_local(r, machine, &resolutions);
    for (std::size_t i = 0; i < r.hosts.size(); ++i) {
        auto& h = r.hosts[i];
        h.addresses = resolutions[i].addresses;
        if (resolutions[i].error && !h.local) {
            const std::string text = fmt::format("getaddrinfo(\"{}\"): {}", h.host, *resolutions[i].error);
            set_problem(h, Problem::Dns, text, text);
        } else if (h.status == HostStatus::Skipped) {
            h.status = HostStatus::Ok;
        }
    }
    for (const auto& group : same_machine_groups(names, resolutions, local_addresses())) {
        for (auto i : group) {
            auto& h = r.hosts[i];
            for (auto j : group) {
                if (h.same_machine_as.size() >= same_machine_listed) break;
                if (names[j] != names[i] && std::find(h.same_machine_as.begin(), h.same_machine_as.end(), names[j]) ==
                                                h.same_machine_as.end()) {
                    h.same_machine_as.push_back(names[j]);
                }
            }
            if (!h.problem) {
                set_problem(h, Problem::SameMachine,
                            fmt::format("{} ({}) and {} resolve to the same machine", h.host,
                                        fmt::join(h.addresses, ", "), fmt::join(h.same_machine_as, ", ")),
                            fmt::format("same machine as {}", fmt::join(h.same_machine_as, ", ")));
            }
        }
    }
}

void probe_stage(Report& r, const Options& o, const std::vector<std::string>& daemons,
                 mpi_launcher::Clock::time_point deadline) {
    ProbeOptions po;
    po.fanout = o.fanout;
    po.timeout = o.timeout;
    po.deadline = deadline;
    if (o.progress) po.progress = [&](std::size_t d, std::size_t t) { o.progress("probe", d, t); };
    for (const auto& h : r.hosts) po.local.push_back(h.local);
    const auto outcomes = probe_hosts(r.hostfile.targets, r.settings.agent, daemons, po);
    for (std::size_t i = 0; i < r.hosts.size(); ++i) {
        auto& h = r.hosts[i];
        const auto& out = outcomes[i];
        h.probe_elapsed = out.elapsed;
        h.remote = out.facts;
        if (out.problem) {
            if (h.problem == Problem::Dns) {
                // The resolver's answer is the cause; ssh's text confirms it.
                h.evidence += "\nssh: " + out.evidence;
            } else {
                set_problem(h, *out.problem, out.evidence, out.evidence_line);
            }
            continue;
        }
        if (h.problem == Problem::Dns) {
            h.status = HostStatus::Warning;
            h.details.push_back(
                "ssh reached it through its own configuration (HostName), but the name itself does "
                "not resolve; MPI resolves hostfile names too");
        } else if (h.status != HostStatus::Warning) {
            h.status = HostStatus::Ok;
        }
    }
}

void explain_stage(Report& r, mpi_launcher::Clock::time_point deadline) {
    LocalChecker checker(r.settings.agent, deadline);
    std::map<Problem, std::size_t> explained;
    for (auto& h : r.hosts) {
        if (!h.problem) continue;
        RemedyContext context;
        context.host = h.host;
        context.user = h.user.value_or("");
        context.port = ssh_port_in(h.evidence);
        const Problem p = *h.problem;
        // The ssh side of a failure: ssh -G gives the port, user and files the remedy names.
        const bool from_ssh = p != Problem::Dns && p != Problem::RemoteMpiMissing && p != Problem::MpiMismatch &&
                              p != Problem::SameMachine;
        if (from_ssh && explained[p]++ < explained_per_problem && mpi_launcher::Clock::now() < deadline) {
            auto findings = checker.explain(p, h.host, h.user, h.addresses, h.evidence);
            for (auto& d : findings.details) h.details.push_back(std::move(d));
            if (findings.refined && p == Problem::AuthDenied) h.problem = findings.refined;
            context = findings.context;
            if (context.port == 22) context.port = ssh_port_in(h.evidence);
        }
        if (p == Problem::RemoteMpiMissing && h.remote) {
            const std::string& e = h.evidence;
            context.missing_daemon = e.substr(0, e.find(" not found"));
        }
        h.remedy = remedy_for(*h.problem, context);
    }
}

void environment_stage(Report& r) {
    std::map<std::string, std::size_t> group_of;
    for (const auto& h : r.hosts) {
        if (!h.remote) continue;
        const std::string mpi =
            h.remote->mpi.flavour == mpi_launcher::MpiFlavour::None ? "none" : h.remote->mpi.describe();
        std::string key = mpi;
        for (const auto& [name, path] : h.remote->programs) key += "\n" + name + "=" + path;
        auto [it, inserted] = group_of.try_emplace(key, r.environment.size());
        if (inserted) r.environment.push_back(EnvironmentGroup{mpi, h.remote->programs, {}});
        r.environment[it->second].hosts.push_back(h.user ? *h.user + "@" + h.host : h.host);
    }
    std::stable_sort(
        r.environment.begin(), r.environment.end(),
        [](const EnvironmentGroup& a, const EnvironmentGroup& b) { return a.hosts.size() > b.hosts.size(); });

    // The reference is the launching node's MPI; without one, the most common answer.
    std::string reference;
    if (r.settings.local_mpi.flavour != mpi_launcher::MpiFlavour::None) {
        reference = r.settings.local_mpi.describe();
    } else if (!r.environment.empty()) {
        reference = r.environment.front().mpi;
    }
    for (auto& h : r.hosts) {
        if (!h.remote || h.problem || h.remote->mpi.flavour == mpi_launcher::MpiFlavour::None) continue;
        const std::string theirs = h.remote->mpi.describe();
        if (!reference.empty() && theirs != reference) {
            set_problem(h, Problem::MpiMismatch,
                        fmt::format("{} runs {} ({}); the launching node runs {}", h.host, theirs,
                                    h.remote->mpi.launcher_path, reference),
                        fmt::format("{} here, {} on the launching node", theirs, reference));
            h.remedy = remedy_for(Problem::MpiMismatch, {});
        }
    }

    // Different names, one machine: the nodes tell their own name.
    std::map<std::string, std::vector<std::size_t>> by_name;
    for (std::size_t i = 0; i < r.hosts.size(); ++i) {
        if (r.hosts[i].remote && !r.hosts[i].remote->hostname.empty())
            by_name[r.hosts[i].remote->hostname].push_back(i);
    }
    for (const auto& [node_name, indices] : by_name) {
        for (auto i : indices) {
            auto& h = r.hosts[i];
            for (auto j : indices) {
                if (h.same_machine_as.size() >= same_machine_listed) break;
                const auto& other = r.hosts[j].host;
                if (other == h.host ||
                    std::find(h.same_machine_as.begin(), h.same_machine_as.end(), other) != h.same_machine_as.end()) {
                    continue;
                }
                h.same_machine_as.push_back(other);
                if (!h.problem) {
                    set_problem(h, Problem::SameMachine,
                                fmt::format("{} and {} both answer as node '{}'", h.host, other, node_name),
                                fmt::format("same node '{}' as {}", node_name, other));
                    h.remedy = remedy_for(Problem::SameMachine, {});
                }
            }
        }
    }
}

}  // namespace

mpi_launcher::Seconds time_bound(const Options& o, std::size_t hosts) {
    if (o.max_time) return *o.max_time;
    mpi_launcher::Seconds bound = local_detection_budget + slack;
    if (!o.skip.contains("resolve")) bound += o.timeout;
    if (!o.skip.contains("probe")) {
        bound += (o.timeout + seconds(1)) * static_cast<long>(rounds(hosts, o.fanout)) + local_checks_budget;
        if (!o.skip.contains("mesh") && o.mesh != MeshMode::Off) bound += mesh_bound(o, hosts);
    }
    // The launch check runs without the probe too: on this machine alone, or through srun.
    if (!o.skip.contains("mpirun")) bound += o.mpirun_timeout + mpirun_grace;
    return bound;
}

Report run_hostcheck(const Options& o) {
    validate(o);
    const auto start = mpi_launcher::Clock::now();
    Report r;
    r.tool_version = LOCKSTEP_TOOL_VERSION;
    r.hostfile = o.nodelist ? nodelist_hosts(*o.nodelist, o.nodelist_origin,
                                             o.nodelist_origin == "-w" ? "option" : "environment")
                            : read_hostfile(o.hostfile, o.format);
    const std::size_t n = r.hostfile.targets.size();
    r.settings.fanout = o.fanout;
    r.settings.timeout = o.timeout;
    r.settings.max_time = o.max_time;
    r.settings.time_bound = time_bound(o, n);
    const mpi_launcher::Seconds reading = mpi_launcher::Clock::now() - start;
    const auto deadline = start + std::chrono::duration_cast<mpi_launcher::Clock::duration>(
                                      r.settings.time_bound - output_reserve(n, reading, r.settings.time_bound));
    auto stage_deadline = [&](mpi_launcher::Seconds budget) {
        return std::min(deadline,
                        mpi_launcher::Clock::now() + std::chrono::duration_cast<mpi_launcher::Clock::duration>(budget));
    };

    std::set<std::string> skip = o.skip;
    if (skip.contains("probe")) skip.insert("mesh");
    if (o.mesh == MeshMode::Off) skip.insert("mesh");
    r.settings.skipped_stages.assign(skip.begin(), skip.end());

    r.settings.local_mpi = detect_local_mpi(stage_deadline(local_detection_budget));
    r.settings.tree_spawn = openmpi_tree_spawn(r.settings.local_mpi);
    const mpi_launcher::Launcher launcher = o.launcher.value_or(choose_launcher(r.settings.local_mpi));
    r.settings.launcher = launcher;
    if (!skip.contains("probe")) {
        r.settings.agent = resolve_ssh_agent(o.ssh_command, r.settings.local_mpi);
    } else {
        r.settings.agent = SshAgent{{}, "not used (probe skipped)", false};
    }

    r.add_hostfile_targets();

    if (!skip.contains("resolve")) {
        if (o.progress) o.progress("resolve", 0, n);
        resolve_stage(r, o, stage_deadline(o.timeout));
    } else {
        // By name and literal address only: nothing is looked up.
        mark_local(r, this_machine(), nullptr);
    }
    if (!skip.contains("probe")) {
        const auto daemons = launcher_daemons(r.settings.local_mpi);
        probe_stage(r, o, daemons, stage_deadline((o.timeout + seconds(1)) * static_cast<long>(rounds(n, o.fanout))));
        explain_stage(r, stage_deadline(local_checks_budget));
        environment_stage(r);
    }
    for (auto& h : r.hosts) {
        if (h.problem && h.remedy.empty()) {
            RemedyContext c;
            c.host = h.host;
            c.user = h.user.value_or("");
            c.port = ssh_port_in(h.evidence);
            h.remedy = remedy_for(*h.problem, c);
        }
    }

    // The mesh is ssh between nodes: this machine's daemons are started by mpirun itself, never over ssh.
    std::vector<std::size_t> reached;
    for (std::size_t i = 0; i < n; ++i) {
        if (r.hosts[i].remote && !r.hosts[i].local) reached.push_back(i);
    }
    if (skip.contains("mesh")) {
        r.mesh.reason = o.mesh == MeshMode::Off ? "--no-mesh" : "skipped";
    } else {
        const bool wanted = o.mesh == MeshMode::On || r.settings.tree_spawn;
        const std::string why = o.mesh == MeshMode::On ? "--mesh" : "Open MPI tree spawn is on";
        if (!wanted) {
            r.mesh.reason = "tree spawn is off or the launcher is not Open MPI; --mesh checks node-to-node ssh anyway";
        } else if (reached.size() < 2) {
            r.mesh.reason = "fewer than two nodes were reached over ssh";
        } else if (mpi_launcher::Clock::now() >= deadline) {
            r.mesh.reason = "--max-time reached";
        } else {
            MeshOptions mo;
            mo.fanout = o.fanout;
            mo.timeout = o.timeout;
            mo.sample = mesh_sample_for(o, reached.size());
            mo.deadline = stage_deadline(mesh_bound(o, reached.size()));
            if (o.progress) mo.progress = [&](std::size_t d, std::size_t t) { o.progress("mesh", d, t); };
            r.mesh = run_mesh(r.hostfile.targets, reached, r.settings.agent, mo);
            r.mesh.reason = why;
        }
    }

    // Who the launch check starts on. srun needs no ssh (slurmd starts the tasks), and takes Slurm's node names
    // whether or not they resolve here; mpirun and mpiexec start this machine's processes themselves and reach the
    // other hosts over ssh, so those need the probe to have passed them.
    const bool srun = launcher == mpi_launcher::Launcher::Srun;
    const std::size_t remote_hosts = static_cast<std::size_t>(
        std::count_if(r.hosts.begin(), r.hosts.end(), [](const HostReport& h) { return !h.local; }));
    if (skip.contains("mpirun")) {
        r.mpirun.reason = "skipped";
    } else if (!srun && skip.contains("probe") && remote_hosts > 0) {
        r.mpirun.reason = fmt::format("the ssh probe was skipped, and {} reaches {} of the hosts over ssh",
                                      launcher == mpi_launcher::Launcher::Hydra ? "mpiexec" : "mpirun", remote_hosts);
    } else if (mpi_launcher::Clock::now() >= deadline) {
        r.mpirun.reason = "--max-time reached";
    } else {
        const std::string here = this_machine_name();
        std::vector<HostTarget> hosts;
        std::vector<std::string> expected;
        for (std::size_t i = 0; i < n; ++i) {
            const auto& h = r.hosts[i];
            const bool launchable = srun || h.local || (h.remote && (!h.problem || h.status == HostStatus::Warning));
            if (!launchable) continue;
            hosts.push_back(r.hostfile.targets[i]);
            // srun prints the Slurm node name, which is the name given.
            expected.push_back(srun ? h.host : h.remote ? h.remote->hostname : here);
        }
        TemporaryDirectory work;
        MpirunOptions mo;
        mo.timeout = o.mpirun_timeout;
        mo.deadline = stage_deadline(o.mpirun_timeout + mpirun_grace);
        mo.launcher = o.launcher;
        mo.ssh_command = o.ssh_command;
        mo.work_dir = work.path();
        if (o.progress) o.progress("mpirun", 0, 1);
        mo.launcher = launcher;
        r.mpirun = run_mpirun_check(hosts, expected, r.settings.local_mpi, mo);
        if (!r.mpirun.ran && hosts.empty() && n > 0 && !srun) r.mpirun.reason = "no host passed the ssh probe";
    }
    r.elapsed = mpi_launcher::Clock::now() - start;
    return r;
}

}  // namespace lockstep::hostcheck
