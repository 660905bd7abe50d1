#include <lockstep/base/file_descriptor.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <system_error>

namespace lockstep::base {

void FileDescriptor::reset(int fd) noexcept {
    // Not retried on EINTR: Linux has released the descriptor whatever close() returns, and it may be reused already.
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
}

Pipe make_pipe() {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
    return Pipe{FileDescriptor(fds[0]), FileDescriptor(fds[1])};
}

}  // namespace lockstep::base
