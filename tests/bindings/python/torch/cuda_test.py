"""torch.distributed's backend "lockstep" on CUDA tensors (under mpirun, 2 or 3 ranks; every rank uses device
rank % device_count): the collectives DDP and user code call, on the caller's device memory, against results computed
on the CPU; three DDP steps of a model on the device against the same steps on the CPU (ddp_test.py compares the CPU
run with gloo); then debug mode's mismatch report for a dist.all_reduce of device tensors of shapes [3] and [4].

Ends with "SKIP torch_cuda rank r/n" on every rank where torch has no CUDA device (run_job.py counts that as
skipped).

Run by run_job.py: mpirun -n N python3 cuda_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from ddp_test import STEPS, Net, batch  # noqa: E402
from harness import caller_line, raises, run, skip  # noqa: E402

NAME = "torch_cuda"
all_gather_into_tensor = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
reduce_scatter_tensor = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base


def rows(n, k, dtype=torch.float32):
    return torch.stack([torch.arange(k, dtype=dtype) + 10 * q for q in range(n)])


def check_collectives(r, n, device):
    k = 4
    table = rows(n, k)
    x = table[r].to(device)
    before = x.data_ptr()
    dist.all_reduce(x)
    assert x.data_ptr() == before and torch.equal(x.cpu(), table.sum(0)), x
    for dtype in [torch.float16, torch.bfloat16, torch.int64, torch.uint8]:
        y = table[r].to(dtype).to(device)
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        assert torch.equal(y.cpu(), table[n - 1].to(dtype)), (dtype, y)
    flags = torch.tensor([r == 0, False], device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    assert flags.cpu().tolist() == [True, False], flags
    if hasattr(dist.ReduceOp, "AVG"):
        z = table[r].to(device)
        dist.all_reduce(z, op=dist.ReduceOp.AVG)
        assert torch.allclose(z.cpu(), table.mean(0)), z
    b = table[r].to(device)
    dist.broadcast(b, src=n - 1)
    assert torch.equal(b.cpu(), table[n - 1]), b
    outs = [torch.empty(k, device=device) for _ in range(n)]
    dist.all_gather(outs, table[r].to(device))
    assert all(torch.equal(o.cpu(), table[q]) for q, o in enumerate(outs)), outs
    flat = torch.empty(n * k, device=device)
    all_gather_into_tensor(flat, table[r].to(device))
    assert torch.equal(flat.cpu(), table.reshape(-1)), flat
    big = (torch.arange(n * k, dtype=torch.float32) + 100 * r).to(device)
    part = torch.empty(k, device=device)
    reduce_scatter_tensor(part, big)
    expected = sum(torch.arange(n * k, dtype=torch.float32) + 100 * q for q in range(n))[r * k : (r + 1) * k]
    assert torch.equal(part.cpu(), expected), part
    swapped = torch.empty(n * k, device=device)
    dist.all_to_all_single(swapped, big)
    expected = torch.cat([(torch.arange(n * k, dtype=torch.float32) + 100 * q)[r * k : (r + 1) * k] for q in range(n)])
    assert torch.equal(swapped.cpu(), expected), swapped
    red = table[r].to(device)
    dist.reduce(red, dst=0)
    if r == 0:
        assert torch.equal(red.cpu(), table.sum(0)), red
    if r < 2:
        p = table[r].to(device)
        if r == 0:
            dist.send(p, dst=1)
        else:
            dist.recv(p, src=0)
            assert torch.equal(p.cpu(), table[0]), p
    work = dist.all_reduce(table[r].to(device), async_op=True)
    work.wait()
    dist.barrier()


def check_ddp(r, device):
    """The same DDP training on the device and on the CPU (float64, ranks 2+ contribute zero gradients): DDP's reducer
    hands the backend bucketed views of device memory, and the parameters must come out the same."""
    results = []
    for where in (device, torch.device("cpu")):
        ids = [where.index] if where.type == "cuda" else None
        model = DistributedDataParallel(Net(r, False).to(where), device_ids=ids)
        optimizer = torch.optim.SGD(model.parameters(), lr=2**-12)
        for step in range(STEPS):
            optimizer.zero_grad()
            x, target = batch(r, step)
            loss = ((model(x.to(where)) - target.to(where)) ** 2).sum() * (1.0 if r < 2 else 0.0)
            loss.backward()
            optimizer.step()
        results.append([t.detach().cpu() for t in list(model.module.parameters()) + list(model.module.buffers())])
    on_device, on_cpu = results
    for a, b in zip(on_device, on_cpu):
        assert torch.allclose(a, b, rtol=0, atol=1e-12), f"DDP on {device}: {a} != on the CPU {b}"
    assert on_device[-1].item() == 2.0, "the buffer is not rank 0's"


def check_debug_mismatch(r, n, device):
    world = dist.group.WORLD
    world.comm.debug = True
    x = torch.zeros(3 if r == 0 else 4, device=device)
    line = caller_line() + 2
    with raises(lockstep.SignatureMismatchError) as caught:
        dist.all_reduce(x)
    text = str(caught.error)
    here = f"{os.path.basename(__file__)}:{line}"
    assert here in text and "[3]" in text and "[4]" in text, text
    world.comm.debug = False


def main():
    lockstep.torch.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", r % torch.cuda.device_count())
    torch.cuda.set_device(device)
    check_collectives(r, n, device)
    check_ddp(r, device)
    check_debug_mismatch(r, n, device)
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    if not torch.cuda.is_available():
        skip(NAME, "torch has no CUDA device")
    run(NAME, main)
