"""torch's own init with nothing set, under mpirun and under `lockstep launch` (2 and 3 ranks).

After `import lockstep.torch`, dist.init_process_group(BACKEND) (mode "plain"), or with init_method="env://"
(mode "env_url"), finds rank and size from the job. Under mpirun nothing is set (the test checks), so lockstep's
rendezvous runs: MPI's rank and size, rank 0's store address broadcast through lockstep. Under `lockstep launch`
(mode "launched") the launcher gives torchrun's variables, so torch's own env:// rendezvous runs and must agree with
MPI. Either way the ranks are MPI's, a collective and a new group work, and with backend gloo the process group is
torch's own.

Usage: mpirun -n N python3 plain_init_test.py plain|env_url|launched BACKEND
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from harness import run  # noqa: E402

TORCHRUN = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]


def main():
    mode, backend = sys.argv[1], sys.argv[2]
    present = [name for name in TORCHRUN if name in os.environ]
    if mode == "launched":
        assert present == TORCHRUN, f"lockstep launch left out {sorted(set(TORCHRUN) - set(present))}"
    else:
        assert not present, f"the job was started with {present} set: this test needs a clean environment"
    if mode == "env_url":
        dist.init_process_group(backend, init_method="env://")
    else:
        dist.init_process_group(backend)
    r, n = dist.get_rank(), dist.get_world_size()
    assert (r, n) == (
        lockstep.rank(),
        lockstep.size(),
    ), f"torch says {r}/{n}, MPI says {lockstep.rank()}/{lockstep.size()}"
    assert dist.get_backend() == backend, dist.get_backend()
    if mode == "launched":
        assert int(os.environ["RANK"]) == r and int(os.environ["WORLD_SIZE"]) == n
        assert int(os.environ["LOCAL_RANK"]) == lockstep.local_rank(), (os.environ["LOCAL_RANK"], lockstep.local_rank())
    x = torch.full((3,), float(r + 1))
    dist.all_reduce(x)
    assert x.tolist() == [n * (n + 1) / 2] * 3, x
    pair = dist.new_group([0, n - 1], backend="lockstep")
    if r in (0, n - 1):
        y = torch.ones(2)
        dist.all_reduce(y, group=pair)
        assert y.tolist() == [2.0, 2.0], y
    dist.barrier()
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    run("torch_plain_init", main)
