/* A correct MPI program that makes every collective the checking library intercepts, blocking and non-blocking, with
 * derived datatypes, MPI_IN_PLACE, v-variants with unequal counts, user ops, several communicators, and a
 * non-blocking broadcast whose root blocks in a receive that its peer sends only after waiting for the broadcast.
 * Under liblockstep_check.so it must run clean, with debug mode and without: no report, exit 0. Every result is
 * checked; a wrong one exits 3. */
#include <mpi.h>
#include <stddef.h> /* offsetof: MPICH's mpi.h, unlike Open MPI's, does not include it */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define EXPECT(cond)                                                                                \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", rank, __FILE__, __LINE__, #cond); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                           \
        }                                                                                           \
    } while (0)

static void my_max(void* in, void* inout, int* len, MPI_Datatype* type) {
    (void)type;
    int* a = in;
    int* b = inout;
    for (int i = 0; i < *len; ++i) b[i] = a[i] > b[i] ? a[i] : b[i];
}

static void blocking_collectives(MPI_Comm comm) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    MPI_Barrier(comm);

    /* 4 MPI_INT on the root, one contiguous(4, MPI_INT) elsewhere: the same type signature. */
    int buf[4] = {0, 0, 0, 0};
    if (me == 0)
        for (int i = 0; i < 4; ++i) buf[i] = 10 + i;
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    if (me == 0)
        MPI_Bcast(buf, 4, MPI_INT, 0, comm);
    else
        MPI_Bcast(buf, 1, four, 0, comm);
    EXPECT(buf[3] == 13);

    /* A vector of 2 blocks of 2 doubles against 4 doubles. */
    double grid[8] = {0};
    MPI_Datatype cols;
    MPI_Type_vector(2, 2, 4, MPI_DOUBLE, &cols);
    MPI_Type_commit(&cols);
    if (me == n - 1) {
        double flat[4] = {1, 2, 3, 4};
        MPI_Bcast(flat, 4, MPI_DOUBLE, n - 1, comm);
    } else {
        MPI_Bcast(grid, 1, cols, n - 1, comm);
        EXPECT(grid[0] == 1 && grid[1] == 2 && grid[4] == 3 && grid[5] == 4);
    }

    /* A struct {int, double x2} sent as such and received as its basic types in a struct of another layout. */
    struct pair {
        int i;
        double d[2];
    } p = {me, {me + 0.5, me + 1.5}};
    int lens[2] = {1, 2};
    MPI_Aint offs[2] = {offsetof(struct pair, i), offsetof(struct pair, d)};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Datatype pair_type;
    MPI_Type_create_struct(2, lens, offs, types, &pair_type);
    MPI_Type_commit(&pair_type);
    struct pair* all = malloc(sizeof(struct pair) * (size_t)n);
    MPI_Allgather(&p, 1, pair_type, all, 1, pair_type, comm);
    for (int r = 0; r < n; ++r) EXPECT(all[r].i == r);
    /* Two structs per process against a contiguous(2, struct). */
    MPI_Datatype two_pairs;
    MPI_Type_contiguous(2, pair_type, &two_pairs);
    MPI_Type_commit(&two_pairs);
    struct pair mine2[2] = {p, p};
    struct pair* all2 = malloc(sizeof(struct pair) * 2 * (size_t)n);
    if (me == 0)
        MPI_Gather(mine2, 2, pair_type, all2, 1, two_pairs, 0, comm);
    else
        MPI_Gather(mine2, 1, two_pairs, all2, 2, pair_type, 0, comm);
    if (me == 0)
        for (int r = 0; r < n; ++r) EXPECT(all2[2 * r + 1].i == r);
    free(all2);
    free(all);
    MPI_Type_free(&two_pairs);
    MPI_Type_free(&pair_type);
    MPI_Type_free(&cols);
    MPI_Type_free(&four);

    int* many = malloc(sizeof(int) * (size_t)n * 4);
    int one[4] = {me, me, me, me};
    MPI_Gather(one, 4, MPI_INT, many, 4, MPI_INT, 0, comm);
    if (me == 0) {
        EXPECT(many[4 * (n - 1)] == n - 1);
        MPI_Gather(MPI_IN_PLACE, 4, MPI_INT, many, 4, MPI_INT, 0, comm);
    } else {
        MPI_Gather(one, 4, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, 0, comm);
    }
    MPI_Scatter(many, 4, MPI_INT, one, 4, MPI_INT, 0, comm);
    EXPECT(one[0] == me);
    if (me == 0)
        MPI_Scatter(many, 4, MPI_INT, MPI_IN_PLACE, 4, MPI_INT, 0, comm);
    else
        MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, one, 4, MPI_INT, 0, comm);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, many, 4, MPI_INT, comm);
    /* Send and receive buffers must not alias (MPI's rule; MPICH checks it): in place is MPI_IN_PLACE, below. */
    int* received = malloc(sizeof(int) * 4 * (size_t)n);
    MPI_Alltoall(many, 4, MPI_INT, received, 4, MPI_INT, comm);
    free(received);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, many, 4, MPI_INT, comm);
    free(many);

    /* v-variants: process r contributes r + 1 elements. */
    int* counts = malloc(sizeof(int) * (size_t)n);
    int* displs = malloc(sizeof(int) * (size_t)n);
    int total = 0;
    for (int r = 0; r < n; ++r) {
        counts[r] = r + 1;
        displs[r] = total;
        total += r + 1;
    }
    int* mine = malloc(sizeof(int) * (size_t)(me + 1));
    for (int i = 0; i <= me; ++i) mine[i] = me;
    int* gathered = malloc(sizeof(int) * (size_t)total);
    MPI_Gatherv(mine, me + 1, MPI_INT, gathered, counts, displs, MPI_INT, 0, comm);
    if (me == 0) EXPECT(gathered[total - 1] == n - 1);
    MPI_Scatterv(gathered, counts, displs, MPI_INT, mine, me + 1, MPI_INT, 0, comm);
    MPI_Allgatherv(mine, me + 1, MPI_INT, gathered, counts, displs, MPI_INT, comm);
    EXPECT(gathered[total - 1] == n - 1);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered, counts, displs, MPI_INT, comm);
    /* alltoallv: process i sends i + j + 1 elements to process j. */
    int* scounts = malloc(sizeof(int) * (size_t)n);
    int* rcounts = malloc(sizeof(int) * (size_t)n);
    int* sdispls = malloc(sizeof(int) * (size_t)n);
    int* rdispls = malloc(sizeof(int) * (size_t)n);
    int stotal = 0, rtotal = 0;
    for (int j = 0; j < n; ++j) {
        scounts[j] = me + j + 1;
        sdispls[j] = stotal;
        stotal += scounts[j];
        rcounts[j] = j + me + 1;
        rdispls[j] = rtotal;
        rtotal += rcounts[j];
    }
    int* sbuf = calloc((size_t)stotal, sizeof(int));
    int* rbuf = calloc((size_t)rtotal, sizeof(int));
    for (int i = 0; i < stotal; ++i) sbuf[i] = me;
    MPI_Alltoallv(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, comm);
    EXPECT(rbuf[rtotal - 1] == n - 1);
    MPI_Datatype* ts = malloc(sizeof(MPI_Datatype) * (size_t)n);
    int* sbytes = malloc(sizeof(int) * (size_t)n);
    int* rbytes = malloc(sizeof(int) * (size_t)n);
    for (int j = 0; j < n; ++j) {
        ts[j] = MPI_INT;
        sbytes[j] = sdispls[j] * (int)sizeof(int);
        rbytes[j] = rdispls[j] * (int)sizeof(int);
    }
    MPI_Alltoallw(sbuf, scounts, sbytes, ts, rbuf, rcounts, rbytes, ts, comm);
    EXPECT(rbuf[0] == 0);
    free(ts);
    free(sbytes);
    free(rbytes);
    free(sbuf);
    free(rbuf);
    free(scounts);
    free(rcounts);
    free(sdispls);
    free(rdispls);

    /* Reductions, with a user op. */
    int v = me + 1, sum = 0;
    MPI_Reduce(&v, &sum, 1, MPI_INT, MPI_SUM, n - 1, comm);
    if (me == n - 1) EXPECT(sum == n * (n + 1) / 2);
    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, comm);
    EXPECT(sum == n * (n + 1) / 2);
    MPI_Op op;
    MPI_Op_create(my_max, 1, &op);
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, op, comm);
    EXPECT(v == n);
    MPI_Op_free(&op);
    MPI_Scan(&me, &sum, 1, MPI_INT, MPI_SUM, comm);
    EXPECT(sum == me * (me + 1) / 2);
    MPI_Exscan(&me, &sum, 1, MPI_INT, MPI_SUM, comm);
    /* Reduce_scatter's blocks are counts[r] = r + 1 elements: n (n + 1) / 2 in all, at most n on one process. */
    const int block_total = n * (n + 1) / 2 > 2 * n ? n * (n + 1) / 2 : 2 * n;
    int* block = malloc(sizeof(int) * (size_t)block_total);
    for (int i = 0; i < block_total; ++i) block[i] = 1;
    int* out = malloc(sizeof(int) * (size_t)(n > 2 ? n : 2)); /* 2 from the block call, up to n from the other */
    MPI_Reduce_scatter_block(block, out, 2, MPI_INT, MPI_SUM, comm);
    EXPECT(out[1] == n);
    MPI_Reduce_scatter(block, out, counts, MPI_INT, MPI_SUM, comm);
    EXPECT(out[me] == n);
    free(out);
    free(block);
    free(counts);
    free(displs);
    free(mine);
    free(gathered);
}

static void nonblocking_collectives(MPI_Comm comm) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    MPI_Request reqs[8];
    int a = me, b = 0, c[4] = {0}, d = me + 1, e = 0;
    int* all = malloc(sizeof(int) * (size_t)n);
    /* The alltoall's own buffers: they must alias neither each other nor the gather's receive buffer. */
    int* sent = malloc(sizeof(int) * (size_t)n);
    int* received = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; ++i) sent[i] = me;
    MPI_Ibarrier(comm, &reqs[0]);
    MPI_Ibcast(c, 4, MPI_INT, 0, comm, &reqs[1]);
    MPI_Iallreduce(&a, &b, 1, MPI_INT, MPI_SUM, comm, &reqs[2]);
    MPI_Iallgather(&a, 1, MPI_INT, all, 1, MPI_INT, comm, &reqs[3]);
    MPI_Ireduce(&d, &e, 1, MPI_INT, MPI_MAX, 0, comm, &reqs[4]);
    MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE);
    EXPECT(b == n * (n - 1) / 2 && all[n - 1] == n - 1);
    if (me == 0) EXPECT(e == n);
    /* Completed one at a time, in another order, by test and waitany. */
    MPI_Iscan(&a, &b, 1, MPI_INT, MPI_SUM, comm, &reqs[0]);
    MPI_Igather(&a, 1, MPI_INT, all, 1, MPI_INT, 0, comm, &reqs[1]);
    MPI_Ialltoall(sent, 1, MPI_INT, received, 1, MPI_INT, comm, &reqs[2]);
    int flag = 0;
    while (!flag) MPI_Test(&reqs[1], &flag, MPI_STATUS_IGNORE);
    int index = 0;
    MPI_Waitany(3, reqs, &index, MPI_STATUS_IGNORE);
    MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
    EXPECT(b == me * (me + 1) / 2 && received[n - 1] == n - 1);
    free(sent);
    free(received);
    /* A derived datatype freed right after the call that uses it, before its request completes (MPI allows it). */
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    if (me == 0) c[3] = 99;
    MPI_Ibcast(c, 1, four, 0, comm, &reqs[0]);
    MPI_Type_free(&four);
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    EXPECT(c[3] == 99);
    /* A blocking collective while a non-blocking one is in flight on the same communicator. */
    MPI_Iallreduce(&a, &b, 1, MPI_INT, MPI_SUM, comm, &reqs[0]);
    MPI_Allreduce(&a, &d, 1, MPI_INT, MPI_MAX, comm);
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    EXPECT(b == n * (n - 1) / 2 && d == n - 1);
    free(all);
}

/* Process 0 starts a broadcast and blocks in a broadcast on another communicator that process 1 joins only once its
 * first broadcast completed: correct MPI (the first progresses inside the second), which a checking layer must not
 * turn into a deadlock. */
static void ibcast_then_bcast(void) {
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    int value = rank == 0 ? 42 : 0, token = rank == 1 ? 7 : 0;
    MPI_Request req;
    MPI_Ibcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    if (rank == 0) {
        MPI_Bcast(&token, 1, MPI_INT, 1, pair);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        EXPECT(token == 7);
    } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        EXPECT(value == 42);
        if (rank == 1) MPI_Bcast(&token, 1, MPI_INT, 1, pair);
    }
    if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
    /* The same with a communicator duplication as the blocking call. */
    MPI_Comm copy;
    value = rank == 0 ? 43 : 0;
    MPI_Ibcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    if (rank == 0) {
        MPI_Comm_dup(MPI_COMM_WORLD, &copy);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        EXPECT(value == 43);
        MPI_Comm_dup(MPI_COMM_WORLD, &copy);
    }
    MPI_Comm_free(&copy);
}

/* The same with a receive: process 0 blocks in a receive that process 1 sends only once its broadcast completed. */
static void ibcast_then_recv(void) {
    int value = rank == 0 ? 42 : 0, token = 0;
    MPI_Request req;
    MPI_Ibcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    if (rank == 0) {
        MPI_Recv(&token, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        EXPECT(token == 42);
    } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        EXPECT(value == 42);
        if (rank == 1) MPI_Send(&value, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
}

int main(int argc, char** argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    blocking_collectives(MPI_COMM_WORLD);
    nonblocking_collectives(MPI_COMM_WORLD);
    ibcast_then_bcast();
    if (argc > 1 && strcmp(argv[1], "recv") == 0) ibcast_then_recv();

    MPI_Comm dup, half, node, created, grid;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(dup, rank % 2, -rank, &half);
    blocking_collectives(half);
    nonblocking_collectives(half);
    MPI_Comm idup;
    MPI_Request idup_request;
    MPI_Comm_idup(half, &idup, &idup_request);
    MPI_Wait(&idup_request, MPI_STATUS_IGNORE);
    nonblocking_collectives(idup);
    MPI_Comm_free(&idup);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Barrier(node);
    MPI_Group world_group, first_two;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int ranks[2] = {0, 1};
    MPI_Group_incl(world_group, 2, ranks, &first_two);
    MPI_Comm_create(MPI_COMM_WORLD, first_two, &created);
    if (created != MPI_COMM_NULL) {
        blocking_collectives(created);
        MPI_Comm_free(&created);
    }
    int dims[1] = {size}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &grid);
    MPI_Allreduce(MPI_IN_PLACE, dims, 1, MPI_INT, MPI_MAX, grid);
    MPI_Comm_free(&grid);
    MPI_Group_free(&first_two);
    MPI_Group_free(&world_group);
    MPI_Comm_free(&node);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    if (rank == 0) printf("correct_collectives: all checks passed on %d processes\n", size);
    MPI_Finalize();
    return 0;
}
