#pragma once
// `lockstep env`: the facts a bug report needs, as one JSON document (schema "lockstep.env/1", described in
// docs/cli.md) and as Markdown rendered from it.

#include <nlohmann/json.hpp>

#include <string>

namespace lockstep::env {

inline constexpr const char* report_schema = "lockstep.env/1";

// Collects this process's report. Never throws for a fact it cannot get: the field is null, and a config file that
// cannot be read is described in config.error. MPI need not be initialised.
[[nodiscard]] nlohmann::json collect_report();

// The report as Markdown. `colour` marks warnings with ANSI colour (only for a terminal).
[[nodiscard]] std::string render_markdown(const nlohmann::json& report, bool colour);

// Whether the report holds a problem worth a non-zero exit: a config file that cannot be used.
[[nodiscard]] bool report_has_problem(const nlohmann::json& report);

}  // namespace lockstep::env
