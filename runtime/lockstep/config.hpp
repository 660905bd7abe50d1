#pragma once
// Config: the settings of the library, each resolved once with this precedence (highest first):
//   explicit API argument > launcher flag (forwarded as a LOCKSTEP_* variable and listed in LOCKSTEP_LAUNCHER_FLAGS)
//   > LOCKSTEP_* environment variable > config.yaml > default.
// The YAML file is LOCKSTEP_CONFIG_FILE if set, else $XDG_CONFIG_HOME/lockstep/config.yaml, else
// ~/.config/lockstep/config.yaml (absent is fine; unreadable or malformed is a ConfigError with file:line:column).
// Every bad value is a ConfigError naming its source and the value. Unknown file keys become warnings.
// Logging's LOCKSTEP_LOG_DIR and LOCKSTEP_LOG_FORMAT are read by the logging layer (logging.hpp), not here.
//
// A setting is a field of Config (and of ConfigOverrides where code may set it) plus one row of the table in
// runtime/config/settings.cpp; that row alone gives it its parser, config.yaml key, variable, API override, source and
// describe() line.

#include <lockstep/export.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

enum class LogLevel { Debug, Info, Warning, Error, Critical };
[[nodiscard]] LOCKSTEP_API std::string_view log_level_name(LogLevel level) noexcept;  // "DEBUG", ...
// Parses DEBUG/INFO/WARNING/ERROR/CRITICAL in any case; nullopt otherwise.
[[nodiscard]] LOCKSTEP_API std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;
// Whether host tensors live in the node's shared-memory arena (shared_memory.hpp): auto uses it when two or more
// processes share a node, on also when a process is alone on its node, off never.
enum class ShmMode { Auto, On, Off };
[[nodiscard]] LOCKSTEP_API std::string_view shm_mode_name(ShmMode mode) noexcept;  // "auto", "on", "off"
// The thread level lockstep asks MPI for when it initialises MPI itself (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE).
enum class ThreadLevel { Single, Funneled, Serialized, Multiple };
[[nodiscard]] LOCKSTEP_API std::string_view thread_level_name(ThreadLevel level) noexcept;  // "single", ...
// What a call that outlives its communicator's watchdog timeout does: End prints the report and ends the job with exit
// code 124; Raise fails the call with a TimeoutError carrying the report on the processes that waited, and leaves the
// communicator broken (docs/collectives.md).
enum class OnTimeout { End, Raise };
[[nodiscard]] LOCKSTEP_API std::string_view on_timeout_name(OnTimeout mode) noexcept;  // "end", "raise"
// Which stacks a hang report takes of every process (docs/tracing.md): All the native frames of the thread that
// initialised lockstep (interrupted by a real-time signal, so that a sleep, poll or read of the program's own without
// a retry loop returns early with EINTR) and every thread's Python frames; Python the Python frames alone (no signal
// is sent); Off none.
enum class HangStacks { All, Python, Off };
[[nodiscard]] LOCKSTEP_API std::string_view hang_stacks_name(HangStacks which) noexcept;  // "all", "python", "off"
// Parses 1/0/true/false/yes/no/on/off in any case; nullopt otherwise.
[[nodiscard]] LOCKSTEP_API std::optional<bool> parse_bool(std::string_view text) noexcept;

// Values given in code; they win over everything else.
struct ConfigOverrides {
    std::optional<bool> debug;
    std::optional<LogLevel> log_level;
    std::optional<double> timeout;                // seconds; 0 turns the watchdog off
    std::optional<std::size_t> cpu_memory_limit;  // bytes
    std::optional<std::uint64_t> seed;
    std::optional<std::string> config_file;  // empty: read no config file
    std::optional<bool> cuda_aware;
    std::optional<std::size_t> staging_chunk_bytes;
    std::optional<std::string> watchdog_host;
    std::optional<std::string> trace_file;
    std::optional<std::string> trace_dir;
    std::optional<ShmMode> shm;
    std::optional<std::size_t> shm_arena_size;  // bytes per process
    std::optional<std::size_t> shm_threshold;   // bytes
    std::optional<std::size_t> shm_small_max;   // bytes
    std::optional<bool> progress_thread;
    std::optional<ThreadLevel> mpi_thread_level;
    std::optional<OnTimeout> on_timeout;
    std::optional<std::size_t> trace_calls;  // entries per communicator's flight recorder; 0 turns it off
    std::optional<HangStacks> hang_stacks;
};

// The environment the resolution reads; the process environment by default, a map in tests.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;
[[nodiscard]] LOCKSTEP_API EnvironmentLookup process_environment();
[[nodiscard]] LOCKSTEP_API EnvironmentLookup map_environment(std::map<std::string, std::string> vars);

struct LOCKSTEP_API Config {
    bool debug = false;
    LogLevel log_level = LogLevel::Warning;
    double timeout = 600.0;  // seconds a collective may take before it is reported as a hang; 0: no watchdog
    std::optional<std::size_t> cpu_memory_limit;  // cap of the host allocator in bytes
    std::uint64_t seed = 0;                       // seed of the default generator

    // Keys of an Accelerate-style config file that lockstep understands (launcher settings).
    std::optional<int> num_processes;
    std::optional<int> num_machines;
    std::optional<std::string> mixed_precision;  // no, fp16, bf16, fp8
    std::optional<std::string> compute_environment;
    std::optional<std::string> distributed_type;

    // Where MPI and the watchdog meet the machine.
    std::optional<bool> cuda_aware;  // whether MPI takes CUDA device pointers; unset: ask MPI at run time
    std::size_t staging_chunk_bytes = std::size_t{4} << 20;  // per copy when device data is staged through host memory
    std::optional<std::string> watchdog_host;  // address the watchdog publishes; unset: 127.0.0.1 on one node, else
                                               // the host name
    // Trace files (docs/tracing.md): trace_file asks for one at Runtime::finalize and names the file every dump
    // writes; trace_dir holds the dumps' files otherwise (unset: the working directory).
    std::optional<std::string> trace_file;
    std::optional<std::string> trace_dir;

    // The node's shared-memory arena for host tensors (shared_memory.hpp).
    ShmMode shm = ShmMode::Auto;
    std::optional<std::size_t> shm_arena_size;  // bytes of arena per process; unset: chosen from /dev/shm's free space
    std::size_t shm_threshold = std::size_t{64} << 10;  // host blocks of at least this many bytes come from the arena
    // Collectives of at most this many bytes on one node go through the arena's small-message path, wherever their
    // tensors lie (copied through per-process slots); 0: never.
    std::size_t shm_small_max = std::size_t{32} << 10;

    // Non-blocking collectives run on a progress thread per communicator (while the program computes); off: inside
    // wait() and test(). Needs MPI_THREAD_MULTIPLE, and is off without it whatever this says.
    bool progress_thread = true;

    // The thread level asked of MPI when lockstep initialises it (a program that initialises MPI itself chooses its
    // own). Multiple lets any thread call lockstep and non-blocking collectives run on a progress thread; a lower
    // level makes each MPI call cheaper (docs/collectives.md gives the cost) and turns the progress thread off, and
    // the program must then keep to that level's rule for its own calls.
    ThreadLevel mpi_thread_level = ThreadLevel::Multiple;

    // What a call that outlives the watchdog timeout does (OnTimeout); a communicator's CommunicatorOptions::on_timeout
    // wins over it.
    OnTimeout on_timeout = OnTimeout::End;

    // The flight recorder: how many of its last calls each communicator keeps (entries of a fixed size, allocated when
    // the communicator is made); 0 turns the recorder off.
    std::size_t trace_calls = 2048;

    // The stacks a hang report takes of every process (HangStacks).
    HangStacks hang_stacks = HangStacks::All;

    // Provenance: for each setting above that has a variable or was set, where its value came from ("default",
    // "environment LOCKSTEP_TIMEOUT", "launcher flag (LOCKSTEP_TIMEOUT)", "/path/config.yaml:3:10",
    // "API argument").
    std::map<std::string, std::string> sources;
    std::optional<std::string> config_file;  // the file that was read, if any
    std::vector<std::string> warnings;       // unknown keys and other things worth telling the user

    // Resolves from overrides, the environment and the config file. Throws ConfigError.
    [[nodiscard]] static Config resolve(const ConfigOverrides& overrides = {},
                                        const EnvironmentLookup& env = process_environment());
    // Parses one YAML file's settings into `into` (marking sources), without environment or overrides.
    static void load_file(const std::string& path, Config& into);

    // The settings as "key: value" lines with their sources, for `lockstep config --check` and `lockstep env`.
    [[nodiscard]] std::string describe() const;
};

// A setting as the table in runtime/config/settings.cpp declares it. The config file's location (config_file) is not
// one: it is chosen before any file is read, and a file cannot name another.
struct SettingInfo {
    std::string_view key;       // the config.yaml key, the Config::sources key and the describe() name
    const char* variable;       // its LOCKSTEP_* variable; nullptr for the launcher keys that only a config file sets
    std::string_view accepted;  // the values it takes, as a rejection lists them
};

// Every setting, in the order describe() lists them.
[[nodiscard]] LOCKSTEP_API std::span<const SettingInfo> config_settings() noexcept;

// Names of the environment variables: one per setting that has one, and the two that steer the resolution itself.
namespace env_names {
inline constexpr const char* debug = "LOCKSTEP_DEBUG_MODE";
inline constexpr const char* log_level = "LOCKSTEP_LOG_LEVEL";
inline constexpr const char* timeout = "LOCKSTEP_TIMEOUT";
inline constexpr const char* cpu_memory_limit = "LOCKSTEP_CPU_MEMORY_LIMIT";
inline constexpr const char* seed = "LOCKSTEP_SEED";
inline constexpr const char* cuda_aware = "LOCKSTEP_CUDA_AWARE";
inline constexpr const char* staging_chunk_bytes = "LOCKSTEP_STAGING_CHUNK_BYTES";
inline constexpr const char* watchdog_host = "LOCKSTEP_WATCHDOG_HOST";
inline constexpr const char* trace_file = "LOCKSTEP_TRACE_FILE";
inline constexpr const char* trace_dir = "LOCKSTEP_TRACE_DIR";
inline constexpr const char* shm = "LOCKSTEP_SHM";
inline constexpr const char* shm_arena_size = "LOCKSTEP_SHM_ARENA_SIZE";
inline constexpr const char* shm_threshold = "LOCKSTEP_SHM_THRESHOLD";
inline constexpr const char* shm_small_max = "LOCKSTEP_SHM_SMALL_MAX";
inline constexpr const char* progress_thread = "LOCKSTEP_PROGRESS_THREAD";
inline constexpr const char* mpi_thread_level = "LOCKSTEP_MPI_THREAD_LEVEL";
inline constexpr const char* on_timeout = "LOCKSTEP_ON_TIMEOUT";
inline constexpr const char* trace_calls = "LOCKSTEP_TRACE_CALLS";
inline constexpr const char* hang_stacks = "LOCKSTEP_HANG_STACKS";
inline constexpr const char* config_file = "LOCKSTEP_CONFIG_FILE";
inline constexpr const char* launcher_flags = "LOCKSTEP_LAUNCHER_FLAGS";  // comma-separated variable names
}  // namespace env_names

// The process-wide resolved Config: the Runtime's once it is initialised; before that, resolved from the environment
// on first use and cached.
[[nodiscard]] LOCKSTEP_API const Config& config();

namespace detail {
// A value as messages show it: in single quotes, with control characters escaped (\n, \x1b) so that it cannot forge
// lines or steer a terminal, and cut after its first 80 bytes with its length said, so that a huge value cannot
// flood a log: 'xxxx...' (50000000 bytes).
[[nodiscard]] std::string quote_value(std::string_view text);

// Makes `config` the one that config() returns from now on; the Runtime calls it once it has resolved its own.
// References returned by earlier calls of config() stay valid.
void install_config(Config config);
}  // namespace detail

}  // namespace lockstep
