/* Overlaps communication with computation through lockstep's non-blocking C interface: the sum of one gradient vector
 * over every process runs while this process computes the next, and each process passes a token to its right-hand
 * neighbour with the receive posted before the send. Every status is checked; the process exits 1 when a call fails
 * or a result is wrong.
 *
 *   cc nonblocking.c $(pkg-config --cflags --libs lockstep-c) -o nonblocking && mpirun -n 2 ./nonblocking
 */
#include <lockstep.h>

#include <stdio.h>
#include <stdlib.h>

static void check(lockstep_status_t status, const char* call) {
    if (status == LOCKSTEP_OK) return;
    fprintf(stderr, "%s failed: %s: %s\n", call, lockstep_status_string(status), lockstep_last_error());
    exit(1);
}

enum { n = 1 << 16 };
static float first[n], second[n];

int main(void) {
    lockstep_comm_t world = NULL;
    lockstep_tensor_t grads = NULL, token_out = NULL, token_in = NULL;
    lockstep_request_t sum = NULL, send = NULL, recv = NULL;
    lockstep_device_t cpu = {LOCKSTEP_DEVICE_CPU, 0};
    int64_t shape[1] = {n}, one[1] = {1};
    int32_t rank = 0, size = 0, from = -1;
    float token = 0.0f, received = -1.0f;
    int i, ok = 1;

    check(lockstep_init(NULL, NULL), "lockstep_init");
    check(lockstep_comm_world(&world), "lockstep_comm_world");
    check(lockstep_comm_rank(world, &rank), "lockstep_comm_rank");
    check(lockstep_comm_size(world, &size), "lockstep_comm_size");

    /* The first gradient, summed in place while the second is computed. */
    for (i = 0; i < n; ++i) first[i] = (float)(rank + 1);
    check(lockstep_tensor_wrap(first, shape, 1, LOCKSTEP_FLOAT32, cpu, 0, NULL, NULL, &grads), "lockstep_tensor_wrap");
    check(lockstep_iallreduce(world, grads, grads, LOCKSTEP_SUM, NULL, &sum), "lockstep_iallreduce");
    for (i = 0; i < n; ++i) second[i] = (float)i * 0.5f; /* computation; `first` is not touched until the wait */

    /* A ring: receive from the left (posted first), send to the right. */
    token = (float)rank;
    check(lockstep_tensor_wrap(&token, one, 1, LOCKSTEP_FLOAT32, cpu, 0, NULL, NULL, &token_out),
          "lockstep_tensor_wrap");
    check(lockstep_tensor_wrap(&received, one, 1, LOCKSTEP_FLOAT32, cpu, 0, NULL, NULL, &token_in),
          "lockstep_tensor_wrap");
    check(lockstep_irecv(world, token_in, (rank + size - 1) % size, 0, NULL, &recv), "lockstep_irecv");
    check(lockstep_isend(world, token_out, (rank + 1) % size, 0, NULL, &send), "lockstep_isend");

    /* The status of each operation comes at its wait, in any order. */
    check(lockstep_request_wait(recv), "lockstep_request_wait (receive)");
    check(lockstep_request_source(recv, &from), "lockstep_request_source");
    check(lockstep_request_wait(send), "lockstep_request_wait (send)");
    check(lockstep_request_wait(sum), "lockstep_request_wait (allreduce)");

    ok = first[0] == (float)(size * (size + 1) / 2) && first[n - 1] == first[0] &&
         received == (float)((rank + size - 1) % size) && from == (rank + size - 1) % size;
    printf("process %d of %d: sum %g, token %g from process %d: %s\n", (int)rank, (int)size, first[0], received,
           (int)from, ok ? "ok" : "WRONG");

    check(lockstep_request_free(sum), "lockstep_request_free");
    check(lockstep_request_free(send), "lockstep_request_free");
    check(lockstep_request_free(recv), "lockstep_request_free");
    check(lockstep_tensor_release(grads), "lockstep_tensor_release");
    check(lockstep_tensor_release(token_out), "lockstep_tensor_release");
    check(lockstep_tensor_release(token_in), "lockstep_tensor_release");
    check(lockstep_comm_free(world), "lockstep_comm_free");
    check(lockstep_finalize(), "lockstep_finalize");
    return ok ? 0 : 1;
}
