"""What lockstep's checks cost a torch job on gloo, side by side in one run: torch.distributed.all_reduce of a small
tensor, synchronous, on four process groups of the same ranks:
  - gloo: torch's gloo as it is;
  - lockstep_gloo debug: the checking backend "lockstep_gloo" with debug mode on (each call's signature exchanged and
    compared over MPI before gloo carries it, and the call on lockstep's watchdog board);
  - lockstep_gloo watchdog: the same backend with debug mode off (the watchdog board only);
  - gloo DETAIL: gloo under TORCH_DISTRIBUTED_DEBUG=DETAIL (torch's ProcessGroupWrapper, which checks each call's
    shapes through a helper gloo group first).

    mpirun -n 2 /usr/bin/python3 bench/torch/checked_gloo.py [--sizes 4,4096] [--samples N] [--calls K] [--out F.csv]
    (PYTHONPATH=build/bindings/python; bench/torch/checked_gloo.sh sets it)

A sample is K calls of one variant, timed by each rank after a barrier on a group of its own; the slowest rank's time
over K counts. Variants take turns sample by sample in a rotating order, so that the machine's load falls on each
alike; the table gives each variant's median time per call and its ratio to gloo's.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import lockstep.torch

VARIANTS = ["gloo", "lockstep_gloo debug", "lockstep_gloo watchdog", "gloo DETAIL"]


def slowest(seconds, control):
    value = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=control)
    return value.item()


def detail_group():
    """A gloo group that torch wraps as it does under TORCH_DISTRIBUTED_DEBUG=DETAIL (the level is read when a group is
    made, so it is set for this group's creation only)."""
    before = dist.get_debug_level()
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        group = dist.new_group(backend="gloo")
    finally:
        dist.set_debug_level(before)
    wrapper = getattr(torch._C._distributed_c10d, "_ProcessGroupWrapper", None)
    if wrapper is not None and not isinstance(group, wrapper):
        raise SystemExit(f"the DETAIL group is a {type(group).__name__}, not torch's ProcessGroupWrapper")
    return group


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,4096", help="tensor sizes in bytes (float32), comma-separated")
    parser.add_argument("--samples", type=int, default=31)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    lockstep.torch.init_process_group("gloo")  # rank and size from MPI, nothing set
    rank, size = dist.get_rank(), dist.get_world_size()
    control = dist.new_group(backend="gloo")
    groups = {
        "gloo": dist.new_group(backend="gloo"),
        "lockstep_gloo debug": dist.new_group(backend=lockstep.torch.GLOO_BACKEND),
        "lockstep_gloo watchdog": dist.new_group(backend=lockstep.torch.GLOO_BACKEND),
        "gloo DETAIL": detail_group(),
    }
    groups["lockstep_gloo debug"].debug = True
    groups["lockstep_gloo watchdog"].debug = False

    rows = []
    for nbytes in [int(s) for s in args.sizes.split(",")]:
        x = torch.ones(max(1, nbytes // 4))

        def run(name, calls):
            group = groups[name]
            for _ in range(calls):
                dist.all_reduce(x, group=group)

        for name in VARIANTS:  # warm-up: connections, allocations, the watcher thread
            run(name, args.calls // 4)
        samples = {name: [] for name in VARIANTS}
        for i in range(args.samples):
            order = VARIANTS[i % len(VARIANTS) :] + VARIANTS[: i % len(VARIANTS)]
            for name in order:
                dist.barrier(group=control)
                start = time.perf_counter()
                run(name, args.calls)
                samples[name].append(slowest(time.perf_counter() - start, control) / args.calls)
        medians = {name: statistics.median(v) for name, v in samples.items()}
        for name in VARIANTS:
            rows.append((nbytes, name, medians[name], medians[name] / medians["gloo"]))

    if rank == 0:
        print(
            f"torch.distributed.all_reduce (float32, synchronous), {size} ranks, torch {torch.__version__}, "
            f"{args.samples} samples of {args.calls} calls (median per call)"
        )
        print(f"{'bytes':>7} {'variant':<24} {'us/call':>9} {'vs gloo':>8}")
        for nbytes, name, seconds, ratio in rows:
            print(f"{nbytes:>7} {name:<24} {seconds * 1e6:9.1f} {ratio:7.2f}x")
        if args.out:
            with open(args.out, "w") as out:
                out.write("bytes,variant,us_per_call,ratio_to_gloo\n")
                for nbytes, name, seconds, ratio in rows:
                    out.write(f"{nbytes},{name},{seconds * 1e6:.2f},{ratio:.3f}\n")
    dist.barrier(group=control)


if __name__ == "__main__":
    main()
