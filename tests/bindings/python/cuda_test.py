"""The Python package on CUDA memory, with torch's CUDA tensors (under mpirun, 2 or 3 ranks; every rank uses device
rank % device_count): in-place collectives on the caller's device memory (same data_ptr), every collective against a
CPU oracle, DLPack both ways on the device (shared memory, device (2, index)), the stream keyword (the collective
waits for work queued on the caller's stream), debug mode's mismatch report on device tensors.

Ends with "SKIP cuda rank r/n" on every rank where torch has no CUDA device (run_job.py counts that as skipped).

Run by run_job.py: mpirun -n N python3 cuda_test.py
"""
import os

import torch

import lockstep
from harness import caller_line, raises, run, skip

NAME = "cuda"


def check_in_place(comm, r, n, device):
    for dtype in [
        torch.float32,
        torch.float64,
        torch.float16,
        torch.bfloat16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.int8,
    ]:
        x = (torch.arange(1000, device=device) % 5 + r).to(dtype)
        expected = sum((torch.arange(1000) % 5 + q) for q in range(n)).to(dtype)
        before = x.data_ptr()
        result = comm.allreduce(x)
        assert x.data_ptr() == before, f"{dtype}: the tensor moved"
        assert torch.equal(x.cpu(), expected), f"{dtype}: {x[:8]} != {expected[:8]}"
        assert result is x or torch.equal(torch.from_dlpack(result).cpu(), expected)
    # bool through MAX and MIN (logical or / and).
    flags = torch.tensor([r == 0, True, False], device=device)
    comm.allreduce(flags, op="max")
    assert flags.cpu().tolist() == [True, True, False], flags
    # Every reduction op on float32.
    for op, fold in [("sum", sum), ("max", max), ("min", min)]:
        x = torch.tensor([float(r + 1), float(-r)], device=device)
        comm.allreduce(x, op=op)
        want = [float(fold(q + 1 for q in range(n))), float(fold(-q for q in range(n)))]
        assert x.cpu().tolist() == want, (op, x, want)
    x = torch.full((4,), float(r + 1), device=device)
    comm.allreduce(x, op="mean")
    assert torch.allclose(x.cpu(), torch.full((4,), (n + 1) / 2)), x
    # A non-contiguous view is refused, and the refusal reaches every rank (debug mode) rather than a hang.
    comm.debug = True
    m = torch.zeros((4, 4), device=device)
    with raises(lockstep.Error):
        comm.allreduce(m.t() if r == 0 else m)
    comm.debug = False


def check_dlpack(comm, r, device):
    x = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3) + r
    t = lockstep.from_dlpack(x)
    assert t.__dlpack_device__() == (2, device.index), t.__dlpack_device__()
    assert tuple(t.shape) == (2, 3)
    back = torch.from_dlpack(t)
    assert back.device == device and back.data_ptr() == x.data_ptr(), (back.device, back.data_ptr(), x.data_ptr())
    back[0, 0] = 100.0  # the same memory
    assert x[0, 0].item() == 100.0
    # A lockstep tensor made by a collective on the device (out=None) goes to torch without a copy.
    g = comm.allgather(x)
    gt = torch.from_dlpack(g)
    assert gt.device == device, gt.device
    assert gt.shape[0] == 2 * comm.size
    # The versioned capsule where asked for it.
    capsule = t.__dlpack__(max_version=(1, 0))
    assert type(capsule).__name__ == "PyCapsule"
    # dl_device of another device than the tensor's, without a copy allowed, is refused.
    with raises((BufferError, lockstep.Error, ValueError)):
        t.__dlpack__(dl_device=(1, 0), copy=False)


def check_stream(comm, r, n, device):
    """Work queued on a side stream (a long sleep, then the fill) must finish before the collective reads the tensor."""
    x = torch.zeros(1 << 16, device=device)
    torch.cuda.synchronize(device)
    side = torch.cuda.Stream(device=device)
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU cycles
        x.fill_(float(r + 1))
    comm.allreduce(x, stream=side.cuda_stream)
    assert torch.all(x.cpu() == n * (n + 1) / 2), x[:4]


def check_collectives(comm, r, n, device):
    k = 3
    mine = torch.arange(k, dtype=torch.float32) + 10 * r
    rows = torch.stack([torch.arange(k, dtype=torch.float32) + 10 * q for q in range(n)])
    x = mine.to(device)
    comm.broadcast(x, root=n - 1)
    assert torch.equal(x.cpu(), rows[n - 1]), x
    out = torch.empty(n * k, device=device)
    comm.allgather(mine.to(device), out=out)
    assert torch.equal(out.cpu(), rows.reshape(-1)), out
    big = (torch.arange(n * k, dtype=torch.float32) + 100 * r).to(device)
    part = torch.empty(k, device=device)
    comm.reduce_scatter(big, out=part)
    expected = sum(torch.arange(n * k, dtype=torch.float32) + 100 * q for q in range(n))[r * k : (r + 1) * k]
    assert torch.equal(part.cpu(), expected), part
    swapped = torch.empty(n * k, device=device)
    comm.alltoall(big, out=swapped)
    expected = torch.cat([(torch.arange(n * k, dtype=torch.float32) + 100 * q)[r * k : (r + 1) * k] for q in range(n)])
    assert torch.equal(swapped.cpu(), expected), swapped
    reduced = torch.empty(k, device=device)
    comm.reduce(mine.to(device), root=0, op="sum", out=reduced if r == 0 else None)
    if r == 0:
        assert torch.equal(reduced.cpu(), rows.sum(0)), reduced
    gathered = torch.empty(n * k, device=device)
    comm.gather(mine.to(device), root=1, out=gathered if r == 1 else None)
    if r == 1:
        assert torch.equal(gathered.cpu(), rows.reshape(-1)), gathered
    scattered = torch.empty(k, device=device)
    comm.scatter(rows.reshape(-1).to(device) if r == 0 else None, out=scattered, root=0)
    assert torch.equal(scattered.cpu(), rows[r]), scattered
    if r < 2:
        y = mine.to(device)
        if r == 0:
            comm.send(y, dest=1, tag=5)
        else:
            comm.recv(y, source=0, tag=5)
            assert torch.equal(y.cpu(), rows[0]), y
    comm.barrier()


def check_debug_mismatch(comm, r, n, device):
    comm.debug = True
    x = torch.zeros(3 if r == 0 else 4, device=device)
    line = caller_line() + 2
    with raises(lockstep.SignatureMismatchError) as caught:
        comm.allreduce(x)
    text = str(caught.error)
    here = f"{os.path.basename(__file__)}:{line}"
    assert here in text, f"{here} not in {text}"
    assert "[3]" in text and "[4]" in text, text
    comm.debug = False
    y = torch.ones(2, device=device)
    comm.allreduce(y)
    assert torch.equal(y.cpu(), torch.full((2,), float(n))), y


def main():
    lockstep.init()
    comm = lockstep.Communicator.world()
    r, n = comm.rank, comm.size
    device = torch.device("cuda", r % torch.cuda.device_count())
    torch.cuda.set_device(device)
    check_in_place(comm, r, n, device)
    check_dlpack(comm, r, device)
    check_stream(comm, r, n, device)
    check_collectives(comm, r, n, device)
    check_debug_mismatch(comm, r, n, device)
    return r, n


if __name__ == "__main__":
    if not torch.cuda.is_available():
        skip(NAME, "torch has no CUDA device")
    run(NAME, main)
