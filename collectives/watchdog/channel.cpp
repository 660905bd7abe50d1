#include "channel.hpp"

#include <lockstep/errors.hpp>

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace lockstep::detail {

std::string key_text(const std::array<std::uint8_t, 16>& key) {
    std::string text;
    for (const std::uint8_t byte : key) text += fmt::format("{:02x}", byte);
    return text;
}

bool same_key(std::string_view presented, const std::string& expected) {
    if (presented.size() != expected.size()) return false;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
    }
    return diff == 0;
}

std::array<std::uint8_t, 16> random_key() {
    std::array<std::uint8_t, 16> key{};
    std::size_t filled = 0;
    while (filled < key.size()) {
        const ssize_t n = ::getrandom(key.data() + filled, key.size() - filled, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error(fmt::format("watchdog: getrandom() failed: {}", std::strerror(errno)));
        filled += static_cast<std::size_t>(n);
    }
    return key;
}

double realtime_us() {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

int milliseconds_until(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 1000 * 1000));
}

namespace {

void start_query(Query& q, const Endpoint& to, std::string_view verb) {
    addrinfo hints{};
    hints.ai_family = AF_INET;  // the listener is IPv4
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string host = to.host.str();
    if (to.port <= 0) {
        q.failure = "no known endpoint";
        return;
    }
    if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(to.port).c_str(), &hints, &found); rc != 0) {
        q.failure = fmt::format("cannot resolve {}: {}", host, gai_strerror(rc));
        return;
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
    q.fd = Fd(::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol));
    if (!q.fd.valid()) {
        q.failure = std::strerror(errno);
        return;
    }
    if (::connect(q.fd.get(), found->ai_addr, found->ai_addrlen) == 0) {
        q.connected = true;
    } else if (errno != EINPROGRESS) {
        q.failure = std::strerror(errno);
        return;
    }
    q.out = watchdog_request(verb, to);
}

}  // namespace

std::vector<Query> ask_all(const std::vector<Endpoint>& to, std::string_view verb, Clock::time_point deadline) {
    std::vector<Query> queries(to.size());
    for (std::size_t i = 0; i < to.size(); ++i) start_query(queries[i], to[i], verb);
    while (true) {
        std::vector<pollfd> fds;
        std::vector<std::size_t> which;
        for (std::size_t i = 0; i < queries.size(); ++i) {
            const Query& q = queries[i];
            if (q.done()) continue;
            fds.push_back({q.fd.get(), static_cast<short>(!q.connected || !q.out.empty() ? POLLOUT : POLLIN), 0});
            which.push_back(i);
        }
        if (fds.empty()) break;
        const int wait = milliseconds_until(deadline);
        if (wait <= 0 || ::poll(fds.data(), fds.size(), wait) < 0) {
            if (wait > 0 && errno == EINTR) continue;
            for (const std::size_t i : which) queries[i].failure = "no answer in time";
            break;
        }
        for (std::size_t k = 0; k < fds.size(); ++k) {
            Query& q = queries[which[k]];
            if (fds[k].revents == 0) continue;
            if (!q.connected) {
                int err = 0;
                socklen_t len = sizeof err;
                ::getsockopt(q.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
                if (err != 0) {
                    q.failure = std::strerror(err);
                    continue;
                }
                q.connected = true;
            }
            if (!q.out.empty()) {
                const ssize_t n = ::send(q.fd.get(), q.out.data(), q.out.size(), MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN) q.failure = "the connection broke";
                if (n > 0) q.out.erase(0, static_cast<std::size_t>(n));
                if (q.out.empty()) q.sent_us = realtime_us();
                continue;
            }
            // Answers can be megabytes (TRACE): large reads, and the newline looked for only in what is new.
            char buf[65536];
            const ssize_t n = ::read(q.fd.get(), buf, sizeof buf);
            if (n < 0 && errno == EAGAIN) continue;
            if (n <= 0) {
                q.failure = q.in.empty() ? "the connection was closed without an answer" : "a truncated answer";
                continue;
            }
            const std::size_t seen = q.in.size();
            q.in.append(buf, static_cast<std::size_t>(n));
            if (const auto newline = q.in.find('\n', seen); newline != std::string::npos) {
                q.answered_us = realtime_us();
                q.in.resize(newline);
                q.answer = std::move(q.in);
            }
        }
    }
    return queries;
}

std::string watchdog_request(std::string_view verb, const Endpoint& to) {
    return fmt::format("{} {}\n", verb, key_text(to.key));
}

}  // namespace lockstep::detail
