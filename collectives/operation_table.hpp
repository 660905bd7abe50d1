#pragma once
// The one table of operations and the one table of reduce ops (internal): names, which fields of a call the
// signature check compares, and how a reduce op maps to MPI. Everything else asks these tables.

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
};

inline constexpr std::array<OpTraits, 13> op_table = {{
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

inline constexpr std::array<ReduceOpTraits, 5> reduce_op_table = {{
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
