#include "flavour.hpp"

#include "display_text.hpp"

#include <cctype>
#include <charconv>
#include <optional>

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
    // The version comes from another machine's text: from_chars, unlike atoi, has no undefined overflow.
    int major = 0;
    const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
    return ec == std::errc{} ? major : 0;
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

bool mentions(std::string_view text, std::initializer_list<std::string_view> marks) {
    for (std::string_view mark : marks) {
        if (text.find(mark) != std::string_view::npos) return true;
    }
    return false;
}

bool is_space(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// The patterns below are read by hand, in one pass each: the text comes from other machines, and libstdc++'s
// std::regex recurses once per character, so one long line overflows the stack.

// Skips white space from `at`; nullopt when there is none (the patterns ask for at least one blank).
std::optional<std::size_t> after_blanks(std::string_view s, std::size_t at) {
    std::size_t i = at;
    while (i < s.size() && is_space(s[i])) ++i;
    if (i == at) return std::nullopt;
    return i;
}

// The word (up to white space or one of `stops`) that starts at `at`; empty when there is none.
std::string_view word_at(std::string_view s, std::size_t at, std::string_view stops = {}) {
    std::size_t end = at;
    while (end < s.size() && !is_space(s[end]) && stops.find(s[end]) == std::string_view::npos) ++end;
    return s.substr(at, end - at);
}

// `MARK<blanks>WORD`: the word after the first MARK that has one.
std::optional<std::string_view> word_after(std::string_view s, std::string_view mark) {
    for (std::size_t at = s.find(mark); at != std::string_view::npos; at = s.find(mark, at + 1)) {
        const auto start = after_blanks(s, at + mark.size());
        if (!start) continue;
        const auto word = word_at(s, *start);
        if (!word.empty()) return word;
    }
    return std::nullopt;
}

// `Intel(R) MPI Library ... Version <blanks>WORD` on one line, the last "Version" of that line that has a word.
std::optional<std::string_view> intel_version(std::string_view s) {
    constexpr std::string_view mark = "Intel(R) MPI Library";
    for (std::size_t at = s.find(mark); at != std::string_view::npos; at = s.find(mark, at + 1)) {
        const std::size_t line_end = std::min(s.find('\n', at), s.size());
        const std::string_view line = s.substr(at + mark.size(), line_end - at - mark.size());
        std::optional<std::string_view> found;
        for (std::size_t v = line.find("Version"); v != std::string_view::npos; v = line.find("Version", v + 1)) {
            const auto start = after_blanks(s, at + mark.size() + v + 7);
            if (!start) continue;
            const auto word = word_at(s, *start, ",");
            if (!word.empty()) found = word;
        }
        if (found) return found;
    }
    return std::nullopt;
}

// `MVAPICH<non-blanks><blanks>Version[:]<blanks>WORD`.
std::optional<std::string_view> mvapich_version(std::string_view s) {
    constexpr std::string_view mark = "MVAPICH";
    for (std::size_t at = s.find(mark); at != std::string_view::npos; at = s.find(mark, at + 1)) {
        std::size_t i = at + mark.size();
        while (i < s.size() && !is_space(s[i])) ++i;
        const auto v = after_blanks(s, i);
        if (!v || s.substr(*v, 7) != "Version") continue;
        i = *v + 7;
        if (i < s.size() && s[i] == ':') ++i;
        const auto start = after_blanks(s, i);
        if (!start) continue;
        const auto word = word_at(s, *start);
        if (!word.empty()) return word;
    }
    return std::nullopt;
}

// `HYDRA build details:` then blanks that hold a line break, then `Version:<blanks>WORD`.
std::optional<std::string_view> hydra_version(std::string_view s) {
    constexpr std::string_view mark = "HYDRA build details:";
    for (std::size_t at = s.find(mark); at != std::string_view::npos; at = s.find(mark, at + 1)) {
        std::size_t i = at + mark.size();
        bool line_break = false;
        while (i < s.size() && is_space(s[i])) line_break |= s[i++] == '\n';
        if (!line_break || s.substr(i, 8) != "Version:") continue;
        const auto start = after_blanks(s, i + 8);
        if (!start) continue;
        const auto word = word_at(s, *start);
        if (!word.empty()) return word;
    }
    return std::nullopt;
}

}  // namespace

MpiInstall parse_mpi_version(std::string_view text) {
    MpiInstall mpi;
    const std::string_view s = first_lines(text, version_text_lines);
    auto take = [&](MpiFlavour flavour, std::optional<std::string_view> version) {
        mpi.flavour = flavour;
        if (version) mpi.version = cut_value(*version, version_text_limit);
        return true;
    };
    // The forms that carry a version come first; a bare mention of a name (a banner, a bug-report address) only
    // names the flavour.
    std::optional<std::string_view> v;
    if ((v = word_after(s, "(Open MPI)")) || (v = word_after(s, "(OpenRTE)"))) {
        take(MpiFlavour::OpenMpi, v);
    } else if ((v = word_after(s, "(PRRTE)"))) {
        take(MpiFlavour::Prrte, v);
    } else if ((v = intel_version(s))) {
        take(MpiFlavour::IntelMpi, v);
    } else if (mentions(s, {"MVAPICH"})) {
        take(MpiFlavour::Mvapich, mvapich_version(s));
    } else if ((v = hydra_version(s)) || (v = word_after(s, "MPICH Version:"))) {
        take(MpiFlavour::Mpich, v);
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
    while (!first.empty() && is_space(first.back())) first.remove_suffix(1);
    mpi.version_text = cut_value(first, version_text_limit);
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
