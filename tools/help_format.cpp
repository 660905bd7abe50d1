#include "help_format.hpp"

#include <algorithm>
#include <functional>
#include <sstream>
#include <vector>

namespace lockstep::tools {

std::string command_path(const CLI::App* app) {
    std::string path = app->get_name();
    for (const CLI::App* p = app->get_parent(); p != nullptr; p = p->get_parent()) path = p->get_name() + " " + path;
    return path;
}

HelpFormatter::HelpFormatter() {
    column_width(29);
    label("Positionals", "Arguments");
    label("Subcommands", "Commands");
}

std::string HelpFormatter::operands(const CLI::App* app) const {
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

std::string HelpFormatter::usage_line(const CLI::App* app) const {
    std::string line = command_path(app);
    if (!app->get_options([](const CLI::Option* o) { return o->nonpositional(); }).empty()) line += " [OPTIONS]";
    if (const std::string rest = operands(app); !rest.empty()) line += " " + rest;
    return line;
}

std::string HelpFormatter::description_text(const CLI::App* app) {
    std::string text = app->get_description();
    const std::string own_usage = command_path(app) + " ";
    if (text.starts_with(own_usage)) {
        const auto newline = text.find('\n');
        text = newline == std::string::npos ? "" : text.substr(newline + 1);
    }
    return text;
}

std::string HelpFormatter::summary(const CLI::App* app) {
    std::string text = description_text(app);
    std::size_t end = text.size();
    for (const char* stop : {": ", ". ", " (", "\n"}) end = std::min(end, text.find(stop));
    text = text.substr(0, end);
    if (text.ends_with('.')) text.pop_back();
    return text;
}

std::string HelpFormatter::wrap(const std::string& text, std::size_t line_width, std::size_t indent) {
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

std::string HelpFormatter::make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const {
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

std::string HelpFormatter::make_usage(const CLI::App* app, std::string) const {
    return "Usage: " + usage_line(app) + "\n";
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
    const std::string description = description_text(app);
    return description.empty() ? std::string() : wrap(description, width, 0) + "\n";
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
    return row(sub->get_name(), summary(sub));
}

std::string HelpFormatter::make_option(const CLI::Option* opt, bool is_positional) const {
    return row(make_option_name(opt, is_positional) + make_option_opts(opt), make_option_desc(opt));
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
    if (is_positional) return positional_name(opt);
    std::string names;
    for (const auto& s : opt->get_snames()) names += (names.empty() ? "-" : ", -") + s;
    for (const auto& l : opt->get_lnames()) names += (names.empty() ? "--" : ", --") + l;
    return names;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
    if (opt->get_positional() || opt->get_expected_max() == 0) return "";
    std::string value = placeholder(opt);
    if (opt->get_expected_max() > 1) value += " ...";
    return " " + value;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
    std::string desc = opt->get_description();
    std::vector<std::string> notes;
    if (const auto range = range_words(opt)) notes.push_back(*range);
    if (!opt->get_default_str().empty() && desc.find("default") == std::string::npos) {
        notes.push_back("default: " + opt->get_default_str());
    }
    if (!opt->get_excludes().empty()) {
        std::string names;
        for (const CLI::Option* other : opt->get_excludes()) names += (names.empty() ? "" : ", ") + other->get_name();
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

std::string HelpFormatter::placeholder(const CLI::Option* opt) {
    if (!opt->get_option_text().empty()) return opt->get_option_text();
    const std::string type = opt->get_type_name();
    if (const auto open = type.find('{'); open != std::string::npos) {
        const auto close = type.find('}', open);
        std::string words = type.substr(open + 1, close == std::string::npos ? std::string::npos : close - open - 1);
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

std::optional<std::string> HelpFormatter::range_words(const CLI::Option* opt) {
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

std::string HelpFormatter::positional_name(const CLI::Option* opt) {
    std::string name = opt->get_name(true, false);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
    return name;
}

std::string HelpFormatter::row(const std::string& name, const std::string& text) const {
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

std::shared_ptr<HelpFormatter> use_help_formatter(CLI::App& app) {
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
