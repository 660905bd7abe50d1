#pragma once
// An owned POSIX file descriptor: closed when its owner goes, moved but never copied, so that no path (an exception
// included) leaks one or closes one twice.

#include <utility>

namespace lockstep::base {

class FileDescriptor {
public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
    ~FileDescriptor() { reset(); }
    FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
    FileDescriptor& operator=(FileDescriptor&& other) noexcept {
        if (this != &other) reset(other.release());
        return *this;
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;

    [[nodiscard]] int get() const noexcept { return fd_; }
    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
    explicit operator bool() const noexcept { return valid(); }

    // Hands the descriptor to the caller, who closes it from now on.
    [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
    // Closes the descriptor held (if any) and holds `fd` instead.
    void reset(int fd = -1) noexcept;

private:
    int fd_ = -1;
};

// Both ends of a pipe whose descriptors close on exec, so that no child process inherits them unless it is given one
// explicitly (a leaked write end would keep a reader from ever seeing end-of-file). Throws std::system_error.
struct Pipe {
    FileDescriptor read;
    FileDescriptor write;
};
[[nodiscard]] Pipe make_pipe();

}  // namespace lockstep::base
