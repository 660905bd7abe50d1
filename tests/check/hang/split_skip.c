/* Planted bug on a sub-communicator: the odd processes sum over their own communicator (MPI_Comm_split) twice, but
 * process 3 skips the second sum and goes on to the closing MPI_Barrier on MPI_COMM_WORLD, where the even processes
 * already wait. Process 1 waits in the sub-communicator's MPI_Allreduce #2 for process 3, which waits in the barrier
 * for process 1: one hang over two communicators, reported as such, and the job ends with exit code 124. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int value = rank, sum = 0;
    if (rank % 2 == 1) {
        MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, half);
        if (rank != 3) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, half); /* the bug: process 3 skips it */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("process %d: %d\n", rank, sum);
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
