/* A correct program that uses every watched kind of call, with threads allowed (MPI_THREAD_MULTIPLE where MPI gives
 * it): a ring of MPI_Sendrecv, MPI_Isend/MPI_Irecv completed by MPI_Waitall (more requests at once than the watchdog's
 * table records), MPI_Probe then MPI_Recv, MPI_Ssend, collectives on a split communicator, and a communicator freed
 * and made again. Under liblockstep_check.so with a short timeout it must finish with no report. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { many = 2500 };

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    int failures = 0;

    for (int round = 0; round < 20; ++round) {
        int out = rank * 100 + round, in = -1;
        MPI_Sendrecv(&out, 1, MPI_INT, next, 3, &in, 1, MPI_INT, previous, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        failures += in != previous * 100 + round;
    }

    /* Twice as many requests as the table records at once: the waits must still complete. */
    int* sent = malloc(sizeof(int) * many);
    int* received = malloc(sizeof(int) * many);
    MPI_Request* requests = malloc(sizeof(MPI_Request) * 2 * many);
    for (int i = 0; i < many; ++i) {
        sent[i] = rank * many + i;
        MPI_Irecv(&received[i], 1, MPI_INT, previous, i, MPI_COMM_WORLD, &requests[i]);
    }
    for (int i = 0; i < many; ++i) MPI_Isend(&sent[i], 1, MPI_INT, next, i, MPI_COMM_WORLD, &requests[many + i]);
    MPI_Waitall(2 * many, requests, MPI_STATUSES_IGNORE);
    for (int i = 0; i < many; ++i) failures += received[i] != previous * many + i;

    if (rank == 0) {
        MPI_Ssend(&size, 1, MPI_INT, next, 9, MPI_COMM_WORLD);
    }
    if (rank == 1) { /* rank 0's next */
        MPI_Status status;
        int value = 0;
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
        MPI_Recv(&value, 1, MPI_INT, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        failures += value != size;
    }

    for (int again = 0; again < 3; ++again) {
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        int value = 1, sum = 0;
        MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, half);
        int half_size = 0;
        MPI_Comm_size(half, &half_size);
        failures += sum != half_size;
        MPI_Comm_free(&half);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(requests);
    free(received);
    free(sent);
    if (failures == 0) printf("PASS correct_p2p rank %d/%d\n", rank, size);
    MPI_Finalize();
    return failures == 0 ? 0 : 1;
}
