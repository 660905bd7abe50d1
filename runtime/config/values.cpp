#include "values.hpp"

#include <lockstep/base/byte_size.hpp>
#include <lockstep/base/escape.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

namespace lockstep {

namespace config_detail {

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

bool equals_lowercase(std::string_view text, std::string_view word) {
    return lowercase(text) == word;
}

[[noreturn]] void reject(const std::string& source, std::string_view text, std::string_view what,
                         std::string_view accepted) {
    throw ConfigError(source, fmt::format("{} is not {}; accepted: {}", detail::quote_value(text), what, accepted));
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

// --- log levels

bool read_log_level(std::string_view text, LogLevel& level) {
    const auto parsed = parse_log_level(text);
    level = parsed.value_or(LogLevel::Warning);
    return parsed.has_value();
}

namespace {
bool is_enumerator(LogLevel level) {
    return level >= LogLevel::Debug && level <= LogLevel::Critical;
}
}  // namespace

// Only a cast in code can make a LogLevel that is none of its enumerators.
std::optional<std::string> refuse_log_level(const LogLevel& level) {
    if (is_enumerator(level)) return std::nullopt;
    return std::string("is not a LogLevel enumerator");
}

std::string show_log_level(const LogLevel& level) {
    return is_enumerator(level) ? std::string(log_level_name(level)) : fmt::format("{}", static_cast<int>(level));
}

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

// Chunks smaller than a page only multiply the copies and the messages.
constexpr std::size_t smallest_staging_chunk = 4096;

std::optional<std::string> refuse_staging_chunk(const std::size_t& bytes) {
    if (bytes >= smallest_staging_chunk) return std::nullopt;
    return fmt::format("is smaller than the smallest chunk, {} bytes", smallest_staging_chunk);
}

// --- numbers

std::optional<std::string> refuse_non_positive(const int& count) {
    if (count > 0) return std::nullopt;
    return std::string("is not positive");
}

// A ring of a million entries is over 200 MiB per communicator: a larger one is a typo, not a wish.
constexpr std::size_t most_trace_calls = std::size_t{1} << 20;

std::optional<std::string> refuse_trace_calls(const std::size_t& entries) {
    if (entries <= most_trace_calls) return std::nullopt;
    return fmt::format("is more than {} calls per communicator", most_trace_calls);
}

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

// --- where trace files go

bool read_path(std::string_view text, std::optional<std::string>& path) {
    path = text.empty() ? std::nullopt : std::optional<std::string>(text);
    return true;
}

std::optional<std::string> refuse_path(const std::optional<std::string>& path) {
    if (path && path->find('\0') != std::string::npos) return std::string("contains a NUL character");
    if (path && path->size() > 4095) return std::string("is longer than 4095 characters");
    return std::nullopt;
}

std::string show_trace_file(const std::optional<std::string>& path) {
    return path.value_or("none");
}

std::string show_trace_dir(const std::optional<std::string>& path) {
    return path.value_or(".");
}

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

bool read_thread_level(std::string_view text, ThreadLevel& level) {
    for (ThreadLevel l : {ThreadLevel::Single, ThreadLevel::Funneled, ThreadLevel::Serialized, ThreadLevel::Multiple}) {
        const std::string_view name = thread_level_name(l);
        if (equals_lowercase(text, name) || equals_lowercase(text, std::string("mpi_thread_") + std::string(name))) {
            level = l;
            return true;
        }
    }
    return false;
}

std::string show_thread_level(const ThreadLevel& level) {
    return std::string(thread_level_name(level));
}

bool read_on_timeout(std::string_view text, OnTimeout& mode) {
    for (OnTimeout m : {OnTimeout::End, OnTimeout::Raise}) {
        if (equals_lowercase(text, on_timeout_name(m))) {
            mode = m;
            return true;
        }
    }
    return false;
}

std::string show_on_timeout(const OnTimeout& mode) {
    return std::string(on_timeout_name(mode));
}

bool read_hang_stacks(std::string_view text, HangStacks& which) {
    for (HangStacks h : {HangStacks::All, HangStacks::Python, HangStacks::Off}) {
        if (equals_lowercase(text, hang_stacks_name(h))) {
            which = h;
            return true;
        }
    }
    return false;
}

std::string show_hang_stacks(const HangStacks& which) {
    return std::string(hang_stacks_name(which));
}

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

}  // namespace config_detail

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

namespace detail {
std::string quote_value(std::string_view text) {
    return base::quote_value(text);
}
}  // namespace detail

}  // namespace lockstep
