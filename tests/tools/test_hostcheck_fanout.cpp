// The bounded fan-out that runs hostcheck's ssh commands: concurrency limit, per-command time limits that stop the
// whole process group, the run's deadline, stdin, and argv that never passes through a shell.
#define BOOST_TEST_MODULE hostcheck_fanout
#include <boost/test/unit_test.hpp>

#include "mpi_launcher/child_process.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace lockstep::mpi_launcher;
using namespace std::chrono_literals;

namespace {

Command sh(std::string script, std::chrono::milliseconds timeout = 10s) {
    Command c;
    c.argv = {"sh", "-c", std::move(script)};
    c.timeout = timeout;
    return c;
}

double seconds_since(Clock::time_point t) {
    return Seconds(Clock::now() - t).count();
}

// A process that is gone, or a zombie waiting for its new parent to reap it.
bool is_gone(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

BOOST_AUTO_TEST_CASE(at_most_fanout_at_a_time) {
    // 20 commands of 0.3 s at fan-out 10: each prints when it started and ended (ns, one clock for all), and the
    // intervals show how many ran at once: never more than 10, and more than one. Under load the run only gets
    // slower, which neither count depends on; it can never take less than two rounds (0.6 s).
    std::vector<Command> commands(20, sh("date +%s%N; sleep 0.3; date +%s%N"));
    FanoutOptions options;
    options.fanout = 10;
    std::size_t progress_calls = 0;
    options.progress = [&](std::size_t done, std::size_t total) {
        ++progress_calls;
        BOOST_TEST(done <= total);
    };
    const auto start = Clock::now();
    const auto results = run_fanout(commands, options);
    BOOST_TEST(seconds_since(start) >= 0.55);
    BOOST_TEST(progress_calls == 20u);
    std::vector<std::pair<long long, long long>> intervals;
    for (const auto& r : results) {
        BOOST_TEST((r.ending == CommandResult::Ending::Exited));
        BOOST_TEST(r.exit_code == 0);
        std::istringstream out(r.out);
        long long began = 0;
        long long ended = 0;
        BOOST_TEST_REQUIRE(static_cast<bool>(out >> began >> ended), "not two times: " << r.out);
        intervals.emplace_back(began, ended);
    }
    std::size_t most_at_once = 0;
    for (const auto& [began, ended] : intervals) {
        std::size_t running = 0;  // commands running at the moment this one started
        for (const auto& [b, e] : intervals) running += b <= began && began < e ? 1 : 0;
        most_at_once = std::max(most_at_once, running);
    }
    BOOST_TEST(most_at_once <= 10u);
    BOOST_TEST(most_at_once >= 2u);
}

BOOST_AUTO_TEST_CASE(output_exit_code_and_order) {
    std::vector<Command> commands{sh("echo one; echo err >&2; exit 3"), sh("sleep 0.2; echo two"), sh("kill -TERM $$")};
    FanoutOptions options;
    const auto r = run_fanout(commands, options);
    BOOST_TEST(r[0].out == "one\n");
    BOOST_TEST(r[0].err == "err\n");
    BOOST_TEST(r[0].exit_code == 3);
    BOOST_TEST(r[1].out == "two\n");
    BOOST_TEST((r[2].ending == CommandResult::Ending::Signalled));
    BOOST_TEST(r[2].signal == SIGTERM);
}

BOOST_AUTO_TEST_CASE(time_limit_stops_the_whole_group) {
    // The shell starts a background sleep and prints its PID; the limit must stop both.
    const auto start = Clock::now();
    const auto r = run_command(sh("sleep 30 & echo $!; wait", 500ms));
    BOOST_TEST(seconds_since(start) < 15.0);  // stopped at its limit, long before the sleep's 30 s, however loaded
    BOOST_TEST((r.ending == CommandResult::Ending::TimedOut));
    const pid_t background = std::stoi(r.out);
    for (int i = 0; i < 50 && !is_gone(background); ++i) ::usleep(20'000);
    BOOST_TEST(is_gone(background));
}

BOOST_AUTO_TEST_CASE(grace_period_sends_sigterm_first) {
    Command c = sh("trap 'echo term; exit 0' TERM; sleep 30 & wait", 300ms);
    c.kill_grace = 2s;
    const auto r = run_command(c);
    BOOST_TEST((r.ending == CommandResult::Ending::TimedOut));
    BOOST_TEST(r.out == "term\n");
}

BOOST_AUTO_TEST_CASE(deadline_bounds_the_whole_run) {
    std::vector<Command> commands(6, sh("sleep 30"));
    FanoutOptions options;
    options.fanout = 2;
    options.deadline = Clock::now() + 500ms;
    const auto start = Clock::now();
    const auto r = run_fanout(commands, options);
    BOOST_TEST(seconds_since(start) < 15.0);  // the deadline, not the sleeps' 30 s
    BOOST_TEST((r[0].ending == CommandResult::Ending::TimedOut));
    BOOST_TEST((r[1].ending == CommandResult::Ending::TimedOut));
    for (std::size_t i = 2; i < r.size(); ++i) BOOST_TEST((r[i].ending == CommandResult::Ending::NotStarted));
}

BOOST_AUTO_TEST_CASE(input_goes_to_stdin) {
    Command c;
    c.argv = {"cat"};
    c.input = "line one\nline two\n";
    BOOST_TEST(run_command(c).out == "line one\nline two\n");
    // Without input stdin is /dev/null: a reader ends at once instead of waiting.
    Command reader;
    reader.argv = {"cat"};
    reader.timeout = 2s;
    const auto r = run_command(reader);
    BOOST_TEST((r.ending == CommandResult::Ending::Exited));
    BOOST_TEST(r.out.empty());
}

BOOST_AUTO_TEST_CASE(arguments_are_never_shell_text) {
    const std::string marker =
        std::filesystem::temp_directory_path() / ("lockstep-fanout-" + std::to_string(::getpid()));
    Command c;
    c.argv = {"printf", "%s|", "$(touch " + marker + ")", "a;b", "`id`", "x y"};
    const auto r = run_command(c);
    BOOST_TEST(r.out == "$(touch " + marker + ")|a;b|`id`|x y|");
    BOOST_TEST(!std::filesystem::exists(marker));
}

BOOST_AUTO_TEST_CASE(programs_that_do_not_exist) {
    Command c;
    c.argv = {"lockstep-no-such-program", "x"};
    const auto r = run_command(c);
    BOOST_TEST((r.ending == CommandResult::Ending::SpawnFailed));
    BOOST_TEST(r.spawn_error.find("lockstep-no-such-program") != std::string::npos);
    BOOST_TEST(find_program("sh").find("/sh") != std::string::npos);
    BOOST_TEST(find_program("lockstep-no-such-program").empty());
}

BOOST_AUTO_TEST_CASE(environment_and_output_limit) {
    Command c = sh("echo $LOCKSTEP_FANOUT_TEST; head -c 100000 /dev/zero | tr '\\0' x");
    c.environment = {{"LOCKSTEP_FANOUT_TEST", "set"}};
    FanoutOptions options;
    options.output_limit = 1000;
    const auto r = run_fanout(std::vector<Command>{c}, options);
    BOOST_TEST(r[0].out.size() == 1000u);
    BOOST_TEST(r[0].out.starts_with("set\nxxx"));
    BOOST_TEST(r[0].exit_code == 0);
}

BOOST_AUTO_TEST_CASE(interrupt_stops_every_child_first) {
    // SIGTERM during a run: the children are stopped, then InterruptedError reports the signal.
    std::vector<Command> commands(3, sh("sleep 30 & echo $!; wait"));
    FanoutOptions options;
    std::thread terminator([] {
        std::this_thread::sleep_for(500ms);
        ::kill(::getpid(), SIGTERM);
    });
    const auto start = Clock::now();
    try {
        (void)run_fanout(commands, options);
        BOOST_FAIL("no InterruptedError");
    } catch (const InterruptedError& e) {
        BOOST_TEST(e.signal_number() == SIGTERM);
    }
    terminator.join();
    BOOST_TEST(seconds_since(start) < 15.0);  // the children were stopped, not waited for (30 s)
}
