#include "flavour.hpp"

#include <cctype>
#include <cstdlib>
#include <regex>

namespace lockstep::mpi_launcher {

std::string_view to_string(MpiFlavour flavour) noexcept {
    switch (flavour) {
        case MpiFlavour::OpenMpi:
            return "openmpi";
        case MpiFlavour::Mpich:
            return "mpich";
        case MpiFlavour::IntelMpi:
            return "intelmpi";
        case MpiFlavour::Mvapich:
            return "mvapich";
        case MpiFlavour::Prrte:
            return "prrte";
        case MpiFlavour::Unknown:
            return "unknown";
        case MpiFlavour::None:
            return "none";
    }
    return "unknown";
}

std::string MpiInstall::describe() const {
    auto named = [this](std::string name) { return version.empty() ? name : name + " " + version; };
    switch (flavour) {
        case MpiFlavour::OpenMpi:
            return named("Open MPI");
        case MpiFlavour::Mpich:
            return named("MPICH");
        case MpiFlavour::IntelMpi:
            return named("Intel MPI");
        case MpiFlavour::Mvapich:
            return named("MVAPICH");
        case MpiFlavour::Prrte:
            return named("PRRTE");
        case MpiFlavour::Unknown:
            return "unknown MPI (" + version_text + ")";
        case MpiFlavour::None:
            return "none";
    }
    return "none";
}

int MpiInstall::major_version() const {
    return std::atoi(version.c_str());
}

bool MpiInstall::runs_on_prrte() const {
    return flavour == MpiFlavour::Prrte || (flavour == MpiFlavour::OpenMpi && major_version() >= 5);
}

namespace {

std::string_view first_lines(std::string_view text, std::size_t count) {
    std::size_t end = 0;
    for (std::size_t i = 0; i < count && end < text.size(); ++i) {
        const std::size_t nl = text.find('\n', end);
        end = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    return text.substr(0, end);
}

bool mentions(const std::string& text, std::initializer_list<std::string_view> marks) {
    for (std::string_view mark : marks) {
        if (text.find(mark) != std::string::npos) return true;
    }
    return false;
}

}  // namespace

MpiInstall parse_mpi_version(std::string_view text) {
    MpiInstall mpi;
    const std::string s(first_lines(text, version_text_lines));
    std::smatch m;
    auto found = [&](const char* pattern) { return std::regex_search(s, m, std::regex(pattern)); };
    // The forms that carry a version come first; a bare mention of a name (a banner, a bug-report address) only
    // names the flavour.
    if (found(R"(\(Open MPI\)\s+(\S+))") || found(R"(\(OpenRTE\)\s+(\S+))")) {
        mpi.flavour = MpiFlavour::OpenMpi;
        mpi.version = m[1];
    } else if (found(R"(\(PRRTE\)\s+(\S+))")) {
        mpi.flavour = MpiFlavour::Prrte;
        mpi.version = m[1];
    } else if (found(R"(Intel\(R\) MPI Library[^\n]*Version\s+([^\s,]+))")) {
        mpi.flavour = MpiFlavour::IntelMpi;
        mpi.version = m[1];
    } else if (mentions(s, {"MVAPICH"})) {
        mpi.flavour = MpiFlavour::Mvapich;
        if (found(R"(MVAPICH\S*\s+Version:?\s+(\S+))")) mpi.version = m[1];
    } else if (found(R"(HYDRA build details:\s*\n\s*Version:\s+(\S+))") || found(R"(MPICH Version:\s+(\S+))")) {
        mpi.flavour = MpiFlavour::Mpich;
        mpi.version = m[1];
    } else if (mentions(s, {"Open MPI", "OpenRTE", "open-mpi.org"})) {
        mpi.flavour = MpiFlavour::OpenMpi;
    } else if (mentions(s, {"PRRTE"})) {
        mpi.flavour = MpiFlavour::Prrte;
    } else if (mentions(s, {"Intel(R) MPI"})) {
        mpi.flavour = MpiFlavour::IntelMpi;
    } else if (mentions(s, {"HYDRA", "MPICH"})) {
        mpi.flavour = MpiFlavour::Mpich;
    } else if (!s.empty()) {
        mpi.flavour = MpiFlavour::Unknown;
    }
    std::string_view first = text.substr(0, text.find('\n'));
    while (!first.empty() && std::isspace(static_cast<unsigned char>(first.back()))) first.remove_suffix(1);
    mpi.version_text = std::string(first);
    return mpi;
}

std::string version_output(const std::string& launcher, std::chrono::milliseconds timeout,
                           std::optional<Clock::time_point> deadline) {
    Command query;
    query.argv = {launcher, "--version"};
    query.timeout = timeout;
    query.merge_output = true;
    return run_command(query, deadline).out;
}

}  // namespace lockstep::mpi_launcher
