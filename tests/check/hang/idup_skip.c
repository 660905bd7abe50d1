/* Planted bug on a communicator made by MPI_Comm_idup: every process sums over the duplicate twice, but the last one
 * skips the second sum and goes on to MPI_Finalize. The others' MPI_Allreduce #2 on the duplicate is reported with who
 * never arrived, and the job ends with exit code 124. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm dup;
    MPI_Request request;
    MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    int value = rank, sum = 0;
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, dup);
    if (rank != size - 1) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, dup); /* the bug: the last one skips it */
    printf("process %d: %d\n", rank, sum);
    MPI_Finalize();
    return 0;
}
