// posix_spawnp with signal forwarding. The parent blocks the signals it forwards and collects them with
// sigtimedwait, so that no handler and no global state is needed; the child starts with an empty mask and default
// dispositions.

#include "child_process.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace lockstep::launch {
namespace {

// argv/envp arrays that point into strings kept alive alongside them.
class CStrings {
public:
    explicit CStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
        for (auto& s : strings_) pointers_.push_back(s.data());
        pointers_.push_back(nullptr);
    }
    char* const* get() noexcept { return pointers_.data(); }

private:
    std::vector<std::string> strings_;
    std::vector<char*> pointers_;
};

std::vector<std::string> environment_entries(const Environment& environment) {
    std::vector<std::string> entries;
    entries.reserve(environment.size());
    for (const auto& [name, value] : environment) entries.push_back(name + "=" + value);
    return entries;
}

class SpawnAttributes {
public:
    SpawnAttributes() {
        posix_spawnattr_init(&attr_);
        sigset_t none;
        sigemptyset(&none);
        sigset_t defaults;
        sigemptyset(&defaults);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) sigaddset(&defaults, s);
        posix_spawnattr_setsigmask(&attr_, &none);
        posix_spawnattr_setsigdefault(&attr_, &defaults);
        posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    }
    ~SpawnAttributes() { posix_spawnattr_destroy(&attr_); }
    SpawnAttributes(const SpawnAttributes&) = delete;
    SpawnAttributes& operator=(const SpawnAttributes&) = delete;
    posix_spawnattr_t* get() noexcept { return &attr_; }

private:
    posix_spawnattr_t attr_{};
};

class FileActions {
public:
    FileActions() { posix_spawn_file_actions_init(&actions_); }
    ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
    FileActions(const FileActions&) = delete;
    FileActions& operator=(const FileActions&) = delete;
    posix_spawn_file_actions_t* get() noexcept { return &actions_; }

private:
    posix_spawn_file_actions_t actions_{};
};

// Blocks the forwarded signals (and SIGCHLD, to wake up when the child ends) for the lifetime of the object.
class BlockedSignals {
public:
    BlockedSignals() {
        sigemptyset(&set_);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set_, s);
        pthread_sigmask(SIG_BLOCK, &set_, &previous_);
    }
    ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
    BlockedSignals(const BlockedSignals&) = delete;
    BlockedSignals& operator=(const BlockedSignals&) = delete;
    const sigset_t& set() const noexcept { return set_; }

private:
    sigset_t set_{};
    sigset_t previous_{};
};

class Descriptor {
public:
    explicit Descriptor(int fd = -1) noexcept : fd_(fd) {}
    ~Descriptor() {
        if (fd_ >= 0) ::close(fd_);
    }
    Descriptor(const Descriptor&) = delete;
    Descriptor& operator=(const Descriptor&) = delete;
    int get() const noexcept { return fd_; }
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_;
};

int shell_status(int wait_status) {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return 1;
}

pid_t spawn(const std::vector<std::string>& argv, char* const* envp, posix_spawn_file_actions_t* actions,
            posix_spawnattr_t* attr) {
    CStrings args(argv);
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, argv.front().c_str(), actions, attr, args.get(), envp);
    if (rc != 0) {
        throw LaunchError(fmt::format("cannot start '{}': {}{}", argv.front(), std::strerror(rc),
                                      rc == ENOENT ? " (not found on PATH; install it or give its full path)" : ""));
    }
    return pid;
}

}  // namespace

int run_and_wait(const std::vector<std::string>& argv, const Environment& environment) {
    const BlockedSignals blocked;
    SpawnAttributes attr;
    CStrings envp(environment_entries(environment));
    const pid_t child = spawn(argv, envp.get(), nullptr, attr.get());
    for (;;) {
        int wait_status = 0;
        const pid_t done = ::waitpid(child, &wait_status, WNOHANG);
        if (done == child) return shell_status(wait_status);
        if (done < 0 && errno != EINTR) {
            throw LaunchError(fmt::format("waiting for '{}' failed: {}", argv.front(), std::strerror(errno)));
        }
        siginfo_t info{};
        const timespec tick{1, 0};  // SIGCHLD normally wakes us; the tick only guards against a lost one
        const int sig = ::sigtimedwait(&blocked.set(), &info, &tick);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            // From the terminal (SI_KERNEL) the child's process group got the signal too; a second copy would make
            // mpirun abort at once instead of shutting the ranks down in order.
            if (info.si_code != SI_KERNEL) ::kill(child, sig);
        }
    }
}

CapturedOutput capture_output(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw LaunchError(fmt::format("pipe: {}", std::strerror(errno)));
    Descriptor read_end(fds[0]);
    Descriptor write_end(fds[1]);
    FileActions actions;
    posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDERR_FILENO);
    SpawnAttributes attr;
    const pid_t child = spawn(argv, environ, actions.get(), attr.get());
    write_end.reset();

    CapturedOutput result;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    bool timed_out = false;
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        pollfd pfd{read_end.get(), POLLIN, 0};
        const int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            timed_out = ready == 0;
            break;
        }
        char buffer[4096];
        const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        result.output.append(buffer, static_cast<std::size_t>(n));
    }
    if (timed_out) ::kill(child, SIGKILL);
    int wait_status = 0;
    while (::waitpid(child, &wait_status, 0) < 0 && errno == EINTR) {
    }
    result.status = timed_out ? -1 : shell_status(wait_status);
    return result;
}

bool program_exists(const std::string& program) {
    if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
    while (true) {
        const std::size_t colon = rest.find(':');
        const std::string dir(rest.substr(0, colon));
        const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / program;
        if (::access(candidate.c_str(), X_OK) == 0) return true;
        if (colon == std::string_view::npos) return false;
        rest = rest.substr(colon + 1);
    }
}

}  // namespace lockstep::launch
