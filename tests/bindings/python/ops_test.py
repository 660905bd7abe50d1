"""The reduce ops and dtypes beyond the first release, and the uneven alltoall, against numpy under mpirun (2 and 3
ranks): int16/uint16/uint32/uint64 and complex64/complex128 through sum, prod, max, min and mean where defined; band,
bor and bxor on integers and bool; premul_sum with a factor per rank (the input left alone unless in place); the pairs
a reduce op does not take refused with the same DTypeError on every rank in debug mode; alltoallv with uneven counts,
empty blocks, its non-blocking form and a count disagreement caught in debug mode on every rank.

Run by run_job.py: mpirun -n N python3 ops_test.py
"""
import numpy as np

import lockstep
from harness import expect_raises, run, run_checks

NEW_INTEGERS = (np.int16, np.uint16, np.uint32, np.uint64)
INTEGERS = (np.int8, np.uint8, np.int32, np.int64) + NEW_INTEGERS
COMPLEX = (np.complex64, np.complex128)
FLOATING = (np.float32, np.float64)


def values(dtype, r, count=12):
    """Rank r's input: small values whose sums and products stay exact in every dtype."""
    i = np.arange(count)
    if np.issubdtype(dtype, np.complexfloating):
        return ((i % 3 + r + 1) + 1j * ((i + r) % 2 - 0.5)).astype(dtype)
    if dtype == np.bool_:
        return ((i + r) % 3 == 0).astype(np.bool_)
    return ((i * 7 + r * 5) % 4 + 1).astype(dtype)


def all_inputs(dtype, n, count=12):
    return [values(dtype, q, count) for q in range(n)]


def oracle(op, inputs):
    stacked = np.stack(inputs)
    dtype = inputs[0].dtype
    if op == "sum":
        return stacked.sum(axis=0, dtype=dtype) if dtype != np.bool_ else stacked.any(axis=0)
    if op == "prod":
        return stacked.prod(axis=0, dtype=dtype) if dtype != np.bool_ else stacked.all(axis=0)
    if op == "max":
        return stacked.max(axis=0)
    if op == "min":
        return stacked.min(axis=0)
    if op == "mean":
        return (stacked.sum(axis=0) / len(inputs)).astype(dtype)
    functions = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}
    return functions[op].reduce(stacked, axis=0)


def assert_equal(got, expected, what):
    got = np.asarray(got)
    assert got.dtype == expected.dtype, (what, got.dtype, expected.dtype)
    if np.issubdtype(expected.dtype, np.inexact):
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def same_on_every_rank(comm, text):
    """Whether `text` is the same on every rank (compared through an allgather of its bytes)."""
    data = np.zeros(1024, dtype=np.uint8)
    encoded = text.encode()[:1024]
    data[: len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)
    everyone = np.asarray(comm.allgather(data)).reshape(comm.size, 1024)
    return all((row == everyone[0]).all() for row in everyone)


def check_new_dtypes_names(comm, r, n):
    for name in ("int16", "uint16", "uint32", "uint64", "complex64", "complex128"):
        t = lockstep.empty((3,), name)
        assert t.dtype == name, (t.dtype, name)
        assert np.asarray(t).dtype == np.dtype(name), (np.asarray(t).dtype, name)
        assert lockstep._lockstep.dtype_size(name) == np.dtype(name).itemsize
        # numpy arrays of the dtype wrap without a copy
        a = np.zeros(3, dtype=name)
        assert lockstep.as_tensor(a).dtype == name
    # DLPack both ways: numpy takes complex and the new integers from lockstep, and gives them back.
    for name in ("int16", "uint16", "uint32", "uint64", "complex64", "complex128"):
        a = (np.arange(4) * 3).astype(name)
        t = lockstep.from_dlpack(a)
        assert t.dtype == name, (t.dtype, name)
        back = np.from_dlpack(t)
        assert back.dtype == np.dtype(name) and (back == a).all(), (back, a)
    try:
        import torch  # noqa: F401 (torch 1.13 speaks DLPack for int16 and the complex types)
    except ImportError:
        torch = None
    if torch is not None:
        for dtype, name in ((torch.int16, "int16"), (torch.complex64, "complex64"), (torch.complex128, "complex128")):
            x = torch.arange(4).to(dtype)
            t = lockstep.from_dlpack(x)
            assert t.dtype == name, (t.dtype, name)
            assert torch.equal(torch.from_dlpack(t), x)
    assert lockstep.empty((1,), "short").dtype == "int16"
    assert lockstep.empty((1,), "cfloat").dtype == "complex64"


def check_arithmetic_reductions(comm, r, n):
    for dtype in INTEGERS + FLOATING + COMPLEX + (np.bool_,):
        ops = ["sum", "prod"]
        if not np.issubdtype(dtype, np.complexfloating):
            ops += ["max", "min"]
        if np.issubdtype(dtype, np.inexact):
            ops += ["mean"]
        inputs = all_inputs(dtype, n)
        for op in ops:
            what = f"{np.dtype(dtype).name} {op}"
            expected = oracle(op, inputs)
            x = values(dtype, r)
            assert comm.allreduce(x, op=op) is x
            assert_equal(x, expected, "allreduce " + what)
            out = np.empty_like(x)
            x = values(dtype, r)
            comm.allreduce(x, op=op, out=out)
            assert_equal(out, expected, "allreduce out= " + what)
            assert_equal(x, values(dtype, r), "allreduce out= leaves the input: " + what)
            got = comm.reduce(values(dtype, r), root=n - 1, op=op, out=np.empty_like(x))
            if r == n - 1:
                assert_equal(got, expected, "reduce " + what)
            rows = values(dtype, r, 4 * n)
            scattered = comm.reduce_scatter(rows, op=op)
            full = oracle(op, all_inputs(dtype, n, 4 * n))
            assert_equal(scattered, full[4 * r : 4 * r + 4], "reduce_scatter " + what)


def check_refused_pairs(comm, r, n):
    comm.debug = True
    try:
        refused = [(np.complex64, "max"), (np.complex128, "min"), (np.int16, "mean"), (np.uint64, "mean")]
        refused += [(d, op) for d in FLOATING + COMPLEX for op in ("band", "bor", "bxor")]
        refused += [(d, "premul_sum") for d in INTEGERS + (np.bool_,)]
        for dtype, op in refused:
            x = values(dtype, r)
            before = x.copy()
            kwargs = {"factor": 2.0} if op == "premul_sum" else {}
            error = expect_raises(lockstep.DTypeError, comm.allreduce, x, op=op, **kwargs)
            text = str(error)
            assert op in text and np.dtype(dtype).name in text, text
            assert same_on_every_rank(comm, text), f"{np.dtype(dtype).name} {op}: messages differ between ranks"
            np.testing.assert_array_equal(x, before)
        # One rank asks for a bitwise op on float, the others on int: refused on every rank, naming that rank.
        x = values(np.float32 if r == 0 else np.int32, r)
        error = expect_raises(lockstep.Error, comm.allreduce, x, op="bor")
        assert same_on_every_rank(comm, str(error)), str(error)
    finally:
        comm.debug = False
    # Without debug mode: the same refusal, raised before anything moves, on every rank (all pass a float).
    expect_raises(lockstep.DTypeError, comm.allreduce, np.ones(3, np.float64), op="bxor")


def check_bitwise(comm, r, n):
    for dtype in INTEGERS + (np.bool_,):
        inputs = all_inputs(dtype, n)
        for op, alias in (("band", "bitwise_and"), ("bor", "bitwise_or"), ("bxor", "bitwise_xor")):
            expected = oracle(op, inputs)
            x = values(dtype, r)
            comm.allreduce(x, op=op)
            assert_equal(x, expected, f"allreduce {np.dtype(dtype).name} {op}")
            y = values(dtype, r)
            comm.allreduce(y, op=alias)
            assert_equal(y, expected, f"allreduce {np.dtype(dtype).name} {alias}")
            got = comm.reduce(values(dtype, r), root=0, op=op, out=np.empty_like(x))
            if r == 0:
                assert_equal(got, expected, f"reduce {np.dtype(dtype).name} {op}")
    # Whole bit patterns, not just small values: the top bits of uint64 and int16.
    for dtype in (np.uint64, np.int16, np.uint32):
        info = np.iinfo(dtype)
        x = np.array([info.max, info.min, (1 << (r % 8)), info.max >> (r + 1)], dtype=dtype)
        inputs = [np.array([info.max, info.min, (1 << (q % 8)), info.max >> (q + 1)], dtype=dtype) for q in range(n)]
        for op in ("band", "bor", "bxor"):
            y = x.copy()
            comm.allreduce(y, op=op)
            assert_equal(y, oracle(op, inputs), f"bit patterns {np.dtype(dtype).name} {op}")


def check_premul_sum(comm, r, n):
    factors = [q + 0.5 for q in range(n)]
    for dtype in FLOATING + COMPLEX + (np.float16,):
        inputs = all_inputs(dtype, n)
        expected = sum(f * np.asarray(a, dtype=np.complex128) for f, a in zip(factors, inputs))
        expected = expected.astype(dtype) if np.issubdtype(dtype, np.complexfloating) else expected.real.astype(dtype)
        tolerance = 1e-2 if dtype == np.float16 else 1e-6
        what = np.dtype(dtype).name
        # Out of place: the input is not written.
        x = values(dtype, r)
        out = np.empty_like(x)
        comm.allreduce(x, op="premul_sum", factor=factors[r], out=out)
        np.testing.assert_allclose(out, expected, rtol=tolerance, err_msg="premul_sum out= " + what)
        np.testing.assert_array_equal(x, values(dtype, r))
        # In place: the result is the premultiplied sum.
        comm.allreduce(x, op="premul_sum", factor=factors[r])
        np.testing.assert_allclose(x, expected, rtol=tolerance, err_msg="premul_sum in place " + what)
        got = comm.reduce(values(dtype, r), root=0, op="premul_sum", factor=factors[r], out=np.empty_like(x))
        if r == 0:
            np.testing.assert_allclose(got, expected, rtol=tolerance, err_msg="reduce premul_sum " + what)
        rows = values(dtype, r, 4 * n)
        kept = rows.copy()
        scattered = np.asarray(comm.reduce_scatter(rows, op="premul_sum", factor=factors[r]))
        full = sum(f * np.asarray(a, dtype=np.complex128) for f, a in zip(factors, all_inputs(dtype, n, 4 * n)))
        full = full if np.issubdtype(dtype, np.complexfloating) else full.real
        np.testing.assert_allclose(scattered, full[4 * r : 4 * r + 4].astype(dtype), rtol=tolerance)
        np.testing.assert_array_equal(rows, kept)
        # Non-blocking.
        y = values(dtype, r)
        request = comm.allreduce(y, op="premul_sum", factor=factors[r], async_op=True)
        request.wait()
        np.testing.assert_allclose(y, expected, rtol=tolerance, err_msg="premul_sum async " + what)
    # The factor belongs to premul_sum: missing there, or given with another op, is an error on every rank.
    expect_raises(lockstep.InvalidArgumentError, comm.allreduce, np.ones(2), op="premul_sum")
    expect_raises(lockstep.InvalidArgumentError, comm.allreduce, np.ones(2), op="sum", factor=2.0)


def alltoallv_case(r, n, rows_to):
    """Rank r's send counts (rows_to(src, dst)), input and the result it must receive; rows are [src, dst, k]."""
    send = [rows_to(r, j) for j in range(n)]
    recv = [rows_to(j, r) for j in range(n)]
    x = np.array([[r, j, k] for j in range(n) for k in range(send[j])], dtype=np.int64).reshape(-1, 3)
    expected = np.array([[j, r, k] for j in range(n) for k in range(recv[j])], dtype=np.int64).reshape(-1, 3)
    return x, send, recv, expected


def check_alltoallv(comm, r, n):
    cases = {
        "uneven with empty blocks": lambda src, dst: (2 * src + dst) % 3,
        "all empty": lambda src, dst: 0,
        "only to rank 0": lambda src, dst: 3 if dst == 0 else 0,
        "one large block": lambda src, dst: 1000 if (src + 1) % n == dst else 1,
    }
    for name, rows_to in cases.items():
        x, send, recv, expected = alltoallv_case(r, n, rows_to)
        got = np.asarray(comm.alltoallv(x, send, recv))
        assert got.shape == expected.shape, (name, got.shape, expected.shape)
        np.testing.assert_array_equal(got, expected, err_msg=name)
        out = np.full(expected.shape, -1, dtype=np.int64)
        assert comm.alltoallv(x, send, recv, out=out) is out
        np.testing.assert_array_equal(out, expected, err_msg=name + " out=")
        request = comm.alltoallv(x, send, recv, async_op=True)
        np.testing.assert_array_equal(np.asarray(request.result()), expected, err_msg=name + " async")
    # Other dtypes: complex rows of two columns, each element naming its source and position.
    send = [(r + j) % 2 + 1 for j in range(n)]
    recv = [(j + r) % 2 + 1 for j in range(n)]
    x = (np.arange(2 * sum(send)) + 100 * r + 1j * r).astype(np.complex64).reshape(-1, 2)
    got = np.asarray(comm.alltoallv(x, send, recv))
    starts = [sum(((q + j) % 2 + 1) for j in range(r)) for q in range(n)]
    expected = np.concatenate(
        [
            (np.arange(2 * sum((q + j) % 2 + 1 for j in range(n))) + 100 * q + 1j * q)
            .astype(np.complex64)
            .reshape(-1, 2)[starts[q] : starts[q] + recv[q]]
            for q in range(n)
        ]
    )
    np.testing.assert_array_equal(got, expected)
    # Counts that do not add up to the rows, or of the wrong length: refused on every rank (each rank's own check).
    expect_raises(lockstep.ShapeError, comm.alltoallv, np.zeros((5, 2)), [1] * n, [1] * n)
    expect_raises(lockstep.InvalidArgumentError, comm.alltoallv, np.zeros((n + 1, 2)), [1] * (n + 1), [1] * n)
    # Debug mode: rank 0 expects one row more from the last rank than that rank sends: every rank raises the same
    # DistributedError naming both, and nothing moves.
    comm.debug = True
    try:
        x, send, recv, _ = alltoallv_case(r, n, lambda src, dst: 1)
        if r == 0:
            recv[n - 1] = 2
        error = expect_raises(lockstep.DistributedError, comm.alltoallv, x, send, recv)
        text = str(error)
        assert f"Process 0 expects 2 rows from process {n - 1}, which sends it 1" in text, text
        assert same_on_every_rank(comm, text), text
        # The row shapes differ between ranks: the signature check refuses it on every rank.
        y = np.zeros((n, 2 if r == 0 else 3))
        error = expect_raises(lockstep.Error, comm.alltoallv, y, [1] * n, [1] * n)
        assert same_on_every_rank(comm, str(error)), str(error)
        # A correct call goes through in debug mode.
        x, send, recv, expected = alltoallv_case(r, n, lambda src, dst: (src + 2 * dst) % 3)
        np.testing.assert_array_equal(np.asarray(comm.alltoallv(x, send, recv)), expected)
    finally:
        comm.debug = False


def main():
    lockstep.init()
    comm = lockstep.Communicator.world()
    return run_checks(
        comm,
        (
            check_new_dtypes_names,
            check_arithmetic_reductions,
            check_bitwise,
            check_premul_sum,
            check_refused_pairs,
            check_alltoallv,
        ),
    )


if __name__ == "__main__":
    run("ops", main)
