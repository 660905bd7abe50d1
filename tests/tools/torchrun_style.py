#!/usr/bin/env python3
"""A script written for torchrun, as users write them: it reads torchrun's variables and initialises torch.distributed
from the environment (env://) with the gloo backend. `lockstep launch` must run it unchanged.

Each rank checks its variables against what the others say (all_gather) and an all_reduce against its closed form,
then prints one line "PASS rank R of W" (or "FAIL ..." and exits 1).
"""
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world_size = int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
group_rank = int(os.environ["GROUP_RANK"])

dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
problems = []
if dist.get_rank() != rank or dist.get_world_size() != world_size:
    problems.append(f"torch says rank {dist.get_rank()} of {dist.get_world_size()}")

# Every rank of this one-node job: local values equal the global ones, one group, one role.
if (local_rank, local_world_size, group_rank) != (rank, world_size, 0):
    problems.append(f"local rank {local_rank} of {local_world_size}, group rank {group_rank}")
if os.environ.get("GROUP_WORLD_SIZE") != "1" or os.environ.get("ROLE_NAME") != "default":
    problems.append(f"GROUP_WORLD_SIZE={os.environ.get('GROUP_WORLD_SIZE')} ROLE_NAME={os.environ.get('ROLE_NAME')}")
if os.environ.get("ROLE_RANK") != str(rank) or os.environ.get("ROLE_WORLD_SIZE") != str(world_size):
    problems.append("ROLE_RANK/ROLE_WORLD_SIZE differ from RANK/WORLD_SIZE")

# Sum over ranks of (r + 1) * [1, 2, 3]: W(W+1)/2 * [1, 2, 3].
t = torch.tensor([1.0, 2.0, 3.0]) * (rank + 1)
dist.all_reduce(t)
expected = torch.tensor([1.0, 2.0, 3.0]) * (world_size * (world_size + 1) / 2)
if not torch.equal(t, expected):
    problems.append(f"all_reduce gave {t.tolist()}, expected {expected.tolist()}")

# Every rank has a different RANK and LOCAL_RANK, and all agree on MASTER_ADDR and MASTER_PORT.
seen = [None] * world_size
dist.all_gather_object(
    seen, (rank, local_rank, os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], os.environ.get("EXPECT_PORT"))
)
if sorted(s[0] for s in seen) != list(range(world_size)) or sorted(s[1] for s in seen) != list(range(world_size)):
    problems.append(f"ranks and local ranks are not 0..{world_size - 1}: {seen}")
if len({s[2:4] for s in seen}) != 1:
    problems.append(f"the ranks disagree on MASTER_ADDR/MASTER_PORT: {seen}")
expect_port = os.environ.get("EXPECT_PORT")
if expect_port and os.environ["MASTER_PORT"] != expect_port:
    problems.append(f"MASTER_PORT {os.environ['MASTER_PORT']} is not the user's {expect_port}")
dist.destroy_process_group()

if problems:
    print(f"FAIL rank {rank} of {world_size}: " + "; ".join(problems), flush=True)
    sys.exit(1)
print(f"PASS rank {rank} of {world_size} MASTER_ADDR={os.environ['MASTER_ADDR']}", flush=True)
