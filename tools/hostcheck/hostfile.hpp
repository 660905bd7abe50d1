#pragma once
// Hostfiles as the MPI launchers read them. Four forms are understood:
//   openmpi  `[user@]host [slots=N] [max_slots=M] [key=value ...]`, IPv6 literals allowed
//   hydra    `host[:N] [user=NAME] [binding=...]` (MPICH, Intel MPI)
//   plain    one host name or address per line
//   slurm    node lists such as `node[01-10,12]`, `rack[1-2]-n[1-4]`, comma separated
// `#` starts a comment everywhere. The form is detected from the lines unless one is forced; a file whose lines mix
// OpenMPI-only and Hydra-only syntax is refused, since no launcher reads both.
//
// Besides the hosts, every line carries what each launcher would make of it: OpenMPI sums the slots of every line
// that names the same host; Hydra merges a host with the line right above it only (so `a b a` is three blocks) and
// cannot read IPv6 addresses, whose ':' it takes for the process-count separator.

#include "errors.hpp"
#include "nodelist.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::hostcheck {

// Limits on what one hostfile may ask for, so that a hostile or mistyped file is a clear error, not minutes of work:
// its size, the hosts it names in all (every form, node lists included; see nodelist.hpp for the bytes of names),
// and the malformed lines listed one by one (the rest are counted).
inline constexpr std::size_t max_hostfile_bytes = std::size_t{64} << 20;
inline constexpr std::size_t max_hostfile_hosts = max_nodelist_hosts;
inline constexpr std::size_t max_listed_line_errors = 100;

enum class HostfileFormat { OpenMpi, Hydra, Plain, Slurm };

[[nodiscard]] std::string_view to_string(HostfileFormat format) noexcept;
// Throws UsageError for a name that is not one of the four forms.
[[nodiscard]] HostfileFormat parse_hostfile_format(std::string_view name);

// One host named by one line. A Slurm node list line names many.
struct HostEntry {
    std::string host;                 // name or address as written (IPv6 without brackets)
    std::optional<std::string> user;  // from `user@host` (OpenMPI) or `user=` (Hydra)
    std::optional<int> slots;         // `slots=N` / `count=N` (OpenMPI) or `:N` (Hydra)
    std::optional<int> max_slots;     // `max_slots=M` (OpenMPI)
    bool ipv6 = false;
};

// What one launcher would do with one line.
struct LineReading {
    bool usable = true;   // false: the launcher would stop with an error, or read something else than meant
    std::string summary;  // one sentence, e.g. "2 slots; 4 in all with line 7"
};

struct HostfileLine {
    int number = 0;    // 1-based
    std::string text;  // as written, without the newline
    std::vector<HostEntry> hosts;
    std::optional<std::string> keyword;  // the first `key=value` word of an OpenMPI line, which Hydra cannot read
    LineReading openmpi;
    LineReading hydra;
};

// A host to check: every distinct (user, host) pair, in order of first appearance.
struct HostTarget {
    std::string host;
    std::optional<std::string> user;
    std::vector<int> lines;  // every line that names it
    int openmpi_slots = 0;   // after OpenMPI's summing of duplicates
    bool ipv6 = false;
};

struct Hostfile {
    std::string path;  // the file, "-" for stdin, or where a node list came from ("-w", "SLURM_JOB_NODELIST")
    std::string source = "file";  // file, stdin, option (-w) or environment (SLURM_JOB_NODELIST)
    HostfileFormat format = HostfileFormat::Plain;
    bool format_detected = true;      // false when forced with --format
    std::vector<HostfileLine> lines;  // lines that name hosts; blank and comment lines are left out
    std::vector<HostTarget> targets;
};

// Parses hostfile text. `path` is used in messages only. Throws HostfileError listing every malformed line.
[[nodiscard]] Hostfile parse_hostfile(std::string_view text, const std::string& path,
                                      std::optional<HostfileFormat> forced = std::nullopt);

// Reads and parses a file, or stdin when `path` is "-" (a file of that name is "./-"). Throws HostfileError when it
// cannot be read, is a directory, is larger than max_hostfile_bytes or holds no host.
[[nodiscard]] Hostfile read_hostfile(const std::string& path, std::optional<HostfileFormat> forced = std::nullopt);

// The hosts of a Slurm node list given as text (`-w node[01-08,10],login1`, SLURM_JOB_NODELIST), as a hostfile of
// one slurm-form line; `origin` names it in messages and in the report ("-w", "SLURM_JOB_NODELIST"), `source` is
// "option" or "environment". Throws HostfileError for a malformed list.
[[nodiscard]] Hostfile nodelist_hosts(const std::string& list, const std::string& origin, const std::string& source);

// True for a host name or address that may be handed to ssh as one argument: letters, digits, '.', '-', '_' (and ':'
// and '%' for IPv6), not starting with '-'. Anything else (spaces, quotes, '$', ';') is refused at parse time, so no
// shell metacharacter ever reaches a command line.
[[nodiscard]] bool is_valid_host_name(std::string_view name) noexcept;
[[nodiscard]] bool is_valid_user_name(std::string_view name) noexcept;
[[nodiscard]] bool looks_like_ipv6(std::string_view name) noexcept;

}  // namespace lockstep::hostcheck
