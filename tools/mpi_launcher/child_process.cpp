// One spawn path for every child: posix_spawnp with SpawnAttributes (empty signal mask, default dispositions, and a
// process group of its own for captured children) and FileActions for its standard streams.
//
// run_in_foreground blocks the signals it forwards and collects them with sigtimedwait, so that no handler and no
// global state is needed. run_fanout drives its children from one Asio loop.

#include "child_process.hpp"

#include <lockstep/base/file_descriptor.hpp>

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;

namespace lockstep::mpi_launcher {

InterruptedError::InterruptedError(int signal_number)
    : Error(fmt::format("interrupted by signal {}; every child process that was running has been stopped",
                        signal_number)),
      signal_number_(signal_number) {}

namespace {

namespace asio = boost::asio;

// glibc 2.36 has a wrapper, older ones do not; the system call is the same.
int open_pidfd(pid_t pid) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

std::system_error os_error(std::string_view what) {
    return std::system_error(errno, std::generic_category(), std::string(what));
}

class FileActions {
public:
    FileActions() { ::posix_spawn_file_actions_init(&actions_); }
    ~FileActions() { ::posix_spawn_file_actions_destroy(&actions_); }
    FileActions(const FileActions&) = delete;
    FileActions& operator=(const FileActions&) = delete;
    posix_spawn_file_actions_t* get() noexcept { return &actions_; }

private:
    posix_spawn_file_actions_t actions_{};
};

enum class ProcessGroup { Inherit, Own };

// The child starts with an empty signal mask and default dispositions for the signals this process blocks or
// handles, so that it can be stopped and interrupted like any program.
class SpawnAttributes {
public:
    explicit SpawnAttributes(ProcessGroup group) {
        ::posix_spawnattr_init(&attr_);
        short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
        if (group == ProcessGroup::Own) {
            // A time limit stops the whole group, and the terminal's Ctrl-C reaches only this process.
            ::posix_spawnattr_setpgroup(&attr_, 0);
            flags |= POSIX_SPAWN_SETPGROUP;
        }
        sigset_t none;
        sigemptyset(&none);
        ::posix_spawnattr_setsigmask(&attr_, &none);
        sigset_t defaults;
        sigemptyset(&defaults);
        for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, s);
        ::posix_spawnattr_setsigdefault(&attr_, &defaults);
        ::posix_spawnattr_setflags(&attr_, flags);
    }
    ~SpawnAttributes() { ::posix_spawnattr_destroy(&attr_); }
    SpawnAttributes(const SpawnAttributes&) = delete;
    SpawnAttributes& operator=(const SpawnAttributes&) = delete;
    const posix_spawnattr_t* get() const noexcept { return &attr_; }

private:
    posix_spawnattr_t attr_{};
};

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

// Starts argv; returns 0 and the pid, or the error number posix_spawnp gave.
int spawn(pid_t& pid, const std::vector<std::string>& argv, char* const* envp, FileActions* actions,
          const SpawnAttributes& attributes) {
    CStrings args(argv);
    return ::posix_spawnp(&pid, argv.front().c_str(), actions != nullptr ? actions->get() : nullptr, attributes.get(),
                          args.get(), envp);
}

// This process's environment with some variables replaced or added.
std::vector<std::string> merged_environment(const std::vector<std::pair<std::string, std::string>>& changes) {
    std::vector<std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view entry(*e);
        const std::string_view key = entry.substr(0, entry.find('='));
        const bool replaced =
            std::any_of(changes.begin(), changes.end(), [key](const auto& kv) { return kv.first == key; });
        if (!replaced) env.emplace_back(entry);
    }
    for (const auto& [k, v] : changes) env.push_back(k + "=" + v);
    return env;
}

int shell_status(int wait_status) {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return 1;
}

struct Child {
    Child(asio::io_context& io, std::size_t index)
        : index(index), out(io), err(io), in(io), exit_watch(io), limit(io), drain(io) {}
    std::size_t index;
    pid_t pid = -1;
    asio::posix::stream_descriptor out;
    asio::posix::stream_descriptor err;
    asio::posix::stream_descriptor in;
    asio::posix::stream_descriptor exit_watch;  // the pidfd: readable once the child has exited
    asio::steady_timer limit;                   // the time limit, then the grace before SIGKILL
    asio::steady_timer drain;                   // after exit, how long to wait for the pipes' end-of-file
    std::array<char, 16384> out_buffer{};
    std::array<char, 16384> err_buffer{};
    bool out_open = true;
    bool err_open = true;
    bool exited = false;
    bool timed_out = false;
    bool finished = false;
    int status = 0;
    Clock::time_point started;
};

class Runner {
public:
    Runner(std::span<const Command> commands, const FanoutOptions& options)
        : commands_(commands),
          options_(options),
          results_(commands.size()),
          signals_(io_, SIGINT, SIGTERM),
          deadline_(io_) {}

    std::vector<CommandResult> run() {
        if (commands_.empty()) return {};
        signals_.async_wait([this](const boost::system::error_code& ec, int signal_number) {
            if (ec) return;
            interrupted_ = signal_number;
            stop_all(SIGTERM);
            // Whatever ignores SIGTERM gets SIGKILL a second later.
            deadline_.expires_after(std::chrono::seconds(1));
            deadline_.async_wait([this](const boost::system::error_code& e) {
                if (!e) stop_all(SIGKILL);
            });
        });
        if (options_.deadline) {
            deadline_.expires_at(*options_.deadline);
            deadline_.async_wait([this](const boost::system::error_code& ec) {
                if (ec) return;
                deadline_passed_ = true;
                for (const auto& c : running_) stop(c, true);
            });
        }
        start_more();
        io_.run();
        if (interrupted_ != 0) throw InterruptedError(interrupted_);
        return std::move(results_);
    }

private:
    void start_more() {
        const std::size_t fanout = std::max<std::size_t>(options_.fanout, 1);
        if (options_.deadline && Clock::now() >= *options_.deadline) deadline_passed_ = true;
        while (running_.size() < fanout && next_ < commands_.size() && !deadline_passed_ && interrupted_ == 0) {
            start(next_++);
        }
        if (running_.empty() && (next_ == commands_.size() || deadline_passed_ || interrupted_ != 0)) {
            signals_.cancel();
            deadline_.cancel();
        }
    }

    void start(std::size_t index) {
        const Command& cmd = commands_[index];
        CommandResult& result = results_[index];
        if (cmd.argv.empty()) {
            result.ending = CommandResult::Ending::SpawnFailed;
            result.spawn_error = "empty command";
            ++done_;
            report_progress();
            return;
        }
        // Every end closes on exec, so that no other child inherits it (a leaked write end would keep a reader from
        // ever seeing end-of-file); posix_spawn's dup2 onto 0/1/2 clears the flag on the child's copy only.
        base::Pipe out_pipe = base::make_pipe();
        std::optional<base::Pipe> err_pipe;
        if (!cmd.merge_output) err_pipe.emplace(base::make_pipe());
        std::optional<base::Pipe> in_pipe;
        if (!cmd.input.empty()) in_pipe.emplace(base::make_pipe());

        FileActions actions;
        if (in_pipe) {
            ::posix_spawn_file_actions_adddup2(actions.get(), in_pipe->read.get(), STDIN_FILENO);
        } else {
            ::posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        }
        ::posix_spawn_file_actions_adddup2(actions.get(), out_pipe.write.get(), STDOUT_FILENO);
        ::posix_spawn_file_actions_adddup2(actions.get(), err_pipe ? err_pipe->write.get() : out_pipe.write.get(),
                                           STDERR_FILENO);
        const SpawnAttributes attributes(ProcessGroup::Own);

        std::optional<CStrings> envp;
        if (!cmd.environment.empty()) envp.emplace(merged_environment(cmd.environment));

        auto child = std::make_shared<Child>(io_, index);
        child->started = Clock::now();
        const int rc = spawn(child->pid, cmd.argv, envp ? envp->get() : environ, &actions, attributes);
        if (rc != 0) {
            result.ending = CommandResult::Ending::SpawnFailed;
            result.spawn_error = fmt::format("cannot run '{}': {}", cmd.argv[0], std::strerror(rc));
            ++done_;
            report_progress();
            return;
        }
        out_pipe.write.reset();
        if (err_pipe) err_pipe->write.reset();
        const int pidfd = open_pidfd(child->pid);
        if (pidfd < 0) {
            ::kill(child->pid, SIGKILL);
            ::waitpid(child->pid, nullptr, 0);
            throw os_error("pidfd_open (Linux 5.3 or newer is needed)");
        }
        child->exit_watch.assign(pidfd);
        child->out.assign(out_pipe.read.release());
        running_.insert(child);

        read_stream(child, child->out, child->out_buffer, result.out, child->out_open);
        if (err_pipe) {
            child->err.assign(err_pipe->read.release());
            read_stream(child, child->err, child->err_buffer, result.err, child->err_open);
        } else {
            child->err_open = false;
        }
        if (in_pipe) {
            in_pipe->read.reset();
            child->in.assign(in_pipe->write.release());
            asio::async_write(child->in, asio::buffer(cmd.input),
                              [child](const boost::system::error_code&, std::size_t) {
                                  // A child that exits without reading its input is not an error here.
                                  boost::system::error_code ignored;
                                  child->in.close(ignored);
                              });
        }
        child->exit_watch.async_wait(asio::posix::stream_descriptor::wait_read,
                                     [this, child](const boost::system::error_code&) { on_exit(child); });
        child->limit.expires_after(cmd.timeout);
        child->limit.async_wait([this, child](const boost::system::error_code& ec) {
            if (!ec) stop(child, true);
        });
    }

    void read_stream(const std::shared_ptr<Child>& child, asio::posix::stream_descriptor& stream,
                     std::array<char, 16384>& buffer, std::string& sink, bool& open) {
        stream.async_read_some(asio::buffer(buffer), [this, child, &stream, &buffer, &sink, &open](
                                                         const boost::system::error_code& ec, std::size_t n) {
            if (n > 0 && sink.size() < options_.output_limit) {
                sink.append(buffer.data(), std::min(n, options_.output_limit - sink.size()));
            }
            if (ec) {
                boost::system::error_code ignored;
                stream.close(ignored);
                open = false;
                maybe_finish(child);
                return;
            }
            read_stream(child, stream, buffer, sink, open);
        });
    }

    // Stops a child's whole group: SIGTERM first when the command asks for a grace period, SIGKILL otherwise.
    void stop(const std::shared_ptr<Child>& child, bool as_timeout) {
        if (child->exited) return;
        if (as_timeout) child->timed_out = true;
        const auto grace = commands_[child->index].kill_grace;
        if (grace.count() > 0) {
            ::killpg(child->pid, SIGTERM);
            child->limit.expires_after(grace);
            child->limit.async_wait([child](const boost::system::error_code& ec) {
                if (!ec && !child->exited) ::killpg(child->pid, SIGKILL);
            });
        } else {
            ::killpg(child->pid, SIGKILL);
        }
    }

    void stop_all(int signal_number) {
        for (auto& c : running_) {
            if (!c->exited) ::killpg(c->pid, signal_number);
        }
    }

    void on_exit(const std::shared_ptr<Child>& child) {
        int status = 0;
        if (::waitpid(child->pid, &status, 0) == child->pid) child->status = status;
        child->exited = true;
        child->limit.cancel();
        boost::system::error_code ignored;
        child->exit_watch.close(ignored);
        // A grandchild (an ssh ControlMaster, a daemon) may hold the pipes open after the child is gone: give them a
        // moment for the last output, then stop reading.
        if (child->out_open || child->err_open) {
            child->drain.expires_after(std::chrono::milliseconds(300));
            child->drain.async_wait([child](const boost::system::error_code& ec) {
                if (ec) return;
                boost::system::error_code e;
                child->out.cancel(e);
                child->err.cancel(e);
            });
        }
        maybe_finish(child);
    }

    void maybe_finish(const std::shared_ptr<Child>& child) {
        if (child->finished || !child->exited || child->out_open || child->err_open) return;
        child->finished = true;
        child->drain.cancel();
        CommandResult& r = results_[child->index];
        r.elapsed = Clock::now() - child->started;
        if (child->timed_out) {
            r.ending = CommandResult::Ending::TimedOut;
        } else if (WIFEXITED(child->status)) {
            r.ending = CommandResult::Ending::Exited;
            r.exit_code = WEXITSTATUS(child->status);
        } else {
            r.ending = CommandResult::Ending::Signalled;
            r.signal = WIFSIGNALED(child->status) ? WTERMSIG(child->status) : 0;
        }
        running_.erase(child);
        ++done_;
        report_progress();
        start_more();
    }

    void report_progress() {
        if (options_.progress) options_.progress(done_, commands_.size());
    }

    std::span<const Command> commands_;
    const FanoutOptions& options_;
    std::vector<CommandResult> results_;
    asio::io_context io_;
    asio::signal_set signals_;
    asio::steady_timer deadline_;
    std::set<std::shared_ptr<Child>> running_;
    std::size_t next_ = 0;
    std::size_t done_ = 0;
    bool deadline_passed_ = false;
    int interrupted_ = 0;
};

// Writing to a child that has already exited must be an error code, not a SIGPIPE that ends this process.
class IgnoreSigpipe {
public:
    IgnoreSigpipe() {
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        sigemptyset(&ignore.sa_mask);
        ::sigaction(SIGPIPE, &ignore, &previous_);
    }
    ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &previous_, nullptr); }
    IgnoreSigpipe(const IgnoreSigpipe&) = delete;
    IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

private:
    struct sigaction previous_ {};
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

}  // namespace

std::vector<CommandResult> run_fanout(std::span<const Command> commands, const FanoutOptions& options) {
    IgnoreSigpipe sigpipe;
    Runner runner(commands, options);
    return runner.run();
}

CommandResult run_command(const Command& command, std::optional<Clock::time_point> deadline) {
    FanoutOptions options;
    options.fanout = 1;
    options.deadline = deadline;
    auto results = run_fanout(std::span<const Command>(&command, 1), options);
    return std::move(results.front());
}

namespace {

// Copies a pipe of the child's (its stderr, or its stdout) to the same stream of this process from a thread of its own,
// keeping the start and the end.
// The thread is started while the forwarded signals are blocked, so that it inherits the mask and never takes them.
class StreamCopy {
public:
    StreamCopy(base::FileDescriptor fd, int destination)
        : fd_(std::move(fd)), destination_(destination), thread_([this] { copy(); }) {}
    ~StreamCopy() { stop(std::chrono::milliseconds(0)); }
    StreamCopy(const StreamCopy&) = delete;
    StreamCopy& operator=(const StreamCopy&) = delete;

    // Waits up to `grace` for end-of-file (a daemon the child left behind may hold the pipe open), then stops.
    void stop(std::chrono::milliseconds grace) {
        if (!thread_.joinable()) return;
        deadline_ = Clock::now() + grace;
        stopping_.store(true, std::memory_order_release);
        thread_.join();
    }
    std::string take_head() { return std::move(head_); }
    std::string take_tail() {
        if (tail_.size() > stderr_tail_limit) tail_.erase(0, tail_.size() - stderr_tail_limit);
        return std::move(tail_);
    }

private:
    bool past_deadline() const { return stopping_.load(std::memory_order_acquire) && Clock::now() >= deadline_; }

    void copy() {
        std::array<char, 16384> buffer{};
        for (;;) {
            pollfd watched{fd_.get(), POLLIN, 0};
            const int ready = ::poll(&watched, 1, 100);
            if (ready < 0 && errno != EINTR) return;
            if (ready <= 0) {
                if (past_deadline()) return;
                continue;
            }
            const ssize_t n = ::read(fd_.get(), buffer.data(), buffer.size());
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) return;
            const auto size = static_cast<std::size_t>(n);
            for (std::size_t written = 0; written < size;) {
                const ssize_t w = ::write(destination_, buffer.data() + written, size - written);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) break;  // our own stream is gone: keep reading so that the child is never blocked
                written += static_cast<std::size_t>(w);
            }
            keep(std::string_view(buffer.data(), size));
            if (past_deadline()) return;
        }
    }

    void keep(std::string_view bytes) {
        const std::size_t to_head = std::min(bytes.size(), stderr_head_limit - head_.size());
        head_.append(bytes.substr(0, to_head));
        bytes.remove_prefix(to_head);
        if (bytes.empty()) return;
        tail_.append(bytes);
        if (tail_.size() > 2 * stderr_tail_limit) tail_.erase(0, tail_.size() - stderr_tail_limit);
    }

    base::FileDescriptor fd_;
    int destination_;
    std::string head_;
    std::string tail_;
    Clock::time_point deadline_{};
    std::atomic<bool> stopping_{false};
    std::thread thread_;  // last: started once everything it uses exists
};

// Waits for the foreground child, passing signals on.
int wait_in_foreground(pid_t child, const BlockedSignals& blocked, const std::string& name) {
    int stopped_by = 0;  // the last of SIGINT, SIGTERM, SIGHUP that came while the child ran
    for (;;) {
        int wait_status = 0;
        const pid_t done = ::waitpid(child, &wait_status, WNOHANG);
        // A launcher that exits 0 once told to stop (MPICH's Hydra may, after passing SIGTERM on to the ranks) ended a
        // job that did not finish: the status says which signal stopped it.
        if (done == child)
            return stopped_by != 0 && shell_status(wait_status) == 0 ? 128 + stopped_by : shell_status(wait_status);
        if (done < 0 && errno != EINTR) {
            throw SpawnError(fmt::format("waiting for '{}' failed: {}", name, std::strerror(errno)));
        }
        siginfo_t info{};
        const timespec tick{1, 0};  // SIGCHLD normally wakes us; the tick only guards against a lost one
        const int sig = ::sigtimedwait(&blocked.set(), &info, &tick);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            stopped_by = sig;
            // From the terminal (SI_KERNEL) the child's process group got the signal too; a second copy would make
            // mpirun abort at once instead of shutting the ranks down in order.
            if (info.si_code != SI_KERNEL) ::kill(child, sig);
        }
    }
}

CStrings environment_strings(const std::map<std::string, std::string>& environment) {
    std::vector<std::string> entries;
    entries.reserve(environment.size());
    for (const auto& [name, value] : environment) entries.push_back(name + "=" + value);
    return CStrings(std::move(entries));
}

SpawnError start_error(const std::string& name, int rc) {
    return SpawnError(fmt::format("cannot start '{}': {}{}", name, std::strerror(rc),
                                  rc == ENOENT ? " (not found on PATH; install it or give its full path)" : ""));
}

}  // namespace

int run_in_foreground(const std::vector<std::string>& argv, const std::map<std::string, std::string>& environment) {
    if (argv.empty()) throw SpawnError("cannot start an empty command");
    const BlockedSignals blocked;
    const SpawnAttributes attributes(ProcessGroup::Inherit);
    CStrings envp = environment_strings(environment);
    pid_t child = 0;
    if (const int rc = spawn(child, argv, envp.get(), nullptr, attributes); rc != 0) {
        throw start_error(argv.front(), rc);
    }
    return wait_in_foreground(child, blocked, argv.front());
}

ForegroundResult run_in_foreground_watching_stderr(const std::vector<std::string>& argv,
                                                   const std::map<std::string, std::string>& environment,
                                                   bool watch_stdout) {
    if (argv.empty()) throw SpawnError("cannot start an empty command");
    const IgnoreSigpipe sigpipe;
    const BlockedSignals blocked;
    const SpawnAttributes attributes(ProcessGroup::Inherit);
    CStrings envp = environment_strings(environment);
    base::Pipe err = base::make_pipe();
    std::optional<base::Pipe> out;
    FileActions actions;
    ::posix_spawn_file_actions_adddup2(actions.get(), err.write.get(), STDERR_FILENO);
    if (watch_stdout) {
        out = base::make_pipe();
        ::posix_spawn_file_actions_adddup2(actions.get(), out->write.get(), STDOUT_FILENO);
    }
    pid_t child = 0;
    if (const int rc = spawn(child, argv, envp.get(), &actions, attributes); rc != 0) {
        throw start_error(argv.front(), rc);
    }
    err.write.reset();
    StreamCopy copy(std::move(err.read), STDERR_FILENO);
    std::optional<StreamCopy> out_copy;
    if (out) {
        out->write.reset();
        out_copy.emplace(std::move(out->read), STDOUT_FILENO);
    }
    ForegroundResult result;
    result.status = wait_in_foreground(child, blocked, argv.front());
    copy.stop(std::chrono::seconds(2));
    result.stderr_head = copy.take_head();
    result.stderr_tail = copy.take_tail();
    if (out_copy) {
        out_copy->stop(std::chrono::seconds(2));
        std::string head = out_copy->take_head();
        std::string tail = out_copy->take_tail();
        result.stdout_end = tail.empty() ? std::move(head) : std::move(tail);
        if (result.stdout_end.size() > stderr_tail_limit) {
            result.stdout_end.erase(0, result.stdout_end.size() - stderr_tail_limit);
        }
    }
    return result;
}

std::string find_program(const std::string& name) {
    auto executable = [](const std::string& path) {
        struct stat st {};
        return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
    };
    if (name.empty()) return {};
    if (name.find('/') != std::string::npos) return executable(name) ? name : std::string{};
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        const std::size_t colon = dirs.find(':');
        std::string dir(dirs.substr(0, colon));
        if (dir.empty()) dir = ".";
        if (const std::string candidate = dir + "/" + name; executable(candidate)) return candidate;
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
    }
    return {};
}

}  // namespace lockstep::mpi_launcher
