#!/usr/bin/env python3
"""Runs the real lockstep-rank-env with each launcher's variables set by hand, and checks what the program it
executes sees and how it exits when the program cannot be executed.

Usage: rank_env_test.py LOCKSTEP_RANK_ENV
"""
import os
import subprocess
import sys
import tempfile

FAILURES = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        FAILURES.append(what)


def run(args, env):
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    print(f"$ {' '.join(args)}  -> {proc.returncode}")
    if proc.stderr:
        print("stderr:", proc.stderr[-2000:])
    return proc


def seen(stdout):
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


TORCH = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "MASTER_ADDR",
    "MASTER_PORT",
)


def main():
    wrapper = sys.argv[1]
    base = {"PATH": "/usr/bin:/bin"}

    hydra = dict(
        base,
        PMI_RANK="3",
        PMI_SIZE="4",
        MPI_LOCALRANKID="1",
        MPI_LOCALNRANKS="2",
        MASTER_ADDR="h0",
        MASTER_PORT="5555",
        KEEP="me",
    )
    p = run([wrapper, "--from", "hydra", "--", "env"], hydra)
    got = seen(p.stdout)
    want = {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "GROUP_WORLD_SIZE": "2",
        "ROLE_RANK": "3",
        "ROLE_WORLD_SIZE": "4",
        "ROLE_NAME": "default",
        "MASTER_ADDR": "h0",
        "MASTER_PORT": "5555",
    }
    check(p.returncode == 0 and {k: got.get(k) for k in TORCH} == want, f"Hydra's variables: {got}")
    check(got.get("KEEP") == "me" and got.get("PMI_RANK") == "3", "the rest of the environment is kept")

    slurm = dict(
        base,
        SLURM_PROCID="2",
        SLURM_NTASKS="3",
        SLURM_LOCALID="0",
        SLURM_NODEID="1",
        SLURM_STEP_TASKS_PER_NODE="2,1",
        SLURM_STEP_NODELIST="gpu[3-4]",
        MASTER_PORT="7000",
    )
    got = seen(run([wrapper, "--from", "srun", "env"], slurm).stdout)
    check(
        (got.get("RANK"), got.get("LOCAL_WORLD_SIZE"), got.get("GROUP_RANK"), got.get("MASTER_ADDR"))
        == ("2", "1", "1", "gpu3"),
        f"srun's variables, MASTER_ADDR from the step's node list: {got}",
    )
    # The program's own arguments are passed as they are, options included.
    p = run([wrapper, "--from", "srun", "--", "/bin/sh", "-c", 'echo "$RANK:$1"', "sh", "--from"], slurm)
    check(p.stdout.strip() == "2:--from", "the program and its arguments are untouched")

    openmpi = dict(
        base,
        OMPI_COMM_WORLD_RANK="0",
        OMPI_COMM_WORLD_SIZE="1",
        OMPI_COMM_WORLD_LOCAL_RANK="0",
        OMPI_COMM_WORLD_LOCAL_SIZE="1",
    )
    p = run([wrapper, "--from", "openmpi", "--", "no-such-program-lockstep"], openmpi)
    check(p.returncode == 127 and "'no-such-program-lockstep'" in p.stderr, "a program not found: 127, named")
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "plain.sh")
        with open(plain, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        p = run([wrapper, "--from", "openmpi", "--", plain], openmpi)
        check(p.returncode == 126 and plain in p.stderr, "a program that is not executable: 126, named")
        p = run([wrapper, "--from", "openmpi", "--", tmp], openmpi)
        check(p.returncode == 126 and tmp in p.stderr, "a directory: 126")

    p = run([wrapper, "--from", "srun", "--", "env"], openmpi)
    check(p.returncode == 2 and "SLURM_PROCID is not set" in p.stderr, "missing launcher variables: 2, named")
    p = run([wrapper, "--from", "pbs", "--", "env"], openmpi)
    check(p.returncode == 2 and "pbs" in p.stderr, "an unknown launcher: usage error")
    p = run([wrapper, "env"], openmpi)
    check(p.returncode == 2 and "usage" in p.stderr, "no --from: usage error")

    print(f"{len(FAILURES)} failed" if FAILURES else "all checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
