// The `lockstep` command: one program, one subcommand per task.
//
// Mistakes are answered as git answers them: an unknown command or option names the nearest valid one, and every
// usage error exits 2 (0 ok, 1 problems found or the job failed). `lockstep help [COMMAND]` and `lockstep version`
// stand beside --help and --version; `lockstep completion bash` prints the bash completion script, generated from
// this parser, which the build installs.
//
// The program itself links neither libmpi nor liblockstep: hostcheck is built in, and the commands that need the
// runtime (launch, config, env, test, trace) come from the module liblockstep_commands.so, loaded only when the command
// line is not `lockstep hostcheck ...`. Where MPI is broken, hostcheck still starts and says why; the other commands
// say that the runtime could not be loaded, and why.

#include "subcommand.hpp"
#include "tool_commit.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#ifndef LOCKSTEP_TOOL_VERSION
#define LOCKSTEP_TOOL_VERSION "unknown"
#endif

namespace {

namespace lt = lockstep::tools;

constexpr int exit_usage = 2;

// The commands that live in the runtime module, named here so that a command line asking for one of them gets the
// module's load error rather than "not a lockstep command".
constexpr std::array<std::string_view, 5> runtime_commands{"launch", "config", "env", "test", "trace"};

// Where the module is: next to the program in a build tree, else in <libdir>/lockstep of the installation the program
// belongs to (found relative to the program, so that a moved installation still works).
std::vector<std::filesystem::path> module_candidates() {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    std::vector<std::filesystem::path> candidates;
    if (!ec) {
        candidates.push_back(self.parent_path() / "liblockstep_commands.so");
        candidates.push_back(self.parent_path() / LOCKSTEP_COMMANDS_FROM_BINDIR / "liblockstep_commands.so");
    }
    candidates.emplace_back(LOCKSTEP_COMMANDS_INSTALLED);
    return candidates;
}

// Loads the runtime commands into `app`; returns why it could not, or an empty string.
std::string load_runtime_commands(CLI::App& app, std::vector<lt::Subcommand>& subcommands) {
    using AddCommands = void (*)(CLI::App*, std::vector<lt::Subcommand>*);
    std::string why;
    for (const auto& path : module_candidates()) {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) continue;
        // Never unloaded: the commands' code runs until the program exits.
        void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (module == nullptr) {
            const char* error = dlerror();
            return error != nullptr ? error : path.string() + ": could not be loaded";
        }
        const auto add = reinterpret_cast<AddCommands>(dlsym(module, "lockstep_add_runtime_commands"));
        if (add == nullptr)
            return path.string() + ": not a lockstep commands module (no lockstep_add_runtime_commands)";
        add(&app, &subcommands);
        return "";
    }
    std::vector<std::string> looked;
    for (const auto& path : module_candidates()) looked.push_back(path.string());
    return fmt::format("liblockstep_commands.so was not found (looked for {})", fmt::join(looked, ", "));
}

std::string version_text() {
    return fmt::format("lockstep {} (commit {})\n", LOCKSTEP_TOOL_VERSION, LOCKSTEP_TOOL_COMMIT);
}

std::vector<std::string> command_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    return names;
}

CLI::App* find_command(CLI::App& app, const std::string& name) {
    for (CLI::App* sub : app.get_subcommands({})) {
        if (sub->get_name() == name) return sub;
    }
    return nullptr;
}

int unknown_command(const CLI::App& app, const std::string& word) {
    fmt::print(stderr, "lockstep: '{}' is not a lockstep command.", word);
    if (const auto guess = lt::nearest(word, command_names(app))) {
        fmt::print(stderr, " Did you mean '{}'?\n", *guess);
    } else {
        fmt::print(stderr, "\nThe commands are: {}. See 'lockstep --help'.\n", fmt::join(command_names(app), ", "));
    }
    return exit_usage;
}

// The first word the parser left over under `app`: an option it does not have, or a word it takes none of.
int unexpected_argument(const CLI::App& app, const std::string& word) {
    const std::string who = lt::command_path(&app);
    if (word.size() > 1 && word.front() == '-') {
        const std::string name = word.substr(0, word.find('='));
        fmt::print(stderr, "{}: unknown option '{}'.", who, name);
        if (const auto guess = lt::nearest(name, lt::option_spellings(app))) {
            fmt::print(stderr, " Did you mean '{}'?\n", *guess);
        } else {
            fmt::print(stderr, "\n");
        }
    } else {
        fmt::print(stderr, "{}: unexpected argument '{}'.\n", who, word);
    }
    fmt::print(stderr, "Run '{} --help' for the options.\n", who);
    return exit_usage;
}

// A parse error in the words of the command line, not the parser's: "--launcher: 'foo' is not one of auto, openmpi,
// hydra, srun. Did you mean ...?" rather than "foo not in {auto,openmpi,hydra,srun}".
std::string explain(const CLI::App& command, const CLI::ParseError& e) {
    const std::string what = e.what();
    const auto colon = what.find(": ");
    if (!what.starts_with("-") || colon == std::string::npos) return what;
    const std::string name = what.substr(0, colon);
    const std::string rest = what.substr(colon + 2);
    const CLI::Option* opt = command.get_option_no_throw(name);
    if (opt == nullptr) return what;
    const std::string placeholder = lt::HelpFormatter::placeholder(opt);
    if (rest.find(" required ") != std::string::npos && rest.ends_with(" missing")) {
        return fmt::format("{} needs a value: {} {}", name, name, placeholder);
    }
    if (const auto in = rest.find(" not in {"); in != std::string::npos && placeholder.find('|') != std::string::npos) {
        const std::string value = rest.substr(0, in);
        std::vector<std::string> accepted;
        for (std::size_t start = 0; start <= placeholder.size();) {
            const auto bar = std::min(placeholder.find('|', start), placeholder.size());
            accepted.push_back(placeholder.substr(start, bar - start));
            start = bar + 1;
        }
        std::string text = fmt::format("{}: '{}' is not one of {}", name, value, fmt::join(accepted, ", "));
        if (const auto guess = lt::nearest(value, accepted)) text += fmt::format(". Did you mean '{}'?", *guess);
        return text;
    }
    if (rest.starts_with("Value ") && rest.find(" not in range ") != std::string::npos) {
        const std::string value = rest.substr(6, rest.find(" not in range ") - 6);
        const auto range = lt::HelpFormatter::range_words(opt);
        return fmt::format("{}: '{}' is not accepted; give a {}{}", name, value,
                           placeholder == "N" ? "whole number" : "value", range ? " (" + *range + ")" : "");
    }
    return what;
}

// Words for a compgen -W list or a case pattern: command and option names are plain words, safe unquoted there.
std::string joined(const std::vector<std::string>& words, const char* separator) {
    return fmt::format("{}", fmt::join(words, separator));
}

// The IsMember words of `opt` ("auto always never"), or empty when it checks none.
std::string accepted_words(const CLI::Option* opt) {
    std::string words = lt::HelpFormatter::placeholder(opt);
    if (words.find('|') == std::string::npos) return "";
    std::replace(words.begin(), words.end(), '|', ' ');
    return words;
}

// The bash completion script: commands, each command's options, and the accepted words of options that check them
// (IsMember). Other options' values, and launch's program and its arguments, are left to bash's file name completion
// (complete -o default).
std::string bash_completion(const CLI::App& app) {
    std::string cases;
    std::vector<std::string> launch_valued;  // launch's options that take a value: the program starts after them
    for (const CLI::App* sub : app.get_subcommands({})) {
        std::vector<std::string> valued;
        std::string choices;
        for (const CLI::Option* opt : sub->get_options()) {
            if (opt->get_positional() || opt->get_expected_max() == 0) continue;
            const std::vector<std::string> names = lt::spellings(*opt);
            if (sub->get_name() == "launch") launch_valued.insert(launch_valued.end(), names.begin(), names.end());
            if (const std::string words = accepted_words(opt); !words.empty()) {
                choices += fmt::format("                {}) COMPREPLY=($(compgen -W '{}' -- \"$cur\")); return ;;\n",
                                       joined(names, "|"), words);
            } else {
                valued.insert(valued.end(), names.begin(), names.end());
            }
        }
        std::string operands = sub->get_name() == "help" ? joined(command_names(app), " ") : "";
        for (const CLI::Option* opt : sub->get_options([](const CLI::Option* o) { return o->get_positional(); })) {
            if (const std::string words = accepted_words(opt); !words.empty()) {
                operands += (operands.empty() ? "" : " ") + words;
            }
        }
        cases += fmt::format("        {})\n            case \"$prev\" in\n{}", sub->get_name(), choices);
        if (!valued.empty()) cases += fmt::format("                {}) return ;;\n", joined(valued, "|"));
        cases += fmt::format(
            "            esac\n"
            "            if [[ $cur == -* ]]; then\n"
            "                COMPREPLY=($(compgen -W '{}' -- \"$cur\"))\n",
            joined(lt::option_spellings(*sub), " "));
        if (!operands.empty()) {
            cases +=
                fmt::format("            else\n                COMPREPLY=($(compgen -W '{}' -- \"$cur\"))\n", operands);
        }
        cases += "            fi\n            ;;\n";
    }
    if (launch_valued.empty()) launch_valued.emplace_back("--");  // a pattern that the loop below handles first
    return fmt::format(
        "# bash completion for lockstep; generated by 'lockstep completion bash'.\n"
        "_lockstep() {{\n"
        "    local cur=\"${{COMP_WORDS[COMP_CWORD]}}\" prev=\"${{COMP_WORDS[COMP_CWORD-1]}}\" command=\"\" i\n"
        "    COMPREPLY=()\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        if [[ ${{COMP_WORDS[i]}} != -* ]]; then\n"
        "            command=\"${{COMP_WORDS[i]}}\"\n"
        "            break\n"
        "        fi\n"
        "    done\n"
        "    if [[ -z $command ]]; then\n"
        "        COMPREPLY=($(compgen -W '{} {}' -- \"$cur\"))\n"
        "        return\n"
        "    fi\n"
        "    if [[ $command == launch ]]; then\n"
        "        # The program and its arguments start at the first word that is not an option or an option's value.\n"
        "        local j value_next=0\n"
        "        for ((j = i + 1; j < COMP_CWORD; j++)); do\n"
        "            if ((value_next)); then value_next=0; continue; fi\n"
        "            case \"${{COMP_WORDS[j]}}\" in\n"
        "                --) return ;;\n"
        "                --*=*) ;;\n"
        "                {}) value_next=1 ;;\n"
        "                -*) ;;\n"
        "                *) return ;;\n"
        "            esac\n"
        "        done\n"
        "    fi\n"
        "    case \"$command\" in\n"
        "{}"
        "    esac\n"
        "}}\n"
        "complete -o bashdefault -o default -F _lockstep lockstep\n",
        joined(command_names(app), " "), joined(lt::option_spellings(app), " "), joined(launch_valued, "|"), cases);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Tools for running and checking MPI jobs with the lockstep runtime."};
    app.name("lockstep");
    bool show_version = false;
    app.add_flag("-V,--version", show_version, "Show the version and git commit and exit");
    app.require_subcommand(0, 1);
    app.allow_extras();
    app.footer(
        "Run 'lockstep help COMMAND' or 'lockstep COMMAND --help' for the options of a command.\n"
        "Exit status: 0 ok; 1 problems found or the job failed; 2 usage error.");

    std::vector<std::string> args(argv + 1, argv + argc);
    const auto first_word = std::find_if(args.begin(), args.end(), [](const auto& a) { return !a.starts_with("-"); });
    std::vector<lt::Subcommand> subcommands{lt::add_hostcheck_command(app)};
    if (first_word == args.end() || *first_word != "hostcheck") {
        if (const std::string why = load_runtime_commands(app, subcommands); !why.empty()) {
            const bool asked = first_word != args.end() && std::find(runtime_commands.begin(), runtime_commands.end(),
                                                                     *first_word) != runtime_commands.end();
            if (asked) {
                fmt::print(stderr,
                           "lockstep {}: needs the lockstep runtime, which could not be loaded: {}\n"
                           "'lockstep hostcheck' works without it and checks the MPI installation.\n",
                           *first_word, why);
            } else {
                fmt::print(stderr,
                           "lockstep: launch, config, env, test and trace are unavailable: the lockstep runtime could "
                           "not be loaded: {}\n",
                           why);
            }
            if (asked) return 1;
        }
    }

    CLI::App* help = app.add_subcommand("help", "Show the help of lockstep or of one command.");
    std::string help_topic;
    help->add_option("command", help_topic, "The command to explain (default: all of lockstep)");
    CLI::App* version = app.add_subcommand("version", "Show the version and git commit.");
    CLI::App* completion = app.add_subcommand(
        "completion",
        "Print the bash completion script. Installed packages have it already "
        "(share/bash-completion/completions/lockstep); from a build tree: source <(lockstep completion bash)");
    std::string shell = "bash";
    completion->add_option("shell", shell, "The shell; bash is the one there is")
        ->check(CLI::IsMember({"bash"}))
        ->capture_default_str();

    const auto formatter = lt::use_help_formatter(app);
    for (const auto& sub : subcommands) {
        sub.app->allow_extras();  // unknown options are answered below, with the nearest valid one
        if (sub.take_arguments) formatter->set_operands(sub.app, "[--] PROGRAM [ARGS...]");
    }
    formatter->set_operands(&app, "COMMAND [ARGS...]");
    for (CLI::App* sub : {help, version, completion}) sub->allow_extras()->footer("");  // not the top level's

    // The command word the parser will see, for messages about a parse that failed inside it.
    CLI::App* command = &app;
    if (first_word != args.end()) {
        if (CLI::App* sub = find_command(app, *first_word)) command = sub;
    }
    try {
        for (const auto& sub : subcommands) {
            if (sub.take_arguments) args = sub.take_arguments(std::move(args));
        }
        std::reverse(args.begin(), args.end());  // CLI11 reads a vector from the back
        app.parse(args);
    } catch (const CLI::CallForHelp&) {
        std::cout << command->help();
        return 0;
    } catch (const CLI::ParseError& e) {
        const std::string who = lt::command_path(command);
        fmt::print(stderr, "{}: {}\nRun '{} --help' for the options.\n", who, explain(*command, e), who);
        return exit_usage;
    }

    if (!app.remaining().empty()) {
        const std::string first = app.remaining().front();
        return first.starts_with("-") ? unexpected_argument(app, first) : unknown_command(app, first);
    }
    for (const CLI::App* sub : app.get_subcommands()) {
        if (!sub->remaining().empty()) return unexpected_argument(*sub, sub->remaining().front());
    }
    if (show_version || version->parsed()) {
        std::cout << version_text();
        return 0;
    }
    if (help->parsed()) {
        if (help_topic.empty()) {
            std::cout << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
            return 0;
        }
        const CLI::App* topic = find_command(app, help_topic);
        if (topic == nullptr) return unknown_command(app, help_topic);
        std::cout << topic->help();
        return 0;
    }
    if (completion->parsed()) {
        std::cout << bash_completion(app);
        return 0;
    }
    for (const auto& sub : subcommands) {
        if (sub.app->parsed()) return sub.run();
    }
    fmt::print(stderr, "lockstep: a command is required.\n\n{}",
               app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal));
    return exit_usage;
}
