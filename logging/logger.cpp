// Loggers: the registry of named loggers, their levels, and the main-process rule for records emitted locally.

#include "emission.hpp"

#include <lockstep/internal/warnings.hpp>
#include <lockstep/runtime.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_set>

namespace lockstep {

namespace detail {
struct LoggerState {
    explicit LoggerState(std::string logger_name) : name(std::move(logger_name)) {}
    const std::string name;
    static constexpr int follow_default = -1;
    std::atomic<int> level{follow_default};  // a LogLevel, or follow_default
    std::mutex once_mutex;
    std::unordered_set<std::string> once_seen;
};
}  // namespace detail

namespace {

struct LoggerRegistry {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<detail::LoggerState>, std::less<>> loggers;
};
LoggerRegistry& logger_registry() {
    static LoggerRegistry registry;
    return registry;
}

// The identity records are stamped with. Reading it from the launcher's variables costs a scan of the environment
// and a gethostname, so it is kept until the Runtime comes or goes.
struct IdentityCache {
    std::mutex mutex;
    bool valid = false;
    const Runtime* runtime = nullptr;
    ProcessIdentity identity;
};
IdentityCache& identity_cache() {
    static IdentityCache cache;
    return cache;
}

ProcessIdentity record_identity() {
    const Runtime* runtime = Runtime::initialized() ? &Runtime::get() : nullptr;
    auto& cache = identity_cache();
    std::scoped_lock lock(cache.mutex);
    if (!cache.valid || cache.runtime != runtime) {
        cache.identity = runtime != nullptr ? runtime->identity() : identity_from_environment();
        cache.runtime = runtime;
        cache.valid = true;
    }
    return cache.identity;
}

}  // namespace

namespace detail {
LogRecord local_record(LogLevel level, const std::string& logger, std::string message) {
    const auto now = std::chrono::system_clock::now();
    ProcessIdentity id = record_identity();
    return LogRecord{now, level, logger, id.rank, id.size, std::move(id.hostname), std::move(message)};
}
}  // namespace detail

const std::string& Logger::name() const noexcept {
    return state_->name;
}

LogLevel Logger::level() const {
    const int set = state_->level.load(std::memory_order_relaxed);
    if (set != detail::LoggerState::follow_default) return static_cast<LogLevel>(set);
    return config().log_level;
}

void Logger::set_level(LogLevel level) const {
    state_->level.store(static_cast<int>(level), std::memory_order_relaxed);
}

void Logger::reset_level() const {
    state_->level.store(detail::LoggerState::follow_default, std::memory_order_relaxed);
}

bool Logger::will_emit(LogLevel level, LogOptions options) const {
    if (!enabled_for(level)) return false;
    if (options.in_order || !options.main_process_only) return true;
    return record_identity().is_main_process();
}

void Logger::emit(LogLevel level, std::string message) const {
    auto block = std::make_shared<LogBlock>();
    block->push_back(detail::local_record(level, state_->name, std::move(message)));
    detail::push_log_block(std::move(block), log_route::console | log_route::rank_file);
}

bool Logger::first_time(const std::string& message) const {
    std::scoped_lock lock(state_->once_mutex);
    return state_->once_seen.insert(message).second;
}

namespace {
std::shared_ptr<detail::LoggerState> logger_state(std::string_view name) {
    detail::ensure_logging_configured();
    auto& registry = logger_registry();
    std::scoped_lock lock(registry.mutex);
    auto it = registry.loggers.find(name);
    if (it == registry.loggers.end()) {
        it =
            registry.loggers.emplace(std::string(name), std::make_shared<detail::LoggerState>(std::string(name))).first;
    }
    return it->second;
}
}  // namespace

Logger get_logger(std::string_view name) {
    Logger logger(logger_state(name));
    // Resolving the default now reports a bad LOCKSTEP_LOG_LEVEL where the logger is made, not at its first record.
    (void)logger.level();
    return logger;
}

namespace {
// The runtime layer's warnings (it cannot include logging) become records of every rank on their channel's logger, from
// the moment this library is loaded.
void warning_record(std::string_view channel, std::string_view text) {
    get_logger(channel).warning(every_rank, "{}", text);
}
[[maybe_unused]] const bool warning_sink_installed = (detail::set_warning_sink(&warning_record), true);
}  // namespace

Logger get_logger(std::string_view name, LogLevel level) {
    Logger logger(logger_state(name));
    logger.set_level(level);
    return logger;
}

LogStream::LogStream(Logger logger, LogLevel level, LogOptions options)
    : logger_(std::move(logger)), level_(level), options_(options) {
    const bool contributes = options_.in_order ? logger_.enabled_for(level_) : logger_.will_emit(level_, options_);
    if (contributes) text_.emplace();
}

void LogStream::finish() {
    done_ = true;
    if (options_.in_order) {
        std::optional<std::string> message;
        if (text_) message = std::move(*text_).str();
        logger_.emit_in_order(level_, std::move(message));
    } else if (text_) {
        logger_.emit(level_, std::move(*text_).str());
    }
}

}  // namespace lockstep
