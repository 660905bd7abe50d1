#!/usr/bin/env python3
"""The training example learns with its default arguments.

Usage: train_converge_test.py MPIRUN TRAIN_PROGRAM NP [LOCKSTEP]

For NP ranks, without a memory cap and under a 4 MiB cap per rank (where the batch-size search backs off):
1. the run exits 0, trains every epoch and ends with a validation loss below FINAL_VAL_BOUND;
2. the learning rate it reports is the linear scaling rule of docs/training.md for the global batch it settled on:
   min(0.02 x global / 1024, 0.06).
With LOCKSTEP (the launcher) and NP 2, the README's main command is run too: `lockstep launch -n 2` under the cap.

Measured with the defaults (seed 1234): 0.0360-0.0401 on 1, 2 and 4 ranks, capped or not; 0.032-0.043 over seeds 1-6.
Predicting the mean scores about 0.4 and the untrained model about 1.0, so the bound, twice the worst measurement,
still fails a run that learns only the mean or stops early.
"""
import os
import re
import subprocess
import sys
import tempfile

FINAL_VAL_BOUND = 0.08
EPOCHS = 30  # the default --epochs
TUNED_LR, TUNED_BATCH, MAX_LR = 0.02, 1024, 0.06  # the defaults of --lr, --lr-batch, --max-lr
CAP = "4MiB"


def run(cmd, env, losses):
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240, env=env)
    rows = []
    if os.path.exists(losses):
        with open(losses, encoding="utf-8") as f:
            rows = [line.split() for line in f if not line.startswith("#")]
    return result, [(float.fromhex(r[1]), float.fromhex(r[2])) for r in rows]


def check(name, result, curve, failures):
    out = result.stdout
    batch = re.search(r"batch (\d+) per process, (\d+) global", out)
    rate = re.search(r"learning rate (\S+) for the global batch (\d+)", out)
    problems = []
    if result.returncode != 0:
        problems.append(f"exit status {result.returncode}")
    if not batch or not rate:
        problems.append("no batch or learning-rate line")
    else:
        global_batch = int(batch.group(2))
        expected = min(TUNED_LR * global_batch / TUNED_BATCH, MAX_LR)
        if abs(float(rate.group(1)) - expected) > 1e-6 * expected:
            problems.append(f"learning rate {rate.group(1)} for the global batch {global_batch}, expected {expected:g}")
    if len(curve) != EPOCHS:
        problems.append(f"{len(curve)} epochs run, expected {EPOCHS}")
    final = curve[-1][1] if curve else float("nan")
    if not final < FINAL_VAL_BOUND:
        problems.append(f"final validation loss {final:.6f} is not below {FINAL_VAL_BOUND}")
    summary = (
        f"batch {batch.group(1)}/process, {batch.group(2)} global, lr {rate.group(1)}, "
        f"val {curve[0][1]:.4f} -> {final:.6f}"
        if batch and rate and curve
        else "no result"
    )
    if problems:
        print(result.stdout[-4000:])
        print(f"FAIL: {name}: " + "; ".join(problems) + f" ({summary})")
        failures.append(name)
    else:
        print(f"ok:   {name}: {summary}")


def main() -> int:
    mpirun, program, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
    launcher = sys.argv[4] if len(sys.argv) > 4 else None
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for cap in (None, CAP):
            losses = os.path.join(tmp, f"losses-{cap}")
            cap_args = ["-x", f"LOCKSTEP_CPU_MEMORY_LIMIT={cap}"] if cap else []
            cmd = [mpirun, "-n", str(np), "--oversubscribe", *cap_args, program, "--losses-file", losses]
            result, curve = run(cmd, dict(os.environ), losses)
            check(
                f"{np} rank(s), {'a ' + cap + ' cap' if cap else 'no cap'}, default arguments", result, curve, failures
            )
        if launcher and np == 2:
            losses = os.path.join(tmp, "losses-launch")
            env = dict(os.environ, LOCKSTEP_CPU_MEMORY_LIMIT=CAP)  # forwarded to every rank by the launcher
            cmd = [launcher, "launch", "-n", "2", "--", program, "--losses-file", losses]
            result, curve = run(cmd, env, losses)
            check(f"lockstep launch -n 2, a {CAP} cap, default arguments", result, curve, failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
