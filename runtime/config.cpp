// Resolution of the Config. The layers are applied from the lowest to the highest (default, config.yaml, environment
// or launcher flag, API argument), each overwriting the value and its source, so that the last writer is the one with
// the highest precedence. The environment and the file read a setting through the same parser, so both accept the
// same spellings and both report a bad value in the same words.

#include <lockstep/allocator.hpp>
#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <forward_list>
#include <fstream>
#include <mutex>
#include <set>
#include <system_error>
#include <utility>

namespace lockstep {

namespace {

constexpr const char* api_source = "API argument";
constexpr std::string_view schema_key = "lockstep";
constexpr int schema_version = 1;

std::string_view trim(std::string_view text) {
    auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
}

std::string lowercase(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// ------------------------------------------------------------------------------ one parser per kind of value

constexpr std::string_view bool_accepted = "1/0, true/false, yes/no or on/off, in any case";
constexpr std::string_view log_level_accepted = "DEBUG, INFO, WARNING, ERROR or CRITICAL, in any case";
constexpr std::string_view timeout_accepted =
    "a positive number of seconds, optionally with the unit s, m (minutes) or h, e.g. 30, 90s, 1.5m, 2h";
constexpr std::string_view memory_accepted =
    "a positive size such as 512MiB, 2GiB, 1.5GB or a plain number of bytes, or 'none' (or empty) for no cap";
constexpr std::string_view seed_accepted = "an unsigned 64-bit integer, 0 to 18446744073709551615";
constexpr std::string_view count_accepted = "a positive integer";
constexpr std::string_view mixed_precision_accepted = "no, fp16, bf16 or fp8";

[[noreturn]] void reject(const std::string& source, std::string_view text, std::string_view what,
                         std::string_view accepted) {
    throw ConfigError(source, fmt::format("'{}' is not {}; accepted: {}", text, what, accepted));
}

bool bool_value(std::string_view text, const std::string& source) {
    if (auto value = parse_bool(trim(text))) return *value;
    reject(source, text, "a boolean", bool_accepted);
}

LogLevel log_level_value(std::string_view text, const std::string& source) {
    if (auto level = parse_log_level(trim(text))) return *level;
    reject(source, text, "a log level", log_level_accepted);
}

double timeout_value(std::string_view text, const std::string& source) {
    const std::string_view body = trim(text);
    double number = 0.0;
    const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), number);
    if (ec != std::errc{}) reject(source, text, "a timeout", timeout_accepted);
    const std::string unit = lowercase(trim(body.substr(static_cast<std::size_t>(end - body.data()))));
    double scale = 0.0;
    if (unit.empty() || unit == "s") {
        scale = 1.0;
    } else if (unit == "m") {
        scale = 60.0;
    } else if (unit == "h") {
        scale = 3600.0;
    } else {
        reject(source, text, "a timeout", timeout_accepted);
    }
    const double seconds = number * scale;
    // A zero or infinite timeout would make every collective, or none, a hang.
    if (!std::isfinite(seconds) || !(seconds > 0.0)) reject(source, text, "a usable timeout", timeout_accepted);
    return seconds;
}

std::optional<std::size_t> memory_limit_value(std::string_view text, const std::string& source) {
    const std::string_view body = trim(text);
    if (body.empty() || lowercase(body) == "none") return std::nullopt;
    std::size_t bytes = 0;
    try {
        bytes = parse_bytes(body);
    } catch (const InvalidArgumentError& error) {
        throw ConfigError(source, fmt::format("{}, or 'none' (or empty) for no cap", error.what()));
    }
    // A zero cap does not mean "no cap": it makes every allocation fail, which is never what was meant.
    if (bytes == 0) {
        throw ConfigError(source, fmt::format("'{}' is a cap of 0 bytes, under which every allocation fails; "
                                              "accepted: {}",
                                              text, memory_accepted));
    }
    return bytes;
}

std::uint64_t seed_value(std::string_view text, const std::string& source) {
    const std::string_view body = trim(text);
    std::uint64_t seed = 0;
    const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), seed);
    if (ec != std::errc{} || end != body.data() + body.size()) reject(source, text, "a seed", seed_accepted);
    return seed;
}

int count_value(std::string_view text, const std::string& source, std::string_view what) {
    const std::string_view body = trim(text);
    int count = 0;
    const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), count);
    if (ec != std::errc{} || end != body.data() + body.size() || count <= 0) {
        reject(source, text, what, count_accepted);
    }
    return count;
}

std::string mixed_precision_value(std::string_view text, const std::string& source) {
    std::string mode = lowercase(trim(text));
    if (mode == "no" || mode == "fp16" || mode == "bf16" || mode == "fp8") return mode;
    reject(source, text, "a mixed-precision mode", mixed_precision_accepted);
}

std::string name_value(std::string_view text, const std::string& source, std::string_view what) {
    const std::string_view body = trim(text);
    if (body.empty()) reject(source, text, what, "a non-empty name");
    return std::string(body);
}

// ------------------------------------------------------------------------------ the settings

using ApplyFn = void (*)(Config&, std::string_view text, const std::string& source);

struct Setting {
    std::string_view key;  // the config.yaml key, the sources key and the describe() name
    const char* variable;  // the LOCKSTEP_* variable; nullptr for the launcher keys that only a file sets
    ApplyFn apply;
};

constexpr std::array settings = {
    Setting{"debug", env_names::debug,
            [](Config& c, std::string_view t, const std::string& s) { c.debug = bool_value(t, s); }},
    Setting{"log_level", env_names::log_level,
            [](Config& c, std::string_view t, const std::string& s) { c.log_level = log_level_value(t, s); }},
    Setting{"timeout", env_names::timeout,
            [](Config& c, std::string_view t, const std::string& s) { c.timeout = timeout_value(t, s); }},
    Setting{"cpu_memory_limit", env_names::cpu_memory_limit,
            [](Config& c, std::string_view t, const std::string& s) { c.cpu_memory_limit = memory_limit_value(t, s); }},
    Setting{"seed", env_names::seed,
            [](Config& c, std::string_view t, const std::string& s) { c.seed = seed_value(t, s); }},
    Setting{"num_processes", nullptr,
            [](Config& c, std::string_view t, const std::string& s) {
                c.num_processes = count_value(t, s, "a number of processes");
            }},
    Setting{"num_machines", nullptr,
            [](Config& c, std::string_view t, const std::string& s) {
                c.num_machines = count_value(t, s, "a number of machines");
            }},
    Setting{
        "mixed_precision", nullptr,
        [](Config& c, std::string_view t, const std::string& s) { c.mixed_precision = mixed_precision_value(t, s); }},
    Setting{"compute_environment", nullptr,
            [](Config& c, std::string_view t, const std::string& s) {
                c.compute_environment = name_value(t, s, "a compute environment");
            }},
    Setting{"distributed_type", nullptr,
            [](Config& c, std::string_view t, const std::string& s) {
                c.distributed_type = name_value(t, s, "a distributed type");
            }},
};

// Keys that Accelerate writes (cluster and SageMaker configs, including the legacy fp16 and dynamo_backend) and that
// lockstep has no use for. They are accepted without a warning so that an Accelerate config file can be shared.
// clang-format off
constexpr std::string_view accelerate_unused_keys[] = {
    "use_cpu", "machine_rank", "gpu_ids", "main_process_ip", "main_process_port", "rdzv_backend", "same_network",
    "main_training_function", "enable_cpu_affinity", "downcast_bf16", "fp8_config", "deepspeed_config",
    "fsdp_config", "tp_config", "parallelism_config", "megatron_lm_config", "ipex_config", "mpirun_config",
    "dynamo_config", "dynamo_backend", "fp16", "tpu_name", "tpu_zone", "tpu_use_cluster", "tpu_use_sudo",
    "command_file", "commands", "tpu_vm", "tpu_env", "ec2_instance_type", "iam_role_name", "image_uri", "profile",
    "region", "base_job_name", "pytorch_version", "transformers_version", "py_version", "sagemaker_inputs_file",
    "sagemaker_metrics_file", "additional_args",
};
// clang-format on

const Setting* find_setting(std::string_view key) {
    const auto it = std::find_if(settings.begin(), settings.end(), [&](const Setting& s) { return s.key == key; });
    return it == settings.end() ? nullptr : &*it;
}

bool is_unused_accelerate_key(std::string_view key) {
    return std::find(std::begin(accelerate_unused_keys), std::end(accelerate_unused_keys), key) !=
           std::end(accelerate_unused_keys);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// The known key closest to a misspelt one, if it is close enough to be the likely intent.
std::optional<std::string_view> likely_key(std::string_view unknown) {
    std::optional<std::string_view> best;
    std::size_t best_distance = 3;
    auto consider = [&](std::string_view known) {
        const std::size_t d = edit_distance(unknown, known);
        if (d < best_distance && d < unknown.size()) {
            best_distance = d;
            best = known;
        }
    };
    consider(schema_key);
    for (const auto& s : settings) consider(s.key);
    for (auto key : accelerate_unused_keys) consider(key);
    return best;
}

// ------------------------------------------------------------------------------ config.yaml

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

std::vector<YAML::Node> parse_yaml(const std::string& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) throw ConfigError(path, "the config file does not exist");
    if (std::filesystem::is_directory(status)) throw ConfigError(path, "is a directory, not a YAML config file");
    std::ifstream in(path);
    if (!in) {
        throw ConfigError(path, fmt::format("cannot open the config file: {}",
                                            std::error_code(errno, std::generic_category()).message()));
    }
    try {
        return YAML::LoadAll(in);
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
            throw ConfigError(source, fmt::format("schema version '{}' is newer than this lockstep understands "
                                                  "(version {}); upgrade lockstep to read this file",
                                                  text, schema_version));
        }
        return;
    }
}

void apply_file(const std::string& path, Config& into) {
    const std::vector<YAML::Node> documents = parse_yaml(path);
    into.config_file = path;
    if (documents.size() > 1) {
        throw ConfigError(
            position(path, documents[1].Mark()),
            fmt::format("the file holds {} YAML documents; a config file holds exactly one", documents.size()));
    }
    if (documents.empty() || documents.front().IsNull()) return;  // empty or only comments: nothing set
    const YAML::Node& root = documents.front();
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
                              fmt::format("key '{}' appears twice (first on line {}); keep one", name, it->second));
        }
        if (name == schema_key || is_unused_accelerate_key(name)) continue;
        const Setting* setting = find_setting(name);
        if (setting == nullptr) {
            std::string warning = fmt::format("{}:{}: unknown key '{}' (ignored)", path, line, name);
            if (auto guess = likely_key(name)) warning += fmt::format("; did you mean '{}'?", *guess);
            into.warnings.push_back(std::move(warning));
            continue;
        }
        // A null value has no position of its own in yaml-cpp (it points past the key), so point at the key.
        const std::string source = position(path, value.IsNull() ? key.Mark() : value.Mark());
        if (!value.IsScalar() && !value.IsNull()) {
            throw ConfigError(source, fmt::format("'{}' takes a single value, not a {}", name, kind_name(value)));
        }
        setting->apply(into, value.IsNull() ? std::string_view{} : std::string_view(value.Scalar()), source);
        into.sources[name] = source;
    }
}

// ------------------------------------------------------------------------------ the environment

using VariableSet = std::set<std::string, std::less<>>;

// The launcher forwards its flags as the same variables a user could set, so only its list tells them apart.
std::string variable_source(const char* variable, const VariableSet& launcher) {
    return launcher.contains(variable) ? fmt::format("launcher flag ({})", variable)
                                       : fmt::format("environment {}", variable);
}

// The variables the launcher set from its flags. Each must be present: a listed variable missing here means the
// launcher's forwarding did not reach this rank, which would leave this rank configured unlike the others.
VariableSet launcher_variables(const EnvironmentLookup& env) {
    VariableSet names;
    const auto list = env(env_names::launcher_flags);
    if (!list) return names;
    std::string_view rest = *list;
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string name(trim(rest.substr(0, comma)));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (name.empty()) continue;
        if (!env(name)) {
            throw ConfigError(variable_source(env_names::launcher_flags, {}),
                              fmt::format("'{}' names {}, which is not set in this process; the launcher's "
                                          "variables were not forwarded to this rank",
                                          *list, name));
        }
        names.insert(name);
    }
    return names;
}

struct ConfigFileChoice {
    std::optional<std::string> path;
    std::string source;
    bool explicitly_named = false;
};

ConfigFileChoice choose_config_file(const ConfigOverrides& overrides, const EnvironmentLookup& env,
                                    const VariableSet& launcher) {
    // An empty name, from the API or the variable, asks for no config file at all.
    auto named = [](const std::string& name, std::string source) {
        return ConfigFileChoice{name.empty() ? std::nullopt : std::optional(name), std::move(source), true};
    };
    if (overrides.config_file) return named(*overrides.config_file, api_source);
    if (auto name = env(env_names::config_file)) return named(*name, variable_source(env_names::config_file, launcher));
    // XDG Base Directory: an unset or empty XDG_CONFIG_HOME means ~/.config.
    if (auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
        return {(std::filesystem::path(*xdg) / "lockstep" / "config.yaml").string(), "default", false};
    }
    if (auto home = env("HOME"); home && !home->empty()) {
        return {(std::filesystem::path(*home) / ".config" / "lockstep" / "config.yaml").string(), "default", false};
    }
    return {std::nullopt, "default; neither XDG_CONFIG_HOME nor HOME is set", false};
}

void apply_overrides(const ConfigOverrides& overrides, Config& config) {
    auto& sources = config.sources;
    if (overrides.debug) {
        config.debug = *overrides.debug;
        sources["debug"] = api_source;
    }
    if (overrides.log_level) {
        const auto level = static_cast<int>(*overrides.log_level);
        if (level < static_cast<int>(LogLevel::Debug) || level > static_cast<int>(LogLevel::Critical)) {
            throw ConfigError(api_source, fmt::format("log_level '{}' is not a LogLevel enumerator; accepted: {}",
                                                      level, log_level_accepted));
        }
        config.log_level = *overrides.log_level;
        sources["log_level"] = api_source;
    }
    if (overrides.timeout) {
        const double seconds = *overrides.timeout;
        if (!std::isfinite(seconds) || !(seconds > 0.0)) {
            throw ConfigError(api_source, fmt::format("timeout '{}' is not a usable timeout; accepted: a positive, "
                                                      "finite number of seconds",
                                                      seconds));
        }
        config.timeout = seconds;
        sources["timeout"] = api_source;
    }
    if (overrides.cpu_memory_limit) {
        if (*overrides.cpu_memory_limit == 0) {
            throw ConfigError(api_source,
                              "cpu_memory_limit '0' is a cap of 0 bytes, under which every allocation "
                              "fails; accepted: a positive number of bytes, or no value for no cap");
        }
        config.cpu_memory_limit = overrides.cpu_memory_limit;
        sources["cpu_memory_limit"] = api_source;
    }
    if (overrides.seed) {
        config.seed = *overrides.seed;
        sources["seed"] = api_source;
    }
}

// ------------------------------------------------------------------------------ the process-wide Config

// Every installed Config is kept until exit, so that a reference handed out by config() never dangles even if the
// Runtime installs another one later.
struct InstalledConfigs {
    std::mutex mutex;
    std::forward_list<Config> kept;
    std::atomic<const Config*> current{nullptr};
};

InstalledConfigs& installed_configs() {
    static InstalledConfigs installed;
    return installed;
}

}  // namespace

std::string_view log_level_name(LogLevel level) noexcept {
    switch (level) {
        case LogLevel::Debug:
            return "DEBUG";
        case LogLevel::Info:
            return "INFO";
        case LogLevel::Warning:
            return "WARNING";
        case LogLevel::Error:
            return "ERROR";
        case LogLevel::Critical:
            return "CRITICAL";
    }
    return "UNKNOWN";
}

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
    for (auto level : {LogLevel::Debug, LogLevel::Info, LogLevel::Warning, LogLevel::Error, LogLevel::Critical}) {
        const std::string_view name = log_level_name(level);
        if (text.size() == name.size() && std::equal(text.begin(), text.end(), name.begin(), [](char a, char b) {
                return std::toupper(static_cast<unsigned char>(a)) == b;
            })) {
            return level;
        }
    }
    return std::nullopt;
}

std::optional<bool> parse_bool(std::string_view text) noexcept {
    static constexpr std::pair<std::string_view, bool> spellings[] = {
        {"1", true},   {"0", false},  {"true", true}, {"false", false},
        {"yes", true}, {"no", false}, {"on", true},   {"off", false},
    };
    for (const auto& [spelling, value] : spellings) {
        if (text.size() == spelling.size() &&
            std::equal(text.begin(), text.end(), spelling.begin(),
                       [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; })) {
            return value;
        }
    }
    return std::nullopt;
}

EnvironmentLookup process_environment() {
    return [](const std::string& name) -> std::optional<std::string> {
        if (const char* value = std::getenv(name.c_str())) return std::string(value);
        return std::nullopt;
    };
}

EnvironmentLookup map_environment(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
        if (auto it = vars.find(name); it != vars.end()) return it->second;
        return std::nullopt;
    };
}

void Config::load_file(const std::string& path, Config& into) {
    apply_file(path, into);
    into.sources.try_emplace("config_file", api_source);
}

Config Config::resolve(const ConfigOverrides& overrides, const EnvironmentLookup& env) {
    Config config;
    for (const auto& setting : settings) {
        if (setting.variable != nullptr) config.sources[std::string(setting.key)] = "default";
    }

    const auto launcher = launcher_variables(env);

    const ConfigFileChoice file = choose_config_file(overrides, env, launcher);
    config.sources["config_file"] = file.source;
    if (file.path) {
        std::error_code ec;
        if (std::filesystem::exists(*file.path, ec)) {
            apply_file(*file.path, config);
        } else if (file.explicitly_named) {
            throw ConfigError(file.source, fmt::format("config file '{}' does not exist", *file.path));
        } else {
            config.sources["config_file"] = fmt::format("{}; no file at {}", file.source, *file.path);
        }
    }

    for (const auto& setting : settings) {
        if (setting.variable == nullptr) continue;
        const auto text = env(setting.variable);
        if (!text) continue;
        const std::string source = variable_source(setting.variable, launcher);
        setting.apply(config, *text, source);
        config.sources[std::string(setting.key)] = source;
    }

    apply_overrides(overrides, config);
    return config;
}

std::string Config::describe() const {
    std::vector<std::pair<std::string, std::string>> rows;  // "key: value", key
    auto add = [&](std::string_view key, std::string value) {
        rows.emplace_back(fmt::format("{}: {}", key, value), std::string(key));
    };
    add("debug", debug ? "true" : "false");
    add("log_level", std::string(log_level_name(log_level)));
    add("timeout", fmt::format("{} s", timeout));
    add("cpu_memory_limit", cpu_memory_limit ? format_bytes(*cpu_memory_limit) : "none");
    add("seed", fmt::format("{}", seed));
    if (num_processes) add("num_processes", fmt::format("{}", *num_processes));
    if (num_machines) add("num_machines", fmt::format("{}", *num_machines));
    if (mixed_precision) add("mixed_precision", *mixed_precision);
    if (compute_environment) add("compute_environment", *compute_environment);
    if (distributed_type) add("distributed_type", *distributed_type);
    add("config_file", config_file.value_or("none"));

    std::size_t width = 0;
    for (const auto& row : rows) width = std::max(width, row.first.size());
    std::string out;
    for (const auto& [text, key] : rows) {
        const auto source = sources.find(key);
        out += fmt::format("{:<{}}    ({})\n", text, width, source == sources.end() ? "default" : source->second);
    }
    return out;
}

const Config& config() {
    if (const Config* installed = installed_configs().current.load(std::memory_order_acquire)) return *installed;
    // A throwing initialiser leaves the static uninitialised, so every caller sees the ConfigError, not a half Config.
    static const Config from_environment = Config::resolve();
    return from_environment;
}

namespace detail {
void install_config(Config config) {
    auto& installed = installed_configs();
    const std::lock_guard lock(installed.mutex);
    installed.kept.push_front(std::move(config));
    installed.current.store(&installed.kept.front(), std::memory_order_release);
}
}  // namespace detail

}  // namespace lockstep
