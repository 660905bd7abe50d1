#pragma once
// The kinds of value a setting holds (booleans, log levels, durations, byte sizes, names, ...): how each is read from
// text (the environment, config.yaml), checked and shown. Every source of a setting reads it through its kind, so the
// environment and the file accept the same spellings and refuse a bad value in the same words, and an API argument is
// held to the same rules.

#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <fmt/core.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace lockstep::config_detail {

[[nodiscard]] std::string_view trim(std::string_view text);
[[nodiscard]] std::string lowercase(std::string_view text);
[[nodiscard]] bool equals_lowercase(std::string_view text, std::string_view word);

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

// Throws the ConfigError of a value that is not a spelling of its kind.
[[noreturn]] void reject(const std::string& source, std::string_view text, std::string_view what,
                         std::string_view accepted);

// The value `text` spells, checked; a ConfigError naming `source` when it spells none or one that cannot be used.
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

// --- booleans

bool read_bool(std::string_view text, bool& value);
std::string show_bool(const bool& value);
inline constexpr Kind<bool> boolean_kind{"a boolean", "1/0, true/false, yes/no or on/off, in any case", read_bool,
                                         nullptr, show_bool};

// --- log levels

bool read_log_level(std::string_view text, LogLevel& level);
std::optional<std::string> refuse_log_level(const LogLevel& level);
std::string show_log_level(const LogLevel& level);
inline constexpr Kind<LogLevel> log_level_kind{"a log level", "DEBUG, INFO, WARNING, ERROR or CRITICAL, in any case",
                                               read_log_level, refuse_log_level, show_log_level};

// --- the timeout: 0 is "no watchdog", as it is for CommunicatorOptions::timeout

bool read_timeout(std::string_view text, double& seconds);
std::optional<std::string> refuse_timeout(const double& seconds);
std::string show_timeout(const double& seconds);
inline constexpr Kind<double> timeout_kind{
    "a timeout",
    "a positive number of seconds, optionally with the unit s, m (minutes) or h, e.g. 30, 90s, 1.5m, 2h; "
    "or 0 (also off or none) for no hang watchdog",
    read_timeout, refuse_timeout, show_timeout};

// --- sizes in bytes

bool read_bytes(std::string_view text, std::size_t& bytes);
std::string show_bytes(const std::size_t& bytes);
bool read_memory_limit(std::string_view text, std::optional<std::size_t>& cap);
std::optional<std::string> refuse_memory_limit(const std::optional<std::size_t>& cap);
std::string show_memory_limit(const std::optional<std::size_t>& cap);
inline constexpr Kind<std::optional<std::size_t>> memory_limit_kind{
    "a memory size",
    "a positive size such as 512MiB, 2GiB, 1.5GB or a plain number of bytes, or 'none' (or empty) for no cap",
    read_memory_limit, refuse_memory_limit, show_memory_limit};

std::optional<std::string> refuse_staging_chunk(const std::size_t& bytes);
inline constexpr Kind<std::size_t> staging_chunk_kind{
    "a chunk size", "a size of at least 4KiB such as 64KiB, 4MiB or a plain number of bytes", read_bytes,
    refuse_staging_chunk, show_bytes};

// --- numbers

inline constexpr Kind<std::uint64_t> seed_kind{"a seed", "an unsigned 64-bit integer, 0 to 18446744073709551615",
                                               read_integer<std::uint64_t>, nullptr, show_number<std::uint64_t>};

std::optional<std::string> refuse_non_positive(const int& count);
inline constexpr Kind<int> process_count_kind{"a number of processes", "a positive integer", read_integer<int>,
                                              refuse_non_positive, show_number<int>};
inline constexpr Kind<int> machine_count_kind{"a number of machines", "a positive integer", read_integer<int>,
                                              refuse_non_positive, show_number<int>};

// --- names

bool read_mixed_precision(std::string_view text, std::string& mode);
bool read_name(std::string_view text, std::string& name);
std::string show_text(const std::string& text);
inline constexpr Kind<std::string> mixed_precision_kind{"a mixed-precision mode", "no, fp16, bf16 or fp8",
                                                        read_mixed_precision, nullptr, show_text};
inline constexpr Kind<std::string> compute_environment_kind{"a compute environment", "a non-empty name", read_name,
                                                            nullptr, show_text};
inline constexpr Kind<std::string> distributed_type_kind{"a distributed type", "a non-empty name", read_name, nullptr,
                                                         show_text};

// --- whether MPI is CUDA-aware: unset asks MPI at run time, a value overrides what MPI says of itself

bool read_cuda_aware(std::string_view text, std::optional<bool>& aware);
std::string show_cuda_aware(const std::optional<bool>& aware);
inline constexpr Kind<std::optional<bool>> cuda_aware_kind{
    "a boolean or 'auto'", "1/0, true/false, yes/no or on/off, in any case, or auto to ask MPI", read_cuda_aware,
    nullptr, show_cuda_aware};

// --- the address the watchdog publishes

bool read_watchdog_host(std::string_view text, std::optional<std::string>& host);
std::optional<std::string> refuse_watchdog_host(const std::optional<std::string>& host);
std::string show_watchdog_host(const std::optional<std::string>& host);
inline constexpr Kind<std::optional<std::string>> watchdog_host_kind{
    "a host name or IPv4 address",
    "a host name or IPv4 address of at most 63 letters, digits, '-', '_' and '.', or empty for the default "
    "(127.0.0.1 on one node, else the host name)",
    read_watchdog_host, refuse_watchdog_host, show_watchdog_host};

// --- where trace files go (docs/tracing.md)

bool read_path(std::string_view text, std::optional<std::string>& path);
std::optional<std::string> refuse_path(const std::optional<std::string>& path);
std::string show_trace_file(const std::optional<std::string>& path);
std::string show_trace_dir(const std::optional<std::string>& path);
inline constexpr Kind<std::optional<std::string>> trace_file_kind{
    "a file path", "a file path (the trace written at exit, and by any dump), or empty for none", read_path,
    refuse_path, show_trace_file};
inline constexpr Kind<std::optional<std::string>> trace_dir_kind{
    "a directory path", "a directory path for trace files, or empty for the working directory", read_path, refuse_path,
    show_trace_dir};

// --- the shared-memory arena

bool read_shm_mode(std::string_view text, ShmMode& mode);
std::string show_shm_mode(const ShmMode& mode);
inline constexpr Kind<ShmMode> shm_mode_kind{
    "a shared-memory mode",
    "auto (the arena when two or more processes share a node), on (also for a process alone on its node) or off; "
    "on/off also as 1/0, true/false, yes/no",
    read_shm_mode, nullptr, show_shm_mode};

bool read_arena_size(std::string_view text, std::optional<std::size_t>& bytes);
std::optional<std::string> refuse_arena_size(const std::optional<std::size_t>& bytes);
std::string show_arena_size(const std::optional<std::size_t>& bytes);
inline constexpr Kind<std::optional<std::size_t>> arena_size_kind{
    "an arena size",
    "a positive size per process such as 512MiB or 4GiB (rounded up to 2 MiB), or auto (half of /dev/shm's free "
    "space shared among the node's processes, at most 16 GiB each)",
    read_arena_size, refuse_arena_size, show_arena_size};

inline constexpr Kind<std::size_t> shm_threshold_kind{
    "a threshold size", "a size such as 64KiB or 1MiB, or a plain number of bytes (0: every host block)", read_bytes,
    nullptr, show_bytes};

bool read_thread_level(std::string_view text, ThreadLevel& level);
std::string show_thread_level(const ThreadLevel& level);
inline constexpr Kind<ThreadLevel> thread_level_kind{
    "an MPI thread level", "single, funneled, serialized or multiple (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE)",
    read_thread_level, nullptr, show_thread_level};

inline constexpr Kind<std::size_t> shm_small_max_kind{
    "a small-message size", "a size such as 16KiB or 32KiB, or a plain number of bytes (0: no small-message path)",
    read_bytes, nullptr, show_bytes};

// --- the flight recorder

std::optional<std::string> refuse_trace_calls(const std::size_t& entries);
inline constexpr Kind<std::size_t> trace_calls_kind{
    "a number of recorded calls", "a number of calls per communicator, 0 to 1048576 (0: no flight recorder)",
    read_integer<std::size_t>, refuse_trace_calls, show_number<std::size_t>};

// --- what a timeout does

bool read_on_timeout(std::string_view text, OnTimeout& mode);
std::string show_on_timeout(const OnTimeout& mode);
inline constexpr Kind<OnTimeout> on_timeout_kind{
    "a timeout action",
    "end (print the watchdog's report and end the job with exit code 124) or raise (a TimeoutError on the processes "
    "that waited)",
    read_on_timeout, nullptr, show_on_timeout};

// --- the stacks of a hang report

bool read_hang_stacks(std::string_view text, HangStacks& which);
std::string show_hang_stacks(const HangStacks& which);
inline constexpr Kind<HangStacks> hang_stacks_kind{
    "a choice of stacks",
    "all (native frames, taken by a signal, and Python frames), python (Python frames alone, no signal) or off",
    read_hang_stacks, nullptr, show_hang_stacks};

}  // namespace lockstep::config_detail
