// The watchdog's channel under hostile clients, run under mpirun by watchdog_test.py (mode channel).
//
// Every process first checks the channel of the next process: a query with its key gets a board (the control), and
// queries without a key, with a wrong key, or with garbage get no answer; a wrong-key END leaves it running. Then every
// process opens 20 idle connections (and 5 that send half a request) to every process's watchdog, keeps them open, and
// the last rank leaves the loop early and exits: the report must still come within the timeout.
#include <collectives/watchdog.hpp>
#include <lockstep.hpp>

#include <mpi.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using lockstep::detail::Endpoint;

namespace {

// An open TCP connection to a watchdog (closed on destruction), or -1.
struct Connection {
    int fd = -1;
    explicit Connection(const Endpoint& to) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<std::uint16_t>(to.port));
        ::inet_pton(AF_INET, to.host.str().c_str(), &addr.sin_addr);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    Connection(Connection&& o) noexcept : fd(o.fd) { o.fd = -1; }
    Connection(const Connection&) = delete;
    ~Connection() {
        if (fd >= 0) ::close(fd);
    }
    void send(const std::string& text) const { (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL); }
    // Everything the server sends until it closes the connection or 3 s pass.
    [[nodiscard]] std::string receive() const {
        std::string got;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (std::chrono::steady_clock::now() < until) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            char buf[4096];
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n <= 0) break;
            got.append(buf, static_cast<std::size_t>(n));
        }
        return got;
    }
};

std::string ask(const Endpoint& to, const std::string& request) {
    Connection c(to);
    if (c.fd < 0) return "(no connection)";
    c.send(request);
    return c.receive();
}

int failures = 0;
void expect(bool ok, int rank, const std::string& what) {
    std::printf("rank %d channel: %s: %s\n", rank, ok ? "ok" : "FAIL", what.c_str());
    std::fflush(stdout);
    if (!ok) ++failures;
}

}  // namespace

int main() {
    lockstep::ScopedRuntime rt;
    auto& comm = lockstep::Communicator::world();
    const int me = comm.rank();
    const int size = comm.size();

    // Every process's endpoint, as the communicators exchange them (the test reads them directly).
    const Endpoint mine = lockstep::detail::Watchdog::instance().endpoint();
    std::vector<Endpoint> all(static_cast<std::size_t>(size));
    MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    const Endpoint& next = all[static_cast<std::size_t>((me + 1) % size)];

    Endpoint wrong = next;
    wrong.key[0] ^= 0xff;
    expect(ask(next, lockstep::detail::watchdog_request("BOARD", next)).starts_with("{"), me,
           "a query with the key gets a board");
    expect(ask(next, "BOARD\n").empty(), me, "a query without a key gets nothing");
    expect(ask(next, lockstep::detail::watchdog_request("BOARD", wrong)).empty(), me,
           "a query with a wrong key gets nothing");
    expect(ask(next, std::string(8192, 'x')).empty(), me, "garbage gets nothing");
    expect(ask(next, lockstep::detail::watchdog_request("END", wrong)).empty(), me,
           "END with a wrong key gets nothing");
    MPI_Barrier(MPI_COMM_WORLD);  // every END has been tried; the peer must still answer
    expect(ask(next, lockstep::detail::watchdog_request("BOARD", next)).starts_with("{"), me,
           "the peer still runs after a wrong-key END");

    // Idle and half-open connections to every watchdog through the hang: the watchdog drops a connection that has
    // not sent a request within its deadline, so a thread keeps opening fresh ones, 20 idle and 5 half-open per
    // process at any time.
    std::atomic<bool> done{false};
    std::thread holder([&] {
        std::vector<Connection> held;
        while (!done) {
            std::vector<Connection> fresh;
            for (const Endpoint& e : all) {
                for (int i = 0; i < 20; ++i) fresh.emplace_back(e);
                for (int i = 0; i < 5; ++i) {
                    fresh.emplace_back(e);
                    fresh.back().send("BOARD 0123");
                }
            }
            held = std::move(fresh);
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
    });
    std::printf("rank %d: holding 25 connections to each of %d watchdogs\n", me, size);
    std::fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);

    lockstep::Tensor grad = lockstep::Tensor::ones({16});
    for (int step = 0; step < 3; ++step) {
        if (step == 2 && me == size - 1) break;
        comm.allreduce_(grad, lockstep::ReduceOp::Mean);
    }
    done = true;
    holder.join();
    return failures == 0 ? 0 : 1;
}
