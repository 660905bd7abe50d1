#pragma once
// Child processes of the tools: the MPI launcher, ssh, `mpirun --version`. Every child is started with posix_spawnp
// (an explicit argv, never a shell, so that a host name is always exactly one argument), with an empty signal mask
// and default dispositions, whatever this process blocks or ignores.
//
// Two ways to run children:
// - run_fanout / run_command: children with their stdout and stderr captured, each with a time limit, at most
//   `fanout` at a time, the way pdsh runs commands. Each child gets its own process group, so that a time limit
//   stops ssh and anything ssh started (a ProxyCommand, an mpirun's daemons). One thread drives everything through
//   Asio: the pipes, a pidfd per child for its exit, and the timers. SIGINT and SIGTERM stop every running child's
//   process group before InterruptedError is thrown: children live in their own groups, so a terminal's Ctrl-C
//   would otherwise not reach them.
// - run_in_foreground: one child that owns the terminal with this process (the job a user launches), with the signals
//   sent to this process passed on to it.

#include <lockstep/errors.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::mpi_launcher {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// A child could not be started or waited for.
class SpawnError : public Error {
public:
    using Error::Error;
};

// The run was interrupted by SIGINT or SIGTERM; every child that was running was stopped before this was thrown.
class InterruptedError : public Error {
public:
    explicit InterruptedError(int signal_number);
    [[nodiscard]] int signal_number() const noexcept { return signal_number_; }

private:
    int signal_number_;
};

struct Command {
    std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
    std::string input;              // written to the child's stdin, which is then closed; empty: /dev/null
    std::chrono::milliseconds timeout{10'000};
    // On timeout the group first gets SIGTERM (so that mpirun can stop its daemons) and SIGKILL after this grace.
    std::chrono::milliseconds kill_grace{0};
    std::vector<std::pair<std::string, std::string>> environment;  // added to (or replacing in) this process's
    // stderr goes into `out` too, interleaved as the child wrote it (what a terminal would have shown); `err` stays
    // empty.
    bool merge_output = false;
};

struct CommandResult {
    enum class Ending {
        Exited,       // exit_code is valid
        Signalled,    // killed by a signal not sent by us
        TimedOut,     // its own time limit, or the run's deadline, ran out and it was stopped
        NotStarted,   // the deadline came before its turn
        SpawnFailed,  // posix_spawn failed (no such program...); spawn_error says why
    };
    Ending ending = Ending::NotStarted;
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

// Runs argv with exactly `environment` and waits for it, in this process's group. SIGINT, SIGTERM and SIGHUP sent to
// this process with kill() are passed on to the child; the same signals typed at the terminal already reach the child
// through its process group and are not sent twice. Returns the exit status a shell would report: the child's exit
// code, or 128 + N when signal N ended it, or ended it with exit code 0 (a launcher told to stop the job). Throws
// SpawnError when the program cannot be started.
[[nodiscard]] int run_in_foreground(const std::vector<std::string>& argv,
                                    const std::map<std::string, std::string>& environment);

// What run_in_foreground_watching_stderr saw.
struct ForegroundResult {
    int status = 0;  // as run_in_foreground returns it
    // The child's stderr: its first stderr_head_limit bytes and, when it wrote more, its last stderr_tail_limit.
    std::string stderr_head;
    std::string stderr_tail;
    // With watch_stdout: the last stderr_tail_limit bytes of the child's stdout (Hydra writes its reports there).
    std::string stdout_end;
};
inline constexpr std::size_t stderr_head_limit = 256 * 1024;
inline constexpr std::size_t stderr_tail_limit = 64 * 1024;

// run_in_foreground with the child's stderr passed through a pipe: every byte reaches this process's stderr as it
// arrives, and the start and the end are kept, so that a failure can be recognised afterwards (launch_failure.hpp).
// With watch_stdout, its stdout passes through a pipe of its own the same way, and its end is kept.
[[nodiscard]] ForegroundResult run_in_foreground_watching_stderr(const std::vector<std::string>& argv,
                                                                 const std::map<std::string, std::string>& environment,
                                                                 bool watch_stdout = false);

// The full path of a program found on PATH (or the name itself when it holds a '/' and is executable); empty when
// there is none.
[[nodiscard]] std::string find_program(const std::string& name);

}  // namespace lockstep::mpi_launcher
