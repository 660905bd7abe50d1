#!/usr/bin/env python3
"""Runs a Python test program under mpirun and checks how the job ended.

Usage: run_job.py MPIRUN NP PROGRAM [ARGS...]
(MPIRUN may be a launcher with its words, split as a shell would: "/path/lockstep launch")

Runs `MPIRUN -n NP --oversubscribe PYTHON PROGRAM ARGS` with this interpreter (the one meson found, Debian's
/usr/bin/python3 with numpy and mpi4py) and passes when, within the time limit:
  - the job exits 0,
  - every rank printed "PASS <name> rank r/NP" (r = 0 .. NP-1),
  - nothing says MPI was finalised twice, used after MPI_Finalize, or left without MPI_Finalize.
A program that needs what this machine lacks (a CUDA device) prints "SKIP <name> rank r/NP: why" on every rank and
exits 0; the job is then reported as skipped (exit 77, meson's code for it).
"""
import os
import re
import shlex
import signal
import subprocess
import sys

LIMIT_SECONDS = int(os.environ.get("LOCKSTEP_PYTHON_TEST_LIMIT", "100"))
# Open MPI's words for finalising twice, calling MPI after MPI_Finalize, and a process that never finalised.
FINALIZE_ERRORS = [
    r"MPI_Finalize\(\) function was called after MPI_FINALIZE",
    r"after MPI_FINALIZE was invoked",
    r"An error occurred in MPI_Finalize",
    r"without calling \"finalize\"",
    r"called after MPI_FINALIZE",
    r"MPI_ERR_",
]


def main() -> int:
    mpirun, np, program, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    command = shlex.split(mpirun) + ["-n", str(np), "--oversubscribe", sys.executable, program] + args
    print("$ " + " ".join(command), flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=LIMIT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        print(out)
        print(err, file=sys.stderr)
        print(f"FAIL: the job was still running after {LIMIT_SECONDS} s")
        return 1
    print(out)
    print("---- stderr ----")
    print(err)
    skipped = set(re.findall(r"SKIP \S+ rank (\d+)/(\d+)", out))
    if proc.returncode == 0 and all((str(rank), str(np)) in skipped for rank in range(np)):
        print(f"skipped: {program} {' '.join(args)} on {np} ranks")
        return 77
    failures = []
    if proc.returncode != 0:
        failures.append(f"the job exits 0 (got {proc.returncode})")
    # Not anchored to whole lines: mpirun may interleave the output of ranks.
    passed = set(re.findall(r"PASS \S+ rank (\d+)/(\d+)", out))
    for rank in range(np):
        if (str(rank), str(np)) not in passed:
            failures.append(f"rank {rank} of {np} printed PASS")
    for pattern in FINALIZE_ERRORS:
        if re.search(pattern, out + err):
            failures.append(f"no MPI finalisation error in the output (found /{pattern}/)")
    for failure in failures:
        print("FAIL: " + failure)
    if not failures:
        print(f"ok: {program} {' '.join(args)} on {np} ranks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
