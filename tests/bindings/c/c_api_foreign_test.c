/* Collectives another library carries (lockstep_foreign_begin/end), under mpirun with 2 and 3 ranks: in debug mode
 * every collective's signature agrees or fails on every rank with the same text (shape, dtype, root, reduce op,
 * collective, each rank's call site); nothing is left half-done after a mismatch; calls end in any order; arguments
 * this layer refuses; with debug mode off nothing is compared.
 * With the argument "hang" the last rank never begins the call that the others begin and never end (a carrier stuck
 * waiting for it): the watchdog's report and the job's end are checked by foreign_hang_test.py. */
#include <lockstep.h>

#include "c_check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lockstep_call_options_t at_line(int line) {
    lockstep_call_options_t options = LOCKSTEP_CALL_OPTIONS_INIT;
    options.file = "carrier_program.py";
    options.line = line;
    options.tag = "carried";
    return options;
}

/* Begins one call with this rank's arguments and ends it at once; the status of the begin. */
static lockstep_status_t carried(lockstep_comm_t comm, lockstep_collective_t collective, lockstep_dtype_t dtype,
                                 const int64_t* shape, int32_t ndim, int32_t root, lockstep_reduce_op_t op, int line) {
    lockstep_call_options_t options = at_line(line);
    uint64_t number = 0;
    lockstep_status_t status = lockstep_foreign_begin(comm, collective, dtype, shape, ndim, LOCKSTEP_DEVICE_CPU, -1,
                                                      root, op, &options, &number);
    if (status == LOCKSTEP_OK) OK(lockstep_foreign_end(comm, number));
    return status;
}

/* A mismatch on the last rank: LOCKSTEP_ERROR_SIGNATURE_MISMATCH on every rank, with the same text, containing
 * `word`; then a call that agrees goes through. */
static void expect_mismatch(lockstep_comm_t comm, int32_t size, lockstep_status_t status, const char* word) {
    const int64_t four[1] = {4};
    CHECK_STATUS(status, LOCKSTEP_ERROR_SIGNATURE_MISMATCH);
    CHECK(strstr(lockstep_last_error(), word) != NULL);
    CHECK(same_everywhere(comm, text_hash(lockstep_last_error()), size));
    OK(carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, -1, LOCKSTEP_SUM, 1));
}

static void test_agreeing(lockstep_comm_t comm, int32_t rank, int32_t size) {
    const int64_t four[1] = {4};
    const int64_t matrix[2] = {2, 3};
    /* An uneven alltoall: the first dimension differs between ranks, the others agree. */
    const int64_t uneven[2] = {rank + 1, 3};
    lockstep_call_options_t options = at_line(10);
    uint64_t number = 0;
    OK(carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, -1, LOCKSTEP_SUM, 10));
    OK(carried(comm, LOCKSTEP_COLLECTIVE_BROADCAST, LOCKSTEP_INT64, matrix, 2, size - 1, -1, 11));
    OK(carried(comm, LOCKSTEP_COLLECTIVE_REDUCE, LOCKSTEP_FLOAT64, matrix, 2, 0, LOCKSTEP_MAX, 12));
    OK(carried(comm, LOCKSTEP_COLLECTIVE_GATHER, LOCKSTEP_BOOL, four, 1, 1, -1, 13));
    OK(carried(comm, LOCKSTEP_COLLECTIVE_BARRIER, -1, NULL, 0, -1, -1, 14));
    OK(carried(comm, LOCKSTEP_COLLECTIVE_REDUCE_SCATTER, LOCKSTEP_BFLOAT16, matrix, 2, -1, LOCKSTEP_MEAN, 15));
    OK(lockstep_foreign_begin(comm, LOCKSTEP_COLLECTIVE_ALLTOALLV, LOCKSTEP_FLOAT32, uneven, 2, LOCKSTEP_DEVICE_CPU, 0,
                              -1, -1, &options, &number));
    OK(lockstep_foreign_end(comm, number));
    /* Every rank numbers its calls alike. */
    CHECK(number > 0 && same_everywhere(comm, (int64_t)number, size));
}

static void test_mismatches(lockstep_comm_t comm, int32_t rank, int32_t size) {
    const int last = rank == size - 1;
    const int64_t four[1] = {4};
    const int64_t five[1] = {5};
    const int64_t matrix[2] = {2, 3};
    const int64_t uneven[2] = {rank + 1, last ? 4 : 3};
    lockstep_call_options_t options = at_line(40);
    uint64_t number = 0;
    lockstep_status_t status;
    status = carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, last ? five : four, 1, -1, LOCKSTEP_SUM,
                     last ? 31 : 30);
    expect_mismatch(comm, size, status, "shape");
    /* Each rank's call site is in the text. */
    CHECK(strstr(lockstep_last_error(), "carrier_program.py:30") != NULL);
    CHECK(strstr(lockstep_last_error(), "carrier_program.py:31") != NULL);
    status = carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, last ? LOCKSTEP_FLOAT64 : LOCKSTEP_FLOAT32, four, 1, -1,
                     LOCKSTEP_SUM, 32);
    expect_mismatch(comm, size, status, "dtype");
    status = carried(comm, LOCKSTEP_COLLECTIVE_BROADCAST, LOCKSTEP_FLOAT32, four, 1, last ? 1 : 0, -1, 33);
    expect_mismatch(comm, size, status, "root");
    status = carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, -1,
                     last ? LOCKSTEP_MAX : LOCKSTEP_SUM, 34);
    expect_mismatch(comm, size, status, "reduce op");
    status = carried(comm, last ? LOCKSTEP_COLLECTIVE_ALLGATHER : LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four,
                     1, -1, LOCKSTEP_SUM, 35);
    expect_mismatch(comm, size, status, "mismatched operations");
    status =
        carried(comm, LOCKSTEP_COLLECTIVE_REDUCE_SCATTER, LOCKSTEP_FLOAT32, matrix, last ? 1 : 2, -1, LOCKSTEP_SUM, 36);
    expect_mismatch(comm, size, status, "shape");
    /* An uneven alltoall whose other dimensions differ. */
    status = lockstep_foreign_begin(comm, LOCKSTEP_COLLECTIVE_ALLTOALLV, LOCKSTEP_FLOAT32, uneven, 2,
                                    LOCKSTEP_DEVICE_CPU, 0, -1, -1, &options, &number);
    expect_mismatch(comm, size, status, "shape");
}

/* Calls outstanding several at a time end in any order; a number never begun, or ended twice, does nothing. */
static void test_outstanding(lockstep_comm_t comm) {
    const int64_t four[1] = {4};
    lockstep_call_options_t options = at_line(50);
    uint64_t numbers[3] = {0, 0, 0};
    int i;
    for (i = 0; i < 3; ++i) {
        OK(lockstep_foreign_begin(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, LOCKSTEP_DEVICE_CPU,
                                  -1, -1, LOCKSTEP_SUM, &options, &numbers[i]));
    }
    CHECK(numbers[1] == numbers[0] + 1 && numbers[2] == numbers[1] + 1);
    OK(lockstep_foreign_end(comm, numbers[2]));
    OK(lockstep_foreign_end(comm, numbers[0]));
    OK(lockstep_foreign_end(comm, numbers[1]));
    OK(lockstep_foreign_end(comm, numbers[1]));
    OK(lockstep_foreign_end(comm, 999999));
}

static void test_refused(lockstep_comm_t comm, int32_t rank, int32_t size) {
    const int64_t four[1] = {4};
    uint64_t number = 7;
    const int last = rank == size - 1;
    /* Refused alike on every rank before any exchange. */
    CHECK_STATUS(
        lockstep_foreign_begin(comm, 99, LOCKSTEP_FLOAT32, four, 1, LOCKSTEP_DEVICE_CPU, -1, -1, -1, NULL, &number),
        LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(number == 0);
    CHECK_STATUS(lockstep_foreign_begin(comm, LOCKSTEP_COLLECTIVE_BARRIER, -1, NULL, 0, LOCKSTEP_DEVICE_CPU, -1, -1, -1,
                                        NULL, NULL),
                 LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_foreign_end(NULL, 1), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_comm_set_carrier(comm, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    /* A rooted collective without a root, on every rank. */
    CHECK_STATUS(carried(comm, LOCKSTEP_COLLECTIVE_BROADCAST, LOCKSTEP_FLOAT32, four, 1, -1, -1, 60),
                 LOCKSTEP_ERROR_INVALID_ARGUMENT);
    /* A reduce op no version defines, on the last rank only: in debug mode every rank's call is rejected. */
    CHECK_STATUS(
        carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, -1, last ? 42 : LOCKSTEP_SUM, 61),
        LOCKSTEP_ERROR_CALL_REJECTED);
    CHECK(strstr(lockstep_last_error(), "unknown reduce op 42") != NULL);
    CHECK(same_everywhere(comm, text_hash(lockstep_last_error()), size));
    /* A shape pointer missing, on every rank. */
    CHECK_STATUS(carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, NULL, 1, -1, LOCKSTEP_SUM, 62),
                 LOCKSTEP_ERROR_INVALID_ARGUMENT);
    OK(carried(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, -1, LOCKSTEP_SUM, 63));
}

/* Debug mode off: nothing is compared, so unequal calls all go through. */
static void test_unchecked(lockstep_comm_t world, int32_t rank) {
    lockstep_comm_options_t o = LOCKSTEP_COMM_OPTIONS_INIT;
    lockstep_comm_t plain = NULL;
    const int64_t shape[1] = {rank + 1};
    o.debug = 0;
    OK(lockstep_comm_dup_with_options(world, &o, &plain));
    OK(carried(plain, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, shape, 1, -1, LOCKSTEP_SUM, 70));
    OK(lockstep_comm_free(plain));
}

/* The last rank never begins the call the others begin: they wait (as in a stuck carrier) until the watchdog ends the
 * job. */
static int hang(lockstep_comm_t comm, int32_t rank, int32_t size) {
    const int64_t four[1] = {4};
    lockstep_call_options_t options = at_line(80);
    uint64_t number = 0;
    int i;
    for (i = 0; i < 2; ++i) {
        OK(lockstep_foreign_begin(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, LOCKSTEP_DEVICE_CPU,
                                  -1, -1, LOCKSTEP_SUM, &options, &number));
        OK(lockstep_foreign_end(comm, number));
    }
    if (rank != size - 1) {
        options.line = 81;
        OK(lockstep_foreign_begin(comm, LOCKSTEP_COLLECTIVE_ALLREDUCE, LOCKSTEP_FLOAT32, four, 1, LOCKSTEP_DEVICE_CPU,
                                  -1, -1, LOCKSTEP_SUM, &options, &number));
    }
    printf("rank %d waits\n", rank);
    fflush(stdout);
    /* Until the watchdog ends the job. sleep() returns early when a signal arrives, and the hang report takes every
     * rank's stack with one: so sleep again. */
    for (;;) {
        if (sleep(60) == 0) break; /* a whole minute slept: the watchdog did not end the job */
    }
    return 1;
}

int main(int argc, char** argv) {
    lockstep_comm_t world = NULL;
    lockstep_comm_t dbg = NULL;
    lockstep_comm_options_t o = LOCKSTEP_COMM_OPTIONS_INIT;
    int32_t rank = 0, size = 0, total = 0;
    const int started = start_world("c_api_foreign_test", &world, &rank, &size);
    if (started != 0) return started;
    o.debug = 1;
    OK(lockstep_comm_dup_with_options(world, &o, &dbg));
    OK(lockstep_comm_set_carrier(dbg, "a test's carrier"));
    if (argc > 1 && strcmp(argv[1], "hang") == 0) return hang(dbg, rank, size);
    test_agreeing(dbg, rank, size);
    test_mismatches(dbg, rank, size);
    test_outstanding(dbg);
    test_refused(dbg, rank, size);
    test_unchecked(world, rank);
    OK(lockstep_comm_free(dbg));
    total = failures_over_all_ranks(world);
    OK(lockstep_comm_free(world));
    OK(lockstep_finalize());
    if (rank == 0) printf("c_api_foreign_test: %d checks on rank 0, %d failures over all ranks\n", checks, total);
    return total == 0 && failures == 0 ? 0 : 1;
}
