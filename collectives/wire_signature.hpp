#pragma once
// The debug-mode signature as it travels (internal): a fixed-size record encoded from the call record, one per rank
// in a single MPI_Allgather. Only when the cheap comparison of the records fails are they decoded into Signatures and
// checked in full (check_signatures), to build the report.

#include "call_info.hpp"
#include "fixed_record.hpp"

#include <lockstep/signature.hpp>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::detail {

struct WireSignature {
    std::uint64_t sequence;
    std::uint64_t shape_hash;
    std::uint64_t trailing_hash;
    std::int64_t numel;
    std::int64_t dims[max_record_dims];
    std::uint64_t step;  // Communicator::set_step; 0: none
    std::int32_t rank_of_shape;
    std::int32_t root;
    std::int32_t varying_dim;
    std::uint32_t line;
    std::uint8_t op;
    std::uint8_t dtype;        // 0xff: none
    std::uint8_t reduce_op;    // 0xff: none
    std::uint8_t device_type;  // 0xff: none
    FixedText<72> file;
    FixedText<64> function;
    FixedText<44> tag;
    FixedText<24> failure_type;  // empty: this process can run the call
    FixedText<200> failure;
};
static_assert(FixedRecord<WireSignature> && sizeof(WireSignature) % 8 == 0);

// Why this process cannot start a call: what it caught while validating the arguments and allocating the result.
struct LocalFailure {
    std::string type;  // "ShapeError", ...
    std::string message;
};
// The failure of the exception in flight (call inside a catch block).
[[nodiscard]] LocalFailure current_failure();

// Call number `sequence` of this rank, made at `step` of its program, as it goes on the wire.
[[nodiscard]] WireSignature encode_signature(const CallInfo& call, std::uint64_t sequence, std::uint64_t step = 0,
                                             const LocalFailure* failure = nullptr);
[[nodiscard]] Signature decode_signature(const WireSignature& wire);

// The cheap test run on every debug-mode call: true when no process reports a failure and the records agree on every
// field the op's rules compare.
[[nodiscard]] bool wire_signatures_agree(const std::vector<WireSignature>& signatures) noexcept;

// A digest of what wire_signatures_agree compares: signatures that agree have the same key, and signatures whose keys
// are the same agree (but for a 64-bit hash collision). 0 for a signature that carries a failure (never agreement).
[[nodiscard]] std::uint64_t agreement_key(const WireSignature& signature) noexcept;

// The report for a call that some process could not start, nullopt when none failed.
[[nodiscard]] std::optional<std::string> rejected_report(const std::vector<Signature>& signatures);

// When every process failed the call with the same type of error, throws that type with `report`, so that the type a
// program catches for an error every process sees is the same with debug mode on or off (a CallRejectedError is for
// failures that differ). Returns when the types differ, some process did not fail, or the type is one it cannot
// raise again (an Error of another kind, a standard exception). An OutOfMemoryError keeps this process's numbers
// (`error`, what this process threw) and says that every process ran out.
void throw_shared_failure(const std::vector<Signature>& signatures, const std::string& report,
                          const std::exception_ptr& error);

}  // namespace lockstep::detail
