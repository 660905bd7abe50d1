/* The C interface on CUDA memory, from a C99 program that includes lockstep.h and CUDA's runtime API only: tensors
 * made by lockstep on the device, the caller's cudaMalloc memory wrapped without a copy (deleter called once),
 * DLPack export and import of CUDA and CUDA-host memory (legacy and versioned), the per-call stream option (the
 * collective waits for work the caller queued on its stream), every collective on device tensors, non-blocking
 * allreduce and reduce and an irecv/isend exchange on them, and the debug-mode refusals (shape mismatch, read-only
 * target) with the same text on every rank. Run under mpirun with 2 or more ranks; exits 77 (skipped) where no CUDA
 * device exists. */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#include "lockstep.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_check.h"

#define CUDA_OK(call)                                                                            \
    do {                                                                                         \
        cudaError_t rc_ = (call);                                                                \
        ++checks;                                                                                \
        if (rc_ != cudaSuccess) {                                                                \
            ++failures;                                                                          \
            fprintf(stderr, "rank %d: FAIL %s:%d: %s: %s\n", my_rank, __FILE__, __LINE__, #call, \
                    cudaGetErrorString(rc_));                                                    \
        }                                                                                        \
    } while (0)

static const lockstep_device_t gpu = {LOCKSTEP_DEVICE_CUDA, 0};

/* A device float32 tensor of n elements holding values (NULL: uninitialised). */
static lockstep_tensor_t device_f32(const float* values, int64_t n) {
    lockstep_tensor_t t = NULL;
    OK(lockstep_tensor_empty(&n, 1, LOCKSTEP_FLOAT32, gpu, &t));
    if (t != NULL && values != NULL) OK(lockstep_tensor_copy_from_host(t, values, (size_t)n * sizeof(float)));
    return t;
}

/* The tensor's elements read back to the host (the caller frees). */
static float* host_f32(lockstep_tensor_t t) {
    int64_t n = 0;
    float* host;
    OK(lockstep_tensor_numel(t, &n));
    host = (float*)calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    OK(lockstep_tensor_copy_to_host(t, host, (size_t)n * sizeof(float)));
    return host;
}

/* ------------------------------------------------------------------ tensors made by lockstep on the device */
static void test_device_tensors(lockstep_comm_t world, int rank, int size) {
    enum { N = 1000 };
    float values[N];
    float* back;
    lockstep_tensor_t t;
    lockstep_device_t d;
    void* data = NULL;
    struct cudaPointerAttributes attrs;
    int i, ok = 1;
    for (i = 0; i < N; ++i) values[i] = (float)(rank + 1) * (float)(i % 7);
    t = device_f32(values, N);
    OK(lockstep_tensor_device(t, &d));
    CHECK(d.type == LOCKSTEP_DEVICE_CUDA && d.index == 0);
    OK(lockstep_tensor_data(t, &data));
    memset(&attrs, 0, sizeof attrs);
    CUDA_OK(cudaPointerGetAttributes(&attrs, data));
    CHECK(attrs.type == cudaMemoryTypeDevice);
    OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL)); /* in place */
    back = host_f32(t);
    for (i = 0; i < N; ++i) ok = ok && back[i] == (float)(size * (size + 1) / 2) * (float)(i % 7);
    CHECK(ok);
    free(back);
    lockstep_tensor_release(t);
}

/* ------------------------------------------------------------------ the caller's cudaMalloc memory, wrapped */
static int wrap_deleted = 0;
static void wrap_deleter(void* context) {
    ++wrap_deleted;
    cudaFree(context);
}

static void test_wrap(lockstep_comm_t world, int rank, int size) {
    enum { N = 257 };
    float values[N];
    float back[N];
    float* dev = NULL;
    lockstep_tensor_t t = NULL;
    lockstep_tensor_t ro = NULL;
    void* data = NULL;
    int64_t n = N;
    int i, ok = 1;
    for (i = 0; i < N; ++i) values[i] = (float)(rank * 1000 + i);
    CUDA_OK(cudaMalloc((void**)&dev, N * sizeof(float)));
    CUDA_OK(cudaMemcpy(dev, values, N * sizeof(float), cudaMemcpyHostToDevice));
    OK(lockstep_tensor_wrap(dev, &n, 1, LOCKSTEP_FLOAT32, gpu, 0, wrap_deleter, dev, &t));
    OK(lockstep_tensor_data(t, &data));
    CHECK(data == (void*)dev); /* no copy */
    OK(lockstep_allreduce(world, t, t, LOCKSTEP_MAX, NULL));
    CUDA_OK(cudaMemcpy(back, dev, N * sizeof(float), cudaMemcpyDeviceToHost)); /* the caller's own memory changed */
    for (i = 0; i < N; ++i) ok = ok && back[i] == (float)((size - 1) * 1000 + i);
    CHECK(ok);
    OK(lockstep_tensor_retain(t));
    OK(lockstep_tensor_release(t));
    CHECK(wrap_deleted == 0);
    OK(lockstep_tensor_release(t));
    CHECK(wrap_deleted == 1);

    /* A read-only device tensor as rank 0's in-place target: in debug mode every rank's call is rejected before
     * anything moves (LOCKSTEP_ERROR_CALL_REJECTED, naming rank 0's ReadOnlyError), with the same text everywhere; the
     * caller's memory is untouched. */
    CUDA_OK(cudaMalloc((void**)&dev, N * sizeof(float)));
    CUDA_OK(cudaMemcpy(dev, values, N * sizeof(float), cudaMemcpyHostToDevice));
    OK(lockstep_tensor_wrap(dev, &n, 1, LOCKSTEP_FLOAT32, gpu, LOCKSTEP_TENSOR_READ_ONLY, wrap_deleter, dev, &ro));
    OK(lockstep_comm_set_debug(world, 1));
    if (rank == 0) {
        CHECK_STATUS(lockstep_allreduce(world, ro, ro, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_CALL_REJECTED);
    } else {
        lockstep_tensor_t w = device_f32(values, N);
        CHECK_STATUS(lockstep_allreduce(world, w, w, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_CALL_REJECTED);
        lockstep_tensor_release(w);
    }
    CHECK(same_everywhere(world, text_hash(lockstep_comm_last_error(world)), size));
    CHECK(strstr(lockstep_comm_last_error(world), "ReadOnlyError") != NULL);
    OK(lockstep_comm_set_debug(world, 0));
    CUDA_OK(cudaMemcpy(back, dev, N * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(memcmp(back, values, sizeof back) == 0);
    lockstep_tensor_release(ro);
    CHECK(wrap_deleted == 2);
}

/* ------------------------------------------------------------------ DLPack on the device */
static int legacy_deleted = 0;
static int versioned_deleted = 0;
static int64_t dl_shape[2] = {4, 8};

static void legacy_deleter(DLManagedTensor* self) {
    ++legacy_deleted;
    cudaFree(self->dl_tensor.data);
    free(self);
}
static void versioned_deleter(DLManagedTensorVersioned* self) {
    ++versioned_deleted;
    cudaFree(self->dl_tensor.data);
    free(self);
}
static int host_deleted = 0;
static void host_deleter(DLManagedTensor* self) {
    ++host_deleted;
    cudaFreeHost(self->dl_tensor.data);
    free(self);
}

static void fill_dl(DLTensor* t, void* data, DLDeviceType type) {
    memset(t, 0, sizeof *t);
    t->data = data;
    t->device.device_type = type;
    t->device.device_id = 0;
    t->ndim = 2;
    t->dtype.code = kDLFloat;
    t->dtype.bits = 32;
    t->dtype.lanes = 1;
    t->shape = dl_shape;
    t->strides = NULL;
}

static void test_dlpack(lockstep_comm_t world, int rank, int size) {
    enum { N = 32 };
    float values[N];
    float back[N];
    int i, ok;
    for (i = 0; i < N; ++i) values[i] = (float)(rank + i);

    /* Export: the consumer sees CUDA device 0 and lockstep's own pointer. */
    {
        lockstep_tensor_t t = device_f32(values, N);
        DLManagedTensor* legacy = NULL;
        DLManagedTensorVersioned* versioned = NULL;
        void* data = NULL;
        OK(lockstep_tensor_data(t, &data));
        OK(lockstep_tensor_to_dlpack(t, 0, &legacy));
        OK(lockstep_tensor_to_dlpack_versioned(t, 0, &versioned));
        lockstep_tensor_release(t); /* the exports keep the memory alive */
        if (legacy != NULL && versioned != NULL) {
            CHECK(legacy->dl_tensor.device.device_type == kDLCUDA && legacy->dl_tensor.device.device_id == 0);
            CHECK(versioned->dl_tensor.device.device_type == kDLCUDA);
            CHECK(legacy->dl_tensor.data == data && versioned->dl_tensor.data == data);
            CUDA_OK(cudaMemcpy(back, legacy->dl_tensor.data, sizeof back, cudaMemcpyDeviceToHost));
            CHECK(memcmp(back, values, sizeof back) == 0);
            CHECK(versioned->version.major == 1 && (versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0);
            legacy->deleter(legacy);
            versioned->deleter(versioned);
        }
    }

    /* Import of the caller's device memory, legacy and versioned: a CUDA tensor over the same memory, an in-place
     * collective writes the caller's buffer, the deleter runs once at the last release. */
    {
        DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof *m);
        lockstep_tensor_t t = NULL;
        lockstep_device_t d;
        void* dev = NULL;
        void* data = NULL;
        CUDA_OK(cudaMalloc(&dev, sizeof values));
        CUDA_OK(cudaMemcpy(dev, values, sizeof values, cudaMemcpyHostToDevice));
        fill_dl(&m->dl_tensor, dev, kDLCUDA);
        m->deleter = legacy_deleter;
        OK(lockstep_tensor_from_dlpack(m, 0, &t));
        OK(lockstep_tensor_device(t, &d));
        CHECK(d.type == LOCKSTEP_DEVICE_CUDA && d.index == 0);
        OK(lockstep_tensor_data(t, &data));
        CHECK(data == dev);
        OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL));
        CUDA_OK(cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost));
        ok = 1;
        for (i = 0; i < N; ++i) ok = ok && back[i] == (float)(size * (size - 1) / 2 + size * i);
        CHECK(ok);
        CHECK(legacy_deleted == 0);
        lockstep_tensor_release(t);
        CHECK(legacy_deleted == 1);
    }
    {
        DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)calloc(1, sizeof *m);
        lockstep_tensor_t t = NULL;
        int32_t read_only = 0;
        void* dev = NULL;
        CUDA_OK(cudaMalloc(&dev, sizeof values));
        CUDA_OK(cudaMemcpy(dev, values, sizeof values, cudaMemcpyHostToDevice));
        fill_dl(&m->dl_tensor, dev, kDLCUDA);
        m->version.major = 1;
        m->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
        m->deleter = versioned_deleter;
        OK(lockstep_tensor_from_dlpack_versioned(m, 0, &t));
        OK(lockstep_tensor_is_read_only(t, &read_only));
        CHECK(read_only == 1);
        {
            /* A read-only input into a separate output is fine. */
            lockstep_tensor_t out = NULL;
            float* r;
            OK(lockstep_tensor_empty(dl_shape, 2, LOCKSTEP_FLOAT32, gpu, &out));
            OK(lockstep_allreduce(world, t, out, LOCKSTEP_MIN, NULL));
            r = host_f32(out);
            ok = 1;
            for (i = 0; i < N; ++i) ok = ok && r[i] == (float)i;
            CHECK(ok);
            free(r);
            lockstep_tensor_release(out);
        }
        CHECK(versioned_deleted == 0);
        lockstep_tensor_release(t);
        CHECK(versioned_deleted == 1);
    }

    /* Page-locked host memory (kDLCUDAHost) imports as host memory. */
    {
        DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof *m);
        lockstep_tensor_t t = NULL;
        lockstep_device_t d;
        float* pinned = NULL;
        CUDA_OK(cudaMallocHost((void**)&pinned, sizeof values));
        memcpy(pinned, values, sizeof values);
        fill_dl(&m->dl_tensor, pinned, kDLCUDAHost);
        m->deleter = host_deleter;
        OK(lockstep_tensor_from_dlpack(m, 0, &t));
        OK(lockstep_tensor_device(t, &d));
        CHECK(d.type == LOCKSTEP_DEVICE_CPU);
        OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL));
        ok = 1;
        for (i = 0; i < N; ++i) ok = ok && pinned[i] == (float)(size * (size - 1) / 2 + size * i);
        CHECK(ok);
        lockstep_tensor_release(t);
        CHECK(host_deleted == 1);
    }
}

/* ------------------------------------------------------------------ the stream option */
static void CUDART_CB slow_host_step(void* arg) {
    struct timespec ts;
    (void)arg;
    ts.tv_sec = 0;
    ts.tv_nsec = 400 * 1000 * 1000;
    nanosleep(&ts, NULL);
}

static void test_stream(lockstep_comm_t world, int rank, int size) {
    enum { N = 1 << 16 };
    float* pinned = NULL;
    float* back;
    cudaStream_t stream = NULL;
    lockstep_tensor_t t = device_f32(NULL, N);
    lockstep_call_options_t options = LOCKSTEP_CALL_OPTIONS_INIT;
    void* data = NULL;
    int i, ok = 1;
    OK(lockstep_tensor_data(t, &data));
    CUDA_OK(cudaMemset(data, 0, N * sizeof(float)));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMallocHost((void**)&pinned, N * sizeof(float)));
    for (i = 0; i < N; ++i) pinned[i] = (float)(rank + 1);
    /* A non-blocking stream: nothing else on the device orders work after it. The copy that writes the input waits
     * behind a host step of 0.4 s, so a collective that did not wait for the stream would reduce zeros. */
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_OK(cudaLaunchHostFunc(stream, slow_host_step, NULL));
    CUDA_OK(cudaMemcpyAsync(data, pinned, N * sizeof(float), cudaMemcpyHostToDevice, stream));
    options.cuda_stream = stream;
    options.file = "train.c";
    options.line = 42;
    options.function = "step";
    options.tag = "grads";
    OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, &options));
    back = host_f32(t);
    for (i = 0; i < N; ++i) ok = ok && back[i] == (float)(size * (size + 1) / 2);
    CHECK(ok);
    free(back);
    CUDA_OK(cudaStreamDestroy(stream));
    CUDA_OK(cudaFreeHost(pinned));
    lockstep_tensor_release(t);
}

/* ------------------------------------------------------------------ every collective on device tensors */
static void test_collectives(lockstep_comm_t world, int rank, int size) {
    enum { K = 3 };
    float mine[K];
    float* r;
    int i, j, ok;
    int64_t n_all = (int64_t)size * K;
    for (i = 0; i < K; ++i) mine[i] = (float)(rank * 10 + i);
    { /* broadcast from the last rank, in place */
        lockstep_tensor_t t = device_f32(mine, K);
        OK(lockstep_broadcast(world, t, t, size - 1, NULL));
        r = host_f32(t);
        ok = 1;
        for (i = 0; i < K; ++i) ok = ok && r[i] == (float)((size - 1) * 10 + i);
        CHECK(ok);
        free(r);
        lockstep_tensor_release(t);
    }
    { /* reduce to rank 0 */
        lockstep_tensor_t in = device_f32(mine, K);
        lockstep_tensor_t out = rank == 0 ? device_f32(NULL, K) : NULL;
        OK(lockstep_reduce(world, in, out, LOCKSTEP_SUM, 0, NULL));
        if (rank == 0) {
            r = host_f32(out);
            ok = 1;
            for (i = 0; i < K; ++i) ok = ok && r[i] == (float)(10 * size * (size - 1) / 2 + size * i);
            CHECK(ok);
            free(r);
        }
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
    }
    { /* allgather and gather */
        lockstep_tensor_t in = device_f32(mine, K);
        lockstep_tensor_t out = device_f32(NULL, n_all);
        lockstep_tensor_t gathered = rank == 1 ? device_f32(NULL, n_all) : NULL;
        OK(lockstep_allgather(world, in, out, NULL));
        OK(lockstep_gather(world, in, gathered, 1, NULL));
        r = host_f32(out);
        ok = 1;
        for (j = 0; j < size; ++j)
            for (i = 0; i < K; ++i) ok = ok && r[j * K + i] == (float)(j * 10 + i);
        CHECK(ok);
        free(r);
        if (rank == 1) {
            r = host_f32(gathered);
            ok = 1;
            for (j = 0; j < size; ++j)
                for (i = 0; i < K; ++i) ok = ok && r[j * K + i] == (float)(j * 10 + i);
            CHECK(ok);
            free(r);
        }
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
        lockstep_tensor_release(gathered);
    }
    { /* scatter, reduce_scatter, alltoall */
        float* all = (float*)calloc((size_t)n_all, sizeof(float));
        lockstep_tensor_t in, out, ex, ex_out;
        for (i = 0; i < n_all; ++i) all[i] = (float)(rank * 100 + i);
        in = device_f32(all, n_all);
        out = device_f32(NULL, K);
        OK(lockstep_scatter(world, in, out, 0, NULL));
        r = host_f32(out);
        ok = 1;
        for (i = 0; i < K; ++i) ok = ok && r[i] == (float)(rank * K + i); /* root 0's rows */
        CHECK(ok);
        free(r);
        OK(lockstep_reduce_scatter(world, in, out, LOCKSTEP_SUM, NULL));
        r = host_f32(out);
        ok = 1;
        for (i = 0; i < K; ++i) ok = ok && r[i] == (float)(100 * size * (size - 1) / 2 + size * (rank * K + i));
        CHECK(ok);
        free(r);
        ex = device_f32(all, n_all);
        ex_out = device_f32(NULL, n_all);
        OK(lockstep_alltoall(world, ex, ex_out, NULL));
        r = host_f32(ex_out);
        ok = 1;
        for (j = 0; j < size; ++j) /* block j came from rank j: its block number `rank` */
            for (i = 0; i < K; ++i) ok = ok && r[j * K + i] == (float)(j * 100 + rank * K + i);
        CHECK(ok);
        free(r);
        free(all);
        lockstep_tensor_release(in);
        lockstep_tensor_release(out);
        lockstep_tensor_release(ex);
        lockstep_tensor_release(ex_out);
    }
    { /* gather_uneven: rank i gives i + 1 rows */
        int64_t rows = rank + 1;
        lockstep_tensor_t in = NULL;
        lockstep_tensor_t result = NULL;
        float* vals = (float*)calloc((size_t)rows, sizeof(float));
        int64_t total = 0;
        for (i = 0; i < rows; ++i) vals[i] = (float)rank;
        OK(lockstep_tensor_empty(&rows, 1, LOCKSTEP_FLOAT32, gpu, &in));
        OK(lockstep_tensor_copy_from_host(in, vals, (size_t)rows * sizeof(float)));
        OK(lockstep_gather_uneven(world, in, &result, NULL));
        if (result != NULL) {
            OK(lockstep_tensor_numel(result, &total));
            CHECK(total == (int64_t)size * (size + 1) / 2);
            r = host_f32(result);
            ok = 1;
            {
                int64_t at = 0;
                for (j = 0; j < size; ++j)
                    for (i = 0; i <= j; ++i) ok = ok && r[at++] == (float)j;
            }
            CHECK(ok);
            free(r);
        }
        free(vals);
        lockstep_tensor_release(in);
        lockstep_tensor_release(result);
    }
    { /* send and recv between ranks 0 and 1, device to device */
        lockstep_tensor_t t = device_f32(mine, K);
        int32_t from = -2;
        if (rank == 0) OK(lockstep_send(world, t, 1, 7, NULL));
        if (rank == 1) {
            OK(lockstep_recv(world, t, LOCKSTEP_ANY_SOURCE, 7, &from, NULL));
            CHECK(from == 0);
            r = host_f32(t);
            ok = 1;
            for (i = 0; i < K; ++i) ok = ok && r[i] == (float)i;
            CHECK(ok);
            free(r);
        }
        lockstep_tensor_release(t);
    }
    { /* other dtypes: int64 and float64 sums, a half-precision sum of small integers */
        int64_t n = 5;
        int64_t iv[5];
        double dv[5];
        lockstep_tensor_t it = NULL, dt = NULL, ht = NULL;
        for (i = 0; i < 5; ++i) {
            iv[i] = (int64_t)rank * 1000000000000LL + i;
            dv[i] = 0.5 * rank + i;
        }
        OK(lockstep_tensor_empty(&n, 1, LOCKSTEP_INT64, gpu, &it));
        OK(lockstep_tensor_empty(&n, 1, LOCKSTEP_FLOAT64, gpu, &dt));
        OK(lockstep_tensor_empty(&n, 1, LOCKSTEP_FLOAT16, gpu, &ht));
        OK(lockstep_tensor_copy_from_host(it, iv, sizeof iv));
        OK(lockstep_tensor_copy_from_host(dt, dv, sizeof dv));
        {
            uint16_t halves[5] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500}; /* 1, 2, 3, 4, 5 */
            OK(lockstep_tensor_copy_from_host(ht, halves, sizeof halves));
        }
        OK(lockstep_allreduce(world, it, it, LOCKSTEP_SUM, NULL));
        OK(lockstep_allreduce(world, dt, dt, LOCKSTEP_SUM, NULL));
        OK(lockstep_allreduce(world, ht, ht, LOCKSTEP_MAX, NULL));
        OK(lockstep_tensor_copy_to_host(it, iv, sizeof iv));
        OK(lockstep_tensor_copy_to_host(dt, dv, sizeof dv));
        ok = 1;
        for (i = 0; i < 5; ++i) {
            ok = ok && iv[i] == (int64_t)size * (size - 1) / 2 * 1000000000000LL + (int64_t)size * i;
            ok = ok && dv[i] == 0.25 * size * (size - 1) + (double)size * i;
        }
        CHECK(ok);
        {
            uint16_t halves[5];
            OK(lockstep_tensor_copy_to_host(ht, halves, sizeof halves));
            CHECK(halves[0] == 0x3c00 && halves[4] == 0x4500);
        }
        lockstep_tensor_release(it);
        lockstep_tensor_release(dt);
        lockstep_tensor_release(ht);
    }
}

/* ------------------------------------------------------------------ debug mode on device tensors */
/* ------------------------------------------------------------------ non-blocking operations on device tensors */
static void test_nonblocking(lockstep_comm_t world, int rank, int size) {
    enum { N = 256 };
    const float sum = (float)(size * (size + 1) / 2);
    float values[N];
    float* back;
    lockstep_tensor_t t, out;
    lockstep_request_t r = NULL, s = NULL;
    int i, ok = 1;
    for (i = 0; i < N; ++i) values[i] = (float)(rank + 1) * (float)i;
    t = device_f32(values, N);
    out = device_f32(NULL, N);
    /* In place, then to rank 0's output (a new result, copied into it by the wait). */
    OK(lockstep_iallreduce(world, t, t, LOCKSTEP_SUM, NULL, &r));
    OK(lockstep_request_wait(r));
    OK(lockstep_request_free(r));
    back = host_f32(t);
    for (i = 0; i < N; ++i) ok = ok && back[i] == sum * (float)i;
    CHECK(ok);
    free(back);
    OK(lockstep_ireduce(world, t, rank == 0 ? out : NULL, LOCKSTEP_SUM, 0, NULL, &r));
    OK(lockstep_request_wait(r));
    OK(lockstep_request_free(r));
    if (rank == 0) {
        back = host_f32(out);
        for (i = 0; i < N; ++i) ok = ok && back[i] == (float)size * sum * (float)i;
        CHECK(ok);
        free(back);
    }
    /* Ranks 0 and 1 exchange device tensors, each posting its receive first. */
    if (rank <= 1) {
        lockstep_tensor_t msg = device_f32(NULL, N);
        OK(lockstep_irecv(world, msg, 1 - rank, 3, NULL, &r));
        OK(lockstep_isend(world, t, 1 - rank, 3, NULL, &s));
        OK(lockstep_request_wait(s));
        OK(lockstep_request_wait(r));
        OK(lockstep_request_free(s));
        OK(lockstep_request_free(r));
        back = host_f32(msg);
        for (i = 0; i < N; ++i) ok = ok && back[i] == sum * (float)i;
        CHECK(ok);
        free(back);
        lockstep_tensor_release(msg);
    }
    lockstep_tensor_release(t);
    lockstep_tensor_release(out);
}

static void test_debug_mismatch(lockstep_comm_t world, int rank, int size) {
    lockstep_tensor_t t = device_f32(NULL, rank == 0 ? 3 : 4);
    lockstep_call_options_t options = LOCKSTEP_CALL_OPTIONS_INIT;
    const char* text;
    char where[64];
    options.file = rank == 0 ? "model.c" : "other.c";
    options.line = 10 + rank;
    OK(lockstep_comm_set_debug(world, 1));
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, &options), LOCKSTEP_ERROR_SIGNATURE_MISMATCH);
    text = lockstep_comm_last_error(world);
    CHECK(same_everywhere(world, text_hash(text), size));
    CHECK(strstr(text, "model.c:10") != NULL);
    snprintf(where, sizeof where, "other.c:%d", 11);
    CHECK(strstr(text, where) != NULL);
    CHECK(strstr(text, "[3]") != NULL && strstr(text, "[4]") != NULL);
    OK(lockstep_comm_set_debug(world, 0));
    lockstep_tensor_release(t);
    /* The communicator works afterwards. */
    {
        float one = 1.0f;
        lockstep_tensor_t u = device_f32(&one, 1);
        float* r;
        OK(lockstep_allreduce(world, u, u, LOCKSTEP_SUM, NULL));
        r = host_f32(u);
        CHECK(r[0] == (float)size);
        free(r);
        lockstep_tensor_release(u);
    }
}

int main(void) {
    lockstep_comm_t world = NULL;
    int32_t rank = 0, size = 0, total = 0;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("c_api_cuda_test: no CUDA device, skipped\n");
        return 77;
    }
    if (start_world("c_api_cuda_test", &world, &rank, &size) != 0) return 2;
    CUDA_OK(cudaSetDevice(0));
    test_device_tensors(world, rank, size);
    test_wrap(world, rank, size);
    test_dlpack(world, rank, size);
    test_stream(world, rank, size);
    test_collectives(world, rank, size);
    test_nonblocking(world, rank, size);
    test_debug_mismatch(world, rank, size);
    total = failures_over_all_ranks(world);
    OK(lockstep_comm_free(world));
    OK(lockstep_finalize());
    if (rank == 0) printf("c_api_cuda_test: %d checks on rank 0, %d failures over all ranks\n", checks, total);
    return total == 0 && failures == 0 ? 0 : 1;
}
