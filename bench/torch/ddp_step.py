"""A DDP training step on CPU, side by side in one run: the same MLP (about 20 M parameters) wrapped in
DistributedDataParallel over three process groups of the same ranks:
  - lockstep_async: the "lockstep" backend as it is (each bucket's allreduce runs on lockstep's progress thread while
    backward goes on);
  - lockstep_blocking: the same backend with every call waiting for its operation before it returns
    (ProcessGroupLockstep.blocking), which is what the backend did before asynchronous work;
  - gloo: torch's own CPU backend.

    mpirun -n 2 /usr/bin/python3 bench/torch/ddp_step.py [--samples N] [--width W] [--out FILE.csv]
    (PYTHONPATH=build/bindings/python; bench/torch/run.sh sets it)

A sample is one step of one variant (forward, backward with DDP's allreduces, SGD update), timed by each rank after a
barrier; the slowest rank's time counts. Variants take turns step by step in a rotating order. Also measured, on the
same model: the step without communication (backward under no_sync(), then the same update) and the allreduces
alone (each DDP bucket's size, one after the other, on the variant's group). The fraction of the allreduce time
hidden behind backward is (compute + allreduces - step) / allreduces, clipped to [0, 1].
"""
import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import lockstep.torch  # noqa: F401 - registers the backend

VARIANTS = ["lockstep_async", "lockstep_blocking", "gloo"]


def model_of(width, depth):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def slowest(seconds):
    value = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=GLOO)
    return value.item()


def timed(call):
    dist.barrier(group=GLOO)
    start = time.perf_counter()
    call()
    return slowest(time.perf_counter() - start)


def main():
    global GLOO
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--width", type=int, default=1536)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    dist.init_process_group("lockstep")  # plain init: rank and size from MPI, nothing set
    rank, size = dist.get_rank(), dist.get_world_size()
    GLOO = dist.new_group(backend="gloo")
    groups = {"lockstep_async": dist.group.WORLD, "lockstep_blocking": dist.new_group(backend="lockstep")}
    groups["lockstep_blocking"].blocking = True
    groups["gloo"] = dist.new_group(backend="gloo")

    torch.manual_seed(0)
    reference = model_of(args.width, args.depth)
    parameters = sum(p.numel() for p in reference.parameters())
    models, optimizers = {}, {}
    for name in VARIANTS:
        model = model_of(args.width, args.depth)
        model.load_state_dict(reference.state_dict())
        models[name] = nn.parallel.DistributedDataParallel(
            model, process_group=groups[name], bucket_cap_mb=args.bucket_mb
        )
        optimizers[name] = torch.optim.SGD(models[name].parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1 + rank)
    inputs = torch.randn(args.batch, args.width, generator=generator)
    targets = torch.randint(0, 10, (args.batch,), generator=generator)
    loss_fn = nn.CrossEntropyLoss()

    def step(name, sync=True):
        model, optimizer = models[name], optimizers[name]
        optimizer.zero_grad(set_to_none=False)
        if sync:
            loss_fn(model(inputs), targets).backward()
        else:
            with model.no_sync():
                loss_fn(model(inputs), targets).backward()
        optimizer.step()

    # The allreduces alone: DDP's buckets, by their sizes (read from the reducer's bucket boundaries is internal;
    # buckets of bucket_cap_mb over the gradients in reverse order, as DDP fills them, are what it sends).
    cap = int(args.bucket_mb * 1024 * 1024 / 4)
    sizes, current = [], 0
    for p in reversed(list(reference.parameters())):
        current += p.numel()
        if current >= cap:
            sizes.append(current)
            current = 0
    if current:
        sizes.append(current)
    buffers = [torch.zeros(n) for n in sizes]

    def allreduces(name):
        works = [dist.all_reduce(b, group=groups[name], async_op=True) for b in buffers]
        for w in works:
            w.wait()

    for name in VARIANTS:  # warm-up: allocators, DDP's first-iteration bookkeeping, the progress thread
        for _ in range(2):
            step(name)
            step(name, sync=False)
            allreduces(name)

    samples = {name: {"step": [], "compute": [], "allreduce": []} for name in VARIANTS}
    for i in range(args.samples):
        order = VARIANTS[i % len(VARIANTS) :] + VARIANTS[: i % len(VARIANTS)]
        for name in order:
            samples[name]["step"].append(timed(lambda: step(name)))
            samples[name]["compute"].append(timed(lambda: step(name, sync=False)))
            samples[name]["allreduce"].append(timed(lambda: allreduces(name)))

    # The models stayed identical on every rank and across variants.
    for name in VARIANTS:
        for p, q in zip(models[name].parameters(), models[VARIANTS[0]].parameters()):
            if not torch.allclose(p, q, rtol=1e-5, atol=1e-6):
                print(f"rank {rank}: {name}'s parameters differ from {VARIANTS[0]}'s", file=sys.stderr)
                sys.exit(1)

    if rank == 0:
        rows = []
        for name in VARIANTS:
            median = {k: statistics.median(v) for k, v in samples[name].items()}
            hidden = (median["compute"] + median["allreduce"] - median["step"]) / median["allreduce"]
            rows.append((name, median["step"], median["compute"], median["allreduce"], min(1.0, max(0.0, hidden))))
        print(
            f"DDP step, {size} ranks, MLP {args.depth}x{args.width} ({parameters / 1e6:.1f} M parameters), batch "
            f"{args.batch}, {len(sizes)} buckets of <= {args.bucket_mb:g} MB, {args.samples} samples (medians, ms)"
        )
        print(f"{'variant':<18} {'step':>9} {'compute':>9} {'allreduce':>10} {'hidden':>7}")
        for name, step_s, compute_s, comm_s, hidden in rows:
            print(f"{name:<18} {step_s * 1e3:9.1f} {compute_s * 1e3:9.1f} {comm_s * 1e3:10.1f} {hidden:7.0%}")
        by = {row[0]: row[1] for row in rows}
        print(f"lockstep_async / gloo step: {by['lockstep_async'] / by['gloo']:.2f}")
        print(f"lockstep_async / lockstep_blocking step: {by['lockstep_async'] / by['lockstep_blocking']:.2f}")
        if args.out:
            with open(args.out, "w") as out:
                out.write("variant,step_s,compute_s,allreduce_s,hidden\n")
                for row in rows:
                    out.write(",".join(str(v) for v in row) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
