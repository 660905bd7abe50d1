#pragma once
// config.yaml: one YAML document, a mapping of setting keys to single values, read with every error pointing at its
// file, line and column.

#include <lockstep/config.hpp>

#include <string>

namespace lockstep::config_detail {

// Applies the settings of the config file at `path` to `into` (values, their sources, warnings for unknown keys) and
// records it as into.config_file. Throws ConfigError for a file that cannot be read or holds anything but a mapping
// of known kinds of value.
void apply_file(const std::string& path, Config& into);

}  // namespace lockstep::config_detail
