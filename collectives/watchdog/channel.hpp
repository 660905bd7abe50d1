#pragma once
// The watchdog's channel (internal): the wire format, the key, and the client that asks every peer at once.

#include "endpoint.hpp"

#include <lockstep/base/file_descriptor.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::detail {

using Clock = std::chrono::steady_clock;

// An owned file descriptor (lockstep/base's, as every layer's).
using Fd = base::FileDescriptor;

// --- The channel's wire format: one request line "VERB KEY\n", answered by one line (a board as JSON, or "OK").

constexpr std::size_t longest_request = 256;
// A connection that has not sent its request (or taken its answer) by then is dropped: the server never waits on a
// client, so idle or half-open connections cannot delay the answers to peers.
constexpr auto client_deadline = std::chrono::milliseconds(500);
constexpr std::size_t most_clients = 256;
// How long a query of peers waits for their answers: long enough for a loaded node, short enough for a report.
constexpr auto ask_deadline = std::chrono::seconds(2);
// Once a request is answered, the server gives the client this long to take the answer: a TRACE answer can be
// megabytes, more than client_deadline allows on a loaded node.
constexpr auto answer_deadline = std::chrono::seconds(10);

std::string key_text(const std::array<std::uint8_t, 16>& key);

// Compares in time independent of where the texts differ.
bool same_key(std::string_view presented, const std::string& expected);

std::array<std::uint8_t, 16> random_key();

// This process's CLOCK_REALTIME in microseconds.
[[nodiscard]] double realtime_us();

int milliseconds_until(Clock::time_point deadline);

// One query in flight to one peer: connect, send the request, read one line; all non-blocking.
struct Query {
    Fd fd;
    std::string out;
    std::string in;
    bool connected = false;
    std::optional<std::string> answer;  // the line received
    std::string failure;                // why there is none
    // CLOCK_REALTIME microseconds when the request was sent and when the answer was complete: the bounds of the
    // asked process's clock reading in its answer, for the estimate of its clock's offset.
    double sent_us = 0.0;
    double answered_us = 0.0;
    [[nodiscard]] bool done() const { return answer.has_value() || !failure.empty(); }
};

// Sends `verb` to every endpoint at once and collects the answer lines until `deadline`. A slow or dead peer costs
// the deadline once, not once per peer.
std::vector<Query> ask_all(const std::vector<Endpoint>& to, std::string_view verb, Clock::time_point deadline);

}  // namespace lockstep::detail
