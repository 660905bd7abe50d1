#pragma once
// Runs many commands at once with a bounded fan-out, the way pdsh does: at most `fanout` children at a time, each
// with its own time limit, all of them with one deadline. Children are started with posix_spawnp (argv, no shell, so
// a host name is always exactly one argument), each in its own process group so that a time limit stops ssh and
// anything ssh started (a ProxyCommand, an mpirun's daemons). One thread drives everything through Asio: the pipes,
// a pidfd per child for its exit, and the timers.
//
// SIGINT and SIGTERM stop every running child's process group before run() throws InterruptedError: children live
// in their own groups, so a terminal's Ctrl-C would otherwise not reach them.

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::hostcheck {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

struct Command {
    std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
    std::string input;              // written to the child's stdin, which is then closed; empty: /dev/null
    std::chrono::milliseconds timeout{10'000};
    // On timeout the group first gets SIGTERM (so that mpirun can stop its daemons) and SIGKILL after this grace.
    std::chrono::milliseconds kill_grace{0};
    std::vector<std::pair<std::string, std::string>> environment;  // added to (or replacing in) this process's
};

struct CommandResult {
    enum class Ending {
        exited,       // exit_code is valid
        signalled,    // killed by a signal not sent by us
        timed_out,    // its own time limit, or the run's deadline, ran out and it was stopped
        not_started,  // the deadline came before its turn
        spawn_failed  // posix_spawn failed (no such program...); spawn_error says why
    };
    Ending ending = Ending::not_started;
    int exit_code = -1;
    int signal = 0;
    std::string out;  // at most output_limit bytes each; the rest is read and dropped
    std::string err;
    std::string spawn_error;
    Seconds elapsed{0};
};

struct FanoutOptions {
    std::size_t fanout = 64;
    std::optional<Clock::time_point> deadline;  // children still running then are stopped as timed out
    std::size_t output_limit = 256 * 1024;
    // Called after each command ends (done, total), from the thread that called run().
    std::function<void(std::size_t, std::size_t)> progress;
};

// Runs every command; results are in the order of `commands`. Throws InterruptedError on SIGINT/SIGTERM.
[[nodiscard]] std::vector<CommandResult> run_fanout(std::span<const Command> commands, const FanoutOptions& options);

// One command alone, same rules.
[[nodiscard]] CommandResult run_command(const Command& command,
                                        std::optional<Clock::time_point> deadline = std::nullopt);

// The full path of a program found on PATH (or the name itself when it holds a '/' and is executable); empty when
// there is none.
[[nodiscard]] std::string find_program(const std::string& name);

}  // namespace lockstep::hostcheck
