"""torch.distributed's backend "lockstep" (lockstep.torch) against gloo in the same job, under mpirun (2 and 3 ranks).

Every collective torch.distributed offers runs twice on the same inputs, once on the default group (lockstep) and once
on a gloo group of the same ranks, and the outputs must be equal (torch.equal). The inputs are small integers, so sums,
products and means are exact whatever order either backend adds in. Where gloo lacks an operation (AVG, bfloat16, bool,
reduce_scatter, all_gather_into_tensor, reduce_scatter_tensor, all_to_all of a list) the oracle is gloo's composition
of the same result. Then what gloo cannot be compared with: recv from any source, async work and its future, and the
errors for what lockstep does not do.

Run by run_job.py: mpirun -n N python3 collectives_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from harness import raises, run  # noqa: E402

ReduceOp = dist.ReduceOp
REDUCTIONS = [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.int8, torch.uint8, torch.int32, torch.int64]
SIGNED = {torch.float32, torch.float64, torch.float16, torch.int8, torch.int32, torch.int64}
all_gather_into_tensor = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
reduce_scatter_tensor = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base


def values(r, shape, dtype, salt=0):
    """Rank r's input: small integers (1..5; -1..3 for signed dtypes), so that products over 3 ranks fit int8. Ranks
    0, 1, 2 get different values at every position."""
    numel = 1
    for extent in shape:
        numel *= extent
    base = (torch.arange(numel) * 7 + r * 2 + salt * 3) % 5 + 1
    if dtype in SIGNED:
        base = base - 2
    return base.reshape(shape).to(dtype)


def same(ours, oracle, what):
    """Equal dtype, shape and bytes (bool compared as bytes: a bool tensor holding 2 would still be True)."""
    assert ours.dtype == oracle.dtype, f"{what}: lockstep {ours.dtype} != expected {oracle.dtype}"
    if ours.dtype == torch.bool:
        ours, oracle = ours.contiguous().view(torch.uint8), oracle.contiguous().view(torch.uint8)
    assert torch.equal(ours, oracle), f"{what}: lockstep {ours} != expected {oracle}"


def check_backend(gloo, r, n):
    world = dist.group.WORLD
    assert dist.get_backend() == "lockstep" and dist.get_backend(gloo) == "gloo", dist.get_backend()
    assert isinstance(world, lockstep.torch.ProcessGroupLockstep), type(world)
    assert world.name() == "lockstep" and world.rank() == r and world.size() == n
    # Without a progress thread (LOCKSTEP_MPI_THREAD_LEVEL=funneled) every call completes in the calling thread.
    funneled = os.environ.get("LOCKSTEP_MPI_THREAD_LEVEL") == "funneled"
    assert world.comm.progress_thread is not funneled and world.blocking is funneled, (world.blocking, funneled)
    assert world.comm.rank == lockstep.rank() and world.comm.size == lockstep.size() == n
    # Registration is idempotent: importing again, or registering again, changes nothing.
    lockstep.torch._register()
    assert dist.Backend("lockstep") == "lockstep"


def check_all_reduce(gloo, r, n):
    for dtype in DTYPES:
        for salt, op in enumerate(REDUCTIONS):
            x = values(r, (2, 3), dtype, salt)
            ours, oracle = x.clone(), x.clone()
            dist.all_reduce(ours, op=op)
            dist.all_reduce(oracle, op=op, group=gloo)
            same(ours, oracle, f"all_reduce {op} {dtype}")
    # AVG (gloo has none): the mean of values whose sum is a multiple of n is an exact integer.
    for dtype in (torch.float32, torch.float64):
        x = (torch.arange(6) * 3 + 2 * r - (n - 1)).to(dtype)
        ours, oracle = x.clone(), x.clone()
        dist.all_reduce(ours, op=ReduceOp.AVG)
        dist.all_reduce(oracle, group=gloo)
        same(ours, oracle / n, f"all_reduce AVG {dtype}")
    # bool (gloo has none): SUM and MAX are OR, PRODUCT and MIN are AND; the oracle is gloo on the uint8 view.
    flags = values(r, (7,), torch.int32, 1) % 2 == 0
    for op, oracle_op in [
        (ReduceOp.SUM, ReduceOp.MAX),
        (ReduceOp.MAX, ReduceOp.MAX),
        (ReduceOp.PRODUCT, ReduceOp.MIN),
        (ReduceOp.MIN, ReduceOp.MIN),
    ]:
        ours, oracle = flags.clone(), flags.to(torch.uint8)
        dist.all_reduce(ours, op=op)
        dist.all_reduce(oracle, op=oracle_op, group=gloo)
        same(ours, oracle.bool(), f"all_reduce {op} bool")
    # bfloat16 (gloo has none): gloo's float32 sum of the same small integers, rounded to bfloat16.
    x = values(r, (5,), torch.float32)
    ours, oracle = x.to(torch.bfloat16), x.clone()
    dist.all_reduce(ours)
    dist.all_reduce(oracle, group=gloo)
    same(ours, oracle.to(torch.bfloat16), "all_reduce bfloat16")
    # A non-contiguous tensor (a transpose) and a 0-d one.
    base = values(r, (3, 4), torch.float32)
    ours, oracle = base.clone().t(), base.clone().t()
    assert not ours.is_contiguous()
    dist.all_reduce(ours, op=ReduceOp.MAX)
    dist.all_reduce(oracle, op=ReduceOp.MAX, group=gloo)
    same(ours, oracle, "all_reduce of a transposed tensor")
    ours, oracle = torch.tensor(float(r + 1)), torch.tensor(float(r + 1))
    dist.all_reduce(ours)
    dist.all_reduce(oracle, group=gloo)
    same(ours, oracle, "all_reduce 0-d")


def check_all_reduce_coalesced(gloo, r, n):
    for dtype in (torch.float32, torch.int64):
        inputs = [values(r, (3,), dtype), values(r, (2, 2), dtype, 1)]
        ours, oracle = [t.clone() for t in inputs], [t.clone() for t in inputs]
        dist.all_reduce_coalesced(ours, op=ReduceOp.SUM)
        dist.all_reduce_coalesced(oracle, op=ReduceOp.SUM, group=gloo)
        for i in range(2):
            same(ours[i], oracle[i], f"all_reduce_coalesced {dtype} [{i}]")


def check_broadcast(gloo, r, n):
    for root in range(n):
        for dtype in DTYPES:
            x = values(r, (4, 2), dtype, root)
            ours, oracle = x.clone(), x.clone()
            dist.broadcast(ours, src=root)
            dist.broadcast(oracle, src=root, group=gloo)
            same(ours, oracle, f"broadcast from {root} {dtype}")
    flags = torch.tensor([r % 2 == 0, r == 1, True])
    ours = flags.clone()
    dist.broadcast(ours, src=n - 1)
    oracle = flags.to(torch.uint8)
    dist.broadcast(oracle, src=n - 1, group=gloo)
    same(ours, oracle.bool(), "broadcast bool")


def check_reduce(gloo, r, n):
    for root in range(n):
        for salt, op in enumerate(REDUCTIONS):
            for dtype in (torch.float32, torch.int32, torch.uint8):
                x = values(r, (3,), dtype, salt + root)
                ours, oracle = x.clone(), x.clone()
                dist.reduce(ours, dst=root, op=op)
                dist.reduce(oracle, dst=root, op=op, group=gloo)
                if r == root:
                    same(ours, oracle, f"reduce {op} to {root} {dtype}")


def check_all_gather(gloo, r, n):
    for shape in [(2, 3), ()]:
        for dtype in (torch.float32, torch.float16, torch.int8, torch.int64):
            x = values(r, shape, dtype)
            ours = [torch.full(shape, -9).to(dtype) for _ in range(n)]
            oracle = [torch.full(shape, -9).to(dtype) for _ in range(n)]
            dist.all_gather(ours, x)
            dist.all_gather(oracle, x, group=gloo)
            for i in range(n):
                same(ours[i], oracle[i], f"all_gather {shape} {dtype} [{i}]")
    flags = torch.tensor([r == 0, r != 0])
    ours = [torch.zeros(2, dtype=torch.bool) for _ in range(n)]
    oracle = [torch.zeros(2, dtype=torch.uint8) for _ in range(n)]
    dist.all_gather(ours, flags)
    dist.all_gather(oracle, flags.to(torch.uint8), group=gloo)
    for i in range(n):
        same(ours[i], oracle[i].bool(), f"all_gather bool [{i}]")


def check_all_gather_into_tensor(gloo, r, n):
    x = values(r, (2, 3), torch.int32)
    parts = [torch.zeros(2, 3, dtype=torch.int32) for _ in range(n)]
    dist.all_gather(parts, x, group=gloo)
    # The output concatenated along dimension 0, or stacked.
    for shape in [(2 * n, 3), (n, 2, 3)]:
        ours = torch.zeros(shape, dtype=torch.int32)
        all_gather_into_tensor(ours, x)
        same(ours, torch.cat(parts).view(shape), f"all_gather_into_tensor {shape}")


def check_all_gather_coalesced(gloo, r, n):
    inputs = [values(r, (3,), torch.float64), values(r, (2, 2), torch.float64, 1)]
    ours = [[torch.zeros(3, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64)] for _ in range(n)]
    oracle = [[torch.zeros(3, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64)] for _ in range(n)]
    dist.all_gather_coalesced(ours, inputs)
    dist.all_gather_coalesced(oracle, inputs, group=gloo)
    for i in range(n):
        for j in range(2):
            same(ours[i][j], oracle[i][j], f"all_gather_coalesced [{i}][{j}]")


def check_gather(gloo, r, n):
    for root in (0, n - 1):
        for dtype in (torch.float32, torch.uint8):
            x = values(r, (2, 2), dtype, root)
            ours = [torch.zeros(2, 2, dtype=dtype) for _ in range(n)] if r == root else None
            oracle = [torch.zeros(2, 2, dtype=dtype) for _ in range(n)] if r == root else None
            dist.gather(x, ours, dst=root)
            dist.gather(x, oracle, dst=root, group=gloo)
            if r == root:
                for i in range(n):
                    same(ours[i], oracle[i], f"gather to {root} {dtype} [{i}]")


def check_scatter(gloo, r, n):
    for root in (0, n - 1):
        for dtype in (torch.float64, torch.int32):
            chunks = [values(i, (3,), dtype, root) for i in range(n)] if r == root else None
            ours, oracle = torch.zeros(3, dtype=dtype), torch.zeros(3, dtype=dtype)
            dist.scatter(ours, chunks, src=root)
            dist.scatter(oracle, chunks, src=root, group=gloo)
            same(ours, oracle, f"scatter from {root} {dtype}")


def check_reduce_scatter(gloo, r, n):
    # gloo has no reduce_scatter: its oracle is gloo's all_reduce of the stacked inputs, row r.
    for op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.PRODUCT):
        for dtype in (torch.float32, torch.int64):
            inputs = [values(r, (2, 3), dtype, j) for j in range(n)]
            reduced = torch.stack(inputs)
            dist.all_reduce(reduced, op=op, group=gloo)
            ours = torch.zeros(2, 3, dtype=dtype)
            dist.reduce_scatter(ours, inputs, op=op)
            same(ours, reduced[r], f"reduce_scatter {op} {dtype}")
            ours = torch.zeros(2, 3, dtype=dtype)
            reduce_scatter_tensor(ours, torch.cat(inputs), op=op)
            same(ours, reduced[r], f"reduce_scatter_tensor {op} {dtype}")


def check_all_to_all(gloo, r, n):
    # Even blocks, no split sizes: row block j of this rank to rank j.
    x = values(r, (2 * n, 3), torch.float32)
    ours, oracle = torch.zeros_like(x), torch.zeros_like(x)
    dist.all_to_all_single(ours, x)
    dist.all_to_all_single(oracle, x, group=gloo)
    same(ours, oracle, "all_to_all_single even")
    # Uneven blocks: rank i sends (i + j) % 3 + 1 rows to rank j.
    in_splits = [(r + j) % 3 + 1 for j in range(n)]
    out_splits = [(i + r) % 3 + 1 for i in range(n)]
    x = values(r, (sum(in_splits), 2), torch.int64)
    ours = torch.zeros(sum(out_splits), 2, dtype=torch.int64)
    oracle = torch.zeros_like(ours)
    dist.all_to_all_single(ours, x, out_splits, in_splits)
    dist.all_to_all_single(oracle, x, out_splits, in_splits, group=gloo)
    same(ours, oracle, f"all_to_all_single uneven {in_splits} -> {out_splits}")
    # A list of tensors (gloo has no all_to_all): gloo's all_to_all_single of the same blocks is the oracle.
    inputs = [values(r, ((r + j) % 2 + 1,), torch.float64, j) for j in range(n)]
    ours = [torch.zeros((i + r) % 2 + 1, dtype=torch.float64) for i in range(n)]
    oracle = torch.zeros(sum(t.numel() for t in ours), dtype=torch.float64)
    dist.all_to_all(ours, inputs)
    dist.all_to_all_single(
        oracle, torch.cat(inputs), [t.numel() for t in ours], [t.numel() for t in inputs], group=gloo
    )
    same(torch.cat(ours), oracle, "all_to_all of a list, uneven")


def check_point_to_point(gloo, r, n):
    # Every other rank sends to rank 0, which receives from any source and learns who sent; then rank 0 answers each.
    if r == 0:
        senders = set()
        for _ in range(n - 1):
            buffer = torch.zeros(4, dtype=torch.int32)
            source = dist.recv(buffer, tag=5)
            same(buffer, values(source, (4,), torch.int32), f"recv from any source (got {source})")
            senders.add(source)
        assert senders == set(range(1, n)), senders
        for peer in range(1, n):
            dist.send(values(peer, (2,), torch.float64, 9) * 10, dst=peer, tag=6)
    else:
        dist.send(values(r, (4,), torch.int32), dst=0, tag=5)
        buffer = torch.zeros(2, dtype=torch.float64)
        assert dist.recv(buffer, src=0, tag=6) == 0
        same(buffer, values(r, (2,), torch.float64, 9) * 10, "recv from rank 0")
    # isend/irecv between neighbours, the sender first on even ranks (each call completes before it returns).
    if n % 2 == 0:
        peer = r + 1 if r % 2 == 0 else r - 1
        out, into = values(r, (3,), torch.float32), torch.zeros(3)
        first, second = (
            (dist.isend(out, peer), dist.irecv(into, peer))
            if r % 2 == 0
            else (dist.irecv(into, peer), dist.isend(out, peer))
        )
        first.wait()
        second.wait()
        same(into, values(peer, (3,), torch.float32), "isend/irecv")


def check_work(gloo, r, n):
    # async_op: a Work that completes at wait(), whose future holds the output tensors, as DDP's hooks read them
    # (async_test.py checks that it is pending before that).
    x = values(r, (4,), torch.float32)
    work = dist.all_reduce(x, async_op=True)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    future = work.get_future()
    result = future.wait()
    assert isinstance(result, list) and len(result) == 1 and result[0].data_ptr() == x.data_ptr(), result
    oracle = values(r, (4,), torch.float32)
    dist.all_reduce(oracle, group=gloo)
    same(x, oracle, "async all_reduce")
    chained = future.then(lambda f: f.value()[0] * 2).wait()
    same(chained, oracle * 2, "a future's then()")
    dist.barrier()
    barrier = dist.barrier(async_op=True)
    assert barrier.wait() and barrier.is_completed()


def check_objects(gloo, r, n):
    # Pickled objects travel as uint8 tensors (sizes, then the bytes).
    objects = [{"rank": r, "text": "x" * (r + 1)}, None]
    ours = [None] * n
    oracle = [None] * n
    dist.all_gather_object(ours, objects[0])
    dist.all_gather_object(oracle, objects[0], group=gloo)
    assert ours == oracle == [{"rank": i, "text": "x" * (i + 1)} for i in range(n)], (ours, oracle)
    ours = [r, f"from {r}"]
    dist.broadcast_object_list(ours, src=n - 1)
    assert ours == [n - 1, f"from {n - 1}"], ours


def check_unsupported(gloo, r, n):
    # Refused on every rank before any traffic, naming the operation and the dtype.
    with raises(lockstep.DTypeError) as caught:
        dist.all_reduce(torch.ones(3), op=ReduceOp.BAND)
    text = str(caught.error)
    assert "band" in text and "float32" in text, text
    with raises(lockstep.UnsupportedError) as caught:
        dist.all_reduce(torch.ones(2, dtype=torch.bool), op=ReduceOp.AVG)
    assert "AVG" in str(caught.error) and "bool" in str(caught.error), str(caught.error)
    with raises(lockstep.UnsupportedError) as caught:
        dist.broadcast(torch.eye(2).to_sparse(), src=0)
    assert "sparse_coo" in str(caught.error) and ".to_dense()" in str(caught.error), str(caught.error)
    # Nothing was left half done: the next collective works.
    x = torch.ones(2)
    dist.all_reduce(x)
    same(x, torch.full((2,), float(n)), "all_reduce after the refused calls")


CHECKS = [
    check_backend,
    check_all_reduce,
    check_all_reduce_coalesced,
    check_broadcast,
    check_reduce,
    check_all_gather,
    check_all_gather_into_tensor,
    check_all_gather_coalesced,
    check_gather,
    check_scatter,
    check_reduce_scatter,
    check_all_to_all,
    check_point_to_point,
    check_work,
    check_objects,
    check_unsupported,
]


def main():
    lockstep.torch.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    for check in CHECKS:
        check(gloo, r, n)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    run("torch_collectives", main)
