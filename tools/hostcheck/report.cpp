#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lockstep::hostcheck {

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

}  // namespace lockstep::hostcheck
