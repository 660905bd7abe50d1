#pragma once
// Each `lockstep` subcommand lives in its own source file and registers itself on the top-level parser; it hands
// back the function that runs it once the command line is parsed, whose return value is the exit status
// (0 ok, 1 problems found, 2 usage error).

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace lockstep::tools {

struct Subcommand {
    CLI::App* app = nullptr;
    std::function<int()> run;
    // Optional: sees the command line (without the program name) before it is parsed and returns what the parser
    // should read; `launch` uses it to set aside the launched program's own arguments.
    std::function<std::vector<std::string>(std::vector<std::string>)> take_arguments;
};

[[nodiscard]] Subcommand add_hostcheck_command(CLI::App& parent);
[[nodiscard]] Subcommand add_launch_command(CLI::App& parent);
[[nodiscard]] Subcommand add_config_command(CLI::App& parent);
[[nodiscard]] Subcommand add_env_command(CLI::App& parent);
[[nodiscard]] Subcommand add_test_command(CLI::App& parent);

}  // namespace lockstep::tools
