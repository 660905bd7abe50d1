#include "mpirun_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

namespace lockstep::hostcheck {

std::string launcher_hostfile(Launcher launcher, const std::vector<HostTarget>& hosts) {
    std::string text;
    for (const auto& h : hosts) {
        if (launcher == Launcher::hydra) {
            text += h.user ? fmt::format("{}:1 user={}\n", h.host, *h.user) : fmt::format("{}:1\n", h.host);
        } else {
            text += h.user ? fmt::format("{}@{} slots=1\n", *h.user, h.host) : fmt::format("{} slots=1\n", h.host);
        }
    }
    return text;
}

std::vector<std::string> mpirun_argv(Launcher launcher, const MpiInstall& mpi, const std::string& hostfile_path,
                                     std::size_t nodes, const std::vector<std::string>& host_list,
                                     const std::optional<std::string>& ssh_command) {
    const std::string n = std::to_string(nodes);
    switch (launcher) {
        case Launcher::openmpi: {
            // By name, as a user types it: Open MPI takes an absolute path for --prefix and would then set the
            // nodes' PATH itself, hiding the very PATH problem this check is for.
            std::vector<std::string> argv{"mpirun", "--hostfile", hostfile_path, "-np", n, "--map-by", "ppr:1:node"};
            // Open MPI refuses to start as root without this; the check is about ssh, not about that policy.
            if (::geteuid() == 0) argv.emplace_back("--allow-run-as-root");
            if (ssh_command) {
                argv.insert(argv.end(),
                            {"--mca", mpi.major_version() >= 5 ? "plm_ssh_agent" : "plm_rsh_agent", *ssh_command});
            }
            argv.emplace_back("hostname");
            return argv;
        }
        case Launcher::hydra: {
            std::vector<std::string> argv{"mpiexec", "-f", hostfile_path, "-n", n, "-ppn", "1"};
            if (ssh_command) argv.insert(argv.end(), {"-launcher", "ssh", "-launcher-exec", *ssh_command});
            argv.emplace_back("hostname");
            return argv;
        }
        case Launcher::srun:
            return {"srun",    "-N", n, "--ntasks-per-node=1", "-w", fmt::format("{}", fmt::join(host_list, ",")),
                    "hostname"};
    }
    return {};
}

void judge_mpirun(MpirunResult& result, const CommandResult& run, const std::vector<std::string>& host_names) {
    // Names as printed; `hostname` may print the FQDN where uname -n gave the short name, or the other way round.
    std::multiset<std::string> printed;
    std::size_t pos = 0;
    const std::string& out = run.out;
    while (pos < out.size()) {
        const auto nl = std::min(out.find('\n', pos), out.size());
        std::string line = out.substr(pos, nl - pos);
        pos = nl + 1;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (!line.empty() && line.find(' ') == std::string::npos) {
            printed.insert(line);
            result.answered.push_back(line);
        }
    }
    auto short_name = [](const std::string& s) { return s.substr(0, s.find('.')); };
    for (std::size_t i = 0; i < result.expected.size(); ++i) {
        const std::string& want = result.expected[i];
        auto it = std::find_if(printed.begin(), printed.end(),
                               [&](const std::string& p) { return p == want || short_name(p) == short_name(want); });
        if (it != printed.end()) {
            printed.erase(it);
        } else {
            result.missing.push_back(host_names[i]);
        }
    }
    result.exit_code = run.ending == CommandResult::Ending::exited ? std::optional<int>(run.exit_code) : std::nullopt;
    result.elapsed = run.elapsed;
    const std::string tail = clip_evidence(run.err.empty() ? run.out : run.err, 4000);
    if (run.ending == CommandResult::Ending::timed_out) {
        result.status = "hang";
        result.evidence = fmt::format("no exit within the time limit; {} of {} nodes answered. Last output:\n{}",
                                      result.expected.size() - result.missing.size(), result.expected.size(), tail);
        result.remedy = fmt::format(
            "the launch hangs on {}: their daemons never reported back. Check the mesh "
            "results, firewalls between the nodes (the launcher's TCP ports, not only ssh), "
            "and restrict MPI to one network with btl_tcp_if_include / oob_tcp_if_include",
            fmt::join(result.missing, ", "));
    } else if (run.ending == CommandResult::Ending::spawn_failed) {
        result.status = "failed";
        result.evidence = run.spawn_error;
        result.remedy = "install the MPI launcher or put it on PATH";
    } else if (!result.missing.empty()) {
        result.status = run.exit_code == 0 ? "missing_hosts" : "failed";
        result.evidence = tail.empty() ? fmt::format("exit code {}", run.exit_code) : tail;
        result.remedy = fmt::format(
            "the launcher could not start 'hostname' on {}: read the evidence, and the "
            "per-host problems above",
            fmt::join(result.missing, ", "));
    } else if (run.ending != CommandResult::Ending::exited || run.exit_code != 0) {
        result.status = "failed";
        result.evidence = tail.empty() ? fmt::format("exit code {}", run.exit_code) : tail;
        result.remedy = "every node answered but the launcher failed: read the evidence";
    } else {
        result.status = "ok";
    }
}

namespace {

Launcher choose_launcher(const MpiInstall& mpi) {
    switch (mpi.flavour) {
        case MpiFlavour::mpich:
        case MpiFlavour::intelmpi:
            return Launcher::hydra;
        case MpiFlavour::openmpi:
            return Launcher::openmpi;
        case MpiFlavour::unknown:
        case MpiFlavour::none:
            break;
    }
    if (std::getenv("SLURM_JOB_ID") != nullptr && !find_program("srun").empty()) return Launcher::srun;
    return Launcher::openmpi;
}

}  // namespace

MpirunResult run_mpirun_check(const std::vector<HostTarget>& hosts, const std::vector<std::string>& expected_names,
                              const MpiInstall& mpi, const MpirunOptions& options) {
    MpirunResult result;
    const Launcher launcher = options.launcher.value_or(choose_launcher(mpi));
    if (launcher != Launcher::srun && mpi.flavour == MpiFlavour::none) {
        result.reason = "no mpirun or mpiexec on this machine's PATH";
        result.remedy = "install MPI (e.g. openmpi-bin) or put its bin directory on PATH";
        return result;
    }
    if (hosts.empty()) {
        result.reason = "no host passed the ssh probe";
        return result;
    }
    const std::string hostfile_path = options.work_dir + "/hostfile";
    {
        std::ofstream out(hostfile_path);
        out << launcher_hostfile(launcher, hosts);
    }
    std::vector<std::string> names;
    for (const auto& h : hosts) names.push_back(h.host);
    result.ran = true;
    result.hosts = names;
    result.expected = expected_names;
    result.command = mpirun_argv(launcher, mpi, hostfile_path, hosts.size(), names, options.ssh_command);

    Command cmd;
    cmd.argv = result.command;
    cmd.timeout = options.timeout;
    // SIGTERM first: mpirun then stops the daemons it started on the other nodes.
    cmd.kill_grace = std::chrono::seconds(3);
    const auto run = run_command(cmd, options.deadline);
    judge_mpirun(result, run, names);
    return result;
}

}  // namespace lockstep::hostcheck
