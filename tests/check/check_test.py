#!/usr/bin/env python3
"""Runs an MPI program under liblockstep_check.so (LD_PRELOAD) and checks what the checking library says.

Usage: check_test.py MPIRUN LIBRARY NP MODE PROGRAM [ARGS...]
  MPIRUN may be the lockstep program: the job is then started by `lockstep launch --check`, which finds the library
  itself (LIBRARY is not used).
  clean-debug   debug mode on: the job exits 0 and nothing mentions lockstep check.
  clean-off     debug mode off: the same.
  bug:TEXT[|TEXT...]   debug mode on: every process prints the same report, which holds every TEXT, and the job
                ends non-zero.
  return:TEXT[|TEXT...]  debug mode on, the program set MPI_ERRORS_RETURN: every process prints the same report
                (every TEXT in it) and the error string it got, and the job exits 0.
Every run is ended after 60 s (a hang fails the test).
"""
import json
import os
import re
import subprocess
import sys

from job import job

LIMIT_SECONDS = 60
TAG = re.compile(r"\[\d+,(\d+)\]<(stdout|stderr)>:")


def tag_output(lockstep):
    """The launcher option `lockstep launch` needs for Open MPI's output tags ([1,RANK]<stdout>:): Open MPI's own, or
    its equivalent for MPICH's Hydra, which a build against MPICH launches with."""
    plan = subprocess.run([lockstep, "launch", "--dry-run", "--json", "true"], capture_output=True, text=True)
    launcher = json.loads(plan.stdout)["launcher"] if plan.returncode == 0 else "openmpi"
    return "-prepend-pattern '[1,%r]<stdout>:'" if launcher == "hydra" else "--tag-output"


def run(mpirun, library, np, debug, program, args):
    env = dict(os.environ, LOCKSTEP_DEBUG_MODE="1" if debug else "0")
    command = [
        mpirun,
        "-n",
        str(np),
        "--oversubscribe",
        "--tag-output",
        "-x",
        f"LD_PRELOAD={library}",
        "-x",
        "LOCKSTEP_DEBUG_MODE",
        program,
        *args,
    ]
    if os.path.basename(mpirun) == "lockstep":
        command = [
            mpirun,
            "launch",
            "--check",
            "--debug" if debug else "--no-debug",
            "-n",
            str(np),
            "--oversubscribe",
            "--mpirun-args",
            tag_output(mpirun),
            "--",
            program,
            *args,
        ]
    return job(command, env, LIMIT_SECONDS)


def reports(output, np):
    """Each process's report: its lines from 'lockstep check:' to the line that says how it ends."""
    lines = {rank: [] for rank in range(np)}
    # mpirun tags each chunk it forwards, and a chunk need not end a line: a tag may follow text without a newline.
    parts = TAG.split(output)
    for i in range(1, len(parts) - 2, 3):
        lines[int(parts[i])].extend(line for line in parts[i + 2].split("\n") if line)
    found = {}
    for rank, text in lines.items():
        block = []
        for line in text:
            if line.startswith("lockstep check:") and not block:
                block.append(line)
            elif block:
                block.append(line)
                if line.startswith("Ending the job") or line.startswith("Returning the error code"):
                    break
        found[rank] = "\n".join(block)
    return found, lines


def main():
    mpirun, library, np, mode, program, args = (
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        sys.argv[4],
        sys.argv[5],
        sys.argv[6:],
    )
    checks = []
    if mode.startswith("clean-"):
        code, output = run(mpirun, library, np, mode == "clean-debug", program, args)
        checks = [
            (code == 0, f"the job exits 0 (got {code})"),
            ("lockstep check" not in output, "no report"),
        ]
    else:
        kind, _, texts = mode.partition(":")
        code, output = run(mpirun, library, np, True, program, args)
        found, lines = reports(output, np)
        first = found[0]
        checks.append((first != "", "process 0 printed a report"))
        for rank in range(1, np):
            checks.append((found[rank] == first, f"process {rank} printed the same report as process 0"))
        for text in texts.split("|"):
            checks.append((text in first, f"the report says {text!r}"))
        if kind == "bug":
            checks.append((code != 0, f"the job exits non-zero (got {code})"))
            checks.append(("Ending the job" in first, "the report says the job ends"))
        else:
            checks.append((code == 0, f"the job exits 0 (got {code})"))
            for rank in range(np):
                got = any("returned an error: lockstep check:" in line for line in lines[rank])
                checks.append((got, f"process {rank} got the error code and its string"))
    failed = [what for ok, what in checks if not ok]
    for ok, what in checks:
        print(("ok   " if ok else "FAIL ") + what)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
