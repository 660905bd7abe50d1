#pragma once
// The watchdog for calls lockstep does not carry: the communicators and calls of a program that talks to MPI (or gloo,
// or NCCL) itself, watched by a layer above lockstep (an interposition library, a wrapper backend) on the same boards,
// with the same hang report and the same end of the job as lockstep's own collectives.
//
// How a layer uses it:
//   1. start() once (it opens the watchdog's socket and starts its thread; no MPI call);
//   2. for every communicator of the program: exchange endpoint() with its members (e.g. PMPI_Allgather of
//      sizeof(EndpointBytes) MPI_BYTEs, on a communicator whose calls the layer does not watch), then watch() it with
//      every member's bytes in the communicator's rank order; forget() it when the program frees it;
//   3. around every call of the program: begin_collective()/end_collective(), or begin_point_to_point()/
//      end_point_to_point() for sends, receives, probes and waits.
// A call that outlives the timeout then produces the report: which processes are in which call, since when, from which
// call site, who never arrived, what the peer of a stuck receive or wait does instead; and the job ends with exit
// code 124.
//
// Every member must watch its communicators in the same order (the members agree on an id that way, as lockstep's own
// communicators do) and count the same collectives: a non-blocking collective is begun and ended around its posting
// call, so that the call numbers of every member agree.
//
// The cost: begin and end write a record with plain stores (no lock, atomic read-modify-write, clock read or
// allocation), except begin_point_to_point on a communicator watched with threads_share_point_to_point, which takes a
// mutex (several threads may then be in its sends and receives at once).

#include <lockstep/export.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace lockstep::foreign {

// A process's watchdog endpoint as bytes, for the caller's exchange: where its watchdog answers and the key that a
// query must present (so exchange it only among the processes of the job).
using EndpointBytes = std::array<std::byte, 104>;

// Starts this process's watchdog (again: nothing). world_rank names the process in reports; -1 takes it from the
// launcher's environment.
LOCKSTEP_API void start(int world_rank = -1);
// This process's endpoint, once started.
[[nodiscard]] LOCKSTEP_API EndpointBytes endpoint();
// The timeout of lockstep's settings (LOCKSTEP_TIMEOUT, config.yaml, default), in seconds; 0: off.
[[nodiscard]] LOCKSTEP_API double configured_timeout();

struct WatchOptions {
    // Seconds a call may take before it is reported; 0: its calls are not written on the boards (they are no-ops).
    double timeout = 0.0;
    // Several threads may be in sends, receives or waits of this communicator at once (MPI_THREAD_MULTIPLE): the
    // point-to-point board then serialises its writers with a mutex.
    bool threads_share_point_to_point = false;
    // What the reports call the communicator ("MPI_COMM_WORLD", "gloo process group 2"); empty: nothing.
    std::string name;
    // If set, a collective of this communicator that outlives the timeout is handed to this function (on a watchdog
    // thread, once, with the watchdog's lock held: it must not call back into this API) with the report that every
    // waiting process builds, instead of ending the job.
    std::function<void(const std::string& report)> on_timeout;
};

// How reports name a caller's return address ("main (app.c:12)"), called on a watchdog thread when a report is built
// (it must not call MPI); without one, reports show the module and offset ("app+0x1a2b").
using Symbolizer = std::string (*)(const void* return_address);
LOCKSTEP_API void set_symbolizer(Symbolizer symbolizer) noexcept;

// A watched communicator (opaque); valid until forget().
struct Watched;

// Registers a communicator whose members' endpoints are `members`, in its rank order (this process among them).
[[nodiscard]] LOCKSTEP_API Watched* watch(std::span<const EndpointBytes> members, WatchOptions options);
// A communicator made without a chance to exchange endpoints (MPI_Comm_idup: not usable before its request
// completes), with the same members in the same order as `parent`: registered with the parent's endpoints, under an id
// that every member derives alike from the parent's and `index`, the number of such duplicates made of the parent
// before (the same on every member, since they make them in the same order).
[[nodiscard]] LOCKSTEP_API Watched* watch_duplicate(const Watched* parent, std::uint64_t index, WatchOptions options);
// Stops watching it (its last call still shows in reports of other communicators). Null: nothing.
LOCKSTEP_API void forget(Watched* comm) noexcept;
// Renames it in reports (e.g. once the program named it with MPI_Comm_set_name).
LOCKSTEP_API void rename(Watched* comm, std::string name);

// What the data of a point-to-point call or a wait does: it goes to the peer, comes from it, or neither (a wait for
// requests that are not one send or receive, e.g. a non-blocking collective's).
enum class Direction : std::uint8_t { send, receive, none };

inline constexpr int no_peer = -1;     // a collective without a root; a wait without one peer
inline constexpr int any_source = -2;  // a receive from any process (MPI_ANY_SOURCE)
inline constexpr int any_tag = -1;     // a receive of any tag (MPI_ANY_TAG)

// One call of the program. Every string must live as long as the process (string literals, or text the caller keeps
// one copy of), since the watchdog reads them at any time.
struct Call {
    const char* name = "";                  // the function: "MPI_Allreduce", "MPI_Recv", "MPI_Waitall"
    Direction direction = Direction::none;  // point-to-point calls and waits
    int peer = no_peer;       // a collective's root; the peer of a send or receive (or the request a wait waits for)
    int tag = 0;              // of a send or receive, or any_tag
    std::int64_t count = -1;  // elements; -1: not known
    const char* datatype = nullptr;  // the datatype's name ("MPI_INT"); null: not known
    // Where it was called from: the caller's return address (symbolised only when a report is built), or a known
    // place (a Python line), which wins when file is set.
    const void* caller = nullptr;
    const char* file = nullptr;
    unsigned line = 0;
    const char* function = nullptr;
    // A wait: the call that issued the request it waits for ("MPI_Irecv") and that call's return address.
    const char* request = nullptr;
    const void* request_caller = nullptr;
};

// The boards: begin before the program's call, end after it returns. Null comm: nothing. Collectives of a communicator
// have one writer at a time (MPI orders them); point-to-point calls may come from several threads when watched with
// threads_share_point_to_point.
LOCKSTEP_API void begin_collective(Watched* comm, const Call& call) noexcept;
// `error`, null when the call succeeded: what it failed with instead, a string of static storage (an MPI error class's
// name, say), which the flight recorder keeps as the call's outcome.
LOCKSTEP_API void end_collective(Watched* comm, const char* error = nullptr) noexcept;
LOCKSTEP_API void begin_point_to_point(Watched* comm, const Call& call) noexcept;
LOCKSTEP_API void end_point_to_point(Watched* comm, const char* error = nullptr) noexcept;

// What the process does while it is in none of its watched calls, shown in reports ("in MPI_Finalize"), and where it
// was called from; empty clears it. A process with a phase has left the program's communication: its peers' reports
// say so.
LOCKSTEP_API void set_phase(std::string phase, const void* caller = nullptr);

// At the end of the program, before MPI_Finalize: when the setting trace_file asks for a trace at exit
// (docs/tracing.md, "Taking a trace"), every process's recorded calls are gathered over `comm` to its rank 0, which
// writes the file. Collective over `comm` (every process of it calls it, with no other call of its in flight); nothing
// otherwise. Errors are logged, never thrown.
LOCKSTEP_API void write_trace_at_exit(MPI_Comm comm) noexcept;

}  // namespace lockstep::foreign
