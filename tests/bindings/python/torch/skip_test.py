#!/usr/bin/env python3
"""A rank that skips a torch.distributed collective on the backend "lockstep", or on the checking backend
"lockstep_gloo" (the other ranks then wait inside gloo, whose own timeout is 30 minutes): lockstep's watchdog turns the
hang into a report on stderr and ends the job with a non-zero status.

Usage: skip_test.py MPIRUN NP DEBUG(0|1) [BACKEND]   (default: lockstep)
Runs skip_job.py under mpirun with LOCKSTEP_TIMEOUT=3 and passes when the job ends non-zero within LIMIT_SECONDS and
its stderr says what hung: the all_reduce at skip_job.py's line (for lockstep_gloo, as carried by gloo), every waiting
rank's line, the last rank as never arrived, and what it did last.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import run_launcher  # noqa: E402

LIMIT_SECONDS = 40
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "skip_job.py")


def skipped_line() -> int:
    with open(JOB) as job:
        return next(number for number, text in enumerate(job, 1) if "# the call the last rank skips" in text)


def main() -> int:
    mpirun, np, debug = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    backend = sys.argv[4] if len(sys.argv) > 4 else "lockstep"
    env = dict(os.environ, LOCKSTEP_TIMEOUT="3", LOCKSTEP_DEBUG_MODE=debug, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    command = [mpirun, "-n", str(np), "--oversubscribe", sys.executable, JOB, backend]
    ran = run_launcher(command, env, LIMIT_SECONDS + 20)
    if ran is None:
        print(f"FAIL: the job was still running after {LIMIT_SECONDS + 20} s: the hang was not turned into an error")
        return 1
    returncode, out, err, elapsed = ran
    last = np - 1
    site = f"skip_job.py:{skipped_line()}"
    checks = [
        (returncode != 0, f"the job exits non-zero (got {returncode})"),
        (elapsed < LIMIT_SECONDS, f"the job ends within {LIMIT_SECONDS} s (took {elapsed:.1f} s)"),
        (f"rank {last} left the loop after 2 steps" in out, f"rank {last} left the loop early"),
        ("collective timed out after" in err, "a timeout report is printed on stderr"),
        (
            "`lockstep::allreduce`" in err and f"called at {site}" in err,
            f"the report names the stuck allreduce and its call site {site}",
        ),
        (f"Never arrived: Process {last}\n" in err, f"the report names rank {last} as never arrived"),
        (
            f"Process {last} (host" in err and "last completed `lockstep::allreduce`" in err,
            f"the report says what rank {last} completed last",
        ),
        ("collective timed out after" not in out, "the report is not on stdout"),
        (
            all(
                re.search(rf"  - Process {rank} \(host [^\n]*\): in [^\n]* at {re.escape(site)};", err)
                for rank in range(last)
            ),
            f"the report gives every waiting rank's line ({site})",
        ),
    ]
    if backend != "lockstep":
        stuck = f"`lockstep::allreduce` #3 float32[8] in calls carried by gloo (torch backend {backend})"
        checks += [
            (f"Operation: {stuck}" in err, "the report names the call as carried by gloo"),
            (
                "last completed `lockstep::allreduce` #2 float32[8] in calls carried by gloo" in err,
                f"the report says rank {last} completed the all_reduce before the one it skipped",
            ),
        ]
    for ok, what in checks:
        print(("ok:   " if ok else "FAIL: ") + what)
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
