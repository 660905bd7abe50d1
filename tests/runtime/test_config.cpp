#define BOOST_TEST_MODULE config
// GCC 12 at -O3 reports a false -Wrestrict inside std::string concatenation inlined into Boost.Test's naming of
// data-driven test cases (GCC bug 105329); nothing in this file is involved.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>    // kill
#include <stdlib.h>    // mkdtemp, setenv, unsetenv
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // fork, _exit, sysconf

namespace bdata = boost::unit_test::data;
namespace fs = std::filesystem;
using lockstep::Config;
using lockstep::ConfigError;
using lockstep::ConfigOverrides;
using lockstep::LogLevel;
namespace env_names = lockstep::env_names;

namespace {

// A scratch directory under the system temp dir, removed with everything in it when the test ends.
class TempDir {
public:
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "lockstep-config-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    // Writes `content` to `relative` (creating folders) and returns the file's path.
    std::string write(const std::string& relative, const std::string& content) const {
        const fs::path file = path_ / relative;
        fs::create_directories(file.parent_path());
        std::ofstream out(file, std::ios::binary);
        out << content;
        if (!out) throw std::runtime_error("cannot write " + file.string());
        return file.string();
    }
    [[nodiscard]] std::string str(const std::string& relative = {}) const { return (path_ / relative).string(); }

private:
    fs::path path_;
};

Config resolve(std::map<std::string, std::string> env, const ConfigOverrides& overrides = {}) {
    return Config::resolve(overrides, lockstep::map_environment(std::move(env)));
}

// Runs `resolution` and returns the ConfigError it throws; fails the test if it throws none.
template <class F>
ConfigError config_error(F&& resolution) {
    std::optional<ConfigError> caught;
    try {
        resolution();
    } catch (const ConfigError& error) {
        caught = error;
    }
    BOOST_REQUIRE_MESSAGE(caught.has_value(), "expected a ConfigError, none was thrown");
    return *caught;
}

ConfigError resolve_error(std::map<std::string, std::string> env, const ConfigOverrides& overrides = {}) {
    return config_error([&] { (void)resolve(env, overrides); });
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

std::string level_name(std::optional<LogLevel> level) {
    return level ? std::string(lockstep::log_level_name(*level)) : std::string("none");
}

std::string launcher_label(const std::string& variable) {
    return "launcher flag (" + variable + ")";
}
std::string environment_label(const std::string& variable) {
    return "environment " + variable;
}

// ------------------------------------------------------------------------------ the precedence matrix

// One setting written at every layer, each value different from the one below it, so the winner is visible.
struct Field {
    std::string key;
    std::string variable;
    std::string (*value)(const Config&);  // the resolved value, rendered for comparison
    std::string default_value;
    std::string file_text, file_value;
    std::string env_text, env_value;
    std::string launcher_text, launcher_value;
    void (*set_override)(ConfigOverrides&);
    std::string override_value;
};

std::ostream& operator<<(std::ostream& os, const Field& field) {
    return os << field.key;
}

// clang-format off
const std::vector<Field> fields = {
    {.key = "debug", .variable = env_names::debug,
     .value = [](const Config& c) -> std::string { return c.debug ? "true" : "false"; },
     .default_value = "false",
     .file_text = "yes", .file_value = "true",
     .env_text = "off", .env_value = "false",
     .launcher_text = "ON", .launcher_value = "true",
     .set_override = [](ConfigOverrides& o) { o.debug = false; }, .override_value = "false"},
    {.key = "log_level", .variable = env_names::log_level,
     .value = [](const Config& c) { return std::string(lockstep::log_level_name(c.log_level)); },
     .default_value = "WARNING",
     .file_text = "info", .file_value = "INFO",
     .env_text = "Error", .env_value = "ERROR",
     .launcher_text = "debug", .launcher_value = "DEBUG",
     .set_override = [](ConfigOverrides& o) { o.log_level = LogLevel::Critical; }, .override_value = "CRITICAL"},
    {.key = "timeout", .variable = env_names::timeout,
     .value = [](const Config& c) { return fmt::format("{}", c.timeout); },
     .default_value = "600",
     .file_text = "45", .file_value = "45",
     .env_text = "2m", .env_value = "120",
     .launcher_text = "1.5h", .launcher_value = "5400",
     .set_override = [](ConfigOverrides& o) { o.timeout = 7.25; }, .override_value = "7.25"},
    {.key = "cpu_memory_limit", .variable = env_names::cpu_memory_limit,
     .value = [](const Config& c) {
         return c.cpu_memory_limit ? std::to_string(*c.cpu_memory_limit) : std::string("none");
     },
     .default_value = "none",
     .file_text = "512MiB", .file_value = "536870912",
     .env_text = "1GiB", .env_value = "1073741824",
     .launcher_text = "64k", .launcher_value = "65536",
     .set_override = [](ConfigOverrides& o) { o.cpu_memory_limit = 4096; }, .override_value = "4096"},
    {.key = "seed", .variable = env_names::seed,
     .value = [](const Config& c) { return std::to_string(c.seed); },
     .default_value = "0",
     .file_text = "1234", .file_value = "1234",
     .env_text = "18446744073709551615", .env_value = "18446744073709551615",
     .launcher_text = "7", .launcher_value = "7",
     .set_override = [](ConfigOverrides& o) { o.seed = 99; }, .override_value = "99"},
    {.key = "cuda_aware", .variable = env_names::cuda_aware,
     .value = [](const Config& c) -> std::string {
         return c.cuda_aware ? (*c.cuda_aware ? "true" : "false") : "auto";
     },
     .default_value = "auto",
     .file_text = "yes", .file_value = "true",
     .env_text = "off", .env_value = "false",
     .launcher_text = "Auto", .launcher_value = "auto",
     .set_override = [](ConfigOverrides& o) { o.cuda_aware = true; }, .override_value = "true"},
    {.key = "staging_chunk_bytes", .variable = env_names::staging_chunk_bytes,
     .value = [](const Config& c) { return std::to_string(c.staging_chunk_bytes); },
     .default_value = "4194304",
     .file_text = "64KiB", .file_value = "65536",
     .env_text = "1MiB", .env_value = "1048576",
     .launcher_text = "8192", .launcher_value = "8192",
     .set_override = [](ConfigOverrides& o) { o.staging_chunk_bytes = 16384; }, .override_value = "16384"},
    {.key = "watchdog_host", .variable = env_names::watchdog_host,
     .value = [](const Config& c) { return c.watchdog_host.value_or("auto"); },
     .default_value = "auto",
     .file_text = "node7.cluster", .file_value = "node7.cluster",
     .env_text = "10.0.0.5", .env_value = "10.0.0.5",
     .launcher_text = "127.0.0.1", .launcher_value = "127.0.0.1",
     .set_override = [](ConfigOverrides& o) { o.watchdog_host = "head-node"; }, .override_value = "head-node"},
    {.key = "trace_file", .variable = env_names::trace_file,
     .value = [](const Config& c) { return c.trace_file.value_or("none"); },
     .default_value = "none",
     .file_text = "/data/run.json", .file_value = "/data/run.json",
     .env_text = "trace.json", .env_value = "trace.json",
     .launcher_text = "/abs/t.json", .launcher_value = "/abs/t.json",
     .set_override = [](ConfigOverrides& o) { o.trace_file = "api.json"; }, .override_value = "api.json"},
    {.key = "trace_dir", .variable = env_names::trace_dir,
     .value = [](const Config& c) { return c.trace_dir.value_or("."); },
     .default_value = ".",
     .file_text = "/scratch/traces", .file_value = "/scratch/traces",
     .env_text = "traces", .env_value = "traces",
     .launcher_text = "/tmp/t", .launcher_value = "/tmp/t",
     .set_override = [](ConfigOverrides& o) { o.trace_dir = "api-dir"; }, .override_value = "api-dir"},
    {.key = "shm", .variable = env_names::shm,
     .value = [](const Config& c) { return std::string(lockstep::shm_mode_name(c.shm)); },
     .default_value = "auto",
     .file_text = "off", .file_value = "off",
     .env_text = "YES", .env_value = "on",
     .launcher_text = "Auto", .launcher_value = "auto",
     .set_override = [](ConfigOverrides& o) { o.shm = lockstep::ShmMode::Off; }, .override_value = "off"},
    {.key = "shm_arena_size", .variable = env_names::shm_arena_size,
     .value = [](const Config& c) {
         return c.shm_arena_size ? std::to_string(*c.shm_arena_size) : std::string("auto");
     },
     .default_value = "auto",
     .file_text = "1GiB", .file_value = "1073741824",
     .env_text = "auto", .env_value = "auto",
     .launcher_text = "256MiB", .launcher_value = "268435456",
     .set_override = [](ConfigOverrides& o) { o.shm_arena_size = std::size_t{64} << 20; },
     .override_value = "67108864"},
    {.key = "shm_threshold", .variable = env_names::shm_threshold,
     .value = [](const Config& c) { return std::to_string(c.shm_threshold); },
     .default_value = "65536",
     .file_text = "1MiB", .file_value = "1048576",
     .env_text = "0", .env_value = "0",
     .launcher_text = "4k", .launcher_value = "4096",
     .set_override = [](ConfigOverrides& o) { o.shm_threshold = 512; }, .override_value = "512"},
    {.key = "shm_small_max", .variable = env_names::shm_small_max,
     .value = [](const Config& c) { return std::to_string(c.shm_small_max); },
     .default_value = "32768",
     .file_text = "8KiB", .file_value = "8192",
     .env_text = "0", .env_value = "0",
     .launcher_text = "2k", .launcher_value = "2048",
     .set_override = [](ConfigOverrides& o) { o.shm_small_max = 100; }, .override_value = "100"},
    {.key = "trace_calls", .variable = env_names::trace_calls,
     .value = [](const Config& c) { return std::to_string(c.trace_calls); },
     .default_value = "2048",
     .file_text = "4096", .file_value = "4096",
     .env_text = "0", .env_value = "0",
     .launcher_text = " 16 ", .launcher_value = "16",
     .set_override = [](ConfigOverrides& o) { o.trace_calls = 100; }, .override_value = "100"},
    {.key = "mpi_thread_level", .variable = env_names::mpi_thread_level,
     .value = [](const Config& c) { return std::string(lockstep::thread_level_name(c.mpi_thread_level)); },
     .default_value = "multiple",
     .file_text = "serialized", .file_value = "serialized",
     .env_text = "MPI_THREAD_SINGLE", .env_value = "single",
     .launcher_text = "Funneled", .launcher_value = "funneled",
     .set_override = [](ConfigOverrides& o) { o.mpi_thread_level = lockstep::ThreadLevel::Single; }, .override_value = "single"},
    {.key = "progress_thread", .variable = env_names::progress_thread,
     .value = [](const Config& c) -> std::string { return c.progress_thread ? "true" : "false"; },
     .default_value = "true",
     .file_text = "off", .file_value = "false",
     .env_text = "0", .env_value = "false",
     .launcher_text = "yes", .launcher_value = "true",
     .set_override = [](ConfigOverrides& o) { o.progress_thread = false; }, .override_value = "false"},
    {.key = "on_timeout", .variable = env_names::on_timeout,
     .value = [](const Config& c) { return std::string(lockstep::on_timeout_name(c.on_timeout)); },
     .default_value = "end",
     .file_text = "raise", .file_value = "raise",
     .env_text = "RAISE", .env_value = "raise",
     .launcher_text = "End", .launcher_value = "end",
     .set_override = [](ConfigOverrides& o) { o.on_timeout = lockstep::OnTimeout::Raise; }, .override_value = "raise"},
    {.key = "hang_stacks", .variable = env_names::hang_stacks,
     .value = [](const Config& c) { return std::string(lockstep::hang_stacks_name(c.hang_stacks)); },
     .default_value = "all",
     .file_text = "python", .file_value = "python",
     .env_text = "OFF", .env_value = "off",
     .launcher_text = "All", .launcher_value = "all",
     .set_override = [](ConfigOverrides& o) { o.hang_stacks = lockstep::HangStacks::Python; }, .override_value = "python"},
};
// clang-format on

// The table in config.cpp and this matrix list the same settings, so that a new setting cannot skip these tests.
BOOST_AUTO_TEST_CASE(every_setting_with_a_variable_is_in_the_matrix) {
    std::vector<std::string> table_keys;
    for (const auto& setting : lockstep::config_settings()) {
        BOOST_TEST(std::count_if(lockstep::config_settings().begin(), lockstep::config_settings().end(),
                                 [&](const lockstep::SettingInfo& other) { return other.key == setting.key; }) == 1,
                   setting.key);
        BOOST_TEST(!setting.accepted.empty(), setting.key);
        if (setting.variable == nullptr) continue;
        table_keys.emplace_back(setting.key);
        const auto field =
            std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == setting.key; });
        BOOST_REQUIRE_MESSAGE(field != fields.end(), "no row of the precedence matrix for " << setting.key);
        BOOST_TEST(field->variable == setting.variable);
    }
    BOOST_TEST(table_keys.size() == fields.size());
}

// The file holds the field on its second line, after an unrelated key, so that the reported line is checked too.
std::string field_file(const TempDir& dir, const Field& field) {
    const std::string other = field.key == "seed" ? "debug: false\n" : "seed: 5\n";
    return dir.write("config.yaml", other + field.key + ": " + field.file_text + "\n");
}

std::string value_position(const std::string& path, const Field& field) {
    return fmt::format("{}:2:{}", path, field.key.size() + 3);
}

BOOST_AUTO_TEST_SUITE(precedence)

BOOST_DATA_TEST_CASE(default_only, bdata::make(fields), field) {
    const Config config = resolve({});
    BOOST_TEST(field.value(config) == field.default_value);
    BOOST_TEST(config.sources.at(field.key) == "default");
    BOOST_TEST(!config.config_file.has_value());
    BOOST_TEST(config.warnings.empty());
}

BOOST_DATA_TEST_CASE(file_only, bdata::make(fields), field) {
    const TempDir dir;
    const std::string path = field_file(dir, field);
    const Config config = resolve({{env_names::config_file, path}});
    BOOST_TEST(field.value(config) == field.file_value);
    BOOST_TEST(config.sources.at(field.key) == value_position(path, field));
    BOOST_TEST(config.config_file.value_or("") == path);
    BOOST_TEST(config.warnings.empty());
}

BOOST_DATA_TEST_CASE(environment_over_file, bdata::make(fields), field) {
    const TempDir dir;
    const std::string path = field_file(dir, field);
    const Config config = resolve({{env_names::config_file, path}, {field.variable, field.env_text}});
    BOOST_TEST(field.value(config) == field.env_value);
    BOOST_TEST(config.sources.at(field.key) == environment_label(field.variable));
}

BOOST_DATA_TEST_CASE(launcher_flag_over_file_and_labelled, bdata::make(fields), field) {
    const TempDir dir;
    const std::string path = field_file(dir, field);
    const Config config =
        resolve({{env_names::config_file, path},
                 {field.variable, field.launcher_text},
                 {env_names::launcher_flags, fmt::format(" {} ,{}", env_names::config_file, field.variable)}});
    BOOST_TEST(field.value(config) == field.launcher_value);
    BOOST_TEST(config.sources.at(field.key) == launcher_label(field.variable));
    BOOST_TEST(config.sources.at("config_file") == launcher_label(env_names::config_file));
}

BOOST_DATA_TEST_CASE(api_argument_over_everything, bdata::make(fields), field) {
    const TempDir dir;
    const std::string path = field_file(dir, field);
    ConfigOverrides overrides;
    field.set_override(overrides);
    const Config config = resolve({{env_names::config_file, path},
                                   {field.variable, field.launcher_text},
                                   {env_names::launcher_flags, field.variable}},
                                  overrides);
    BOOST_TEST(field.value(config) == field.override_value);
    BOOST_TEST(config.sources.at(field.key) == "API argument");
}

// Only the variables the launcher lists count as its flags; the others stay the user's environment.
BOOST_AUTO_TEST_CASE(launcher_list_labels_only_the_named_variables) {
    const Config config = resolve({{env_names::debug, "1"},
                                   {env_names::timeout, "30"},
                                   {env_names::launcher_flags, std::string(env_names::debug) + ",,"}});
    BOOST_TEST(config.debug);
    BOOST_TEST(config.timeout == 30.0);
    BOOST_TEST(config.sources.at("debug") == launcher_label(env_names::debug));
    BOOST_TEST(config.sources.at("timeout") == environment_label(env_names::timeout));
}

BOOST_AUTO_TEST_CASE(launcher_list_naming_an_unset_variable_is_an_error) {
    const ConfigError error = resolve_error({{env_names::launcher_flags, env_names::seed}});
    BOOST_TEST(error.source() == environment_label(env_names::launcher_flags));
    BOOST_TEST(contains(error.what(), env_names::seed));
}

BOOST_AUTO_TEST_CASE(unset_layers_leave_lower_layers_alone) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", "timeout: 45\nseed: 3\n");
    ConfigOverrides overrides;
    overrides.debug = true;
    const Config config = resolve({{env_names::config_file, path}, {env_names::seed, "8"}}, overrides);
    BOOST_TEST(config.timeout == 45.0);
    BOOST_TEST(config.sources.at("timeout") == path + ":1:10");
    BOOST_TEST(config.seed == 8u);
    BOOST_TEST(config.debug);
    BOOST_TEST(lockstep::log_level_name(config.log_level) == "WARNING");
    BOOST_TEST(config.sources.at("log_level") == "default");
}

BOOST_AUTO_TEST_CASE(environment_none_clears_a_file_memory_limit) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", "cpu_memory_limit: 512MiB\n");
    for (const std::string text : {"none", "NONE", ""}) {
        const Config config = resolve({{env_names::config_file, path}, {env_names::cpu_memory_limit, text}});
        BOOST_TEST(!config.cpu_memory_limit.has_value(), "value '" << text << "'");
        BOOST_TEST(config.sources.at("cpu_memory_limit") == environment_label(env_names::cpu_memory_limit));
    }
}

BOOST_AUTO_TEST_SUITE_END()

// ------------------------------------------------------------------------------ accepted and rejected spellings

struct Spelling {
    std::string variable;
    std::string text;
    std::string expected;  // rendered like Field::value
};

std::ostream& operator<<(std::ostream& os, const Spelling& s) {
    return os << s.variable << "='" << s.text << "'";
}

std::string rendered(const Config& config, const std::string& variable) {
    for (const auto& field : fields) {
        if (field.variable == variable) return field.value(config);
    }
    throw std::logic_error("no field for " + variable);
}

const std::vector<Spelling> accepted_environment_values = {
    {env_names::timeout, "30", "30"},
    {env_names::timeout, "30s", "30"},
    {env_names::timeout, "30 s", "30"},
    {env_names::timeout, "0.5m", "30"},
    {env_names::timeout, "1H", "3600"},
    {env_names::timeout, "1e2", "100"},
    {env_names::timeout, ".25", "0.25"},
    {env_names::timeout, " 45\n", "45"},
    {env_names::cpu_memory_limit, "512MiB", "536870912"},
    {env_names::cpu_memory_limit, "1048576", "1048576"},
    {env_names::cpu_memory_limit, "1.5GB", "1500000000"},
    {env_names::cpu_memory_limit, "2g", "2147483648"},
    {env_names::cpu_memory_limit, "none", "none"},
    {env_names::seed, "0", "0"},
    {env_names::seed, "42", "42"},
    {env_names::seed, "18446744073709551615", "18446744073709551615"},
    {env_names::log_level, "warning", "WARNING"},
    {env_names::log_level, "CRITICAL", "CRITICAL"},
    {env_names::log_level, "Info", "INFO"},
    {env_names::timeout, "0", "0"},
    {env_names::timeout, "0s", "0"},
    {env_names::timeout, "0.0m", "0"},
    {env_names::timeout, "off", "0"},
    {env_names::timeout, "OFF", "0"},
    {env_names::timeout, "None", "0"},
    {env_names::cuda_aware, "1", "true"},
    {env_names::cuda_aware, "No", "false"},
    {env_names::cuda_aware, "auto", "auto"},
    {env_names::cuda_aware, " AUTO ", "auto"},
    {env_names::staging_chunk_bytes, "4096", "4096"},
    {env_names::staging_chunk_bytes, "4k", "4096"},
    {env_names::staging_chunk_bytes, "4MiB", "4194304"},
    {env_names::staging_chunk_bytes, "1.5MB", "1500000"},
    {env_names::watchdog_host, "node-1.example.org", "node-1.example.org"},
    {env_names::watchdog_host, " 10.1.2.3\n", "10.1.2.3"},
    {env_names::watchdog_host, "gpu_node_01", "gpu_node_01"},
    {env_names::watchdog_host, "", "auto"},
    {env_names::watchdog_host, std::string(63, 'h'), std::string(63, 'h')},
};

BOOST_DATA_TEST_CASE(environment_spellings_accepted, bdata::make(accepted_environment_values), spelling) {
    const Config config = resolve({{spelling.variable, spelling.text}});
    BOOST_TEST(rendered(config, spelling.variable) == spelling.expected);
}

const std::vector<Spelling> rejected_environment_values = {
    {env_names::debug, "maybe", ""},
    {env_names::debug, "2", ""},
    {env_names::debug, "y", ""},
    {env_names::debug, "", ""},
    {env_names::debug, "enabled", ""},
    {env_names::log_level, "verbose", ""},
    {env_names::log_level, "warn", ""},
    {env_names::log_level, "3", ""},
    {env_names::log_level, "", ""},
    {env_names::on_timeout, "abort", ""},
    {env_names::on_timeout, "", ""},
    {env_names::on_timeout, "1", ""},
    {env_names::hang_stacks, "native", ""},
    {env_names::hang_stacks, "0", ""},
    {env_names::hang_stacks, "", ""},
    {env_names::timeout, "abc", ""},
    {env_names::timeout, "-5", ""},
    {env_names::timeout, "-0.5m", ""},
    {env_names::timeout, "never", ""},
    {env_names::timeout, "-inf", ""},
    {env_names::timeout, "10x", ""},
    {env_names::timeout, "30ms", ""},
    {env_names::timeout, "inf", ""},
    {env_names::timeout, "nan", ""},
    {env_names::timeout, "1e400", ""},
    {env_names::timeout, "s", ""},
    {env_names::timeout, "", ""},
    {env_names::cpu_memory_limit, "0", ""},
    {env_names::cpu_memory_limit, "0MiB", ""},
    {env_names::cpu_memory_limit, "lots", ""},
    {env_names::cpu_memory_limit, "12XB", ""},
    {env_names::cpu_memory_limit, "-1", ""},
    {env_names::seed, "-1", ""},
    {env_names::seed, "18446744073709551616", ""},
    {env_names::seed, "1.5", ""},
    {env_names::seed, "0x10", ""},
    {env_names::seed, "seven", ""},
    {env_names::seed, "", ""},
    {env_names::cuda_aware, "maybe", ""},
    {env_names::cuda_aware, "2", ""},
    {env_names::cuda_aware, "", ""},
    {env_names::cuda_aware, "automatic", ""},
    {env_names::staging_chunk_bytes, "0", ""},
    {env_names::staging_chunk_bytes, "4095", ""},
    {env_names::staging_chunk_bytes, "1k", ""},
    {env_names::staging_chunk_bytes, "lots", ""},
    {env_names::staging_chunk_bytes, "-1", ""},
    {env_names::staging_chunk_bytes, "", ""},
    {env_names::watchdog_host, "two words", ""},
    {env_names::watchdog_host, "host:29500", ""},
    {env_names::watchdog_host, "a/b", ""},
    {env_names::watchdog_host, "-leading-dash", ""},
    {env_names::watchdog_host, "fe80::1", ""},
    {env_names::watchdog_host, std::string(64, 'h'), ""},
    {env_names::shm, "maybe", ""},
    {env_names::shm, "", ""},
    {env_names::shm, "automatic", ""},
    {env_names::shm_arena_size, "0", ""},
    {env_names::shm_arena_size, "lots", ""},
    {env_names::shm_arena_size, "-1GiB", ""},
    {env_names::shm_threshold, "big", ""},
    {env_names::shm_threshold, "", ""},
    {env_names::shm_threshold, "1 parsec", ""},
    {env_names::shm_small_max, "small", ""},
    {env_names::mpi_thread_level, "threaded", ""},
    {env_names::mpi_thread_level, "3", ""},
    {env_names::shm_small_max, "-4KiB", ""},
    {env_names::trace_calls, "many", ""},
    {env_names::trace_calls, "-1", ""},
    {env_names::trace_calls, "2k", ""},
    {env_names::trace_calls, "1048577", ""},
};

// Part of what each rejection must say is accepted.
const std::map<std::string, std::string> accepted_hints = {
    {env_names::debug, "true/false"},
    {env_names::log_level, "DEBUG, INFO, WARNING, ERROR or CRITICAL"},
    {env_names::timeout, "positive number of seconds"},
    {env_names::cpu_memory_limit, "512MiB"},
    {env_names::seed, "unsigned 64-bit integer"},
    {env_names::cuda_aware, "auto to ask MPI"},
    {env_names::staging_chunk_bytes, "at least 4KiB"},
    {env_names::watchdog_host, "host name or IPv4 address"},
    {env_names::shm, "auto (the arena when two or more processes share a node)"},
    {env_names::shm_arena_size, "or auto (half of /dev/shm's free space"},
    {env_names::shm_threshold, "0: every host block"},
    {env_names::shm_small_max, "0: no small-message path"},
    {env_names::mpi_thread_level, "single, funneled, serialized or multiple"},
    {env_names::on_timeout, "end (print the watchdog's report and end the job"},
    {env_names::trace_calls, "0 to 1048576 (0: no flight recorder)"},
    {env_names::hang_stacks, "python (Python frames alone, no signal) or off"},
};

BOOST_DATA_TEST_CASE(bad_environment_value_names_variable_and_value, bdata::make(rejected_environment_values),
                     spelling) {
    const ConfigError error = resolve_error({{spelling.variable, spelling.text}});
    BOOST_TEST(error.source() == environment_label(spelling.variable));
    BOOST_TEST(contains(error.what(), "'" + spelling.text + "'"), error.what());
    BOOST_TEST(contains(error.what(), accepted_hints.at(spelling.variable)), error.what());

    const ConfigError from_launcher =
        resolve_error({{spelling.variable, spelling.text}, {env_names::launcher_flags, spelling.variable}});
    BOOST_TEST(from_launcher.source() == launcher_label(spelling.variable));
}

// A bad value in the environment is reported even when an API argument would have replaced it.
BOOST_AUTO_TEST_CASE(bad_environment_value_is_reported_under_an_override) {
    ConfigOverrides overrides;
    overrides.timeout = 10.0;
    const ConfigError error = resolve_error({{env_names::timeout, "soon"}}, overrides);
    BOOST_TEST(error.source() == environment_label(env_names::timeout));
}

struct BoolSpelling {
    std::string text;
    bool value;
};

std::ostream& operator<<(std::ostream& os, const BoolSpelling& s) {
    return os << "'" << s.text << "'";
}

const std::vector<BoolSpelling> bool_spellings = {
    {"1", true},  {"0", false},   {"true", true}, {"false", false}, {"yes", true}, {"no", false},
    {"on", true}, {"off", false}, {"TRUE", true}, {"False", false}, {"YES", true}, {"No", false},
    {"On", true}, {"OFF", false}, {"tRuE", true}, {"nO", false},
};

BOOST_DATA_TEST_CASE(boolean_spellings, bdata::make(bool_spellings), spelling) {
    BOOST_TEST(lockstep::parse_bool(spelling.text).has_value());
    BOOST_TEST(lockstep::parse_bool(spelling.text).value_or(!spelling.value) == spelling.value);

    const Config from_env = resolve({{env_names::debug, spelling.text}});
    BOOST_TEST(from_env.debug == spelling.value);

    const TempDir dir;
    const std::string path = dir.write("config.yaml", "debug: " + spelling.text + "\n");
    const Config from_file = resolve({{env_names::config_file, path}});
    BOOST_TEST(from_file.debug == spelling.value);
    BOOST_TEST(from_file.sources.at("debug") == path + ":1:8");
}

BOOST_AUTO_TEST_CASE(parse_bool_rejects_everything_else) {
    for (const std::string text : {"", "y", "n", "t", "2", "-1", "yes!", "enabled", "truee", " on"}) {
        BOOST_TEST(!lockstep::parse_bool(text).has_value(), "'" << text << "'");
    }
}

BOOST_AUTO_TEST_CASE(log_level_names_round_trip) {
    for (auto level : {LogLevel::Debug, LogLevel::Info, LogLevel::Warning, LogLevel::Error, LogLevel::Critical}) {
        const std::string name(lockstep::log_level_name(level));
        std::string lower = name;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        BOOST_TEST(level_name(lockstep::parse_log_level(name)) == name);
        BOOST_TEST(level_name(lockstep::parse_log_level(lower)) == name);
    }
    BOOST_TEST(lockstep::log_level_name(LogLevel::Warning) == "WARNING");
    for (const std::string text : {"", "warn", "fatal", "trace", "INFO "}) {
        BOOST_TEST(!lockstep::parse_log_level(text).has_value(), "'" << text << "'");
    }
}

// ------------------------------------------------------------------------------ timeout 0: no watchdog

// 0 turns the watchdog off, as CommunicatorOptions::timeout does; off and none say the same in words.
BOOST_AUTO_TEST_CASE(timeout_zero_turns_the_watchdog_off_from_every_layer) {
    const TempDir dir;
    for (const std::string text : {"0", "off", "none"}) {
        const std::string path = dir.write("config.yaml", "timeout: " + text + "\n");
        const Config from_file = resolve({{env_names::config_file, path}});
        BOOST_TEST(from_file.timeout == 0.0, "file value '" << text << "'");
        BOOST_TEST(from_file.sources.at("timeout") == path + ":1:10");
        BOOST_TEST(contains(from_file.describe(), "timeout: off "), from_file.describe());

        const Config from_env = resolve({{env_names::timeout, text}});
        BOOST_TEST(from_env.timeout == 0.0, "variable value '" << text << "'");
        BOOST_TEST(from_env.sources.at("timeout") == environment_label(env_names::timeout));
    }

    // A watchdog turned off in the file is turned back on by the environment, and off again by the launcher.
    const std::string path = dir.write("config.yaml", "timeout: off\n");
    BOOST_TEST(resolve({{env_names::config_file, path}, {env_names::timeout, "90s"}}).timeout == 90.0);
    const Config from_launcher = resolve({{env_names::timeout, "0"}, {env_names::launcher_flags, env_names::timeout}});
    BOOST_TEST(from_launcher.timeout == 0.0);
    BOOST_TEST(from_launcher.sources.at("timeout") == launcher_label(env_names::timeout));

    ConfigOverrides overrides;
    overrides.timeout = 0.0;
    const Config from_api = resolve({{env_names::timeout, "30"}}, overrides);
    BOOST_TEST(from_api.timeout == 0.0);
    BOOST_TEST(from_api.sources.at("timeout") == "API argument");
    BOOST_TEST(contains(from_api.describe(), "timeout: off "), from_api.describe());
}

BOOST_AUTO_TEST_CASE(timeout_rejection_says_how_to_turn_the_watchdog_off) {
    const ConfigError error = resolve_error({{env_names::timeout, "-1"}});
    BOOST_TEST(contains(error.what(), "0 (also off or none) for no hang watchdog"), error.what());
}

// ------------------------------------------------------------------------------ API arguments

struct BadOverride {
    std::string name;
    void (*set)(ConfigOverrides&);
};

std::ostream& operator<<(std::ostream& os, const BadOverride& b) {
    return os << b.name;
}

const std::vector<BadOverride> bad_overrides = {
    {"timeout -1", [](ConfigOverrides& o) { o.timeout = -1.0; }},
    {"timeout NaN", [](ConfigOverrides& o) { o.timeout = std::numeric_limits<double>::quiet_NaN(); }},
    {"timeout inf", [](ConfigOverrides& o) { o.timeout = std::numeric_limits<double>::infinity(); }},
    {"cpu_memory_limit 0", [](ConfigOverrides& o) { o.cpu_memory_limit = 0; }},
    {"log_level 42", [](ConfigOverrides& o) { o.log_level = static_cast<LogLevel>(42); }},
    {"staging_chunk_bytes 0", [](ConfigOverrides& o) { o.staging_chunk_bytes = 0; }},
    {"staging_chunk_bytes 4095", [](ConfigOverrides& o) { o.staging_chunk_bytes = 4095; }},
    {"watchdog_host empty", [](ConfigOverrides& o) { o.watchdog_host = ""; }},
    {"watchdog_host two words", [](ConfigOverrides& o) { o.watchdog_host = "two words"; }},
};

BOOST_DATA_TEST_CASE(bad_api_argument, bdata::make(bad_overrides), bad) {
    ConfigOverrides overrides;
    bad.set(overrides);
    const ConfigError error = resolve_error({}, overrides);
    BOOST_TEST(error.source() == "API argument");
    BOOST_TEST(contains(error.what(), "accepted"), error.what());
    BOOST_TEST(contains(error.what(), bad.name.substr(0, bad.name.find(' '))), error.what());  // names the setting
}

// ------------------------------------------------------------------------------ config.yaml

struct FileValue {
    std::string line;    // one "key: value" line, written as the file's second line
    int column;          // 1-based column the error must point at
    std::string expect;  // text the message must contain
};

std::ostream& operator<<(std::ostream& os, const FileValue& v) {
    return os << v.line;
}

const std::vector<FileValue> bad_file_values = {
    {"debug: maybe", 8, "'maybe'"},
    {"debug:", 1, "''"},
    {"log_level: loud", 12, "'loud'"},
    {"timeout: -1", 10, "'-1'"},
    {"timeout: forever", 10, "'forever'"},
    {"timeout: .inf", 10, "'.inf'"},
    {"timeout: [1, 2]", 10, "single value, not a list"},
    {"cpu_memory_limit: 0", 19, "'0'"},
    {"cpu_memory_limit: lots", 19, "'lots'"},
    {"seed: -1", 7, "'-1'"},
    {"seed: 1.5", 7, "'1.5'"},
    {"num_processes: 0", 16, "'0'"},
    {"num_processes: -2", 16, "'-2'"},
    {"num_processes: two", 16, "'two'"},
    {"num_machines: 0", 15, "'0'"},
    {"mixed_precision: fp32", 18, "'fp32'"},
    {"distributed_type: ''", 19, "''"},
    {"compute_environment: {a: 1}", 22, "not a mapping"},
    {"lockstep: one", 11, "'one'"},
    {"lockstep: 0", 11, "'0'"},
    {"cuda_aware: sometimes", 13, "'sometimes'"},
    {"cuda_aware:", 1, "''"},
    {"staging_chunk_bytes: 1k", 22, "'1k'"},
    {"staging_chunk_bytes: [4MiB]", 22, "single value, not a list"},
    {"watchdog_host: no such host", 16, "'no such host'"},
};

BOOST_DATA_TEST_CASE(bad_file_value_names_file_line_column, bdata::make(bad_file_values), bad) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", "use_cpu: false\n" + bad.line + "\n");
    const ConfigError error = resolve_error({{env_names::config_file, path}});
    BOOST_TEST(error.source() == fmt::format("{}:2:{}", path, bad.column));
    BOOST_TEST(contains(error.what(), bad.expect), error.what());
}

struct Malformed {
    std::string content;
    int line;
    int column;
};

std::ostream& operator<<(std::ostream& os, const Malformed& m) {
    return os << "line " << m.line << " column " << m.column;
}

const std::vector<Malformed> malformed_files = {
    {"debug: true\nlog_level: info\n\ttimeout: 30\n", 3, 1},  // a tab where indentation is expected
    {"debug: true\nseed: 1: 2\n", 2, 8},                      // a second ':' on one line
    {"timeout: 30\n  seed: 2\n", 2, 7},                       // a key indented under a scalar
    {"timeout: 30\nseed: *anchor\n", 2, 7},                   // an alias that names no anchor
};

BOOST_DATA_TEST_CASE(malformed_yaml_names_file_line_column, bdata::make(malformed_files), malformed) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", malformed.content);
    const ConfigError error = resolve_error({{env_names::config_file, path}});
    BOOST_TEST(error.source() == fmt::format("{}:{}:{}", path, malformed.line, malformed.column));
    BOOST_TEST(contains(error.what(), "malformed YAML"), error.what());
}

struct NotAMapping {
    std::string content;
    std::string expect;
};

std::ostream& operator<<(std::ostream& os, const NotAMapping& n) {
    return os << n.expect;
}

const std::vector<NotAMapping> non_mapping_files = {
    {"- timeout\n- 30\n", "top level is a list"},
    {"just some words\n", "top level is a single value"},
    {"timeout: 30\n---\nseed: 1\n", "2 YAML documents"},
};

BOOST_DATA_TEST_CASE(top_level_must_be_one_mapping, bdata::make(non_mapping_files), bad) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", bad.content);
    const ConfigError error = resolve_error({{env_names::config_file, path}});
    BOOST_TEST(error.source().starts_with(path + ":"), error.source());
    BOOST_TEST(contains(error.what(), bad.expect), error.what());
}

BOOST_AUTO_TEST_CASE(empty_and_comment_only_files_set_nothing) {
    for (const std::string content : {"", "# lockstep settings go here\n", "~\n"}) {
        const TempDir dir;
        const std::string path = dir.write("config.yaml", content);
        const Config config = resolve({{env_names::config_file, path}});
        BOOST_TEST(config.config_file.value_or("") == path);
        BOOST_TEST(config.timeout == 600.0);
        BOOST_TEST(config.sources.at("timeout") == "default");
        BOOST_TEST(config.warnings.empty());
    }
}

BOOST_AUTO_TEST_CASE(file_value_forms) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml",
                                       "lockstep: 1\n"
                                       "timeout: 2.5\n"
                                       "cpu_memory_limit: 1048576\n"
                                       "seed: \"42\"\n"
                                       "log_level: error\n"
                                       "mixed_precision: BF16\n");
    const Config config = resolve({{env_names::config_file, path}});
    BOOST_TEST(config.timeout == 2.5);
    BOOST_TEST(config.cpu_memory_limit.value_or(0) == 1048576u);
    BOOST_TEST(config.seed == 42u);
    BOOST_TEST(lockstep::log_level_name(config.log_level) == "ERROR");
    BOOST_TEST(config.mixed_precision.value_or("") == "bf16");
    BOOST_TEST(config.sources.at("mixed_precision") == path + ":6:18");
    BOOST_TEST(config.warnings.empty());

    const std::string suffixed = dir.write("suffixed.yaml", "timeout: 90s\ncpu_memory_limit: none\n");
    const Config from_suffixed = resolve({{env_names::config_file, suffixed}});
    BOOST_TEST(from_suffixed.timeout == 90.0);
    BOOST_TEST(!from_suffixed.cpu_memory_limit.has_value());
}

BOOST_AUTO_TEST_CASE(repeated_key_is_an_error) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", "timeout: 30\nseed: 1\ntimeout: 60\n");
    const ConfigError error = resolve_error({{env_names::config_file, path}});
    BOOST_TEST(error.source() == path + ":3:1");
    BOOST_TEST(contains(error.what(), "first on line 1"), error.what());
}

BOOST_AUTO_TEST_CASE(unknown_keys_become_warnings_with_their_line) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml",
                                       "timeout: 30\n"
                                       "timout: 40\n"
                                       "fancy_feature: 1\n"
                                       "deepspeed_config:\n"
                                       "  zero_stage: 2\n");
    const Config config = resolve({{env_names::config_file, path}});
    BOOST_TEST(config.timeout == 30.0);
    BOOST_REQUIRE_EQUAL(config.warnings.size(), 2u);
    BOOST_TEST(config.warnings[0] == path + ":2: unknown key 'timout' (ignored); did you mean 'timeout'?");
    BOOST_TEST(config.warnings[1] == path + ":3: unknown key 'fancy_feature' (ignored)");
}

BOOST_AUTO_TEST_CASE(schema_version_too_new) {
    struct Case {
        std::string content;
        std::string position;
    };
    for (const auto& c :
         {Case{"lockstep: 2\nbrand_new_key: 1\n", "1:11"}, Case{"timeout: 30\nlockstep: 3\n", "2:11"}}) {
        const TempDir dir;
        const std::string path = dir.write("config.yaml", c.content);
        const ConfigError error = resolve_error({{env_names::config_file, path}});
        BOOST_TEST(error.source() == path + ":" + c.position);
        BOOST_TEST(contains(error.what(), "upgrade lockstep"), error.what());
    }
    const TempDir dir;
    const std::string path = dir.write("config.yaml", "lockstep: 1\ntimeout: 30\n");
    BOOST_TEST(resolve({{env_names::config_file, path}}).timeout == 30.0);
}

// What `accelerate config` writes for a two-node DeepSpeed job, and what `accelerate config default` writes (JSON).
struct AccelerateFile {
    std::string name;
    std::string content;
    int num_processes;
    int num_machines;
    std::string mixed_precision;
    std::string distributed_type;
    bool debug;
};

std::ostream& operator<<(std::ostream& os, const AccelerateFile& f) {
    return os << f.name;
}

const std::vector<AccelerateFile> accelerate_files = {
    {"accelerate config (deepspeed, two machines)",
     "compute_environment: LOCAL_MACHINE\n"
     "debug: false\n"
     "deepspeed_config:\n"
     "  gradient_accumulation_steps: 1\n"
     "  offload_optimizer_device: none\n"
     "  offload_param_device: none\n"
     "  zero3_init_flag: false\n"
     "  zero_stage: 2\n"
     "distributed_type: DEEPSPEED\n"
     "downcast_bf16: 'no'\n"
     "enable_cpu_affinity: false\n"
     "machine_rank: 0\n"
     "main_process_ip: 10.0.0.1\n"
     "main_process_port: 29500\n"
     "main_training_function: main\n"
     "mixed_precision: bf16\n"
     "num_machines: 2\n"
     "num_processes: 16\n"
     "rdzv_backend: static\n"
     "same_network: true\n"
     "tpu_env: []\n"
     "tpu_use_cluster: false\n"
     "tpu_use_sudo: false\n"
     "use_cpu: false\n",
     16, 2, "bf16", "DEEPSPEED", false},
    {"accelerate config (multi-gpu, debug)",
     "compute_environment: LOCAL_MACHINE\n"
     "debug: true\n"
     "distributed_type: MULTI_GPU\n"
     "downcast_bf16: 'no'\n"
     "dynamo_config:\n"
     "  dynamo_backend: INDUCTOR\n"
     "enable_cpu_affinity: false\n"
     "gpu_ids: all\n"
     "machine_rank: 0\n"
     "main_training_function: main\n"
     "mixed_precision: 'no'\n"
     "num_machines: 1\n"
     "num_processes: 4\n"
     "rdzv_backend: static\n"
     "same_network: true\n"
     "tpu_env: []\n"
     "tpu_use_cluster: false\n"
     "tpu_use_sudo: false\n"
     "use_cpu: false\n",
     4, 1, "no", "MULTI_GPU", true},
    {"accelerate config default (JSON)",
     "{\n"
     "  \"compute_environment\": \"LOCAL_MACHINE\",\n"
     "  \"debug\": false,\n"
     "  \"distributed_type\": \"MULTI_GPU\",\n"
     "  \"downcast_bf16\": false,\n"
     "  \"enable_cpu_affinity\": false,\n"
     "  \"machine_rank\": 0,\n"
     "  \"main_training_function\": \"main\",\n"
     "  \"mixed_precision\": \"fp16\",\n"
     "  \"num_machines\": 1,\n"
     "  \"num_processes\": 8,\n"
     "  \"rdzv_backend\": \"static\",\n"
     "  \"same_network\": false,\n"
     "  \"tpu_use_cluster\": false,\n"
     "  \"tpu_use_sudo\": false,\n"
     "  \"use_cpu\": false\n"
     "}\n",
     8, 1, "fp16", "MULTI_GPU", false},
};

BOOST_DATA_TEST_CASE(accelerate_config_file, bdata::make(accelerate_files), file) {
    const TempDir dir;
    const std::string path = dir.write("default_config.yaml", file.content);
    const Config config = resolve({{env_names::config_file, path}});
    BOOST_TEST(config.warnings.empty(), (config.warnings.empty() ? "" : config.warnings.front()));
    BOOST_TEST(config.num_processes.value_or(-1) == file.num_processes);
    BOOST_TEST(config.num_machines.value_or(-1) == file.num_machines);
    BOOST_TEST(config.mixed_precision.value_or("") == file.mixed_precision);
    BOOST_TEST(config.distributed_type.value_or("") == file.distributed_type);
    BOOST_TEST(config.compute_environment.value_or("") == "LOCAL_MACHINE");
    BOOST_TEST(config.debug == file.debug);
    BOOST_TEST(config.sources.at("num_processes").starts_with(path + ":"));
    BOOST_TEST(config.timeout == 600.0);
}

// ------------------------------------------------------------------------------ which file is read

BOOST_AUTO_TEST_CASE(missing_explicit_file_is_an_error) {
    const TempDir dir;
    const std::string missing = dir.str("nowhere.yaml");

    const ConfigError from_env = resolve_error({{env_names::config_file, missing}});
    BOOST_TEST(from_env.source() == environment_label(env_names::config_file));
    BOOST_TEST(contains(from_env.what(), missing), from_env.what());

    const ConfigError from_launcher =
        resolve_error({{env_names::config_file, missing}, {env_names::launcher_flags, env_names::config_file}});
    BOOST_TEST(from_launcher.source() == launcher_label(env_names::config_file));

    ConfigOverrides overrides;
    overrides.config_file = missing;
    const ConfigError from_api = resolve_error({}, overrides);
    BOOST_TEST(from_api.source() == "API argument");
    BOOST_TEST(contains(from_api.what(), missing), from_api.what());
}

BOOST_AUTO_TEST_CASE(missing_default_file_is_fine) {
    const TempDir dir;
    const Config from_home = resolve({{"HOME", dir.str()}});
    BOOST_TEST(!from_home.config_file.has_value());
    BOOST_TEST(from_home.timeout == 600.0);
    BOOST_TEST(contains(from_home.sources.at("config_file"), "no file at " + dir.str(".config/lockstep/config.yaml")));

    const Config from_xdg = resolve({{"XDG_CONFIG_HOME", dir.str("xdg")}, {"HOME", dir.str()}});
    BOOST_TEST(!from_xdg.config_file.has_value());
}

BOOST_AUTO_TEST_CASE(default_file_locations) {
    const TempDir dir;
    const std::string xdg_file = dir.write("xdg/lockstep/config.yaml", "timeout: 11\n");
    const std::string home_file = dir.write("home/.config/lockstep/config.yaml", "timeout: 22\n");
    const std::string named_file = dir.write("named.yaml", "timeout: 33\n");
    struct Case {
        std::map<std::string, std::string> env;
        double timeout;
        std::optional<std::string> file;
    };
    const std::vector<Case> cases = {
        {{{"XDG_CONFIG_HOME", dir.str("xdg")}, {"HOME", dir.str("home")}}, 11.0, xdg_file},
        {{{"HOME", dir.str("home")}}, 22.0, home_file},
        {{{"XDG_CONFIG_HOME", ""}, {"HOME", dir.str("home")}}, 22.0, home_file},
        {{{env_names::config_file, named_file}, {"XDG_CONFIG_HOME", dir.str("xdg")}}, 33.0, named_file},
        // An empty name asks for no file, even where a default one exists.
        {{{env_names::config_file, ""}, {"XDG_CONFIG_HOME", dir.str("xdg")}}, 600.0, std::nullopt},
    };
    for (const auto& c : cases) {
        const Config config = resolve(c.env);
        BOOST_TEST(config.timeout == c.timeout);
        BOOST_TEST(config.config_file.value_or("none") == c.file.value_or("none"));
    }

    ConfigOverrides overrides;
    overrides.config_file = named_file;
    const Config from_api = resolve({{env_names::config_file, home_file}}, overrides);
    BOOST_TEST(from_api.timeout == 33.0);
    BOOST_TEST(from_api.sources.at("config_file") == "API argument");
}

BOOST_AUTO_TEST_CASE(directory_as_config_file_is_an_error) {
    const TempDir dir;
    const ConfigError error = resolve_error({{env_names::config_file, dir.str()}});
    BOOST_TEST(error.source() == dir.str());
    BOOST_TEST(contains(error.what(), "directory"), error.what());
}

BOOST_AUTO_TEST_CASE(load_file_reads_only_the_file) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", "seed: 17\nnum_processes: 3\n");
    Config config;
    Config::load_file(path, config);
    BOOST_TEST(config.seed == 17u);
    BOOST_TEST(config.num_processes.value_or(0) == 3);
    BOOST_TEST(config.sources.at("seed") == path + ":1:7");
    BOOST_TEST(config.config_file.value_or("") == path);
    BOOST_TEST(config.timeout == 600.0);

    const ConfigError error = config_error([&] { Config::load_file(dir.str("absent.yaml"), config); });
    BOOST_TEST(error.source() == dir.str("absent.yaml"));
}

// ------------------------------------------------------------------------------ describe()

BOOST_AUTO_TEST_CASE(describe_names_every_source) {
    const TempDir dir;
    const std::string path =
        dir.write("config.yaml", "log_level: info\nnum_processes: 4\nstaging_chunk_bytes: 64KiB\n");
    ConfigOverrides overrides;
    overrides.cpu_memory_limit = std::size_t{512} << 20;
    overrides.cuda_aware = false;
    const Config config = resolve({{env_names::config_file, path},
                                   {env_names::timeout, "30"},
                                   {env_names::debug, "on"},
                                   {env_names::watchdog_host, "node7"},
                                   {env_names::cuda_aware, "yes"},
                                   {env_names::launcher_flags, env_names::debug}},
                                  overrides);
    const std::string text = config.describe();

    struct Row {
        std::string start;
        std::string source;
    };
    const std::vector<Row> rows = {
        {"debug: true", launcher_label(env_names::debug)},
        {"log_level: INFO", path + ":1:12"},
        {"timeout: 30 s", environment_label(env_names::timeout)},
        {"cpu_memory_limit: 512.00 MiB", "API argument"},
        {"seed: 0", "default"},
        {"cuda_aware: false", "API argument"},
        {"staging_chunk_bytes: 64.00 KiB", path + ":3:22"},
        {"watchdog_host: node7", environment_label(env_names::watchdog_host)},
        {"trace_file: none", "default"},
        {"trace_dir: .", "default"},
        {"shm: auto", "default"},
        {"shm_arena_size: auto", "default"},
        {"shm_threshold: 64.00 KiB", "default"},
        {"shm_small_max: 32.00 KiB", "default"},
        {"progress_thread: true", "default"},
        {"mpi_thread_level: multiple", "default"},
        {"on_timeout: end", "default"},
        {"trace_calls: 2048", "default"},
        {"hang_stacks: all", "default"},
        {"num_processes: 4", path + ":2:16"},
        {"config_file: " + path, environment_label(env_names::config_file)},
    };
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    BOOST_TEST(lines.size() == rows.size(), text);

    std::optional<std::size_t> source_column;
    for (const auto& row : rows) {
        const auto line = std::find_if(lines.begin(), lines.end(),
                                       [&](const std::string& l) { return l.starts_with(row.start + " "); });
        BOOST_REQUIRE_MESSAGE(line != lines.end(), "no line '" << row.start << "' in:\n" << text);
        const std::string suffix = "    (" + row.source + ")";
        BOOST_TEST(line->ends_with(suffix), *line);
        // The sources form one column.
        const std::size_t column = line->size() - row.source.size() - 2;
        if (!source_column) source_column = column;
        BOOST_TEST(column == *source_column, *line);
    }
}

BOOST_AUTO_TEST_CASE(describe_without_cap_or_file) {
    const std::string text = resolve({}).describe();
    BOOST_TEST(contains(text, "cpu_memory_limit: none"), text);
    BOOST_TEST(contains(text, "config_file: none"), text);
    BOOST_TEST(contains(text, "timeout: 600 s"), text);
    BOOST_TEST(contains(text, "cuda_aware: auto "), text);
    BOOST_TEST(contains(text, "staging_chunk_bytes: 4.00 MiB "), text);
    BOOST_TEST(contains(text, "watchdog_host: auto "), text);
    BOOST_TEST(!contains(text, "num_processes"), text);
}

// ------------------------------------------------------------------------------ the process-wide Config

// The only test that touches config(), so that its first call resolves from the environment set here.
BOOST_AUTO_TEST_CASE(process_config_is_cached_then_replaced_by_the_installed_one) {
    for (const char* name : {env_names::debug, env_names::log_level, env_names::timeout, env_names::cpu_memory_limit,
                             env_names::cuda_aware, env_names::launcher_flags}) {
        ::unsetenv(name);
    }
    ::setenv(env_names::config_file, "", 1);
    ::setenv(env_names::seed, "424242", 1);
    // What the collectives read through config() rather than from the environment themselves.
    ::setenv(env_names::staging_chunk_bytes, "8KiB", 1);
    ::setenv(env_names::watchdog_host, "10.9.8.7", 1);

    std::vector<const Config*> seen(8, nullptr);
    {
        std::vector<std::jthread> threads;
        for (std::size_t i = 0; i < seen.size(); ++i) {
            threads.emplace_back([&seen, i] { seen[i] = &lockstep::config(); });
        }
    }
    const Config& first = lockstep::config();
    for (const Config* p : seen) BOOST_TEST(p == &first);
    BOOST_TEST(first.seed == 424242u);
    BOOST_TEST(first.sources.at("seed") == environment_label(env_names::seed));
    BOOST_TEST(first.staging_chunk_bytes == 8192u);
    BOOST_TEST(first.sources.at("staging_chunk_bytes") == environment_label(env_names::staging_chunk_bytes));
    BOOST_TEST(first.watchdog_host.value_or("auto") == "10.9.8.7");
    BOOST_TEST(!first.cuda_aware.has_value());
    BOOST_TEST(first.sources.at("cuda_aware") == "default");

    ::setenv(env_names::seed, "1", 1);
    BOOST_TEST(lockstep::config().seed == 424242u);  // resolved once, not per call

    Config runtime_config;
    runtime_config.seed = 7;
    lockstep::detail::install_config(runtime_config);
    BOOST_TEST(lockstep::config().seed == 7u);
    const Config& installed = lockstep::config();

    runtime_config.seed = 8;
    lockstep::detail::install_config(runtime_config);
    BOOST_TEST(lockstep::config().seed == 8u);
    BOOST_TEST(installed.seed == 7u);  // earlier references stay valid
    BOOST_TEST(first.seed == 424242u);

    ::unsetenv(env_names::seed);
    ::unsetenv(env_names::staging_chunk_bytes);
    ::unsetenv(env_names::watchdog_host);
    ::unsetenv(env_names::config_file);
}

}  // namespace

// ------------------------------------------------------------------------------ hostile input

namespace {

// How a config file load ended in a child process that could not run away.
enum class Outcome { ConfigError, NoError, OtherError, Runaway };

std::ostream& operator<<(std::ostream& os, Outcome outcome) {
    constexpr const char* names[] = {"ConfigError", "no error", "another error", "killed: ran away"};
    return os << names[static_cast<int>(outcome)];
}

// Loads `path` in a child process, so that a parser that loops (and allocates) without end fails the test instead of
// hanging it or taking the machine's memory: the child is killed once it passes 512 MiB resident or 30 seconds.
// Both bounds are far from what a load needs (under a MiB and a millisecond), so neither decides a healthy run.
Outcome load_in_child(const std::string& path) {
    const pid_t child = ::fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
        int code = 1;
        try {
            Config config;
            Config::load_file(path, config);
        } catch (const ConfigError&) {
            code = 0;
        } catch (...) {
            code = 2;
        }
        ::_exit(code);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const std::string statm = "/proc/" + std::to_string(child) + "/statm";
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    for (;;) {
        int status = 0;
        if (::waitpid(child, &status, WNOHANG) == child) {
            if (!WIFEXITED(status)) return Outcome::Runaway;
            switch (WEXITSTATUS(status)) {
                case 0:
                    return Outcome::ConfigError;
                case 1:
                    return Outcome::NoError;
                default:
                    return Outcome::OtherError;
            }
        }
        std::size_t size_pages = 0, resident_pages = 0;
        std::ifstream(statm) >> size_pages >> resident_pages;
        if (resident_pages * page > (std::size_t{512} << 20) || std::chrono::steady_clock::now() > deadline) {
            ::kill(child, SIGKILL);
            ::waitpid(child, &status, 0);
            return Outcome::Runaway;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

struct Runaway {
    std::string content;
    int line;
    int column;
};

std::ostream& operator<<(std::ostream& os, const Runaway& r) {
    std::string shown;
    for (char c : r.content) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
    return os << "'" << shown << "'";
}

// A ',' where the top level of a document should start: yaml-cpp 0.7's LoadAll loops on it, allocating without end.
const std::vector<Runaway> runaway_files = {
    {",\n", 1, 1},
    {",", 1, 1},
    {"\n,", 2, 1},
    {",,,,\n", 1, 1},
    {"&anchor ,\n", 1, 9},
    {"!tag ,\n", 1, 6},
    {"{a: 1},\n", 1, 7},
    {"- a\n,\n", 2, 1},
    {"timeout: 30\n...\n,\n", 3, 1},
    {"---\n,\n", 2, 1},
    {"%YAML 1.2\n---\n,\n", 3, 1},
    {"timeout: 30\n---\n,\n", 3, 1},
};

}  // namespace

BOOST_DATA_TEST_CASE(top_level_comma_is_malformed_not_an_endless_loop, bdata::make(runaway_files), file) {
    const TempDir dir;
    const std::string path = dir.write("config.yaml", file.content);
    BOOST_REQUIRE_EQUAL(load_in_child(path), Outcome::ConfigError);
    const ConfigError error = resolve_error({{env_names::config_file, path}});
    BOOST_TEST(error.source() == fmt::format("{}:{}:{}", path, file.line, file.column));
    BOOST_TEST(contains(error.what(), "malformed YAML: unexpected ','"), error.what());
}

BOOST_AUTO_TEST_CASE(endless_or_oversized_files_are_refused_before_they_are_parsed) {
    const TempDir dir;
    // 2 MiB of comments: valid YAML, but past the 1 MiB that a config file may hold.
    std::string lines;
    while (lines.size() <= (std::size_t{2} << 20)) lines += "# a comment line\n";
    const std::string big = dir.write("big.yaml", lines);
    for (const std::string& path : {big, std::string("/dev/zero")}) {
        BOOST_TEST_CONTEXT(path) {
            BOOST_REQUIRE_EQUAL(load_in_child(path), Outcome::ConfigError);
        }
    }
    const std::string comments = dir.write("comments.yaml", std::string(std::size_t{2} << 20, '#'));
    const ConfigError error = resolve_error({{env_names::config_file, comments}});
    BOOST_TEST(error.source() == comments);
    BOOST_TEST(contains(error.what(), "larger than 1.00 MiB"), error.what());
    // /dev/null is an empty file: no settings, no error.
    BOOST_TEST(resolve({{env_names::config_file, "/dev/null"}}).config_file.value_or("") == "/dev/null");
}

BOOST_AUTO_TEST_CASE(long_values_are_cut_in_messages_with_their_length) {
    const std::string huge(50'000'000, '7');
    const std::string cut_note = "...' (50000000 bytes)";
    {
        const ConfigError error = resolve_error({{env_names::seed, huge + "x"}});
        BOOST_TEST(std::string(error.what()).size() < 1000u);
        BOOST_TEST(contains(error.what(), "'" + huge.substr(0, 80) + "...' (50000001 bytes)"), error.what());
    }
    {
        ConfigOverrides overrides;
        overrides.watchdog_host = huge;
        const ConfigError error = resolve_error({}, overrides);
        BOOST_TEST(std::string(error.what()).size() < 1000u);
        BOOST_TEST(contains(error.what(), cut_note), error.what());
    }
    {
        const ConfigError error = resolve_error({{env_names::launcher_flags, huge}});
        BOOST_TEST(std::string(error.what()).size() < 1000u);
    }
    const TempDir dir;
    {
        const std::string path = dir.write("value.yaml", "log_level: " + std::string(100'000, 'x') + "\n");
        const ConfigError error = resolve_error({{env_names::config_file, path}});
        BOOST_TEST(std::string(error.what()).size() < 1000u);
        BOOST_TEST(contains(error.what(), "...' (100000 bytes)"), error.what());
    }
    {
        // An unknown key a megabyte long (an explicit key, as a plain one may not pass 1024 characters): a short
        // warning, and no edit distance over the whole key.
        const std::string path = dir.write("key.yaml", "? " + std::string(1'000'000, 'k') + "\n: 1\n");
        const Config config = resolve({{env_names::config_file, path}});
        BOOST_REQUIRE_EQUAL(config.warnings.size(), 1u);
        BOOST_TEST(config.warnings[0].size() < 300u + path.size(), config.warnings[0].substr(0, 300));
        BOOST_TEST(contains(config.warnings[0], "...' (1000000 bytes) (ignored)"), config.warnings[0].substr(0, 300));
    }
}

BOOST_AUTO_TEST_CASE(control_characters_in_values_are_escaped_in_messages) {
    const ConfigError error = resolve_error({{env_names::log_level, "loud\x1b[31m\nERROR fake line\t\x7f"}});
    const std::string what = error.what();
    BOOST_TEST(contains(what, "'loud\\x1b[31m\\nERROR fake line\\t\\x7f'"), what);
    BOOST_TEST(std::none_of(what.begin(), what.end(), [](char c) { return c == '\x1b' || c == '\n' || c == '\x7f'; }),
               what);
    // A cut never splits a UTF-8 character: 79 ASCII bytes, then 2-byte characters.
    std::string accented(79, 'a');
    for (int i = 0; i < 20; ++i) accented += "\xc3\xa9";
    const ConfigError cut = resolve_error({{env_names::log_level, accented}});
    BOOST_TEST(contains(cut.what(), "'" + std::string(79, 'a') + "...' (119 bytes)"), cut.what());
}

BOOST_AUTO_TEST_CASE(a_lone_point_is_not_a_size) {
    // "." once read as 0 bytes, so it was refused as too small instead of as no number at all.
    BOOST_TEST(contains(resolve_error({{env_names::staging_chunk_bytes, "."}}).what(), "'.' is not a chunk size"));
    BOOST_TEST(contains(resolve_error({{env_names::cpu_memory_limit, "."}}).what(), "'.' is not a memory size"));
    BOOST_TEST(contains(resolve_error({{env_names::cpu_memory_limit, "KiB"}}).what(), "'KiB' is not a memory size"));
}

namespace {
// The value describe() prints for `key`: the text between "key: " and the column of sources.
std::string described_value(const Config& config, const std::string& key) {
    const std::string text = config.describe();
    const std::size_t start = text.find("\n" + key + ": ") + key.size() + 3;
    const std::size_t end = text.find("    (", start);
    BOOST_REQUIRE(start > key.size() + 3 && end != std::string::npos);
    std::string value = text.substr(start, end - start);
    while (!value.empty() && value.back() == ' ') value.pop_back();
    return value;
}

std::vector<std::size_t> sizes_to_round_trip() {
    std::vector<std::size_t> sizes;
    for (int bit = 0; bit < 64; ++bit) {
        const std::size_t power = std::size_t{1} << bit;
        sizes.insert(sizes.end(), {power, power - 1, power + 1, power / 2 * 3, power + power / 100});
    }
    std::size_t decimal = 1;
    for (int digits = 0; digits < 20; ++digits, decimal *= 10) sizes.insert(sizes.end(), {decimal, decimal * 15 / 10});
    constexpr std::size_t PiB = std::size_t{1} << 50;
    sizes.insert(sizes.end(), {PiB, PiB * 3 / 2, 1023 * PiB, 5 * 1024 * PiB, std::numeric_limits<std::size_t>::max(),
                               std::numeric_limits<std::size_t>::max() - 1, std::size_t{9007199254740993}});
    std::uint64_t state = 0x243f6a8885a308d3u;  // xorshift64: the same values on every run
    for (int i = 0; i < 500; ++i) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        sizes.push_back(state >> (i % 64));
    }
    return sizes;
}
}  // namespace

// describe() and the messages print sizes that users copy into a variable or a file: each must read back as itself.
BOOST_AUTO_TEST_CASE(printed_sizes_parse_back_to_the_same_bytes) {
    for (const std::size_t bytes : sizes_to_round_trip()) {
        BOOST_TEST_CONTEXT(bytes) {
            if (bytes > 0) {
                ConfigOverrides overrides;
                overrides.cpu_memory_limit = bytes;
                const std::string shown = described_value(resolve({}, overrides), "cpu_memory_limit");
                BOOST_TEST_CONTEXT(shown) {
                    const Config again = resolve({{env_names::cpu_memory_limit, shown}});
                    BOOST_TEST(again.cpu_memory_limit.value_or(0) == bytes);
                }
            }
            if (bytes >= 4096) {
                ConfigOverrides overrides;
                overrides.staging_chunk_bytes = bytes;
                const std::string shown = described_value(resolve({}, overrides), "staging_chunk_bytes");
                BOOST_TEST_CONTEXT(shown) {
                    BOOST_TEST(resolve({{env_names::staging_chunk_bytes, shown}}).staging_chunk_bytes == bytes);
                }
            }
        }
    }
    // The sizes people write keep their short form.
    ConfigOverrides overrides;
    overrides.cpu_memory_limit = std::size_t{1} << 50;
    BOOST_TEST(described_value(resolve({}, overrides), "cpu_memory_limit") == "1.00 PiB");
    overrides.cpu_memory_limit = 1025;
    BOOST_TEST(described_value(resolve({}, overrides), "cpu_memory_limit") == "1025 B");
    // A refused size is shown in the same exact form.
    overrides = {};
    overrides.staging_chunk_bytes = 4095;
    BOOST_TEST(contains(resolve_error({}, overrides).what(), "staging_chunk_bytes '4095 B' is smaller"));
}
