#pragma once
// The debug-mode signature as it travels (internal): a fixed-size record encoded from the call record, one per rank
// in a single MPI_Allgather. Only when the cheap comparison of the records fails are they decoded into Signatures and
// checked in full (check_signatures), to build the report.

#include "call_info.hpp"
#include "fixed_record.hpp"

#include <lockstep/signature.hpp>

#include <cstdint>
#include <vector>

namespace lockstep::detail {

struct WireSignature {
    std::uint64_t sequence;
    std::uint64_t shape_hash;
    std::uint64_t trailing_hash;
    std::int64_t numel;
    std::int64_t dims[max_record_dims];
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
};
static_assert(FixedRecord<WireSignature> && sizeof(WireSignature) % 8 == 0);

// Call number `sequence` of this rank, as it goes on the wire.
[[nodiscard]] WireSignature encode_signature(const CallInfo& call, std::uint64_t sequence);
[[nodiscard]] Signature decode_signature(const WireSignature& wire);

// The cheap test run on every debug-mode call: true when the records agree on every field the op's rules compare.
[[nodiscard]] bool wire_signatures_agree(const std::vector<WireSignature>& signatures) noexcept;

}  // namespace lockstep::detail
