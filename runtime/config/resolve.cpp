// Resolution of the Config. The layers are applied from the lowest to the highest (default, config.yaml, environment
// or launcher flag, API argument), each overwriting the value and its source, so that the last writer is the one with
// the highest precedence. Every layer goes through one table of settings (settings.hpp): the environment and the file
// read a setting with the same kind of value, so both accept the same spellings and report a bad value in the same
// words, and an API argument is held to the same rules.

#include "file_reader.hpp"
#include "settings.hpp"
#include "values.hpp"

#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <forward_list>
#include <mutex>
#include <set>
#include <system_error>
#include <utility>

namespace lockstep {

namespace {

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
        const std::string name(config_detail::trim(rest.substr(0, comma)));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        if (name.empty()) continue;
        if (!env(name)) {
            throw ConfigError(variable_source(env_names::launcher_flags, {}),
                              fmt::format("{} names {}, which is not set in this process; the launcher's "
                                          "variables were not forwarded to this rank",
                                          detail::quote_value(*list), detail::quote_value(name)));
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
    if (overrides.config_file) return named(*overrides.config_file, config_detail::api_source);
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

Config Config::resolve(const ConfigOverrides& overrides, const EnvironmentLookup& env) {
    Config config;
    for (const auto& setting : config_detail::settings()) {
        if (setting.info.variable != nullptr) config.sources[std::string(setting.info.key)] = "default";
    }

    const auto launcher = launcher_variables(env);

    const ConfigFileChoice file = choose_config_file(overrides, env, launcher);
    config.sources["config_file"] = file.source;
    if (file.path) {
        std::error_code ec;
        if (std::filesystem::exists(*file.path, ec)) {
            config_detail::apply_file(*file.path, config);
        } else if (file.explicitly_named) {
            throw ConfigError(file.source,
                              fmt::format("config file {} does not exist", detail::quote_value(*file.path)));
        } else {
            config.sources["config_file"] = fmt::format("{}; no file at {}", file.source, *file.path);
        }
    }

    for (const auto& setting : config_detail::settings()) {
        if (setting.info.variable == nullptr) continue;
        const auto text = env(setting.info.variable);
        if (!text) continue;
        const std::string source = variable_source(setting.info.variable, launcher);
        setting.apply_text(config, *text, source);
        config.sources[std::string(setting.info.key)] = source;
    }

    for (const auto& setting : config_detail::settings()) {
        if (setting.apply_override(overrides, config, setting.info.key)) {
            config.sources[std::string(setting.info.key)] = config_detail::api_source;
        }
    }
    return config;
}

std::string Config::describe() const {
    std::vector<std::pair<std::string, std::string>> rows;  // "key: value", key
    auto add = [&](std::string_view key, std::string value) {
        rows.emplace_back(fmt::format("{}: {}", key, value), std::string(key));
    };
    for (const auto& setting : config_detail::settings()) {
        if (auto value = setting.show(*this)) add(setting.info.key, std::move(*value));
    }
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

std::string_view on_timeout_name(OnTimeout mode) noexcept {
    return mode == OnTimeout::Raise ? "raise" : "end";
}

std::string_view hang_stacks_name(HangStacks which) noexcept {
    switch (which) {
        case HangStacks::Python:
            return "python";
        case HangStacks::Off:
            return "off";
        case HangStacks::All:
            break;
    }
    return "all";
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
