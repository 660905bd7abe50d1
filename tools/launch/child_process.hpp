#pragma once
// Running the launcher as a child process, never through a shell: posix_spawnp with an explicit argv and environment.

#include "launcher.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace lockstep::launch {

// Runs argv with `environment` and waits for it. SIGINT, SIGTERM and SIGHUP sent to this process with kill() are
// passed on to the child; the same signals typed at the terminal already reach the child through its process group
// and are not sent twice. Returns the exit status the shell would report: the child's exit code, or 128 + N when a
// signal N ended it. Throws LaunchError when the program cannot be started.
[[nodiscard]] int run_and_wait(const std::vector<std::string>& argv, const Environment& environment);

struct CapturedOutput {
    int status = 0;      // as run_and_wait returns it; -1 when it was stopped at the time limit
    std::string output;  // stdout and stderr together
};
// Runs argv with the current environment, stdin from /dev/null, and collects what it prints, stopping it after
// `limit`. Throws LaunchError when the program cannot be started.
[[nodiscard]] CapturedOutput capture_output(const std::vector<std::string>& argv, std::chrono::milliseconds limit);

// Whether `program` names an executable (a path, or a name found on PATH).
[[nodiscard]] bool program_exists(const std::string& program);

}  // namespace lockstep::launch
