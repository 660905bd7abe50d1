#include "launcher_command.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace lockstep::mpi_launcher {

std::string_view to_string(Launcher launcher) noexcept {
    switch (launcher) {
        case Launcher::OpenMpi:
            return "openmpi";
        case Launcher::Hydra:
            return "hydra";
        case Launcher::Srun:
            return "srun";
    }
    return "unknown";
}

std::optional<Launcher> parse_launcher(std::string_view name) noexcept {
    for (auto l : {Launcher::OpenMpi, Launcher::Hydra, Launcher::Srun}) {
        if (to_string(l) == name) return l;
    }
    return std::nullopt;
}

std::optional<Launcher> launcher_for(MpiFlavour flavour) noexcept {
    switch (flavour) {
        case MpiFlavour::OpenMpi:
        case MpiFlavour::Prrte:
            return Launcher::OpenMpi;
        case MpiFlavour::Mpich:
        case MpiFlavour::IntelMpi:
        case MpiFlavour::Mvapich:
            return Launcher::Hydra;
        case MpiFlavour::Unknown:
        case MpiFlavour::None:
            break;
    }
    return std::nullopt;
}

LauncherCommand::LauncherCommand(Launcher launcher, std::string program) : launcher_(launcher) {
    argv_.push_back(std::move(program));
}

LauncherCommand& LauncherCommand::processes(std::size_t count) {
    const std::string n = std::to_string(count);
    switch (launcher_) {
        case Launcher::OpenMpi:
            argv_.insert(argv_.end(), {"-np", n});
            break;
        case Launcher::Hydra:
            argv_.insert(argv_.end(), {"-n", n});
            break;
        case Launcher::Srun:
            argv_.push_back("--ntasks=" + n);
            break;
    }
    return *this;
}

LauncherCommand& LauncherCommand::nodes(std::size_t count) {
    if (launcher_ != Launcher::Srun) throw std::logic_error("a node count is an srun option");
    argv_.insert(argv_.end(), {"-N", std::to_string(count)});
    return *this;
}

LauncherCommand& LauncherCommand::hostfile(const std::string& path) {
    switch (launcher_) {
        case Launcher::OpenMpi:
            argv_.insert(argv_.end(), {"--hostfile", path});
            break;
        case Launcher::Hydra:
            argv_.insert(argv_.end(), {"-f", path});
            break;
        case Launcher::Srun:
            argv_.push_back("--nodefile=" + path);
            break;
    }
    return *this;
}

LauncherCommand& LauncherCommand::host_list(const std::vector<std::string>& hosts) {
    const std::string list = fmt::format("{}", fmt::join(hosts, ","));
    switch (launcher_) {
        case Launcher::OpenMpi:
            argv_.insert(argv_.end(), {"--host", list});
            break;
        case Launcher::Hydra:
            argv_.insert(argv_.end(), {"-hosts", list});
            break;
        case Launcher::Srun:
            argv_.insert(argv_.end(), {"-w", list});
            break;
    }
    return *this;
}

LauncherCommand& LauncherCommand::per_node(std::size_t count) {
    switch (launcher_) {
        case Launcher::OpenMpi:
            argv_.insert(argv_.end(), {"--map-by", fmt::format("ppr:{}:node", count)});
            break;
        case Launcher::Hydra:
            argv_.insert(argv_.end(), {"-ppn", std::to_string(count)});
            break;
        case Launcher::Srun:
            argv_.push_back(fmt::format("--ntasks-per-node={}", count));
            break;
    }
    return *this;
}

LauncherCommand& LauncherCommand::forward(const std::vector<std::pair<std::string, std::string>>& variables) {
    switch (launcher_) {
        case Launcher::OpenMpi:
            for (const auto& [name, value] : variables) argv_.insert(argv_.end(), {"-x", name});
            break;
        case Launcher::Hydra:
            for (const auto& [name, value] : variables) argv_.insert(argv_.end(), {"-genv", name, value});
            break;
        case Launcher::Srun: {
            std::string exported = "ALL";
            for (const auto& [name, value] : variables) exported += "," + name;
            argv_.push_back("--export=" + exported);
            break;
        }
    }
    return *this;
}

LauncherCommand& LauncherCommand::set_on_ranks(const std::string& name, const std::string& value) {
    switch (launcher_) {
        case Launcher::OpenMpi:
            argv_.insert(argv_.end(), {"-x", name + "=" + value});
            break;
        case Launcher::Hydra:
            argv_.insert(argv_.end(), {"-genv", name, value});
            break;
        case Launcher::Srun: {
            const auto exported = std::find_if(argv_.begin(), argv_.end(),
                                               [](const std::string& a) { return a.starts_with("--export="); });
            if (exported != argv_.end()) {
                *exported += "," + name + "=" + value;
            } else {
                argv_.push_back("--export=ALL," + name + "=" + value);
            }
            break;
        }
    }
    return *this;
}

LauncherCommand& LauncherCommand::remote_shell(const std::string& command, const MpiInstall& mpi) {
    switch (launcher_) {
        case Launcher::OpenMpi:
            argv_.insert(argv_.end(), {"--mca", mpi.runs_on_prrte() ? "plm_ssh_agent" : "plm_rsh_agent", command});
            break;
        case Launcher::Hydra:
            argv_.insert(argv_.end(), {"-launcher", "ssh", "-launcher-exec", command});
            break;
        case Launcher::Srun:
            throw std::logic_error("srun starts its tasks through slurmd, not through a remote shell");
    }
    return *this;
}

LauncherCommand& LauncherCommand::allow_run_as_root() {
    if (launcher_ == Launcher::OpenMpi) argv_.emplace_back("--allow-run-as-root");
    return *this;
}

LauncherCommand& LauncherCommand::oversubscribe() {
    switch (launcher_) {
        case Launcher::OpenMpi:
            argv_.emplace_back("--oversubscribe");
            break;
        case Launcher::Hydra:
            break;
        case Launcher::Srun:
            argv_.emplace_back("--overcommit");
            break;
    }
    return *this;
}

LauncherCommand& LauncherCommand::pmi(const std::string& plugin) {
    if (launcher_ != Launcher::Srun) throw std::logic_error("a PMI plugin is an srun option");
    argv_.push_back("--mpi=" + plugin);
    return *this;
}

LauncherCommand& LauncherCommand::arguments(const std::vector<std::string>& words) {
    argv_.insert(argv_.end(), words.begin(), words.end());
    return *this;
}

}  // namespace lockstep::mpi_launcher
