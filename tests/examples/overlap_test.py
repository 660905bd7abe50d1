"""The overlap example (examples/overlap/overlap.cpp) on NP ranks: every process prints each layer's mean gradient,
layer + (NP - 1) / 2, and the job exits 0 with no warning about requests left behind.

Usage: overlap_test.py MPIRUN PROGRAM NP"""

import subprocess
import sys

mpirun, program, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = subprocess.run([mpirun, "-n", str(np), program], capture_output=True, text=True, timeout=120)
want = {
    f"process {rank}: layer {layer} gradient mean {layer + (np - 1) / 2:.1f}" for rank in range(np) for layer in range(4)
}
got = set(r.stdout.splitlines())
ok = r.returncode == 0 and got == want and "never waited for" not in r.stdout + r.stderr
print(("ok   " if ok else "FAIL ") + f"exit {r.returncode}; printed {sorted(got)}; expected {sorted(want)}")
if not ok:
    print(r.stderr[-3000:])
sys.exit(0 if ok else 1)
