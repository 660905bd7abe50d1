#pragma once
// The one table of operations and the one table of reduce ops (internal): names, which operations take a root and a
// reduce op, which fields of a call the signature check compares, and how a reduce op maps to MPI. Everything else
// asks these tables: the funnel (communicator_impl.hpp's root check), the signature (signature.cpp), the watchdog
// (call_info.hpp's point_to_point), and, through lockstep::operation_info (lockstep/operation.hpp), the C interface,
// whose frozen values are tied to these rows at compile time (bindings/c/operation_values.hpp).

#include <lockstep/dtype.hpp>
#include <lockstep/operation.hpp>

#include <mpi.h>

#include <array>
#include <cstddef>
#include <string_view>

namespace lockstep::detail {

struct OpTraits {
    OpKind op;
    std::string_view name;
    bool has_root;        // the root (or, for send/recv, the peer) must agree
    bool has_reduce_op;   // the reduce op must agree
    bool point_to_point;  // send/recv: on the point-to-point board, not signature-checked

    // Takes a root that must be a rank of the communicator (-1, "none", is refused): the rooted collectives.
    [[nodiscard]] constexpr bool rooted() const noexcept { return has_root && !point_to_point; }
};

inline constexpr std::array<OpTraits, operation_count> op_table = {{
    {OpKind::Barrier, "lockstep::barrier", false, false, false},
    {OpKind::Broadcast, "lockstep::broadcast", true, false, false},
    {OpKind::Reduce, "lockstep::reduce", true, true, false},
    {OpKind::Allreduce, "lockstep::allreduce", false, true, false},
    {OpKind::Gather, "lockstep::gather", true, false, false},
    {OpKind::Allgather, "lockstep::allgather", false, false, false},
    {OpKind::Scatter, "lockstep::scatter", true, false, false},
    {OpKind::ReduceScatter, "lockstep::reduce_scatter", false, true, false},
    {OpKind::Alltoall, "lockstep::alltoall", false, false, false},
    {OpKind::GatherUneven, "lockstep::gather_uneven", false, false, false},
    {OpKind::PadAcrossProcesses, "lockstep::pad_across_processes", false, false, false},
    {OpKind::Send, "lockstep::send", true, false, true},
    {OpKind::Recv, "lockstep::recv", true, false, true},
}};

inline constexpr OpTraits unknown_op{OpKind::Barrier, "lockstep::unknown", false, false, false};

// The traits of `op`; an out-of-range value (a corrupt wire signature) gets an unnamed entry that compares nothing.
[[nodiscard]] constexpr const OpTraits& traits(OpKind op) noexcept {
    const auto i = static_cast<std::size_t>(op);
    return i < op_table.size() ? op_table[i] : unknown_op;
}

struct ReduceOpTraits {
    ReduceOp op;
    std::string_view name;
};

inline constexpr std::array<ReduceOpTraits, reduce_op_count> reduce_op_table = {{
    {ReduceOp::Sum, "sum"},
    {ReduceOp::Prod, "prod"},
    {ReduceOp::Max, "max"},
    {ReduceOp::Min, "min"},
    {ReduceOp::Mean, "mean"},
}};

// The MPI operation of a reduce op. Open MPI's MPI_Op constants are addresses, not constant expressions, so this
// column of the table is a switch; mean is a sum scaled afterwards, and on bool the reductions are logical: any
// (sum, max) and all (prod, min).
[[nodiscard]] inline MPI_Op mpi_op(ReduceOp op, DType dtype) noexcept {
    if (dtype == DType::Bool) return (op == ReduceOp::Sum || op == ReduceOp::Max) ? MPI_LOR : MPI_LAND;
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean:
            return MPI_SUM;
        case ReduceOp::Prod:
            return MPI_PROD;
        case ReduceOp::Max:
            return MPI_MAX;
        case ReduceOp::Min:
            return MPI_MIN;
    }
    return MPI_OP_NULL;
}

}  // namespace lockstep::detail
