#!/usr/bin/env python3
"""A call another library carries that the last rank never begins: lockstep's watchdog reports it and ends the job.

Usage: foreign_hang_test.py MPIRUN PROGRAM NP
Runs `PROGRAM hang` (c_api_foreign_test) under mpirun with LOCKSTEP_TIMEOUT=2 and passes when the job ends non-zero
within LIMIT_SECONDS and the report names the stuck call with its carrier and call site, and the last rank as never
arrived.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from harness import run_launcher  # noqa: E402

LIMIT_SECONDS = 30


def main() -> int:
    mpirun, program, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
    env = dict(os.environ, LOCKSTEP_TIMEOUT="2")
    ran = run_launcher([mpirun, "-n", str(np), "--oversubscribe", program, "hang"], env, LIMIT_SECONDS + 10)
    if ran is None:
        print(f"FAIL: the job was still running after {LIMIT_SECONDS + 10} s")
        return 1
    returncode, out, err, elapsed = ran
    output = out + err
    last = np - 1
    checks = [
        (returncode != 0, f"the job exits non-zero (got {returncode})"),
        (elapsed < LIMIT_SECONDS, f"the job ends within {LIMIT_SECONDS} s (took {elapsed:.1f} s)"),
        ("collective timed out after" in output, "a timeout report is printed"),
        (
            "`lockstep::allreduce` #3 float32[4] in calls carried by a test's carrier" in output,
            "the report names the stuck call (allreduce #3) and its carrier",
        ),
        ("called at carrier_program.py:81" in output, "the report gives the call site"),
        (f"Never arrived: Process {last}\n" in output, f"the report names rank {last} as never arrived"),
        ("last completed `lockstep::allreduce` #2" in output, "the report says what was completed last"),
    ]
    for ok, what in checks:
        print(("ok:   " if ok else "FAIL: ") + what)
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
