#pragma once
// The signature of one collective call, exchanged by every rank in debug mode before the payload moves.
//
// Every rank contributes one fixed-size record, encoded from its call record, to a single MPI_Allgather on a control
// communicator, then runs the same deterministic comparison over all of them. Equal inputs give equal verdicts, so
// either every rank proceeds or every rank throws the same SignatureMismatchError: no rank is left waiting in a
// payload call that others skipped.

#include <lockstep/dtype.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/export.hpp>
#include <lockstep/operation.hpp>
#include <lockstep/tensor.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

// One rank's view of a call, as decoded from the exchange: what a SignatureMismatchError carries per rank.
struct LOCKSTEP_API Signature {
    std::uint64_t sequence = 0;  // per communicator, counted by every rank
    OpKind op = OpKind::Barrier;
    std::optional<DType> dtype;       // none for barrier
    Shape shape;                      // leading dimensions (up to 8) when the shape was folded
    std::int64_t rank_of_shape = 0;   // the tensor's full number of dimensions
    std::uint64_t shape_hash = 0;     // hash of the full shape, so long shapes still compare exactly
    std::uint64_t trailing_hash = 0;  // hash of the shape without dimension `varying_dim` (uneven gather, padding)
    std::int64_t numel = 0;
    int root = -1;         // -1 when the op has none
    int varying_dim = -1;  // the dimension allowed to differ (uneven gather: 0; padding: the padded one), else -1
    std::optional<ReduceOp> reduce_op;
    std::optional<DeviceType> device_type;
    std::string file;  // call site
    unsigned line = 0;
    std::string function;
    std::string tag;
    // The step the program was at (Communicator::set_step), 0 when it set none: processes at different steps of a
    // loop are caught at their first call, although their call numbers still pair up.
    std::uint64_t step = 0;
    // Set when this process could not start the call (an invalid argument, no memory for the result): the error's
    // type name and message.
    std::string failure_type;
    std::string failure;

    [[nodiscard]] std::string shape_text() const;  // "[1, 5]", or "[4, 8, ... (12 dims)]" when folded
    [[nodiscard]] std::string call_site() const;   // "train.cpp:42"
    [[nodiscard]] std::string describe() const;    // op #seq dtype shape, root, reduce op, call site
};

// A collective whose arguments differ between ranks. Every rank throws one with the same message.
class LOCKSTEP_API SignatureMismatchError : public DistributedOperationError {
public:
    SignatureMismatchError(std::string message, std::vector<Signature> signatures);
    // Each rank's signature, indexed by rank in the communicator.
    [[nodiscard]] const std::vector<Signature>& signatures() const noexcept { return signatures_; }
    // {"message": ..., "ranks": [{"rank": 0, "operation": ..., "shape": [...], ...}, ...]}
    [[nodiscard]] std::string to_json() const;

private:
    std::vector<Signature> signatures_;
};

// A collective that some process could not start: an invalid argument or tensor, or no memory for its result. In
// debug mode every rank throws this same error before any payload moves, naming each failing process, the type of its
// error and its message; without debug mode the failing process throws its own error alone (and the others wait until
// the watchdog reports them). When every process failed with the same type of error, every rank throws that type
// instead (ShapeError, DTypeError, ...), as each would without debug mode: this one is for failures that differ.
class LOCKSTEP_API CallRejectedError : public DistributedOperationError {
public:
    struct Failure {
        int rank = 0;      // in the communicator
        std::string type;  // "OutOfMemoryError", "ShapeError", ...
        std::string message;
    };
    CallRejectedError(std::string message, std::vector<Failure> failures);
    [[nodiscard]] const std::vector<Failure>& failures() const noexcept { return failures_; }
    // Whether some process ran out of memory (a batch-size search can then retry smaller on every rank).
    [[nodiscard]] bool out_of_memory() const noexcept;

private:
    std::vector<Failure> failures_;
};

// Hash of a shape, optionally leaving out one dimension (FNV-1a over the dimensions and the rank).
[[nodiscard]] LOCKSTEP_API std::uint64_t shape_hash(const Shape& shape, int skip_dim = -1);

// Compares the signatures of one call on every rank (index = rank). Returns the report when they do not agree by the
// rules of the op, nullopt when they do. Deterministic: every rank computes the same answer from the same input.
[[nodiscard]] LOCKSTEP_API std::optional<std::string> check_signatures(const std::vector<Signature>& signatures);

// "0, 2-7": ranks as ascending ranges.
[[nodiscard]] LOCKSTEP_API std::string format_rank_ranges(const std::vector<int>& ranks);

}  // namespace lockstep
