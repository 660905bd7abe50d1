#!/usr/bin/python3
"""The Python columns of the shared-memory benchmark: mpi4py on numpy float32 buffers and torch.distributed (gloo).

Usage (Debian's python3, which has numpy, mpi4py and torch):
    mpirun -n 2 /usr/bin/python3 bench/shm/side_by_side.py [--op NAME]... [--max-bytes N] [--note TEXT]
                                                          [--out bench/shm/results/python_2.csv]

Same ops, sizes, meaning of "bytes", timing and CSV format as bench/shm/side_by_side.cpp:
  bytes: allreduce and broadcast the buffer each rank holds (in place); allgather the gathered output (each rank
  contributes bytes / ranks); reduce_scatter the input each rank holds (each rank keeps bytes / ranks); at least one
  float32 per rank.
  A sample is a batch: barrier, k back-to-back calls, each rank's mean per call, the maximum over ranks; k makes a
  batch last about 2 ms (from the fastest of three timed rounds; k = 1 from about 1 MiB up); the variants take turns
  batch by batch in a rotating order; seconds_median / seconds_min are the median and the fastest batch,
  iterations = k x batches.
Variants: mpi4py (Allreduce with MPI.IN_PLACE, Bcast, Allgather, Reduce_scatter_block on numpy arrays) and torch_gloo
(all_reduce, broadcast, all_gather into views of one output tensor, reduce_scatter where gloo has it, else noted).
torch.distributed starts with MASTER_ADDR=127.0.0.1 and a free port that rank 0 picks and broadcasts with mpi4py.
"""
import argparse
import os
import socket
import statistics
import sys
import time

import mpi4py
import numpy as np
from mpi4py import MPI

OPS = ["allreduce", "broadcast", "allgather", "reduce_scatter"]
SIZES = [4, 1 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def shape_of(op, nbytes, n):
    """(in elements, out elements or 0 for in place, block) as in side_by_side.cpp."""
    count = max(1, nbytes // 4)
    block = max(1, count // n)
    if op == "allgather":
        return block, block * n, block
    if op == "reduce_scatter":
        return block * n, block, block
    return count, 0, 0


def input_values(op, rank, count):
    i = np.arange(count, dtype=np.int64)
    if op == "broadcast":
        return (i % 251 + 1).astype(np.float32) if rank == 0 else np.full(count, -1.0, dtype=np.float32)
    if op == "allgather":
        return (rank * 1000 + i % 97).astype(np.float32)
    return (rank + 1 + i % 13).astype(np.float32)


def expected_values(op, rank, n, shape):
    count_in, count_out, block = shape
    if op == "broadcast":
        return (np.arange(count_in) % 251 + 1).astype(np.float32)
    if op == "allgather":
        i = np.arange(count_out)
        return ((i // block) * 1000 + (i % block) % 97).astype(np.float32)
    i = np.arange(count_out if op == "reduce_scatter" else count_in)
    if op == "reduce_scatter":
        i = i + block * rank
    return (n * (n + 1) // 2 + n * (i % 13)).astype(np.float32)


class Variant:
    def __init__(self, name, inp, out, call, note=""):
        self.name, self.inp, self.out, self.call, self.note = name, inp, out, call, note


def mpi4py_variant(op, comm, shape):
    count_in, count_out, _ = shape
    inp = np.zeros(count_in, dtype=np.float32)
    out = np.zeros(count_out, dtype=np.float32) if count_out else None
    calls = {
        "allreduce": lambda: comm.Allreduce(MPI.IN_PLACE, inp, op=MPI.SUM),
        "broadcast": lambda: comm.Bcast(inp, root=0),
        "allgather": lambda: comm.Allgather(inp, out),
        "reduce_scatter": lambda: comm.Reduce_scatter_block(inp, out, op=MPI.SUM),
    }
    return Variant("mpi4py", inp, out, calls[op])


def torch_variant(op, dist, torch, shape, n):
    count_in, count_out, block = shape
    inp = torch.zeros(count_in, dtype=torch.float32)
    out = torch.zeros(count_out, dtype=torch.float32) if count_out else None
    note = ""
    views = list(out.split(block)) if op == "allgather" else None
    inputs = list(inp.split(block)) if op == "reduce_scatter" else None
    call = {
        "allreduce": lambda: dist.all_reduce(inp),
        "broadcast": lambda: dist.broadcast(inp, 0),
        "allgather": lambda: dist.all_gather(views, inp),
        "reduce_scatter": lambda: dist.reduce_scatter(out, inputs),
    }[op]
    if op == "reduce_scatter":
        try:
            call()
        except (RuntimeError, NotImplementedError):
            # gloo in torch 1.13 has no reduce_scatter: what a gloo user does instead, all_reduce and keep one block.
            work = torch.zeros(count_in, dtype=torch.float32)
            rank = dist.get_rank()

            def call():
                work.copy_(inp)
                dist.all_reduce(work)
                out.copy_(work[block * rank : block * (rank + 1)])

            note = "gloo has no reduce_scatter: copy + all_reduce + slice"
    return Variant("torch_gloo", inp.numpy(), out.numpy() if out is not None else None, call, note)


def check(op, v, shape, rank, n, comm):
    count_in, count_out, _ = shape
    v.inp[:] = input_values(op, rank, count_in)
    if count_out:
        v.out[:] = -7.0
    v.call()
    result = v.out if count_out else v.inp
    wrong = int(not np.array_equal(result, expected_values(op, rank, n, shape)))
    return comm.allreduce(wrong, op=MPI.MAX) == 0


def measure(comm, variants, batches):
    """samples[variant][batch] (the slowest rank's mean seconds per call) and k per variant."""
    ks = []
    for v in variants:
        v.call()  # after the check's call: caches, connections
        # The fastest of up to three rounds (1 call, then 16 while one takes under 1 ms), each the slowest rank's.
        per_call = float("inf")
        for _ in range(3):
            calls = 16 if per_call < 1e-3 else 1
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                v.call()
            per_call = min(per_call, comm.allreduce((time.perf_counter() - t0) / calls, op=MPI.MAX))
            if per_call >= 2e-3:
                break
        ks.append(int(min(max(0.002 / per_call, 1.0), 2000.0)))
    samples = [[] for _ in variants]
    for b in range(batches):
        for j in range(len(variants)):
            idx = (j + b) % len(variants)
            call, k = variants[idx].call, ks[idx]
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                call()
            t = (time.perf_counter() - t0) / k
            samples[idx].append(comm.allreduce(t, op=MPI.MAX))
    return samples, ks


def size_text(b):
    if b >= 1 << 20:
        return f"{b >> 20} MiB"
    if b >= 1 << 10:
        return f"{b >> 10} KiB"
    return f"{b} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", choices=OPS, help="only this op (repeatable)")
    parser.add_argument("--max-bytes", type=int, default=256 << 20, help="largest size in bytes")
    parser.add_argument("--out", default="bench/shm/results/python.csv", help="CSV written by rank 0")
    parser.add_argument("--note", default="", help="text put at the start of every row's note")
    parser.add_argument("--quick", action="store_true", help="3 batches per size")
    parser.add_argument("--no-torch", action="store_true", help="mpi4py only")
    args = parser.parse_args()
    ops = args.op or OPS
    comm = MPI.COMM_WORLD.Dup()
    rank, n = comm.Get_rank(), comm.Get_size()

    dist = torch = None
    if not args.no_torch:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        port = None
        if rank == 0:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        port = comm.bcast(port, root=0)
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=n)
    if rank == 0:
        library = MPI.Get_library_version().rstrip("\0").splitlines()[0].split(",")[0]
        print(
            f"side_by_side.py: {n} ranks; mpi4py {mpi4py.__version__} on {library}; numpy {np.__version__}"
            + (f"; torch {torch.__version__} gloo" if torch else ""),
            file=sys.stderr,
        )

    note_prefix = args.note + "; " if args.note else ""
    rows = ["ranks,op,bytes,variant,seconds_median,seconds_min,iterations,note"]
    for op in ops:
        for nbytes in [s for s in SIZES if s <= args.max_bytes]:
            shape = shape_of(op, nbytes, n)
            size_note = ""
            if shape[2] and shape[2] * 4 * n != nbytes:
                size_note = f"{shape[2]} float per rank ({shape[2] * 4 * n} B in all); "
            variants = [mpi4py_variant(op, comm, shape)]
            if torch is not None:
                variants.append(torch_variant(op, dist, torch, shape, n))
            for v in variants:
                ok = check(op, v, shape, rank, n, comm)
                v.note = ("check=ok" if ok else "check=WRONG") + ("; " + v.note if v.note else "")
                v.inp[:] = 0.0
                if v.out is not None:
                    v.out[:] = 0.0
            batches = (
                3
                if args.quick
                else 15
                if nbytes <= 1 << 20
                else 9
                if nbytes <= 16 << 20
                else 5
                if nbytes <= 64 << 20
                else 3
            )
            samples, ks = measure(comm, variants, batches)
            for v, s, k in zip(variants, samples, ks):
                med = statistics.median_low(s)
                rows.append(
                    f"{n},{op},{nbytes},{v.name},{med:.9e},{min(s):.9e},{k * batches},"
                    f'"{note_prefix}{size_note}{v.note}"'
                )
                if rank == 0:
                    print(
                        f"{op:14} {size_text(nbytes):>8} {v.name:16} {med * 1e6:12.3f} us  {v.note}",
                        file=sys.stderr,
                        flush=True,
                    )
            del variants
    if dist is not None:
        dist.destroy_process_group()
    if rank == 0:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
        print(f"side_by_side.py: written to {args.out}", file=sys.stderr)
    comm.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
