"""lockstep's non-blocking operations from Python (async_op=True, lockstep.Request), under mpirun on 2 ranks: every
collective and send/recv against closed-form values (numpy arrays, torch CPU tensors through DLPack), receives posted
before sends on both ranks (eager and rendezvous sizes), 100 outstanding requests waited in reverse order, a wait on
another thread (with the GIL released), wait(timeout) and test() loops, a debug-mode mismatch raised at wait on every
rank with the caller's line, and requests dropped without a wait.

Where a check needs one rank to be late, the late rank waits for a message the other sends only after its own check,
so nothing depends on timing or on the machine's load.

Run by run_job.py: mpirun -n 2 python3 async_test.py
"""
import gc
import os
import threading
import warnings

import numpy as np

import lockstep
from harness import caller_line, raises, run, run_checks

THIS_FILE = os.path.basename(__file__)
LARGE = 4 << 20  # bytes: past every MPI's eager limit, so sends are rendezvous


def same_on_every_rank(comm, text):
    """Asserts that `text` (its first 300 bytes) is the same on every rank."""
    n = comm.size
    row = np.frombuffer(text.encode()[:300].ljust(300), dtype=np.uint8)
    rows = comm.allgather(row).numpy().reshape(n, 300)
    assert all((rows[i] == rows[0]).all() for i in range(n)), "the ranks' messages differ"


def check_every_collective(comm, r, n):
    # Every collective issued before any is waited for, then waited in issue order; result() is what the blocking
    # call returns.
    b = np.full((2, 3), r, dtype=np.int32)
    x = np.arange(4, dtype=np.float64) + r
    src, dst = np.full(3, r + 1.0, np.float32), np.zeros(3, np.float32)
    red = np.full(3, r + 1, dtype=np.int64)
    whole = np.arange(2 * n, dtype=np.float32) * 3 if r == 0 else None
    piece = np.zeros(2, dtype=np.float32)
    rows = np.arange(2 * n, dtype=np.float64) + r
    a2a_in = np.array([100 * r + j for j in range(n)], dtype=np.int32)
    requests = {
        "barrier": comm.barrier(async_op=True),
        "broadcast": comm.broadcast(b, root=n - 1, async_op=True),
        "allreduce": comm.allreduce(x, async_op=True),
        "allreduce_out": comm.allreduce(src, op="max", out=dst, async_op=True),
        "reduce": comm.reduce(red, root=0, op="sum", async_op=True),
        "allgather": comm.allgather(np.array([r, 10 * r], dtype=np.int32), async_op=True),
        "gather": comm.gather(np.full(2, r, dtype=np.int64), root=n - 1, async_op=True),
        "scatter": comm.scatter(whole, piece, root=0, async_op=True),
        "reduce_scatter": comm.reduce_scatter(rows, async_op=True),
        "alltoall": comm.alltoall(a2a_in, async_op=True),
        "gather_uneven": comm.gather_uneven(np.full((r + 1, 2), r, dtype=np.float32), async_op=True),
    }
    for name, request in requests.items():
        assert isinstance(request, lockstep.Request), (name, request)
        assert name.split("_out")[0] in repr(request) and THIS_FILE in repr(request), repr(request)
    for name, request in requests.items():
        assert request.wait() is True, name
        assert request.is_completed() and request.test(), name
        assert "completed" in repr(request), repr(request)
    assert requests["barrier"].result() is None
    assert requests["broadcast"].result() is b
    np.testing.assert_array_equal(b, np.full((2, 3), n - 1))
    assert requests["allreduce"].result() is x
    np.testing.assert_array_equal(x, n * np.arange(4) + n * (n - 1) / 2)
    assert requests["allreduce_out"].result() is dst
    np.testing.assert_array_equal(dst, np.full(3, float(n)))
    np.testing.assert_array_equal(src, np.full(3, r + 1.0))
    assert requests["reduce"].result() is red
    np.testing.assert_array_equal(red, np.full(3, n * (n + 1) // 2 if r == 0 else r + 1))
    g = requests["allgather"].result()
    assert isinstance(g, lockstep.Tensor) and g.shape == (2 * n,)
    np.testing.assert_array_equal(g.numpy(), np.array([[k, 10 * k] for k in range(n)]).ravel())
    gathered = requests["gather"].result()
    if r == n - 1:
        np.testing.assert_array_equal(gathered.numpy(), np.repeat(np.arange(n), 2))
    else:
        assert gathered is None
    assert requests["scatter"].result() is piece
    np.testing.assert_array_equal(piece, np.array([6 * r, 6 * r + 3], dtype=np.float32))
    rs = requests["reduce_scatter"].result()
    np.testing.assert_array_equal(rs.numpy(), n * np.arange(2 * r, 2 * r + 2) + n * (n - 1) / 2)
    np.testing.assert_array_equal(requests["alltoall"].result().numpy(), [100 * i + r for i in range(n)])
    uneven = requests["gather_uneven"].result()
    expected = np.concatenate([np.full((k + 1, 2), k, dtype=np.float32) for k in range(n)])
    np.testing.assert_array_equal(uneven.numpy(), expected)
    assert requests["gather_uneven"].source is None
    # result() waits by itself; a second wait returns at once.
    y = np.ones(5, dtype=np.float32)
    request = comm.allreduce(y, op="sum", out=None, async_op=True)
    assert request.result() is y and request.wait() and request.wait(timeout=0)
    np.testing.assert_array_equal(y, np.full(5, float(n)))


def check_objects_kept_alive(comm, r, n):
    # The request holds what the call was given: a temporary array, a DLPack object without another reference.
    request = comm.allreduce(np.full(1000, r + 1.0), async_op=True)
    gc.collect()
    np.testing.assert_array_equal(request.result(), np.full(1000, n * (n + 1) / 2))
    request = comm.allgather(lockstep.as_tensor(np.full(3, r, dtype=np.int32)), async_op=True)
    gc.collect()
    np.testing.assert_array_equal(request.result().numpy(), np.repeat(np.arange(n, dtype=np.int32), 3))


def check_torch(comm, r, n):
    try:
        import torch
    except ImportError:
        print("torch not importable: its checks skipped")
        return
    t = torch.full((6,), float(r + 1))
    request = comm.allreduce(t, async_op=True)
    assert request.result() is t
    assert torch.equal(t, torch.full((6,), n * (n + 1) / 2))
    b = torch.arange(4, dtype=torch.int64) * (r + 1)
    comm.broadcast(b, root=0, async_op=True).wait()
    assert torch.equal(b, torch.arange(4, dtype=torch.int64))
    out = torch.zeros(2 * n, dtype=torch.float32)
    request = comm.allgather(torch.full((2,), float(r)), out=out, async_op=True)
    assert request.result() is out
    assert torch.equal(out, torch.arange(n, dtype=torch.float32).repeat_interleave(2))
    peer = (r + 1) % n
    got = torch.zeros(5, dtype=torch.float64)
    receive = comm.irecv(got, source=(r - 1) % n, tag=3)
    send = comm.isend(torch.full((5,), float(r), dtype=torch.float64), dest=peer, tag=3)
    receive.wait()
    send.wait()
    assert torch.equal(got, torch.full((5,), float((r - 1) % n)))


def check_receives_before_sends(comm, r, n):
    # Both ranks post their receive first (torch's batch_isend_irecv), small and rendezvous-sized, then wait for the
    # receive or the send first: a receive that blocked at issue would leave both ranks waiting to receive.
    assert n == 2
    peer = 1 - r
    for count in (4, LARGE // 8):
        for receive_first in (True, False):
            got = np.zeros(count, dtype=np.float64)
            data = np.full(count, r + 0.5)
            receive = comm.irecv(got, source=peer, tag=7)
            send = comm.isend(data, peer, tag=7)
            # isend/irecv are Python in the package: the place recorded is still this file's line.
            assert f"recv issued at {__file__}:" in repr(receive) and f"send issued at {__file__}:" in repr(send), (
                repr(receive),
                repr(send),
            )
            order = (receive, send) if receive_first else (send, receive)
            for request in order:
                request.wait()
            assert receive.source == peer and receive.result() == peer and send.source is None
            assert send.result() is None
            np.testing.assert_array_equal(got, np.full(count, peer + 0.5))
    # The same through the keyword, from any source.
    got = np.zeros(16, dtype=np.int32)
    receive = comm.recv(got, tag=8, async_op=True)
    send = comm.send(np.full(16, r, dtype=np.int32), peer, tag=8, async_op=True)
    assert receive.result() == peer
    send.wait()
    np.testing.assert_array_equal(got, np.full(16, peer))
    # Requests come only from calls.
    with raises(TypeError):
        lockstep.Request()
    # An argument error of a send or receive is raised at once.
    with raises(lockstep.InvalidArgumentError):
        comm.isend(got, peer, tag=-5)


def check_issue_never_blocks(comm, r, n):
    # rank 0: iallreduce, then a rendezvous-sized recv; rank 1: the matching send, then its iallreduce. A collective
    # that waited for the other ranks at issue would deadlock: rank 0 in the allreduce, rank 1 in its send. Also in
    # debug mode, whose signature exchange must not block at issue either.
    assert n == 2
    for debug in (False, True):
        comm.debug = debug
        x = np.full(8, r + 1.0)
        big = np.zeros(LARGE // 8) if r == 0 else np.full(LARGE // 8, 3.0)
        if r == 0:
            request = comm.allreduce(x, async_op=True)
            comm.recv(big, 1, tag=21)
            np.testing.assert_array_equal(big, np.full(LARGE // 8, 3.0))
        else:
            comm.send(big, 0, tag=21)
            request = comm.allreduce(x, async_op=True)
        request.wait()
        np.testing.assert_array_equal(x, np.full(8, 3.0))
    comm.debug = False


def check_many_outstanding(comm, r, n):
    # 100 requests outstanding at once (collectives and receives/sends), waited in reverse order of issue.
    arrays = [np.full(3, float(i + r)) for i in range(60)]
    peer = (r + 1) % n
    boxes = [np.zeros(2, dtype=np.int64) for _ in range(20)]
    requests = []
    for i in range(60):
        requests.append(comm.allreduce(arrays[i], async_op=True))
        if i % 3 == 0:
            k = i // 3
            requests.append(comm.irecv(boxes[k], source=(r - 1) % n, tag=100 + k))
            requests.append(comm.isend(np.full(2, 1000 * r + k, dtype=np.int64), peer, tag=100 + k))
    assert len(requests) == 100
    for request in reversed(requests):
        assert request.wait() is True
    for i, a in enumerate(arrays):
        np.testing.assert_array_equal(a, np.full(3, n * i + n * (n - 1) / 2))
    for k, box in enumerate(boxes):
        np.testing.assert_array_equal(box, np.full(2, 1000 * ((r - 1) % n) + k))


def check_wait_on_another_thread(comm, r, n):
    # Rank 0 waits on a helper thread for an allreduce that rank 1 enters only after rank 0's main thread sent it a
    # message: that send needs the GIL while the helper waits, so a wait holding the GIL would deadlock.
    x = np.full(4, r + 1.0)
    if r == 0:
        request = comm.allreduce(x, async_op=True)
        outcome = []
        helper = threading.Thread(target=lambda: outcome.append((request.wait(), request.result())))
        helper.start()
        comm.send(np.ones(1), 1, tag=31)
        helper.join()
        assert outcome and outcome[0][0] is True and outcome[0][1] is x, outcome
    else:
        comm.recv(np.zeros(1), 0, tag=31)
        comm.allreduce(x)
    np.testing.assert_array_equal(x, np.full(4, n * (n + 1) / 2))
    # A request issued on one thread and waited on by two others at once.
    y = np.full(4, r + 1.0)
    request = comm.allreduce(y, async_op=True)
    seen = []
    waiters = [threading.Thread(target=lambda: seen.append(request.result() is y)) for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    assert seen == [True, True], seen
    np.testing.assert_array_equal(y, np.full(4, n * (n + 1) / 2))


def check_timeouts_and_test(comm, r, n):
    # Rank 1 sends only after rank 0 saw its receive incomplete through wait(timeout) and test(): the answers are
    # certain, whatever the machine's load.
    if r == 0:
        got = np.zeros(3)
        receive = comm.irecv(got, source=1, tag=41)
        assert receive.wait(timeout=0) is False
        assert receive.wait(timeout=0.05) is False
        assert receive.test() is False and receive.is_completed() is False
        assert "pending" in repr(receive), repr(receive)
        comm.send(np.ones(1), 1, tag=40)
        while not receive.test():
            pass
        np.testing.assert_array_equal(got, np.full(3, 7.0))
        assert receive.wait(timeout=0) is True and receive.source == 1
        with raises(lockstep.InvalidArgumentError):
            receive.wait(timeout=-1)
    else:
        comm.recv(np.zeros(1), 0, tag=40)
        comm.send(np.full(3, 7.0), 0, tag=41)
    # A collective polled with wait(timeout) until it completes.
    x = np.full(2, r + 1.0)
    request = comm.allreduce(x, async_op=True)
    while not request.wait(timeout=0.01):
        pass
    np.testing.assert_array_equal(x, np.full(2, n * (n + 1) / 2))


def check_debug_mismatch(comm, r, n):
    # Debug mode: a shape mismatch of a non-blocking allreduce is raised at its wait, on every rank, with the same text
    # naming this file's line of the call; at every later wait, test and result alike.
    comm.debug = True
    x = np.zeros(3 + r, dtype=np.float32)
    line = caller_line() + 1
    request = comm.allreduce(x, async_op=True)
    with raises(lockstep.SignatureMismatchError) as caught:
        request.wait()
    text = str(caught.error)
    assert f"{THIS_FILE}:{line}" in text, (line, text)
    same_on_every_rank(comm, text)
    assert request.is_completed() is True
    with raises(lockstep.SignatureMismatchError) as again:
        request.test()
    assert str(again.error) == text
    with raises(lockstep.SignatureMismatchError):
        request.result()
    assert "failed" in repr(request) and "SIGNATURE_MISMATCH" in repr(request), repr(request)
    # Two different collectives issued at the same place in the order: both ranks' waits raise the same error.
    y = np.ones(4, dtype=np.float32)
    request = comm.allreduce(y, async_op=True) if r == 0 else comm.broadcast(y, root=0, async_op=True)
    with raises(lockstep.SignatureMismatchError) as caught:
        request.wait()
    same_on_every_rank(comm, str(caught.error))
    # The communicator goes on working.
    z = np.full(2, r + 1.0)
    comm.allreduce(z, async_op=True).wait()
    np.testing.assert_array_equal(z, np.full(2, n * (n + 1) / 2))
    comm.debug = False


def check_conversion_rejected(comm, r, n):
    # Debug mode: an op name only the last rank gets wrong joins the non-blocking collective as rejected, without
    # blocking: every rank's wait raises the same CallRejectedError naming that rank and the reason.
    comm.debug = True
    last = n - 1
    x = np.ones(4, dtype=np.float32)
    request = comm.allreduce(x, op="bogus" if r == last else "sum", async_op=True)
    assert isinstance(request, lockstep.Request)
    with raises(lockstep.CallRejectedError) as caught:
        request.wait()
    text = str(caught.error)
    assert "bogus" in text and (f"process {last}" in text.lower() or f"rank {last}" in text.lower()), text
    same_on_every_rank(comm, text)
    np.testing.assert_array_equal(x, np.ones(4, dtype=np.float32))
    # The rejecting rank does not wait for the others at the call: rank 0 rejects, then receives a rendezvous-sized
    # message that rank 1 sends before issuing its side of the collective.
    big = np.zeros(LARGE // 8) if r == 0 else np.full(LARGE // 8, 2.0)
    if r == 0:
        request = comm.gather(np.ones(2, dtype=np.longdouble), root=0, async_op=True)  # no lockstep dtype
        comm.recv(big, 1, tag=61)
    else:
        comm.send(big, 0, tag=61)
        request = comm.gather(np.ones(2, dtype=np.float32), root=0, async_op=True)
    with raises(lockstep.CallRejectedError) as caught:
        request.wait()
    same_on_every_rank(comm, str(caught.error))
    comm.debug = False
    # Outside debug mode, a rank's own argument error is raised at its wait (here every rank's).
    request = comm.allreduce(x, op="median", async_op=True)
    with raises(lockstep.InvalidArgumentError) as caught:
        request.wait()
    assert "median" in str(caught.error) and "failed" in repr(request), (str(caught.error), repr(request))
    with raises(lockstep.InvalidArgumentError):
        request.result()
    # An async_op that is not a bool is a TypeError at the call (the call's mode is unknown, so it is blocking).
    with raises(TypeError):
        comm.allreduce(x, async_op="yes")


def check_dropped(comm, r, n):
    # Requests dropped without a wait: a RequestWarning naming the operation and its line, no crash; the operation
    # still runs, and its memory stays alive until the communicator is freed.
    side = comm.dup()
    x = np.full(4, r + 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = caller_line() + 1
        side.allreduce(x, async_op=True)
        gc.collect()
        if r == 0:
            side.irecv(np.zeros(8), source=1, tag=51)  # never matched: cancelled when `side` is freed
            gc.collect()
    dropped = [w for w in caught if issubclass(w.category, lockstep.RequestWarning)]
    assert len(dropped) == (2 if r == 0 else 1), [str(w.message) for w in caught]
    assert issubclass(lockstep.RequestWarning, RuntimeWarning)
    message = str(dropped[0].message)
    assert "allreduce" in message and f"{THIS_FILE}:{line}" in message, message
    side.free()
    np.testing.assert_array_equal(x, np.full(4, n * (n + 1) / 2))
    # A dropped request on the world communicator is kept until finalize; the next operations are unaffected.
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        comm.barrier(async_op=True)
    y = np.ones(3)
    comm.allreduce(y)
    np.testing.assert_array_equal(y, np.full(3, float(n)))


def check_after_finalize(comm, r, n):
    # A request seen through finalize: one whose operation completed before keeps its outcome; one that could not
    # complete (a receive nobody matches) was cancelled by it, which its wait raises.
    x = np.full(3, r + 1.0)
    done = comm.allreduce(x, async_op=True)
    never = comm.irecv(np.zeros(2), source=(r + 1) % n, tag=99)
    comm.barrier()  # runs after the allreduce: that one has completed
    lockstep.finalize()
    assert done.wait() is True and done.result() is x
    np.testing.assert_array_equal(x, np.full(3, n * (n + 1) / 2))
    with raises(lockstep.Error) as caught:
        never.wait()
    assert "cancelled" in str(caught.error), str(caught.error)
    del never


def main():
    lockstep.init()
    comm = lockstep.Communicator.world()
    run_checks(
        comm,
        (
            check_every_collective,
            check_objects_kept_alive,
            check_torch,
            check_receives_before_sends,
            check_issue_never_blocks,
            check_many_outstanding,
            check_wait_on_another_thread,
            check_timeouts_and_test,
            check_debug_mismatch,
            check_conversion_rejected,
            check_dropped,
        ),
    )
    r, n = comm.rank, comm.size
    check_after_finalize(comm, r, n)  # last: lockstep cannot start again
    return r, n


if __name__ == "__main__":
    run("async", main)
