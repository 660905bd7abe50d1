#pragma once
// Which PMI plugin srun starts the ranks with. srun does not start MPI processes the way mpirun does: each rank's MPI
// library finds its peers through the process-management interface (PMI) that srun's `--mpi` plugin serves, and Slurm's
// default (`MpiDefault=none` unless a site sets it) serves none that Open MPI 4 or 5 can use. The plugin must be one
// the MPI library was built for and one this Slurm has:
//
//   MPI library          built for                                    srun --mpi
//   Open MPI 4           PMIx (pmix components ext2x/ext3x/pmix3x/...)  pmix (or a versioned pmix_vN)
//                        Slurm's PMI-2 (the s2 component)             pmi2
//   Open MPI 5           PMIx, always                                 pmix
//   MPICH, Intel MPI     PMI-1/PMI-2 wire protocol                    pmi2
//
// What the library was built for is read from `ompi_info --parsable` (lines "mca:pmix:ext3x:version:..." and
// "ompi:version:full:4.1.4"); what Slurm has from `srun --mpi=list`. Everything here is a pure function of those texts,
// so that the choice can be tested without Slurm.

#include "flavour.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::mpi_launcher {

// The PMI interfaces an Open MPI installation can be started with by srun.
struct OpenMpiPmi {
    std::string version;  // "4.1.4", from "ompi:version:full"; empty when the text has none
    bool pmix = false;    // a PMIx client component, or Open MPI 5 and later (PMIx is built in)
    bool pmi2 = false;    // the s2 component: Slurm's PMI-2 library
    bool pmi1 = false;    // the s1 component: Slurm's PMI-1 library (srun --mpi=none with Slurm's libpmi)
    std::vector<std::string> components;  // the pmix framework's components, as listed ("ext3x", "isolated", ...)
};

namespace detail {

inline std::string_view trim_blanks(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

// Calls `line` for each line of `text`.
template <typename Function>
void for_each_line(std::string_view text, Function line) {
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        line(text.substr(0, nl));
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
}

}  // namespace detail

// Reads `ompi_info --parsable`. A text without an Open MPI version and without pmix components gives an empty version
// and no interface.
[[nodiscard]] inline OpenMpiPmi parse_ompi_info_pmi(std::string_view text) {
    OpenMpiPmi pmi;
    detail::for_each_line(text, [&](std::string_view line) {
        constexpr std::string_view version_mark = "ompi:version:full:";
        constexpr std::string_view component_mark = "mca:pmix:";
        if (line.starts_with(version_mark)) {
            pmi.version = std::string(detail::trim_blanks(line.substr(version_mark.size())));
        } else if (line.starts_with(component_mark)) {
            const std::string_view rest = line.substr(component_mark.size());
            const std::string_view component = rest.substr(0, rest.find(':'));
            if (component.empty() ||
                std::find(pmi.components.begin(), pmi.components.end(), component) != pmi.components.end()) {
                return;
            }
            pmi.components.emplace_back(component);
            // ext1x..ext5x wrap an external PMIx; pmix112, pmix2x..pmix4x are the bundled copies.
            const bool pmix_client = (component.starts_with("ext") && component.size() > 3) ||
                                     (component.starts_with("pmix") && component.size() > 4);
            if (pmix_client) pmi.pmix = true;
            if (component == "s2") pmi.pmi2 = true;
            if (component == "s1") pmi.pmi1 = true;
        }
    });
    MpiInstall install;
    install.version = pmi.version;
    if (install.major_version() >= 5) pmi.pmix = true;
    return pmi;
}

// The plugin names `srun --mpi=list` prints, in its order. Slurm 21.08 and later print
//   "MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\nspecific pmix plugin versions available: pmix_v4"
// and older ones "srun: MPI types are...\nsrun: none\nsrun: pmi2\nsrun: pmix_v3". Versioned pmix plugins are listed
// after the plain names. Lines that are neither (errors, warnings) are left out.
[[nodiscard]] inline std::vector<std::string> parse_srun_mpi_list(std::string_view text) {
    std::vector<std::string> plugins;
    auto add = [&](std::string_view name) {
        const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        });
        if (plain && std::find(plugins.begin(), plugins.end(), name) == plugins.end()) plugins.emplace_back(name);
    };
    detail::for_each_line(text, [&](std::string_view raw) {
        std::string_view line = raw;
        if (line.starts_with("srun: ")) line.remove_prefix(6);
        line = detail::trim_blanks(line);
        if (line.empty() || line.find("types are") != std::string_view::npos || line.starts_with("error") ||
            line.starts_with("fatal") || line.starts_with("warning")) {
            return;
        }
        constexpr std::string_view versions_mark = "versions available:";
        if (const std::size_t at = line.find(versions_mark); at != std::string_view::npos) {
            std::string_view rest = line.substr(at + versions_mark.size());
            while (!rest.empty()) {
                rest = detail::trim_blanks(rest);
                const std::size_t end = rest.find_first_of(", ");
                add(rest.substr(0, end));
                if (end == std::string_view::npos) break;
                rest.remove_prefix(end + 1);
            }
            return;
        }
        add(line);
    });
    return plugins;
}

struct PmiChoice {
    std::optional<std::string> plugin;   // the value for srun's --mpi; nullopt: pass none (Slurm's MpiDefault applies)
    std::string reason;                  // why, in a phrase for `--dry-run`
    std::optional<std::string> warning;  // when nothing this Slurm offers fits the MPI library
};

// Chooses srun's --mpi for an MPI library. `mpi`: what the program's MPI is (flavour and version, from `mpirun
// --version` or ompi_info); `open_mpi`: ompi_info's answer, nullopt when it could not be asked; `offered`: `srun
// --mpi=list`, nullopt when it could not be asked (then the choice is made from the library alone).
[[nodiscard]] inline PmiChoice choose_srun_pmi(const MpiInstall& mpi, const std::optional<OpenMpiPmi>& open_mpi,
                                               const std::optional<std::vector<std::string>>& offered) {
    auto offers = [&](std::string_view plugin) {
        return !offered || std::find(offered->begin(), offered->end(), plugin) != offered->end();
    };
    // srun names PMIx "pmix" (its newest version) and "pmix_vN"; the plain name is the one a site's upgrade keeps.
    auto pmix_plugin = [&]() -> std::optional<std::string> {
        if (offers("pmix")) return std::string("pmix");
        if (offered) {
            for (const auto& p : *offered) {
                if (p.starts_with("pmix")) return p;
            }
        }
        return std::nullopt;
    };
    const std::string list_note = offered ? "" : " (srun --mpi=list could not be asked)";
    if (mpi.flavour == MpiFlavour::OpenMpi || mpi.flavour == MpiFlavour::Prrte || open_mpi) {
        MpiInstall library = mpi;
        if (library.flavour != MpiFlavour::Prrte) library.flavour = MpiFlavour::OpenMpi;
        if (open_mpi && !open_mpi->version.empty()) library.version = open_mpi->version;
        const std::string name = library.describe();
        // Without ompi_info, PMIx is the likely answer: Open MPI 5 has nothing else, and distributions build 4.x
        // with PMIx.
        const bool speaks_pmix = !open_mpi || open_mpi->pmix || library.runs_on_prrte();
        const std::string source = open_mpi                  ? "ompi_info"
                                   : library.runs_on_prrte() ? "Open MPI 5 always does"
                                                             : "ompi_info not found, assumed";
        if (speaks_pmix) {
            if (const auto plugin = pmix_plugin()) {
                return {plugin, fmt::format("{} speaks PMIx ({}){}", name, source, list_note), std::nullopt};
            }
        }
        if (open_mpi && open_mpi->pmi2 && offers("pmi2")) {
            return {std::string("pmi2"), fmt::format("{} has Slurm's PMI-2 (ompi_info: s2){}", name, list_note),
                    std::nullopt};
        }
        if (open_mpi && open_mpi->pmi1) {
            return {std::nullopt, fmt::format("{} has Slurm's PMI-1 (ompi_info: s1), which needs no --mpi", name),
                    std::nullopt};
        }
        const std::string listed =
            offered && !offered->empty() ? fmt::format("only {}", fmt::join(*offered, ", ")) : std::string("nothing");
        const std::string needs = speaks_pmix ? "PMIx" : open_mpi && open_mpi->pmi2 ? "Slurm's PMI-2" : "";
        if (needs.empty()) {
            return {std::nullopt, fmt::format("no srun PMI plugin fits {}", name),
                    fmt::format("{} was built without any PMI that srun serves (ompi_info lists no PMIx component, "
                                "no s1 and no s2); launch with --launcher openmpi (mpirun)",
                                name)};
        }
        return {std::nullopt, fmt::format("no srun PMI plugin fits {}", name),
                fmt::format("{} can be started by srun only through {}, and srun --mpi=list offers {}; ask the site "
                            "for Slurm's {} plugin, or launch with --launcher openmpi (mpirun)",
                            name, needs, listed, needs)};
    }
    if (mpi.flavour == MpiFlavour::Mpich || mpi.flavour == MpiFlavour::IntelMpi || mpi.flavour == MpiFlavour::Mvapich) {
        if (offers("pmi2")) {
            return {std::string("pmi2"),
                    fmt::format("{} speaks the PMI-1/PMI-2 wire protocol{}", mpi.describe(), list_note), std::nullopt};
        }
        return {std::nullopt, fmt::format("srun offers no pmi2 for {}; Slurm's MpiDefault applies", mpi.describe()),
                std::nullopt};
    }
    return {std::nullopt, "the MPI library is not known; Slurm's MpiDefault applies", std::nullopt};
}

}  // namespace lockstep::mpi_launcher
