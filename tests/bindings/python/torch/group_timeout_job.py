"""The job group_timeout_test.py runs: a group made with timeout=1 s, whose all_reduce the last rank skips (it sleeps,
then meets the others in a barrier of the default group). lockstep's own timeout (LOCKSTEP_TIMEOUT) stays at its
default of 600 s, so only the group's timeout can end the wait.

Usage: mpirun -n N python3 group_timeout_job.py
With LOCKSTEP_ON_TIMEOUT=raise the waiting ranks print what they caught; with the default (end) the job ends.
"""
import datetime
import time

import torch
import torch.distributed as dist

import lockstep
import lockstep.torch

dist.init_process_group("lockstep")
r, n = dist.get_rank(), dist.get_world_size()
group = dist.new_group(timeout=datetime.timedelta(seconds=1))
x = torch.ones(4)
dist.all_reduce(x, group=group)
if r == n - 1:
    time.sleep(4)
else:
    try:
        dist.all_reduce(x, group=group)  # the call the last rank skips
        print(f"rank {r}: FAIL the all_reduce returned", flush=True)
    except TimeoutError as error:
        kinds = f"lockstep.Error={isinstance(error, lockstep.Error)} builtin={isinstance(error, TimeoutError)}"
        print(f"rank {r}: caught {type(error).__name__} ({kinds})\n{error}\nrank {r}: end of report", flush=True)
    start = time.monotonic()
    try:
        dist.all_reduce(x, group=group)
        print(f"rank {r}: FAIL the group still took a call", flush=True)
    except TimeoutError as error:
        print(f"rank {r}: later call raised at once ({time.monotonic() - start < 1.0}): {error}", flush=True)
dist.barrier()
print(f"rank {r} done", flush=True)
