/* MPI programs with one planted bug each, chosen by the first argument; under liblockstep_check.so in debug mode each
 * must be reported, the same on every process, and end the job (tests/check/check_test.py).
 *   count       MPI_Allreduce of 4 ints on process 0, 3 elsewhere
 *   type        MPI_Bcast of 4 MPI_INT from the root, received as 4 MPI_FLOAT
 *   skip        process 1 skips a broadcast in one branch, so its allreduce meets the others' broadcast
 *   root        process 0 names root 0, the others root 1
 *   request     an MPI_Iallreduce that process 1 never waits for
 *   alltoallv   process 0 sends 2 ints to process 1, which expects 1 from it
 *   gatherv     the root expects 2 ints from the last process, which sends 3
 *   ibcast      a non-blocking broadcast of MPI_INT received as MPI_DOUBLE
 *   op          MPI_Allreduce with MPI_SUM on process 0, MPI_MAX elsewhere
 *   constructor process 0 duplicates the world communicator, the others split it
 *   gather      process 1 sends 3 ints to a root that expects 2 from each process
 *   scatter     process 1 receives one contiguous type of 2 doubles where the root sends 2 ints
 *   allgather   process 1 sends 2 floats where every process expects 2 ints
 *   scatterv    the root sends 3 ints to process 1, which expects 2
 *   reduce_scatter  process 1 passes other recvcounts than the rest
 *   return      the type mismatch with MPI_ERRORS_RETURN on the world: every process gets the error code, prints it
 *               and goes on (exit 0)
 *   truncate    with MPI_ERRORS_RETURN on the world, process 0 sends 4 ints to process 1, which receives 2: its
 *               MPI_Recv returns MPI_ERR_TRUNCATE (an error of MPI itself, with debug mode off too); exit 0 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char* bug = argc > 1 ? argv[1] : "";
    int ints[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int out[8] = {0};
    float floats[4] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    if (strcmp(bug, "count") == 0) {
        MPI_Allreduce(ints, out, rank == 0 ? 4 : 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(bug, "type") == 0) {
        if (rank == 0)
            MPI_Bcast(ints, 4, MPI_INT, 0, MPI_COMM_WORLD);
        else
            MPI_Bcast(floats, 4, MPI_FLOAT, 0, MPI_COMM_WORLD);
    } else if (strcmp(bug, "skip") == 0) {
        if (rank != 1) MPI_Bcast(ints, 4, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Allreduce(ints, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(bug, "root") == 0) {
        MPI_Bcast(ints, 4, MPI_INT, rank == 0 ? 0 : 1, MPI_COMM_WORLD);
    } else if (strcmp(bug, "request") == 0) {
        MPI_Request req;
        MPI_Iallreduce(ints, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
        if (rank != 1) MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (strcmp(bug, "alltoallv") == 0) {
        int* sc = calloc((size_t)size, sizeof(int));
        int* rc = calloc((size_t)size, sizeof(int));
        int* sd = calloc((size_t)size, sizeof(int));
        int* rd = calloc((size_t)size, sizeof(int));
        int* sb = calloc(64, sizeof(int));
        int* rb = calloc(64, sizeof(int));
        for (int j = 0; j < size; ++j) {
            sc[j] = 1;
            rc[j] = 1;
            sd[j] = j * 2;
            rd[j] = j * 2;
        }
        if (rank == 0) sc[1] = 2;
        MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD);
        free(sc);
        free(rc);
        free(sd);
        free(rd);
        free(sb);
        free(rb);
    } else if (strcmp(bug, "gatherv") == 0) {
        int* counts = calloc((size_t)size, sizeof(int));
        int* displs = calloc((size_t)size, sizeof(int));
        for (int r = 0; r < size; ++r) {
            counts[r] = 2;
            displs[r] = 2 * r;
        }
        int* all = calloc((size_t)(3 * size), sizeof(int));
        MPI_Gatherv(ints, rank == size - 1 ? 3 : 2, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
        free(counts);
        free(displs);
        free(all);
    } else if (strcmp(bug, "ibcast") == 0) {
        double doubles[4];
        MPI_Request req;
        if (rank == 0)
            MPI_Ibcast(ints, 4, MPI_INT, 0, MPI_COMM_WORLD, &req);
        else
            MPI_Ibcast(doubles, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (strcmp(bug, "op") == 0) {
        MPI_Allreduce(ints, out, 4, MPI_INT, rank == 0 ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD);
    } else if (strcmp(bug, "constructor") == 0) {
        MPI_Comm made;
        if (rank == 0)
            MPI_Comm_dup(MPI_COMM_WORLD, &made);
        else
            MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &made);
        MPI_Comm_free(&made);
    } else if (strcmp(bug, "gather") == 0) {
        int* all = calloc((size_t)(3 * size), sizeof(int));
        MPI_Gather(ints, rank == 1 ? 3 : 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD);
        free(all);
    } else if (strcmp(bug, "scatter") == 0) {
        MPI_Datatype pair;
        MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
        MPI_Type_commit(&pair);
        double doubles[2];
        int* all = calloc((size_t)(2 * size), sizeof(int));
        if (rank == 1)
            MPI_Scatter(all, 2, MPI_INT, doubles, 1, pair, 0, MPI_COMM_WORLD);
        else
            MPI_Scatter(all, 2, MPI_INT, out, 2, MPI_INT, 0, MPI_COMM_WORLD);
        free(all);
        MPI_Type_free(&pair);
    } else if (strcmp(bug, "allgather") == 0) {
        int* all = calloc((size_t)(2 * size), sizeof(int));
        MPI_Allgather(rank == 1 ? (void*)floats : (void*)ints, 2, rank == 1 ? MPI_FLOAT : MPI_INT, all, 2, MPI_INT,
                      MPI_COMM_WORLD);
        free(all);
    } else if (strcmp(bug, "scatterv") == 0) {
        int* counts = calloc((size_t)size, sizeof(int));
        int* displs = calloc((size_t)size, sizeof(int));
        for (int r = 0; r < size; ++r) {
            counts[r] = r == 1 ? 3 : 2;
            displs[r] = 3 * r;
        }
        int* all = calloc((size_t)(3 * size), sizeof(int));
        MPI_Scatterv(all, counts, displs, MPI_INT, out, 2, MPI_INT, 0, MPI_COMM_WORLD);
        free(counts);
        free(displs);
        free(all);
    } else if (strcmp(bug, "reduce_scatter") == 0) {
        int* counts = calloc((size_t)size, sizeof(int));
        for (int r = 0; r < size; ++r) counts[r] = rank == 1 && r == 0 ? 2 : 1;
        int* all = calloc((size_t)(2 * size), sizeof(int));
        MPI_Reduce_scatter(all, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        free(counts);
        free(all);
    } else if (strcmp(bug, "return") == 0) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = rank == 0 ? MPI_Bcast(ints, 4, MPI_INT, 0, MPI_COMM_WORLD)
                           : MPI_Bcast(floats, 4, MPI_FLOAT, 0, MPI_COMM_WORLD);
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        MPI_Error_string(rc, text, &length);
        printf("process %d: MPI_Bcast returned %s: %s\n", rank, rc == MPI_SUCCESS ? "success" : "an error", text);
        fflush(stdout);
    } else if (strcmp(bug, "truncate") == 0) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_SUCCESS;
        if (rank == 0) rc = MPI_Send(ints, 4, MPI_INT, 1, 5, MPI_COMM_WORLD);
        if (rank == 1) rc = MPI_Recv(out, 2, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int error_class = MPI_SUCCESS;
        MPI_Error_class(rc, &error_class);
        printf("process %d: %s\n", rank, error_class == MPI_ERR_TRUNCATE ? "MPI_ERR_TRUNCATE" : "no error");
        fflush(stdout);
    } else {
        fprintf(stderr, "planted_bugs: unknown bug '%s'\n", bug);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
