// Resolution of the Config. The layers are applied from the lowest to the highest (default, config.yaml, environment
// or launcher flag, API argument), each overwriting the value and its source, so that the last writer is the one with
// the highest precedence. Every layer goes through one table of settings (below): the environment and the file read
// a setting with the same kind of value, so both accept the same spellings and report a bad value in the same words,
// and an API argument is held to the same rules.

#include <lockstep/base/byte_size.hpp>
#include <lockstep/base/edit_distance.hpp>
#include <lockstep/base/escape.hpp>
#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>
#include <yaml-cpp/eventhandler.h>
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
#include <sstream>
#include <system_error>
#include <type_traits>
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

// ------------------------------------------------------------------------------ one kind per type of value

// How one type of value is read from text (the environment, config.yaml), checked and shown. `read` judges the
// spelling; `refuse` says why a well-spelt value cannot be used, and judges API arguments too, so that code cannot set
// what text may not.
template <class T>
struct Kind {
    using Value = T;
    std::string_view what;                                 // completes "'x' is not ..."
    std::string_view accepted;                             // completes "accepted: ..."
    bool (*read)(std::string_view trimmed, T& value);      // false: not a spelling of this kind
    std::optional<std::string> (*refuse)(const T& value);  // completes "'x' ..."; nullptr: every value is usable
    std::string (*show)(const T& value);                   // the describe() form
};

[[noreturn]] void reject(const std::string& source, std::string_view text, std::string_view what,
                         std::string_view accepted) {
    throw ConfigError(source, fmt::format("{} is not {}; accepted: {}", detail::quote_value(text), what, accepted));
}

template <class T>
T parse(const Kind<T>& kind, std::string_view text, const std::string& source) {
    T value{};
    if (!kind.read(trim(text), value)) reject(source, text, kind.what, kind.accepted);
    if (kind.refuse != nullptr) {
        if (auto why = kind.refuse(value)) {
            throw ConfigError(source,
                              fmt::format("{} {}; accepted: {}", detail::quote_value(text), *why, kind.accepted));
        }
    }
    return value;
}

template <class T>
bool read_integer(std::string_view text, T& value) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc{} && end == text.data() + text.size();
}

template <class T>
std::string show_number(const T& value) {
    return fmt::format("{}", value);
}

bool equals_lowercase(std::string_view text, std::string_view word) {
    return lowercase(text) == word;
}

// --- booleans

bool read_bool(std::string_view text, bool& value) {
    const auto parsed = parse_bool(text);
    value = parsed.value_or(false);
    return parsed.has_value();
}

std::string show_bool(const bool& value) {
    return value ? "true" : "false";
}

constexpr Kind<bool> boolean_kind{"a boolean", "1/0, true/false, yes/no or on/off, in any case", read_bool, nullptr,
                                  show_bool};

// --- log levels

bool read_log_level(std::string_view text, LogLevel& level) {
    const auto parsed = parse_log_level(text);
    level = parsed.value_or(LogLevel::Warning);
    return parsed.has_value();
}

bool is_enumerator(LogLevel level) {
    return level >= LogLevel::Debug && level <= LogLevel::Critical;
}

// Only a cast in code can make a LogLevel that is none of its enumerators.
std::optional<std::string> refuse_log_level(const LogLevel& level) {
    if (is_enumerator(level)) return std::nullopt;
    return std::string("is not a LogLevel enumerator");
}

std::string show_log_level(const LogLevel& level) {
    return is_enumerator(level) ? std::string(log_level_name(level)) : fmt::format("{}", static_cast<int>(level));
}

constexpr Kind<LogLevel> log_level_kind{"a log level", "DEBUG, INFO, WARNING, ERROR or CRITICAL, in any case",
                                        read_log_level, refuse_log_level, show_log_level};

// --- the timeout: 0 is "no watchdog", as it is for CommunicatorOptions::timeout

bool read_timeout(std::string_view text, double& seconds) {
    if (equals_lowercase(text, "off") || equals_lowercase(text, "none")) {
        seconds = 0.0;
        return true;
    }
    double number = 0.0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (ec != std::errc{}) return false;
    const std::string unit = lowercase(trim(text.substr(static_cast<std::size_t>(end - text.data()))));
    static constexpr std::pair<std::string_view, double> units[] = {{"", 1.0}, {"s", 1.0}, {"m", 60.0}, {"h", 3600.0}};
    for (const auto& [name, scale] : units) {
        if (unit == name) {
            seconds = number * scale;
            return true;
        }
    }
    return false;
}

// An infinite timeout would claim to watch and never report; a negative one would report every call.
std::optional<std::string> refuse_timeout(const double& seconds) {
    if (std::isfinite(seconds) && seconds >= 0.0) return std::nullopt;
    return std::string("is not a usable timeout");
}

std::string show_timeout(const double& seconds) {
    return seconds == 0.0 ? std::string("off") : fmt::format("{} s", seconds);
}

constexpr Kind<double> timeout_kind{
    "a timeout",
    "a positive number of seconds, optionally with the unit s, m (minutes) or h, e.g. 30, 90s, 1.5m, 2h; "
    "or 0 (also off or none) for no hang watchdog",
    read_timeout, refuse_timeout, show_timeout};

// --- sizes in bytes

bool read_bytes(std::string_view text, std::size_t& bytes) {
    const auto parsed = base::parse_bytes(text);
    bytes = parsed.value_or(0);
    return parsed.has_value();
}

// The human form where it reads back as the same count, else the exact count: describe() and the messages print
// sizes that a user copies into a variable or a file, so every one of them must parse as what was printed.
std::string show_bytes(const std::size_t& bytes) {
    std::string human = base::format_bytes(bytes);
    std::size_t read_back = 0;
    if (read_bytes(human, read_back) && read_back == bytes) return human;
    return fmt::format("{} B", bytes);
}

bool read_memory_limit(std::string_view text, std::optional<std::size_t>& cap) {
    if (text.empty() || equals_lowercase(text, "none")) {
        cap.reset();
        return true;
    }
    std::size_t bytes = 0;
    if (!read_bytes(text, bytes)) return false;
    cap = bytes;
    return true;
}

// A zero cap does not mean "no cap": it makes every allocation fail, which is never what was meant.
std::optional<std::string> refuse_memory_limit(const std::optional<std::size_t>& cap) {
    if (cap != std::size_t{0}) return std::nullopt;
    return std::string("is a cap of 0 bytes, under which every allocation fails");
}

std::string show_memory_limit(const std::optional<std::size_t>& cap) {
    return cap ? show_bytes(*cap) : std::string("none");
}

constexpr Kind<std::optional<std::size_t>> memory_limit_kind{
    "a memory size",
    "a positive size such as 512MiB, 2GiB, 1.5GB or a plain number of bytes, or 'none' (or empty) for no cap",
    read_memory_limit, refuse_memory_limit, show_memory_limit};

// Chunks smaller than a page only multiply the copies and the messages.
constexpr std::size_t smallest_staging_chunk = 4096;

std::optional<std::string> refuse_staging_chunk(const std::size_t& bytes) {
    if (bytes >= smallest_staging_chunk) return std::nullopt;
    return fmt::format("is smaller than the smallest chunk, {} bytes", smallest_staging_chunk);
}

constexpr Kind<std::size_t> staging_chunk_kind{"a chunk size",
                                               "a size of at least 4KiB such as 64KiB, 4MiB or a plain number of bytes",
                                               read_bytes, refuse_staging_chunk, show_bytes};

// --- numbers

constexpr Kind<std::uint64_t> seed_kind{"a seed", "an unsigned 64-bit integer, 0 to 18446744073709551615",
                                        read_integer<std::uint64_t>, nullptr, show_number<std::uint64_t>};

std::optional<std::string> refuse_non_positive(const int& count) {
    if (count > 0) return std::nullopt;
    return std::string("is not positive");
}

constexpr Kind<int> process_count_kind{"a number of processes", "a positive integer", read_integer<int>,
                                       refuse_non_positive, show_number<int>};
constexpr Kind<int> machine_count_kind{"a number of machines", "a positive integer", read_integer<int>,
                                       refuse_non_positive, show_number<int>};

// --- names

bool read_mixed_precision(std::string_view text, std::string& mode) {
    mode = lowercase(text);
    return mode == "no" || mode == "fp16" || mode == "bf16" || mode == "fp8";
}

bool read_name(std::string_view text, std::string& name) {
    name = std::string(text);
    return !name.empty();
}

std::string show_text(const std::string& text) {
    return text;
}

constexpr Kind<std::string> mixed_precision_kind{"a mixed-precision mode", "no, fp16, bf16 or fp8",
                                                 read_mixed_precision, nullptr, show_text};
constexpr Kind<std::string> compute_environment_kind{"a compute environment", "a non-empty name", read_name, nullptr,
                                                     show_text};
constexpr Kind<std::string> distributed_type_kind{"a distributed type", "a non-empty name", read_name, nullptr,
                                                  show_text};

// --- whether MPI is CUDA-aware: unset asks MPI at run time, a value overrides what MPI says of itself

bool read_cuda_aware(std::string_view text, std::optional<bool>& aware) {
    if (equals_lowercase(text, "auto")) {
        aware.reset();
        return true;
    }
    aware = parse_bool(text);
    return aware.has_value();
}

std::string show_cuda_aware(const std::optional<bool>& aware) {
    return aware ? show_bool(*aware) : std::string("auto");
}

constexpr Kind<std::optional<bool>> cuda_aware_kind{
    "a boolean or 'auto'", "1/0, true/false, yes/no or on/off, in any case, or auto to ask MPI", read_cuda_aware,
    nullptr, show_cuda_aware};

// --- the address the watchdog publishes

// The watchdog's endpoint record holds 63 characters of host, and its listener is IPv4.
constexpr std::size_t longest_watchdog_host = 63;

bool read_watchdog_host(std::string_view text, std::optional<std::string>& host) {
    host = text.empty() ? std::nullopt : std::optional<std::string>(text);
    return true;
}

std::optional<std::string> refuse_watchdog_host(const std::optional<std::string>& host) {
    if (!host) return std::nullopt;
    if (host->empty()) return std::string("is empty; leave the setting unset for the default");
    if (host->size() > longest_watchdog_host) return fmt::format("is longer than {} characters", longest_watchdog_host);
    const auto allowed = [](unsigned char c) { return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.'; };
    if (!std::all_of(host->begin(), host->end(), allowed) || host->front() == '-' || host->front() == '.') {
        return std::string("is not a host name or IPv4 address");
    }
    return std::nullopt;
}

std::string show_watchdog_host(const std::optional<std::string>& host) {
    return host.value_or("auto");
}

constexpr Kind<std::optional<std::string>> watchdog_host_kind{
    "a host name or IPv4 address",
    "a host name or IPv4 address of at most 63 letters, digits, '-', '_' and '.', or empty for the default "
    "(127.0.0.1 on one node, else the host name)",
    read_watchdog_host, refuse_watchdog_host, show_watchdog_host};

// --- the shared-memory arena

bool read_shm_mode(std::string_view text, ShmMode& mode) {
    if (equals_lowercase(text, "auto")) {
        mode = ShmMode::Auto;
        return true;
    }
    const auto on = parse_bool(text);
    if (!on) return false;
    mode = *on ? ShmMode::On : ShmMode::Off;
    return true;
}

std::string show_shm_mode(const ShmMode& mode) {
    return std::string(shm_mode_name(mode));
}

constexpr Kind<ShmMode> shm_mode_kind{
    "a shared-memory mode",
    "auto (the arena when two or more processes share a node), on (also for a process alone on its node) or off; "
    "on/off also as 1/0, true/false, yes/no",
    read_shm_mode, nullptr, show_shm_mode};

bool read_arena_size(std::string_view text, std::optional<std::size_t>& bytes) {
    if (text.empty() || equals_lowercase(text, "auto")) {
        bytes.reset();
        return true;
    }
    std::size_t value = 0;
    if (!read_bytes(text, value)) return false;
    bytes = value;
    return true;
}

std::optional<std::string> refuse_arena_size(const std::optional<std::size_t>& bytes) {
    if (bytes != std::size_t{0}) return std::nullopt;
    return std::string("is an arena of 0 bytes; use shm: off for none");
}

std::string show_arena_size(const std::optional<std::size_t>& bytes) {
    return bytes ? show_bytes(*bytes) : std::string("auto");
}

constexpr Kind<std::optional<std::size_t>> arena_size_kind{
    "an arena size",
    "a positive size per process such as 512MiB or 4GiB (rounded up to 2 MiB), or auto (half of /dev/shm's free "
    "space shared among the node's processes, at most 16 GiB each)",
    read_arena_size, refuse_arena_size, show_arena_size};

constexpr Kind<std::size_t> shm_threshold_kind{
    "a threshold size", "a size such as 64KiB or 1MiB, or a plain number of bytes (0: every host block)", read_bytes,
    nullptr, show_bytes};

// ------------------------------------------------------------------------------ the settings

// One row per setting. A row names the Config field (plain, or optional where unset means something), the kind of its
// value and, where code may set it, the ConfigOverrides field; from that it reads the setting from text, applies an
// API argument and shows it. An optional field whose kind holds plain values is left out of describe() while unset.
struct Setting {
    SettingInfo info;
    void (*apply_text)(Config& config, std::string_view text, const std::string& source);
    bool (*apply_override)(const ConfigOverrides& overrides, Config& config, std::string_view key);  // false: unset
    std::optional<std::string> (*show)(const Config& config);  // nullopt: left out of describe()
};

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
constexpr std::array settings = {
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
    setting<&Config::shm, shm_mode_kind, &ConfigOverrides::shm>("shm", env_names::shm),
    setting<&Config::shm_arena_size, arena_size_kind, &ConfigOverrides::shm_arena_size>("shm_arena_size",
                                                                                        env_names::shm_arena_size),
    setting<&Config::shm_threshold, shm_threshold_kind, &ConfigOverrides::shm_threshold>("shm_threshold",
                                                                                         env_names::shm_threshold),
    setting<&Config::num_processes, process_count_kind>("num_processes", nullptr),
    setting<&Config::num_machines, machine_count_kind>("num_machines", nullptr),
    setting<&Config::mixed_precision, mixed_precision_kind>("mixed_precision", nullptr),
    setting<&Config::compute_environment, compute_environment_kind>("compute_environment", nullptr),
    setting<&Config::distributed_type, distributed_type_kind>("distributed_type", nullptr),
};

constexpr auto setting_infos = [] {
    std::array<SettingInfo, settings.size()> infos{};
    for (std::size_t i = 0; i < settings.size(); ++i) infos[i] = settings[i].info;
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

const Setting* find_setting(std::string_view key) {
    const auto it = std::find_if(settings.begin(), settings.end(), [&](const Setting& s) { return s.info.key == key; });
    return it == settings.end() ? nullptr : &*it;
}

bool is_unused_accelerate_key(std::string_view key) {
    return std::find(std::begin(accelerate_unused_keys), std::end(accelerate_unused_keys), key) !=
           std::end(accelerate_unused_keys);
}

// The known key a misspelt one most likely stands for, by the rule the command line's suggestions follow.
std::optional<std::string> likely_key(std::string_view unknown) {
    std::vector<std::string> known{std::string(schema_key)};
    for (const auto& s : settings) known.emplace_back(s.info.key);
    for (auto key : accelerate_unused_keys) known.emplace_back(key);
    return base::nearest(unknown, known);
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

std::span<const SettingInfo> config_settings() noexcept {
    return setting_infos;
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
        if (setting.info.variable != nullptr) config.sources[std::string(setting.info.key)] = "default";
    }

    const auto launcher = launcher_variables(env);

    const ConfigFileChoice file = choose_config_file(overrides, env, launcher);
    config.sources["config_file"] = file.source;
    if (file.path) {
        std::error_code ec;
        if (std::filesystem::exists(*file.path, ec)) {
            apply_file(*file.path, config);
        } else if (file.explicitly_named) {
            throw ConfigError(file.source,
                              fmt::format("config file {} does not exist", detail::quote_value(*file.path)));
        } else {
            config.sources["config_file"] = fmt::format("{}; no file at {}", file.source, *file.path);
        }
    }

    for (const auto& setting : settings) {
        if (setting.info.variable == nullptr) continue;
        const auto text = env(setting.info.variable);
        if (!text) continue;
        const std::string source = variable_source(setting.info.variable, launcher);
        setting.apply_text(config, *text, source);
        config.sources[std::string(setting.info.key)] = source;
    }

    for (const auto& setting : settings) {
        if (setting.apply_override(overrides, config, setting.info.key)) {
            config.sources[std::string(setting.info.key)] = api_source;
        }
    }
    return config;
}

std::string Config::describe() const {
    std::vector<std::pair<std::string, std::string>> rows;  // "key: value", key
    auto add = [&](std::string_view key, std::string value) {
        rows.emplace_back(fmt::format("{}: {}", key, value), std::string(key));
    };
    for (const auto& setting : settings) {
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

namespace detail {
std::string quote_value(std::string_view text) {
    return base::quote_value(text);
}

void install_config(Config config) {
    auto& installed = installed_configs();
    const std::lock_guard lock(installed.mutex);
    installed.kept.push_front(std::move(config));
    installed.current.store(&installed.kept.front(), std::memory_order_release);
}
}  // namespace detail

}  // namespace lockstep
