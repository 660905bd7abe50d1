/* Planted bug: a receive that is never matched. Process 0 waits in MPI_Recv for a message with tag 42 from process
 * 1, which never sends it and goes on to MPI_Finalize. Under liblockstep_check.so the watchdog reports process 0's
 * receive (peer, tag, call site) and what process 1 does instead, and ends the job with exit code 124. */
#include <mpi.h>
#include <stdio.h>

static void receive_the_result(int* result) {
    MPI_Recv(result, 4, MPI_INT, 1, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int result[4] = {0, 0, 0, 0};
    if (rank == 0) {
        receive_the_result(result);
        printf("received %d\n", result[0]);
    }
    /* The bug: process 1 forgot its MPI_Send(result, 4, MPI_INT, 0, 42, MPI_COMM_WORLD). */
    MPI_Finalize();
    return 0;
}
