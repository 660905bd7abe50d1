#pragma once
// Collectives through the node's shared-memory arena (internal; the arena is runtime/shared_memory.cpp).
//
// A communicator whose processes all have the arena gets a ShmGroup. Each process owns one control block in its own
// segment: a count of the rounds it has reached (also a futex word), a ring of round lines (each round's record of
// the call and its small data), the arena path's descriptors and the small-message path's slots, each reused only
// once every peer has finished reading it. Calls of at most shm_small_max bytes take the small-message path (see
// shm_group.cpp), whatever their tensors. A larger call that reaches the group
// (shared memory on, and as many bytes as the largest threshold of the group's processes: the same decision on every
// process of a valid call) publishes its descriptor: where its tensors lie in the arena (offsets from the object's
// start, which every process maps at its own address), its byte count and whether it can take part. After one
// barrier every process reads every descriptor and takes the same path: through the arena if all can, otherwise
// MPI, unchanged.
//
// Through the arena each process works on its own slice directly in its peers' memory, in a fixed order of processes
// per element, so every process gets the same bits and a rerun gets the same bits again; a last barrier keeps every
// input and output in place until all have finished with them. A communicator spanning nodes with the same number of
// processes on each runs allreduce hierarchically: reduce-scatter through each node's arena, a reduction of each
// slice among the processes with the same index on their node (MPI_Reduce to the first node's process, then
// MPI_Bcast, so that every node gets the same bits), and an allgather through the arena.
//
// Waiting spins for up to 10 µs (not when the node's processes outnumber its cores), then yields, then sleeps on the
// futex (with a short timeout, so that a lost wake-up costs milliseconds, not a hang); a process that never comes is
// the watchdog's to report, as in MPI.

#include <lockstep/operation.hpp>
#include <lockstep/tensor.hpp>

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace lockstep::detail {

struct ShmDescriptor {
    std::uint64_t input = 0;   // offsets in the arena
    std::uint64_t output = 0;  // (unused by some operations)
    std::uint64_t bytes = 0;
    std::uint32_t eligible = 0;
    std::uint8_t op = 0;  // OpKind, ReduceOp and DType of the call: processes that disagree are told so
    std::uint8_t reduce_op = 0;
    std::uint8_t dtype = 0;
    std::uint8_t unused = 0;
    std::int32_t root = -1;
    std::uint32_t unused2 = 0;
};

// What every round publishes beside the count, in the same cache line: the call as the processes must agree on it,
// and whether this process can take part (the arena path also compares its whole descriptor).
struct ShmRecord {
    std::uint32_t bytes = 0;  // the call's byte count (its low 32 bits)
    std::uint8_t op = 0;
    std::uint8_t reduce_op = 0;
    std::uint8_t dtype = 0;
    std::uint8_t eligible = 0;
    std::int32_t root = -1;
};
static_assert(sizeof(ShmRecord) == 12);

// Each round's record, and its data when it has at most shm_inline_bytes, travel in one cache line with the round's
// number: a reader waits on that line and finds everything in it. A process has shm_ring of them, used in turn, so
// that a process whose peers need not wait for it (a broadcast's root, a reduce's other processes) runs up to
// shm_ring - 1 rounds ahead with small data.
inline constexpr std::size_t shm_ring = 8;
inline constexpr std::size_t shm_inline_bytes = 48;
struct alignas(64) ShmRound {
    std::atomic<std::uint32_t> round{0};  // the round this line holds
    ShmRecord record;
    std::byte data[shm_inline_bytes];
};
static_assert(sizeof(ShmRound) == 64);

struct alignas(64) ShmLine {
    std::atomic<std::uint32_t> count{0};    // rounds this process has reached (the futex word of sleepers)
    std::atomic<std::uint32_t> waiters{0};  // processes asleep on `count`
    ShmRound rounds[shm_ring];              // by the round's number modulo shm_ring
    ShmDescriptor descriptors[2];           // the arena path's, by the parity of the round
};

// The bytes a process can hand over per round of the small-message path, per parity: its two slots follow its line.
inline constexpr std::size_t shm_slot_bytes = std::size_t{16} << 10;
// The largest broadcast, allgather (output) and reduce through the small-message path (measured: docs/benchmarks.md).
inline constexpr std::size_t shm_small_copy_max = std::size_t{8} << 10;

// What each process brings to a communicator when it joins (part of the join record).
struct ShmJoin {
    std::uint64_t arena_id = 0;   // 0: no arena on this process
    std::uint64_t line = 0;       // offset of its control line
    std::uint64_t threshold = 0;  // its shm_threshold
    std::int32_t enabled = 0;     // its CommunicatorOptions::shared_memory (default on)
    std::int32_t unused = 0;
    std::uint64_t small_max = 0;  // its shm_small_max
};

// This process's join: a control line for the communicator about to be created, allocated in its own segment (an
// arena_id of 0 when the arena is inactive). ShmGroup::create owns the line from then on, or frees it.
[[nodiscard]] ShmJoin prepare_shm_join(bool enabled);

class ShmGroup {
public:
    // Every process of `comm` calls it with the same `all` (the allgathered joins, in rank order). nullptr when the
    // communicator cannot use the arena (then `mine`'s line is freed). Collective over `comm` when it spans nodes
    // (it splits the communicator of each index on its node).
    [[nodiscard]] static std::unique_ptr<ShmGroup> create(MPI_Comm comm, int rank, const std::vector<ShmJoin>& all,
                                                          std::uint64_t* mpi_calls);
    ~ShmGroup();
    ShmGroup(const ShmGroup&) = delete;
    ShmGroup& operator=(const ShmGroup&) = delete;

    // Whether a call of `bytes` reaches the group, through the small-message path or the arena: the same answer on
    // every process of a valid call.
    [[nodiscard]] bool reaches(std::size_t bytes) const noexcept {
        return enabled && (bytes >= threshold_ || small(bytes));
    }
    // Whether a call of `bytes` (the op's whole buffer: the output of an allgather) takes the small-message path:
    // at most the group's shm_small_max, and for the ops that only copy (broadcast, allgather; reduce, whose root
    // alone reads) at most shm_small_copy_max, above which the two copies through a slot lose to MPI's single copy.
    [[nodiscard]] bool small(std::size_t bytes) const noexcept {
        return small_max_ != 0 && bytes <= small_max_ && !spans_nodes();
    }
    [[nodiscard]] bool small_copy(std::size_t bytes) const noexcept {
        return small(bytes) && bytes <= shm_small_copy_max;
    }
    [[nodiscard]] bool arena(std::size_t bytes) const noexcept { return bytes >= threshold_; }
    [[nodiscard]] bool spans_nodes() const noexcept { return cross_ != MPI_COMM_NULL; }

    // Each returns false, having moved no data, when the call takes the MPI path (every process alike). `in` and
    // `out` may be the same tensor (in place). Mean is reduced as a sum (the caller divides, as on the MPI path).
    bool allreduce(const Tensor& in, const Tensor& out, ReduceOp op);
    bool reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op);
    bool allgather(const Tensor& in, const Tensor& out);
    bool broadcast(const Tensor& t, int root);
    bool reduce(const Tensor& in, const Tensor* out, ReduceOp op, int root);
    bool barrier_call();
    // Debug mode's signature exchange on a node. Every process publishes `bytes` of `mine` and its `key` (a digest of
    // what must agree; 0: something is wrong here): true when every key is the same and not 0; false when they
    // differ, with every process's record in rank order in `all` (members x bytes); nullopt when the exchange cannot
    // go this way (spanning nodes, the path off: the caller uses MPI). With sleep_when_late, a wait for a late peer
    // that outlasts the brief spin sleeps at once instead of yielding first (a call another library carries: its
    // peers come from the carrier's own blocking wait, and on a busy machine every yield puts this process behind all
    // the others runnable, while the sleep is woken the moment the peer publishes).
    std::optional<bool> exchange_record(const void* mine, std::size_t bytes, std::uint64_t key, void* all,
                                        bool sleep_when_late = false);

    bool enabled = true;
    // The communicator has a watchdog timeout: processes that meet different calls on the small-message path wait for
    // its report (which names every process's call and source line, at once), as on the MPI path, instead of throwing.
    bool watched = false;
    std::uint64_t calls = 0;               // through the arena (either path)
    std::uint64_t small_calls = 0;         // of those, through the small-message path
    std::uint64_t hierarchical_calls = 0;  // of those, across nodes
    std::uint64_t exchanges = 0;           // exchange_record calls (not in `calls`)

private:
    ShmGroup() = default;
    // Publishes `mine` and passes a barrier; true when every process of the node's group is eligible. Processes that
    // describe different calls (another op, root, reduce op, dtype or size: a mismatch debug mode would have caught
    // before) all throw the same DistributedOperationError naming each one's call, instead of pairing them.
    bool publish(const ShmDescriptor& mine);
    // The small-message path's: the record only; processes that met different calls go to mismatch().
    bool publish_small(const ShmRecord& mine);
    void barrier();
    // The rounds' parts. ready_to_write: before this process writes the next round, every peer has finished reading
    // what this process wrote there before (uses_slot: the round writes a slot or descriptor of its parity, read two
    // rounds ago; otherwise its ring line only, read shm_ring rounds ago). post(): the record (and descriptor) into
    // the next round's line, then the round's number into that line and the count (waking sleepers); returns the
    // round. wait_all / wait_round: until every peer / `member` has reached `target`.
    void ready_to_write(bool uses_slot);
    std::uint32_t post(const ShmRecord& record, const ShmDescriptor* descriptor = nullptr);
    void wait_all(std::uint32_t target);
    void wait_round(int member, std::uint32_t target) const noexcept;
    // Different calls met on the small-message path (member: the one process whose record this process read; -1:
    // every process's): the watchdog's report, or without one the error.
    [[noreturn]] void mismatch(int member = -1) const;
    [[noreturn]] void throw_mismatch(int member = -1) const;
    [[nodiscard]] const ShmDescriptor& descriptor_of(int member) const noexcept;
    [[nodiscard]] const ShmRecord& record_of(int member) const noexcept;
    void mpi(int rc, const char* call);
    // The small-message path: this process's slot for `len` bytes in the next round (ready for it), and a peer's of the
    // round just posted (the round's ring line up to shm_inline_bytes, else the slot of its parity).
    [[nodiscard]] std::byte* next_slot(std::size_t len);
    [[nodiscard]] const std::byte* slot_of(int member, std::size_t len) const noexcept;
    bool small_allreduce(const Tensor& in, const Tensor& out, ReduceOp op);
    bool small_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op);
    bool small_allgather(const Tensor& in, const Tensor& out);
    bool small_broadcast(const Tensor& t, int root);
    bool small_reduce(const Tensor& in, const Tensor* out, ReduceOp op, int root);

    std::vector<ShmLine*> lines_;  // the node group's lines, by index in the group
    ShmLine* mine_ = nullptr;
    int index_ = 0;  // in the node's group
    int members_ = 1;
    bool spin_ = true;              // a core for each process of the node: spin briefly before yielding
    bool sleep_when_late_ = false;  // exchange_record's sleep_when_late, for the duration of the call
    std::size_t threshold_ = 0;
    std::size_t small_max_ = 0;  // the smallest shm_small_max of the group's processes
    std::uint32_t count_ = 0;
    std::uint32_t confirmed_ = 0;     // every peer has reached this round
    std::uint32_t round_ = 0;         // the round whose records, descriptors and slots are read
    MPI_Comm cross_ = MPI_COMM_NULL;  // the processes with this index on every node (spanning nodes only)
    int cross_rank_ = 0;              // this process's rank in cross_ (0: the first node's)
    std::uint64_t* mpi_calls_ = nullptr;
    std::vector<const std::byte*> sources_;  // reused per call
    std::vector<std::byte*> targets_;
};

}  // namespace lockstep::detail
