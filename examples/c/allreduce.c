/* Sums a gradient vector over every process with lockstep's C interface, in place on the caller's memory, and prints
 * the result on each process. Every call's status is checked: a failed call prints lockstep's own text (what was
 * wrong, where, what to do) and ends the process with status 1.
 *
 *   cc allreduce.c $(pkg-config --cflags --libs lockstep-c) -o allreduce && mpirun -n 2 ./allreduce
 */
#include <lockstep.h>

#include <stdio.h>
#include <stdlib.h>

/* Ends the process when `status` is not LOCKSTEP_OK, naming the call that failed. */
static void check(lockstep_status_t status, const char* call) {
    if (status == LOCKSTEP_OK) return;
    fprintf(stderr, "%s failed: %s: %s\n", call, lockstep_status_string(status), lockstep_last_error());
    exit(1);
}

int main(void) {
    lockstep_comm_t world = NULL;
    lockstep_tensor_t grads = NULL;
    int32_t rank = 0, size = 0;
    float values[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    lockstep_device_t cpu = {LOCKSTEP_DEVICE_CPU, 0};
    lockstep_call_options_t where = LOCKSTEP_CALL_OPTIONS_INIT;
    int i;

    check(lockstep_init(NULL, NULL), "lockstep_init");
    check(lockstep_comm_world(&world), "lockstep_comm_world");
    check(lockstep_comm_rank(world, &rank), "lockstep_comm_rank");
    check(lockstep_comm_size(world, &size), "lockstep_comm_size");
    for (i = 0; i < 4; ++i) values[i] *= (float)(rank + 1);
    /* The caller's memory, not copied; NULL deleter: it outlives the tensor. */
    check(lockstep_tensor_wrap(values, shape, 1, LOCKSTEP_FLOAT32, cpu, 0, NULL, NULL, &grads), "lockstep_tensor_wrap");
    /* The caller's place, named in every report about this call (debug-mode mismatch, hang, error). */
    where.file = __FILE__;
    where.line = __LINE__;
    check(lockstep_allreduce(world, grads, grads, LOCKSTEP_SUM, &where), "lockstep_allreduce");
    printf("process %d of %d: [%g, %g, %g, %g]\n", (int)rank, (int)size, values[0], values[1], values[2], values[3]);
    check(lockstep_tensor_release(grads), "lockstep_tensor_release");
    check(lockstep_comm_free(world), "lockstep_comm_free");
    check(lockstep_finalize(), "lockstep_finalize");
    return 0;
}
