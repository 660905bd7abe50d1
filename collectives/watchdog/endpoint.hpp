#pragma once
// Where a process's watchdog answers, and the request a peer sends it (internal).
//
// The channel answers only the processes of the job: each process draws a random key at start-up and publishes it
// with its endpoint in the MPI exchange every new communicator makes, so only a process that took part in that
// exchange can present it. It serves many clients at once, each with a short deadline, so idle or malformed
// connections cannot hold up a report.

#include "../fixed_record.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::detail {

// Where a process's watchdog answers, exchanged by every new communicator over its members.
struct Endpoint {
    FixedText<64> host;
    std::int32_t port;
    std::int32_t pid;
    std::int32_t world_rank;
    // When the process's watchdog started (UTC seconds since the epoch): with the pid, a name that every member of a
    // communicator derives alike from its first member's endpoint (the trace file of a collective error).
    std::uint32_t started_s;
    std::uint64_t next_comm_id;  // the sender's counter of communicators; the new one takes the largest
    // The key a query to this process's watchdog must present: random per process, it travels only inside this MPI
    // exchange, never on a command line or in the environment.
    std::array<std::uint8_t, 16> key;
};

// The request line that asks the watchdog at `to` for `verb` (BOARD, NUDGE, END, TRACE, PEERS), with its key.
[[nodiscard]] std::string watchdog_request(std::string_view verb, const Endpoint& to);

}  // namespace lockstep::detail
