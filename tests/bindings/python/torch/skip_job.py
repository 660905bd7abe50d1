"""The job skip_test.py runs: the last rank leaves a loop of torch.distributed.all_reduce calls one step early and
goes on to exit, so the other ranks wait in an all_reduce it never calls (inside lockstep, or inside gloo for the
checking backend lockstep_gloo).

Usage: mpirun -n N python3 skip_job.py [BACKEND]   (default: lockstep)
"""
import sys

import torch
import torch.distributed as dist

import lockstep.torch

lockstep.torch.init_process_group(sys.argv[1] if len(sys.argv) > 1 else "lockstep")
r, n = dist.get_rank(), dist.get_world_size()
x = torch.ones(8)
for step in range(3):
    if r == n - 1 and step == 2:
        break
    dist.all_reduce(x)  # the call the last rank skips
print(f"rank {r} left the loop after {step} steps", flush=True)
