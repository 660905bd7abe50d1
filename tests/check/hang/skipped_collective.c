/* Planted bug: a collective skipped at the end of the program. Every process sums its value with MPI_Allreduce for
 * five steps, but the last process leaves the loop one step early and goes on to MPI_Finalize, so the others wait in
 * the fifth MPI_Allreduce for good. Under liblockstep_check.so the watchdog reports who never arrived and where that
 * process is, and ends the job with exit code 124. */
#include <mpi.h>
#include <stdio.h>

static double sum_over_processes(double value) {
    double sum = 0.0;
    MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int steps = rank == size - 1 ? 4 : 5; /* the bug: one process stops early */
    double total = 0.0;
    for (int step = 0; step < steps; ++step) total += sum_over_processes((double)(rank + step));
    printf("process %d: %g\n", rank, total);
    MPI_Finalize();
    return 0;
}
