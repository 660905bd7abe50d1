/* The C interface from a C99 program that includes lockstep.h only (no MPI header): the version handshake, option
 * structs of other sizes, every status code a program can provoke, the same error text on every rank, every
 * collective, and DLPack round trips with deleter counts. Run under mpirun with 2 or more ranks. */
#include "lockstep.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

static lockstep_tensor_t tensor_f32(const float* values, int64_t n) {
    lockstep_tensor_t t = NULL;
    int64_t shape[1];
    shape[0] = n;
    OK(lockstep_tensor_empty(shape, 1, LOCKSTEP_FLOAT32, cpu, &t));
    if (t != NULL && values != NULL) OK(lockstep_tensor_copy_from_host(t, values, (size_t)n * sizeof(float)));
    return t;
}

static float* data_f32(lockstep_tensor_t t) {
    void* p = NULL;
    OK(lockstep_tensor_data(t, &p));
    return (float*)p;
}

/* ---------------------------------------------------------------- a DLPack producer with a deleter count */
static int legacy_deleted = 0;
static int versioned_deleted = 0;
static float producer_data[6] = {1, 2, 3, 4, 5, 6};
static int64_t producer_shape[2] = {2, 3};
static int64_t producer_strides[2] = {3, 1};
static int64_t transposed_shape[2] = {3, 2};
static int64_t transposed_strides[2] = {1, 3};

static void legacy_deleter(DLManagedTensor* self) {
    (void)self;
    ++legacy_deleted;
}
static void versioned_deleter(DLManagedTensorVersioned* self) {
    (void)self;
    ++versioned_deleted;
}

static DLManagedTensor make_legacy(void) {
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    m.dl_tensor.data = producer_data;
    m.dl_tensor.device.device_type = kDLCPU;
    m.dl_tensor.ndim = 2;
    m.dl_tensor.dtype.code = kDLFloat;
    m.dl_tensor.dtype.bits = 32;
    m.dl_tensor.dtype.lanes = 1;
    m.dl_tensor.shape = producer_shape;
    m.dl_tensor.strides = producer_strides;
    m.deleter = legacy_deleter;
    return m;
}

static DLManagedTensorVersioned make_versioned(uint64_t flags) {
    DLManagedTensorVersioned m;
    DLManagedTensor legacy = make_legacy();
    memset(&m, 0, sizeof m);
    m.version.major = 1;
    m.version.minor = 0;
    m.flags = flags;
    m.dl_tensor = legacy.dl_tensor;
    m.deleter = versioned_deleter;
    return m;
}

static int64_t wrap_deleted = 0;
static void count_wrap(void* context) {
    (void)context;
    ++wrap_deleted;
}

/* ---------------------------------------------------------------- the parts */

static void test_versions(void) {
    int32_t major = -1, minor = -1, patch = -1;
    lockstep_init_options_t options = LOCKSTEP_INIT_OPTIONS_INIT;
    CHECK(lockstep_get_version(&major, &minor, &patch) == LOCKSTEP_C_VERSION);
    CHECK(major == LOCKSTEP_C_VERSION_MAJOR && minor == LOCKSTEP_C_VERSION_MINOR && patch == LOCKSTEP_C_VERSION_PATCH);
    CHECK(strstr(lockstep_get_build_info(), "C interface") != NULL);
    /* A header of another major version, or newer than the library, is refused before anything starts. */
    CHECK_STATUS(lockstep_init_versioned(LOCKSTEP_C_VERSION_ENCODE(LOCKSTEP_C_VERSION_MAJOR + 1, 0, 0), NULL, NULL),
                 LOCKSTEP_ERROR_VERSION);
    CHECK(strstr(lockstep_last_error(), "does not fit") != NULL);
    CHECK_STATUS(lockstep_init_versioned(LOCKSTEP_C_VERSION + 100, NULL, NULL), LOCKSTEP_ERROR_VERSION);
    CHECK(lockstep_is_initialized() == 0);
    /* Before init: usage errors. */
    {
        lockstep_comm_t c = NULL;
        CHECK_STATUS(lockstep_comm_world(&c), LOCKSTEP_ERROR_INVALID_USAGE);
    }
    /* Unknown flag bits and a too-small struct are refused. */
    options.flags = 1u << 7;
    CHECK_STATUS(lockstep_init(&options, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    options.flags = 0;
    options.struct_size = 4;
    CHECK_STATUS(lockstep_init(&options, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    options.struct_size = sizeof options;
    options.debug = 5;
    CHECK_STATUS(lockstep_init(&options, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    options.debug = -1;
    options.on_timeout = 2;
    CHECK_STATUS(lockstep_init(&options, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lockstep_last_error(), "on_timeout 2") != NULL);
}

static void test_status_strings(void) {
    int32_t code;
    for (code = 0; code <= LOCKSTEP_ERROR_CALLBACK; ++code) {
        CHECK(strcmp(lockstep_status_string(code), "LOCKSTEP_ERROR_UNKNOWN") != 0);
    }
    CHECK(strcmp(lockstep_status_string(LOCKSTEP_ERROR_TIMEOUT), "LOCKSTEP_ERROR_TIMEOUT") == 0);
    CHECK(strcmp(lockstep_status_string(LOCKSTEP_ERROR_CALLBACK + 1), "LOCKSTEP_ERROR_UNKNOWN") == 0);
    CHECK(strcmp(lockstep_status_string(-3), "LOCKSTEP_ERROR_UNKNOWN") == 0);
    /* Frozen numbers. */
    CHECK(LOCKSTEP_ERROR_SIGNATURE_MISMATCH == 1 && LOCKSTEP_ERROR_READ_ONLY == 9 && LOCKSTEP_ERROR_INTERNAL == 14 &&
          LOCKSTEP_ERROR_CONFIG == 17);
}

/* An options struct as an older header laid it out: the caller's place without function or tag. */
struct old_call_options {
    size_t struct_size;
    uint64_t flags;
    void* cuda_stream;
    const char* file;
    int32_t line;
};
/* And as a newer header might: one more field. */
struct new_call_options {
    lockstep_call_options_t current;
    uint64_t future_field;
};

static void test_option_sizes(lockstep_comm_t world, int size) {
    float one = 1.0f;
    lockstep_tensor_t t = tensor_f32(&one, 1);
    struct old_call_options old;
    struct new_call_options newer;
    lockstep_call_options_t tiny = LOCKSTEP_CALL_OPTIONS_INIT;
    lockstep_call_options_t flagged = LOCKSTEP_CALL_OPTIONS_INIT;
    memset(&old, 0, sizeof old);
    old.struct_size = sizeof old;
    old.file = "old_caller.c";
    old.line = 7;
    OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, (const lockstep_call_options_t*)&old));
    CHECK(data_f32(t)[0] == (float)size);

    memset(&newer, 0, sizeof newer);
    newer.current.struct_size = sizeof newer;
    OK(lockstep_allreduce(world, t, t, LOCKSTEP_MAX, &newer.current)); /* unknown fields zero: fine */
    newer.future_field = 42;
    /* Refused locally, before the collective: every rank refuses the same way, so none waits. */
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_MAX, &newer.current), LOCKSTEP_ERROR_VERSION);
    tiny.struct_size = 3;
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_MAX, &tiny), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    flagged.flags = 1;
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_MAX, &flagged), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lockstep_last_error(), "unknown flag bits") != NULL);
    lockstep_tensor_release(t);
}

/* A new communicator's options: the timeout and on_timeout given, the parent's where left unset (NULL options, -1, or
 * a caller's struct from before on_timeout), and an on_timeout out of range refused on every rank. */
static void test_comm_options(lockstep_comm_t world, int rank, int size) {
    lockstep_comm_options_t options = LOCKSTEP_COMM_OPTIONS_INIT;
    lockstep_comm_options_t older = LOCKSTEP_COMM_OPTIONS_INIT;
    lockstep_comm_t raising = NULL, inherited = NULL, split = NULL, group = NULL, refused = NULL;
    int32_t mode = -1, timed_out = -1;
    double seconds = 0.0;
    int32_t* all = (int32_t*)malloc(sizeof(int32_t) * (size_t)size);
    const float one = 1.0f;
    lockstep_tensor_t t = tensor_f32(&one, 1);
    int i;
    options.timeout = 30.0;
    options.on_timeout = LOCKSTEP_ON_TIMEOUT_RAISE;
    OK(lockstep_comm_dup_with_options(world, &options, &raising));
    OK(lockstep_comm_get_timeout(raising, &seconds));
    OK(lockstep_comm_get_on_timeout(raising, &mode, &timed_out));
    CHECK(seconds == 30.0 && mode == LOCKSTEP_ON_TIMEOUT_RAISE && timed_out == 0);
    /* Raise mode needs the progress thread, so this communicator has one; a NULL output is refused. */
    OK(lockstep_comm_get_progress_thread(raising, &mode));
    CHECK(mode == 1);
    CHECK_STATUS(lockstep_comm_get_progress_thread(raising, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    /* A collective in raise mode runs on the progress thread and returns as usual. */
    OK(lockstep_allreduce(raising, t, t, LOCKSTEP_SUM, NULL));
    CHECK(data_f32(t)[0] == (float)size);
    OK(lockstep_comm_dup_with_options(raising, NULL, &inherited));
    OK(lockstep_comm_get_timeout(inherited, &seconds));
    OK(lockstep_comm_get_on_timeout(inherited, &mode, NULL));
    CHECK(seconds == 30.0 && mode == LOCKSTEP_ON_TIMEOUT_RAISE);
    /* A struct from before on_timeout: the parent's mode. */
    older.struct_size = offsetof(lockstep_comm_options_t, on_timeout);
    older.timeout = 20.0;
    OK(lockstep_comm_split_with_options(raising, 0, rank, &older, &split));
    OK(lockstep_comm_get_timeout(split, &seconds));
    OK(lockstep_comm_get_on_timeout(split, &mode, NULL));
    CHECK(seconds == 20.0 && mode == LOCKSTEP_ON_TIMEOUT_RAISE);
    for (i = 0; i < size; ++i) all[i] = i;
    options.timeout = -1.0;
    options.on_timeout = LOCKSTEP_ON_TIMEOUT_END;
    OK(lockstep_comm_create_group_with_options(raising, all, (size_t)size, 3, &options, &group));
    OK(lockstep_comm_get_timeout(group, &seconds));
    OK(lockstep_comm_get_on_timeout(group, &mode, NULL));
    CHECK(seconds == 30.0 && mode == LOCKSTEP_ON_TIMEOUT_END);
    options.on_timeout = 5;
    CHECK_STATUS(lockstep_comm_dup_with_options(world, &options, &refused), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(lockstep_last_error(), "on_timeout 5") != NULL);
    OK(lockstep_comm_free(group));
    OK(lockstep_comm_free(split));
    OK(lockstep_comm_free(inherited));
    OK(lockstep_comm_free(raising));
    OK(lockstep_tensor_release(t));
    free(all);
}

static void test_local_statuses(lockstep_comm_t world) {
    lockstep_tensor_t t = NULL;
    int64_t shape[2] = {2, -1};
    int64_t huge = (int64_t)1 << 52;
    lockstep_device_t bad_device = {7, 0};
    CHECK_STATUS(lockstep_comm_rank(NULL, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_tensor_empty(shape, 1, 99, cpu, &t), LOCKSTEP_ERROR_DTYPE);
    CHECK_STATUS(lockstep_tensor_empty(shape, 2, LOCKSTEP_FLOAT32, cpu, &t), LOCKSTEP_ERROR_SHAPE);
    CHECK_STATUS(lockstep_tensor_empty(shape, 1, LOCKSTEP_FLOAT32, bad_device, &t), LOCKSTEP_ERROR_DEVICE);
    CHECK_STATUS(lockstep_tensor_empty(&huge, 1, LOCKSTEP_FLOAT64, cpu, &t), LOCKSTEP_ERROR_OUT_OF_MEMORY);
    CHECK(lockstep_last_error_is_out_of_memory() == 1);
    {
        /* More bytes than a size_t holds: a shape error, never a tensor smaller than its shape. */
        int64_t vast[2] = {(int64_t)1 << 31, ((int64_t)1 << 31) + 8};
        lockstep_tensor_t none = NULL;
        CHECK_STATUS(lockstep_tensor_empty(vast, 2, LOCKSTEP_FLOAT32, cpu, &none), LOCKSTEP_ERROR_SHAPE);
        CHECK(none == NULL);
    }
    {
        /* Fortran handles that name no communicator: refused, the job goes on. */
        lockstep_comm_t c = NULL;
        CHECK_STATUS(lockstep_comm_from_fortran(99999, NULL, &c), LOCKSTEP_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(lockstep_comm_from_fortran(-1, NULL, &c), LOCKSTEP_ERROR_INVALID_ARGUMENT);
        CHECK_STATUS(lockstep_comm_from_fortran((int64_t)1 << 32, NULL, &c), LOCKSTEP_ERROR_INVALID_ARGUMENT);
        CHECK(c == NULL);
    }
    OK(lockstep_tensor_empty(shape, 1, LOCKSTEP_FLOAT32, cpu, &t));
    {
        float buf[3];
        CHECK_STATUS(lockstep_tensor_copy_to_host(t, buf, sizeof buf), LOCKSTEP_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(lockstep_last_error(), "holds 8 bytes") != NULL);
    }
    CHECK(lockstep_dtype_size(LOCKSTEP_BFLOAT16) == 2 && lockstep_dtype_size(42) == 0);
    CHECK(strcmp(lockstep_dtype_name(LOCKSTEP_BOOL), "bool") == 0);
    lockstep_tensor_release(t);
    lockstep_clear_last_error();
    CHECK(lockstep_last_error_status() == LOCKSTEP_OK && lockstep_last_error()[0] == '\0');
    {
        const char* text = "unset";
        CHECK_STATUS(lockstep_comm_get_async_error(world, &text), LOCKSTEP_OK);
        CHECK(text[0] == '\0');
    }
}

static void test_read_only(lockstep_comm_t world, int rank, int size) {
    float values[2] = {1.0f, 2.0f};
    int64_t n = 2;
    lockstep_tensor_t t = NULL;
    int32_t ro = 0;
    int64_t same;
    /* Every rank read-only, debug off: each refuses locally with READ_ONLY, no payload moves. */
    OK(lockstep_tensor_wrap(values, &n, 1, LOCKSTEP_FLOAT32, cpu, LOCKSTEP_TENSOR_READ_ONLY, count_wrap, NULL, &t));
    OK(lockstep_tensor_is_read_only(t, &ro));
    CHECK(ro == 1);
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_READ_ONLY);
    CHECK(values[0] == 1.0f && values[1] == 2.0f);
    CHECK_STATUS(lockstep_tensor_wrap(values, &n, 1, LOCKSTEP_FLOAT32, cpu, 1u << 5, NULL, NULL, &t),
                 LOCKSTEP_ERROR_INVALID_ARGUMENT);
    lockstep_tensor_release(t);
    CHECK(wrap_deleted == 1);

    /* Debug on, only the last rank's target read-only: every rank gets CALL_REJECTED with the same text. */
    OK(lockstep_comm_set_debug(world, 1));
    OK(lockstep_tensor_wrap(values, &n, 1, LOCKSTEP_FLOAT32, cpu, rank == size - 1 ? LOCKSTEP_TENSOR_READ_ONLY : 0,
                            count_wrap, NULL, &t));
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_CALL_REJECTED);
    CHECK(strstr(lockstep_last_error(), "ReadOnlyError") != NULL);
    CHECK(values[0] == 1.0f && values[1] == 2.0f); /* nothing moved anywhere */
    same = same_everywhere(world, text_hash(lockstep_last_error()), size);
    CHECK(same);
    OK(lockstep_comm_set_debug(world, 0));
    lockstep_tensor_release(t);
    CHECK(wrap_deleted == 2);
}

static void test_debug_mismatch(lockstep_comm_t world, int rank, int size) {
    lockstep_comm_t dbg = NULL;
    lockstep_comm_options_t o = LOCKSTEP_COMM_OPTIONS_INIT;
    lockstep_call_options_t call = LOCKSTEP_CALL_OPTIONS_INIT;
    lockstep_tensor_t t = tensor_f32(NULL, rank == 0 ? 3 : 4);
    int32_t on = 0;
    char file[64];
    o.debug = 1;
    OK(lockstep_comm_dup(world, &dbg)); /* inherits debug off */
    OK(lockstep_comm_get_debug(dbg, &on));
    CHECK(on == 0);
    OK(lockstep_comm_free(dbg));
    /* From the world's Fortran handle, as an FFI would pass it, with debug on. */
    {
        int64_t f = 0;
        OK(lockstep_comm_fortran_handle(world, &f));
        OK(lockstep_comm_from_fortran(f, &o, &dbg));
    }
    OK(lockstep_comm_get_debug(dbg, &on));
    CHECK(on == 1);
    sprintf(file, "caller_rank%d.c", rank);
    call.file = file;
    call.line = 100 + rank;
    call.function = "train_step";
    call.tag = "grads";
    CHECK_STATUS(lockstep_allreduce(dbg, t, t, LOCKSTEP_SUM, &call), LOCKSTEP_ERROR_SIGNATURE_MISMATCH);
    /* The report names every rank's own place, and is the same text everywhere. */
    CHECK(strstr(lockstep_last_error(), "caller_rank0.c:100") != NULL);
    CHECK(strstr(lockstep_last_error(), "caller_rank1.c:101") != NULL);
    CHECK(strcmp(lockstep_comm_last_error(dbg), lockstep_last_error()) == 0);
    CHECK(same_everywhere(world, text_hash(lockstep_last_error()), size));
    /* The next call goes through: the communicator is still usable. */
    OK(lockstep_barrier(dbg, &call));

    /* Options that only rank 0 gets wrong: rank 0 joins the call as rejected, so nobody waits; every rank fails. */
    {
        lockstep_call_options_t bad = LOCKSTEP_CALL_OPTIONS_INIT;
        lockstep_tensor_t same = tensor_f32(NULL, 4);
        bad.flags = rank == 0 ? 1u << 4 : 0;
        CHECK_STATUS(lockstep_allreduce(dbg, same, same, LOCKSTEP_SUM, &bad), LOCKSTEP_ERROR_CALL_REJECTED);
        CHECK(strstr(lockstep_last_error(), "unknown flag bits") != NULL);
        CHECK(same_everywhere(world, text_hash(lockstep_last_error()), size));
        /* A binding whose own argument conversion failed on the last rank. */
        if (rank == size - 1) {
            CHECK_STATUS(lockstep_reject_call(dbg, LOCKSTEP_COLLECTIVE_ALLREDUCE, -1, LOCKSTEP_SUM,
                                              "int16 has no lockstep dtype", &call),
                         LOCKSTEP_ERROR_CALL_REJECTED);
        } else {
            CHECK_STATUS(lockstep_allreduce(dbg, same, same, LOCKSTEP_SUM, &call), LOCKSTEP_ERROR_CALL_REJECTED);
        }
        CHECK(strstr(lockstep_last_error(), "int16 has no lockstep dtype") != NULL);
        CHECK(same_everywhere(world, text_hash(lockstep_last_error()), size));
        OK(lockstep_barrier(dbg, NULL));
        lockstep_tensor_release(same);
    }
    /* Debug off: the rejection is this rank's own error at once (every rank here, so that none waits). */
    OK(lockstep_comm_set_debug(dbg, 0));
    CHECK_STATUS(lockstep_reject_call(dbg, LOCKSTEP_COLLECTIVE_BARRIER, -1, LOCKSTEP_SUM, "bad", NULL),
                 LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_reject_call(dbg, 99, -1, LOCKSTEP_SUM, "bad", NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    OK(lockstep_comm_free(dbg));
    lockstep_tensor_release(t);
}

static void test_double_free(lockstep_comm_t world) {
    lockstep_comm_t d = NULL;
    OK(lockstep_comm_dup(world, &d));
    OK(lockstep_comm_free(d));
    CHECK_STATUS(lockstep_comm_free(d), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    OK(lockstep_comm_free(NULL));
}

/* premul_sum's factor from the call options (1 from LOCKSTEP_CALL_OPTIONS_INIT and from an older, shorter struct);
 * band refused on float; alltoallv with uneven counts and empty blocks (rank r sends (r + j) % 2 rows of one float to
 * rank j, each worth 100 r + j). */
static void test_new_ops(lockstep_comm_t world, int rank, int size) {
    float one = 1.0f, rows[8], expected[8];
    int64_t send[8], recv[8], sent = 0, received = 0;
    int j, k;
    lockstep_tensor_t in = tensor_f32(&one, 1), out = tensor_f32(NULL, 1), x, y;
    lockstep_call_options_t call = LOCKSTEP_CALL_OPTIONS_INIT;
    struct old_call_options old;
    OK(lockstep_allreduce(world, in, out, LOCKSTEP_PREMUL_SUM, &call));
    CHECK(data_f32(out)[0] == (float)size);
    call.premul_factor = rank + 1.0;
    OK(lockstep_allreduce(world, in, out, LOCKSTEP_PREMUL_SUM, &call));
    CHECK(data_f32(out)[0] == (float)(size * (size + 1) / 2));
    CHECK(data_f32(in)[0] == 1.0f); /* out of place: the input is not multiplied */
    OK(lockstep_allreduce(world, in, in, LOCKSTEP_PREMUL_SUM, &call));
    CHECK(data_f32(in)[0] == (float)(size * (size + 1) / 2)); /* in place: the premultiplied sum */
    memset(&old, 0, sizeof old);
    old.struct_size = sizeof old;
    OK(lockstep_allreduce(world, out, out, LOCKSTEP_PREMUL_SUM, (const lockstep_call_options_t*)&old));
    CHECK(data_f32(out)[0] == (float)(size * size * (size + 1) / 2));
    CHECK_STATUS(lockstep_allreduce(world, in, out, LOCKSTEP_BAND, NULL), LOCKSTEP_ERROR_DTYPE);
    CHECK(strstr(lockstep_last_error(), "band") != NULL);

    for (j = 0; j < size; ++j) {
        send[j] = (rank + j) % 2;
        recv[j] = (j + rank) % 2;
        for (k = 0; k < send[j]; ++k) rows[sent++] = (float)(100 * rank + j);
        for (k = 0; k < recv[j]; ++k) expected[received++] = (float)(100 * j + rank);
    }
    x = tensor_f32(rows, sent);
    y = tensor_f32(NULL, received);
    OK(lockstep_alltoallv(world, x, send, y, recv, NULL));
    for (k = 0; k < received; ++k) CHECK(data_f32(y)[k] == expected[k]);
    CHECK_STATUS(lockstep_alltoallv(world, x, NULL, y, recv, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    lockstep_tensor_release(x);
    lockstep_tensor_release(y);
    lockstep_tensor_release(in);
    lockstep_tensor_release(out);
}

static void test_collectives(lockstep_comm_t world, int rank, int size) {
    float mine[2];
    int i;
    lockstep_tensor_t in, out, all, part;
    int64_t two = 2, all_n = 2 * size, one = 1;
    mine[0] = (float)rank;
    mine[1] = (float)(10 * rank);
    in = tensor_f32(mine, 2);
    out = tensor_f32(NULL, 2);
    all = tensor_f32(NULL, all_n);
    part = NULL;

    OK(lockstep_allreduce(world, in, out, LOCKSTEP_SUM, NULL));
    CHECK(data_f32(out)[0] == (float)(size * (size - 1) / 2));
    CHECK(data_f32(in)[0] == (float)rank); /* out of place: the input is unchanged */
    OK(lockstep_allreduce(world, in, out, LOCKSTEP_MEAN, NULL));
    CHECK(data_f32(out)[1] == 10.0f * (float)(size - 1) / 2.0f);
    CHECK_STATUS(lockstep_allreduce(world, in, out, 77, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);

    OK(lockstep_broadcast(world, in, out, size - 1, NULL));
    CHECK(data_f32(out)[1] == 10.0f * (float)(size - 1));
    OK(lockstep_reduce(world, in, rank == 0 ? out : NULL, LOCKSTEP_MAX, 0, NULL));
    if (rank == 0) CHECK(data_f32(out)[0] == (float)(size - 1));

    OK(lockstep_allgather(world, in, all, NULL));
    for (i = 0; i < size; ++i) CHECK(data_f32(all)[2 * i + 1] == 10.0f * (float)i);
    OK(lockstep_gather(world, in, rank == 1 ? all : NULL, 1, NULL));
    CHECK_STATUS(lockstep_allgather(world, in, out, NULL), LOCKSTEP_ERROR_SHAPE); /* every rank: wrong output */

    /* reduce_scatter of [2 size] ones: each rank gets [2] of size. */
    for (i = 0; i < 2 * size; ++i) data_f32(all)[i] = 1.0f;
    OK(lockstep_reduce_scatter(world, all, out, LOCKSTEP_SUM, NULL));
    CHECK(data_f32(out)[0] == (float)size && data_f32(out)[1] == (float)size);

    /* scatter from 0 of [0, 1, ..., 2 size - 1]; non-roots pass no input. */
    for (i = 0; i < 2 * size; ++i) data_f32(all)[i] = (float)i;
    OK(lockstep_scatter(world, rank == 0 ? all : NULL, out, 0, NULL));
    CHECK(data_f32(out)[0] == (float)(2 * rank) && data_f32(out)[1] == (float)(2 * rank + 1));

    /* alltoall: block i of rank r holds 100 r + i. */
    {
        lockstep_tensor_t got = tensor_f32(NULL, all_n);
        for (i = 0; i < size; ++i) data_f32(all)[2 * i] = data_f32(all)[2 * i + 1] = (float)(100 * rank + i);
        OK(lockstep_alltoall(world, all, got, NULL));
        for (i = 0; i < size; ++i) CHECK(data_f32(got)[2 * i] == (float)(100 * i + rank));
        lockstep_tensor_release(got);
    }

    /* gather_uneven: rank r contributes r + 1 rows. */
    {
        lockstep_tensor_t rows = tensor_f32(NULL, rank + 1);
        lockstep_tensor_t result = NULL;
        int64_t numel = 0;
        OK(lockstep_gather_uneven(world, rows, &result, NULL));
        OK(lockstep_tensor_numel(result, &numel));
        CHECK(numel == (int64_t)size * (size + 1) / 2);
        lockstep_tensor_release(rows);
        lockstep_tensor_release(result);
    }

    /* send and receive from any source: every other rank sends its rank to 0. */
    OK(lockstep_tensor_empty(&one, 1, LOCKSTEP_FLOAT32, cpu, &part));
    if (rank == 0) {
        int seen = 0;
        for (i = 1; i < size; ++i) {
            int32_t from = -5;
            OK(lockstep_recv(world, part, LOCKSTEP_ANY_SOURCE, 9, &from, NULL));
            CHECK(from >= 1 && from < size && data_f32(part)[0] == (float)from);
            seen |= 1 << from;
        }
        CHECK(seen == ((1 << size) - 2));
    } else {
        data_f32(part)[0] = (float)rank;
        OK(lockstep_send(world, part, 0, 9, NULL));
    }

    /* A group of the first and last rank, made by those two only. */
    if (rank == 0 || rank == size - 1) {
        int32_t members[2];
        lockstep_comm_t pair = NULL;
        int32_t pair_size = 0, pair_rank = -1;
        members[0] = 0;
        members[1] = size - 1;
        OK(lockstep_comm_create_group(world, members, 2, 5, &pair));
        OK(lockstep_comm_size(pair, &pair_size));
        OK(lockstep_comm_rank(pair, &pair_rank));
        CHECK(pair_size == 2 && pair_rank == (rank == 0 ? 0 : 1));
        data_f32(part)[0] = 1.0f;
        OK(lockstep_allreduce(pair, part, part, LOCKSTEP_SUM, NULL));
        CHECK(data_f32(part)[0] == 2.0f);
        OK(lockstep_comm_free(pair));
    } else {
        int32_t members[1] = {0};
        lockstep_comm_t none = NULL;
        /* A process outside the list is told so, without taking part. */
        CHECK_STATUS(lockstep_comm_create_group(world, members, 1, 5, &none), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    }

    /* split by parity; the trigger; the barrier. */
    {
        lockstep_comm_t half = NULL;
        int32_t half_size = 0, triggered = 0;
        OK(lockstep_comm_split(world, rank % 2, rank, &half));
        OK(lockstep_comm_size(half, &half_size));
        CHECK(half_size == (size + 1 - rank % 2) / 2);
        if (rank == size - 1) OK(lockstep_set_trigger(world));
        OK(lockstep_check_trigger(world, &triggered, NULL));
        CHECK(triggered == 1);
        OK(lockstep_check_trigger(world, &triggered, NULL));
        CHECK(triggered == 0);
        OK(lockstep_comm_free(half));
    }
    OK(lockstep_barrier(world, NULL));
    OK(lockstep_log("c_api_test", LOCKSTEP_LOG_INFO, LOCKSTEP_LOG_IN_RANK_ORDER, "collectives done"));
    CHECK_STATUS(lockstep_log(NULL, 42, LOCKSTEP_LOG_MAIN_PROCESS, "x"), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    (void)two;
    lockstep_tensor_release(in);
    lockstep_tensor_release(out);
    lockstep_tensor_release(all);
    lockstep_tensor_release(part);
}

static void test_point_to_point_mpi_error(lockstep_comm_t world, int rank) {
    /* A receive into a smaller tensor than was sent: MPI reports the truncation. */
    lockstep_tensor_t big = tensor_f32(NULL, 4);
    lockstep_tensor_t small = tensor_f32(NULL, 2);
    if (rank == 0) OK(lockstep_send(world, big, 1, 3, NULL));
    if (rank == 1) CHECK_STATUS(lockstep_recv(world, small, 0, 3, NULL, NULL), LOCKSTEP_ERROR_MPI);
    lockstep_tensor_release(big);
    lockstep_tensor_release(small);
    /* Arguments MPI would take as an error of its own: refused first, as invalid arguments. */
    big = tensor_f32(NULL, 4);
    CHECK_STATUS(lockstep_send(world, big, 1 - rank % 2, -5, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_recv(world, big, LOCKSTEP_ANY_SOURCE, -5, NULL, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_broadcast(world, big, big, -1, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_reduce(world, big, big, LOCKSTEP_SUM, -1, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    lockstep_tensor_release(big);
}

static int64_t batch_calls = 0;
static lockstep_status_t batch_fn(int64_t batch, void* user) {
    int rank = *(int*)user;
    ++batch_calls;
    if (rank == 0 && batch > 16) return LOCKSTEP_ERROR_OUT_OF_MEMORY; /* only rank 0 lacks memory */
    return LOCKSTEP_OK;
}
static lockstep_status_t failing_fn(int64_t batch, void* user) {
    int rank = *(int*)user;
    (void)batch;
    return rank == 1 ? LOCKSTEP_ERROR_INVALID_ARGUMENT : LOCKSTEP_OK;
}
static lockstep_status_t never_fits(int64_t batch, void* user) {
    (void)batch;
    (void)user;
    return LOCKSTEP_ERROR_OUT_OF_MEMORY;
}

static void test_agreements(lockstep_comm_t world, int rank) {
    int64_t found = 0;
    lockstep_batch_size_options_t o = LOCKSTEP_BATCH_SIZE_OPTIONS_INIT;
    int r = rank;
    OK(lockstep_find_executable_batch_size(world, 64, batch_fn, &r, NULL, &found));
    CHECK(found == 16); /* 64 -> 32 -> 16 on every rank */
    CHECK_STATUS(lockstep_find_executable_batch_size(world, 8, failing_fn, &r, NULL, &found),
                 rank == 1 ? LOCKSTEP_ERROR_CALLBACK : LOCKSTEP_ERROR_DISTRIBUTED);
    o.minimum = 4;
    CHECK_STATUS(lockstep_find_executable_batch_size(world, 8, never_fits, &r, &o, &found), LOCKSTEP_ERROR_RUNTIME);
    CHECK(strstr(lockstep_last_error(), "minimum") != NULL);
    o.flags = 1u << 9;
    CHECK_STATUS(lockstep_find_executable_batch_size(world, 8, batch_fn, &r, &o, &found),
                 LOCKSTEP_ERROR_INVALID_ARGUMENT);
    OK(lockstep_set_seed(1234, 0));
    OK(lockstep_free_memory());
}

static void test_dlpack(lockstep_comm_t world, int size) {
    lockstep_tensor_t t = NULL, back = NULL;
    DLManagedTensor* exported = NULL;
    DLManagedTensorVersioned* exported_v = NULL;
    void* data = NULL;
    void* back_data = NULL;
    DLManagedTensor legacy = make_legacy();
    DLManagedTensorVersioned versioned = make_versioned(0);
    int32_t ro = 0;

    /* Import without copying; the deleter runs exactly once, when the last reference goes. */
    OK(lockstep_tensor_from_dlpack(&legacy, 0, &t));
    OK(lockstep_tensor_data(t, &data));
    CHECK(data == (void*)producer_data);
    OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL)); /* in place, on the producer's memory */
    CHECK(producer_data[5] == 6.0f * (float)size);
    OK(lockstep_tensor_retain(t));
    OK(lockstep_tensor_release(t));
    CHECK(legacy_deleted == 0);

    /* Export and import back: the same memory, and the exported holder keeps the tensor alive. */
    OK(lockstep_tensor_to_dlpack(t, 0, &exported));
    CHECK(exported->dl_tensor.data == data && exported->dl_tensor.ndim == 2 && exported->dl_tensor.shape[1] == 3);
    CHECK(exported->dl_tensor.strides[0] == 3 && exported->dl_tensor.strides[1] == 1);
    CHECK(exported->dl_tensor.dtype.code == kDLFloat && exported->dl_tensor.dtype.bits == 32);
    CHECK(exported->dl_tensor.device.device_type == kDLCPU);
    OK(lockstep_tensor_release(t));
    CHECK(legacy_deleted == 0); /* still exported */
    OK(lockstep_tensor_from_dlpack(exported, 0, &back));
    OK(lockstep_tensor_data(back, &back_data));
    CHECK(back_data == data);
    OK(lockstep_tensor_release(back));
    CHECK(legacy_deleted == 1);

    /* Versioned, read-only: the tensor is read-only and in-place collectives refuse it. */
    versioned = make_versioned(DLPACK_FLAG_BITMASK_READ_ONLY);
    OK(lockstep_tensor_from_dlpack_versioned(&versioned, 0, &t));
    OK(lockstep_tensor_is_read_only(t, &ro));
    CHECK(ro == 1);
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_READ_ONLY);
    CHECK_STATUS(lockstep_tensor_to_dlpack(t, 0, &exported), LOCKSTEP_ERROR_READ_ONLY); /* legacy cannot say so */
    OK(lockstep_tensor_to_dlpack_versioned(t, 0, &exported_v));
    CHECK(exported_v->version.major == 1 && (exported_v->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    exported_v->deleter(exported_v);
    OK(lockstep_tensor_release(t));
    CHECK(versioned_deleted == 1);

    /* A major version lockstep does not read: refused, and the caller keeps ownership (no deleter call). */
    versioned = make_versioned(0);
    versioned.version.major = 2;
    CHECK_STATUS(lockstep_tensor_from_dlpack_versioned(&versioned, 0, &t), LOCKSTEP_ERROR_VERSION);
    CHECK(versioned_deleted == 1);

    /* Non-contiguous: refused unless a copy is allowed; the copy has the right values, the deleter runs at once. */
    legacy = make_legacy();
    legacy.dl_tensor.shape = transposed_shape;
    legacy.dl_tensor.strides = transposed_strides;
    CHECK_STATUS(lockstep_tensor_from_dlpack(&legacy, 0, &t), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(legacy_deleted == 1);
    OK(lockstep_tensor_from_dlpack(&legacy, LOCKSTEP_DLPACK_ALLOW_COPY, &t));
    CHECK(legacy_deleted == 2);
    OK(lockstep_tensor_data(t, &data));
    CHECK(data != (void*)producer_data);
    /* transposed [[1 4] [2 5] [3 6]] (times size after the allreduce above) */
    CHECK(((float*)data)[1] == producer_data[3] && ((float*)data)[2] == producer_data[1]);
    OK(lockstep_tensor_release(t));
    CHECK(legacy_deleted == 2);

    /* Unsupported element types and devices. */
    legacy = make_legacy();
    legacy.dl_tensor.dtype.lanes = 4;
    CHECK_STATUS(lockstep_tensor_from_dlpack(&legacy, 0, &t), LOCKSTEP_ERROR_UNSUPPORTED);
    legacy = make_legacy();
    legacy.dl_tensor.device.device_type = kDLVulkan;
    CHECK_STATUS(lockstep_tensor_from_dlpack(&legacy, 0, &t), LOCKSTEP_ERROR_UNSUPPORTED);
    CHECK(legacy_deleted == 2);

    /* bool: DLPack 1.0's code 6; CUDA host memory imports as host memory. */
    {
        uint8_t flags[3] = {1, 0, 1};
        int64_t n = 3;
        lockstep_dtype_t dtype = -1;
        lockstep_device_t dev;
        legacy = make_legacy();
        legacy.dl_tensor.data = flags;
        legacy.dl_tensor.ndim = 1;
        legacy.dl_tensor.shape = &n;
        legacy.dl_tensor.strides = NULL;
        legacy.dl_tensor.dtype.code = LOCKSTEP_DLPACK_BOOL;
        legacy.dl_tensor.dtype.bits = 8;
        legacy.dl_tensor.device.device_type = kDLCUDAHost;
        OK(lockstep_tensor_from_dlpack(&legacy, 0, &t));
        OK(lockstep_tensor_dtype(t, &dtype));
        OK(lockstep_tensor_device(t, &dev));
        CHECK(dtype == LOCKSTEP_BOOL && dev.type == LOCKSTEP_DEVICE_CPU);
        OK(lockstep_allreduce(world, t, t, LOCKSTEP_MIN, NULL));
        CHECK(flags[0] == 1 && flags[1] == 0);
        OK(lockstep_tensor_to_dlpack(t, 0, &exported));
        CHECK(exported->dl_tensor.dtype.code == LOCKSTEP_DLPACK_BOOL && exported->dl_tensor.dtype.bits == 8);
        exported->deleter(exported);
        OK(lockstep_tensor_release(t));
        CHECK(legacy_deleted == 3);
    }
}

int main(void) {
    lockstep_comm_t world = NULL;
    lockstep_runtime_t runtime = NULL;
    int32_t rank = 0, size = 0, total = 0;
    test_versions();
    test_status_strings();
    CHECK_STATUS(lockstep_runtime_identity(NULL, &rank, &size, NULL, NULL), LOCKSTEP_ERROR_INVALID_USAGE);
    OK(lockstep_init(NULL, &runtime));
    OK(lockstep_init(NULL, &runtime)); /* idempotent */
    CHECK(lockstep_is_initialized() == 1 && runtime != NULL);
    OK(lockstep_comm_world(&world));
    OK(lockstep_comm_rank(world, &rank));
    OK(lockstep_comm_size(world, &size));
    my_rank = rank;
    {
        int32_t r2 = -1, s2 = -1;
        OK(lockstep_runtime_identity(runtime, &r2, &s2, NULL, NULL));
        CHECK(r2 == rank && s2 == size);
    }
    if (size < 2) {
        fprintf(stderr, "c_api_test needs at least 2 ranks\n");
        return 2;
    }
    test_option_sizes(world, size);
    test_local_statuses(world);
    test_comm_options(world, rank, size);
    test_read_only(world, rank, size);
    test_debug_mismatch(world, rank, size);
    test_double_free(world);
    test_collectives(world, rank, size);
    test_new_ops(world, rank, size);
    test_point_to_point_mpi_error(world, rank);
    test_agreements(world, rank);
    test_dlpack(world, size);

    total = failures_over_all_ranks(world);
    OK(lockstep_comm_free(world));
    OK(lockstep_finalize());
    OK(lockstep_finalize()); /* idempotent */
    {
        lockstep_comm_t late = NULL;
        CHECK_STATUS(lockstep_comm_world(&late), LOCKSTEP_ERROR_INVALID_USAGE);
        /* lockstep started MPI and finalised it: MPI cannot start again. */
        CHECK_STATUS(lockstep_init(NULL, NULL), LOCKSTEP_ERROR_INVALID_USAGE);
        CHECK(strstr(lockstep_last_error(), "finalised") != NULL);
    }
    if (rank == 0) printf("c_api_test: %d checks on rank 0, %d failures over all ranks\n", checks, total);
    return total == 0 && failures == 0 ? 0 : 1;
}
