"""A communicator's watchdog timeout from Python: Communicator.dup(timeout=..., on_timeout=...), with the last rank
skipping a collective on it.

    timeout_test.py raise   on_timeout "raise" (lockstep.init's, inherited by dup()): the ranks that waited get a
                            lockstep.TimeoutError (also a lockstep.Error and the builtin TimeoutError) whose text
                            names the missing rank and what it did last; a later call on the communicator raises at
                            once; the world works on once the last rank is back, and the job exits 0 (each rank
                            prints PASS).
    timeout_test.py end     on_timeout "end" with timeout=1 set on dup(): the watchdog prints the report and ends the
                            job with exit code 124 (run by timeout_job.py, which checks both).

Run by tests/collectives/timeout_job.py under mpirun.
"""
import builtins
import sys
import time

import numpy as np

import lockstep


def main() -> int:
    mode = sys.argv[1]
    if mode == "raise":
        lockstep.init(on_timeout="raise")  # every communicator's default, the world's included
    world = lockstep.Communicator.world()
    rank, size = world.rank, world.size
    last = size - 1
    if mode == "end":
        comm = world.dup(timeout=1)
        assert comm.timeout == 1.0 and comm.on_timeout == "end", (comm.timeout, comm.on_timeout)
        comm.allreduce(np.ones(4, dtype=np.float32))
        if rank != last:
            comm.allreduce(np.ones(4, dtype=np.float32))  # the watchdog ends the job here
        time.sleep(30)
        print("FAIL: the job went on past the timeout", flush=True)
        return 1

    assert world.on_timeout == "raise"  # lockstep.init(on_timeout="raise") below
    comm = world.dup(timeout=1.0)  # inherits raise
    assert comm.timeout == 1.0 and comm.on_timeout == "raise" and not comm.timed_out
    group = world.create_group(list(range(size)), timeout=2, on_timeout="RAISE")
    assert group.timeout == 2.0 and group.on_timeout == "raise"
    split = world.split(0, timeout=3, on_timeout="end")
    assert split.timeout == 3.0 and split.on_timeout == "end"
    for bad in ("stop", 1):
        try:
            world.dup(on_timeout=bad)
        except (ValueError, TypeError) as error:
            assert "on_timeout" in str(error), error
        else:
            raise AssertionError(f"on_timeout={bad!r} is refused")
    x = np.ones(4, dtype=np.float32)
    comm.allreduce(x)
    assert (x == size).all(), x
    if rank == last:
        time.sleep(5)  # computes while the others wait, well past the timeout and its report
        assert not comm.timed_out
    else:
        try:
            comm.allreduce(np.ones(4, dtype=np.float32))
        except lockstep.TimeoutError as error:
            text = str(error)
            assert isinstance(error, lockstep.Error) and isinstance(error, builtins.TimeoutError)
        else:
            raise AssertionError("the stuck allreduce raises lockstep.TimeoutError")
        assert "timed out after" in text, text
        assert f"Never arrived: Process {last}" in text, text
        assert "last completed `lockstep::allreduce` #1" in text, text
        assert "timeout_test.py:" in text, text
        assert comm.timed_out
        for later in (lambda: comm.barrier(), lambda: comm.allreduce(x, async_op=True), lambda: comm.dup()):
            try:
                later()
            except lockstep.TimeoutError as error:
                assert "timed out earlier" in str(error) and "`lockstep::allreduce` #2" in str(error), error
            else:
                raise AssertionError("a later call on the communicator raises at once")
    comm.free()  # must not hang, broken or not
    y = np.ones(4, dtype=np.float32)
    world.allreduce(y)
    assert (y == size).all(), y
    world.barrier()
    print(f"PASS timeout_{mode} rank {rank}/{size}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
