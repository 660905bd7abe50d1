#pragma once
// Stacks in the hang report (internal): what each process is running when a collective hangs.
//
// A process answers the channel's STACK with the native frames of the thread that initialised lockstep (the one that
// made the world communicator, or called MPI_Init under the check library) and, in a Python program, the Python
// frames of every thread. The report asks every process of the job and prints one tree, ranks with the same frames
// together, as STAT (the Stack Trace Analysis Tool) merges the stacks of a job.
//
// The native frames are taken by the thread itself, interrupted by a real-time signal whose handler only walks its
// own stack (_Unwind_Backtrace, async-signal-safe once warmed up) into a preallocated buffer; the watchdog's thread
// waits for them with a bound and symbolises them. The Python frames are read by a helper thread that holds the GIL
// (PyGILState_Ensure), the interpreter's own frame objects through its public C API, found with dlsym so that
// liblockstep needs no libpython.

#include "channel.hpp"
#include "endpoint.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace lockstep::detail {

// Records the calling thread as the one whose native frames STACK shows; the first call wins.
void remember_initial_thread() noexcept;

// How long a capture waits for the interrupted thread, and for the GIL.
constexpr auto stack_bound = std::chrono::seconds(1);

// This process's stacks, as STACK answers them:
//   {"native": {"thread": tid, "frames": [{"function", "file", "line", "module", "offset"}, ...]} or {"error": why},
//    "python": {"threads": [{"id", "main", "frames": [{"function", "file", "line"}, ...]}]} or {"error": why}
//              (only in a Python program)}
// Frames innermost first. Never throws; a stack that cannot be taken is an "error" saying why.
[[nodiscard]] nlohmann::json take_stacks();

// Answers a peer's STACK on `connection` (a copy of the channel's), from a thread of its own: the serving thread
// must not wait for the interrupted thread or the GIL, nor drop the peer at its client deadline meanwhile.
void answer_stack_request(Fd connection);

// The stacks of these processes, asked at once (this process answers for itself): an object keyed by world rank
// ("0", "1", ...), each rank's answer as take_stacks() gives it, or {"unreachable": why}. What the trace file keeps
// (TraceContext::stacks).
[[nodiscard]] nlohmann::json ask_stacks(const std::vector<Endpoint>& endpoints, const Endpoint& self);

// The "Stacks" section of the hang report: one tree per kind of stack (native, Python), outermost call first, ranks
// with the same frames together, lockstep's, MPI's and the system's frames past the program's last one left out.
[[nodiscard]] std::string stacks_text(const nlohmann::json& stacks);

}  // namespace lockstep::detail
