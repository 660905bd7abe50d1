"""lockstep and mpi4py in one job, under mpirun.

Usage: mpi4py_test.py MODE
  interop             mpi4py first: lockstep on a communicator mpi4py split (rank % 2); lockstep and mpi4py calls
                      interleaved on one communicator without matching each other's messages; a lockstep
                      communicator handed to mpi4py (Comm.f2py).
  lockstep-first      lockstep initialises MPI (and owns it), mpi4py imported afterwards adopts it; both work; exit
                      finalises MPI exactly once (lockstep's atexit handler; mpi4py sees MPI finalised).
  mpi4py-first        mpi4py initialises MPI, lockstep adopts it and does not own it; exit: mpi4py finalises.
  lockstep-finalize   lockstep first, lockstep.finalize() by hand: MPI is finalised, lockstep refuses further use,
                      mpi4py's exit handler does nothing.
  mpi4py-first-lockstep-finalize
                      mpi4py first, lockstep.finalize() by hand: MPI keeps running for mpi4py.
  mpi4py-finalize     mpi4py first, lockstep's communicators in use, then mpi4py's MPI.Finalize() by hand and no
                      lockstep.finalize(): lockstep's exit handler releases its state without touching MPI, exit 0.
run_job.py checks the exit code and that nothing reports MPI finalised twice or not at all.
"""
import sys

import numpy as np

from harness import expect_raises, run


def interop():
    from mpi4py import MPI

    import lockstep

    world = MPI.COMM_WORLD
    r, n = world.Get_rank(), world.Get_size()
    assert not lockstep.owns_mpi()
    assert lockstep.rank() == r and lockstep.size() == n
    # lockstep on a communicator mpi4py split by parity
    half = world.Split(r % 2, r)
    comm = lockstep.Communicator.from_mpi4py(half)
    assert (comm.rank, comm.size) == (half.Get_rank(), half.Get_size())
    x = np.array([r, 1], dtype=np.int64)
    comm.allreduce(x)
    members = [k for k in range(n) if k % 2 == r % 2]
    assert x.tolist() == [sum(members), len(members)], x
    # lockstep works on a duplicate: its handle is not mpi4py's
    assert comm.fortran_handle != half.py2f()
    # interleaved on one communicator: lockstep, mpi4py (pickled and buffer), lockstep again, point to point of both
    both = lockstep.Communicator.from_mpi4py(world)
    for step in range(5):
        a = np.full(3, r + step, dtype=np.float64)
        both.allreduce(a)
        assert a.tolist() == [n * step + n * (n - 1) / 2] * 3
        assert world.allreduce(r * step, op=MPI.SUM) == step * n * (n - 1) // 2
        b = np.full(2, r, dtype=np.int32)
        world.Allreduce(MPI.IN_PLACE, b, op=MPI.MAX)
        assert b.tolist() == [n - 1] * 2
        c = np.array([r * 10 + step], dtype=np.int32)
        both.broadcast(c, root=step % n)
        assert c[0] == (step % n) * 10 + step
        # the same tag on both sides at once: each library receives its own message
        right, left = (r + 1) % n, (r - 1) % n
        mine = np.zeros(1, dtype=np.int64)
        request = world.isend(("mpi4py", r, step), dest=right, tag=7)
        if r % 2 == 0:
            both.send(np.array([1000 * r + step]), right, tag=7)
            both.recv(mine, left, tag=7)
        else:
            both.recv(mine, left, tag=7)
            both.send(np.array([1000 * r + step]), right, tag=7)
        theirs = world.recv(source=left, tag=7)
        request.wait()
        assert mine[0] == 1000 * left + step, mine
        assert theirs == ("mpi4py", left, step), theirs
    # a lockstep communicator handed to mpi4py
    dup = both.dup()
    as_mpi4py = MPI.Comm.f2py(dup.fortran_handle)
    assert as_mpi4py.Get_size() == n and as_mpi4py.Get_rank() == r
    assert as_mpi4py.allreduce(1) == n
    dup.free()
    comm.free()
    both.free()
    half.Free()
    return r, n


def lockstep_first():
    import lockstep

    lockstep.init()
    assert lockstep.owns_mpi()
    from mpi4py import MPI

    assert MPI.Is_initialized() and not MPI.Is_finalized()
    r, n = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    x = np.ones(2)
    lockstep.Communicator.world().allreduce(x)
    assert x.tolist() == [n, n]
    assert MPI.COMM_WORLD.allreduce(1) == n
    return r, n


def mpi4py_first():
    from mpi4py import MPI

    import lockstep

    comm = lockstep.Communicator.world()
    assert not lockstep.owns_mpi()
    r, n = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    x = np.ones(2)
    comm.allreduce(x)
    assert x.tolist() == [n, n]
    assert MPI.COMM_WORLD.allreduce(1) == n
    return r, n


def lockstep_finalize():
    import lockstep

    comm = lockstep.Communicator.world()
    r, n = comm.rank, comm.size
    from mpi4py import MPI

    assert MPI.COMM_WORLD.allreduce(1) == n
    lockstep.finalize()
    assert MPI.Is_finalized()
    assert not lockstep.is_initialized()
    lockstep.finalize()  # idempotent
    expect_raises(lockstep.InvalidUsageError, comm.allreduce, np.ones(1))
    expect_raises(lockstep.InvalidUsageError, lockstep.Communicator.world)
    return r, n


def mpi4py_first_lockstep_finalize():
    from mpi4py import MPI

    import lockstep

    comm = lockstep.Communicator.world()
    r, n = comm.rank, comm.size
    comm.barrier()
    lockstep.finalize()
    assert not MPI.Is_finalized()
    assert MPI.COMM_WORLD.allreduce(r) == n * (n - 1) // 2
    return r, n


def mpi4py_finalize():
    from mpi4py import MPI

    import lockstep

    r, n = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    half = lockstep.Communicator.from_mpi4py(MPI.COMM_WORLD.Split(r % 2, r))
    world = lockstep.Communicator.world()
    x = np.ones(2)
    world.allreduce(x)
    half.allreduce(x)
    assert x.tolist() == [n * half.size] * 2, x
    MPI.Finalize()
    assert MPI.Is_finalized() and lockstep.is_initialized()
    return r, n


MODES = {
    "interop": interop,
    "lockstep-first": lockstep_first,
    "mpi4py-first": mpi4py_first,
    "lockstep-finalize": lockstep_finalize,
    "mpi4py-first-lockstep-finalize": mpi4py_first_lockstep_finalize,
    "mpi4py-finalize": mpi4py_finalize,
}

if __name__ == "__main__":
    mode = sys.argv[1]
    run(f"mpi4py-{mode}", MODES[mode])
