"""The checking backend "lockstep_nccl" on one rank and one GPU: NCCL carries all_reduce, broadcast, all_gather and
barrier on CUDA tensors, lockstep numbers and checks each (debug mode on, the device in the signature) and every call
leaves lockstep's board once its Work completed. Skipped (77) where torch has no CUDA device or no NCCL.

Run by run_job.py: mpirun -n 1 python3 checked_nccl_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from checked_collectives_test import check_board_empties  # noqa: E402
from harness import run, skip  # noqa: E402


def main():
    import lockstep
    import lockstep.torch

    lockstep.init(debug=True)
    lockstep.torch.init_process_group(lockstep.torch.NCCL_BACKEND)
    r, n = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    assert isinstance(group, lockstep.torch.ProcessGroupChecked) and group.debug
    torch.cuda.set_device(0)
    x = torch.arange(6, dtype=torch.float32, device="cuda")
    dist.all_reduce(x)
    assert torch.equal(x.cpu(), torch.arange(6, dtype=torch.float32) * n), x
    dist.broadcast(x, 0)
    outputs = [torch.zeros(6, device="cuda") for _ in range(n)]
    dist.all_gather(outputs, x)
    assert all(torch.equal(o, x) for o in outputs)
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    dist.barrier()
    torch.cuda.synchronize()
    check_board_empties(group)
    return r, n


if __name__ == "__main__":
    if not torch.cuda.is_available():
        skip("checked_nccl", "torch sees no CUDA device")
    if not dist.is_nccl_available():
        skip("checked_nccl", "this torch was built without NCCL")
    run("checked_nccl", main)
