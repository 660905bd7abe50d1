/* Planted bug: a wait for a request whose send was never posted. Process 0 posts MPI_Irecv for tag 5 from process 1,
 * computes, and waits for it; process 1 never posts the matching send and waits in MPI_Barrier instead. Under
 * liblockstep_check.so the watchdog reports process 0's MPI_Wait with the MPI_Irecv it waits for (peer, tag, where it
 * was posted) and what process 1 does instead, and ends the job with exit code 124. */
#include <mpi.h>
#include <stdio.h>

static MPI_Request post_halo_receive(double* halo) {
    MPI_Request request;
    MPI_Irecv(halo, 16, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD, &request);
    return request;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double halo[16];
    if (rank == 0) {
        MPI_Request request = post_halo_receive(halo);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    /* The bug: process 1 never posts its MPI_Isend(halo, 16, MPI_DOUBLE, 0, 5, ...). */
    MPI_Barrier(MPI_COMM_WORLD);
    printf("process %d done\n", rank);
    MPI_Finalize();
    return 0;
}
