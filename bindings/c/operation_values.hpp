#pragma once
// The C interface's values of the operations and reduce ops (lockstep.h's LOCKSTEP_COLLECTIVE_* and LOCKSTEP_SUM...,
// a frozen ABI: they never change) tied to the rows of the operation table (collectives/operation_table.hpp). Every
// row has its line here, with its C value or none, in the table's order; the static_asserts below fail to compile
// when a row is added to the table without one, when two rows share a value, or when the values leave a gap.

#include "lockstep.h"

#include <lockstep/operation.hpp>

#include <cstddef>
#include <optional>

namespace lockstep::c_api {

inline constexpr lockstep_collective_t no_collective_value = -1;  // not a collective of lockstep_reject_call

struct CollectiveValue {
    OpKind op;
    lockstep_collective_t value;
};

inline constexpr CollectiveValue collective_values[] = {
    {OpKind::Barrier, LOCKSTEP_COLLECTIVE_BARRIER},
    {OpKind::Broadcast, LOCKSTEP_COLLECTIVE_BROADCAST},
    {OpKind::Reduce, LOCKSTEP_COLLECTIVE_REDUCE},
    {OpKind::Allreduce, LOCKSTEP_COLLECTIVE_ALLREDUCE},
    {OpKind::Gather, LOCKSTEP_COLLECTIVE_GATHER},
    {OpKind::Allgather, LOCKSTEP_COLLECTIVE_ALLGATHER},
    {OpKind::Scatter, LOCKSTEP_COLLECTIVE_SCATTER},
    {OpKind::ReduceScatter, LOCKSTEP_COLLECTIVE_REDUCE_SCATTER},
    {OpKind::Alltoall, LOCKSTEP_COLLECTIVE_ALLTOALL},
    {OpKind::GatherUneven, LOCKSTEP_COLLECTIVE_GATHER_UNEVEN},
    {OpKind::PadAcrossProcesses, no_collective_value},  // not in the C interface
    {OpKind::Send, no_collective_value},                // point to point: lockstep_send
    {OpKind::Recv, no_collective_value},                // point to point: lockstep_recv
    {OpKind::Alltoallv, LOCKSTEP_COLLECTIVE_ALLTOALLV},
};

// How many rows have a C value; the values are 0 to collective_value_count - 1 (checked below).
inline constexpr lockstep_collective_t collective_value_count = [] {
    lockstep_collective_t n = 0;
    for (const CollectiveValue& row : collective_values) n += row.value != no_collective_value ? 1 : 0;
    return n;
}();

struct ReduceOpValue {
    ReduceOp op;
    lockstep_reduce_op_t value;
};

inline constexpr ReduceOpValue reduce_op_values[] = {
    {ReduceOp::Sum, LOCKSTEP_SUM},
    {ReduceOp::Prod, LOCKSTEP_PROD},
    {ReduceOp::Max, LOCKSTEP_MAX},
    {ReduceOp::Min, LOCKSTEP_MIN},
    {ReduceOp::Mean, LOCKSTEP_MEAN},
    {ReduceOp::BitwiseAnd, LOCKSTEP_BAND},
    {ReduceOp::BitwiseOr, LOCKSTEP_BOR},
    {ReduceOp::BitwiseXor, LOCKSTEP_BXOR},
    {ReduceOp::PremulSum, LOCKSTEP_PREMUL_SUM},
};

namespace detail {

// Rows in the table's order, each C value once, and the C values 0 to count - 1 with no gap.
template <typename Row, std::size_t N>
constexpr bool one_row_each(const Row (&rows)[N], int count) {
    int values = 0;
    for (std::size_t i = 0; i < N; ++i) {
        if (static_cast<std::size_t>(rows[i].op) != i) return false;
        if (rows[i].value == -1) continue;
        if (rows[i].value < 0 || rows[i].value >= count) return false;
        for (std::size_t j = 0; j < i; ++j) {
            if (rows[j].value == rows[i].value) return false;
        }
        ++values;
    }
    return values == count;
}

}  // namespace detail

static_assert(std::size(collective_values) == operation_count,
              "every row of the operation table needs its line in collective_values (a C value or none)");
static_assert(detail::one_row_each(collective_values, collective_value_count),
              "collective_values: in the table's order, each LOCKSTEP_COLLECTIVE_* once, no gap");
static_assert(std::size(reduce_op_values) == reduce_op_count,
              "every reduce op needs its LOCKSTEP_* value in reduce_op_values");
static_assert(detail::one_row_each(reduce_op_values, static_cast<int>(reduce_op_count)),
              "reduce_op_values: in ReduceOp's order, each value once, no gap");

// The operation of a C collective value, or none.
[[nodiscard]] constexpr std::optional<OpKind> operation_of(lockstep_collective_t value) noexcept {
    for (const CollectiveValue& row : collective_values) {
        if (value != no_collective_value && row.value == value) return row.op;
    }
    return std::nullopt;
}

// The reduce op of a C value, or none.
[[nodiscard]] constexpr std::optional<ReduceOp> reduce_op_of(lockstep_reduce_op_t value) noexcept {
    for (const ReduceOpValue& row : reduce_op_values) {
        if (row.value == value) return row.op;
    }
    return std::nullopt;
}

}  // namespace lockstep::c_api
