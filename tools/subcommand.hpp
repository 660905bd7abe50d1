#pragma once
// Each `lockstep` subcommand lives in its own source file and registers itself on the top-level parser; it hands
// back the function that runs it once the command line is parsed, whose return value is the exit status
// (0 ok, 1 problems found, 2 usage error).
//
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
// "[--] PROGRAM [ARGS...]". The top level also lets every command keep the words it does not know (allow_extras) and
// answers them itself: an unknown option is named with the nearest option of that command (nearest()), exit 2.

#include <lockstep/base/edit_distance.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
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

// ------------------------------------------------------------------------------------------- suggestions

// The rule of every suggestion, the command line's and config.yaml's: lockstep/base/edit_distance.hpp.
using base::edit_distance;
using base::nearest;

// "lockstep launch", the words that run `app`.
[[nodiscard]] inline std::string command_path(const CLI::App* app) {
    std::string path = app->get_name();
    for (const CLI::App* p = app->get_parent(); p != nullptr; p = p->get_parent()) path = p->get_name() + " " + path;
    return path;
}

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

// ------------------------------------------------------------------------------------------- help text

class HelpFormatter : public CLI::Formatter {
public:
    static constexpr std::size_t width = 100;  // of the text; options' descriptions start at column_width

    HelpFormatter() {
        column_width(29);
        label("Positionals", "Arguments");
        label("Subcommands", "Commands");
    }

    // What follows [OPTIONS] on the usage line of `app`, for words the parser does not read itself.
    void set_operands(const CLI::App* app, std::string operands) { operands_[app] = std::move(operands); }

    // The words after [OPTIONS] on the usage line of `app`.
    [[nodiscard]] std::string operands(const CLI::App* app) const {
        if (auto it = operands_.find(app); it != operands_.end()) return it->second;
        std::vector<std::string> words;
        for (const CLI::Option* opt : app->get_options([](const CLI::Option* o) { return o->get_positional(); })) {
            std::string word = positional_name(opt);
            if (opt->get_expected_max() > 1) word += "...";
            words.push_back(opt->get_required() ? word : "[" + word + "]");
        }
        const auto subs = app->get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); });
        if (!subs.empty()) words.emplace_back(app->get_require_subcommand_min() > 0 ? "COMMAND" : "[COMMAND]");
        std::string out;
        for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
        return out;
    }

    // "lockstep launch [OPTIONS] [--] PROGRAM [ARGS...]", without "Usage:".
    [[nodiscard]] std::string usage_line(const CLI::App* app) const {
        std::string line = command_path(app);
        if (!app->get_options([](const CLI::Option* o) { return o->nonpositional(); }).empty()) line += " [OPTIONS]";
        if (const std::string rest = operands(app); !rest.empty()) line += " " + rest;
        return line;
    }

    // The description, less a first line that is a usage line ("lockstep launch [OPTIONS] ..."): the usage line is
    // printed once, from usage_line().
    [[nodiscard]] static std::string description_text(const CLI::App* app) {
        std::string text = app->get_description();
        const std::string own_usage = command_path(app) + " ";
        if (text.starts_with(own_usage)) {
            const auto newline = text.find('\n');
            text = newline == std::string::npos ? "" : text.substr(newline + 1);
        }
        return text;
    }

    // The description's first clause, for the list of commands: up to the first ": ", ". " or " (".
    [[nodiscard]] static std::string summary(const CLI::App* app) {
        std::string text = description_text(app);
        std::size_t end = text.size();
        for (const char* stop : {": ", ". ", " (", "\n"}) end = std::min(end, text.find(stop));
        text = text.substr(0, end);
        if (text.ends_with('.')) text.pop_back();
        return text;
    }

    // `text` broken into lines of at most `line_width` characters at spaces (longer words stay whole), every line but
    // the first indented by `indent` spaces (the first continues a line already that wide); line breaks in `text` are
    // kept.
    [[nodiscard]] static std::string wrap(const std::string& text, std::size_t line_width, std::size_t indent) {
        std::string out;
        std::size_t column = indent;  // the first line starts where the caller's left column ends
        const std::string pad(indent, ' ');
        std::istringstream lines(text);
        std::string line;
        bool first_line = true;
        while (std::getline(lines, line)) {
            if (!first_line) {
                out += "\n" + pad;
                column = indent;
            }
            first_line = false;
            std::istringstream words(line);
            std::string word;
            bool first_word = true;
            while (words >> word) {
                if (!first_word && column + 1 + word.size() > line_width) {
                    out += "\n" + pad;
                    column = indent;
                    first_word = true;
                }
                if (!first_word) {
                    out += ' ';
                    ++column;
                }
                out += word;
                column += word.size();
                first_word = false;
            }
        }
        return out;
    }

    std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
        if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
        std::string out = "Usage: " + usage_line(app) + "\n";
        if (const std::string description = description_text(app); !description.empty()) {
            out += "\n" + wrap(description, width, 0) + "\n";
        }
        out += make_positionals(app);
        out += make_groups(app, mode);
        out += make_subcommands(app, mode);
        if (const std::string footer = make_footer(app); !footer.empty()) out += "\n" + footer;
        return out;
    }

    std::string make_usage(const CLI::App* app, std::string) const override {
        return "Usage: " + usage_line(app) + "\n";
    }

    std::string make_description(const CLI::App* app) const override {
        const std::string description = description_text(app);
        return description.empty() ? std::string() : wrap(description, width, 0) + "\n";
    }

    std::string make_subcommand(const CLI::App* sub) const override { return row(sub->get_name(), summary(sub)); }

    std::string make_option(const CLI::Option* opt, bool is_positional) const override {
        return row(make_option_name(opt, is_positional) + make_option_opts(opt), make_option_desc(opt));
    }

    std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
        if (is_positional) return positional_name(opt);
        std::string names;
        for (const auto& s : opt->get_snames()) names += (names.empty() ? "-" : ", -") + s;
        for (const auto& l : opt->get_lnames()) names += (names.empty() ? "--" : ", --") + l;
        return names;
    }

    std::string make_option_opts(const CLI::Option* opt) const override {
        if (opt->get_positional() || opt->get_expected_max() == 0) return "";
        std::string value = placeholder(opt);
        if (opt->get_expected_max() > 1) value += " ...";
        return " " + value;
    }

    std::string make_option_desc(const CLI::Option* opt) const override {
        std::string desc = opt->get_description();
        std::vector<std::string> notes;
        if (const auto range = range_words(opt)) notes.push_back(*range);
        if (!opt->get_default_str().empty() && desc.find("default") == std::string::npos) {
            notes.push_back("default: " + opt->get_default_str());
        }
        if (!opt->get_excludes().empty()) {
            std::string names;
            for (const CLI::Option* other : opt->get_excludes())
                names += (names.empty() ? "" : ", ") + other->get_name();
            notes.push_back("not with " + names);
        }
        if (!opt->get_needs().empty()) {
            std::string names;
            for (const CLI::Option* other : opt->get_needs()) names += (names.empty() ? "" : ", ") + other->get_name();
            notes.push_back("needs " + names);
        }
        if (!opt->get_envname().empty()) notes.push_back("variable " + opt->get_envname());
        if (!notes.empty()) {
            std::string joined;
            for (const auto& n : notes) joined += (joined.empty() ? "" : "; ") + n;
            if (desc.ends_with(')') && desc.rfind("(default") != std::string::npos &&
                desc.rfind("(default") == desc.rfind('(')) {
                desc.insert(desc.size() - 1, "; " + joined);  // one parenthesis: "(default: all; 1 to 100000)"
            } else {
                desc += (desc.empty() ? "(" : " (") + joined + ")";
            }
        }
        return desc;
    }

    // The value's placeholder: option_text(), the IsMember words, N, or the name's last word in capitals.
    [[nodiscard]] static std::string placeholder(const CLI::Option* opt) {
        if (!opt->get_option_text().empty()) return opt->get_option_text();
        const std::string type = opt->get_type_name();
        if (const auto open = type.find('{'); open != std::string::npos) {
            const auto close = type.find('}', open);
            std::string words =
                type.substr(open + 1, close == std::string::npos ? std::string::npos : close - open - 1);
            std::replace(words.begin(), words.end(), ',', '|');
            return words;
        }
        const std::string base = type.substr(0, type.find(':'));
        if (base == "INT" || base == "UINT" || base == "FLOAT" || base == "NUMBER") return "N";
        std::string name = opt->get_lnames().empty() ? opt->get_name() : opt->get_lnames().front();
        if (const auto dash = name.find_last_of('-'); dash != std::string::npos) name = name.substr(dash + 1);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
        return name.empty() ? "VALUE" : name;
    }

    // A Range check ("INT in [1 - 4096]") in words: "1 to 4096", or "at least 1" when the top is only a guard.
    [[nodiscard]] static std::optional<std::string> range_words(const CLI::Option* opt) {
        const std::string type = opt->get_type_name();
        const auto open = type.find(" in [");
        const auto dash = type.find(" - ", open);
        const auto close = type.find(']', dash);
        if (open == std::string::npos || dash == std::string::npos || close == std::string::npos) return std::nullopt;
        const std::string low = type.substr(open + 5, dash - open - 5);
        const std::string high = type.substr(dash + 3, close - dash - 3);
        if (high.size() >= 7) return "at least " + low;  // a million or more: a bound against nonsense
        return low + " to " + high;
    }

private:
    std::map<const CLI::App*, std::string> operands_;

    [[nodiscard]] static std::string positional_name(const CLI::Option* opt) {
        std::string name = opt->get_name(true, false);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
        return name;
    }

    // One row of an option or command list: the name in the left column, the text wrapped beside it (below it when
    // the name is too wide).
    [[nodiscard]] std::string row(const std::string& name, const std::string& text) const {
        std::string out = "  " + name;
        const std::size_t left = get_column_width();
        if (text.empty()) return out + "\n";
        if (out.size() + 1 > left) {
            out += "\n" + std::string(left, ' ');
        } else {
            out += std::string(left - out.size(), ' ');
        }
        return out + wrap(text, width, left) + "\n";
    }
};

// Installs one HelpFormatter on `app` and every subcommand below it, with the same help flag wording everywhere;
// returns it, for set_operands.
inline std::shared_ptr<HelpFormatter> use_help_formatter(CLI::App& app) {
    auto formatter = std::make_shared<HelpFormatter>();
    std::function<void(CLI::App&)> apply = [&](CLI::App& a) {
        a.formatter(formatter);
        if (a.get_parent() != nullptr) a.group("Commands");
        if (a.get_help_ptr() != nullptr) a.get_help_ptr()->description("Show this help and exit");
        for (CLI::App* sub : a.get_subcommands({})) apply(*sub);
    };
    apply(app);
    return formatter;
}

}  // namespace lockstep::tools
