// One process, no MPI: record layout, JSON lines, levels, the two call styles, warning_once, the sinks (stderr with
// and without a terminal, per-rank files) and how lockstep shares the Boost.Log core with a host application.
// Run with LOCKSTEP_LOG_LEVEL=info (lower case on purpose).
#define BOOST_TEST_MODULE logging
#include <boost/test/unit_test.hpp>

#include "logging_capture.hpp"

#include <lockstep/errors.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <boost/log/expressions.hpp>
#include <boost/log/sources/channel_logger.hpp>
#include <boost/log/sources/record_ostream.hpp>
#include <boost/log/trivial.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <regex>

using lockstep::LogLevel;
using lockstep::LogRecord;
using lockstep_test::CapturedBlocks;
namespace blog = boost::log;

namespace {

std::chrono::system_clock::time_point local_time_point(int year, int month, int day, int hour, int minute, int second,
                                                       int millisecond) {
    std::tm fields{};
    fields.tm_year = year - 1900;
    fields.tm_mon = month - 1;
    fields.tm_mday = day;
    fields.tm_hour = hour;
    fields.tm_min = minute;
    fields.tm_sec = second;
    fields.tm_isdst = -1;
    return std::chrono::system_clock::from_time_t(std::mktime(&fields)) + std::chrono::milliseconds(millisecond);
}

LogRecord example_record() {
    LogRecord record;
    record.time = local_time_point(2026, 12, 2, 11, 20, 31, 512);
    record.level = LogLevel::Info;
    record.logger = "train";
    record.rank = 1;
    record.size = 4;
    record.host = "node2";
    record.message = "loss 0.42";
    return record;
}

std::vector<std::string> messages(const std::vector<LogRecord>& records) {
    std::vector<std::string> texts;
    for (const auto& r : records) texts.push_back(r.message);
    return texts;
}

// Records of one Boost.Log sink of a host application: channel and message text of each.
struct HostRecord {
    std::string channel;
    std::string message;
    std::optional<blog::trivial::severity_level> severity;
};
class HostCollector : public blog::sinks::basic_sink_backend<blog::sinks::synchronized_feeding> {
public:
    void consume(const blog::record_view& record) {
        HostRecord r;
        if (auto c = blog::extract<std::string>("Channel", record)) r.channel = *c;
        if (auto m = blog::extract<std::string>("Message", record)) r.message = *m;
        if (auto s = blog::extract<blog::trivial::severity_level>("Severity", record)) r.severity = *s;
        records.push_back(r);
    }
    std::vector<HostRecord> records;
};
using HostSink = blog::sinks::synchronous_sink<HostCollector>;

// Restores lockstep's sinks to what the environment asks for when a test that reconfigured them ends.
struct DefaultSinksAfterwards {
    ~DefaultSinksAfterwards() { lockstep::configure_logging(lockstep::logging_options_from_environment()); }
};

// Reads what arrives on a pseudo-terminal's master side until `marker` has been seen or two seconds have passed.
std::string read_until(int master, const std::string& marker) {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (text.find(marker) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
        pollfd pfd{master, POLLIN, 0};
        if (::poll(&pfd, 1, 100) <= 0) continue;
        char buffer[4096];
        const ssize_t n = ::read(master, buffer, sizeof buffer);
        if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
    }
    return text;
}

}  // namespace

BOOST_AUTO_TEST_CASE(text_layout_matches_the_documented_example) {
    BOOST_TEST(lockstep::format_text(example_record()) ==
               "2026-12-02 11:20:31.512 INFO  [rank 1/4 node2] train: loss 0.42");

    LogRecord r = example_record();
    r.level = LogLevel::Warning;
    BOOST_TEST(lockstep::format_text(r) == "2026-12-02 11:20:31.512 WARNING [rank 1/4 node2] train: loss 0.42");
    r.level = LogLevel::Critical;
    r.time += std::chrono::milliseconds(7);
    BOOST_TEST(lockstep::format_text(r) == "2026-12-02 11:20:31.519 CRITICAL [rank 1/4 node2] train: loss 0.42");
    r.level = LogLevel::Debug;
    BOOST_TEST(lockstep::format_text(r).find(" DEBUG [rank 1/4 node2] ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(colour_wraps_only_the_level_name) {
    const std::string plain = lockstep::format_text(example_record(), false);
    const std::string coloured = lockstep::format_text(example_record(), true);
    BOOST_TEST(plain.find('\033') == std::string::npos);
    BOOST_TEST(coloured.find("\033[32mINFO\033[0m  [rank 1/4 node2]") != std::string::npos);
    BOOST_TEST(std::regex_replace(coloured, std::regex("\033\\[[0-9;]*m"), "") == plain);
}

BOOST_AUTO_TEST_CASE(json_line_is_one_parseable_object) {
    LogRecord r = example_record();
    r.message = "quote \" backslash \\ newline \n tab \t end";
    const std::string line = lockstep::format_json(r);
    BOOST_TEST(line.find('\n') == std::string::npos);
    const auto json = nlohmann::json::parse(line);
    BOOST_TEST(json.at("level").get<std::string>() == "INFO");
    BOOST_TEST(json.at("logger").get<std::string>() == "train");
    BOOST_TEST(json.at("rank").get<int>() == 1);
    BOOST_TEST(json.at("size").get<int>() == 4);
    BOOST_TEST(json.at("host").get<std::string>() == "node2");
    BOOST_TEST(json.at("message").get<std::string>() == r.message);
    const std::string time = json.at("time").get<std::string>();
    BOOST_TEST(std::regex_match(time, std::regex(R"(2026-12-02T11:20:31\.512[+-]\d\d:\d\d)")), time);

    r.message = std::string("bad utf-8: \xff\xfe end");
    const auto replaced = nlohmann::json::parse(lockstep::format_json(r));
    BOOST_TEST(replaced.at("message").get<std::string>() == "bad utf-8: \xEF\xBF\xBD\xEF\xBF\xBD end");
}

BOOST_AUTO_TEST_CASE(sink_options_come_from_the_environment) {
    using lockstep::LogFormat;
    using lockstep::map_environment;
    const auto none = lockstep::logging_options_from_environment(map_environment({}));
    BOOST_TEST(none.console);
    BOOST_TEST(!none.directory.has_value());
    BOOST_TEST((none.format == LogFormat::Text));

    const auto set = lockstep::logging_options_from_environment(
        map_environment({{"LOCKSTEP_LOG_DIR", "/tmp/logs"}, {"LOCKSTEP_LOG_FORMAT", "JSON"}}));
    BOOST_TEST(set.directory.value_or("") == "/tmp/logs");
    BOOST_TEST((set.format == LogFormat::Json));
    BOOST_TEST((lockstep::logging_options_from_environment(map_environment({{"LOCKSTEP_LOG_FORMAT", "Text"}})).format ==
                LogFormat::Text));

    try {
        (void)lockstep::logging_options_from_environment(map_environment({{"LOCKSTEP_LOG_FORMAT", "xml"}}));
        BOOST_FAIL("LOCKSTEP_LOG_FORMAT=xml was accepted");
    } catch (const lockstep::ConfigError& e) {
        BOOST_TEST(e.source().find("LOCKSTEP_LOG_FORMAT") != std::string::npos);
        BOOST_TEST(std::string(e.what()).find("xml") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(default_level_comes_from_the_environment_in_any_case) {
    // LOCKSTEP_LOG_LEVEL=info in this test's environment.
    BOOST_TEST((lockstep::config().log_level == LogLevel::Info));
    const auto log = lockstep::get_logger("default-level");
    BOOST_TEST((log.level() == LogLevel::Info));
    BOOST_TEST(!log.enabled_for(LogLevel::Debug));
    BOOST_TEST(log.enabled_for(LogLevel::Info));
}

BOOST_AUTO_TEST_CASE(loggers_of_one_name_share_their_level) {
    const auto a = lockstep::get_logger("shared");
    const auto b = lockstep::get_logger("shared", LogLevel::Error);
    BOOST_TEST(a.name() == "shared");
    BOOST_TEST((a.level() == LogLevel::Error));
    a.set_level(LogLevel::Debug);
    BOOST_TEST((b.level() == LogLevel::Debug));
    b.reset_level();
    BOOST_TEST((a.level() == lockstep::config().log_level));
    BOOST_TEST((lockstep::get_logger("other").level() == lockstep::config().log_level));
}

BOOST_AUTO_TEST_CASE(levels_filter_records) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("filtering", LogLevel::Warning);
    log.debug("debug {}", 1);
    log.info("info {}", 2);
    log.warning("warning {}", 3);
    log.error("error {}", 4);
    log.critical("critical {}", 5);
    const auto records = captured.records();
    BOOST_TEST(messages(records) == (std::vector<std::string>{"warning 3", "error 4", "critical 5"}),
               boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(records.size(), 3u);
    BOOST_TEST((records[0].level == LogLevel::Warning));
    BOOST_TEST((records[2].level == LogLevel::Critical));

    log.set_level(LogLevel::Debug);
    log.debug("now debug passes");
    BOOST_TEST(captured.records().size() == 4u);
    log.set_level(LogLevel::Critical);
    log.error("now error is filtered");
    BOOST_TEST(captured.records().size() == 4u);
}

BOOST_AUTO_TEST_CASE(a_record_carries_identity_time_and_name) {
    CapturedBlocks captured;
    const auto before = std::chrono::system_clock::now();
    lockstep::get_logger("identity", LogLevel::Info).info("loss {:.3f}", 0.41999);
    const auto after = std::chrono::system_clock::now();
    const auto records = captured.records();
    BOOST_REQUIRE_EQUAL(records.size(), 1u);
    const LogRecord& r = records[0];
    BOOST_TEST(r.message == "loss 0.420");
    BOOST_TEST(r.logger == "identity");
    BOOST_TEST(r.rank == 0);
    BOOST_TEST(r.size == 1);
    BOOST_TEST(r.host == lockstep::host_name());
    BOOST_TEST((r.time >= before && r.time <= after));
}

BOOST_AUTO_TEST_CASE(stream_style_builds_the_message_only_when_emitted) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("stream", LogLevel::Info);
    int evaluated = 0;
    const auto count = [&evaluated] { return ++evaluated; };

    LOCKSTEP_LOG_INFO(log) << "step " << count() << " of " << 3;
    LOCKSTEP_LOG_DEBUG(log) << "filtered " << count();
    LOCKSTEP_LOG_WARNING(log, lockstep::every_rank) << "every rank " << count();
    BOOST_TEST(evaluated == 2);

    // Inside an unbraced if/else the else still belongs to the if of the caller.
    bool else_taken = false;
    for (bool condition : {true, false}) {
        if (condition)
            LOCKSTEP_LOG_ERROR(log) << "condition held";
        else
            else_taken = true;
    }
    BOOST_TEST(else_taken);

    const auto records = captured.records();
    BOOST_TEST(messages(records) == (std::vector<std::string>{"step 1 of 3", "every rank 2", "condition held"}),
               boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(records.size(), 3u);
    BOOST_TEST((records[1].level == LogLevel::Warning));
    BOOST_TEST((records[2].level == LogLevel::Error));
}

BOOST_AUTO_TEST_CASE(format_style_takes_per_call_options) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("format", LogLevel::Debug);
    log.debug(lockstep::every_rank, "{}-{}", "a", 1);
    log.info(lockstep::main_process_only, "{:>4}", 7);
    log.warning(lockstep::LogOptions{.main_process_only = false}, "{:.1e}", 12345.0);
    log.log(LogLevel::Error, {}, "plain");
    log.info(fmt::runtime(std::string("{} runtime")), 5);
    BOOST_TEST(
        messages(captured.records()) == (std::vector<std::string>{"a-1", "   7", "1.2e+04", "plain", "5 runtime"}),
        boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(warning_once_emits_each_text_once) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("once");
    for (int i = 0; i < 3; ++i) log.warning_once("deprecated option {}", "x");
    log.warning_once("deprecated option {}", "y");
    log.warning_once(lockstep::every_rank, "deprecated option {}", "x");
    lockstep::get_logger("once-other").warning_once("deprecated option {}", "x");
    const auto records = captured.records();
    BOOST_TEST(messages(records) ==
                   (std::vector<std::string>{"deprecated option x", "deprecated option y", "deprecated option x"}),
               boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(records.size(), 3u);
    BOOST_TEST(records[2].logger == "once-other");
    BOOST_TEST((records[0].level == LogLevel::Warning));
}

BOOST_AUTO_TEST_CASE(in_order_in_a_single_process_without_mpi_is_a_plain_record) {
    CapturedBlocks captured;
    const auto log = lockstep::get_logger("single", LogLevel::Info);
    log.info(lockstep::in_rank_order, "alone {}", 1);
    LOCKSTEP_LOG_INFO(log, lockstep::in_rank_order) << "alone " << 2;
    log.debug(lockstep::in_rank_order, "filtered");
    const auto blocks = captured.blocks();
    // One process has nothing to order: no warning about MPI, just the records.
    BOOST_REQUIRE_EQUAL(blocks.size(), 2u);
    BOOST_TEST(blocks[0].size() == 1u);
    BOOST_TEST(blocks[0][0].message == "alone 1");
    BOOST_TEST(blocks[1][0].message == "alone 2");
}

BOOST_AUTO_TEST_CASE(stderr_output_is_plain_text_when_not_a_terminal) {
    DefaultSinksAfterwards restore_sinks;
    lockstep_test::TemporaryDirectory dir;
    lockstep_test::RedirectedStderr err(dir.path() / "stderr.txt");
    lockstep::configure_logging({});
    const auto log = lockstep::get_logger("plain", LogLevel::Info);
    log.info("first line");
    log.error("second line");
    err.restore();
    const auto lines = lockstep_test::read_lines(dir.path() / "stderr.txt");
    BOOST_REQUIRE_EQUAL(lines.size(), 2u);
    BOOST_TEST(std::regex_match(
                   lines[0],
                   std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} INFO  \[rank 0/1 [^ \]]+\] plain: first line)")),
               lines[0]);
    BOOST_TEST(lines[1].find(" ERROR [rank 0/1 ") != std::string::npos);
    BOOST_TEST(lines[1].find('\033') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(stderr_is_coloured_on_a_terminal_unless_no_color) {
    DefaultSinksAfterwards restore_sinks;
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
    BOOST_REQUIRE(master >= 0);
    BOOST_REQUIRE(::grantpt(master) == 0 && ::unlockpt(master) == 0);
    const int terminal = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
    BOOST_REQUIRE(terminal >= 0);
    std::fflush(stderr);
    const int saved = ::dup(STDERR_FILENO);
    ::dup2(terminal, STDERR_FILENO);
    ::unsetenv("NO_COLOR");
    ::setenv("TERM", "xterm", 1);

    const auto log = lockstep::get_logger("terminal", LogLevel::Info);
    lockstep::configure_logging({});
    log.warning("on a terminal");
    const std::string coloured = read_until(master, "on a terminal");
    ::setenv("NO_COLOR", "1", 1);
    lockstep::configure_logging({});
    log.warning("NO_COLOR set");
    const std::string uncoloured = read_until(master, "NO_COLOR set");
    ::unsetenv("NO_COLOR");
    ::setenv("TERM", "dumb", 1);
    lockstep::configure_logging({});
    log.warning("dumb terminal");
    const std::string dumb = read_until(master, "dumb terminal");

    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    ::close(terminal);
    ::close(master);
    BOOST_TEST(coloured.find("\033[33mWARNING\033[0m [rank 0/1 ") != std::string::npos, coloured);
    BOOST_TEST(uncoloured.find("NO_COLOR set") != std::string::npos);
    BOOST_TEST(uncoloured.find('\033') == std::string::npos, uncoloured);
    BOOST_TEST(dumb.find("dumb terminal") != std::string::npos);
    BOOST_TEST(dumb.find('\033') == std::string::npos, dumb);
}

BOOST_AUTO_TEST_CASE(rank_file_holds_json_lines) {
    DefaultSinksAfterwards restore_sinks;
    lockstep_test::TemporaryDirectory dir;
    const auto logs = dir.path() / "nested" / "logs";
    lockstep::configure_logging({.console = false, .directory = logs.string(), .format = lockstep::LogFormat::Json});
    const auto log = lockstep::get_logger("jsonl", LogLevel::Info);
    log.info("first {}", 1);
    log.warning(lockstep::every_rank, "second \"quoted\"");
    log.info(lockstep::in_rank_order, "third");
    log.debug("filtered");

    const auto lines = lockstep_test::read_lines(logs / "rank-0.jsonl");
    BOOST_REQUIRE_EQUAL(lines.size(), 3u);
    const std::vector<std::string> expected{"first 1", "second \"quoted\"", "third"};
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const auto json = nlohmann::json::parse(lines[i]);
        BOOST_TEST(json.at("message").get<std::string>() == expected[i]);
        BOOST_TEST(json.at("logger").get<std::string>() == "jsonl");
        BOOST_TEST(json.at("rank").get<int>() == 0);
        BOOST_TEST(json.at("size").get<int>() == 1);
    }
    BOOST_TEST(nlohmann::json::parse(lines[1]).at("level").get<std::string>() == "WARNING");
}

BOOST_AUTO_TEST_CASE(a_log_directory_that_cannot_be_created_is_a_config_error) {
    DefaultSinksAfterwards restore_sinks;
    lockstep_test::TemporaryDirectory dir;
    const auto file = dir.path() / "a-file";
    { std::ofstream(file) << "x"; }
    BOOST_CHECK_THROW(lockstep::configure_logging({.directory = (file / "logs").string()}), lockstep::ConfigError);
}

BOOST_AUTO_TEST_CASE(host_application_records_and_core_settings_are_left_alone) {
    DefaultSinksAfterwards restore_sinks;
    namespace expr = blog::expressions;
    const auto core = blog::core::get();
    // The host's own setup: a core filter, a sink for its "app" channel, and a sink that takes everything.
    core->set_filter(expr::attr<std::string>("Channel") != "blocked");
    auto app_only = boost::make_shared<HostSink>(boost::make_shared<HostCollector>());
    app_only->set_filter(expr::attr<std::string>("Channel") == "app");
    auto everything = boost::make_shared<HostSink>(boost::make_shared<HostCollector>());
    core->add_sink(app_only);
    core->add_sink(everything);
    const auto global_attributes = core->get_global_attributes().size();

    lockstep_test::TemporaryDirectory dir;
    {
        lockstep_test::RedirectedStderr err(dir.path() / "stderr.txt");
        lockstep::configure_logging({.console = true, .directory = (dir.path() / "ranks").string()});
        blog::sources::channel_logger<std::string> app(blog::keywords::channel = "app");
        blog::sources::channel_logger<std::string> blocked(blog::keywords::channel = "blocked");
        BOOST_LOG(app) << "application record 17";
        BOOST_LOG(blocked) << "blocked record 19";
        lockstep::get_logger("host", LogLevel::Info).info("lockstep record 18");
    }
    core->remove_sink(app_only);
    core->remove_sink(everything);
    core->reset_filter();

    // lockstep's sinks took only lockstep's record.
    const std::string err_text = lockstep_test::read_file(dir.path() / "stderr.txt");
    const std::string file_text = lockstep_test::read_file(dir.path() / "ranks" / "rank-0.log");
    for (const std::string& text : {err_text, file_text}) {
        BOOST_TEST(text.find("lockstep record 18") != std::string::npos, text);
        BOOST_TEST(text.find("application record 17") == std::string::npos, text);
    }
    // The host's sinks and filter work as before; lockstep's record is recognisable by Channel and Severity.
    const auto app_records = app_only->locked_backend()->records;
    BOOST_REQUIRE_EQUAL(app_records.size(), 1u);
    BOOST_TEST(app_records[0].message == "application record 17");
    const auto all_records = everything->locked_backend()->records;
    BOOST_REQUIRE_EQUAL(all_records.size(), 2u);
    BOOST_TEST(all_records[0].channel == "app");
    BOOST_TEST(all_records[1].channel == "lockstep");
    BOOST_TEST(all_records[1].message.find("INFO  [rank 0/1 ") != std::string::npos, all_records[1].message);
    BOOST_TEST(all_records[1].message.find("host: lockstep record 18") != std::string::npos);
    BOOST_TEST((all_records[1].severity == blog::trivial::info));
    BOOST_TEST(core->get_global_attributes().size() == global_attributes);
    BOOST_TEST(core->get_logging_enabled());
}
