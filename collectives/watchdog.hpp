#pragma once
// The hang watchdog (internal).
//
// Each process keeps a progress board: the collective it is in (communicator, call number, op, shape, call site) and
// the last one it completed. The main thread writes it under an uncontended mutex at the start and end of each
// collective: no MPI call, no system call and no clock read on the hot path; the watchdog thread stamps the start
// and end times itself when it sees them (within its 100 ms period).
//
// A watchdog thread per process serves that board over a TCP socket (loopback when the job is on one node) and checks
// every 100 ms whether the collective in flight has outlived its timeout. When it has, it asks every process of the
// stuck communicator for its board, through those sockets: a channel that does not depend on MPI, so it answers
// while the collective is stuck and while a process computes or waits in MPI_Finalize. The lowest-ranked waiting
// process prints the report (op, call number, shape, seconds waited, which ranks never arrived, what each process is
// doing); then the job ends with MPI_Abort (exit code 124). A stuck send or recv is reported by the process that waits,
// with what its peer is doing instead (the matching call with another tag, the same direction, a collective, nothing).

#include <lockstep/signature.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::detail {

struct OpRecord {
    std::uint64_t comm_id = 0;
    std::uint64_t sequence = 0;
    OpKind op = OpKind::Barrier;
    bool point_to_point = false;  // send/recv: peer in `root`
    const char* p2p_name = nullptr;
    int tag = 0;  // send/recv
    int root = -1;
    DType dtype = DType::Float32;
    bool has_tensor = false;
    int ndim = 0;
    std::int64_t dims[max_wire_dims] = {};
    const char* file = "";
    unsigned line = 0;
    const char* function = "";
    double timeout = 0.0;  // seconds; 0: never reported
};

// Where a process's watchdog answers, exchanged by every new communicator over its members.
struct Endpoint {
    char host[64];
    std::int32_t port;
    std::int32_t pid;
    std::int32_t world_rank;
    std::int32_t unused;
    std::uint64_t next_comm_id;  // the sender's counter of communicators; the new one takes the largest
};

class Watchdog {
public:
    // The process-wide watchdog. ensure_started() opens the listening socket and starts the thread (local, no MPI).
    static Watchdog& instance();
    void ensure_started(int thread_level);
    [[nodiscard]] bool running() const noexcept;
    // This process's endpoint, to be exchanged over a new communicator.
    [[nodiscard]] Endpoint endpoint() const;
    // The members of a communicator, in its rank order.
    void register_communicator(std::uint64_t comm_id, std::vector<Endpoint> members);
    void forget_communicator(std::uint64_t comm_id);
    // A note shown while no collective is in flight (e.g. "in MPI_Finalize"); empty clears it.
    void set_phase(std::string phase);

    // Start and end of a collective or send/recv on this process's board (no clock read: see above).
    void begin(const OpRecord& record);
    void end();

    // The report text for a stuck record, asking every member of its communicator (used by the thread; public for
    // tests that want the text without ending the job).
    [[nodiscard]] std::string build_report(const OpRecord& stuck, double waited_seconds, bool* is_reporter);

    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;
    ~Watchdog();

    struct State;

private:
    Watchdog();
    std::unique_ptr<State> state_;
};

}  // namespace lockstep::detail
