"""torch.distributed over lockstep: the backend "lockstep" for a job that mpirun started.

    mpirun -n 2 python3 examples/python/torch_allreduce.py
"""
import torch
import torch.distributed as dist

import lockstep.torch


def main() -> None:
    lockstep.torch.init_process_group()  # rank, size and the rendezvous come from lockstep: no MASTER_ADDR, RANK
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == lockstep.torch.BACKEND

    x = torch.full((3,), float(rank + 1))
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), size * (size + 1) / 2))

    gathered = [torch.empty(2, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(gathered, torch.full((2,), rank, dtype=torch.int64))
    assert all(bool((t == r).all()) for r, t in enumerate(gathered))

    dist.destroy_process_group()
    print(f"PASS torch_allreduce_example rank {rank}/{size}")


if __name__ == "__main__":
    main()
