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

using mpi_launcher::Launcher;

std::string launcher_hostfile(Launcher launcher, const std::vector<HostTarget>& hosts) {
    std::string text;
    for (const auto& h : hosts) {
        if (launcher == Launcher::Hydra) {
            text += h.user ? fmt::format("{}:1 user={}\n", h.host, *h.user) : fmt::format("{}:1\n", h.host);
        } else {
            text += h.user ? fmt::format("{}@{} slots=1\n", *h.user, h.host) : fmt::format("{} slots=1\n", h.host);
        }
    }
    return text;
}

std::vector<std::string> mpirun_argv(Launcher launcher, const mpi_launcher::MpiInstall& mpi,
                                     const std::string& hostfile_path, std::size_t nodes,
                                     const std::vector<std::string>& host_list,
                                     const std::optional<std::string>& ssh_command) {
    if (launcher == Launcher::Srun) {
        mpi_launcher::LauncherCommand srun(launcher, "srun");
        srun.nodes(nodes).processes(nodes).per_node(1).host_list(host_list).arguments({"printenv", "SLURMD_NODENAME"});
        return srun.argv();
    }
    // By name, as a user types it: Open MPI takes an absolute path for --prefix and would then set the nodes' PATH
    // itself, hiding the very PATH problem this check is for.
    mpi_launcher::LauncherCommand command(launcher, launcher == Launcher::Hydra ? "mpiexec" : "mpirun");
    command.hostfile(hostfile_path).processes(nodes).per_node(1);
    // Open MPI refuses to start as root without this; the check is about ssh, not about that policy.
    if (::geteuid() == 0) command.allow_run_as_root();
    if (ssh_command) command.remote_shell(*ssh_command, mpi);
    command.arguments({"hostname"});
    return command.argv();
}

void judge_mpirun(MpirunResult& result, const mpi_launcher::CommandResult& run,
                  const std::vector<std::string>& host_names) {
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
    result.exit_code =
        run.ending == mpi_launcher::CommandResult::Ending::Exited ? std::optional<int>(run.exit_code) : std::nullopt;
    result.elapsed = run.elapsed;
    const std::string tail = clip_evidence(run.err.empty() ? run.out : run.err, 4000);
    if (run.ending == mpi_launcher::CommandResult::Ending::TimedOut) {
        result.status = "hang";
        result.evidence = fmt::format("no exit within the time limit; {} of {} nodes answered. Last output:\n{}",
                                      result.expected.size() - result.missing.size(), result.expected.size(), tail);
        result.remedy = fmt::format(
            "the launch hangs on {}: their daemons never reported back. Check the mesh "
            "results, firewalls between the nodes (the launcher's TCP ports, not only ssh), "
            "and restrict MPI to one network with btl_tcp_if_include / oob_tcp_if_include",
            fmt::join(result.missing, ", "));
    } else if (run.ending == mpi_launcher::CommandResult::Ending::SpawnFailed) {
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
    } else if (run.ending != mpi_launcher::CommandResult::Ending::Exited || run.exit_code != 0) {
        result.status = "failed";
        result.evidence = tail.empty() ? fmt::format("exit code {}", run.exit_code) : tail;
        result.remedy = "every node answered but the launcher failed: read the evidence";
    } else {
        result.status = "ok";
    }
}

Launcher choose_launcher(const mpi_launcher::MpiInstall& mpi) {
    if (const auto launcher = mpi_launcher::launcher_for(mpi.flavour)) return *launcher;
    if (std::getenv("SLURM_JOB_ID") != nullptr && !mpi_launcher::find_program("srun").empty()) return Launcher::Srun;
    return Launcher::OpenMpi;
}

MpirunResult run_mpirun_check(const std::vector<HostTarget>& hosts, const std::vector<std::string>& expected_names,
                              const mpi_launcher::MpiInstall& mpi, const MpirunOptions& options) {
    MpirunResult result;
    const Launcher launcher = options.launcher.value_or(choose_launcher(mpi));
    if (launcher != Launcher::Srun && mpi.flavour == mpi_launcher::MpiFlavour::None) {
        result.reason = "no mpirun or mpiexec on this machine's PATH";
        result.remedy = "install MPI (e.g. openmpi-bin) or put its bin directory on PATH";
        return result;
    }
    if (hosts.empty()) {
        result.reason = launcher == Launcher::Srun ? "no host to start" : "no host passed the ssh probe";
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

    mpi_launcher::Command cmd;
    cmd.argv = result.command;
    cmd.timeout = options.timeout;
    // SIGTERM first: mpirun then stops the daemons it started on the other nodes.
    cmd.kill_grace = std::chrono::seconds(3);
    const auto run = mpi_launcher::run_command(cmd, options.deadline);
    judge_mpirun(result, run, names);
    return result;
}

}  // namespace lockstep::hostcheck
