// An owned file descriptor closes exactly once, wherever its owner goes.
#include <boost/test/unit_test.hpp>

#include <lockstep/base/file_descriptor.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace base = lockstep::base;

namespace {
bool is_open(int fd) {
    return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(file_descriptor)

BOOST_AUTO_TEST_CASE(closes_once_when_its_owner_goes) {
    int raw = -1;
    {
        base::FileDescriptor fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        BOOST_TEST_REQUIRE(fd.valid());
        raw = fd.get();
        BOOST_TEST(is_open(raw));
        base::FileDescriptor moved(std::move(fd));
        BOOST_TEST(!fd.valid());  // NOLINT(bugprone-use-after-move): a moved-from owner holds nothing
        BOOST_TEST(moved.get() == raw);
        base::FileDescriptor assigned;
        assigned = std::move(moved);
        BOOST_TEST(assigned.get() == raw);
        BOOST_TEST(is_open(raw));
    }
    BOOST_TEST(!is_open(raw));
}

BOOST_AUTO_TEST_CASE(release_hands_it_over_and_reset_closes) {
    base::FileDescriptor fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const int raw = fd.release();
    BOOST_TEST(!fd.valid());
    BOOST_TEST(is_open(raw));
    fd.reset(raw);
    BOOST_TEST(fd.get() == raw);
    fd.reset();
    BOOST_TEST(!is_open(raw));
    BOOST_TEST(!static_cast<bool>(fd));
}

BOOST_AUTO_TEST_CASE(a_pipe_closes_on_exec_and_carries_bytes) {
    base::Pipe pipe = base::make_pipe();
    BOOST_TEST((::fcntl(pipe.read.get(), F_GETFD) & FD_CLOEXEC) != 0);
    BOOST_TEST((::fcntl(pipe.write.get(), F_GETFD) & FD_CLOEXEC) != 0);
    BOOST_TEST(::write(pipe.write.get(), "x", 1) == 1);
    pipe.write.reset();
    char c = 0;
    BOOST_TEST(::read(pipe.read.get(), &c, 1) == 1);
    BOOST_TEST(c == 'x');
    BOOST_TEST(::read(pipe.read.get(), &c, 1) == 0);  // end of file: the only write end is closed
}

BOOST_AUTO_TEST_SUITE_END()
