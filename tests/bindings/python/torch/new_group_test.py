"""torch.distributed.new_group over the backend "lockstep", under mpirun with 3 ranks: groups of 2 of the 3 ranks.

torch creates a group's process group on its members only; lockstep.torch finds the members' world ranks through the
group's store and makes the group's communicator with them alone. Checked: each group's rank, size and communicator,
collectives on the group against gloo groups of the same ranks (with source and destination given as global ranks),
point to point inside a group, two groups that share a rank used one after the other, a non-member's tensor left as it
was, and the world group still right afterwards.

Run by run_job.py: mpirun -n 3 python3 new_group_test.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import lockstep.torch  # noqa: E402
from harness import run  # noqa: E402


def values(r, salt=0):
    return torch.arange(4, dtype=torch.float32) * 10 + r + 3 * salt


def check_group(members, group, gloo_group, r, salt):
    if r not in members:
        assert group == dist.GroupMember.NON_GROUP_MEMBER, group
        mine = values(r, salt)
        # A non-member's call is a no-op on its tensor (torch warns and returns).
        dist.all_reduce(mine, group=group)
        assert torch.equal(mine, values(r, salt)), mine
        return
    assert isinstance(group, lockstep.torch.ProcessGroupLockstep), type(group)
    assert group.size() == len(members) and group.rank() == members.index(r), (group.size(), group.rank())
    assert group.comm.size == len(members) and group.comm.rank == members.index(r), group.comm
    assert dist.get_backend(group) == "lockstep"

    ours, oracle = values(r, salt), values(r, salt)
    dist.all_reduce(ours, group=group)
    dist.all_reduce(oracle, group=gloo_group)
    expected = sum(values(m, salt) for m in members)
    assert torch.equal(ours, oracle) and torch.equal(ours, expected), (ours, oracle, expected)

    # Sources and destinations are global ranks; torch maps them to group ranks.
    root = members[-1]
    ours = values(r, salt)
    dist.broadcast(ours, src=root, group=group)
    assert torch.equal(ours, values(root, salt)), ours
    gathered = [torch.zeros(4) for _ in members]
    dist.all_gather(gathered, values(r, salt), group=group)
    assert all(torch.equal(g, values(m, salt)) for g, m in zip(gathered, members)), gathered
    ours = values(r, salt)
    dist.reduce(ours, dst=members[0], op=dist.ReduceOp.MAX, group=group)
    if r == members[0]:
        assert torch.equal(ours, values(max(members), salt)), ours

    first, second = members
    if r == first:
        dist.send(values(r, salt) * 2, dst=second, group=group, tag=3)
    else:
        received = torch.zeros(4)
        dist.recv(received, src=first, group=group, tag=3)
        assert torch.equal(received, values(first, salt) * 2), received


def main():
    lockstep.torch.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    assert n == 3, "run with 3 ranks"
    # Every rank calls new_group for every group, in the same order (torch's rule); members only create them.
    pairs = [[0, 2], [1, 2]]
    groups = [dist.new_group(members) for members in pairs]
    gloo_groups = [dist.new_group(members, backend="gloo") for members in pairs]
    for salt, (members, group, gloo_group) in enumerate(zip(pairs, groups, gloo_groups)):
        check_group(members, group, gloo_group, r, salt)
    # The world group after the groups: all three ranks.
    x = values(r)
    dist.all_reduce(x)
    assert torch.equal(x, values(0) + values(1) + values(2)), x
    dist.barrier()
    dist.destroy_process_group()
    return r, n


if __name__ == "__main__":
    run("torch_new_group", main)
