// `lockstep config`: write a config file (questions on a terminal, or defaults), or check one.

#include "../subcommand.hpp"
#include "config_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

namespace lockstep::tools {
namespace {

namespace cf = lockstep::config_file;

struct CommandLine {
    bool defaults = false;
    bool interactive = false;
    bool force = false;
    std::optional<std::string> file;
    std::optional<std::string> check;
};

int check_file(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        fmt::print(stderr, "lockstep config: {}: no such file\n", path);
        return 2;
    }
    try {
        // Resolved as a rank would resolve it with this file, so that variables overriding it show as such.
        ConfigOverrides overrides;
        overrides.config_file = path;
        const Config config = Config::resolve(overrides);
        fmt::print("{}: valid\n\n{}", path, config.describe());
        for (const auto& warning : config.warnings) fmt::print(stderr, "lockstep config: warning: {}\n", warning);
        return config.warnings.empty() ? 0 : 1;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "lockstep config: {}\n", e.what());
        return 1;
    }
}

int run(const CommandLine& cl) {
    if (cl.check) return check_file(*cl.check);
    try {
        const std::string path = cl.file ? *cl.file : cf::default_path();
        // Refuse before asking anything, so that nobody answers questions for a file that will not be written.
        std::error_code ec;
        if (!cl.force && std::filesystem::exists(path, ec)) {
            throw cf::WriteError(
                fmt::format("{} already exists; pass --force to replace it, or --file to write "
                            "elsewhere",
                            path));
        }
        cf::Settings settings;
        if (!cl.defaults) {
            if (!cl.interactive && ::isatty(STDIN_FILENO) != 1) {
                fmt::print(stderr,
                           "lockstep config: standard input is not a terminal; use --default to write the "
                           "defaults, or --interactive to answer the questions from standard input\n");
                return 2;
            }
            std::cout << "lockstep config: press Enter to keep the value in brackets.\n";
            settings = cf::ask(std::cin, std::cout);
        }
        cf::write_file(path, cf::to_yaml(settings), cl.force);
        fmt::print("lockstep config: wrote {}\n", path);
        return 0;
    } catch (const cf::UsageError& e) {
        fmt::print(stderr, "lockstep config: {}\n", e.what());
        return 2;
    } catch (const cf::WriteError& e) {
        fmt::print(stderr, "lockstep config: {}\n", e.what());
        return 1;
    }
}

}  // namespace

Subcommand add_config_command(CLI::App& parent) {
    auto cl = std::make_shared<CommandLine>();
    CLI::App* app = parent.add_subcommand(
        "config",
        "Write a lockstep config file: on a terminal by asking one question per setting, with --default without "
        "questions. With --check FILE, validate a file and print the resolved settings and where each came from.");
    app->footer(
        "The file is written where lockstep reads it: LOCKSTEP_CONFIG_FILE, else "
        "$XDG_CONFIG_HOME/lockstep/config.yaml,\n"
        "else ~/.config/lockstep/config.yaml. Accelerate-style keys (num_processes, mixed_precision, ...) are read "
        "too.\n"
        "Exit status: 0 written or valid; 1 the file exists (without --force), cannot be written, or is invalid or "
        "has\n"
        "unknown keys (--check); 2 usage error or no such file.");
    auto* defaults = app->add_flag("--default", cl->defaults, "Write the default settings without asking");
    auto* interactive =
        app->add_flag("--interactive", cl->interactive, "Ask the questions even when standard input is not a terminal");
    app->add_option("--file", cl->file, "The file to write (default: the file lockstep reads)");
    app->add_flag("--force", cl->force, "Replace an existing file");
    auto* check =
        app->add_option("--check", cl->check, "Validate FILE and print the resolved settings with their sources");
    defaults->excludes(interactive);
    check->excludes(defaults)->excludes(interactive);
    return Subcommand{app, [cl] { return run(*cl); }};
}

}  // namespace lockstep::tools
