#!/usr/bin/env python3
"""Reproducibility of the training example.

Usage: train_repro_test.py MPIRUN TRAIN_PROGRAM
1. The same run twice with the same seed gives bitwise identical losses (1 and 2 ranks).
2. With the same global batch, 1, 2 and 4 ranks give the same loss curve within float tolerance.
3. A different seed gives a different curve (the comparison can fail).
"""
import os
import subprocess
import sys
import tempfile

ARGS = ["--epochs", "4", "--samples", "4096", "--val-samples", "512", "--global-batch", "256", "--patience", "100"]


def run(mpirun, program, np, seed, out):
    cmd = [mpirun, "-n", str(np), "--oversubscribe", program, *ARGS, "--seed", str(seed), "--losses-file", out]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    if result.returncode != 0:
        print(result.stdout)
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited with {result.returncode}")
    with open(out, encoding="utf-8") as f:
        rows = [line.split() for line in f if not line.startswith("#")]
    return [(float.fromhex(r[1]), float.fromhex(r[2])) for r in rows], open(out, encoding="utf-8").read()


def main() -> int:
    mpirun, program = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        path = lambda name: os.path.join(tmp, name)  # noqa: E731
        curves = {}
        for np in (1, 2):
            first, text1 = run(mpirun, program, np, 7, path(f"a{np}"))
            _, text2 = run(mpirun, program, np, 7, path(f"b{np}"))
            ok = text1 == text2
            print(("ok:   " if ok else "FAIL: ") + f"{np} rank(s), same seed twice: bitwise identical losses")
            if not ok:
                failures.append(np)
            curves[np] = first
        curves[4], _ = run(mpirun, program, 4, 7, path("c4"))
        for np in (2, 4):
            worst = max(
                abs(a - b) / max(abs(b), 1e-12) for ea, eb in zip(curves[np], curves[1]) for a, b in zip(ea, eb)
            )
            ok = len(curves[np]) == len(curves[1]) and worst < 1e-4
            print(
                ("ok:   " if ok else "FAIL: ")
                + f"{np} ranks follow the 1-rank curve (largest relative difference {worst:.2e})"
            )
            if not ok:
                failures.append(f"curve {np}")
        other, _ = run(mpirun, program, 1, 8, path("d1"))
        ok = other != curves[1]
        print(("ok:   " if ok else "FAIL: ") + "another seed gives another curve")
        if not ok:
            failures.append("seed")
        print("1-rank curve:", ", ".join(f"{t:.6f}/{v:.6f}" for t, v in curves[1]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
