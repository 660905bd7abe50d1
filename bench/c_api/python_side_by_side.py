"""Python and PyTorch per call, side by side in one run: an in-place allreduce of 4 B and of 4 MiB (float32) on
  - the lockstep Python package on a numpy array, and mpi4py's Comm.Allreduce(MPI.IN_PLACE, ...) on the same kind;
  - torch.distributed.all_reduce on a group of the "lockstep" backend, and on a gloo group;
  - the lockstep backend with lockstep's debug mode on (every call checked on every rank first), and gloo under
    TORCH_DISTRIBUTED_DEBUG=DETAIL (torch's ProcessGroupWrapper, which checks each call against the other ranks).

    mpirun -n 2 /usr/bin/python3 bench/c_api/python_side_by_side.py [--samples N] [--out FILE.csv]
    (PYTHONPATH=build/bindings/python; bench/c_api/run.sh sets it)

A sample is one batch: a barrier, then k back-to-back calls of one variant, each rank's mean per call, and the
slowest rank's value (an mpi4py allreduce MAX). k makes a batch last about 2 ms (at least 10 at 4 MiB). Variants
take turns batch by batch in a rotating order. Reported: the median over batches, and the ratios the targets name.
"""
import argparse
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import lockstep
import lockstep.torch as lockstep_torch
import torch
import torch.distributed as dist


def batch(call, k, mpi):
    mpi.Barrier()
    start = time.perf_counter()
    for _ in range(k):
        call()
    mine = (time.perf_counter() - start) / k
    return mpi.allreduce(mine, op=MPI.MAX)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=31)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    torch.set_num_threads(1)
    mpi = MPI.COMM_WORLD
    lockstep.init()
    lockstep_torch.init_process_group(backend="gloo")
    world_ranks = list(range(dist.get_world_size()))
    gloo = dist.new_group(world_ranks, backend="gloo")
    ls = dist.new_group(world_ranks, backend="lockstep")
    ls_debug = dist.new_group(world_ranks, backend="lockstep")
    ls_debug.comm.debug = True
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    gloo_detail = dist.new_group(world_ranks, backend="gloo")  # wrapped by torch's ProcessGroupWrapper
    dist.set_debug_level(dist.DebugLevel.OFF)
    comm = lockstep.Communicator.world()
    if not ls_debug.comm.debug or ls.comm.debug:
        sys.exit("python_side_by_side: the debug switch reached the wrong group")

    rows = []
    for nbytes in (4, 4 << 20):
        n = nbytes // 4
        arr_ls = np.zeros(n, dtype=np.float32)
        arr_mpi = np.zeros(n, dtype=np.float32)
        tensors = {name: torch.zeros(n, dtype=torch.float32) for name in ("ls", "gloo", "ls_debug", "gloo_detail")}
        variants = [
            ["lockstep Python (numpy)", lambda: comm.allreduce(arr_ls)],
            ["mpi4py Allreduce (numpy)", lambda: mpi.Allreduce(MPI.IN_PLACE, arr_mpi)],
            ["torch all_reduce, lockstep backend", lambda: dist.all_reduce(tensors["ls"], group=ls)],
            ["torch all_reduce, gloo", lambda: dist.all_reduce(tensors["gloo"], group=gloo)],
            [
                "torch all_reduce, lockstep backend + lockstep debug mode",
                lambda: dist.all_reduce(tensors["ls_debug"], group=ls_debug),
            ],
            [
                "torch all_reduce, gloo + TORCH_DISTRIBUTED_DEBUG=DETAIL",
                lambda: dist.all_reduce(tensors["gloo_detail"], group=gloo_detail),
            ],
        ]
        for v in variants:
            for _ in range(10):
                v[1]()
            fastest = min(batch(v[1], 5, mpi) for _ in range(3))
            v.append(max(10 if nbytes > 4096 else 1, int(0.002 / max(fastest, 1e-9))))
            v.append([])
        for s in range(args.samples):
            for j in range(len(variants)):
                v = variants[(j + s) % len(variants)]
                v[3].append(batch(v[1], v[2], mpi))
        for name, _, k, samples in variants:
            rows.append((nbytes, name, float(np.median(samples)), min(samples), k))

    if mpi.rank == 0:
        print(f"{mpi.size} ranks; median over batches of the slowest rank's mean per call")
        print(f"{'bytes':>8}  {'variant':58} {'median_us':>10} {'fastest_us':>11}")
        for nbytes, name, med, fastest, _ in rows:
            print(f"{nbytes:>8}  {name:58} {med * 1e6:10.2f} {fastest * 1e6:11.2f}")
        by = {(b, n): m for b, n, m, _, _ in rows}
        print("ratios (below 1: the first is faster):")
        for nbytes in (4, 4 << 20):
            pairs = [
                ("lockstep Python (numpy)", "mpi4py Allreduce (numpy)"),
                ("torch all_reduce, lockstep backend", "torch all_reduce, gloo"),
                ("torch all_reduce, lockstep backend + lockstep debug mode", "torch all_reduce, gloo"),
                (
                    "torch all_reduce, lockstep backend + lockstep debug mode",
                    "torch all_reduce, gloo + TORCH_DISTRIBUTED_DEBUG=DETAIL",
                ),
            ]
            for a, b in pairs:
                print(f"{nbytes:>8}  {a} / {b}: {by[(nbytes, a)] / by[(nbytes, b)]:.3f}")
        if args.out:
            with open(args.out, "w", encoding="utf-8") as f:
                f.write("ranks,bytes,variant,seconds_median,seconds_min,calls_per_batch\n")
                for nbytes, name, med, fastest, k in rows:
                    f.write(f'{mpi.size},{nbytes},"{name}",{med},{fastest},{k}\n')
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
