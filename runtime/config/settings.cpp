#include "settings.hpp"

#include "values.hpp"

#include <lockstep/base/edit_distance.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <type_traits>
#include <vector>

namespace lockstep {

namespace config_detail {

namespace {

template <class Member>
struct member_type;
template <class Class, class T>
struct member_type<T Class::*> {
    using type = T;
};

template <auto field, const auto& kind, auto override_field = nullptr>
constexpr Setting setting(std::string_view key, const char* variable) {
    using Field = typename member_type<decltype(field)>::type;
    using Value = typename std::remove_cvref_t<decltype(kind)>::Value;
    constexpr bool shown_when_unset = std::is_same_v<Field, Value>;
    static_assert(shown_when_unset || std::is_same_v<Field, std::optional<Value>>,
                  "a Config field holds its kind's value, or optionally so");
    Setting row{};
    row.info = SettingInfo{key, variable, kind.accepted};
    row.apply_text = [](Config& config, std::string_view text, const std::string& source) {
        config.*field = parse(kind, text, source);
    };
    if constexpr (std::is_null_pointer_v<decltype(override_field)>) {
        row.apply_override = [](const ConfigOverrides&, Config&, std::string_view) { return false; };
    } else {
        row.apply_override = [](const ConfigOverrides& overrides, Config& config, std::string_view name) {
            const auto& given = overrides.*override_field;
            if (!given) return false;
            const Value value(*given);
            if (kind.refuse != nullptr) {
                if (auto why = kind.refuse(value)) {
                    throw ConfigError(api_source,
                                      fmt::format("{} {} {}; accepted: {}", name, detail::quote_value(kind.show(value)),
                                                  *why, kind.accepted));
                }
            }
            config.*field = value;
            return true;
        };
    }
    row.show = [](const Config& config) -> std::optional<std::string> {
        if constexpr (shown_when_unset) {
            return kind.show(config.*field);
        } else {
            const auto& value = config.*field;
            if (!value) return std::nullopt;
            return kind.show(*value);
        }
    };
    return row;
}

// In describe() order. The launcher keys come from Accelerate-style config files only.
constexpr std::array table = {
    setting<&Config::debug, boolean_kind, &ConfigOverrides::debug>("debug", env_names::debug),
    setting<&Config::log_level, log_level_kind, &ConfigOverrides::log_level>("log_level", env_names::log_level),
    setting<&Config::timeout, timeout_kind, &ConfigOverrides::timeout>("timeout", env_names::timeout),
    setting<&Config::cpu_memory_limit, memory_limit_kind, &ConfigOverrides::cpu_memory_limit>(
        "cpu_memory_limit", env_names::cpu_memory_limit),
    setting<&Config::seed, seed_kind, &ConfigOverrides::seed>("seed", env_names::seed),
    setting<&Config::cuda_aware, cuda_aware_kind, &ConfigOverrides::cuda_aware>("cuda_aware", env_names::cuda_aware),
    setting<&Config::staging_chunk_bytes, staging_chunk_kind, &ConfigOverrides::staging_chunk_bytes>(
        "staging_chunk_bytes", env_names::staging_chunk_bytes),
    setting<&Config::watchdog_host, watchdog_host_kind, &ConfigOverrides::watchdog_host>("watchdog_host",
                                                                                         env_names::watchdog_host),
    setting<&Config::trace_file, trace_file_kind, &ConfigOverrides::trace_file>("trace_file", env_names::trace_file),
    setting<&Config::trace_dir, trace_dir_kind, &ConfigOverrides::trace_dir>("trace_dir", env_names::trace_dir),
    setting<&Config::shm, shm_mode_kind, &ConfigOverrides::shm>("shm", env_names::shm),
    setting<&Config::shm_arena_size, arena_size_kind, &ConfigOverrides::shm_arena_size>("shm_arena_size",
                                                                                        env_names::shm_arena_size),
    setting<&Config::shm_threshold, shm_threshold_kind, &ConfigOverrides::shm_threshold>("shm_threshold",
                                                                                         env_names::shm_threshold),
    setting<&Config::shm_small_max, shm_small_max_kind, &ConfigOverrides::shm_small_max>("shm_small_max",
                                                                                         env_names::shm_small_max),
    setting<&Config::progress_thread, boolean_kind, &ConfigOverrides::progress_thread>("progress_thread",
                                                                                       env_names::progress_thread),
    setting<&Config::mpi_thread_level, thread_level_kind, &ConfigOverrides::mpi_thread_level>(
        "mpi_thread_level", env_names::mpi_thread_level),
    setting<&Config::on_timeout, on_timeout_kind, &ConfigOverrides::on_timeout>("on_timeout", env_names::on_timeout),
    setting<&Config::trace_calls, trace_calls_kind, &ConfigOverrides::trace_calls>("trace_calls",
                                                                                   env_names::trace_calls),
    setting<&Config::hang_stacks, hang_stacks_kind, &ConfigOverrides::hang_stacks>("hang_stacks",
                                                                                   env_names::hang_stacks),
    setting<&Config::num_processes, process_count_kind>("num_processes", nullptr),
    setting<&Config::num_machines, machine_count_kind>("num_machines", nullptr),
    setting<&Config::mixed_precision, mixed_precision_kind>("mixed_precision", nullptr),
    setting<&Config::compute_environment, compute_environment_kind>("compute_environment", nullptr),
    setting<&Config::distributed_type, distributed_type_kind>("distributed_type", nullptr),
};

constexpr auto setting_infos = [] {
    std::array<SettingInfo, table.size()> infos{};
    for (std::size_t i = 0; i < table.size(); ++i) infos[i] = table[i].info;
    return infos;
}();

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

}  // namespace

std::span<const Setting> settings() noexcept {
    return table;
}

const Setting* find_setting(std::string_view key) {
    const auto it = std::find_if(table.begin(), table.end(), [&](const Setting& s) { return s.info.key == key; });
    return it == table.end() ? nullptr : &*it;
}

bool is_unused_accelerate_key(std::string_view key) {
    return std::find(std::begin(accelerate_unused_keys), std::end(accelerate_unused_keys), key) !=
           std::end(accelerate_unused_keys);
}

std::optional<std::string> likely_key(std::string_view unknown) {
    std::vector<std::string> known{std::string(schema_key)};
    for (const auto& s : table) known.emplace_back(s.info.key);
    for (auto key : accelerate_unused_keys) known.emplace_back(key);
    return base::nearest(unknown, known);
}

}  // namespace config_detail

std::span<const SettingInfo> config_settings() noexcept {
    return config_detail::setting_infos;
}

}  // namespace lockstep
