"""Debug mode on the checking backend "lockstep_gloo", under mpirun (2 and 3 ranks): a collective that differs on the
last rank (its shape, its dtype, the collective itself, the reduce op, the root; what TORCH_DISTRIBUTED_DEBUG=DETAIL
compares and more) raises lockstep.SignatureMismatchError on every rank, with the same text everywhere naming each
rank's line in this file, before gloo sees the call; afterwards the group works on (no rank is left inside gloo).

Usage: mpirun -n N python3 checked_mismatch_test.py [init|env]
  init (default): debug mode from lockstep.init(debug=True)
  env: debug mode from the environment (LOCKSTEP_DEBUG_MODE=1, set by the caller)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from harness import caller_line, raises, run  # noqa: E402

THIS_FILE = os.path.basename(__file__)


def mismatches(last):
    """(what the report must name, the call on this rank): the last rank's call differs in one respect."""
    return [
        ("shape", lambda: dist.all_reduce(torch.ones(5 if last else 4))),
        ("dtype", lambda: dist.all_reduce(torch.ones(4, dtype=torch.float64 if last else torch.float32))),
        (
            "mismatched operations",
            lambda: dist.broadcast(torch.ones(4), 0) if last else dist.all_reduce(torch.ones(4)),
        ),
        (
            "reduce op",
            lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.MAX if last else dist.ReduceOp.SUM),
        ),
        ("root", lambda: dist.broadcast(torch.ones(4), 1 if last else 0)),
        ("root", lambda: dist.reduce(torch.ones(4), 1 if last else 0)),
        (
            "shape",
            lambda: dist.all_gather(
                [torch.zeros(3 if last else 2) for _ in range(dist.get_world_size())], torch.ones(3 if last else 2)
            ),
        ),
        (
            "mismatched operations",
            lambda: dist.barrier() if last else dist.all_reduce(torch.ones(1)),
        ),
    ]


def same_everywhere(text, gloo, n):
    texts = [None] * n
    dist.all_gather_object(texts, text, group=gloo)
    return all(t == text for t in texts), texts


def main():
    how = sys.argv[1] if len(sys.argv) > 1 else "init"
    if how == "init":
        lockstep.init(debug=True)
    else:
        assert os.environ.get("LOCKSTEP_DEBUG_MODE") == "1", "run with LOCKSTEP_DEBUG_MODE=1"
    lockstep.torch.init_process_group(lockstep.torch.GLOO_BACKEND)
    r, n = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    assert group.debug, "debug mode is off"
    gloo = dist.new_group(backend="gloo")

    # The first: each rank's own line in the text, as every rank saw it.
    with raises(lockstep.SignatureMismatchError) as caught:
        if r == n - 1:
            line = caller_line() + 1
            dist.all_reduce(torch.zeros(5))
        else:
            line = caller_line() + 1
            dist.all_reduce(torch.zeros(4))
    text = str(caught.error)
    same, texts = same_everywhere(text, gloo, n)
    assert same, texts
    lines = [None] * n
    dist.all_gather_object(lines, line, group=gloo)
    for rank, rank_line in enumerate(lines):
        assert f"{THIS_FILE}:{rank_line}" in text, (rank, rank_line, text)
    assert "calls carried by" not in text  # the carrier is the hang report's business
    assert "tag='torch allreduce'" in text or "torch allreduce" in text, text

    for word, call in mismatches(r == n - 1):
        with raises(lockstep.SignatureMismatchError) as caught:
            call()
        text = str(caught.error)
        assert word in text, (word, text)
        same, texts = same_everywhere(text, gloo, n)
        assert same, (word, texts)
        # Nothing reached gloo: the next call pairs up everywhere.
        x = torch.ones(2)
        dist.all_reduce(x)
        assert torch.equal(x, torch.full((2,), float(n))), (word, x)

    return r, n


if __name__ == "__main__":
    run("checked_mismatch", main)
