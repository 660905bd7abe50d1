/* The C interface's non-blocking operations from a C99 program that includes lockstep.h only: every non-blocking
 * collective against its closed form (out of place and in place, many outstanding and waited for in reverse order),
 * isend/irecv exchanges with the receive posted first in every order at eager and rendezvous sizes, receives from
 * LOCKSTEP_ANY_SOURCE with lockstep_request_source, wait_for with a zero and a long limit, test loops, a debug-mode
 * mismatch and a rejected call surfacing at wait on every rank with the same text, the rendezvous send that a
 * blocking signature exchange would deadlock, wrapped memory kept alive until the request is gone, requests freed
 * without a wait, requests waited for by several threads at once, and misused request handles. Run under mpirun with 2
 * or more ranks, with and without a progress thread (LOCKSTEP_PROGRESS_THREAD=0). */
#define _POSIX_C_SOURCE 200112L /* nanosleep, pthreads */
#include "lockstep.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_check.h"

static lockstep_tensor_t filled(lockstep_dtype_t dtype, const int64_t* shape, int32_t ndim, double first, double step) {
    lockstep_tensor_t t = NULL;
    int64_t n = 1, i;
    void* p = NULL;
    int32_t d;
    for (d = 0; d < ndim; ++d) n *= shape[d];
    OK(lockstep_tensor_empty(shape, ndim, dtype, cpu, &t));
    OK(lockstep_tensor_data(t, &p));
    for (i = 0; i < n; ++i) {
        const double v = first + step * (double)i;
        if (dtype == LOCKSTEP_FLOAT32) ((float*)p)[i] = (float)v;
        if (dtype == LOCKSTEP_FLOAT64) ((double*)p)[i] = v;
        if (dtype == LOCKSTEP_INT64) ((int64_t*)p)[i] = (int64_t)v;
    }
    return t;
}

static lockstep_tensor_t vector_f32(int64_t n, double first, double step) {
    return filled(LOCKSTEP_FLOAT32, &n, 1, first, step);
}

static float* f32(lockstep_tensor_t t) {
    void* p = NULL;
    OK(lockstep_tensor_data(t, &p));
    return (float*)p;
}

/* Waits and frees, expecting `status`. */
static void finish(lockstep_request_t r, lockstep_status_t status) {
    CHECK_STATUS(lockstep_request_wait(r), status);
    OK(lockstep_request_free(r));
}
#define WAIT_OK(r) finish((r), LOCKSTEP_OK)

/* bfloat16 from and to float (the upper half of the float's bits: exact for small integers). */
static uint16_t to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (uint16_t)(bits >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ---------------------------------------------------------------- collectives */

static void test_collectives(lockstep_comm_t world, int rank, int size) {
    const int root = size - 1;
    const double sum_ranks = (double)size * (size - 1) / 2.0;
    lockstep_request_t r = NULL;
    int i, j;

    OK(lockstep_ibarrier(world, NULL, &r));
    CHECK(r != NULL);
    WAIT_OK(r);

    /* broadcast: out of place (non-roots give no input) and in place. */
    {
        lockstep_tensor_t in = vector_f32(5, 10.0 * rank, 1.0);
        lockstep_tensor_t out = vector_f32(5, -1.0, 0.0);
        OK(lockstep_ibroadcast(world, rank == root ? in : NULL, out, root, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < 5; ++i) CHECK(f32(out)[i] == (float)(10 * root + i));
        OK(lockstep_ibroadcast(world, in, in, 0, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < 5; ++i) CHECK(f32(in)[i] == (float)i);
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
    }
    /* reduce to the root's output; other ranks pass none. */
    {
        lockstep_tensor_t in = vector_f32(4, rank, 1.0);
        lockstep_tensor_t out = vector_f32(4, -1.0, 0.0);
        OK(lockstep_ireduce(world, in, rank == root ? out : NULL, LOCKSTEP_SUM, root, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < 4; ++i) CHECK(f32(out)[i] == (rank == root ? (float)(sum_ranks + size * i) : -1.0f));
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
    }
    /* allreduce: out of place (the input stays), in place, max. */
    {
        lockstep_tensor_t in = vector_f32(6, rank, 1.0);
        lockstep_tensor_t out = vector_f32(6, -1.0, 0.0);
        OK(lockstep_iallreduce(world, in, out, LOCKSTEP_SUM, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < 6; ++i) CHECK(f32(out)[i] == (float)(sum_ranks + size * i) && f32(in)[i] == (float)(rank + i));
        OK(lockstep_iallreduce(world, in, in, LOCKSTEP_MAX, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < 6; ++i) CHECK(f32(in)[i] == (float)(size - 1 + i));
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
    }
    /* gather and allgather: rank order. */
    {
        int64_t two = 2, all = 2 * size;
        lockstep_tensor_t in = filled(LOCKSTEP_INT64, &two, 1, 100.0 * rank, 1.0);
        lockstep_tensor_t gathered = filled(LOCKSTEP_INT64, &all, 1, -1.0, 0.0);
        lockstep_tensor_t everywhere = filled(LOCKSTEP_INT64, &all, 1, -1.0, 0.0);
        int64_t *g = NULL, *e = NULL;
        OK(lockstep_igather(world, in, rank == 0 ? gathered : NULL, 0, NULL, &r));
        WAIT_OK(r);
        OK(lockstep_iallgather(world, in, everywhere, NULL, &r));
        WAIT_OK(r);
        OK(lockstep_tensor_data(gathered, (void**)&g));
        OK(lockstep_tensor_data(everywhere, (void**)&e));
        for (i = 0; i < size; ++i) {
            for (j = 0; j < 2; ++j) {
                CHECK(e[2 * i + j] == 100 * i + j);
                CHECK(g[2 * i + j] == (rank == 0 ? 100 * i + j : -1));
            }
        }
        lockstep_tensor_release(in);
        lockstep_tensor_release(gathered);
        lockstep_tensor_release(everywhere);
    }
    /* scatter: rank i gets rows [3i, 3i + 3) of the root's input; non-roots give none. */
    {
        lockstep_tensor_t in = vector_f32(3 * size, 0.0, 1.0);
        lockstep_tensor_t out = vector_f32(3, -1.0, 0.0);
        OK(lockstep_iscatter(world, rank == 0 ? in : NULL, out, 0, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < 3; ++i) CHECK(f32(out)[i] == (float)(3 * rank + i));
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
    }
    /* reduce_scatter: float32 (into the output) and bfloat16 (through float32 and a copy). */
    {
        int64_t rows = 2 * size, two = 2;
        lockstep_tensor_t in = vector_f32(rows, rank, 1.0);
        lockstep_tensor_t out = vector_f32(2, -1.0, 0.0);
        lockstep_tensor_t in16 = NULL, out16 = NULL;
        uint16_t* h = NULL;
        OK(lockstep_ireduce_scatter(world, in, out, LOCKSTEP_SUM, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < 2; ++i) CHECK(f32(out)[i] == (float)(sum_ranks + size * (2 * rank + i)));
        OK(lockstep_tensor_empty(&rows, 1, LOCKSTEP_BFLOAT16, cpu, &in16));
        OK(lockstep_tensor_empty(&two, 1, LOCKSTEP_BFLOAT16, cpu, &out16));
        OK(lockstep_tensor_data(in16, (void**)&h));
        for (i = 0; i < rows; ++i) h[i] = to_bf16((float)(rank + i));
        OK(lockstep_ireduce_scatter(world, in16, out16, LOCKSTEP_SUM, NULL, &r));
        WAIT_OK(r);
        OK(lockstep_tensor_data(out16, (void**)&h));
        for (i = 0; i < 2; ++i) CHECK(from_bf16(h[i]) == (float)(sum_ranks + size * (2 * rank + i)));
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
        lockstep_tensor_release(in16);
        lockstep_tensor_release(out16);
    }
    /* alltoall: block i goes to rank i; in place too. */
    {
        lockstep_tensor_t in = vector_f32(size, 100.0 * rank, 1.0);
        lockstep_tensor_t out = vector_f32(size, -1.0, 0.0);
        OK(lockstep_ialltoall(world, in, out, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < size; ++i) CHECK(f32(out)[i] == (float)(100 * i + rank));
        OK(lockstep_ialltoall(world, out, out, NULL, &r));
        WAIT_OK(r);
        for (i = 0; i < size; ++i) CHECK(f32(out)[i] == (float)(100 * rank + i));
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
    }
    /* gather_uneven: rank i gives i + 1 rows; the new tensor comes from lockstep_request_result. */
    {
        lockstep_tensor_t in = vector_f32(rank + 1, rank, 0.0);
        lockstep_tensor_t result = NULL;
        const int64_t* shape = NULL;
        int k = 0;
        OK(lockstep_igather_uneven(world, in, NULL, &r));
        OK(lockstep_request_wait(r));
        OK(lockstep_request_result(r, &result));
        OK(lockstep_request_free(r));
        OK(lockstep_tensor_shape(result, &shape));
        CHECK(shape[0] == (int64_t)size * (size + 1) / 2);
        for (i = 0; i < size; ++i) {
            for (j = 0; j <= i; ++j) CHECK(f32(result)[k++] == (float)i);
        }
        lockstep_tensor_release(result);
        lockstep_tensor_release(in);
    }
    /* Many outstanding, waited for in reverse order; other operations have no result or source. */
    {
        enum { n = 64 };
        lockstep_request_t many[n];
        lockstep_tensor_t t[n];
        for (i = 0; i < n; ++i) {
            t[i] = vector_f32(3, i + rank, 0.0);
            OK(lockstep_iallreduce(world, t[i], t[i], LOCKSTEP_SUM, NULL, &many[i]));
        }
        for (i = n - 1; i >= 0; --i) {
            lockstep_tensor_t none = t[0];
            int32_t source = 7;
            OK(lockstep_request_wait(many[i]));
            OK(lockstep_request_result(many[i], &none));
            CHECK(none == NULL);
            OK(lockstep_request_source(many[i], &source));
            CHECK(source == -1);
            OK(lockstep_request_free(many[i]));
            CHECK(f32(t[i])[2] == (float)(size * i + sum_ranks));
            lockstep_tensor_release(t[i]);
        }
    }
}

/* ---------------------------------------------------------------- waiting */

static void test_waiting(lockstep_comm_t world, int rank, int size) {
    lockstep_request_t r = NULL;
    int32_t done = -1;
    long spins = 0;
    lockstep_tensor_t t = vector_f32(1024, rank, 0.0);
    /* wait_for with no time, then a long one; then the same status again on every later call. */
    OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
    OK(lockstep_request_wait_for(r, 0.0, &done));
    CHECK(done == 0 || done == 1);
    OK(lockstep_request_wait_for(r, 600.0, &done));
    CHECK(done == 1);
    OK(lockstep_request_wait(r));
    OK(lockstep_request_test(r, &done));
    CHECK(done == 1);
    OK(lockstep_request_free(r));
    CHECK(f32(t)[1023] == (float)((double)size * (size - 1) / 2.0));
    /* A test loop. */
    OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
    do {
        const lockstep_status_t status = lockstep_request_test(r, &done);
        if (status != LOCKSTEP_OK) OK(status);
        ++spins;
    } while (done == 0);
    OK(lockstep_request_free(r));
    CHECK(spins >= 1);
    CHECK(f32(t)[0] == (float)((double)size * size * (size - 1) / 2.0));
    lockstep_tensor_release(t);

    /* A receive that cannot be matched yet: wait_for(0) and test say not completed, source is not known yet; the
     * sender sends only after a barrier that this rank enters after those checks. */
    if (rank <= 1) {
        lockstep_tensor_t msg = vector_f32(8, rank == 1 ? 42.0 : -1.0, 0.0);
        int32_t source = 9;
        if (rank == 0) {
            OK(lockstep_irecv(world, msg, 1, 5, NULL, &r));
            OK(lockstep_request_wait_for(r, 0.0, &done));
            CHECK(done == 0);
            OK(lockstep_request_test(r, &done));
            CHECK(done == 0);
            CHECK_STATUS(lockstep_request_source(r, &source), LOCKSTEP_ERROR_INVALID_USAGE);
            CHECK(source == 9);
        }
        OK(lockstep_barrier(world, NULL));
        if (rank == 1) {
            OK(lockstep_isend(world, msg, 0, 5, NULL, &r));
            WAIT_OK(r);
        } else {
            done = 0;
            while (done == 0) OK(lockstep_request_wait_for(r, 600.0, &done));
            OK(lockstep_request_source(r, &source));
            CHECK(source == 1);
            OK(lockstep_request_free(r));
            CHECK(f32(msg)[7] == 42.0f);
        }
        lockstep_tensor_release(msg);
    } else {
        OK(lockstep_barrier(world, NULL));
    }
}

/* ---------------------------------------------------------------- sends and receives */

/* Ranks 0 and 1 exchange `n` floats, each posting its receive before its send (order 0), or one of them sending
 * first (orders 1 and 2), and waiting for the receive first or the send first. */
static void exchange(lockstep_comm_t world, int rank, int64_t n, int order, int receive_first) {
    const int peer = 1 - rank;
    const int send_first = (order == 1 && rank == 1) || (order == 2 && rank == 0);
    lockstep_tensor_t out = vector_f32(n, 1000.0 * rank, 1.0);
    lockstep_tensor_t in = vector_f32(n, -1.0, 0.0);
    lockstep_request_t s = NULL, r = NULL;
    int32_t source = -9;
    const int tag = 100 + order;
    if (send_first) OK(lockstep_isend(world, out, peer, tag, NULL, &s));
    OK(lockstep_irecv(world, in, order == 0 ? LOCKSTEP_ANY_SOURCE : peer, tag, NULL, &r));
    if (!send_first) OK(lockstep_isend(world, out, peer, tag, NULL, &s));
    /* The handle can go at once: the request keeps the tensor alive. */
    lockstep_tensor_release(out);
    if (receive_first) {
        OK(lockstep_request_wait(r));
        WAIT_OK(s);
    } else {
        WAIT_OK(s);
        OK(lockstep_request_wait(r));
    }
    OK(lockstep_request_source(r, &source));
    CHECK(source == peer);
    OK(lockstep_request_free(r));
    CHECK(f32(in)[0] == (float)(1000 * peer) && f32(in)[n - 1] == (float)(1000 * peer + n - 1));
    lockstep_tensor_release(in);
}

static void test_point_to_point(lockstep_comm_t world, int rank, int size) {
    /* 16 floats go eagerly; 2^18 floats (1 MiB) by rendezvous. */
    const int64_t sizes[2] = {16, (int64_t)1 << 18};
    int s, order, receive_first;
    if (rank <= 1) {
        for (s = 0; s < 2; ++s) {
            for (order = 0; order < 3; ++order) {
                for (receive_first = 0; receive_first < 2; ++receive_first) {
                    exchange(world, rank, sizes[s], order, receive_first);
                }
            }
        }
    }
    /* Every other rank sends its rank to rank 0, which receives from LOCKSTEP_ANY_SOURCE. */
    {
        lockstep_tensor_t one = vector_f32(1, rank, 0.0);
        if (rank == 0) {
            lockstep_request_t r[64];
            lockstep_tensor_t got[64];
            int seen[64] = {0};
            int i;
            for (i = 1; i < size && i < 64; ++i) {
                got[i] = vector_f32(1, -1.0, 0.0);
                OK(lockstep_irecv(world, got[i], LOCKSTEP_ANY_SOURCE, 7, NULL, &r[i]));
            }
            for (i = 1; i < size && i < 64; ++i) {
                int32_t source = -1;
                OK(lockstep_request_wait(r[i]));
                OK(lockstep_request_source(r[i], &source));
                CHECK(source >= 1 && source < size && f32(got[i])[0] == (float)source);
                if (source >= 1 && source < 64) seen[source] += 1;
                OK(lockstep_request_free(r[i]));
                lockstep_tensor_release(got[i]);
            }
            for (i = 1; i < size && i < 64; ++i) CHECK(seen[i] == 1);
        } else {
            lockstep_request_t r = NULL;
            OK(lockstep_isend(world, one, 0, 7, NULL, &r));
            WAIT_OK(r);
        }
        lockstep_tensor_release(one);
    }
    /* A receive of the wrong size fails at its wait. */
    if (rank <= 1) {
        lockstep_tensor_t t = vector_f32(rank == 0 ? 4 : 3, 1.0, 0.0);
        lockstep_request_t r = NULL;
        if (rank == 0) {
            OK(lockstep_irecv(world, t, 1, 8, NULL, &r));
            finish(r, LOCKSTEP_ERROR_SHAPE);
        } else {
            OK(lockstep_isend(world, t, 0, 8, NULL, &r));
            WAIT_OK(r);
        }
        lockstep_tensor_release(t);
    }
    OK(lockstep_barrier(world, NULL));
}

/* ---------------------------------------------------------------- the caller's memory */

/* The deleter may run on lockstep's progress thread: the count is read and written under a lock. */
static pthread_mutex_t deleted_lock = PTHREAD_MUTEX_INITIALIZER;
static int deleted_count = 0;
static void count_delete(void* context) {
    (void)context;
    pthread_mutex_lock(&deleted_lock);
    ++deleted_count;
    pthread_mutex_unlock(&deleted_lock);
}
static int deleted(void) {
    int n;
    pthread_mutex_lock(&deleted_lock);
    n = deleted_count;
    pthread_mutex_unlock(&deleted_lock);
    return n;
}
static void reset_deleted(void) {
    pthread_mutex_lock(&deleted_lock);
    deleted_count = 0;
    pthread_mutex_unlock(&deleted_lock);
}

/* Whether the deleter has run `n` times, within 60 s: the last reference may be dropped by the progress thread just
 * after the wait returned. */
static int deleted_times(int n) {
    const struct timespec pause = {0, 1000000};
    int i;
    for (i = 0; i < 60000 && deleted() < n; ++i) nanosleep(&pause, NULL);
    return deleted() == n;
}

static void test_wrapped_memory(lockstep_comm_t world, int rank, int size) {
    float values[4] = {1, 2, 3, 4};
    int64_t four = 4;
    lockstep_tensor_t t = NULL;
    lockstep_request_t r = NULL;
    int i;
    reset_deleted();
    for (i = 0; i < 4; ++i) values[i] *= (float)(rank + 1);
    OK(lockstep_tensor_wrap(values, &four, 1, LOCKSTEP_FLOAT32, cpu, 0, count_delete, NULL, &t));
    OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
    OK(lockstep_tensor_release(t)); /* the request keeps the memory */
    CHECK(deleted() == 0);
    OK(lockstep_request_wait(r));
    CHECK(deleted() == 0);
    for (i = 0; i < 4; ++i) CHECK(values[i] == (float)((i + 1) * size * (size + 1) / 2));
    OK(lockstep_request_free(r));
    CHECK(deleted_times(1));

    /* A receive into wrapped memory whose handle was released before the message could arrive. */
    if (rank <= 1) {
        float box[3] = {0, 0, 0};
        int64_t three = 3;
        reset_deleted();
        OK(lockstep_tensor_wrap(box, &three, 1, LOCKSTEP_FLOAT32, cpu, 0, count_delete, NULL, &t));
        if (rank == 0) {
            box[0] = box[1] = box[2] = -1.0f;
            OK(lockstep_irecv(world, t, 1, 11, NULL, &r));
            OK(lockstep_tensor_release(t));
            CHECK(deleted() == 0);
            OK(lockstep_barrier(world, NULL));
            OK(lockstep_request_wait(r));
            CHECK(deleted() == 0 && box[0] == 7.0f && box[2] == 7.0f);
            OK(lockstep_request_free(r));
            CHECK(deleted_times(1));
        } else {
            box[0] = box[1] = box[2] = 7.0f;
            OK(lockstep_barrier(world, NULL));
            OK(lockstep_isend(world, t, 0, 11, NULL, &r));
            OK(lockstep_tensor_release(t));
            WAIT_OK(r);
            CHECK(deleted_times(1));
        }
    } else {
        OK(lockstep_barrier(world, NULL));
    }
}

/* ---------------------------------------------------------------- debug mode */

static void test_debug(lockstep_comm_t world, int rank, int size) {
    lockstep_comm_t dbg = NULL;
    lockstep_request_t r = NULL;
    lockstep_call_options_t call = LOCKSTEP_CALL_OPTIONS_INIT;
    char file[64], tag[16];
    lockstep_tensor_t t = vector_f32(rank == 0 ? 3 : 4, 1.0, 0.0);
    lockstep_tensor_t ok = vector_f32(4, 1.0, 0.0);
    char first[4096];
    OK(lockstep_comm_dup(world, &dbg));
    OK(lockstep_comm_set_debug(dbg, 1));
    sprintf(file, "nb_rank%d.c", rank);
    strcpy(tag, "grads");
    call.file = file;
    call.line = 200 + rank;
    call.tag = tag;
    /* A shape that differs on rank 0: issuing succeeds, the wait fails on every rank with the same text. */
    OK(lockstep_iallreduce(dbg, t, t, LOCKSTEP_SUM, &call, &r));
    memset(tag, 'x', sizeof tag - 1); /* the options' strings are copied at issue */
    tag[sizeof tag - 1] = '\0';
    CHECK_STATUS(lockstep_request_wait(r), LOCKSTEP_ERROR_SIGNATURE_MISMATCH);
    CHECK(strstr(lockstep_last_error(), "nb_rank0.c:200") != NULL);
    CHECK(strstr(lockstep_last_error(), "nb_rank1.c:201") != NULL);
    CHECK(strstr(lockstep_last_error(), "grads") != NULL);
    CHECK(strcmp(lockstep_comm_last_error(dbg), lockstep_last_error()) == 0);
    strncpy(first, lockstep_last_error(), sizeof first - 1);
    first[sizeof first - 1] = '\0';
    CHECK(same_everywhere(world, text_hash(first), size));
    /* The same status and text again. */
    CHECK_STATUS(lockstep_request_wait(r), LOCKSTEP_ERROR_SIGNATURE_MISMATCH);
    CHECK(strcmp(lockstep_last_error(), first) == 0);
    {
        int32_t done = 0;
        CHECK_STATUS(lockstep_request_test(r, &done), LOCKSTEP_ERROR_SIGNATURE_MISMATCH);
        CHECK(done == 1);
    }
    OK(lockstep_request_free(r));

    /* An output that only the last rank gets wrong: that rank's request is a rejection, every rank's wait fails. */
    {
        int64_t four = 4;
        lockstep_tensor_t out = NULL;
        OK(lockstep_tensor_empty(&four, 1, rank == size - 1 ? LOCKSTEP_FLOAT64 : LOCKSTEP_FLOAT32, cpu, &out));
        OK(lockstep_iallreduce(dbg, ok, out, LOCKSTEP_SUM, NULL, &r));
        CHECK(r != NULL);
        CHECK_STATUS(lockstep_request_wait(r), LOCKSTEP_ERROR_CALL_REJECTED);
        CHECK(strstr(lockstep_last_error(), "lockstep_iallreduce") != NULL);
        CHECK(same_everywhere(world, text_hash(lockstep_last_error()), size));
        OK(lockstep_request_free(r));
        lockstep_tensor_release(out);
    }
    /* A binding whose own argument conversion failed on rank 0 issues the rejection instead of the collective. */
    if (rank == 0) {
        OK(lockstep_ireject_call(dbg, LOCKSTEP_COLLECTIVE_ALLREDUCE, -1, LOCKSTEP_SUM, "int16 has no lockstep dtype",
                                 NULL, &r));
    } else {
        OK(lockstep_iallreduce(dbg, ok, ok, LOCKSTEP_SUM, NULL, &r));
    }
    CHECK_STATUS(lockstep_request_wait(r), LOCKSTEP_ERROR_CALL_REJECTED);
    CHECK(strstr(lockstep_last_error(), "int16 has no lockstep dtype") != NULL);
    CHECK(same_everywhere(world, text_hash(lockstep_last_error()), size));
    OK(lockstep_request_free(r));
    /* The communicator still works. */
    OK(lockstep_iallreduce(dbg, ok, ok, LOCKSTEP_SUM, NULL, &r));
    WAIT_OK(r);
    CHECK(f32(ok)[3] == (float)size);

    /* Rank 0: iallreduce, then a blocking receive of a rendezvous-size message; rank 1: the blocking send, then the
     * iallreduce. A signature exchange at issue would deadlock here. */
    {
        const int64_t n = (int64_t)1 << 19;
        lockstep_tensor_t big = vector_f32(n, rank == 1 ? 3.0 : 0.0, 0.0);
        if (rank == 0) {
            OK(lockstep_iallreduce(dbg, ok, ok, LOCKSTEP_SUM, NULL, &r));
            OK(lockstep_recv(world, big, 1, 12, NULL, NULL));
            WAIT_OK(r);
            CHECK(f32(big)[n - 1] == 3.0f);
        } else if (rank == 1) {
            OK(lockstep_send(world, big, 0, 12, NULL));
            OK(lockstep_iallreduce(dbg, ok, ok, LOCKSTEP_SUM, NULL, &r));
            WAIT_OK(r);
        } else {
            OK(lockstep_iallreduce(dbg, ok, ok, LOCKSTEP_SUM, NULL, &r));
            WAIT_OK(r);
        }
        CHECK(f32(ok)[0] == (float)(size * size));
        lockstep_tensor_release(big);
    }
    OK(lockstep_comm_free(dbg));
    lockstep_tensor_release(t);
    lockstep_tensor_release(ok);
}

/* ---------------------------------------------------------------- threads */

struct waiter {
    lockstep_request_t request;
    lockstep_status_t status;
};

static void* wait_in_thread(void* arg) {
    struct waiter* w = (struct waiter*)arg;
    w->status = lockstep_request_wait(w->request);
    return NULL;
}

/* Two threads wait for one request while this one tests it: each sees the one outcome. */
static void test_threads(lockstep_comm_t world, int rank, int size) {
    struct waiter w[2];
    pthread_t threads[2];
    lockstep_request_t r = NULL;
    lockstep_tensor_t t = vector_f32(64, rank, 0.0);
    int32_t done = 0;
    int i;
    if (rank <= 1) {
        /* A receive that completes only after the threads started waiting. */
        if (rank == 0) OK(lockstep_irecv(world, t, 1, 21, NULL, &r));
        for (i = 0; i < 2 && rank == 0; ++i) {
            w[i].request = r;
            w[i].status = -1;
            CHECK(pthread_create(&threads[i], NULL, wait_in_thread, &w[i]) == 0);
        }
        OK(lockstep_barrier(world, NULL));
        if (rank == 1) {
            OK(lockstep_isend(world, t, 0, 21, NULL, &r));
            WAIT_OK(r);
        } else {
            lockstep_status_t status = LOCKSTEP_OK;
            while (done == 0 && status == LOCKSTEP_OK) status = lockstep_request_test(r, &done);
            OK(status);
            for (i = 0; i < 2; ++i) {
                CHECK(pthread_join(threads[i], NULL) == 0);
                CHECK(w[i].status == LOCKSTEP_OK);
            }
            CHECK(f32(t)[63] == 1.0f);
            OK(lockstep_request_free(r));
        }
    } else {
        OK(lockstep_barrier(world, NULL));
    }
    /* A collective waited for by two threads. */
    OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
    for (i = 0; i < 2; ++i) {
        w[i].request = r;
        w[i].status = -1;
        CHECK(pthread_create(&threads[i], NULL, wait_in_thread, &w[i]) == 0);
    }
    for (i = 0; i < 2; ++i) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK(w[i].status == LOCKSTEP_OK);
    }
    OK(lockstep_request_free(r));
    CHECK(f32(t)[0] == (float)(1 + size * (size - 1) / 2)); /* ranks 0 and 1 hold 1, rank i > 1 holds i */
    lockstep_tensor_release(t);
}

/* ---------------------------------------------------------------- misuse */

static union {
    int64_t words[16];
    void* pointers[16];
} foreign;

static int names(const char* entry, const char* argument) {
    const char* text = lockstep_last_error();
    return strstr(text, entry) != NULL && strstr(text, argument) != NULL;
}

static void test_misuse(lockstep_comm_t world, int rank, int size) {
    lockstep_request_t r = NULL;
    lockstep_request_t zeroed = (lockstep_request_t)(void*)&foreign;
    lockstep_request_t odd = (lockstep_request_t)(void*)((char*)&foreign + 3);
    lockstep_tensor_t t = vector_f32(2, 1.0, 0.0);
    lockstep_tensor_t dead = vector_f32(2, 1.0, 0.0);
    lockstep_tensor_t result = t;
    int32_t done = 5, source = 5;
    memset(&foreign, 0, sizeof foreign);
    OK(lockstep_tensor_release(dead));

    /* NULL, foreign and misaligned handles. */
    CHECK_STATUS(lockstep_request_wait(NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_request_wait", "request"));
    CHECK_STATUS(lockstep_request_wait_for(NULL, 1.0, &done), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_test(NULL, &done), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_source(NULL, &source), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_result(NULL, &result), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(done == 5 && source == 5 && result == t);
    OK(lockstep_request_free(NULL));
    CHECK_STATUS(lockstep_request_wait(zeroed), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lockstep_last_error(), "not a live request") != NULL);
    CHECK_STATUS(lockstep_request_test(odd, &done), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_free(zeroed), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_free(odd), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    /* Handles of other kinds are not requests, nor a request a tensor. */
    CHECK_STATUS(lockstep_request_wait((lockstep_request_t)(void*)t), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_free((lockstep_request_t)(void*)world), LOCKSTEP_ERROR_INVALID_ARGUMENT);

    /* A live request: bad pointers and limits; then freed, used and freed again. */
    OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
    CHECK_STATUS(lockstep_request_test(r, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_wait_for(r, 1.0, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_wait_for(r, -1.0, &done), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_request_wait_for", "seconds"));
    {
        int64_t numel = -1;
        CHECK_STATUS(lockstep_tensor_numel((lockstep_tensor_t)(void*)r, &numel), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    }
    OK(lockstep_request_wait(r));
    CHECK_STATUS(lockstep_request_source(r, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    OK(lockstep_request_free(r));
    CHECK_STATUS(lockstep_request_wait(r), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_request_wait", "request") && strstr(lockstep_last_error(), "not a live request") != NULL);
    CHECK_STATUS(lockstep_request_test(r, &done), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_source(r, &source), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_result(r, &result), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_request_free(r), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_request_free", "request"));

    /* Calls that fail at once leave no request; a collective's bad argument comes at its wait (every rank passes the
     * same here, so with debug off each fails on its own). */
    r = zeroed;
    CHECK_STATUS(lockstep_iallreduce(NULL, t, t, LOCKSTEP_SUM, NULL, &r), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(r == NULL);
    CHECK_STATUS(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_iallreduce", "request"));
    CHECK_STATUS(lockstep_isend(world, t, 0, 0, NULL, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    r = zeroed;
    CHECK_STATUS(lockstep_isend(world, dead, 0, 0, NULL, &r), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(r == NULL && names("lockstep_isend", "tensor"));
    CHECK_STATUS(lockstep_irecv(world, t, size, 0, NULL, &r), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(r == NULL);
    OK(lockstep_iallreduce(world, dead, dead, LOCKSTEP_SUM, NULL, &r));
    CHECK_STATUS(lockstep_request_wait(r), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_iallreduce", "input"));
    CHECK(strstr(lockstep_comm_last_error(world), "lockstep_iallreduce") != NULL);
    OK(lockstep_request_free(r));
    OK(lockstep_iallreduce(world, t, t, 77, NULL, &r));
    finish(r, LOCKSTEP_ERROR_INVALID_ARGUMENT);
    OK(lockstep_igather_uneven(world, dead, NULL, &r));
    finish(r, LOCKSTEP_ERROR_INVALID_ARGUMENT);
    {
        lockstep_call_options_t bad = LOCKSTEP_CALL_OPTIONS_INIT;
        bad.flags = 1u << 5;
        OK(lockstep_ibarrier(world, &bad, &r));
        finish(r, LOCKSTEP_ERROR_INVALID_ARGUMENT);
    }
    /* A rejection with debug off: this rank's own error at its wait; an unknown collective fails at once. */
    OK(lockstep_ireject_call(world, LOCKSTEP_COLLECTIVE_BROADCAST, 0, LOCKSTEP_SUM, "bad", NULL, &r));
    finish(r, LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lockstep_last_error(), "bad") != NULL);
    r = zeroed;
    CHECK_STATUS(lockstep_ireject_call(world, 99, -1, LOCKSTEP_SUM, "bad", NULL, &r), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(r == NULL && names("lockstep_ireject_call", "unknown collective"));
    /* Still usable; and a request freed without a wait (collective, and a send the peer receives). */
    OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
    OK(lockstep_request_free(r));
    if (rank <= 1) {
        lockstep_tensor_t msg = vector_f32(4, rank == 1 ? 5.0 : 0.0, 0.0);
        if (rank == 1) {
            OK(lockstep_isend(world, msg, 0, 13, NULL, &r));
            OK(lockstep_request_free(r));
        } else {
            OK(lockstep_recv(world, msg, 1, 13, NULL, NULL));
            CHECK(f32(msg)[3] == 5.0f);
        }
        lockstep_tensor_release(msg);
    }
    OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL)); /* runs after the freed one */
    CHECK(f32(t)[0] == (float)(size * size * size));         /* three sums of 1 */
    lockstep_tensor_release(t);
}

int main(void) {
    lockstep_comm_t world = NULL;
    int32_t rank = 0, size = 0, total = 0;
    const int started = start_world("c_api_nonblocking_test", &world, &rank, &size);
    if (started != 0) return started;
    test_collectives(world, rank, size);
    test_waiting(world, rank, size);
    test_point_to_point(world, rank, size);
    test_wrapped_memory(world, rank, size);
    test_debug(world, rank, size);
    test_threads(world, rank, size);
    test_misuse(world, rank, size);
    /* Left to the end: a request freed without a wait is named at finalize; the job still ends cleanly. */
    {
        lockstep_tensor_t t = vector_f32(2, 1.0, 0.0);
        lockstep_request_t r = NULL;
        OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
        OK(lockstep_request_free(r));
        lockstep_tensor_release(t);
    }
    total = failures_over_all_ranks(world);
    OK(lockstep_comm_free(world));
    OK(lockstep_finalize());
    if (rank == 0) printf("c_api_nonblocking_test: %d checks on rank 0, %d failures over all ranks\n", checks, total);
    return total == 0 && failures == 0 ? 0 : 1;
}
