#pragma once
// The call record (internal): one CallInfo describes one call of a Communicator operation, filled by the public entry
// point with designated initialisers and handed with its payload to the funnel (communicator_impl.hpp). Everything
// downstream reads it: the debug-mode signature is encoded from it (wire_signature.hpp), the watchdog's board stores
// its fixed part (CallRecord below), and both reports print it.

#include "operation_table.hpp"

#include <lockstep/communicator.hpp>
#include <lockstep/operation.hpp>
#include <lockstep/tensor.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace lockstep::detail {

// Dimensions kept in fixed-size records (the wire signature, the board); longer shapes also compare by hash.
inline constexpr std::size_t max_record_dims = 8;

struct CallInfo {
    OpKind op = OpKind::Barrier;
    const Tensor* input = nullptr;   // the tensor whose dtype and shape the ranks compare; none for barrier
    const Tensor* output = nullptr;  // a caller-provided result (*_into, recv), if any
    int root = -1;                   // the root of a rooted collective, the peer of a send or recv; -1 when none
    std::optional<ReduceOp> reduce_op;
    int varying_dim = -1;  // the dimension allowed to differ between ranks (uneven gather: 0; padding), or -1
    int message_tag = 0;   // the MPI tag of a send or recv
    CallSite site;         // the caller's file, line and function, and the tag naming the call in reports
    // A call another library carries (Communicator::begin_foreign): its dtype, shape and device stand for `input`'s.
    const ForeignCall* foreign = nullptr;
};

// What a call lockstep does not carry is (lockstep/foreign_watch.hpp): none for lockstep's own calls; otherwise a
// collective, or a point-to-point call or wait whose data goes to (send) or comes from (receive) its peer, or neither
// (a wait for requests that are not one send or receive).
enum class ForeignKind : std::uint8_t { none, collective, send, receive, request };

// The fixed part of a CallInfo, as the watchdog's board keeps it: trivially copyable, written with plain stores. The
// strings are the call site's static strings; the board fills in comm_id and timeout when it is read. A call lockstep
// does not carry (an MPI program's, through lockstep/foreign_watch.hpp) names its function in `name`, has no tensor,
// and keeps its caller's return address, symbolised only when a report is built.
struct CallRecord {
    std::uint64_t comm_id = 0;
    std::uint64_t sequence = 0;
    OpKind op = OpKind::Barrier;
    DType dtype = DType::Float32;
    bool has_tensor = false;
    ForeignKind foreign = ForeignKind::none;  // a call lockstep does not carry (below)
    int ndim = 0;
    int root = -1;
    int message_tag = 0;
    std::int64_t dims[max_record_dims];  // the first ndim; the rest is left unset (no zeroing on the per-call path)
    const char* file = "";
    unsigned line = 0;
    const char* function = "";
    double timeout = 0.0;  // seconds; 0: never reported
    // A call lockstep does not carry: its function ("MPI_Allreduce"), element count (-1: unknown) and datatype
    // name (static strings; null: unknown), caller's return address (null when file is known), and for a wait the
    // call that issued the request it waits for ("MPI_Irecv") and that call's return address.
    const char* name = nullptr;
    std::int64_t count = -1;
    const char* datatype = nullptr;
    const void* caller = nullptr;
    const char* request = nullptr;
    const void* request_caller = nullptr;

    [[nodiscard]] bool point_to_point() const noexcept {
        return foreign == ForeignKind::none ? traits(op).point_to_point : foreign != ForeignKind::collective;
    }
};

// The board's record of call number `sequence`: a handful of plain stores, no allocation (per-call path).
[[nodiscard]] inline CallRecord board_record(const CallInfo& call, std::uint64_t sequence) noexcept {
    CallRecord r;
    r.sequence = sequence;
    r.op = call.op;
    r.root = call.root;
    r.message_tag = call.message_tag;
    if (const ForeignCall* f = call.foreign; f != nullptr) {
        r.has_tensor = f->dtype.has_value();
        r.dtype = f->dtype.value_or(DType::Float32);
        r.ndim = static_cast<int>(f->shape.size());
        std::copy_n(f->shape.begin(), std::min(f->shape.size(), max_record_dims), r.dims);
    } else if (const Tensor* t = call.input != nullptr ? call.input : call.output; t != nullptr) {
        r.has_tensor = true;
        r.dtype = t->dtype();
        r.ndim = static_cast<int>(t->dim());
        const Shape& shape = t->shape();
        std::copy_n(shape.begin(), std::min(shape.size(), max_record_dims), r.dims);
    }
    r.file = call.site.file();
    r.line = call.site.line();
    r.function = call.site.function();
    return r;
}

}  // namespace lockstep::detail
