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

// Exit 0 only for a file that is valid as it stands: an unknown key is reported (with the key it likely stands for)
// and makes the file invalid, since its setting would be silently lost. Without a path, the file lockstep would read.
int check_file(const std::string& given) {
    std::string path = given;
    std::error_code ec;
    if (path.empty()) {
        const auto named = process_environment()(env_names::config_file);
        if (named && named->empty()) {
            fmt::print("lockstep config: LOCKSTEP_CONFIG_FILE is set but empty: lockstep reads no config file\n");
            return 0;
        }
        try {
            path = cf::default_path();
        } catch (const cf::UsageError& e) {
            fmt::print(stderr, "lockstep config: {}\n", e.what());
            return 2;
        }
        const char* why = named ? "named by LOCKSTEP_CONFIG_FILE" : "the default place";
        if (!std::filesystem::exists(path, ec)) {
            if (named) {
                // Every rank would stop with a ConfigError: a file named but missing is a problem, not a default.
                fmt::print(stderr, "lockstep config: no file at {} ({}); lockstep would refuse to start\n", path, why);
                return 1;
            }
            fmt::print(
                "lockstep config: no file at {} ({}): lockstep runs with its defaults and LOCKSTEP_* "
                "variables; 'lockstep config' writes one\n",
                path, why);
            return 0;
        }
        fmt::print("lockstep config: checking {} ({})\n", path, why);
    } else if (!std::filesystem::exists(path, ec)) {
        fmt::print(stderr, "lockstep config: {}: no such file\n", path);
        return 2;
    }
    try {
        // Resolved as a rank would resolve it with this file, so that variables overriding it show as such.
        ConfigOverrides overrides;
        overrides.config_file = path;
        Config config = Config::resolve(overrides);
        config.sources["config_file"] = "given to --check";
        if (!config.warnings.empty()) {
            for (const auto& warning : config.warnings) fmt::print(stderr, "lockstep config: {}\n", warning);
            fmt::print(stderr, "lockstep config: {}: not valid: {} unknown key{}\n", path, config.warnings.size(),
                       config.warnings.size() == 1 ? "" : "s");
            return 1;
        }
        fmt::print("{}: valid\n\n{}", path, config.describe());
        return 0;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "lockstep config: {}\n", e.what());
        return 1;
    }
}

int run(const CommandLine& cl) {
    if (cl.check) return check_file(*cl.check);  // empty: --check without FILE
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
        "Write or check a lockstep config file: on a terminal by asking one question per setting, with --default "
        "without questions. With --check, validate a file (by default the one lockstep reads) and print the resolved "
        "settings and where each came from.");
    app->footer(
        "The file is written where lockstep reads it: LOCKSTEP_CONFIG_FILE, else "
        "$XDG_CONFIG_HOME/lockstep/config.yaml,\n"
        "else ~/.config/lockstep/config.yaml. Accelerate-style keys (num_processes, mixed_precision, ...) are read "
        "too.\n"
        "Exit status: 0 written, or valid; 1 not written (the file exists, without --force, or cannot be written),\n"
        "or (--check) malformed, a bad value or an unknown key; 2 usage error or no such file.");
    auto* defaults = app->add_flag("--default", cl->defaults, "Write the default settings without asking");
    auto* interactive =
        app->add_flag("--interactive", cl->interactive, "Ask the questions even when standard input is not a terminal");
    app->add_option("--file", cl->file, "The file to write (default: the file lockstep reads)")->option_text("PATH");
    app->add_flag("--force", cl->force, "Replace an existing file");
    auto* check = app->add_option("--check", cl->check,
                                  "Validate FILE (default: the file lockstep reads) and print the resolved settings "
                                  "with their sources")
                      ->expected(0, 1)
                      ->option_text("[FILE]");
    defaults->excludes(interactive);
    check->excludes(defaults)->excludes(interactive);
    return Subcommand{app, [cl] { return run(*cl); }};
}

}  // namespace lockstep::tools
