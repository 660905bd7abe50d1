#!/usr/bin/env python3
"""Runs hang_program under mpirun with a short collective timeout and checks that the hang is diagnosed.

Usage: hang_test.py MPIRUN PROGRAM NP DEBUG(0|1)
Passes when the job exits non-zero within 20 s and the report names the rank that never arrived and what it did last.
"""
import os
import signal
import subprocess
import sys
import time

LIMIT_SECONDS = 20


def main() -> int:
    mpirun, program, np, debug = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    env = dict(os.environ, LOCKSTEP_TIMEOUT="3", LOCKSTEP_DEBUG_MODE=debug)
    start = time.monotonic()
    proc = subprocess.Popen([mpirun, "-n", str(np), "--oversubscribe", program], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=LIMIT_SECONDS + 10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        print(output)
        print(f"FAIL: the job was still running after {LIMIT_SECONDS + 10} s: the hang was not turned into an error")
        return 1
    elapsed = time.monotonic() - start
    print(output)
    last = np - 1
    checks = [
        (proc.returncode != 0, f"the job exits non-zero (got {proc.returncode})"),
        (elapsed < LIMIT_SECONDS, f"the job ends within {LIMIT_SECONDS} s (took {elapsed:.1f} s)"),
        ("collective timed out after" in output, "a timeout report is printed"),
        (f"Never arrived: Process {last}\n" in output, f"the report names rank {last} as never arrived"),
        ("`lockstep::allreduce` #3" in output, "the report names the stuck call (allreduce #3)"),
        (f"Process {last} (host" in output and "last completed `lockstep::allreduce` #2" in output,
         f"the report says rank {last} last completed allreduce #2"),
        ("hang_program.cpp:" in output, "the report gives the call site"),
    ]
    failed = [what for ok, what in checks if not ok]
    for ok, what in checks:
        print(("ok:   " if ok else "FAIL: ") + what)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
