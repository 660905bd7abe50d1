"""DistributedDataParallel on the checking backend "lockstep_gloo" against DDP on plain gloo, under mpirun (2 and 3
ranks), with debug mode on: three training steps of ddp_test.py's model from the same start on the same data give
identical parameters and buffers (torch.equal) on every rank, with DDP's default hook (its Reducer's allreduce through
C++, and _broadcast_coalesced, _verify_params_across_processes), with find_unused_parameters and torch's
allreduce_hook (futures), and with the fp16 compression hook; then every call has left lockstep's board.

Run by run_job.py: mpirun -n N python3 checked_ddp_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch.distributed as dist  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402

import lockstep  # noqa: E402
import lockstep.torch  # noqa: E402
from ddp_test import compare  # noqa: E402
from checked_collectives_test import check_board_empties  # noqa: E402
from harness import run  # noqa: E402


def main():
    lockstep.init(debug=True)
    lockstep.torch.init_process_group(lockstep.torch.GLOO_BACKEND)
    r, n = dist.get_rank(), dist.get_world_size()
    checked = dist.group.WORLD
    assert isinstance(checked, lockstep.torch.ProcessGroupChecked) and checked.debug
    gloo = dist.new_group(backend="gloo")
    compare("default", r, n, gloo, {}, None)
    compare("unused", r, n, gloo, {"find_unused_parameters": True}, default_hooks.allreduce_hook)
    compare("fp16", r, n, gloo, {}, default_hooks.fp16_compress_hook)
    check_board_empties(checked)
    return r, n


if __name__ == "__main__":
    run("checked_ddp", main)
