#pragma once
// The table of settings: every setting once, with its key in config.yaml, its LOCKSTEP_* variable, the kind of its
// value, its Config field and, where code may set it, its ConfigOverrides field. The file reader, the environment and
// the API arguments all apply a setting through its row, and describe() shows it from there.

#include <lockstep/config.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lockstep::config_detail {

inline constexpr const char* api_source = "API argument";
// The key of config.yaml that holds its schema version.
inline constexpr std::string_view schema_key = "lockstep";

// One row per setting. A row names the Config field (plain, or optional where unset means something), the kind of its
// value and, where code may set it, the ConfigOverrides field; from that it reads the setting from text, applies an
// API argument and shows it. An optional field whose kind holds plain values is left out of describe() while unset.
struct Setting {
    SettingInfo info;
    void (*apply_text)(Config& config, std::string_view text, const std::string& source);
    bool (*apply_override)(const ConfigOverrides& overrides, Config& config, std::string_view key);  // false: unset
    std::optional<std::string> (*show)(const Config& config);  // nullopt: left out of describe()
};

// Every setting, in describe() order.
[[nodiscard]] std::span<const Setting> settings() noexcept;
// The row of config.yaml's key `key`; nullptr when no setting has that key.
[[nodiscard]] const Setting* find_setting(std::string_view key);
// Whether `key` is one of the keys Accelerate writes that lockstep reads past without a warning.
[[nodiscard]] bool is_unused_accelerate_key(std::string_view key);
// The known key a misspelt one most likely stands for, by the rule the command line's suggestions follow.
[[nodiscard]] std::optional<std::string> likely_key(std::string_view unknown);

}  // namespace lockstep::config_detail
