"""DistributedDataParallel over the backend "lockstep" and over gloo, under mpirun (2 and 3 ranks): three training
steps of the same small model from the same start on the same data give identical parameters and buffers
(torch.equal), on every rank.

DDP reaches the process group from C++ (its Reducer's allreduce, _broadcast_coalesced for parameters and buffers,
_verify_params_across_processes' allgather) and, with a Python communication hook, through Work.get_future(); both
ways run here: the default hook, and find_unused_parameters with torch's allreduce_hook; then torch's fp16 compression
hook and a hook of this file's own (an allreduce whose future is chained with .then()), equal to gloo's within 1e-6;
and the default hook on a group whose calls wait before they return.
Every rank starts from other parameters and another buffer, so the results are equal only if rank 0's state reached
everyone. Last, DDP's allreduce is pending work: a hook on rank 0 sees its bucket's future not done while the other
ranks provably have not started their backward (they wait for rank 0's go-ahead over gloo), so backward goes on
while the bucket's allreduce runs.

Equal bits need sums that do not depend on the order the backends add in: float addition of two terms is commutative,
of three it is not associative. So ranks 0 and 1 train on data, and every further rank contributes a zero loss (its
gradients are exact zeros, which change no sum) while it takes part in every collective.

Run by run_job.py: mpirun -n N python3 ddp_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import lockstep.torch  # noqa: E402
from harness import run  # noqa: E402

STEPS = 3


class Net(nn.Module):
    def __init__(self, r, with_unused):
        super().__init__()
        self.hidden = nn.Linear(4, 8)
        self.out = nn.Linear(8, 2)
        self.unused = nn.Linear(2, 2) if with_unused else None
        self.register_buffer("scale", torch.tensor(float(r + 2)))
        generator = torch.Generator().manual_seed(100 + r)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.copy_(torch.randint(-4, 5, parameter.shape, generator=generator) / 4)
        self.double()

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x))) * self.scale


def batch(r, step):
    generator = torch.Generator().manual_seed(1000 * step + r)
    x = torch.randint(-3, 4, (3, 4), generator=generator).double()
    target = torch.randint(-2, 3, (3, 2), generator=generator).double()
    return x, target


def train(model, r):
    optimizer = torch.optim.SGD(model.parameters(), lr=2**-12)
    for step in range(STEPS):
        optimizer.zero_grad()
        x, target = batch(r, step)
        loss = ((model(x) - target) ** 2).sum() * (1.0 if r < 2 else 0.0)
        loss.backward()
        optimizer.step()
    return model.module


def state(module):
    return [t.detach().clone() for t in list(module.parameters()) + list(module.buffers())]


def mean_hook(state, bucket):
    """A user's hook: the bucket's allreduce on the hook's group, then the mean, chained on the future."""
    group, size = state
    future = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
    return future.then(lambda done: done.value()[0] / size)


def compare(variant, r, n, gloo, ddp_args, hook, tolerance=0.0, group=None):
    ours = DistributedDataParallel(Net(r, variant == "unused"), process_group=group, **ddp_args)
    oracle = DistributedDataParallel(Net(r, variant == "unused"), process_group=gloo, **ddp_args)
    if hook is not None:
        ours.register_comm_hook((dist.group.WORLD, n) if hook is mean_hook else None, hook)
        oracle.register_comm_hook((gloo, n) if hook is mean_hook else gloo, hook)
    initial = state(Net(0, variant == "unused"))
    ours_state, oracle_state = state(train(ours, r)), state(train(oracle, r))
    names = [name for name, _ in ours.module.named_parameters()] + [name for name, _ in ours.module.named_buffers()]
    for name, a, b in zip(names, ours_state, oracle_state):
        same = torch.equal(a, b) if tolerance == 0 else torch.allclose(a, b, rtol=0, atol=tolerance)
        assert same, f"{variant}: {name} after {STEPS} steps: lockstep {a} != gloo {b}"
    # The model learnt (parameters left rank 0's start) and the buffer is rank 0's.
    assert any(not torch.equal(a, b) for a, b in zip(ours_state[:-1], initial[:-1])), f"{variant}: nothing changed"
    assert ours_state[-1].item() == 2.0, f"{variant}: the buffer is {ours_state[-1].item()}, not rank 0's 2.0"
    # Every rank holds the same parameters (gathered through gloo).
    flat = torch.cat([t.reshape(-1) for t in ours_state])
    everyone = [torch.zeros_like(flat) for _ in range(n)]
    dist.all_gather(everyone, flat, group=gloo)
    assert all(torch.equal(flat, other) for other in everyone), f"{variant}: ranks hold different parameters"


def check_overlap(r, n, gloo):
    seen = []

    def hook(state, bucket):
        future = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        if r == 0 and not seen:
            seen.append(future.done())
            dist.broadcast(torch.zeros(1), 0, group=gloo)  # the go-ahead: only now may the others start backward
        return future.then(lambda done: done.value()[0] / n)

    model = DistributedDataParallel(Net(r, False))
    model.register_comm_hook(None, hook)
    x, target = batch(r, 0)
    loss = ((model(x) - target) ** 2).sum()
    if r != 0:
        dist.broadcast(torch.zeros(1), 0, group=gloo)
    loss.backward()
    assert r != 0 or seen == [False], f"rank 0's first bucket future was done before the others joined: {seen}"


def main():
    lockstep.torch.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    compare("default", r, n, gloo, {}, None)
    compare("unused", r, n, gloo, {"find_unused_parameters": True}, default_hooks.allreduce_hook)
    compare("fp16", r, n, gloo, {}, default_hooks.fp16_compress_hook, 1e-6)
    compare("user hook", r, n, gloo, {}, mean_hook, 1e-6)
    # A group whose calls wait before they return (as without a progress thread): DDP's C++ side still waits on the
    # works it gets, after the backend is done with them.
    blocking = dist.new_group()
    blocking.blocking = True
    compare("blocking group", r, n, gloo, {}, None, group=blocking)
    check_overlap(r, n, gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    run("torch_ddp", main)
