#pragma once
// Every command's help has one form, given by HelpFormatter (the top level installs it on every subcommand):
//
//   Usage: lockstep launch [OPTIONS] [--] PROGRAM [ARGS...]
//
//   Start a program on every rank ... (the description, wrapped)
//
//   Options:
//     -n, --num-processes N      How many ranks to start (at least 1)
//     --launcher auto|openmpi|hydra|srun
//                                Launcher flavour ... (default: auto)
//
//   The footer, as written.
//
// A value's placeholder is the option's option_text() when a command sets one (`->option_text("FILE")`); else the
// accepted words of an IsMember check ("auto|always|never"), N for a number, or the last word of the option's name
// in capitals (--log-level LEVEL). A Range check is said in words ("1 to 4096", "at least 1"), a captured default as
// "(default: ...)", an excluded option as "(not with --no-debug)". A command that reads words the parser does not see
// (launch's program) names them with HelpFormatter::set_operands; a Subcommand with take_arguments gets
// "[--] PROGRAM [ARGS...]".

#include <CLI/CLI.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace lockstep::tools {

// "lockstep launch", the words that run `app`.
[[nodiscard]] std::string command_path(const CLI::App* app);

class HelpFormatter : public CLI::Formatter {
public:
    static constexpr std::size_t width = 100;  // of the text; options' descriptions start at column_width

    HelpFormatter();

    // What follows [OPTIONS] on the usage line of `app`, for words the parser does not read itself.
    void set_operands(const CLI::App* app, std::string operands) { operands_[app] = std::move(operands); }

    // The words after [OPTIONS] on the usage line of `app`.
    [[nodiscard]] std::string operands(const CLI::App* app) const;

    // "lockstep launch [OPTIONS] [--] PROGRAM [ARGS...]", without "Usage:".
    [[nodiscard]] std::string usage_line(const CLI::App* app) const;

    // The description, less a first line that is a usage line ("lockstep launch [OPTIONS] ..."): the usage line is
    // printed once, from usage_line().
    [[nodiscard]] static std::string description_text(const CLI::App* app);

    // The description's first clause, for the list of commands: up to the first ": ", ". " or " (".
    [[nodiscard]] static std::string summary(const CLI::App* app);

    // `text` broken into lines of at most `line_width` characters at spaces (longer words stay whole), every line but
    // the first indented by `indent` spaces (the first continues a line already that wide); line breaks in `text` are
    // kept.
    [[nodiscard]] static std::string wrap(const std::string& text, std::size_t line_width, std::size_t indent);

    std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override;
    std::string make_usage(const CLI::App* app, std::string) const override;
    std::string make_description(const CLI::App* app) const override;
    std::string make_subcommand(const CLI::App* sub) const override;
    std::string make_option(const CLI::Option* opt, bool is_positional) const override;
    std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
    std::string make_option_opts(const CLI::Option* opt) const override;
    std::string make_option_desc(const CLI::Option* opt) const override;

    // The value's placeholder: option_text(), the IsMember words, N, or the name's last word in capitals.
    [[nodiscard]] static std::string placeholder(const CLI::Option* opt);

    // A Range check ("INT in [1 - 4096]") in words: "1 to 4096", or "at least 1" when the top is only a guard.
    [[nodiscard]] static std::optional<std::string> range_words(const CLI::Option* opt);

private:
    std::map<const CLI::App*, std::string> operands_;

    [[nodiscard]] static std::string positional_name(const CLI::Option* opt);

    // One row of an option or command list: the name in the left column, the text wrapped beside it (below it when
    // the name is too wide).
    [[nodiscard]] std::string row(const std::string& name, const std::string& text) const;
};

// Installs one HelpFormatter on `app` and every subcommand below it, with the same help flag wording everywhere;
// returns it, for set_operands.
std::shared_ptr<HelpFormatter> use_help_formatter(CLI::App& app);

}  // namespace lockstep::tools
