#include "mpi_install.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

namespace lockstep::hostcheck {

std::string_view to_string(MpiFlavour flavour) noexcept {
    switch (flavour) {
        case MpiFlavour::openmpi:
            return "openmpi";
        case MpiFlavour::mpich:
            return "mpich";
        case MpiFlavour::intelmpi:
            return "intelmpi";
        case MpiFlavour::unknown:
            return "unknown";
        case MpiFlavour::none:
            return "none";
    }
    return "unknown";
}

std::string MpiInstall::describe() const {
    switch (flavour) {
        case MpiFlavour::openmpi:
            return "Open MPI " + version;
        case MpiFlavour::mpich:
            return "MPICH " + version;
        case MpiFlavour::intelmpi:
            return "Intel MPI " + version;
        case MpiFlavour::unknown:
            return "unknown MPI (" + version_text + ")";
        case MpiFlavour::none:
            return "none";
    }
    return "none";
}

int MpiInstall::major_version() const {
    return std::atoi(version.c_str());
}

MpiInstall parse_mpi_version(std::string_view text) {
    MpiInstall mpi;
    const std::string s(text);
    std::smatch m;
    if (std::regex_search(s, m, std::regex(R"(\(Open MPI\)\s+(\S+))")) ||
        std::regex_search(s, m, std::regex(R"(\(OpenRTE\)\s+(\S+))")) ||
        std::regex_search(s, m, std::regex(R"(\(PRRTE\)\s+(\S+))"))) {
        mpi.flavour = MpiFlavour::openmpi;
        mpi.version = m[1];
    } else if (std::regex_search(s, m, std::regex(R"(Intel\(R\) MPI Library[^\n]*Version\s+([^\s,]+))"))) {
        mpi.flavour = MpiFlavour::intelmpi;
        mpi.version = m[1];
    } else if (std::regex_search(s, m, std::regex(R"(HYDRA build details:\s*\n\s*Version:\s+(\S+))")) ||
               std::regex_search(s, m, std::regex(R"(MPICH Version:\s+(\S+))"))) {
        mpi.flavour = MpiFlavour::mpich;
        mpi.version = m[1];
    } else if (!s.empty()) {
        mpi.flavour = MpiFlavour::unknown;
    }
    std::string_view first = text.substr(0, text.find('\n'));
    while (!first.empty() && std::isspace(static_cast<unsigned char>(first.back()))) first.remove_suffix(1);
    mpi.version_text = std::string(first);
    return mpi;
}

MpiInstall detect_local_mpi(Clock::time_point deadline) {
    for (const char* name : {"mpirun", "mpiexec"}) {
        const std::string path = find_program(name);
        if (path.empty()) continue;
        Command cmd;
        cmd.argv = {path, "--version"};
        cmd.timeout = std::chrono::seconds(10);
        const auto r = run_command(cmd, deadline);
        MpiInstall mpi = parse_mpi_version(r.out + r.err);
        if (mpi.flavour == MpiFlavour::none) mpi.flavour = MpiFlavour::unknown;
        mpi.launcher_path = path;
        return mpi;
    }
    return {};
}

std::vector<std::string> launcher_daemons(const MpiInstall& mpi) {
    switch (mpi.flavour) {
        case MpiFlavour::openmpi:
            return {mpi.major_version() >= 5 ? "prted" : "orted"};
        case MpiFlavour::mpich:
        case MpiFlavour::intelmpi:
            return {"hydra_pmi_proxy"};
        case MpiFlavour::unknown:
        case MpiFlavour::none:
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

std::optional<McaParameter> openmpi_parameter(const std::vector<std::string>& names, const MpiInstall& mpi) {
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

bool openmpi_tree_spawn(const MpiInstall& mpi) {
    if (mpi.flavour != MpiFlavour::openmpi) return false;
    const auto p = openmpi_parameter({"plm_rsh_no_tree_spawn", "plm_ssh_no_tree_spawn"}, mpi);
    if (!p) return true;
    std::string v = p->value;
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    return !(v == "1" || v == "true" || v == "yes" || v == "on");
}

}  // namespace lockstep::hostcheck
