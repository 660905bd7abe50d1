#pragma once
// `lockstep config`: writing a config file (defaults, or answers to questions) in the YAML form Config reads, with the
// schema version key `lockstep: 1`.

#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <iosfwd>
#include <optional>
#include <string>

namespace lockstep::config_file {

// A command line that cannot be acted on (exit 2): no place to write to.
class UsageError : public Error {
public:
    using Error::Error;
};

// The file cannot be written, or exists and --force was not given (exit 1).
class WriteError : public Error {
public:
    using Error::Error;
};

struct Settings {
    int num_processes = 1;
    bool debug = false;
    std::string log_level = "WARNING";
    std::string timeout = "600";
    std::string cpu_memory_limit = "none";
    std::string seed = "0";
    std::string mixed_precision = "no";
};

// Where Config looks: LOCKSTEP_CONFIG_FILE, else $XDG_CONFIG_HOME/lockstep/config.yaml, else
// ~/.config/lockstep/config.yaml. Throws UsageError when none applies (LOCKSTEP_CONFIG_FILE set empty, no HOME).
[[nodiscard]] std::string default_path(const EnvironmentLookup& env = process_environment());

// The YAML text of a config file holding `settings`.
[[nodiscard]] std::string to_yaml(const Settings& settings);

// Writes `text` to `path` (parent directories created), replacing an existing file only with `force`; then reads it
// back with Config::load_file. Throws WriteError.
void write_file(const std::string& path, const std::string& text, bool force);

// Asks one question per setting on `out`, reading answers from `in`; an empty answer takes the default shown. A
// value the library would reject is explained and asked again. Throws UsageError when input ends early.
[[nodiscard]] Settings ask(std::istream& in, std::ostream& out);

}  // namespace lockstep::config_file
