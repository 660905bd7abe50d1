/* Handles and option structs the C interface must refuse instead of crashing on: a communicator used or freed after
 * lockstep_comm_free, a tensor used, retained or released after its last release, pointers the library never handed
 * out (a zeroed block, a small integer), an options struct whose size field is garbage (the struct placed at the end
 * of a page whose successor is unmapped, so that reading past it would end the process), and outputs of another dtype
 * than their input (a dtype error, not a shape error). Run under mpirun with 2 or more ranks: every rank passes the
 * same bad argument, so every rank refuses at once, before any communication. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS */
#include "lockstep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "c_check.h"

/* Whether the last error names the entry point and the argument. */
static int names(const char* entry, const char* argument) {
    const char* text = lockstep_last_error();
    return strstr(text, entry) != NULL && strstr(text, argument) != NULL;
}

static lockstep_tensor_t tensor_of(lockstep_dtype_t dtype, int64_t n) {
    lockstep_tensor_t t = NULL;
    OK(lockstep_tensor_empty(&n, 1, dtype, cpu, &t));
    return t;
}

/* Aligned storage that is no handle of the library's. */
static union {
    int64_t words[64];
    void* pointers[64];
} foreign;

static void test_freed_communicator(lockstep_comm_t world) {
    lockstep_comm_t d = NULL;
    lockstep_tensor_t t = tensor_of(LOCKSTEP_FLOAT32, 2);
    int32_t rank = -7;
    OK(lockstep_comm_dup(world, &d));
    OK(lockstep_comm_free(d));
    CHECK_STATUS(lockstep_comm_rank(d, &rank), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_comm_rank", "comm") && strstr(lockstep_last_error(), "not a live communicator") != NULL);
    CHECK(rank == -7);
    CHECK_STATUS(lockstep_allreduce(d, t, t, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_allreduce", "comm"));
    CHECK_STATUS(lockstep_barrier(d, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_comm_set_debug(d, 1), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_comm_get_async_error(d, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(lockstep_comm_last_error(d), "") == 0);
    CHECK_STATUS(lockstep_comm_free(d), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_comm_free", "comm"));
    lockstep_tensor_release(t);
}

static void test_foreign_communicators(void) {
    lockstep_comm_t zeroed = (lockstep_comm_t)(void*)&foreign;
    lockstep_comm_t small = (lockstep_comm_t)(void*)(uintptr_t)0x10;
    lockstep_comm_t odd = (lockstep_comm_t)(void*)((char*)&foreign + 3);
    lockstep_comm_t out = NULL;
    int32_t size = 0;
    memset(&foreign, 0, sizeof foreign);
    CHECK_STATUS(lockstep_comm_size(zeroed, &size), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_comm_size", "comm"));
    CHECK_STATUS(lockstep_comm_size(small, &size), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_comm_size(odd, &size), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_comm_dup(small, &out), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(out == NULL);
    CHECK_STATUS(lockstep_comm_free(zeroed), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_comm_free(small), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(lockstep_comm_last_error(small), "") == 0);
    /* A tensor handle is not a communicator handle, nor the other way round. */
    {
        lockstep_tensor_t t = tensor_of(LOCKSTEP_FLOAT32, 1);
        CHECK_STATUS(lockstep_comm_size((lockstep_comm_t)(void*)t, &size), LOCKSTEP_ERROR_INVALID_ARGUMENT);
        lockstep_tensor_release(t);
    }
}

static void test_released_tensor(lockstep_comm_t world, int size) {
    lockstep_tensor_t t = tensor_of(LOCKSTEP_FLOAT32, 3);
    lockstep_tensor_t live = tensor_of(LOCKSTEP_FLOAT32, 3);
    int64_t numel = -1;
    OK(lockstep_tensor_retain(t));
    OK(lockstep_tensor_release(t)); /* one reference left */
    OK(lockstep_tensor_numel(t, &numel));
    CHECK(numel == 3);
    OK(lockstep_tensor_release(t)); /* the last one */
    numel = -1;
    CHECK_STATUS(lockstep_tensor_numel(t, &numel), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_tensor_numel", "tensor") && strstr(lockstep_last_error(), "not a live tensor") != NULL);
    CHECK(numel == -1);
    CHECK_STATUS(lockstep_tensor_release(t), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_tensor_release", "tensor"));
    CHECK_STATUS(lockstep_tensor_retain(t), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    {
        DLManagedTensorVersioned* exported = NULL;
        CHECK_STATUS(lockstep_tensor_to_dlpack_versioned(t, 0, &exported), LOCKSTEP_ERROR_INVALID_ARGUMENT);
        CHECK(exported == NULL);
    }
    /* In a collective, on every rank: refused before any communication, naming the argument. */
    CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_allreduce", "input"));
    CHECK(same_everywhere(world, text_hash(lockstep_last_error()), size));
    CHECK_STATUS(lockstep_allreduce(world, live, t, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_allreduce", "output"));
    CHECK(strstr(lockstep_comm_last_error(world), "output") != NULL);
    CHECK_STATUS(lockstep_allgather(world, live, t, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_gather_uneven(world, t, &live, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    /* An output only the root reads, given as a dead handle elsewhere, is refused too. */
    CHECK_STATUS(lockstep_reduce(world, live, t, LOCKSTEP_SUM, 0, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_reduce", "output"));
    /* The communicator still works. */
    OK(lockstep_allreduce(world, live, live, LOCKSTEP_SUM, NULL));
    lockstep_tensor_release(live);
}

static void test_foreign_tensors(lockstep_comm_t world) {
    lockstep_tensor_t zeroed = (lockstep_tensor_t)(void*)&foreign;
    lockstep_tensor_t small = (lockstep_tensor_t)(void*)(uintptr_t)0x10;
    int64_t numel = -1;
    void* data = NULL;
    memset(&foreign, 0, sizeof foreign);
    CHECK_STATUS(lockstep_tensor_numel(zeroed, &numel), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_tensor_numel", "tensor"));
    CHECK_STATUS(lockstep_tensor_data(small, &data), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_tensor_release(zeroed), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_tensor_release(small), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_tensor_retain(small), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(lockstep_send(world, small, 0, 0, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    CHECK(names("lockstep_send", "tensor"));
    CHECK_STATUS(lockstep_alltoall(world, zeroed, zeroed, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    /* A communicator handle is not a tensor handle. */
    CHECK_STATUS(lockstep_tensor_numel((lockstep_tensor_t)(void*)world, &numel), LOCKSTEP_ERROR_INVALID_ARGUMENT);
}

static lockstep_status_t fits(int64_t batch, void* user) {
    (void)batch;
    (void)user;
    return LOCKSTEP_OK;
}

/* An options struct at the very end of a readable page, the next page unmapped: a size field above the bound must be
 * refused without a read past the struct. */
static void test_garbage_struct_size(lockstep_comm_t world) {
    const long page = sysconf(_SC_PAGESIZE);
    char* pages = (char*)mmap(NULL, (size_t)(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    lockstep_tensor_t t = tensor_of(LOCKSTEP_FLOAT32, 1);
    CHECK(pages != MAP_FAILED);
    if (pages == MAP_FAILED) return;
    CHECK(mprotect(pages + page, (size_t)page, PROT_NONE) == 0);
    {
        lockstep_call_options_t* call = (lockstep_call_options_t*)(pages + page - sizeof(lockstep_call_options_t));
        lockstep_comm_options_t* comm = (lockstep_comm_options_t*)(pages + page - sizeof(lockstep_comm_options_t));
        lockstep_batch_size_options_t* batch =
            (lockstep_batch_size_options_t*)(pages + page - sizeof(lockstep_batch_size_options_t));
        lockstep_init_options_t* init = (lockstep_init_options_t*)(pages + page - sizeof(lockstep_init_options_t));
        const size_t garbage[3] = {4097, (size_t)1 << 40, (size_t)-1};
        int i;
        for (i = 0; i < 3; ++i) {
            int64_t batch_size = 0;
            lockstep_comm_t c = NULL;
            memset(pages + page - 64, 0, 64);
            call->struct_size = garbage[i];
            CHECK_STATUS(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, call), LOCKSTEP_ERROR_INVALID_ARGUMENT);
            CHECK(strstr(lockstep_last_error(), "struct_size") != NULL);
            CHECK_STATUS(lockstep_barrier(world, call), LOCKSTEP_ERROR_INVALID_ARGUMENT);
            memset(pages + page - 64, 0, 64);
            batch->struct_size = garbage[i];
            CHECK_STATUS(lockstep_find_executable_batch_size(world, 8, fits, NULL, batch, &batch_size),
                         LOCKSTEP_ERROR_INVALID_ARGUMENT);
            memset(pages + page - 64, 0, 64);
            comm->struct_size = garbage[i];
            CHECK_STATUS(lockstep_comm_from_fortran(0, comm, &c), LOCKSTEP_ERROR_INVALID_ARGUMENT);
            CHECK(c == NULL);
            memset(pages + page - 64, 0, 64);
            init->struct_size = garbage[i];
            CHECK_STATUS(lockstep_init(init, NULL), LOCKSTEP_ERROR_INVALID_ARGUMENT);
        }
        /* At the bound, a struct that really is that large (zeros past the fields this library knows) is read. */
        memset(pages, 0, (size_t)page);
        call = (lockstep_call_options_t*)(pages + page - 4096);
        call->struct_size = 4096;
        OK(lockstep_allreduce(world, t, t, LOCKSTEP_SUM, call));
    }
    munmap(pages, (size_t)(2 * page));
    lockstep_tensor_release(t);
}

/* An output of another dtype than its input is a dtype error; of the wrong shape, a shape error. */
static void test_output_dtype(lockstep_comm_t world, int size) {
    lockstep_tensor_t in = tensor_of(LOCKSTEP_FLOAT32, 2 * (int64_t)size);
    lockstep_tensor_t same_shape_f64 = tensor_of(LOCKSTEP_FLOAT64, 2 * (int64_t)size);
    lockstep_tensor_t gathered_f64 = tensor_of(LOCKSTEP_FLOAT64, 2 * (int64_t)size * size);
    lockstep_tensor_t half = tensor_of(LOCKSTEP_FLOAT16, 2 * (int64_t)size);
    lockstep_tensor_t part_f32 = tensor_of(LOCKSTEP_FLOAT32, 2);
    lockstep_tensor_t wrong_shape = tensor_of(LOCKSTEP_FLOAT32, 2 * (int64_t)size + 1);
    CHECK_STATUS(lockstep_allreduce(world, in, same_shape_f64, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_DTYPE);
    CHECK(names("lockstep_allreduce", "float64"));
    CHECK_STATUS(lockstep_alltoall(world, in, same_shape_f64, NULL), LOCKSTEP_ERROR_DTYPE);
    CHECK_STATUS(lockstep_reduce_scatter(world, half, part_f32, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_DTYPE);
    /* Root or not: a given output of another dtype is refused on every rank, before any rank communicates. */
    CHECK_STATUS(lockstep_broadcast(world, in, same_shape_f64, 0, NULL), LOCKSTEP_ERROR_DTYPE);
    CHECK_STATUS(lockstep_reduce(world, in, same_shape_f64, LOCKSTEP_SUM, 0, NULL), LOCKSTEP_ERROR_DTYPE);
    CHECK_STATUS(lockstep_gather(world, in, gathered_f64, 0, NULL), LOCKSTEP_ERROR_DTYPE);
    CHECK_STATUS(lockstep_allreduce(world, in, wrong_shape, LOCKSTEP_SUM, NULL), LOCKSTEP_ERROR_SHAPE);
    CHECK_STATUS(lockstep_alltoall(world, in, wrong_shape, NULL), LOCKSTEP_ERROR_SHAPE);
    lockstep_tensor_release(in);
    lockstep_tensor_release(same_shape_f64);
    lockstep_tensor_release(gathered_f64);
    lockstep_tensor_release(half);
    lockstep_tensor_release(part_f32);
    lockstep_tensor_release(wrong_shape);
}

int main(void) {
    lockstep_comm_t world = NULL;
    int32_t rank = 0, size = 0, total = 0;
    if (start_world("c_api_handles_test", &world, &rank, &size) != 0) return 2;
    test_freed_communicator(world);
    test_foreign_communicators();
    test_released_tensor(world, size);
    test_foreign_tensors(world);
    test_garbage_struct_size(world);
    test_output_dtype(world, size);

    total = failures_over_all_ranks(world);
    OK(lockstep_comm_free(world));
    CHECK_STATUS(lockstep_comm_rank(world, &rank), LOCKSTEP_ERROR_INVALID_ARGUMENT);
    OK(lockstep_finalize());
    if (rank == 0) printf("c_api_handles_test: %d checks on rank 0, %d failures over all ranks\n", checks, total);
    return total == 0 && failures == 0 ? 0 : 1;
}
