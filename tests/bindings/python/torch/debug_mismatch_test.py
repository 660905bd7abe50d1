"""Debug mode through the backend "lockstep", under mpirun (2 and 3 ranks): torch.distributed.all_reduce of a [3] tensor
on rank 0 and of a [4] tensor on the others raises lockstep.SignatureMismatchError on every rank, with the same text
everywhere, naming each rank's shape and its line in this file (lockstep skips its own frames and torch.distributed's).
Then arguments that the backend itself refuses on the last rank only (a sparse tensor, an op the dtype lacks, a list of
the wrong length, outputs of the wrong shape): every rank raises the same lockstep.CallRejectedError naming that rank
and the reason, at once, instead of waiting for the watchdog.

Usage: mpirun -n N python3 debug_mismatch_test.py [init|env]
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


def check_refused_on_one_rank(r, n, gloo):
    last = r == n - 1
    cases = [
        ("sparse_coo", lambda: dist.all_reduce(torch.eye(3).to_sparse() if last else torch.eye(3))),
        (
            "AVG",
            lambda: dist.all_reduce(
                torch.ones(3, dtype=torch.bool if last else torch.float32),
                op=dist.ReduceOp.AVG if last else dist.ReduceOp.SUM,
            ),
        ),
        (
            "needs one tensor per rank",
            lambda: dist.reduce_scatter(torch.zeros(2), [torch.ones(2) for _ in range(n - 1 if last else n)]),
        ),
        ("elements", lambda: dist.all_gather([torch.zeros(3 if last else 2) for _ in range(n)], torch.ones(2))),
    ]
    for word, call in cases:
        with raises(lockstep.CallRejectedError) as caught:
            call()
        text = str(caught.error)
        assert f"Process {n - 1}" in text and word in text, (word, text)
        texts = [None] * n
        dist.all_gather_object(texts, text, group=gloo)
        assert all(t == text for t in texts), texts
        # Nothing is left half-done: the next call works everywhere.
        x = torch.ones(2)
        dist.all_reduce(x)
        assert torch.equal(x, torch.full((2,), float(n))), (word, x)


def main():
    how = sys.argv[1] if len(sys.argv) > 1 else "init"
    if how == "init":
        lockstep.init(debug=True)
    else:
        assert os.environ.get("LOCKSTEP_DEBUG_MODE") == "1", "run with LOCKSTEP_DEBUG_MODE=1"
    lockstep.torch.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    assert dist.group.WORLD.comm.debug, "debug mode is off"
    gloo = dist.new_group(backend="gloo")

    with raises(lockstep.SignatureMismatchError) as caught:
        if r == 0:
            line = caller_line() + 1
            dist.all_reduce(torch.zeros(3))
        else:
            line = caller_line() + 1
            dist.all_reduce(torch.zeros(4))
    text = str(caught.error)
    assert caught.error.status == 1 and caught.error.name == "LOCKSTEP_ERROR_SIGNATURE_MISMATCH", caught.error.name

    # Each rank's line, as every rank saw it (gathered through gloo).
    lines = [None] * n
    dist.all_gather_object(lines, line, group=gloo)
    others = "Process 1" if n == 2 else f"Processes 1-{n - 1}"
    for who, shape, site in [("Process 0", 3, lines[0]), (others, 4, lines[1])]:
        assert f"  - {who}: [{shape}]" in text, (who, shape, text)
        assert f"  - {who}: {THIS_FILE}:{site} in main" in text, (who, site, text)
    assert lines[0] != lines[1] and all(site == lines[1] for site in lines[1:]), lines
    assert "torch/distributed" not in text and "lockstep/torch.py" not in text, text

    # The same text on every rank.
    texts = [None] * n
    dist.all_gather_object(texts, text, group=gloo)
    assert all(t == text for t in texts), texts

    # The error left the group usable: the next call, the same on every rank, works.
    x = torch.ones(4)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((4,), float(n))), x

    check_refused_on_one_rank(r, n, gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    run("torch_debug_mismatch", main)
