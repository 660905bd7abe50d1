"""Communicator.begin_foreign, end_foreign and set_carrier (collectives another library carries) under mpirun (2 ranks):
collectives, dtypes and reduce ops by name, C code, numpy or torch dtype; calls that agree go through and are numbered
alike on every rank; in debug mode a call that differs on the last rank (shape, dtype, root, reduce op, collective)
raises the same SignatureMismatchError on every rank, naming this file's line; with debug mode off nothing is compared;
calls end in any order; arguments of the wrong type or value raise at once, alike on every rank.

Run by run_job.py: mpirun -n 2 python3 foreign_test.py
"""
import numpy as np

import lockstep
from harness import caller_line, expect_raises, raises, run, run_checks


def check_agreeing(comm, r, n):
    first = comm.begin_foreign("allreduce", "float32", (4,), op="sum")
    comm.end_foreign(first)
    second = comm.begin_foreign(3, np.float32, [4], op=0, tag="by code")
    third = comm.begin_foreign("broadcast", np.dtype(np.int64), (2, 3), root=n - 1, device="cpu")
    comm.end_foreign(third)  # out of order
    comm.end_foreign(second)
    fourth = comm.begin_foreign("barrier")
    comm.end_foreign(fourth)
    fifth = comm.begin_foreign("alltoallv", "float64", (r + 1, 2), varying_dim=0)
    comm.end_foreign(fifth)
    assert [second, third, fourth, fifth] == [first + 1, first + 2, first + 3, first + 4], (first, fifth)
    numbers = np.asarray(comm.allgather(np.array([fifth], dtype=np.int64)))
    assert (numbers == fifth).all(), numbers
    try:
        import torch
    except ImportError:
        return
    comm.end_foreign(comm.begin_foreign("allgather", torch.bfloat16, torch.Size([2, 2])))


def check_mismatches(comm, r, n):
    last = r == n - 1
    with raises(lockstep.SignatureMismatchError) as caught:
        line = caller_line() + 1
        comm.begin_foreign("allreduce", "float32", (5,) if last else (4,), op="sum")
    text = str(caught.error)
    assert "shape" in text and f"foreign_test.py:{line}" in text, text
    texts = np.asarray(comm.allgather(np.frombuffer(text.encode().ljust(4096, b"\0")[:4096], dtype=np.uint8).copy()))
    assert all(bytes(texts[k * 4096 : (k + 1) * 4096]) == bytes(texts[:4096]) for k in range(n)), "texts differ"
    cases = [
        ("dtype", lambda: comm.begin_foreign("allreduce", "float64" if last else "float32", (4,))),
        ("root", lambda: comm.begin_foreign("reduce", "float32", (4,), root=1 if last else 0, op="max")),
        ("reduce op", lambda: comm.begin_foreign("allreduce", "float32", (4,), op="max" if last else "sum")),
        ("mismatched operations", lambda: comm.begin_foreign("allgather" if last else "allreduce", "float32", (4,))),
        ("shape", lambda: comm.begin_foreign("alltoallv", "float32", (1, 3 if last else 2), varying_dim=0)),
    ]
    for word, call in cases:
        error = expect_raises(lockstep.SignatureMismatchError, call)
        assert word in str(error), (word, str(error))
    comm.end_foreign(comm.begin_foreign("allreduce", "float32", (4,)))


def check_unchecked(comm, r, n):
    comm.debug = False
    comm.end_foreign(comm.begin_foreign("allreduce", "float32", (r + 1,)))
    comm.debug = True


def check_refused(comm, r, n):
    expect_raises(lockstep.InvalidArgumentError, comm.begin_foreign, "allfoo", "float32", (4,))
    expect_raises(TypeError, comm.begin_foreign, 3.5, "float32", (4,))
    expect_raises(lockstep.DTypeError, comm.begin_foreign, "allreduce", "float8", (4,))
    expect_raises(TypeError, comm.begin_foreign, "allreduce", "float32", (4.5,))
    expect_raises(TypeError, comm.begin_foreign, "allreduce", "float32", 4)
    expect_raises(TypeError, comm.begin_foreign, "allreduce", "float32", (4,), tag=7)
    expect_raises(lockstep.DeviceError, comm.begin_foreign, "allreduce", "float32", (4,), device="tpu")
    expect_raises(lockstep.InvalidArgumentError, comm.begin_foreign, "broadcast", "float32", (4,))
    expect_raises(TypeError, comm.set_carrier, 5)
    comm.end_foreign(comm.begin_foreign("allreduce", "float32", (4,)))


def main():
    lockstep.init()
    comm = lockstep.Communicator.world().dup()
    comm.debug = True
    comm.set_carrier("a test")
    return run_checks(comm, [check_agreeing, check_mismatches, check_unchecked, check_refused])


if __name__ == "__main__":
    run("foreign", main)
