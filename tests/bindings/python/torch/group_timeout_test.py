#!/usr/bin/env python3
"""A torch group's timeout is its lockstep communicator's watchdog timeout, in both settings of on_timeout.

Usage: group_timeout_test.py MPIRUN NP end|raise
Runs group_timeout_job.py under mpirun (LOCKSTEP_TIMEOUT unset: 600 s) with LOCKSTEP_ON_TIMEOUT as given.
  end:   the job ends non-zero within LIMIT_SECONDS with the watchdog's report naming the last rank as never arrived.
  raise: the job exits 0; every other rank caught a TimeoutError that is a lockstep.Error and the builtin, whose text
         is the report (the last rank never arrived, the group's 1 s timeout); a later call on the group raised at
         once; the ranks met again in a barrier of the default group.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import run_launcher  # noqa: E402

LIMIT_SECONDS = 40
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "group_timeout_job.py")


def main() -> int:
    mpirun, np, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    env = {k: v for k, v in os.environ.items() if k != "LOCKSTEP_TIMEOUT"}
    env.update(LOCKSTEP_ON_TIMEOUT=mode, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    command = [mpirun, "-n", str(np), "--oversubscribe", sys.executable, JOB]
    ran = run_launcher(command, env, LIMIT_SECONDS + 20)
    if ran is None:
        print(f"FAIL: the job was still running after {LIMIT_SECONDS + 20} s: the group's timeout did not act")
        return 1
    returncode, out, err, elapsed = ran
    last = np - 1
    waiting = range(last)
    checks = [(elapsed < LIMIT_SECONDS, f"the job ends within {LIMIT_SECONDS} s (took {elapsed:.1f} s)")]
    if mode == "end":
        checks += [
            (returncode != 0, f"the job exits non-zero (got {returncode})"),
            ("collective timed out after" in err, "the watchdog's report is on stderr"),
            ("(timeout 1 s)" in err or "timeout 1 s" in err, "the report gives the group's timeout of 1 s"),
            (f"Never arrived: Process {last}" in err, f"the report names rank {last} as never arrived"),
            ("caught" not in out, "nobody caught an exception"),
        ]
    else:
        checks += [(returncode == 0, f"the job exits 0 (got {returncode})")]
        for r in waiting:
            caught = f"rank {r}: caught TimeoutError (lockstep.Error=True builtin=True)"
            report = out.split(caught, 1)[1].split(f"rank {r}: end of report", 1)[0] if caught in out else ""
            checks += [
                (caught in out, f"rank {r} caught a TimeoutError that is a lockstep.Error and the builtin"),
                (f"Process {last}" in report and "Never arrived" in report, f"rank {r}'s error names rank {last}"),
                (f"rank {r}: later call raised at once (True)" in out, f"rank {r}'s later call on the group raised"),
            ]
        checks += [(f"rank {r} done" in out, f"rank {r} reached the end") for r in range(np)]
        checks += [("FAIL" not in out, "no rank printed FAIL")]
    for ok, what in checks:
        print(("ok:   " if ok else "FAIL: ") + what)
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
