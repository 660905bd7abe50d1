#!/usr/bin/env python3
"""The demo example's exit codes: 0 when the ranks' allreduce matches its closed form (under mpirun), 0 for --help,
2 with one line for any argument it does not take.

Usage: demo_test.py MPIRUN DEMO
"""
import subprocess
import sys


def main() -> int:
    mpirun, demo = sys.argv[1], sys.argv[2]
    checks = []
    p = subprocess.run([mpirun, "-n", "2", "--oversubscribe", demo], capture_output=True, text=True, timeout=120)
    checks.append(
        (
            p.returncode == 0 and "(expected 252): ok" in p.stdout,
            f"2 ranks: exit 0 and the closed form (got {p.returncode}: {p.stdout[-300:]}{p.stderr[-300:]})",
        )
    )
    p = subprocess.run([demo, "--help"], capture_output=True, text=True, timeout=60)
    checks.append(
        (p.returncode == 0 and p.stdout.startswith("Usage: "), f"--help: exit 0 and usage (got {p.returncode})")
    )
    p = subprocess.run([demo, "--steps", "3"], capture_output=True, text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    checks.append(
        (
            p.returncode == 2 and len(lines) == 1 and "--steps" in lines[0],
            f"an unknown argument: exit 2 with one line (got {p.returncode}: {p.stderr!r})",
        )
    )
    for ok, what in checks:
        print(("ok:   " if ok else "FAIL: ") + what)
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
