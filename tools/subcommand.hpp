#pragma once
// Each `lockstep` subcommand lives in its own source file and registers itself on the top-level parser; it hands
// back the function that runs it once the command line is parsed, whose return value is the exit status
// (0 ok, 1 problems found, 2 usage error).
//
// Every command's help has one form, given by HelpFormatter (help_format.hpp), which the top level installs on every
// subcommand. The top level also lets every command keep the words it does not know (allow_extras) and answers them
// itself: an unknown option is named with the nearest option of that command (nearest()), exit 2.

#include "help_format.hpp"

#include <lockstep/base/edit_distance.hpp>

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
[[nodiscard]] Subcommand add_trace_command(CLI::App& parent);

// ------------------------------------------------------------------------------------------- suggestions

// The rule of every suggestion, the command line's and config.yaml's: lockstep/base/edit_distance.hpp.
using base::edit_distance;
using base::nearest;

// Every spelling of one option ("-n", "--num-processes").
[[nodiscard]] inline std::vector<std::string> spellings(const CLI::Option& option) {
    std::vector<std::string> names;
    for (const auto& s : option.get_snames()) names.push_back("-" + s);
    for (const auto& l : option.get_lnames()) names.push_back("--" + l);
    return names;
}

// Every spelling of every option of `app`, for suggestions and completion.
[[nodiscard]] inline std::vector<std::string> option_spellings(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::Option* option : app.get_options()) {
        const auto these = spellings(*option);
        names.insert(names.end(), these.begin(), these.end());
    }
    return names;
}

}  // namespace lockstep::tools
