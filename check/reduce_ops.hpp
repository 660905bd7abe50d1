#pragma once
// Reduce ops as signatures compare them: a predefined op by its handle, a program's own op (MPI_Op_create) by the
// name of its function as the symbolizer finds it (the same on every process of one program, whatever the handle).

#include <mpi.h>

#include <cstdint>
#include <string>

namespace lockstep::check {

struct ReduceOpIdentity {
    std::uint64_t key = 0;  // equal on every process for the same op; 0: no op (MPI_OP_NULL)
    std::string name;       // "MPI_SUM", "my_max (a user op)"
};

[[nodiscard]] ReduceOpIdentity reduce_op_identity(MPI_Op op);
[[nodiscard]] std::uint64_t reduce_op_key(MPI_Op op);  // reduce_op_identity(op).key, no name made

}  // namespace lockstep::check
