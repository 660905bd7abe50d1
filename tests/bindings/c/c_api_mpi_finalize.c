/* A program that owns MPI, adopts it for lockstep, and ends with MPI_Finalize alone (no lockstep_finalize): it must
 * exit 0 rather than crash or hang in lockstep's teardown at exit. Run under mpirun with 2 ranks. */
#include "lockstep.h"
#include "lockstep_mpi.h"

#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
    lockstep_comm_t world = NULL;
    lockstep_comm_t dup = NULL;
    int32_t owns = 1;
    lockstep_runtime_t runtime = NULL;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 2;
    if (lockstep_init(NULL, &runtime) != LOCKSTEP_OK || lockstep_comm_world(&world) != LOCKSTEP_OK ||
        lockstep_comm_dup(world, &dup) != LOCKSTEP_OK || lockstep_barrier(dup, NULL) != LOCKSTEP_OK) {
        fprintf(stderr, "lockstep failed: %s\n", lockstep_last_error());
        return 1;
    }
    owns = lockstep_runtime_owns_mpi(runtime);
    MPI_Finalize();
    printf("c_api_mpi_finalize: lockstep owned MPI: %d; MPI finalised by the program\n", (int)owns);
    return owns == 0 ? 0 : 1;
}
