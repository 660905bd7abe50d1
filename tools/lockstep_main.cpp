// The `lockstep` command: one program, one subcommand per task.

#include "subcommand.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#ifndef LOCKSTEP_TOOL_VERSION
#define LOCKSTEP_TOOL_VERSION "unknown"
#endif

int main(int argc, char** argv) {
    CLI::App app{"lockstep: tools for running and checking MPI jobs with the lockstep runtime"};
    app.name("lockstep");
    app.set_version_flag("--version", std::string("lockstep ") + LOCKSTEP_TOOL_VERSION);
    app.require_subcommand(1);
    app.footer("Run 'lockstep COMMAND --help' for the options of a command.");

    std::vector<lockstep::tools::Subcommand> subcommands{
        lockstep::tools::add_hostcheck_command(app), lockstep::tools::add_launch_command(app),
        lockstep::tools::add_config_command(app),    lockstep::tools::add_env_command(app),
        lockstep::tools::add_test_command(app),
    };

    try {
        std::vector<std::string> args(argv + 1, argv + argc);
        for (const auto& sub : subcommands) {
            if (sub.take_arguments) args = sub.take_arguments(std::move(args));
        }
        std::reverse(args.begin(), args.end());  // CLI11 reads a vector from the back
        app.parse(args);
    } catch (const CLI::ParseError& e) {
        // --help and --version exit 0; every other parse error is a usage error.
        return app.exit(e) == 0 ? 0 : 2;
    }
    for (const auto& sub : subcommands) {
        if (sub.app->parsed()) return sub.run();
    }
    return 2;
}
