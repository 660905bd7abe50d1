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
    {OpKind::Alltoallv, "lockstep::alltoallv", false, false, false},
}};

inline constexpr OpTraits unknown_op{OpKind::Barrier, "lockstep::unknown", false, false, false};

// The traits of `op`; an out-of-range value (a corrupt wire signature) gets an unnamed entry that compares nothing.
[[nodiscard]] constexpr const OpTraits& traits(OpKind op) noexcept {
    const auto i = static_cast<std::size_t>(op);
    return i < op_table.size() ? op_table[i] : unknown_op;
}

// Which dtypes a reduce op takes: a column per category, bool with the integers (logically: see mpi_op); mean of an
// integer is refused (cast first); max and min have no order on complex numbers; the bitwise ops need bits.
struct ReduceOpTraits {
    ReduceOp op;
    std::string_view name;
    bool floating;
    bool integral;
    bool complex;
    std::string_view takes;  // the dtypes it takes, for the error that refuses another

    [[nodiscard]] bool reduces(DType dtype) const noexcept {
        if (dtype == DType::Bool) return integral;  // the logical forms of the integer ops (mpi_op)
        if (is_complex(dtype)) return complex;
        return is_floating(dtype) ? floating : integral;
    }
};

inline constexpr std::array<ReduceOpTraits, reduce_op_count> reduce_op_table = {{
    {ReduceOp::Sum, "sum", true, true, true, "every dtype"},
    {ReduceOp::Prod, "prod", true, true, true, "every dtype"},
    {ReduceOp::Max, "max", true, true, false, "real dtypes (not complex)"},
    {ReduceOp::Min, "min", true, true, false, "real dtypes (not complex)"},
    {ReduceOp::Mean, "mean", true, false, true, "floating and complex dtypes (cast integers first, or use sum)"},
    {ReduceOp::BitwiseAnd, "band", false, true, false, "integer and bool dtypes"},
    {ReduceOp::BitwiseOr, "bor", false, true, false, "integer and bool dtypes"},
    {ReduceOp::BitwiseXor, "bxor", false, true, false, "integer and bool dtypes"},
    {ReduceOp::PremulSum, "premul_sum", true, false, true, "floating and complex dtypes"},
}};

// The MPI operation of a reduce op. Open MPI's MPI_Op constants are addresses, not constant expressions, so this
// column of the table is a switch; mean is a sum scaled afterwards, premul_sum a sum of inputs scaled before, and on
// bool the reductions are logical: any (sum, max, or), all (prod, min, and) and xor.
[[nodiscard]] inline MPI_Op mpi_op(ReduceOp op, DType dtype) noexcept {
    if (dtype == DType::Bool) {
        if (op == ReduceOp::BitwiseXor) return MPI_LXOR;
        const bool any = op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::BitwiseOr;
        return any ? MPI_LOR : MPI_LAND;
    }
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean:
        case ReduceOp::PremulSum:
            return MPI_SUM;
        case ReduceOp::BitwiseAnd:
            return MPI_BAND;
        case ReduceOp::BitwiseOr:
            return MPI_BOR;
        case ReduceOp::BitwiseXor:
            return MPI_BXOR;
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
