#pragma once
// Rank-aware logging on Boost.Log.
//
// A Logger is a named handle: `auto log = lockstep::get_logger("train");`. Each record carries the time, level, logger
// name, rank/size and host name:
//   2026-12-02 11:20:31.512 INFO  [rank 1/4 node2] train: loss 0.42
//
// Where a record is emitted is chosen per call:
//   (default)                   by the main process (rank 0) only; the other ranks do not even format the message;
//   lockstep::every_rank        by every rank, each its own record;
//   lockstep::in_rank_order     every rank's record, in rank order, as one block written by rank 0. This is a
//                               collective: the records are gathered to rank 0 (MPI_Gather of their lengths, then one
//                               MPI_Gatherv of the records) on a duplicate of the Runtime's communicator, so the order
//                               holds whatever the launcher does with the processes' pipes, and a call costs two
//                               collectives whatever the number of ranks. Every rank must make the call, and every
//                               rank takes part whatever its own level: a rank whose level filters the record sends an
//                               empty one, so ranks that disagree about the level cannot deadlock. Like any collective,
//                               in-order calls must be made in the same order on every rank.
// Before the Runtime is initialised the identity comes from the launcher's variables. In-order calls need MPI: with
// MPI not running (before init, after finalize) each rank writes its own record at once, and a warning says that
// these records are not ordered.
//
// Level: get_logger(name, level) sets it; otherwise the logger follows lockstep::config().log_level, which comes from
// LOCKSTEP_LOG_LEVEL (DEBUG, INFO, WARNING, ERROR, CRITICAL, any case; a bad value is a ConfigError), else the config
// file, else WARNING (a level given to Runtime::init wins over the variable, as for every setting).
//
// Sinks: stderr (level colours on a TTY only, never with NO_COLOR set or TERM=dumb), optional per-rank files in
// LOCKSTEP_LOG_DIR (rank-<r>.log, or rank-<r>.jsonl), JSON lines instead of text with LOCKSTEP_LOG_FORMAT=json.
// lockstep adds its own sinks to the Boost.Log core, each filtered on lockstep's own attribute so that it takes only
// lockstep's records; it sets no core filter and no global attribute. Each lockstep record also carries the usual
// "Channel" ("lockstep") and "Severity" (boost::log::trivial::severity_level) attributes, so that a host application's
// sinks can select or exclude lockstep's records; note that Boost.Log stops using its default sink once any sink is
// registered, lockstep's included.
//
// lockstep's own messages (debug-mode reports, timeouts, OOM retries, system warnings) use loggers named "lockstep"
// or "lockstep.<layer>".

#include <lockstep/config.hpp>
#include <lockstep/export.hpp>

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep {

// How one call is emitted across the processes of the job. in_order implies every rank (main_process_only is then
// ignored).
struct LogOptions {
    bool main_process_only = true;
    bool in_order = false;
};
inline constexpr LogOptions main_process_only{};
inline constexpr LogOptions every_rank{.main_process_only = false};
inline constexpr LogOptions in_rank_order{.main_process_only = false, .in_order = true};

// One record as the sinks see it. In an in-order block, rank/size/host are those of the rank that made the record.
struct LogRecord {
    std::chrono::system_clock::time_point time;
    LogLevel level = LogLevel::Info;
    std::string logger;
    int rank = 0;
    int size = 1;
    std::string host;
    std::string message;
};
// The records of one emission: one for a local record, one per contributing rank (in rank order) for an in-order call.
using LogBlock = std::vector<LogRecord>;

// "2026-12-02 11:20:31.512 INFO  [rank 1/4 node2] train: loss 0.42" in local time, without a newline. With colour the
// level name is wrapped in ANSI escapes.
[[nodiscard]] LOCKSTEP_API std::string format_text(const LogRecord& record, bool colour = false);
// One JSON object on one line, without a newline: time (ISO 8601, local, with offset), level, logger, rank, size,
// host, message. Bytes that are not UTF-8 become U+FFFD.
[[nodiscard]] LOCKSTEP_API std::string format_json(const LogRecord& record);

enum class LogFormat { Text, Json };

// Where lockstep writes its records.
struct LoggingOptions {
    bool console = true;                     // stderr
    std::optional<std::string> directory{};  // one file per rank in this folder, created if missing
    LogFormat format = LogFormat::Text;
    std::optional<bool> colour{};  // colour the level on stderr; unset: only when stderr is a terminal
};

namespace logging_env {
inline constexpr const char* directory = "LOCKSTEP_LOG_DIR";
inline constexpr const char* format = "LOCKSTEP_LOG_FORMAT";  // text or json, any case
}  // namespace logging_env

// The options the environment asks for. Throws ConfigError naming the variable for a bad LOCKSTEP_LOG_FORMAT.
[[nodiscard]] LOCKSTEP_API LoggingOptions
logging_options_from_environment(const EnvironmentLookup& env = process_environment());
// Replaces lockstep's sinks (and only those) by the ones `options` asks for. Without a call, the first logger or
// record sets them up from the environment. Throws ConfigError when the directory cannot be created.
LOCKSTEP_API void configure_logging(const LoggingOptions& options);

// The Boost.Log attributes on lockstep's records, for sinks of a host application.
namespace log_attributes {
inline constexpr const char* records = "lockstep.Records";  // std::shared_ptr<const lockstep::LogBlock>
inline constexpr const char* route = "lockstep.Route";      // unsigned: a combination of the log_route bits
}  // namespace log_attributes
namespace log_route {
// Text for the job's output: local records, and the block of an in-order call (on rank 0).
inline constexpr unsigned console = 1u;
// Text for this rank's own file: local records, and this rank's own record of an in-order call.
inline constexpr unsigned rank_file = 2u;
}  // namespace log_route

namespace detail {
struct LoggerState;
}

class LOCKSTEP_API Logger {
public:
    [[nodiscard]] const std::string& name() const noexcept;
    // The level set on this logger, or else the process default (lockstep::config().log_level).
    [[nodiscard]] LogLevel level() const;
    // Sets the level of this logger, for every handle of the same name.
    void set_level(LogLevel level) const;
    // Makes the logger follow the process default again.
    void reset_level() const;
    [[nodiscard]] bool enabled_for(LogLevel level) const {
        return static_cast<int>(level) >= static_cast<int>(this->level());
    }

    template <typename... Args>
    void log(LogLevel level, LogOptions options, fmt::format_string<Args...> format, Args&&... args) const {
        if (options.in_order) {
            std::optional<std::string> message;
            if (enabled_for(level)) message = fmt::format(format, std::forward<Args>(args)...);
            emit_in_order(level, std::move(message));
        } else if (will_emit(level, options)) {
            emit(level, fmt::format(format, std::forward<Args>(args)...));
        }
    }

    template <typename... Args>
    void debug(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Debug, {}, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void debug(LogOptions options, fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Debug, options, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void info(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Info, {}, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void info(LogOptions options, fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Info, options, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void warning(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Warning, {}, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void warning(LogOptions options, fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Warning, options, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void error(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Error, {}, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void error(LogOptions options, fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Error, options, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void critical(fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Critical, {}, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void critical(LogOptions options, fmt::format_string<Args...> format, Args&&... args) const {
        log(LogLevel::Critical, options, format, std::forward<Args>(args)...);
    }

    // A warning emitted once per distinct message text and logger, in this process. In-order, a rank that has
    // already emitted the text still takes part in the collective, with an empty record.
    template <typename... Args>
    void warning_once(fmt::format_string<Args...> format, Args&&... args) const {
        warning_once(LogOptions{}, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void warning_once(LogOptions options, fmt::format_string<Args...> format, Args&&... args) const {
        if (options.in_order) {
            std::optional<std::string> message;
            if (enabled_for(LogLevel::Warning)) {
                std::string text = fmt::format(format, std::forward<Args>(args)...);
                if (first_time(text)) message = std::move(text);
            }
            emit_in_order(LogLevel::Warning, std::move(message));
        } else if (will_emit(LogLevel::Warning, options)) {
            std::string text = fmt::format(format, std::forward<Args>(args)...);
            if (first_time(text)) emit(LogLevel::Warning, std::move(text));
        }
    }

    // Whether a call that is not in-order would be emitted by this process (level and main-process rule): a guard for
    // work done only to build a message.
    [[nodiscard]] bool will_emit(LogLevel level, LogOptions options) const;

private:
    friend LOCKSTEP_API Logger get_logger(std::string_view name);
    friend LOCKSTEP_API Logger get_logger(std::string_view name, LogLevel level);
    friend class LogStream;
    // Emits an already formatted message on this process; the caller has applied the rules.
    void emit(LogLevel level, std::string message) const;
    // The in-order collective; `message` is empty on a rank whose record is filtered.
    void emit_in_order(LogLevel level, std::optional<std::string> message) const;
    explicit Logger(std::shared_ptr<detail::LoggerState> state) : state_(std::move(state)) {}
    // Remembers `message` for warning_once; false if it was seen before.
    [[nodiscard]] bool first_time(const std::string& message) const;

    std::shared_ptr<detail::LoggerState> state_;
};

// The logger of this name (the same state for every call with the name). Throws ConfigError when the process default
// level or the sinks' settings in the environment are invalid.
[[nodiscard]] LOCKSTEP_API Logger get_logger(std::string_view name);
// The same, and sets the logger's level (the process default is then not consulted).
[[nodiscard]] LOCKSTEP_API Logger get_logger(std::string_view name, LogLevel level);

// One record built with operator<<, for the LOCKSTEP_LOG_* macros. The message is only built when this process
// contributes it; finish() emits it, and for an in-order record takes part in the collective in any case.
class LOCKSTEP_API LogStream {
public:
    LogStream(Logger logger, LogLevel level, LogOptions options = {});
    [[nodiscard]] bool active() const noexcept { return text_.has_value(); }
    [[nodiscard]] std::ostream& stream() { return *text_; }
    [[nodiscard]] bool done() const noexcept { return done_; }
    void finish();

private:
    Logger logger_;
    LogLevel level_;
    LogOptions options_;
    std::optional<std::ostringstream> text_;
    bool done_ = false;
};

}  // namespace lockstep

// Stream style, with optional per-call options:
//   LOCKSTEP_LOG_INFO(log) << "loss " << loss;
//   LOCKSTEP_LOG_INFO(log, lockstep::in_rank_order) << "loss " << loss;
// The operands are evaluated only when this process contributes the record. Safe inside an unbraced if/else.
#define LOCKSTEP_LOG(logger, level, ...)                                                          \
    for (::lockstep::LogStream lockstep_log_stream_((logger), (level)__VA_OPT__(, ) __VA_ARGS__); \
         !lockstep_log_stream_.done(); lockstep_log_stream_.finish())                             \
        if (!lockstep_log_stream_.active()) {                                                     \
        } else                                                                                    \
            lockstep_log_stream_.stream()
#define LOCKSTEP_LOG_DEBUG(logger, ...) LOCKSTEP_LOG(logger, ::lockstep::LogLevel::Debug __VA_OPT__(, ) __VA_ARGS__)
#define LOCKSTEP_LOG_INFO(logger, ...) LOCKSTEP_LOG(logger, ::lockstep::LogLevel::Info __VA_OPT__(, ) __VA_ARGS__)
#define LOCKSTEP_LOG_WARNING(logger, ...) LOCKSTEP_LOG(logger, ::lockstep::LogLevel::Warning __VA_OPT__(, ) __VA_ARGS__)
#define LOCKSTEP_LOG_ERROR(logger, ...) LOCKSTEP_LOG(logger, ::lockstep::LogLevel::Error __VA_OPT__(, ) __VA_ARGS__)
#define LOCKSTEP_LOG_CRITICAL(logger, ...) \
    LOCKSTEP_LOG(logger, ::lockstep::LogLevel::Critical __VA_OPT__(, ) __VA_ARGS__)
