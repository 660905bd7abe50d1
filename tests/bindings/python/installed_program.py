"""Run by install_test.py, from a directory outside the source tree, with a virtual environment's python into which
pip installed the package: the installed lockstep and lockstep.torch (not a build tree's) on numpy and torch."""
import os
import sys

import numpy as np

import lockstep
import lockstep.torch
import torch
import torch.distributed as dist


def main() -> None:
    package_dir = os.path.dirname(os.path.realpath(lockstep.__file__))
    prefix = os.path.realpath(sys.prefix)
    assert package_dir.startswith(prefix + os.sep), f"lockstep imported from {package_dir}, not from {prefix}"
    assert os.path.dirname(os.path.realpath(lockstep.torch.__file__)) == package_dir
    assert not os.environ.get("PYTHONPATH"), f"PYTHONPATH is set: {os.environ['PYTHONPATH']}"
    # mpirun sets LD_LIBRARY_PATH to its own prefix's library folder: none of its folders may hold lockstep's.
    for folder in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")):
        assert not (os.path.isdir(folder) and any(n.startswith("liblockstep") for n in os.listdir(folder))), folder
    # The extension found the libraries next to it: the copies inside the package, not others.
    with open("/proc/self/maps", encoding="utf-8") as maps:
        loaded = {line.split()[-1] for line in maps if "liblockstep" in line}
    expected = {os.path.join(package_dir, "liblockstep.so.0"), os.path.join(package_dir, "liblockstep_c.so.1")}
    assert {os.path.realpath(path) for path in loaded} == expected, f"loaded {sorted(loaded)}"

    comm = lockstep.Communicator.world()
    rank, size = comm.rank, comm.size
    x = np.arange(5, dtype=np.float64) * (rank + 1)
    comm.allreduce(x)
    np.testing.assert_array_equal(x, np.arange(5) * size * (size + 1) / 2)

    lockstep.torch.init_process_group()
    assert dist.get_backend() == lockstep.torch.BACKEND
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), size * (size + 1) / 2)), t
    dist.destroy_process_group()
    print(f"PASS installed rank {rank}/{size}", flush=True)


if __name__ == "__main__":
    main()
