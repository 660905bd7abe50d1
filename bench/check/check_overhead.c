/* The cost per MPI call of liblockstep_check.so: run it plain, under the library with debug mode off (watchdog only)
 * and on, side by side (bench/check/run.sh). Prints one line per call kind: the mean time per call in microseconds
 * over ITERATIONS calls (after a warm-up), the minimum over REPEATS rounds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define REPEATS 5

typedef void (*call_fn)(void);
static int in_value = 1, out_value;
static MPI_Request request;

static void allreduce(void) {
    MPI_Allreduce(&in_value, &out_value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}
static void bcast(void) {
    MPI_Bcast(&in_value, 1, MPI_INT, 0, MPI_COMM_WORLD);
}
static void iallreduce(void) {
    MPI_Iallreduce(&in_value, &out_value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
}
static void test_null(void) {
    MPI_Request null_request = MPI_REQUEST_NULL;
    int flag;
    MPI_Test(&null_request, &flag, MPI_STATUS_IGNORE);
}

static double time_call(call_fn call, int iterations) {
    double best = 1e30;
    for (int r = 0; r < REPEATS; ++r) {
        for (int i = 0; i < iterations / 10; ++i) call();
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        for (int i = 0; i < iterations; ++i) call();
        const double elapsed = (MPI_Wtime() - start) / iterations * 1e6;
        double slowest = 0;
        MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (slowest < best) best = slowest;
    }
    return best;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int iterations = argc > 1 ? atoi(argv[1]) : 20000;
    const char* label = argc > 2 ? argv[2] : "";
    const struct {
        const char* name;
        call_fn call;
    } calls[] = {
        {"MPI_Test(MPI_REQUEST_NULL)", test_null},
        {"MPI_Allreduce 4 B", allreduce},
        {"MPI_Bcast 4 B", bcast},
        {"MPI_Iallreduce+MPI_Wait 4 B", iallreduce},
    };
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; ++c) {
        const double us = time_call(calls[c].call, iterations);
        if (rank == 0) printf("%-10s %d ranks  %-28s %8.3f us\n", label, size, calls[c].name, us);
    }
    MPI_Finalize();
    return 0;
}
