// The two renderings of a record: one line of text, or one JSON object.

#include <lockstep/logging.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ctime>

namespace lockstep {

namespace {

struct LocalTime {
    std::tm fields{};
    int milliseconds = 0;
};

LocalTime local_time(std::chrono::system_clock::time_point time) {
    using namespace std::chrono;
    const auto since_epoch = floor<milliseconds>(time.time_since_epoch());
    const auto seconds_part = floor<seconds>(since_epoch);
    const std::time_t t = seconds_part.count();
    LocalTime local;
    localtime_r(&t, &local.fields);
    local.milliseconds = static_cast<int>((since_epoch - seconds_part).count());
    return local;
}

std::string_view level_colour(LogLevel level) {
    switch (level) {
        case LogLevel::Debug:
            return "\033[2m";  // dim
        case LogLevel::Info:
            return "\033[32m";  // green
        case LogLevel::Warning:
            return "\033[33m";  // yellow
        case LogLevel::Error:
            return "\033[31m";  // red
        case LogLevel::Critical:
            return "\033[1;31m";  // bold red
    }
    return "";
}

}  // namespace

std::string format_text(const LogRecord& record, bool colour) {
    const LocalTime t = local_time(record.time);
    const std::string_view name = log_level_name(record.level);
    // Pad to the width of "DEBUG" outside the escapes, so that coloured and plain lines align the same way.
    const std::string padding(name.size() < 5 ? 5 - name.size() : 0, ' ');
    const std::string level = colour ? fmt::format("{}{}\033[0m{}", level_colour(record.level), name, padding)
                                     : fmt::format("{}{}", name, padding);
    return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} {} [rank {}/{} {}] {}: {}", t.fields.tm_year + 1900,
                       t.fields.tm_mon + 1, t.fields.tm_mday, t.fields.tm_hour, t.fields.tm_min, t.fields.tm_sec,
                       t.milliseconds, level, record.rank, record.size, record.host, record.logger, record.message);
}

std::string format_json(const LogRecord& record) {
    const LocalTime t = local_time(record.time);
    const long offset_minutes = t.fields.tm_gmtoff / 60;
    const char sign = offset_minutes < 0 ? '-' : '+';
    const long offset = offset_minutes < 0 ? -offset_minutes : offset_minutes;
    const std::string time =
        fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}{}{:02}:{:02}", t.fields.tm_year + 1900,
                    t.fields.tm_mon + 1, t.fields.tm_mday, t.fields.tm_hour, t.fields.tm_min, t.fields.tm_sec,
                    t.milliseconds, sign, offset / 60, offset % 60);
    nlohmann::ordered_json object = {
        {"time", time},
        {"level", log_level_name(record.level)},
        {"logger", record.logger},
        {"rank", record.rank},
        {"size", record.size},
        {"host", record.host},
        {"message", record.message},
    };
    // A message may hold any bytes; a log line must never throw for that.
    return object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace lockstep
