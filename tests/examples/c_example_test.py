"""The C interface's example (examples/c/allreduce.c) on NP ranks: every process prints the sum over all of them, and
the job exits 0.

Usage: c_example_test.py MPIRUN PROGRAM NP"""

import subprocess
import sys

mpirun, program, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = subprocess.run([mpirun, "-n", str(np), program], capture_output=True, text=True, timeout=120)
total = np * (np + 1) // 2  # process r contributes (i + 1) * (r + 1) to element i
want = {f"process {rank} of {np}: [{total}, {2 * total}, {3 * total}, {4 * total}]" for rank in range(np)}
got = set(r.stdout.splitlines())
ok = r.returncode == 0 and got == want
print(("ok   " if ok else "FAIL ") + f"exit {r.returncode}; printed {sorted(got)}; expected {sorted(want)}")
if not ok:
    print(r.stderr[-3000:])
sys.exit(0 if ok else 1)
