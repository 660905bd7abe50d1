// Answers are checked with the library's own parsers (a Config resolved from a one-variable environment), so that
// `lockstep config` accepts exactly what the ranks will accept and explains a refusal in the library's words.

#include "config_file.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <istream>
#include <ostream>

namespace lockstep::config_file {
namespace {

// nullopt when the library accepts `text` for `variable`; else its explanation, blamed on the answer: the
// library's message names the variable the answer was tried as ("invalid configuration from environment ...: "),
// which is not where the user typed it.
std::optional<std::string> library_rejects(const char* variable, const std::string& text) {
    try {
        (void)Config::resolve({}, map_environment({{variable, text}, {env_names::config_file, ""}}));
        return std::nullopt;
    } catch (const ConfigError& e) {
        std::string why = e.what();
        const std::string prefix = fmt::format("invalid configuration from {}: ", e.source());
        if (why.starts_with(prefix)) why.erase(0, prefix.size());
        return why;
    }
}

// Asks until an answer is accepted; a refusal is blamed on the answer for `topic` ("the log level"), the words the
// user typed, never on the variable the library tried it as.
std::string ask_one(std::istream& in, std::ostream& out, const std::string& topic, const std::string& question,
                    const std::string& fallback,
                    const std::function<std::optional<std::string>(const std::string&)>& rejects) {
    for (;;) {
        out << question << " [" << fallback << "]: " << std::flush;
        std::string line;
        if (!std::getline(in, line)) {
            throw UsageError(fmt::format("input ended before the question '{}' was answered", question));
        }
        const auto first = line.find_first_not_of(" \t\r");
        const auto last = line.find_last_not_of(" \t\r");
        std::string answer = first == std::string::npos ? "" : line.substr(first, last - first + 1);
        if (answer.empty()) answer = fallback;
        if (const auto why = rejects(answer)) {
            out << "  Your answer for " << topic << " cannot be used: " << *why << "\n";
            continue;
        }
        return answer;
    }
}

}  // namespace

std::string default_path(const EnvironmentLookup& env) {
    if (const auto named = env(env_names::config_file)) {
        if (named->empty()) {
            throw UsageError(
                "LOCKSTEP_CONFIG_FILE is set but empty, which means 'no config file'; give the file to "
                "write with --file PATH");
        }
        return *named;
    }
    if (const auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
        return (std::filesystem::path(*xdg) / "lockstep" / "config.yaml").string();
    }
    if (const auto home = env("HOME"); home && !home->empty()) {
        return (std::filesystem::path(*home) / ".config" / "lockstep" / "config.yaml").string();
    }
    throw UsageError("neither LOCKSTEP_CONFIG_FILE, XDG_CONFIG_HOME nor HOME is set; give the file with --file PATH");
}

std::string to_yaml(const Settings& s) {
    YAML::Emitter yaml;
    yaml << YAML::Comment(
        "lockstep configuration, written by `lockstep config`. Settings here are overridden by "
        "LOCKSTEP_* variables and by `lockstep launch` flags.");
    yaml << YAML::BeginMap;
    yaml << YAML::Key << "lockstep" << YAML::Value << 1 << YAML::Comment("schema version");
    yaml << YAML::Key << "num_processes" << YAML::Value << s.num_processes
         << YAML::Comment("ranks `lockstep launch` starts without -n");
    yaml << YAML::Key << "debug" << YAML::Value << (s.debug ? "true" : "false")
         << YAML::Comment("check every collective's arguments across ranks");
    yaml << YAML::Key << "log_level" << YAML::Value << s.log_level;
    yaml << YAML::Key << "timeout" << YAML::Value << s.timeout
         << YAML::Comment("seconds before a collective is reported as a hang");
    yaml << YAML::Key << "cpu_memory_limit" << YAML::Value << s.cpu_memory_limit
         << YAML::Comment("cap of the host allocator, e.g. 8GiB, or none");
    yaml << YAML::Key << "seed" << YAML::Value << s.seed;
    yaml << YAML::Key << "mixed_precision" << YAML::Value << s.mixed_precision;
    yaml << YAML::EndMap;
    return std::string(yaml.c_str()) + "\n";
}

void write_file(const std::string& path, const std::string& text, bool force) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(path, ec) && !force) {
        throw WriteError(
            fmt::format("{} already exists; pass --force to replace it, or --file to write elsewhere", path));
    }
    const fs::path target(path);
    if (target.has_parent_path()) {
        fs::create_directories(target.parent_path(), ec);
        if (ec) {
            throw WriteError(
                fmt::format("cannot create the directory {}: {}", target.parent_path().string(), ec.message()));
        }
    }
    // Written beside the target and renamed over it, so that a reader never sees half a file.
    const std::string temporary = fmt::format("{}.tmp.{}", path, ::getpid());
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << text;
        out.close();
        if (!out) {
            fs::remove(temporary, ec);
            throw WriteError(fmt::format("cannot write {}: {}", temporary,
                                         std::error_code(errno, std::generic_category()).message()));
        }
    }
    fs::rename(temporary, target, ec);
    if (ec) {
        fs::remove(temporary, ec);
        throw WriteError(fmt::format("cannot rename {} to {}: {}", temporary, path, ec.message()));
    }
    Config check;
    try {
        Config::load_file(path, check);
    } catch (const ConfigError& e) {
        throw WriteError(fmt::format("the file written does not read back: {}", e.what()));
    }
}

Settings ask(std::istream& in, std::ostream& out) {
    Settings s;
    const auto count =
        ask_one(in, out, "the number of processes", "How many processes should `lockstep launch` start by default?",
                std::to_string(s.num_processes), [](const std::string& text) -> std::optional<std::string> {
                    int n = 0;
                    const auto [end, errc] = std::from_chars(text.data(), text.data() + text.size(), n);
                    if (errc != std::errc{} || end != text.data() + text.size() || n < 1) {
                        return fmt::format(
                            "'{}' is not a number of processes; give a whole number of "
                            "at least 1",
                            text);
                    }
                    return std::nullopt;
                });
    s.num_processes = std::stoi(count);
    const auto debug =
        ask_one(in, out, "debug mode", "Check every collective's arguments across ranks (debug mode)? yes/no", "no",
                [](const std::string& t) { return library_rejects(env_names::debug, t); });
    s.debug = parse_bool(debug).value_or(false);
    s.log_level = ask_one(in, out, "the log level", "Log level (DEBUG, INFO, WARNING, ERROR, CRITICAL)?", s.log_level,
                          [](const std::string& t) { return library_rejects(env_names::log_level, t); });
    s.log_level = std::string(log_level_name(*parse_log_level(s.log_level)));
    s.timeout = ask_one(in, out, "the timeout", "Seconds a collective may take before it is reported as a hang?",
                        s.timeout, [](const std::string& t) { return library_rejects(env_names::timeout, t); });
    s.cpu_memory_limit =
        ask_one(in, out, "the memory cap", "Cap on host memory for tensors (e.g. 8GiB, or none)?", s.cpu_memory_limit,
                [](const std::string& t) { return library_rejects(env_names::cpu_memory_limit, t); });
    s.seed = ask_one(in, out, "the seed", "Seed of the default random generator?", s.seed,
                     [](const std::string& t) { return library_rejects(env_names::seed, t); });
    s.mixed_precision = ask_one(in, out, "mixed precision", "Mixed precision (no, fp16, bf16, fp8)?", s.mixed_precision,
                                [](const std::string& t) -> std::optional<std::string> {
                                    for (const char* ok : {"no", "fp16", "bf16", "fp8"}) {
                                        if (t == ok) return std::nullopt;
                                    }
                                    return fmt::format("'{}' is not one of no, fp16, bf16, fp8", t);
                                });
    return s;
}

}  // namespace lockstep::config_file
