"""A Python job that hangs while one rank computes: every rank but the last waits in an allreduce, the last loops in
spin_in_python(), and a helper thread of every rank sleeps in idle_thread(). The hang report's Python stacks must
name the last rank's line in spin_in_python, the others' line of the allreduce, and the helper thread. Run by
stacks_test.py with a short timeout.

    stacks_hang.py [spin]   as above
    stacks_hang.py gil      the last rank sleeps in C without releasing the GIL (ctypes.PyDLL): its Python frames
                            cannot be taken, the report says why, and shows its native frames.
"""
import ctypes
import sys
import threading
import time

import numpy as np

import lockstep


def spin_in_python() -> None:
    x = 0
    while True:
        x += 1  # spins here


def idle_thread() -> None:
    while True:
        time.sleep(0.05)  # sleeps here


def main() -> None:
    world = lockstep.Communicator.world()
    threading.Thread(target=idle_thread, daemon=True).start()
    world.allreduce(np.ones(4, dtype=np.float32))
    if world.rank == world.size - 1:
        if sys.argv[1:] == ["gil"]:
            libc = ctypes.PyDLL(None)  # calls keep the GIL
            while True:
                libc.sleep(60)  # holds the GIL here
        spin_in_python()
    world.allreduce(np.ones(4, dtype=np.float32))  # waits here


if __name__ == "__main__":
    main()
