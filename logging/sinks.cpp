// lockstep's Boost.Log sinks (stderr and one file per rank) and the one place that hands records to the core.
//
// Every lockstep record is one Boost.Log record whose "lockstep.Records" attribute holds a block of LogRecords and
// whose "lockstep.Route" attribute says which kind of sink it is meant for. lockstep's sinks filter on that attribute,
// so they never take a host application's records; lockstep touches nothing else in the core (no core filter, no
// global attribute). A sink writes a whole block with one write, so that an in-order block stays in one piece.

#include "emission.hpp"

#include <lockstep/errors.hpp>

#include <boost/log/attributes/constant.hpp>
#include <boost/log/core.hpp>
#include <boost/log/expressions/message.hpp>
#include <boost/log/sinks/basic_sink_backend.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sources/record_ostream.hpp>
#include <boost/log/trivial.hpp>
#include <boost/shared_ptr.hpp>
#include <boost/smart_ptr/make_shared_object.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

namespace lockstep {

namespace blog = boost::log;

namespace {

using BlockPointer = std::shared_ptr<const LogBlock>;

std::string render(const LogBlock& block, LogFormat format, bool colour) {
    std::string out;
    out.reserve(block.size() * 128);
    for (const LogRecord& record : block) {
        out += format == LogFormat::Json ? format_json(record) : format_text(record, colour);
        out += '\n';
    }
    return out;
}

// The text of a record for a sink: plain text is already in the record's "Message" (push_log_block put it there for
// the host's sinks), the other renderings are made here.
std::string sink_text(const blog::record_view& record, const LogBlock& block, LogFormat format, bool colour) {
    if (format == LogFormat::Text && !colour) {
        if (const auto message = record[blog::expressions::smessage]) {
            std::string out;
            out.reserve(message->size() + 1);
            out.append(*message).push_back('\n');
            return out;
        }
    }
    return render(block, format, colour);
}

void write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t written = ::write(fd, bytes.data(), bytes.size());
        if (written < 0) {
            if (errno == EINTR) continue;
            return;  // stderr closed or full disk: nothing sensible is left to report the failure to
        }
        bytes.remove_prefix(static_cast<std::size_t>(written));
    }
}

bool stderr_wants_colour() {
    if (::isatty(STDERR_FILENO) == 0) return false;
    const char* no_colour = std::getenv("NO_COLOR");  // https://no-color.org
    if (no_colour != nullptr && no_colour[0] != '\0') return false;
    const char* term = std::getenv("TERM");
    return term == nullptr || std::string_view(term) != "dumb";
}

class ConsoleBackend : public blog::sinks::basic_sink_backend<blog::sinks::synchronized_feeding> {
public:
    ConsoleBackend(LogFormat format, bool colour) : format_(format), colour_(colour) {}

    void consume(const blog::record_view& record) {
        const auto block = blog::extract<BlockPointer>(log_attributes::records, record);
        if (!block || !*block) return;
        // Whatever the program wrote through stdio goes out first, so that lines keep the order they were made in.
        std::fflush(stderr);
        write_all(STDERR_FILENO, sink_text(record, **block, format_, colour_));
    }

private:
    LogFormat format_;
    bool colour_;
};

struct FileCloser {
    void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};

// Appends to <directory>/rank-<r>.log (or .jsonl), r being the rank of the records it receives, which are always
// this process's own; the file is reopened if the rank changes (a Runtime on a communicator other than the world).
class RankFileBackend : public blog::sinks::basic_sink_backend<blog::sinks::synchronized_feeding> {
public:
    RankFileBackend(std::filesystem::path directory, LogFormat format)
        : directory_(std::move(directory)), format_(format) {}

    void consume(const blog::record_view& record) {
        const auto block = blog::extract<BlockPointer>(log_attributes::records, record);
        if (!block || !*block || (*block)->empty()) return;
        const int rank = (*block)->front().rank;
        if (!file_ || rank != rank_) open(rank);
        const std::string text = sink_text(record, **block, format_, false);
        // Flushed per record: a rank's file should hold everything up to the moment the process died.
        if (std::fwrite(text.data(), 1, text.size(), file_.get()) != text.size() || std::fflush(file_.get()) != 0) {
            throw Error(fmt::format("lockstep logging: cannot write to {}: {}", path_.string(), std::strerror(errno)));
        }
    }

private:
    void open(int rank) {
        path_ = directory_ / fmt::format("rank-{}.{}", rank, format_ == LogFormat::Json ? "jsonl" : "log");
        file_.reset(std::fopen(path_.c_str(), "a"));
        if (!file_) {
            throw Error(fmt::format("lockstep logging: cannot open {}: {}", path_.string(), std::strerror(errno)));
        }
        rank_ = rank;
    }

    std::filesystem::path directory_;
    LogFormat format_;
    std::filesystem::path path_;
    std::unique_ptr<std::FILE, FileCloser> file_;
    int rank_ = -1;
};

struct RouteFilter {
    unsigned route_bit;
    bool operator()(const blog::attribute_value_set& values) const {
        const auto route = blog::extract<unsigned>(log_attributes::route, values);
        return route && (*route & route_bit) != 0;
    }
};

struct SinkState {
    std::mutex mutex;
    std::atomic<bool> configured{false};
    std::atomic<bool> rank_files{false};
    boost::shared_ptr<blog::sinks::sink> console;
    boost::shared_ptr<blog::sinks::sink> rank_file;
    // Names are interned by Boost.Log under a lock; made once.
    const blog::attribute_name records_name{log_attributes::records};
    const blog::attribute_name route_name{log_attributes::route};
    const blog::attribute_name channel_name{"Channel"};
    const blog::attribute_name severity_name{"Severity"};
    const blog::attributes::constant<std::string> channel{"lockstep"};
};

SinkState& sink_state() {
    static SinkState state;
    return state;
}

blog::trivial::severity_level trivial_severity(LogLevel level) {
    switch (level) {
        case LogLevel::Debug:
            return blog::trivial::debug;
        case LogLevel::Info:
            return blog::trivial::info;
        case LogLevel::Warning:
            return blog::trivial::warning;
        case LogLevel::Error:
            return blog::trivial::error;
        case LogLevel::Critical:
            return blog::trivial::fatal;
    }
    return blog::trivial::fatal;
}

// `directory_source` names where the directory came from, for the error when it cannot be created.
void install_sinks(SinkState& state, const LoggingOptions& options, const std::string& directory_source) {
    const auto core = blog::core::get();
    boost::shared_ptr<blog::sinks::sink> console;
    boost::shared_ptr<blog::sinks::sink> rank_file;
    if (options.console) {
        auto sink = boost::make_shared<blog::sinks::synchronous_sink<ConsoleBackend>>(
            boost::make_shared<ConsoleBackend>(options.format, options.colour.value_or(stderr_wants_colour())));
        sink->set_filter(RouteFilter{log_route::console});
        console = sink;
    }
    if (options.directory) {
        const std::filesystem::path directory(*options.directory);
        std::error_code ec;
        std::filesystem::create_directories(directory, ec);
        // Every rank creates the same folder at once; losing that race is not an error.
        if (!std::filesystem::is_directory(directory)) {
            throw ConfigError(directory_source, fmt::format("cannot create the log directory '{}': {}",
                                                            directory.string(), ec ? ec.message() : "not a directory"));
        }
        auto sink = boost::make_shared<blog::sinks::synchronous_sink<RankFileBackend>>(
            boost::make_shared<RankFileBackend>(directory, options.format));
        sink->set_filter(RouteFilter{log_route::rank_file});
        rank_file = sink;
    }
    if (state.console) core->remove_sink(state.console);
    if (state.rank_file) core->remove_sink(state.rank_file);
    state.console = std::move(console);
    state.rank_file = std::move(rank_file);
    if (state.console) core->add_sink(state.console);
    if (state.rank_file) core->add_sink(state.rank_file);
    state.rank_files.store(static_cast<bool>(state.rank_file), std::memory_order_release);
    state.configured.store(true, std::memory_order_release);
}

}  // namespace

LoggingOptions logging_options_from_environment(const EnvironmentLookup& env) {
    LoggingOptions options;
    if (auto directory = env(logging_env::directory); directory && !directory->empty()) options.directory = *directory;
    if (auto format = env(logging_env::format); format && !format->empty()) {
        std::string lower;
        for (char c : *format) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "text") {
            options.format = LogFormat::Text;
        } else if (lower == "json") {
            options.format = LogFormat::Json;
        } else {
            throw ConfigError(fmt::format("environment {}", logging_env::format),
                              fmt::format("'{}' is not a log format; accepted: text or json, in any case", *format));
        }
    }
    return options;
}

void configure_logging(const LoggingOptions& options) {
    auto& state = sink_state();
    std::scoped_lock lock(state.mutex);
    install_sinks(state, options, "configure_logging(): LoggingOptions::directory");
}

namespace detail {

void ensure_logging_configured() {
    auto& state = sink_state();
    if (state.configured.load(std::memory_order_acquire)) return;
    std::scoped_lock lock(state.mutex);
    if (!state.configured.load(std::memory_order_relaxed)) {
        install_sinks(state, logging_options_from_environment(), fmt::format("environment {}", logging_env::directory));
    }
}

bool rank_files_enabled() noexcept {
    return sink_state().rank_files.load(std::memory_order_acquire);
}

void push_log_block(std::shared_ptr<const LogBlock> block, unsigned route) {
    ensure_logging_configured();
    auto& state = sink_state();
    const LogLevel level = block->front().level;
    blog::attribute_set attributes;
    attributes.insert(state.records_name, blog::attributes::constant<BlockPointer>(block));
    attributes.insert(state.route_name, blog::attributes::constant<unsigned>(route));
    attributes.insert(state.channel_name, state.channel);
    attributes.insert(state.severity_name,
                      blog::attributes::constant<blog::trivial::severity_level>(trivial_severity(level)));

    const auto core = blog::core::get();
    blog::record record = core->open_record(attributes);
    if (!record) return;  // no sink wants it
    {
        // The plain text as the message, for a host application's sinks that print "Message".
        blog::record_ostream stream(record);
        for (std::size_t i = 0; i < block->size(); ++i) {
            if (i != 0) stream << '\n';
            stream << format_text((*block)[i]);
        }
        stream.flush();
    }
    core->push_record(std::move(record));
}

}  // namespace detail

}  // namespace lockstep
