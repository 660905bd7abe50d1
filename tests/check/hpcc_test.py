#!/usr/bin/env python3
"""Runs Debian's hpcc (HPC Challenge: HPL, PTRANS, FFT, RandomAccess, STREAM, ...) plain and under
liblockstep_check.so in debug mode, and checks that the library finds nothing in a correct program nobody here wrote
and changes none of its results.

Usage: hpcc_test.py MPIRUN HPCC LIBRARY INPUT NP
Both runs must exit 0; the checked one must print no report; both must say Success=1 with the same problem sizes,
process grids and residual checks passed, and the same number of locations found without error. Prints the
wall-clock time of each run (not a pass criterion)."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

LIMIT_SECONDS = 240
KEYS = ("Success", "Failure", "HPL_N", "HPL_NB", "HPL_nprow", "HPL_npcol", "PTRANS_n", "PTRANS_nb", "MPIFFT_N")


def run(mpirun, hpcc, np, folder, extra):
    command = [mpirun, "-n", str(np), "--oversubscribe", *extra, hpcc]
    start = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=LIMIT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        print(output)
        print(f"FAIL: {' '.join(command)} still ran after {LIMIT_SECONDS} s")
        sys.exit(1)
    elapsed = time.monotonic() - start
    with open(os.path.join(folder, "hpccoutf.txt"), encoding="utf-8", errors="replace") as f:
        results = f.read()
    os.remove(os.path.join(folder, "hpccoutf.txt"))
    print(f"{' '.join(command)}: exit {proc.returncode}, {elapsed:.1f} s")
    print(output)
    return proc.returncode, output, results


def summary(results):
    values = {}
    for line in results.splitlines():
        key, _, value = line.partition("=")
        if key in KEYS:
            values[key] = value
    values["passed residual checks"] = re.findall(r"(\d+) tests completed and passed residual checks", results)
    values["failed residual checks"] = re.findall(r"(\d+) tests completed and failed residual checks", results)
    values["locations without error"] = re.findall(r"Found 0 errors in (\d+) locations", results)
    return values


def main():
    mpirun, hpcc, library, given_input, np = sys.argv[1:6]
    with tempfile.TemporaryDirectory(prefix="lockstep-hpcc-") as folder:
        shutil.copy(given_input, os.path.join(folder, "hpccinf.txt"))
        code_plain, _, plain = run(mpirun, hpcc, np, folder, [])
        checked_flags = ["-x", f"LD_PRELOAD={library}", "-x", "LOCKSTEP_DEBUG_MODE=1"]
        code_checked, output, checked = run(mpirun, hpcc, np, folder, checked_flags)
    plain_values, checked_values = summary(plain), summary(checked)
    print("plain:  ", plain_values)
    print("checked:", checked_values)
    checks = [
        (code_plain == 0, f"hpcc exits 0 plain (got {code_plain})"),
        (code_checked == 0, f"hpcc exits 0 under the checks (got {code_checked})"),
        ("lockstep check" not in output, "no report under the checks"),
        (checked_values.get("Success") == "1", "Success=1 under the checks"),
        (checked_values == plain_values, "the same sizes, grids and checks passed as plain"),
    ]
    for ok, what in checks:
        print(("ok   " if ok else "FAIL ") + what)
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
