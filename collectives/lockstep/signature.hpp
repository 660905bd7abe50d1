#pragma once
// The signature of one collective call, exchanged by every rank in debug mode before the payload moves.
//
// Every rank contributes one fixed-size WireSignature to a single MPI_Allgather on a control communicator, then runs
// the same deterministic comparison over all of them. Equal inputs give equal verdicts, so either every rank proceeds
// or every rank throws the same SignatureMismatchError: no rank is left waiting in a payload call that others skipped.

#include <lockstep/dtype.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/tensor.hpp>

#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

enum class OpKind : std::uint8_t {
    Barrier,
    Broadcast,
    Reduce,
    Allreduce,
    Gather,
    Allgather,
    Scatter,
    ReduceScatter,
    Alltoall,
    GatherUneven,      // first dimension may differ between ranks
    PadAcrossProcesses,  // one dimension may differ between ranks
};
[[nodiscard]] std::string_view op_name(OpKind op) noexcept;  // "lockstep::allreduce", ...

enum class ReduceOp : std::uint8_t { Sum, Prod, Max, Min, Mean };
[[nodiscard]] std::string_view reduce_op_name(ReduceOp op) noexcept;  // "sum", ...

// Where a collective was called from, and an optional tag naming it in reports. Taken as a defaulted last argument,
// so that it records the caller's position.
struct CallSite {
    std::string_view tag = {};
    std::source_location where = std::source_location::current();
};

// One rank's view of a call, in a form that compares across ranks.
struct Signature {
    std::uint64_t sequence = 0;  // per communicator, counted by every rank
    OpKind op = OpKind::Barrier;
    std::optional<DType> dtype;  // none for barrier
    Shape shape;                 // leading dimensions (up to max_wire_dims) when the shape was folded
    std::int64_t rank_of_shape = 0;  // the tensor's full number of dimensions
    std::uint64_t shape_hash = 0;    // hash of the full shape, so long shapes still compare exactly
    std::uint64_t trailing_hash = 0;  // hash of the shape without dimension `varying_dim` (uneven gather, padding)
    std::int64_t numel = 0;
    int root = -1;  // -1 when the op has none
    int varying_dim = -1;  // the dimension allowed to differ (uneven gather: 0; padding: the padded one), else -1
    std::optional<ReduceOp> reduce_op;
    std::optional<DeviceType> device_type;
    std::string file;  // call site
    unsigned line = 0;
    std::string function;
    std::string tag;

    [[nodiscard]] std::string shape_text() const;   // "[1, 5]", or "[4, 8, ... (12 dims)]" when folded
    [[nodiscard]] std::string call_site() const;    // "train.cpp:42"
    [[nodiscard]] std::string describe() const;     // op #seq dtype shape, root, reduce op, call site
};

inline constexpr std::size_t max_wire_dims = 8;

// The fixed-size form that travels in the MPI_Allgather. Plain bytes: same layout on every rank of a job.
struct WireSignature {
    std::uint64_t sequence;
    std::uint64_t shape_hash;
    std::uint64_t trailing_hash;
    std::int64_t numel;
    std::int64_t dims[max_wire_dims];
    std::int32_t rank_of_shape;
    std::int32_t root;
    std::int32_t varying_dim;
    std::uint32_t line;
    std::uint8_t op;
    std::uint8_t dtype;        // 0xff: none
    std::uint8_t reduce_op;    // 0xff: none
    std::uint8_t device_type;  // 0xff: none
    char file[72];
    char function[64];
    char tag[44];
};
static_assert(sizeof(WireSignature) % 8 == 0);

[[nodiscard]] WireSignature to_wire(const Signature& s);
[[nodiscard]] Signature from_wire(const WireSignature& w);

// A collective whose arguments differ between ranks. Every rank throws one with the same message.
class SignatureMismatchError : public DistributedOperationException {
public:
    SignatureMismatchError(std::string message, std::vector<Signature> signatures);
    // Each rank's signature, indexed by rank in the communicator.
    [[nodiscard]] const std::vector<Signature>& signatures() const noexcept { return signatures_; }
    // {"operation": ..., "mismatches": [...], "ranks": [{"rank": 0, "op": ..., "shape": [...], ...}, ...]}
    [[nodiscard]] std::string to_json() const;

private:
    std::vector<Signature> signatures_;
};

// Hash of a shape, optionally leaving out one dimension (FNV-1a over the dimensions and the rank).
[[nodiscard]] std::uint64_t shape_hash(const Shape& shape, int skip_dim = -1);

// The cheap test run on every debug-mode call: true when the wire signatures agree on every field the op's rules
// compare. Only when it is false are they decoded and checked in full.
[[nodiscard]] bool wire_signatures_agree(const std::vector<WireSignature>& signatures) noexcept;

// Compares the signatures of one call on every rank (index = rank). Returns the report when they do not agree by the
// rules of the op, nullopt when they do. Deterministic: every rank computes the same answer from the same input.
[[nodiscard]] std::optional<std::string> check_signatures(const std::vector<Signature>& signatures);

// "0, 2-7": ranks as ascending ranges.
[[nodiscard]] std::string format_rank_ranges(const std::vector<int>& ranks);

}  // namespace lockstep
