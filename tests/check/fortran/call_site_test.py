#!/usr/bin/env python3
"""Checks the call sites that check/fortran/call_site.cpp finds for Fortran MPI calls (call_site_probe.f90).

Usage: call_site_test.py MPIRUN PROGRAM SOURCE
The probe prints one `call site: function (file:line)` per MPI_Comm_rank it makes: the first from `use mpi_f08` twice
(an unwind, then the cache), another from `use mpi_f08`, one from `use mpi`. Each must name its line marked `probe`,
and on x86-64 the mpi_f08 call site must have been cached.
"""
import os
import platform
import subprocess
import sys
from pathlib import Path


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    mpirun, program, source = sys.argv[1:]
    probes = [i for i, text in enumerate(Path(source).read_text().splitlines(), 1) if text.rstrip().endswith("! probe")]
    expected = [probes[0], probes[0], probes[1], probes[2]]
    result = subprocess.run(
        [mpirun, "-n", "1", program], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )
    print(result.stdout + result.stderr)
    sites = [line for line in result.stdout.splitlines() if line.startswith("call site: ")]
    failures = []
    if result.returncode != 0:
        failures.append(f"the probe ended with {result.returncode}")
    if len(sites) != len(expected):
        failures.append(f"{len(sites)} call sites printed, {len(expected)} expected")
    for site, line in zip(sites, expected):
        if not site.endswith(f"{Path(source).name}:{line})"):
            failures.append(f"'{site}' does not name line {line}")
    if platform.machine() == "x86_64" and "cached return addresses: 0" in result.stdout:
        failures.append("the mpi_f08 call site was never cached (every call unwinds)")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
