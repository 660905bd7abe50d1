"""The checking backend "lockstep_gloo" against plain gloo, under mpirun (2 and 3 ranks), with debug mode on (each
call's signature checked) and then off (the watchdog only): every collective torch.distributed offers gives the same
results on the wrapper as on a gloo group of the same ranks, bit for bit, from the same inputs; where gloo refuses a
collective, the wrapper raises gloo's own error; asynchronous calls complete through wait() and get_future(); a group
of the last ranks (new_group) works for its members; and every call leaves lockstep's board once its Work completed.

Run by run_job.py: mpirun -n N python3 checked_collectives_test.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from harness import run  # noqa: E402


def values(r, shape, dtype=torch.float32, salt=0):
    """Integral values (exact sums in any order) that differ per rank."""
    generator = torch.Generator().manual_seed(97 * r + salt)
    return torch.randint(-8, 9, shape, generator=generator).to(dtype)


def global_rank(group, k):
    """The world rank of the group's rank k (the world group has no mapping of its own in torch 1.13)."""
    return k if group is None or group is dist.group.WORLD else dist.get_global_rank(group, k)


def cases(r, n):
    """Each collective as a function of its group, returning what it produced (tensors to compare); r is the rank in
    the group, n its size."""

    def all_reduce(group, op=dist.ReduceOp.SUM, dtype=torch.float32):
        x = values(r, (3, 2), dtype)
        dist.all_reduce(x, op=op, group=group)
        return [x]

    def broadcast(group):
        x = values(r, (5,), torch.int64)
        dist.broadcast(x, global_rank(group, n - 1), group=group)
        return [x]

    def reduce(group):
        x = values(r, (4,))
        dist.reduce(x, global_rank(group, 0), group=group)
        return [x]

    def all_gather(group):
        outputs = [torch.zeros(2, 3) for _ in range(n)]
        dist.all_gather(outputs, values(r, (2, 3)), group=group)
        return outputs

    def all_gather_into_tensor(group):
        output = torch.zeros(2 * n, 3)
        dist.all_gather_into_tensor(output, values(r, (2, 3)), group=group)
        return [output]

    def all_gather_object(group):
        gathered = [None] * n
        dist.all_gather_object(gathered, {"rank": r, "word": "x" * r}, group=group)
        return [torch.tensor([len(str(o)) for o in gathered])]

    def gather(group):
        root = global_rank(group, 0)
        outputs = [torch.zeros(3) for _ in range(n)] if r == 0 else None
        dist.gather(values(r, (3,)), outputs, dst=root, group=group)
        return outputs or []

    def scatter(group):
        root = global_rank(group, n - 1)
        output = torch.zeros(2)
        inputs = [values(j, (2,), salt=5) for j in range(n)] if r == n - 1 else None
        dist.scatter(output, inputs, src=root, group=group)
        return [output]

    def reduce_scatter(group):
        output = torch.zeros(2)
        dist.reduce_scatter(output, [values(r, (2,), salt=j) for j in range(n)], group=group)
        return [output]

    def reduce_scatter_tensor(group):
        output = torch.zeros(2)
        dist.reduce_scatter_tensor(output, values(r, (2 * n,)), group=group)
        return [output]

    def all_to_all_single(group):
        output = torch.zeros(n * 2)
        dist.all_to_all_single(output, values(r, (n * 2,)), group=group)
        return [output]

    def all_to_all_single_uneven(group):
        # Rank r sends j + 1 rows to rank j and receives r + 1 rows from each.
        send = [j + 1 for j in range(n)]
        output = torch.zeros(n * (r + 1), 2)
        dist.all_to_all_single(output, values(r, (sum(send), 2)), [r + 1] * n, send, group=group)
        return [output]

    def all_to_all(group):
        outputs = [torch.zeros(2) for _ in range(n)]
        dist.all_to_all(outputs, [values(r, (2,), salt=j) for j in range(n)], group=group)
        return outputs

    def barrier(group):
        dist.barrier(group=group)
        return []

    def broadcast_object_list(group):
        objects = [{"from": r}, [r] * 3] if r == 0 else [None, None]
        dist.broadcast_object_list(objects, src=global_rank(group, 0), group=group)
        return [torch.tensor([objects[0]["from"]] + objects[1])]

    return [
        ("all_reduce", all_reduce),
        ("all_reduce_max", lambda g: all_reduce(g, dist.ReduceOp.MAX)),
        ("all_reduce_product_int", lambda g: all_reduce(g, dist.ReduceOp.PRODUCT, torch.int32)),
        ("all_reduce_bool", lambda g: all_reduce(g, dist.ReduceOp.SUM, torch.bool)),
        ("broadcast", broadcast),
        ("reduce", reduce),
        ("all_gather", all_gather),
        ("all_gather_into_tensor", all_gather_into_tensor),
        ("all_gather_object", all_gather_object),
        ("gather", gather),
        ("scatter", scatter),
        ("reduce_scatter", reduce_scatter),
        ("reduce_scatter_tensor", reduce_scatter_tensor),
        ("all_to_all_single", all_to_all_single),
        ("all_to_all_single_uneven", all_to_all_single_uneven),
        ("all_to_all", all_to_all),
        ("barrier", barrier),
        ("broadcast_object_list", broadcast_object_list),
    ]


def outcome(call, group):
    """What a call gave: ("ok", tensors) or ("error", type name, message)."""
    try:
        return ("ok", call(group))
    except RuntimeError as error:  # gloo's refusal of a collective it lacks
        return ("error", type(error).__name__, str(error))


def compare_all(r, n, checked, gloo, label):
    supported = 0
    for name, call in cases(r, n):
        ours, theirs = outcome(call, checked), outcome(call, gloo)
        assert ours[0] == theirs[0], f"{label} {name}: lockstep_gloo gave {ours}, gloo gave {theirs}"
        if ours[0] == "error":
            assert ours[1:] == theirs[1:], f"{label} {name}: lockstep_gloo raised {ours[1:]}, gloo {theirs[1:]}"
            continue
        supported += 1
        assert len(ours[1]) == len(theirs[1]), f"{label} {name}: {len(ours[1])} outputs, gloo {len(theirs[1])}"
        for a, b in zip(ours[1], theirs[1]):
            assert a.dtype == b.dtype and torch.equal(a, b), f"{label} {name}: lockstep_gloo {a} != gloo {b}"
    return supported


def check_async(r, n, checked):
    x = values(r, (4,))
    expected = sum(values(j, (4,)) for j in range(n))
    work = dist.all_reduce(x, async_op=True, group=checked)
    work.wait()
    assert torch.equal(x, expected), (x, expected)
    y = values(r, (4,))
    future = dist.all_reduce(y, async_op=True, group=checked).get_future()
    assert torch.equal(future.wait()[0], expected)
    # Several outstanding at once, waited for in reverse order.
    tensors = [values(r, (4,), salt=k) for k in range(4)]
    works = [dist.all_reduce(t, async_op=True, group=checked) for t in tensors]
    for work in reversed(works):
        work.wait()
    for k, t in enumerate(tensors):
        assert torch.equal(t, sum(values(j, (4,), salt=k) for j in range(n))), k


def check_board_empties(group):
    """Every completed call leaves lockstep's board: within a few of the watcher's periods, none is pending."""
    deadline = time.monotonic() + 5.0
    while group._pending and time.monotonic() < deadline:
        time.sleep(lockstep.torch_checked.WATCH_PERIOD)
    assert not group._pending, f"{len(group._pending)} calls still on the board"


def main():
    lockstep.torch.init_process_group(lockstep.torch.GLOO_BACKEND)
    r, n = dist.get_rank(), dist.get_world_size()
    checked = dist.group.WORLD
    assert isinstance(checked, lockstep.torch.ProcessGroupChecked), type(checked)
    assert dist.get_backend() == "lockstep_gloo", dist.get_backend()
    gloo = dist.new_group(backend="gloo")
    for debug in (True, False):
        checked.debug = debug
        supported = compare_all(r, n, checked, gloo, f"debug={debug}")
        assert supported >= 12, f"only {supported} collectives ran on gloo"
        check_async(r, n, checked)
        check_board_empties(checked)
    # A group of the last ranks, made by every rank as new_group requires; only its members call into it.
    members = list(range(1, n)) if n > 2 else [0, 1]
    sub_checked = dist.new_group(members, backend=lockstep.torch.GLOO_BACKEND)
    sub_gloo = dist.new_group(members, backend="gloo")
    if r in members:
        assert isinstance(sub_checked, lockstep.torch.ProcessGroupChecked), type(sub_checked)
        sub_checked.debug = True
        for name in ("all_reduce", "broadcast", "all_gather"):
            call = dict(cases(dist.get_rank(sub_gloo), len(members)))[name]
            ours, theirs = outcome(call, sub_checked), outcome(call, sub_gloo)
            assert ours[0] == theirs[0] == "ok", (name, ours, theirs)
            for a, b in zip(ours[1], theirs[1]):
                assert torch.equal(a, b), (name, a, b)
        check_board_empties(sub_checked)
    dist.barrier()
    return r, n


if __name__ == "__main__":
    run("checked_collectives", main)
