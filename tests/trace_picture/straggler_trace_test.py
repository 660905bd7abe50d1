"""straggler_report(world, FILE) under mpirun, drawn: 3 ranks allreduce in a loop, the last one computing 50 ms longer
per step (straggler_trace_program.cpp). The main process writes FILE (reason "straggler", every rank present) and its
summary; in the timeline the last rank is the last arriver of (nearly) every allreduce and its row alone is marked
red; the whole-run picture names it as the rank that waits least, from this file and from the dump at exit
(LOCKSTEP_TRACE_FILE) alike.

The file also passes the trace-event validator (tests/trace/validate_trace.py) with every rank present.

Usage: straggler_trace_test.py MPIRUN PROGRAM SOURCE_ROOT VALIDATOR"""

import json
import os
import subprocess
import sys
import tempfile

from matplotlib import image

MPIRUN, PROGRAM, ROOT, VALIDATOR = sys.argv[1:5]
SCRIPT = os.path.join(ROOT, "tools", "trace", "trace_show.py")
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(SCRIPT)]
import trace_show  # noqa: E402
from picture_pixels import red_pixels  # noqa: E402

RANKS, STEPS, EXTRA_MS = 3, 20, 50
SLOW = RANKS - 1
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


with tempfile.TemporaryDirectory() as tmp:
    trace_file = os.path.join(tmp, "straggler.json")
    exit_file = os.path.join(tmp, "exit.json")  # the dump at exit (trace_file) carries the same wait profiles
    r = subprocess.run(
        [MPIRUN, "-n", str(RANKS), "--oversubscribe", PROGRAM, trace_file, str(STEPS), str(EXTRA_MS)],
        capture_output=True,
        text=True,
        timeout=150,
        env=dict(os.environ, LOCKSTEP_TRACE_FILE=exit_file),
    )
    print(r.stdout[-3000:])
    check(r.returncode == 0, f"the program exits 0 (got {r.returncode}: {r.stderr[-2000:]})")
    check(os.path.isfile(trace_file) and os.path.isfile(trace_file + ".txt"), "the trace file and its summary exist")
    check(f"lockstep trace show {trace_file} --whole-run" in r.stdout, "the report names the file and how to draw it")
    if failures:
        sys.exit(1)
    r = subprocess.run(
        [sys.executable, VALIDATOR, trace_file, "--ranks", str(RANKS)], capture_output=True, text=True, timeout=120
    )
    check(r.returncode == 0, f"the file passes the trace-event validator ({r.stdout.strip()[-2000:]})")
    with open(trace_file) as f:
        data = json.load(f)
    check(data["lockstep"]["reason"] == "straggler", "the trace's reason is straggler")
    trace = trace_show.load_trace(trace_file)
    check([r["rank"] for r in trace["ranks"]] == list(range(RANKS)), "every rank is in the trace")

    groups = [g for g in trace_show.collectives(trace) if len(g["arrivals"]) == RANKS]
    last_slow = sum(1 for g in groups if g["last"] == SLOW)
    check(len(groups) >= STEPS, f"the loop's allreduces are recorded ({len(groups)})")
    check(last_slow >= 0.8 * STEPS, f"rank {SLOW} is the last arriver of the loop's allreduces ({last_slow})")

    png = os.path.join(tmp, "timeline.png")
    layout = trace_show.render(trace, png, STEPS)
    img = image.imread(png)
    check(red_pixels(img, layout, SLOW) > 300, f"the timeline marks rank {SLOW} in red")

    whole = os.path.join(tmp, "whole.png")
    r = subprocess.run(
        [sys.executable, SCRIPT, trace_file, "--output", whole, "--whole-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    check(r.returncode == 0, f"--whole-run draws the file ({r.stderr.strip()})")
    w_layout = trace_show.render_whole_run(trace, os.path.join(tmp, "whole2.png"))
    check(w_layout["straggler"] == SLOW, f"the whole run names rank {SLOW} as the one that waits least")
    check(red_pixels(image.imread(whole), w_layout, SLOW) > 300, f"the whole-run picture marks rank {SLOW} in red")
    if os.path.isfile(exit_file):
        exit_layout = trace_show.render_whole_run(trace_show.load_trace(exit_file), os.path.join(tmp, "exit.png"))
        check(exit_layout["straggler"] == SLOW, f"the dump at exit, drawn over the whole run, names rank {SLOW}")
    else:
        check(False, f"the dump at exit was written ({exit_file})")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("all checks passed")
