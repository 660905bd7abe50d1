#pragma once
// Communicator: collectives on lockstep tensors over an MPI communicator.
//
// Every operation fills one call record and goes through one funnel (collectives/communicator_impl.hpp):
//   1. The call is recorded on the communicator's progress board read by the watchdog (plain stores: no lock, MPI
//      call, system call or clock read).
//   2. In debug mode, one MPI_Allgather of a fixed-size signature on a control communicator (a duplicate, so it never
//      matches payload traffic). Every rank compares all signatures by the same rule; on a mismatch every rank throws
//      the same SignatureMismatchError and no payload call is made. Debug off: no extra MPI call at all.
//   3. The payload MPI call, on host memory, on device memory when MPI is CUDA-aware, or staged through pinned host
//      buffers in chunks otherwise.
// Results are new tensors on the input's device; functions ending in `_` work in place.

#include <lockstep/config.hpp>
#include <lockstep/export.hpp>
#include <lockstep/signature.hpp>
#include <lockstep/tensor.hpp>
#include <lockstep/work.hpp>

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lockstep {

struct CommunicatorOptions {
    std::optional<bool> debug;      // default: Config `debug`
    std::optional<double> timeout;  // seconds; 0 disables the watchdog. Default: Config `timeout`
    // Whether collectives may run through the node's shared-memory arena (shared_memory.hpp) when every process's
    // tensor lies in it. Default: on whenever the arena is active (Config `shm`).
    std::optional<bool> shared_memory;
    // Whether non-blocking collectives run on a progress thread of the communicator (while the caller computes) or
    // inside wait()/test(). Default: Config `progress_thread`; off whenever MPI lacks MPI_THREAD_MULTIPLE.
    std::optional<bool> progress_thread;
    // What a call that outlives `timeout` does (Config `on_timeout`): End prints the watchdog's report and ends the
    // job (exit code 124); Raise fails the call with a TimeoutError (the report) on the processes that waited and
    // leaves this communicator broken: every later call on it throws a TimeoutError at once (docs/collectives.md).
    // Raise runs every collective of the communicator on its progress thread, so it needs one: a ConfigError where
    // there is none (MPI below MPI_THREAD_MULTIPLE, or progress_thread off). Sends and receives always end the job.
    std::optional<OnTimeout> on_timeout;
    // Entries of this communicator's flight recorder (Config `trace_calls`, at most 1048576); 0: no recorder.
    std::optional<std::size_t> trace_calls;
};

// A collective that another library carries for a communicator's processes (gloo or NCCL under a torch process group):
// what lockstep checks and watches of it without moving its data (Communicator::begin_foreign).
struct ForeignCall {
    OpKind op = OpKind::Barrier;
    std::optional<DType> dtype;           // none: a barrier, or a dtype lockstep does not know
    std::span<const std::int64_t> shape;  // the tensor every process compares (read during begin_foreign only)
    DeviceType device = DeviceType::CPU;
    int root = -1;  // the root of a rooted collective, else -1
    std::optional<ReduceOp> reduce_op;
    int varying_dim = -1;  // a dimension allowed to differ between processes (uneven alltoall: 0), else -1
};

struct CommunicatorStats {
    std::uint64_t collectives = 0;         // collective calls made (send/recv not counted)
    std::uint64_t signature_checks = 0;    // debug-mode signature exchanges
    std::uint64_t mpi_calls = 0;           // MPI calls lockstep made for those collectives, exchanges included
    double wait_seconds = 0.0;             // wall time spent inside collectives
    std::uint64_t shm_calls = 0;           // collectives that moved their data through the shared-memory arena
    std::uint64_t hierarchical_calls = 0;  // of those, the ones that spanned nodes (arena, MPI between nodes, arena)
    std::uint64_t small_calls = 0;         // of those, the ones through the small-message path (shm_small_max)
    std::uint64_t shm_exchanges = 0;       // debug mode's signature exchanges through the arena (not MPI)
};

class LOCKSTEP_API Communicator {
public:
    // Duplicates `comm` (lockstep never uses or frees the caller's handle). Collective over `comm`.
    explicit Communicator(MPI_Comm comm, CommunicatorOptions options = {});
    ~Communicator();
    Communicator(Communicator&&) noexcept;
    Communicator& operator=(Communicator&&) noexcept;
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    // The communicator over the Runtime's processes (Runtime::init() first). Created on first use.
    static Communicator& world();

    [[nodiscard]] int rank() const noexcept;
    [[nodiscard]] int size() const noexcept;
    [[nodiscard]] MPI_Comm mpi_comm() const noexcept;
    [[nodiscard]] bool debug() const noexcept;
    [[nodiscard]] double timeout() const noexcept;
    void set_debug(bool on) noexcept;  // must be switched on every rank at the same point
    // The step of the program's loop (epoch, iteration), carried by every later call's signature in debug mode: a
    // process that skipped or repeated a step is caught at its next collective, where call numbers alone still pair
    // up. One store per step, nothing per call; 0 (the default) means no step is set. Set it on every rank at the top
    // of the loop body, before anything that may `continue`.
    void set_step(std::uint64_t step) noexcept;
    [[nodiscard]] std::uint64_t step() const noexcept;
    [[nodiscard]] CommunicatorStats stats() const noexcept;
    // Shared-memory collectives (allreduce, reduce_scatter, allgather, broadcast, reduce): used when this is on, the
    // arena is active on every process, and every process's tensors lie in it; otherwise the MPI path. Switch it on
    // every rank at the same point. Off: always the MPI path. shared_memory() is false where the arena is not usable.
    void set_shared_memory(bool on) noexcept;
    [[nodiscard]] bool shared_memory() const noexcept;

    // Sub-groups: collective over this communicator, like MPI_Comm_split / MPI_Comm_dup. What `options` leaves unset
    // comes from this communicator (debug, timeout, shared_memory, on_timeout) or the Config (progress_thread).
    [[nodiscard]] Communicator split(int color, int key, const CommunicatorOptions& options = {}) const;
    [[nodiscard]] Communicator dup(const CommunicatorOptions& options = {}) const;
    // A communicator of the listed ranks of this one, in that order, made by those ranks only: the others do not take
    // part (MPI_Comm_create_group; what a framework's new_group needs). Every member passes the same list and tag.
    [[nodiscard]] Communicator create_group(std::span<const int> ranks, int tag = 0,
                                            const CommunicatorOptions& options = {}) const;
    // What a call that outlives timeout() does (CommunicatorOptions::on_timeout).
    [[nodiscard]] OnTimeout on_timeout() const noexcept;
    // Whether a call on this communicator timed out in on_timeout raise mode: every call on it now throws a
    // TimeoutError at once. Free it (no MPI call is made then) and go on with other communicators.
    [[nodiscard]] bool timed_out() const noexcept;
    // The watchdog's verdict once it found a call of this process stuck (its report; the job ends within seconds),
    // else nullopt. For callers that poll from another thread, such as a framework's error handling.
    [[nodiscard]] std::optional<std::string> async_error() const;
    // For layers above that check their own arguments first (the C interface): joins a collective that this process
    // cannot make, because its arguments failed those checks with `error` (an exception of lockstep's types). In
    // debug mode every rank then throws the same CallRejectedError naming this process, just as when the collective's
    // own checks fail (or, when every process failed with the same type of error, that type); otherwise this process
    // rethrows `error`. Pass what the call would have had, so that the other ranks' signatures compare with it.
    [[noreturn]] void reject_call(OpKind op, const Tensor* input, int root, std::optional<ReduceOp> reduce_op,
                                  std::exception_ptr error, CallSite site = {});

    void barrier(CallSite site = {});
    // Root's tensor to every rank. Every rank passes a tensor of the same shape and dtype (non-roots' values unused).
    [[nodiscard]] Tensor broadcast(const Tensor& t, int root, CallSite site = {});
    Tensor& broadcast_(Tensor& t, int root, CallSite site = {});
    // Reduction to `root`; other ranks get an undefined tensor.
    [[nodiscard]] Tensor reduce(const Tensor& t, Reduction op, int root, CallSite site = {});
    [[nodiscard]] Tensor allreduce(const Tensor& t, Reduction op = ReduceOp::Sum, CallSite site = {});
    Tensor& allreduce_(Tensor& t, Reduction op = ReduceOp::Sum, CallSite site = {});
    // Concatenation along dimension 0 in rank order ([size * d0, ...]); a 0-d input gives [size]. gather: root only,
    // other ranks get an undefined tensor.
    [[nodiscard]] Tensor gather(const Tensor& t, int root, CallSite site = {});
    [[nodiscard]] Tensor allgather(const Tensor& t, CallSite site = {});
    // allgather into a caller's tensor of shape [size * d0, ...] (or [size] for 0-d input): no allocation per call.
    Tensor& allgather_into(const Tensor& t, Tensor& out, CallSite site = {});
    // Root's [size * k, ...] split along dimension 0: rank i gets rows [i k, (i + 1) k).
    [[nodiscard]] Tensor scatter(const Tensor& t, int root, CallSite site = {});
    // Reduction of [size * k, ...] tensors, then rank i keeps rows [i k, (i + 1) k).
    [[nodiscard]] Tensor reduce_scatter(const Tensor& t, Reduction op = ReduceOp::Sum, CallSite site = {});
    // reduce_scatter into a caller's tensor of shape [k, ...] (float32/float64/integer dtypes: half types allocate
    // their float32 accumulator anyway, use reduce_scatter for them).
    Tensor& reduce_scatter_into(const Tensor& t, Tensor& out, Reduction op = ReduceOp::Sum, CallSite site = {});
    // Block i of dimension 0 ([size * k, ...]) goes to rank i; the result holds the blocks received, in rank order.
    [[nodiscard]] Tensor alltoall(const Tensor& t, CallSite site = {});
    // Uneven alltoall (MPI_Alltoallv), counts in rows of dimension 0, one per process: the first send_counts[0] rows
    // of t go to rank 0, the next send_counts[1] to rank 1, ...; the result, [sum of recv_counts, ...], holds
    // recv_counts[j] rows from each rank j in rank order. Blocks may be empty. send_counts must add up to t's first
    // dimension, and send_counts[j] here must equal recv_counts[i] on rank j (checked in debug mode, which also
    // compares dtype and the other dimensions; every rank then raises the same error).
    [[nodiscard]] Tensor alltoallv(const Tensor& t, std::span<const std::int64_t> send_counts,
                                   std::span<const std::int64_t> recv_counts, CallSite site = {});
    // alltoallv into a caller's tensor of shape [sum of recv_counts, ...] (not the input).
    Tensor& alltoallv_into(const Tensor& t, std::span<const std::int64_t> send_counts, Tensor& out,
                           std::span<const std::int64_t> recv_counts, CallSite site = {});
    void send(const Tensor& t, int dest, int tag = 0, CallSite site = {});
    Tensor& recv(Tensor& out, int source, int tag = 0, CallSite site = {});
    // A receive from whichever rank sends first with this tag (MPI_ANY_SOURCE); returns the sender's rank.
    int recv_any(Tensor& out, int tag = 0, CallSite site = {});

    // Non-blocking forms (work.hpp): each returns at once with a Work to wait for; Work::result() is what the blocking
    // form returns. Collectives are issued in the same order on every rank (MPI's rule; debug mode checks it) and run
    // in that order; any number may be outstanding and waited for in any order. A blocking collective issued while
    // non-blocking ones are outstanding runs after them. Sends and receives match in any order.
    [[nodiscard]] Work ibarrier(CallSite site = {});
    [[nodiscard]] Work ibroadcast(const Tensor& t, int root, CallSite site = {});
    [[nodiscard]] Work ibroadcast_(Tensor& t, int root, CallSite site = {});
    [[nodiscard]] Work ireduce(const Tensor& t, Reduction op, int root, CallSite site = {});
    [[nodiscard]] Work iallreduce(const Tensor& t, Reduction op = ReduceOp::Sum, CallSite site = {});
    [[nodiscard]] Work iallreduce_(Tensor& t, Reduction op = ReduceOp::Sum, CallSite site = {});
    [[nodiscard]] Work igather(const Tensor& t, int root, CallSite site = {});
    [[nodiscard]] Work iallgather(const Tensor& t, CallSite site = {});
    [[nodiscard]] Work iallgather_into(const Tensor& t, Tensor& out, CallSite site = {});
    [[nodiscard]] Work iscatter(const Tensor& t, int root, CallSite site = {});
    [[nodiscard]] Work ireduce_scatter(const Tensor& t, Reduction op = ReduceOp::Sum, CallSite site = {});
    [[nodiscard]] Work ireduce_scatter_into(const Tensor& t, Tensor& out, Reduction op = ReduceOp::Sum,
                                            CallSite site = {});
    [[nodiscard]] Work ialltoall(const Tensor& t, CallSite site = {});
    // The counts are copied at issue.
    [[nodiscard]] Work ialltoallv(const Tensor& t, std::span<const std::int64_t> send_counts,
                                  std::span<const std::int64_t> recv_counts, CallSite site = {});
    [[nodiscard]] Work ialltoallv_into(const Tensor& t, std::span<const std::int64_t> send_counts, Tensor& out,
                                       std::span<const std::int64_t> recv_counts, CallSite site = {});
    [[nodiscard]] Work igather_uneven(const Tensor& t, CallSite site = {});
    [[nodiscard]] Work isend(const Tensor& t, int dest, int tag = 0, CallSite site = {});
    [[nodiscard]] Work irecv(Tensor& out, int source, int tag = 0, CallSite site = {});
    // A receive from any rank (MPI_ANY_SOURCE); Work::source() names the sender.
    [[nodiscard]] Work irecv_any(Tensor& out, int tag = 0, CallSite site = {});
    // reject_call's non-blocking form, for an interface whose non-blocking call failed its own checks: the Work's
    // wait throws what reject_call would have.
    [[nodiscard]] Work ireject_call(OpKind op, const Tensor* input, int root, std::optional<ReduceOp> reduce_op,
                                    std::exception_ptr error, CallSite site = {});
    // Collectives another library carries (ForeignCall): lockstep checks and watches them as its own, moving no data.
    // begin_foreign, before the carrier issues the call on every process: the call is numbered and put on the
    // watchdog's board; in debug mode its signature (op, dtype, shape, root, reduce op, the call site and tag of
    // `site`) is exchanged and compared as for lockstep's own collectives, and a mismatch throws the same
    // SignatureMismatchError on every process (the call is then off the board: do not issue it). end_foreign(number),
    // from any thread, once the carrier reports the call complete. Any number may be outstanding; the board shows the
    // oldest not yet ended, so a call that outlives timeout() is reported as lockstep's own are (which processes never
    // arrived, each one's call site) and the job ends. A communicator that carries foreign calls should carry no
    // collectives of lockstep's own (both would write one board), and on_timeout raise does not apply to them.
    [[nodiscard]] std::uint64_t begin_foreign(const ForeignCall& call, CallSite site = {});
    void end_foreign(std::uint64_t number) noexcept;
    // Names the library that carries this communicator's foreign calls ("gloo"): the watchdog's reports then say
    // "`lockstep::allreduce` #3 float32[4] in calls carried by gloo".
    void set_carrier(std::string_view name);

    // Non-blocking collectives issued on this communicator and not yet completed.
    [[nodiscard]] std::size_t outstanding() const noexcept;
    // Whether this communicator's non-blocking collectives run on a progress thread (else inside wait/test).
    [[nodiscard]] bool progress_thread() const noexcept;

    // Concatenation along dimension 0 of tensors whose first dimension differs between ranks (counts exchanged, then
    // MPI_Allgatherv). The other dimensions must agree.
    [[nodiscard]] Tensor gather_uneven(const Tensor& t, CallSite site = {});
    // Pads `dim` to the largest size any rank has, with `pad_value`, after the data (or before it with pad_first).
    [[nodiscard]] Tensor pad_across_processes(const Tensor& t, std::int64_t dim = 0, double pad_value = 0.0,
                                              bool pad_first = false, CallSite site = {});
    // gather_uneven, then only the first `valid_rows` rows: drops the samples a sampler repeated to even out the last
    // batch across ranks (pass the number of real samples left in the dataset).
    [[nodiscard]] Tensor gather_for_metrics(const Tensor& t, std::int64_t valid_rows, CallSite site = {});

private:
    struct LOCKSTEP_HIDDEN Impl;  // collectives/communicator_impl.hpp
    explicit Communicator(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Whether MPI can take CUDA device pointers (asked of MPI at run time; LOCKSTEP_CUDA_AWARE=0/1 overrides).
[[nodiscard]] LOCKSTEP_API bool mpi_is_cuda_aware();

}  // namespace lockstep
