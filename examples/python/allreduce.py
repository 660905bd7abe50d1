"""Collectives on numpy arrays with the lockstep package: a blocking and a non-blocking allreduce, a ring of
non-blocking sends and receives, and the batch-size search. Every rank checks the results and prints PASS.

    mpirun -n 2 python3 examples/python/allreduce.py
"""
import numpy as np

import lockstep


def main() -> None:
    comm = lockstep.Communicator.world()
    rank, size = comm.rank, comm.size

    # In place in the array's memory: every rank ends with the sum over all ranks.
    x = np.full(4, rank + 1.0, dtype=np.float32)
    comm.allreduce(x)
    assert (x == size * (size + 1) / 2).all()

    # Non-blocking: the allreduce runs while this rank computes; wait() raises the operation's error, if any.
    grads = np.ones(1 << 16, dtype=np.float64)
    request: lockstep.Request = comm.allreduce(grads, op="max", async_op=True)
    other_work = float(np.sin(np.arange(1024)).sum())
    request.wait()
    assert grads[0] == 1.0

    # A ring: every rank posts its receive before its send.
    right, left = (rank + 1) % size, (rank - 1) % size
    inbox = np.empty(2, dtype=np.int64)
    receive = comm.irecv(inbox, source=left, tag=7)
    comm.isend(np.full(2, rank, dtype=np.int64), dest=right, tag=7).wait()
    assert receive.result() == left and (inbox == left).all()

    # The largest batch size every rank can run (all ranks agree on each try).
    @lockstep.find_executable_batch_size(starting_batch_size=64)
    def step(batch_size: int, scale: float) -> float:
        if batch_size > 16:
            raise MemoryError("out of memory")
        return batch_size * scale

    result = step(0.5)
    assert step.batch_size == 16 and result == 8.0

    lockstep.log(f"allreduce example done on {size} ranks ({other_work:.1f})")
    print(f"PASS allreduce_example rank {rank}/{size}")


if __name__ == "__main__":
    main()
