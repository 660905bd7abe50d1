#!/usr/bin/env python3
"""Time per epoch of the training example on 1 and 2 ranks, and the share of time spent in collectives.

Usage: bench/train_epochs.py [BUILD_DIR] [--out bench/results/train.md]
Runs lockstep_train with the same global batch on 1 and 2 ranks (same work per epoch), three times each, and prints a
Markdown table of the median time per epoch and the share of the main process's time inside collectives.
"""
import os
import re
import statistics
import subprocess
import sys

ARGS = ["--epochs", "10", "--samples", "16384", "--global-batch", "256", "--patience", "1000"]
DONE = re.compile(r"\(([0-9.]+) s per epoch, ([0-9.]+) % of this rank's time in collectives\)")


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--out"]
    out = "bench/results/train.md"
    if "--out" in sys.argv:
        out = sys.argv[sys.argv.index("--out") + 1]
        args.remove(out)
    build = args[0] if args else "build"
    program = os.path.join(build, "examples", "train", "lockstep_train")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", LOCKSTEP_CONFIG_FILE="")
    rows = []
    for np in (1, 2):
        epochs, shares = [], []
        for _ in range(3):
            run = subprocess.run(
                ["mpirun", "-n", str(np), program, *ARGS],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=600,
            )
            match = DONE.search(run.stdout)
            if run.returncode != 0 or not match:
                print(run.stdout)
                print(f"lockstep_train on {np} rank(s) failed (exit {run.returncode})", file=sys.stderr)
                return 1
            epochs.append(float(match.group(1)))
            shares.append(float(match.group(2)))
        rows.append((np, statistics.median(epochs), statistics.median(shares)))
    base = rows[0][1]
    table = (
        "Training example, 16384 samples, global batch 256 (64 steps per epoch), 10 epochs; median of 3 runs.\n\n"
        "| ranks | s per epoch | speed-up | time in collectives |\n|---:|---:|---:|---:|\n"
    )
    for np, epoch, share in rows:
        table += f"| {np} | {epoch:.4f} | {base / epoch:.2f}x | {share:.1f} % |\n"
    print(table)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
