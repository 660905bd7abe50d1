#pragma once
// What a collective call is, in the words every report uses: the operation, its reduce op, and where it was called.

#include <lockstep/export.hpp>

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string_view>

namespace lockstep {

// Every operation of a Communicator (the table with their names and rules is in collectives/operation_table.hpp).
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
    GatherUneven,        // first dimension may differ between ranks
    PadAcrossProcesses,  // one dimension may differ between ranks
    Send,                // point to point: watched, never signature-checked
    Recv,
    Alltoallv,  // per-peer counts: the blocks may differ in size
};
[[nodiscard]] LOCKSTEP_API std::string_view op_name(OpKind op) noexcept;  // "lockstep::allreduce", ...

// The rows of the operation table: OpKind values 0 to operation_count - 1. The table's length must equal it (a
// static_assert), and so must every mapping that layers above keep to their own values (the C interface's), so that a
// new row without its mapping fails to compile.
inline constexpr std::size_t operation_count = 14;

// One row of the operation table, as the layers above read it.
struct OperationInfo {
    std::string_view name;  // "lockstep::allreduce", "lockstep::unknown" for a value outside the table
    bool rooted;            // takes a root that must be a rank of the communicator
    bool reduces;           // takes a reduce op
    bool point_to_point;    // send/recv: watched, never signature-checked
};
[[nodiscard]] LOCKSTEP_API OperationInfo operation_info(OpKind op) noexcept;

// Values are appended, never reordered: they travel in debug mode's signatures.
enum class ReduceOp : std::uint8_t {
    Sum,
    Prod,
    Max,
    Min,
    Mean,
    BitwiseAnd,  // integer and bool dtypes only (on bool: logical and, or, xor)
    BitwiseOr,
    BitwiseXor,
    PremulSum,  // the sum of every process's tensor multiplied by that process's factor (Reduction::factor)
};
inline constexpr std::size_t reduce_op_count = 9;  // ReduceOp values 0 to reduce_op_count - 1
[[nodiscard]] LOCKSTEP_API std::string_view reduce_op_name(ReduceOp op) noexcept;  // "sum", ..., "unknown"

// A reduce op with its argument, as the reducing collectives take it: a ReduceOp converts to one implicitly
// (comm.allreduce(t, ReduceOp::Max)), and premul_sum(factor) makes PREMUL_SUM's. The factor may differ between
// processes; the input is never modified (except by an in-place call, whose result is the premultiplied sum).
struct Reduction {
    ReduceOp op = ReduceOp::Sum;
    double factor = 1.0;                                                 // read by PremulSum only
    constexpr Reduction(ReduceOp reduce_op) noexcept : op(reduce_op) {}  // NOLINT(google-explicit-constructor)
    constexpr Reduction(ReduceOp reduce_op, double premul_factor) noexcept : op(reduce_op), factor(premul_factor) {}
};
[[nodiscard]] constexpr Reduction premul_sum(double factor) noexcept {
    return {ReduceOp::PremulSum, factor};
}

// Where a collective was called from, and an optional tag naming it in reports. Taken as a defaulted last argument,
// so that it records the caller's position.
struct CallSite {
    std::string_view tag = {};
    std::source_location where = std::source_location::current();
    // A place known only at run time, used instead of `where` when file_name is set: the line of a Python or C
    // program that called through the C interface. The strings must live as long as the process, since the watchdog
    // may read them at any time (the C interface keeps one copy of each).
    const char* file_name = nullptr;
    unsigned line_number = 0;
    const char* function_name = nullptr;

    [[nodiscard]] const char* file() const noexcept { return file_name != nullptr ? file_name : where.file_name(); }
    [[nodiscard]] unsigned line() const noexcept { return file_name != nullptr ? line_number : where.line(); }
    [[nodiscard]] const char* function() const noexcept {
        if (file_name != nullptr) return function_name != nullptr ? function_name : "";
        return where.function_name();
    }
    [[nodiscard]] unsigned column() const noexcept { return file_name != nullptr ? 0 : where.column(); }
};

}  // namespace lockstep
