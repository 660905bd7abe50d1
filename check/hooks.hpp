#pragma once
// What every intercepted MPI call tells the watchdog side of the interposition library (check/watch.cpp), and what
// the checking core offers to the other interception files (check/p2p.cpp, check/fortran/).
//
// Every entry point of liblockstep_check.so follows the same shape:
//
//     int MPI_Xxx(...) {
//         LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Xxx(...));             // lockstep itself is calling: straight to MPI
//         const CallDescriptor call{"MPI_Xxx", comm, ..., LOCKSTEP_CHECK_CALLER(), CallKind::...};
//         CallScope scope(call);                                  // call_begin ... call_end
//         return scope.returned(...);                             // the call (checked in debug mode): what it
//                                                                 // returns is the recorded outcome
//     }
//
// The hooks run on the program's thread, on every call, with debug mode on or off: they must stay cheap (no
// allocation, no lock on the common path) and must not call MPI (call_end asks PMPI_Error_class what class a failed
// call's error code is, on the error path alone). A hook that needs lockstep's own code (which calls
// MPI_ functions, resolved to this library's) sets InsideLockstep for the duration.

#include <mpi.h>

#include <climits>
#include <cstdint>

namespace lockstep::check {

// ------------------------------------------------------------------ re-entry and the caller's address
// Set while lockstep's own code runs inside this library: every MPI_ entry point then goes straight to its PMPI_
// function (lockstep's MPI calls resolve to this library's MPI_ symbols too).
extern thread_local bool inside_lockstep __attribute__((tls_model("initial-exec")));
// The program's call site, set by a Fortran shim before it calls the C entry point (the C entry point would otherwise
// see the shim as its caller); taken and cleared by LOCKSTEP_CHECK_CALLER().
extern thread_local const void* caller_address __attribute__((tls_model("initial-exec")));

class InsideLockstep {
public:
    InsideLockstep() noexcept : previous_(inside_lockstep) { inside_lockstep = true; }
    ~InsideLockstep() { inside_lockstep = previous_; }
    InsideLockstep(const InsideLockstep&) = delete;
    InsideLockstep& operator=(const InsideLockstep&) = delete;

private:
    bool previous_;
};

[[nodiscard]] inline const void* take_caller(const void* return_address) noexcept {
    const void* set = caller_address;
    if (set == nullptr) return return_address;
    caller_address = nullptr;
    return set;
}

// In an MPI_ entry point (a macro: __builtin_return_address must be evaluated in the entry point itself).
#define LOCKSTEP_CHECK_CALLER() ::lockstep::check::take_caller(__builtin_return_address(0))
#define LOCKSTEP_CHECK_PASS_THROUGH(pmpi_call)                    \
    do {                                                          \
        if (::lockstep::check::inside_lockstep) return pmpi_call; \
    } while (false)

// ------------------------------------------------------------------ the call descriptor
enum class CallKind : std::uint8_t { Collective, PointToPoint, Other };

inline constexpr int kNoPeer = INT_MIN;  // no root or peer (MPI_ANY_SOURCE and MPI_PROC_NULL are peers)
inline constexpr int kNoTag = INT_MIN;

struct CallDescriptor {
    const char* function;  // "MPI_Bcast": a static string
    MPI_Comm comm;
    int peer = kNoPeer;  // the root of a rooted collective, the peer of a point-to-point call
    int tag = kNoTag;
    long long count = 0;  // elements of `datatype` (a v-variant: this process's send count)
    MPI_Datatype datatype = MPI_DATATYPE_NULL;
    const void* caller = nullptr;  // the program's return address
    CallKind kind = CallKind::Other;
    // A wait or test: the program's requests as it passed them (before MPI sets completed ones to MPI_REQUEST_NULL),
    // so that the watchdog can say what the wait waits for.
    const MPI_Request* requests = nullptr;
    int request_count = 0;
};

// ------------------------------------------------------------------ the hooks (implemented in check/watch.cpp)
using CallToken = std::uint64_t;

// After MPI_Init/MPI_Init_thread returned (provided: the thread level MPI gave), and before MPI_Finalize.
void on_init(int provided) noexcept;
void on_finalize(const void* caller = nullptr) noexcept;  // the program's call of MPI_Finalize, if known
// Around every intercepted call that may block; the token of call_begin goes to its call_end, with what the call
// returned (kept as its outcome in the flight recorder).
[[nodiscard]] CallToken call_begin(const CallDescriptor& call) noexcept;
void call_end(CallToken token, int rc = MPI_SUCCESS) noexcept;
// A non-blocking call returned `request` (the handle the program holds); it completed (wait/test) or was freed.
void request_started(MPI_Request request, const CallDescriptor& call) noexcept;
void request_completed(MPI_Request request) noexcept;
// A communicator the program made (`function` made it from `parent`; MPI_COMM_NULL for the world and self
// communicators at start-up), and one it freed.
void communicator_created(MPI_Comm created, MPI_Comm parent, const char* function, const void* caller) noexcept;
void communicator_freed(MPI_Comm comm) noexcept;

// The call on its board while the scope lives; every return of the entry point goes through returned():
//     CallScope scope(call);
//     return scope.returned(PMPI_...(...));
class CallScope {
public:
    explicit CallScope(const CallDescriptor& call) noexcept : token_(call_begin(call)) {}
    ~CallScope() { call_end(token_, rc_); }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    int returned(int rc) noexcept {
        rc_ = rc;
        return rc;
    }

protected:
    explicit CallScope(CallToken token) noexcept : token_(token) {}

private:
    CallToken token_;
    int rc_ = MPI_SUCCESS;
};

// ------------------------------------------------------------------ what the checking core offers
// Whether debug mode is on in this process (lockstep's Config `debug`, LOCKSTEP_DEBUG_MODE); fixed at MPI_Init.
extern bool debug_mode;

// In debug mode a non-blocking collective starts its payload only once its signature exchange has completed, so a
// process must keep such deferred calls moving while it waits anywhere else: a blocking call that an intercepted
// entry point makes while deferred_pending() is true goes through wait_progressing (its I-form, then this), never
// through the blocking PMPI_ call itself.
[[nodiscard]] bool deferred_pending() noexcept;
// Moves every deferred call on (starts the payloads whose exchange completed, completes finished ones).
void progress_deferred();
// Waits for `request` (a PMPI request) while moving deferred calls on; MPI's return code.
int wait_progressing(MPI_Request* request, MPI_Status* status);

// A blocking call of an entry point: `blocking()` (the PMPI_ call) when nothing is deferred, else its I-form
// `start(&request)` and wait_progressing. For point-to-point calls only: MPI matches a blocking send or receive with a
// non-blocking one, but never a blocking collective (MPI_Comm_dup included) with a non-blocking one, and whether
// something is deferred differs between processes.
template <class Blocking, class Start>
int run_blocking(Blocking blocking, Start start, MPI_Status* status) {
    if (!deferred_pending()) return blocking();
    MPI_Request request = MPI_REQUEST_NULL;
    if (const int rc = start(&request); rc != MPI_SUCCESS) return rc;
    return wait_progressing(&request, status);
}

// In debug mode, a request the program started (its handle, as the program holds it): MPI_Finalize names those that
// were never completed or freed ("a request never waited for"). The wait, test, free and cancel entry points (the
// core's) forget it when it completes. Does nothing with debug mode off.
void track_request(MPI_Request request, const CallDescriptor& call);

}  // namespace lockstep::check
