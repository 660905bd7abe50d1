"""lockstep's Python package with numpy arrays, under mpirun (2 and 3 ranks): every collective of the contract on the
caller's own memory with closed-form results, read-only arrays, bool and float16, exceptions and their classes with the
caller's file:line, the GIL released while a collective waits, and the batch-size search.

Run by run_job.py: mpirun -n N python3 numpy_test.py
"""
import os
import threading
import time

import numpy as np

import lockstep
from harness import caller_line, expect_raises, raises, run, run_checks

THIS_FILE = os.path.basename(__file__)


def check_in_place(comm, r, n):
    # An in-place allreduce writes into the array's own memory: same address before and after, and the wrapping
    # Tensor points at it.
    x = np.arange(6, dtype=np.float32) + r
    address = x.ctypes.data
    t = lockstep.as_tensor(x)
    assert t.data_ptr == address, (hex(t.data_ptr), hex(address))
    assert t.shape == (6,) and t.dtype == "float32" and t.device == "cpu" and not t.read_only
    result = comm.allreduce(x)
    assert result is x
    assert x.ctypes.data == address
    expected = n * np.arange(6, dtype=np.float32) + n * (n - 1) / 2
    np.testing.assert_array_equal(x, expected)
    # Through the Tensor itself: the array sees the second reduction.
    comm.allreduce(t)
    np.testing.assert_array_equal(x, n * expected)
    # A 2-D float64 view of a slice that is contiguous.
    y = np.ones((3, 4)) * (r + 1)
    comm.allreduce(y[1:], op="max")
    np.testing.assert_array_equal(y[0], np.full(4, r + 1.0))
    np.testing.assert_array_equal(y[1:], np.full((2, 4), float(n)))


def check_dlpack_shares(comm, r, n):
    t = lockstep.empty((5,), "float64")
    # numpy 1.24 imports DLPack tensors read-only: write through the buffer protocol, read through both
    b = t.numpy()
    assert b.ctypes.data == t.data_ptr and b.dtype == np.float64 and b.flags.writeable
    b[:] = r + 1
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr and a.dtype == np.float64
    comm.allreduce(t, op="sum")
    np.testing.assert_array_equal(a, np.full(5, n * (n + 1) / 2))
    b[0] = -1
    assert a[0] == -1


def check_read_only(comm, r, n):
    # Debug mode on: one read-only in-place target (rank 0) is refused on every rank, naming rank 0.
    comm.debug = True
    x = np.ones(4, dtype=np.float32)
    if r == 0:
        x.flags.writeable = False
    error = expect_raises(lockstep.CallRejectedError, comm.allreduce, x)
    text = str(error)
    assert error.status == 15 and isinstance(error, lockstep.Error), error
    assert "read-only" in text.lower() or "read only" in text.lower(), text
    assert "rank 0" in text.lower() or "process 0" in text.lower(), text
    np.testing.assert_array_equal(x, np.ones(4, dtype=np.float32))
    # The job goes on: the next collective works.
    y = np.full(2, r, dtype=np.int64)
    comm.allreduce(y)
    np.testing.assert_array_equal(y, np.full(2, n * (n - 1) // 2))
    comm.debug = False
    # Debug mode off, every rank read-only: ReadOnlyError on every rank, memory untouched.
    z = np.ones(3, dtype=np.float64)
    z.flags.writeable = False
    error = expect_raises(lockstep.ReadOnlyError, comm.allreduce, z)
    assert error.status == 9 and error.name == "LOCKSTEP_ERROR_READ_ONLY", error
    np.testing.assert_array_equal(z, np.ones(3))
    # A read-only input with a writable output is fine.
    out = np.zeros(3, dtype=np.float64)
    comm.allreduce(z, out=out)
    np.testing.assert_array_equal(out, np.full(3, float(n)))
    assert lockstep.as_tensor(z).read_only


def check_bool_float16(comm, r, n):
    flags = np.array([r == 0, False, True, r == n - 1, r % 2 == 1])
    any_of = flags.copy()
    comm.allreduce(any_of, op="max")
    np.testing.assert_array_equal(any_of, np.array([True, False, True, True, True]))
    all_of = flags.copy()
    comm.allreduce(all_of, op="min")
    np.testing.assert_array_equal(all_of, np.array([False, False, True, False, False]))
    assert all_of.dtype == np.bool_ and lockstep.as_tensor(all_of).dtype == "bool"
    h = np.full(7, 0.5 + r, dtype=np.float16)
    comm.allreduce(h, op="sum")
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h, np.full(7, 0.5 * n + n * (n - 1) / 2, dtype=np.float16))
    assert lockstep.as_tensor(h).dtype == "float16"


def check_every_collective(comm, r, n):
    comm.barrier()
    comm.barrier(tag="python barrier")
    # broadcast from the last rank, in place
    b = np.full((2, 3), r, dtype=np.int32)
    assert comm.broadcast(b, root=n - 1) is b
    np.testing.assert_array_equal(b, np.full((2, 3), n - 1))
    # allreduce: every op
    base = np.array([1.0, 2.0, -3.0]) * (r + 1)
    for op, expected in [
        ("sum", np.array([1.0, 2.0, -3.0]) * n * (n + 1) / 2),
        ("prod", np.array([1.0, 2.0**n, (-3.0) ** n]) * float(np.prod(np.arange(1, n + 1)))),
        ("max", np.array([n, 2.0 * n, -3.0])),
        ("min", np.array([1.0, 2.0, -3.0 * n])),
        ("mean", np.array([1.0, 2.0, -3.0]) * (n + 1) / 2),
        ("avg", np.array([1.0, 2.0, -3.0]) * (n + 1) / 2),
    ]:
        x = base.copy()
        comm.allreduce(x, op=op, tag=f"allreduce {op}")
        np.testing.assert_allclose(x, expected, err_msg=op)
    i = np.array([r, -r, 7], dtype=np.int64)
    comm.allreduce(i, op="sum")
    np.testing.assert_array_equal(i, [n * (n - 1) // 2, -n * (n - 1) // 2, 7 * n])
    u = np.array([r + 1, 200], dtype=np.uint8)
    comm.allreduce(u, op="max")
    np.testing.assert_array_equal(u, [n, 200])
    s = np.array([r - 1], dtype=np.int8)
    comm.allreduce(s, op="min")
    np.testing.assert_array_equal(s, [-1])
    # allreduce into out
    src = np.full(4, r + 1, dtype=np.float32)
    dst = np.zeros(4, dtype=np.float32)
    assert comm.allreduce(src, out=dst) is dst
    np.testing.assert_array_equal(src, np.full(4, r + 1))
    np.testing.assert_array_equal(dst, np.full(4, n * (n + 1) / 2))
    # reduce at the last rank, in place and into out
    root = n - 1
    x = np.full(3, r + 1, dtype=np.float64)
    comm.reduce(x, root=root, op="sum")
    np.testing.assert_array_equal(x, np.full(3, n * (n + 1) / 2 if r == root else r + 1.0))
    out = np.zeros(3)
    y = np.full(3, r + 1.0)
    assert comm.reduce(y, root=0, op="max", out=out) is out
    np.testing.assert_array_equal(out, np.full(3, float(n)) if r == 0 else np.zeros(3))
    # allgather: a new Tensor, and into out
    g = comm.allgather(np.array([r, 10 * r], dtype=np.int32))
    assert isinstance(g, lockstep.Tensor) and g.shape == (2 * n,) and g.dtype == "int32"
    np.testing.assert_array_equal(g.numpy(), np.array([[k, 10 * k] for k in range(n)]).ravel())
    g2 = np.zeros((n, 2, 2), dtype=np.float32)
    comm.allgather(np.full((1, 2, 2), r, dtype=np.float32), out=g2.reshape(n, 2, 2))
    np.testing.assert_array_equal(g2, np.arange(n, dtype=np.float32)[:, None, None] * np.ones((n, 2, 2)))
    scalar = comm.allgather(np.array(r + 0.5))  # a 0-d input gives [size]
    assert scalar.shape == (n,)
    np.testing.assert_array_equal(scalar.numpy(), np.arange(n) + 0.5)
    # gather at rank 1: a new Tensor at the root, None elsewhere
    gathered = comm.gather(np.full(2, r, dtype=np.int64), root=1)
    if r == 1:
        np.testing.assert_array_equal(gathered.numpy(), np.repeat(np.arange(n), 2))
    else:
        assert gathered is None
    # scatter from rank 0; the non-roots pass None as the input
    piece = np.zeros(2, dtype=np.float32)
    whole = np.arange(2 * n, dtype=np.float32) * 3 if r == 0 else None
    assert comm.scatter(whole, piece, root=0) is piece
    np.testing.assert_array_equal(piece, np.array([6 * r, 6 * r + 3], dtype=np.float32))
    # reduce_scatter: rank i gets rows [2i, 2i + 2) of the sum
    rs_in = np.arange(2 * n, dtype=np.float64) + r
    rs = comm.reduce_scatter(rs_in, op="sum")
    assert rs.shape == (2,)
    np.testing.assert_array_equal(rs.numpy(), n * np.arange(2 * r, 2 * r + 2) + n * (n - 1) / 2)
    rs_out = np.zeros(2)
    comm.reduce_scatter(rs_in, out=rs_out, op="max")
    np.testing.assert_array_equal(rs_out, np.arange(2 * r, 2 * r + 2) + n - 1)
    # alltoall: block j of rank i goes to rank j
    a2a_in = np.array([100 * r + j for j in range(n)], dtype=np.int32)
    a2a = comm.alltoall(a2a_in)
    np.testing.assert_array_equal(a2a.numpy(), [100 * i + r for i in range(n)])
    a2a_out = np.zeros(n, dtype=np.int32)
    comm.alltoall(a2a_in, out=a2a_out)
    np.testing.assert_array_equal(a2a_out, [100 * i + r for i in range(n)])
    # gather_uneven: rank r gives r + 1 rows
    uneven = comm.gather_uneven(np.full((r + 1, 2), r, dtype=np.float32))
    expected = np.concatenate([np.full((k + 1, 2), k, dtype=np.float32) for k in range(n)])
    assert uneven.shape == expected.shape
    np.testing.assert_array_equal(uneven.numpy(), expected)
    # send/recv around the ring, then to rank 0 from anyone
    right, left = (r + 1) % n, (r - 1) % n
    got = np.zeros(3, dtype=np.int64)
    if r % 2 == 0:
        comm.send(np.full(3, r, dtype=np.int64), right, tag=5)
        source = comm.recv(got, left, tag=5)
    else:
        source = comm.recv(got, left, tag=5)
        comm.send(np.full(3, r, dtype=np.int64), right, tag=5)
    assert source == left
    np.testing.assert_array_equal(got, np.full(3, left))
    if r == 0:
        seen = set()
        for _ in range(n - 1):
            box = np.zeros(1, dtype=np.int32)
            source = comm.recv(box, tag=9, name="collect")
            assert box[0] == 1000 + source, (box, source)
            seen.add(source)
        assert seen == set(range(1, n))
    else:
        comm.send(np.array([1000 + r], dtype=np.int32), 0, tag=9, name="collect")
    # triggers
    assert lockstep.check_trigger(comm) is False
    if r == n - 1:
        lockstep.set_trigger(comm)
    assert lockstep.check_trigger(comm) is True
    assert lockstep.check_trigger(comm) is False


def check_communicators(comm, r, n):
    assert (comm.rank, comm.size) == (r, n)
    assert (lockstep.rank(), lockstep.size()) == (r, n)
    assert 0 <= lockstep.local_rank() < lockstep.local_size()
    parity = comm.split(r % 2, key=-r)  # key reverses the order inside each half
    members = [k for k in range(n) if k % 2 == r % 2]
    assert parity.size == len(members)
    assert parity.rank == len(members) - 1 - members.index(r)
    x = np.array([r], dtype=np.int64)
    parity.allreduce(x)
    assert x[0] == sum(members)
    parity.free()
    assert parity.freed
    expect_raises(lockstep.InvalidUsageError, parity.allreduce, x)
    alone = comm.split(None if r == 0 else 1)
    assert (alone is None) == (r == 0)
    if alone is not None:
        assert alone.size == n - 1
        alone.free()
    dup = comm.dup()
    y = np.ones(2)
    dup.allreduce(y)
    np.testing.assert_array_equal(y, np.full(2, float(n)))
    assert dup.fortran_handle != comm.fortran_handle
    dup.free()
    if r in (0, n - 1):
        pair = comm.create_group([n - 1, 0], tag=3)
        assert pair.size == 2 and pair.rank == (0 if r == n - 1 else 1)
        z = np.array([r + 1.0])
        pair.allreduce(z)
        assert z[0] == n + 1.0
        pair.free()
    comm.barrier()
    assert comm.async_error() is None
    assert isinstance(comm.timeout, float)
    comm.set_step(3)
    comm.set_step(0)


def check_errors(comm, r, n):
    # The classes and their codes.
    assert issubclass(lockstep.OutOfMemoryError, MemoryError)
    assert issubclass(lockstep.TimeoutError, TimeoutError)
    assert issubclass(lockstep.InvalidArgumentError, ValueError)
    assert lockstep.RuntimeError_ is lockstep.LockstepRuntimeError
    for code, cls in lockstep._ERROR_CLASSES.items():
        assert cls.status == code and issubclass(cls, lockstep.Error) and issubclass(cls, RuntimeError)
        assert cls.name == lockstep._lockstep.status_string(code)
    # Local argument errors: no communication, raised on every rank alike.
    error = expect_raises(lockstep.InvalidArgumentError, comm.allreduce, np.ones(2), op="median")
    assert isinstance(error, ValueError) and "median" in str(error)
    error = expect_raises(lockstep.DTypeError, lockstep.as_tensor, np.ones(2, dtype=np.longdouble))
    assert error.status == 3
    # A debug-mode shape mismatch: SignatureMismatchError on every rank, with this file's line of the call.
    comm.debug = True
    x = np.zeros(3 + r, dtype=np.float32)
    with raises(lockstep.SignatureMismatchError) as caught:
        line = caller_line() + 1
        comm.allreduce(x)
    text = str(caught.error)
    assert caught.error.status == 1 and caught.error.name == "LOCKSTEP_ERROR_SIGNATURE_MISMATCH"
    assert f"{THIS_FILE}:{line} in check_errors" in text, (line, text)
    # Through a wrapper in the package (lockstep.check_trigger is Python in __init__.py): still this file's line.
    with raises(lockstep.SignatureMismatchError) as caught:
        if r == 0:
            line = caller_line() + 1
            lockstep.check_trigger(comm)
        else:
            line = caller_line() + 1
            comm.barrier()
    assert f"{THIS_FILE}:{line}" in str(caught.error), (line, str(caught.error))
    comm.debug = False
    # The call site the binding computes is the caller's own frame.
    site = lockstep._lockstep._caller_site()
    assert site[0] == __file__ and site[1] == caller_line() - 1 and site[2] == "check_errors", site

    # Places are remembered per code object and instruction: two lines of one function taken in turn keep their own
    # lines, and so do more functions (of other files) than the binding keeps places for.
    def two_places(first):
        if first:
            return lockstep._lockstep._caller_site(), caller_line()
        return lockstep._lockstep._caller_site(), caller_line()

    for i in range(6):
        site, line = two_places(i % 2 == 0)
        assert site[0] == __file__ and site[1] == line and site[2].endswith("two_places"), (site, line)
    generated = []
    for i in range(150):
        source = (
            "import lockstep\n" + "\n" * (i % 7) + f"def place_{i}():\n    return lockstep._lockstep._caller_site()\n"
        )
        scope = {}
        exec(compile(source, f"/generated/place_{i}.py", "exec"), scope)
        generated.append((scope[f"place_{i}"], f"/generated/place_{i}.py", 3 + i % 7, f"place_{i}"))
    for _ in range(3):
        for function, file, line, name in generated:
            assert function() == (file, line, name), (function(), file, line, name)


def check_gil_released(comm, r, n):
    # While a rank waits in a barrier, another Python thread of that process keeps running. Rank 0 enters the barrier
    # 1 s after every other rank said it is about to: their barriers wait that long.
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    if r == 0:
        for _ in range(n - 1):
            comm.recv(np.zeros(1), tag=11)
        time.sleep(1.0)
        comm.barrier()
    else:
        worker = threading.Thread(target=count)
        worker.start()
        comm.send(np.ones(1), 0, tag=11)
        before, start = ticks[0], time.monotonic()
        comm.barrier()
        waited, elapsed = ticks[0] - before, time.monotonic() - start
        stop.set()
        worker.join()
        assert elapsed > 0.5, f"the barrier returned after {elapsed:.2f} s, before rank 0 entered it"
        assert waited > 50, f"the counting thread advanced only {waited} ticks while the barrier waited {elapsed:.2f} s"


def check_batch_size(comm, r, n):
    tried = []

    @lockstep.find_executable_batch_size(starting_batch_size=128, comm=comm)
    def step(batch_size, scale):
        tried.append(batch_size)
        if r == 0 and batch_size > 32:
            raise MemoryError(f"no room for {batch_size}")
        return batch_size * scale

    assert step(10) == 320
    assert step.batch_size == 32
    assert tried == [128, 64, 32], tried
    # A lockstep OutOfMemoryError and a torch-style RuntimeError count as out of memory too.
    sizes = []

    @lockstep.find_executable_batch_size(starting_batch_size=16, factor=0.25)
    def other(batch_size):
        sizes.append(batch_size)
        if batch_size == 16 and r == n - 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return "done"

    assert other() == "done" and sizes == [16, 4], sizes
    # Another exception stops the search: re-raised here on the rank where it happened, DistributedError elsewhere.

    class Broken(Exception):
        pass

    @lockstep.find_executable_batch_size(starting_batch_size=8, comm=comm)
    def broken(batch_size):
        if r == n - 1:
            raise Broken(f"broken at {batch_size}")
        return batch_size

    if r == n - 1:
        error = expect_raises(Broken, broken)
        assert str(error) == "broken at 8"
    else:
        error = expect_raises(lockstep.DistributedError, broken)
        assert error.status == 16
    comm.barrier()


def check_same_memory_other_views(comm, r, n):
    # The binding remembers the last buffers it wrapped: the same memory seen as another dtype, shape or
    # writability must still be taken as what it is now.
    base = np.zeros(4, dtype=np.float32)
    for _ in range(3):
        base[:] = 1.0
        comm.allreduce(base)
        np.testing.assert_array_equal(base, np.full(4, n, dtype=np.float32))
    as_int = base.view(np.int32)
    as_int[:] = r
    comm.allreduce(as_int)
    np.testing.assert_array_equal(as_int, np.full(4, n * (n - 1) // 2, dtype=np.int32))
    square = as_int.reshape(2, 2)
    square[:] = 1
    out = np.zeros((2 * n, 2), dtype=np.int32)
    comm.allgather(square, out=out)
    np.testing.assert_array_equal(out, np.ones((2 * n, 2), dtype=np.int32))
    as_int.flags.writeable = False
    expect_raises(lockstep.ReadOnlyError, comm.allreduce, as_int)
    np.testing.assert_array_equal(as_int, np.ones(4, dtype=np.int32))


def check_cache_eviction_within_a_call(comm, r, n):
    # An input found among the remembered buffers, then an output that pushes it out of them in the same call: the
    # call must still use the input (not the memory of a released handle). Every collective that takes an output.
    x = np.full(4, r + 1.0, dtype=np.float32)
    others = [np.zeros(i + 5, dtype=np.float32) for i in range(8)]
    rows = np.arange(4 * n, dtype=np.float32) + 100 * r
    cases = [
        (
            "allreduce",
            lambda out: comm.allreduce(x, out=out),
            np.zeros(4, np.float32),
            np.full(4, n * (n + 1) / 2, np.float32),
        ),
        (
            "allgather",
            lambda out: comm.allgather(x, out=out),
            np.zeros(4 * n, np.float32),
            np.concatenate([np.full(4, q + 1.0, np.float32) for q in range(n)]),
        ),
        (
            "reduce_scatter",
            lambda out: comm.reduce_scatter(rows, out=out),
            np.zeros(4, np.float32),
            sum(np.arange(4 * n, dtype=np.float32) + 100 * q for q in range(n))[4 * r : 4 * r + 4],
        ),
        (
            "alltoall",
            lambda out: comm.alltoall(rows, out=out),
            np.zeros(4 * n, np.float32),
            np.concatenate([(np.arange(4 * n, dtype=np.float32) + 100 * q)[4 * r : 4 * r + 4] for q in range(n)]),
        ),
    ]
    for name, call, out, expected in cases:
        for rounds in range(6):  # the input's place among the remembered buffers moves with each round
            comm.allreduce(x.copy())
            comm.allreduce(x)
            x[:] = r + 1.0
            for other in others[:rounds]:
                comm.allreduce(other)
            rows[:] = np.arange(4 * n, dtype=np.float32) + 100 * r
            out[:] = 0
            call(out)
            x[:] = r + 1.0
            np.testing.assert_array_equal(out, expected, err_msg=f"{name} after {rounds} other buffers")


def check_uneven_rows_differ(comm, r, n):
    # gather_uneven (debug mode off): rows whose trailing shape or dtype differ between ranks are refused by every rank
    # with the same error naming each rank's rows, instead of a truncation on one rank and garbage on the others.
    assert not comm.debug
    error = expect_raises(lockstep.ShapeError, comm.gather_uneven, np.zeros((1, 2 if r == n - 1 else 3), np.int32))
    text = str(error)
    assert f"Process {n - 1}: int32[1, 2]" in text and "Process 0: int32[1, 3]" in text, text
    error = expect_raises(
        lockstep.DTypeError, comm.gather_uneven, np.zeros((r + 1, 2), np.float64 if r == 0 else np.float32)
    )
    assert "Process 0: float64[1, 2]" in str(error) and "Process 1: float32[2, 2]" in str(error), str(error)
    # Rows that agree still gather, with a varying first dimension.
    out = comm.gather_uneven(np.full((r + 1, 2), r, np.int32))
    expected = np.concatenate([np.full((q + 1, 2), q, np.int32) for q in range(n)])
    np.testing.assert_array_equal(np.asarray(out), expected)


def check_point_to_point_tags(comm, r, n):
    # Tags run from 0 to MPI's upper bound; a receive also takes MPI_ANY_TAG (-1). Others are invalid arguments.
    x = np.full(3, float(r), np.float32)
    if r == 0:
        comm.send(x, dest=1, tag=7)
    elif r == 1:
        comm.recv(x, source=0, tag=-1)
        np.testing.assert_array_equal(x, np.zeros(3, np.float32))
    error = expect_raises(lockstep.InvalidArgumentError, comm.send, x, dest=(r + 1) % n, tag=-5)
    assert "tag -5" in str(error), error
    expect_raises(lockstep.InvalidArgumentError, comm.recv, x, source=(r + 1) % n, tag=-2)


def check_conversion_rejected(comm, r, n):
    # Debug mode on: arguments only the last rank cannot convert (a long double array, a strided view, a bad op name)
    # join the collective as rejected, so no rank waits: every rank raises the same CallRejectedError naming it.
    comm.debug = True
    last = n - 1
    good = np.ones(4, dtype=np.float32)
    cases = [
        (np.ones(4, dtype=np.longdouble), "sum", "format 'g'"),  # long double: no lockstep dtype
        (np.ones(8, dtype=np.float32)[::2], "sum", "contiguous"),  # numpy refuses a C-contiguous buffer
        (good, "bogus", "bogus"),  # an op name lockstep lacks
    ]
    for bad, op, word in cases:
        x = bad if r == last else good.copy()
        error = expect_raises(lockstep.CallRejectedError, comm.allreduce, x, op=op if r == last else "sum")
        text = str(error)
        assert f"process {last}" in text.lower() or f"rank {last}" in text.lower(), text
        assert word in text.lower(), (word, text)
        assert "harness.py:" in text, text  # the caller's line (expect_raises makes the call), on every rank
        texts = comm.allgather(np.frombuffer(text.encode()[:200].ljust(200), dtype=np.uint8))
        rows = np.asarray(texts.numpy()).reshape(n, 200)
        assert all((rows[i] == rows[0]).all() for i in range(n)), "the ranks' messages differ"
    comm.barrier()
    comm.debug = False


def main():
    lockstep.init()
    comm = lockstep.Communicator.world()
    assert comm is lockstep.Communicator.world()
    return run_checks(
        comm,
        (
            check_in_place,
            check_dlpack_shares,
            check_read_only,
            check_bool_float16,
            check_every_collective,
            check_communicators,
            check_errors,
            check_gil_released,
            check_batch_size,
            check_conversion_rejected,
            check_same_memory_other_views,
            check_cache_eviction_within_a_call,
            check_uneven_rows_differ,
            check_point_to_point_tags,
        ),
    )


if __name__ == "__main__":
    run("numpy", main)
