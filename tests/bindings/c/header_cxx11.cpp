// lockstep.h and lockstep_mpi.h compile as C++11 with every warning an error, and after the C++ headers of nothing
// else: a framework's glue code can include them as they are.
#include <mpi.h>

#include "lockstep.h"
#include "lockstep_mpi.h"

#include <type_traits>

static_assert(std::is_same<lockstep_status_t, int32_t>::value, "status codes are int32");
static_assert(std::is_standard_layout<lockstep_call_options_t>::value, "option structs are plain C structs");
static_assert(sizeof(DLPackVersion) == 8, "DLPack 1.0 layout");

int main() {
    lockstep_call_options_t call = LOCKSTEP_CALL_OPTIONS_INIT;
    lockstep_status_t (*from_mpi)(MPI_Comm, const lockstep_comm_options_t*, lockstep_comm_t*) = &lockstep_comm_from_mpi;
    (void)from_mpi;
    return call.struct_size == sizeof call ? 0 : 1;
}
