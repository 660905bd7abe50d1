/* What the C test programs share: checks that count and report failures with the rank and the last error, and the
 * comparison of a value (an error text's hash) across ranks. Include after lockstep.h. */
#ifndef LOCKSTEP_TESTS_C_CHECK_H
#define LOCKSTEP_TESTS_C_CHECK_H

#include <stdio.h>

static int failures = 0;
static int checks = 0;
static int my_rank = 0;

#define CHECK(cond)                                                                                           \
    do {                                                                                                      \
        ++checks;                                                                                             \
        if (!(cond)) {                                                                                        \
            ++failures;                                                                                       \
            fprintf(stderr, "rank %d: FAIL %s:%d: %s (last error: %s)\n", my_rank, __FILE__, __LINE__, #cond, \
                    lockstep_last_error());                                                                   \
        }                                                                                                     \
    } while (0)
#define CHECK_STATUS(call, expected)                                                                                  \
    do {                                                                                                              \
        lockstep_status_t got_ = (call);                                                                              \
        ++checks;                                                                                                     \
        if (got_ != (expected)) {                                                                                     \
            ++failures;                                                                                               \
            fprintf(stderr, "rank %d: FAIL %s:%d: %s returned %s, expected %s (last error: %s)\n", my_rank, __FILE__, \
                    __LINE__, #call, lockstep_status_string(got_), lockstep_status_string(expected),                  \
                    lockstep_last_error());                                                                           \
        }                                                                                                             \
    } while (0)
#define OK(call) CHECK_STATUS(call, LOCKSTEP_OK)

static const lockstep_device_t cpu = {LOCKSTEP_DEVICE_CPU, 0};

/* lockstep_init and the world communicator of a test program that needs 2 or more ranks; sets my_rank. 0 when it
 * started, else the exit code for main (2: too few ranks). */
static inline int start_world(const char* program, lockstep_comm_t* world, int32_t* rank, int32_t* size) {
    OK(lockstep_init(NULL, NULL));
    OK(lockstep_comm_world(world));
    OK(lockstep_comm_rank(*world, rank));
    OK(lockstep_comm_size(*world, size));
    my_rank = *rank;
    if (*size < 2) {
        fprintf(stderr, "%s needs at least 2 ranks\n", program);
        return 2;
    }
    return 0;
}

/* FNV-1a of a text: ranks compare error texts through an allgather of their hashes. */
static int64_t text_hash(const char* s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s != '\0') {
        h ^= (unsigned char)*s++;
        h *= 1099511628211ULL;
    }
    return (int64_t)(h >> 1);
}

/* Whether every rank of comm has the same value. */
static int same_everywhere(lockstep_comm_t comm, int64_t value, int size) {
    lockstep_tensor_t in = NULL;
    lockstep_tensor_t out = NULL;
    int64_t one = 1;
    int64_t all = size;
    int same = 1;
    int i;
    void* p = NULL;
    OK(lockstep_tensor_empty(&one, 1, LOCKSTEP_INT64, cpu, &in));
    OK(lockstep_tensor_empty(&all, 1, LOCKSTEP_INT64, cpu, &out));
    OK(lockstep_tensor_copy_from_host(in, &value, sizeof value));
    OK(lockstep_allgather(comm, in, out, NULL));
    OK(lockstep_tensor_data(out, &p));
    for (i = 0; i < size; ++i) same = same && ((int64_t*)p)[i] == value;
    lockstep_tensor_release(in);
    lockstep_tensor_release(out);
    return same;
}

/* Every rank's failures, summed (collective over comm). */
static int32_t failures_over_all_ranks(lockstep_comm_t comm) {
    int64_t one = 1;
    int32_t total = -1;
    lockstep_tensor_t f = NULL;
    void* p = NULL;
    OK(lockstep_tensor_empty(&one, 1, LOCKSTEP_INT32, cpu, &f));
    OK(lockstep_tensor_data(f, &p));
    *(int32_t*)p = failures;
    OK(lockstep_allreduce(comm, f, f, LOCKSTEP_SUM, NULL));
    total = *(int32_t*)p;
    lockstep_tensor_release(f);
    return total;
}

#endif
