"""The job checked_skip_test.py runs: on the checking backend "lockstep_gloo", the last rank leaves a loop of
torch.distributed.all_reduce calls one step early and then waits, so the other ranks wait inside gloo for an all_reduce
it never calls.

Usage: mpirun -n N python3 checked_skip_job.py
"""
import time

import torch
import torch.distributed as dist

import lockstep.torch

lockstep.torch.init_process_group(lockstep.torch.GLOO_BACKEND)
r, n = dist.get_rank(), dist.get_world_size()
x = torch.ones(8)
for step in range(3):
    if r == n - 1 and step == 2:
        break
    dist.all_reduce(x)  # the call the last rank skips
print(f"rank {r} left the loop after {step} steps", flush=True)
if r == n - 1:
    time.sleep(120)  # elsewhere: the others' all_reduce can never complete
