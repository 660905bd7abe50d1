#!/usr/bin/env python3
"""The training example's failures: a diverged run and a bad command line.

Usage: train_errors_test.py MPIRUN TRAIN_PROGRAM

1. A run whose loss becomes NaN (--lr 1e9) stops every rank in the same epoch: on 1 and 4 ranks every rank exits with
   status 1 (each rank's status is read through a shell around it, with mpirun told not to end the job at the first
   non-zero status), the main process prints the reason once, and no rank reaches the end of training; a plain
   mpirun of it exits non-zero.
2. A bad argument is a one-line message naming the option and the value, exit status 2, on one process and under
   mpirun with 2 ranks (only the main process prints it). Among them a global batch that does not divide over the
   ranks, which only the ranks can see.
3. --help exits 0 and shows the defaults.
"""
import re
import subprocess
import sys

TIMEOUT = 120
DIVERGED = "training diverged: the loss is not finite"
# Runs each rank inside a shell that reports the rank's exit status, then exits with it.
REPORT_STATUS = 'rank=${OMPI_COMM_WORLD_RANK:-0}; "$0" "$@"; s=$?; echo "rank $rank exit status $s"; exit $s'

BAD_ARGUMENTS = [
    (["--epochs", "0"], "--epochs must be at least 1 (got 0)"),
    (["--epochs", "-3"], "--epochs must be at least 1 (got -3)"),
    (["--patience", "0"], "--patience must be at least 1 (got 0)"),
    (["--lr", "0"], "--lr must be a positive number (got 0)"),
    (["--lr", "nan"], "--lr must be a positive number (got nan)"),
    (["--momentum", "1"], "--momentum must be in [0, 1) (got 1)"),
    (["--features", "1"], "--features must be at least 2 (got 1)"),
    (["--global-batch", "0"], "--global-batch must be at least 1 (got 0)"),
    (["--epochs", "many"], "--epochs"),
    (["--no-such-option"], "--no-such-option"),
    (["--global-batch", "64", "--batch-size", "32"], "excludes"),
]


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)


class Checks:
    def __init__(self):
        self.failures = []

    def expect(self, ok, what, detail=""):
        print(("ok:   " if ok else "FAIL: ") + what)
        if not ok:
            if detail:
                print(detail[-3000:])
            self.failures.append(what)


def program_lines(text):
    return [line for line in text.splitlines() if line.startswith("lockstep_train:")]


def check_divergence(c, mpirun, program):
    for np in (1, 4):
        cmd = [
            mpirun,
            "-n",
            str(np),
            "--oversubscribe",
            "--mca",
            "orte_abort_on_non_zero_status",
            "0",
            "sh",
            "-c",
            REPORT_STATUS,
            program,
            "--lr",
            "1e9",
        ]
        r = run(cmd)
        out = r.stdout + r.stderr
        statuses = dict(re.findall(r"^rank (\d+) exit status (\d+)$", out, re.M))
        c.expect(
            sorted(statuses) == [str(i) for i in range(np)] and set(statuses.values()) == {"1"},
            f"{np} rank(s), --lr 1e9: every rank exits with status 1 (got {statuses})",
            out,
        )
        c.expect(out.count(DIVERGED) == 1, f"{np} rank(s), --lr 1e9: the reason is printed once", out)
        c.expect(
            "epoch   1/30" in out and "epoch   2/30" not in out and "done:" not in out,
            f"{np} rank(s), --lr 1e9: every rank stops after the first epoch",
            out,
        )
    r = run([mpirun, "-n", "2", "--oversubscribe", program, "--lr", "1e9"])
    c.expect(
        r.returncode != 0, f"mpirun -n 2 of a diverging run exits non-zero (got {r.returncode})", r.stdout + r.stderr
    )


def check_usage(c, mpirun, program):
    for args, expected in BAD_ARGUMENTS:
        r = run([program, *args])
        lines = r.stderr.splitlines()
        c.expect(
            r.returncode == 2 and r.stdout == "" and len(lines) == 1 and expected in lines[0] and len(lines[0]) < 160,
            f"{' '.join(args)}: exit status 2 and one line (got {r.returncode}: {r.stderr.strip()!r})",
        )
    for args, expected in [
        (["--epochs", "0"], "--epochs must be at least 1 (got 0)"),
        (["--global-batch", "3"], "--global-batch 3 does not divide evenly over 2 processes"),
    ]:
        r = run([mpirun, "-n", "2", "--oversubscribe", program, *args])
        lines = program_lines(r.stdout + r.stderr)
        c.expect(
            r.returncode == 2 and len(lines) == 1 and expected in lines[0],
            f"mpirun -n 2, {' '.join(args)}: exit status 2 and one line from the main process "
            f"(got {r.returncode}: {lines})",
            r.stdout + r.stderr,
        )


def check_help(c, program):
    r = run([program, "--help"])
    defaults = [
        "--epochs INT=30",
        "--lr FLOAT=0.02",
        "--lr-batch INT=1024",
        "--max-lr FLOAT=0.06",
        "--start-batch INT=2048",
        "--momentum FLOAT=0.9",
        "--patience INT=5",
    ]
    missing = [d for d in defaults if d not in r.stdout]
    c.expect(
        r.returncode == 0 and not missing,
        f"--help exits 0 and shows the defaults (missing: {missing})",
        r.stdout + r.stderr,
    )


def main() -> int:
    mpirun, program = sys.argv[1], sys.argv[2]
    c = Checks()
    check_help(c, program)
    check_usage(c, mpirun, program)
    check_divergence(c, mpirun, program)
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
