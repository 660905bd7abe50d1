#include "mpi_install.hpp"

#include "mpi_launcher/launcher_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace lockstep::hostcheck {

mpi_launcher::MpiInstall detect_local_mpi(mpi_launcher::Clock::time_point deadline) {
    for (const char* name : {"mpirun", "mpiexec"}) {
        const std::string path = mpi_launcher::find_program(name);
        if (path.empty()) continue;
        mpi_launcher::MpiInstall mpi =
            mpi_launcher::parse_mpi_version(mpi_launcher::version_output(path, std::chrono::seconds(10), deadline));
        if (mpi.flavour == mpi_launcher::MpiFlavour::None) mpi.flavour = mpi_launcher::MpiFlavour::Unknown;
        mpi.launcher_path = path;
        return mpi;
    }
    return {};
}

std::vector<std::string> launcher_daemons(const mpi_launcher::MpiInstall& mpi) {
    switch (mpi.flavour) {
        case mpi_launcher::MpiFlavour::OpenMpi:
            if (mpi.version.empty()) return {"orted", "prted"};
            return {mpi.runs_on_prrte() ? "prted" : "orted"};
        case mpi_launcher::MpiFlavour::Prrte:
            return {"prted"};
        case mpi_launcher::MpiFlavour::Mpich:
        case mpi_launcher::MpiFlavour::IntelMpi:
        case mpi_launcher::MpiFlavour::Mvapich:
            return {"hydra_pmi_proxy"};
        case mpi_launcher::MpiFlavour::Unknown:
        case mpi_launcher::MpiFlavour::None:
            break;
    }
    return {"orted", "prted", "hydra_pmi_proxy"};
}

namespace {

std::optional<McaParameter> from_file(const std::filesystem::path& file, const std::vector<std::string>& names) {
    std::ifstream in(file);
    if (!in) return std::nullopt;
    std::optional<McaParameter> found;
    int number = 0;
    for (std::string line; std::getline(in, line);) {
        ++number;
        line = line.substr(0, line.find('#'));
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        auto trim = [](std::string t) {
            const auto b = t.find_first_not_of(" \t");
            const auto e = t.find_last_not_of(" \t\r");
            return b == std::string::npos ? std::string{} : t.substr(b, e - b + 1);
        };
        const std::string key = trim(line.substr(0, eq));
        if (std::find(names.begin(), names.end(), key) != names.end()) {
            // The last setting in a file wins, as in Open MPI.
            found = McaParameter{trim(line.substr(eq + 1)), fmt::format("{}:{}", file.string(), number)};
        }
    }
    return found;
}

}  // namespace

std::optional<McaParameter> openmpi_parameter(const std::vector<std::string>& names,
                                              const mpi_launcher::MpiInstall& mpi) {
    for (const auto& name : names) {
        for (const char* prefix : {"OMPI_MCA_", "PRTE_MCA_"}) {
            const std::string var = prefix + name;
            if (const char* v = std::getenv(var.c_str())) return McaParameter{v, var};
        }
    }
    std::vector<std::filesystem::path> files;
    if (const char* home = std::getenv("HOME")) {
        files.emplace_back(std::filesystem::path(home) / ".openmpi" / "mca-params.conf");
        files.emplace_back(std::filesystem::path(home) / ".prte" / "mca-params.conf");
    }
    if (const char* prefix = std::getenv("OPAL_PREFIX")) {
        files.emplace_back(std::filesystem::path(prefix) / "etc" / "openmpi-mca-params.conf");
    }
    if (!mpi.launcher_path.empty()) {
        const auto prefix = std::filesystem::path(mpi.launcher_path).parent_path().parent_path();
        files.emplace_back(prefix / "etc" / "openmpi-mca-params.conf");
        files.emplace_back(prefix / "etc" / "prte-mca-params.conf");
    }
    files.emplace_back("/etc/openmpi/openmpi-mca-params.conf");
    for (const auto& f : files) {
        if (auto p = from_file(f, names)) return p;
    }
    return std::nullopt;
}

bool openmpi_tree_spawn(const mpi_launcher::MpiInstall& mpi) {
    if (mpi_launcher::launcher_for(mpi.flavour) != mpi_launcher::Launcher::OpenMpi) return false;
    const auto p = openmpi_parameter({"plm_rsh_no_tree_spawn", "plm_ssh_no_tree_spawn"}, mpi);
    if (!p) return true;
    std::string v = p->value;
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    return !(v == "1" || v == "true" || v == "yes" || v == "on");
}

}  // namespace lockstep::hostcheck
