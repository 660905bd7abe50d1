"""Asynchronous work through the backend "lockstep", under mpirun (2 and 3 ranks).

- dist.all_reduce(async_op=True) returns pending work: rank 0 checks that its Work is not completed while the other
  ranks are provably not in the call yet (they wait for rank 0's go-ahead over gloo), then lets them in.
- Work.wait(timeout) raises lockstep.TimeoutError (also the builtin TimeoutError) while the others are held back,
  and a later wait() returns; get_future() completes with the output list, also through .then().
- batch_isend_irecv around a ring, receives first and sends first; irecv from any source names the sender.
- An operation's error reaches wait() and the future: a debug-mode shape mismatch raises SignatureMismatchError from
  wait() and from get_future().wait() on every rank.
- Sparse tensors are refused before any collective, on every rank; in debug mode a sparse tensor on one rank only
  makes every rank raise the same CallRejectedError naming that rank, instead of leaving the others waiting.

Run by run_job.py: mpirun -n N python3 async_test.py
"""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from harness import expect_raises, run  # noqa: E402


def go_ahead(r, n, gloo):
    """Rank 0 tells the others (over gloo) that they may enter their next lockstep call."""
    flag = torch.zeros(1)
    dist.broadcast(flag, 0, group=gloo)


def check_pending(r, n, gloo):
    x = torch.full((5,), float(r + 1))
    if r == 0:
        work = dist.all_reduce(x, async_op=True)
        # The others wait for go_ahead: the allreduce cannot have completed.
        assert not work.is_completed(), "all_reduce(async_op=True) returned completed work before the others joined"
        error = expect_raises(TimeoutError, work.wait, datetime.timedelta(seconds=0.2))
        assert isinstance(error, lockstep.TimeoutError), type(error)
        assert "did not complete within 0.2 s" in str(error), error
        go_ahead(r, n, gloo)
        assert work.wait() is True
        assert work.is_completed() and work.is_success()
    else:
        go_ahead(r, n, gloo)
        work = dist.all_reduce(x, async_op=True)
        work.wait()
    expected = n * (n + 1) / 2
    assert x.tolist() == [expected] * 5, x
    assert work.result()[0] is x


def check_future(r, n):
    x = torch.full((3,), float(r))
    future = dist.all_reduce(x, async_op=True).get_future()
    doubled = future.then(lambda f: f.value()[0] * 2)
    assert future.wait()[0] is x
    assert doubled.wait().tolist() == [n * (n - 1)] * 3, doubled.wait()
    # A non-contiguous tensor: the result is copied back before the future completes.
    base = torch.full((4, 2), float(r + 1))
    column = base[:, 1]
    dist.all_reduce(column, async_op=True).get_future().wait()
    assert base[:, 1].tolist() == [n * (n + 1) / 2] * 4 and base[:, 0].tolist() == [float(r + 1)] * 4, base


def check_batch(r, n, recv_first):
    right, left = (r + 1) % n, (r - 1) % n
    out = torch.arange(4, dtype=torch.float32) + 10 * r
    into = torch.zeros(4)
    send = dist.P2POp(dist.isend, out, right)
    recv = dist.P2POp(dist.irecv, into, left)
    works = dist.batch_isend_irecv([recv, send] if recv_first else [send, recv])
    for work in reversed(works):
        work.wait()
    assert into.tolist() == (torch.arange(4, dtype=torch.float32) + 10 * left).tolist(), (recv_first, into)


def check_any_source(r, n):
    if r == 0:
        senders = set()
        for _ in range(n - 1):
            x = torch.zeros(2, dtype=torch.int64)
            sender = dist.recv(x)
            assert x.tolist() == [sender, sender], (sender, x)
            senders.add(sender)
        assert senders == set(range(1, n)), senders
    else:
        dist.send(torch.tensor([r, r]), 0)


def check_errors(r, n, gloo):
    group = dist.new_group()
    group.comm.debug = True
    x = torch.ones(3 if r == 0 else 4)
    work = dist.all_reduce(x, group=group, async_op=True)
    error = expect_raises(lockstep.SignatureMismatchError, work.wait)
    assert "Process 0" in str(error), error
    expect_raises(lockstep.SignatureMismatchError, work.get_future().wait)
    assert work.is_completed() and not work.is_success() and work.exception() is error

    sparse = torch.eye(3).to_sparse()
    error = expect_raises(lockstep.UnsupportedError, dist.all_reduce, sparse)
    assert "layout torch.sparse_coo" in str(error) and ".to_dense()" in str(error), error
    # One rank's sparse tensor in debug mode: every rank raises the same CallRejectedError at once, naming that rank.
    mine = sparse if r == n - 1 else torch.eye(3)
    error = expect_raises(lockstep.CallRejectedError, dist.all_reduce, mine, group=group)
    assert f"Process {n - 1} could not start it" in str(error) and "sparse_coo" in str(error), error
    dist.barrier(group=gloo)


def main():
    dist.init_process_group("lockstep")
    r, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    check_pending(r, n, gloo)
    check_future(r, n)
    for recv_first in (True, False):
        check_batch(r, n, recv_first)
    check_any_source(r, n)
    check_errors(r, n, gloo)
    dist.barrier()
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    run("torch_async", main)
