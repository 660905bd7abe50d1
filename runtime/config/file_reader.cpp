#include "file_reader.hpp"

#include "settings.hpp"
#include "values.hpp"

#include <lockstep/base/byte_size.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>

namespace lockstep {

namespace config_detail {

namespace {

constexpr int schema_version = 1;

std::string position(const std::string& path, const YAML::Mark& mark) {
    if (mark.is_null()) return path;
    return fmt::format("{}:{}:{}", path, mark.line + 1, mark.column + 1);
}

std::string_view kind_name(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Null:
            return "null";
        case YAML::NodeType::Scalar:
            return "single value";
        case YAML::NodeType::Sequence:
            return "list";
        case YAML::NodeType::Map:
            return "mapping";
        case YAML::NodeType::Undefined:
            break;
    }
    return "undefined node";
}

// Config files hold a few dozen lines. yaml-cpp needs some 60 bytes of memory per byte of a file of short keys, so a
// stray large file, or a device such as /dev/zero, would take the machine's memory before it failed.
constexpr std::size_t largest_config_file = std::size_t{1} << 20;

std::string read_config_text(const std::string& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) throw ConfigError(path, "the config file does not exist");
    if (std::filesystem::is_directory(status)) throw ConfigError(path, "is a directory, not a YAML config file");
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw ConfigError(path, fmt::format("cannot open the config file: {}",
                                            std::error_code(errno, std::generic_category()).message()));
    }
    std::string text;
    std::array<char, 64 * 1024> buffer{};
    while (in.read(buffer.data(), buffer.size()) || in.gcount() > 0) {
        text.append(buffer.data(), static_cast<std::size_t>(in.gcount()));
        if (text.size() > largest_config_file) {
            throw ConfigError(path, fmt::format("the config file is larger than {}, the most a config file may hold",
                                                base::format_bytes(largest_config_file)));
        }
    }
    if (in.bad()) throw ConfigError(path, "cannot read the config file");
    return text;
}

// Walks a YAML stream's documents without building them: counts them, and notes where each starts and where the
// second one's root is.
class DocumentScan final : public YAML::EventHandler {
public:
    void OnDocumentStart(const YAML::Mark& mark) override {
        ++documents;
        start = mark;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
    void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
        node(mark);
    }
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
        node(mark);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
        node(mark);
    }
    void OnMapEnd() override {}

    std::size_t documents = 0;
    YAML::Mark start = YAML::Mark::null_mark();  // of the latest document
    std::optional<YAML::Mark> second_root;

private:
    void node(const YAML::Mark& mark) {
        if (documents == 2 && !second_root) second_root = mark;
    }
};

bool same_place(const YAML::Mark& a, const YAML::Mark& b) {
    return a.pos == b.pos && a.line == b.line && a.column == b.column;
}

// The one document of a config file; nullopt when the file holds none.
//
// yaml-cpp 0.7's YAML::LoadAll never returns, allocating without end, on a file as short as ",\n" (upstream issue
// #1040, fixed in 0.8 by jbeder/yaml-cpp#1318 and #1319): a token that cannot start a value, at the top level, is
// left unread, so every further document is an empty one at the same place. The stream is therefore walked here
// document by document with a handler that builds nothing; a document that starts where the one before it started has
// read nothing, and the file is malformed there. Each other document reads at least one token, so the walk ends. Only
// then is the first document built, by YAML::Load, which parses one document and stops.
std::optional<YAML::Node> parse_yaml(const std::string& path, const std::string& text) {
    try {
        std::istringstream stream(text);
        YAML::Parser parser(stream);
        DocumentScan scan;
        std::optional<YAML::Mark> previous_start;
        while (parser.HandleNextDocument(scan)) {
            if (previous_start && same_place(*previous_start, scan.start)) {
                const auto at = static_cast<std::size_t>(scan.start.pos);
                const std::string token = at < text.size() ? std::string(1, text[at]) : std::string();
                throw ConfigError(position(path, scan.start),
                                  fmt::format("malformed YAML: unexpected {} where a value or a key should start",
                                              detail::quote_value(token)));
            }
            previous_start = scan.start;
        }
        if (scan.documents > 1) {
            throw ConfigError(
                position(path, scan.second_root.value_or(scan.start)),
                fmt::format("the file holds {} YAML documents; a config file holds exactly one", scan.documents));
        }
        if (scan.documents == 0) return std::nullopt;
        return YAML::Load(text);
    } catch (const YAML::Exception& error) {
        throw ConfigError(position(path, error.mark), fmt::format("malformed YAML: {}", error.msg));
    }
}

// The version is checked before any other key, because a newer schema may give known keys another meaning.
void check_schema_version(const std::string& path, const YAML::Node& root) {
    for (const auto& entry : root) {
        if (!entry.first.IsScalar() || entry.first.Scalar() != schema_key) continue;
        const YAML::Node& value = entry.second;
        const std::string source = position(path, value.IsNull() ? entry.first.Mark() : value.Mark());
        const std::string text = value.IsScalar() ? value.Scalar() : std::string(kind_name(value));
        int version = 0;
        const std::string_view body = trim(text);
        const auto [end, errc] = std::from_chars(body.data(), body.data() + body.size(), version);
        if (!value.IsScalar() || errc != std::errc{} || end != body.data() + body.size() || version < 1) {
            reject(source, text, "a schema version",
                   fmt::format("a positive integer; this lockstep reads version {}", schema_version));
        }
        if (version > schema_version) {
            throw ConfigError(source, fmt::format("schema version {} is newer than this lockstep understands "
                                                  "(version {}); upgrade lockstep to read this file",
                                                  detail::quote_value(text), schema_version));
        }
        return;
    }
}

}  // namespace

void apply_file(const std::string& path, Config& into) {
    const std::optional<YAML::Node> document = parse_yaml(path, read_config_text(path));
    into.config_file = path;
    if (!document || document->IsNull()) return;  // empty or only comments: nothing set
    const YAML::Node& root = *document;
    if (!root.IsMap()) {
        throw ConfigError(position(path, root.Mark()),
                          fmt::format("the top level is a {}; a config file is a mapping of keys, e.g. 'timeout: 30'",
                                      kind_name(root)));
    }
    check_schema_version(path, root);

    std::map<std::string, int, std::less<>> first_line;
    for (const auto& entry : root) {
        const YAML::Node& key = entry.first;
        const YAML::Node& value = entry.second;
        if (!key.IsScalar()) {
            throw ConfigError(position(path, key.Mark()),
                              fmt::format("a key is a {}; keys are plain names such as 'timeout'", kind_name(key)));
        }
        const std::string& name = key.Scalar();
        const int line = key.Mark().line + 1;
        // yaml-cpp keeps both entries of a repeated key; which one was meant is anybody's guess.
        if (const auto [it, inserted] = first_line.emplace(name, line); !inserted) {
            throw ConfigError(position(path, key.Mark()),
                              fmt::format("key {} appears twice (first on line {}); keep one",
                                          detail::quote_value(name), it->second));
        }
        if (name == schema_key || is_unused_accelerate_key(name)) continue;
        const Setting* setting = find_setting(name);
        if (setting == nullptr) {
            std::string warning = fmt::format("{}:{}: unknown key {} (ignored)", path, line, detail::quote_value(name));
            if (auto guess = likely_key(name)) warning += fmt::format("; did you mean '{}'?", *guess);
            into.warnings.push_back(std::move(warning));
            continue;
        }
        // A null value has no position of its own in yaml-cpp (it points past the key), so point at the key.
        const std::string source = position(path, value.IsNull() ? key.Mark() : value.Mark());
        if (!value.IsScalar() && !value.IsNull()) {
            throw ConfigError(source, fmt::format("'{}' takes a single value, not a {}", name, kind_name(value)));
        }
        setting->apply_text(into, value.IsNull() ? std::string_view{} : std::string_view(value.Scalar()), source);
        into.sources[name] = source;
    }
}

}  // namespace config_detail

void Config::load_file(const std::string& path, Config& into) {
    config_detail::apply_file(path, into);
    into.sources.try_emplace("config_file", config_detail::api_source);
}

}  // namespace lockstep
