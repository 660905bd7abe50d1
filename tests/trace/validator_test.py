"""The trace files lockstep writes pass validate_trace.py, and files broken on purpose do not.

The files: those the unit test writes (its three-rank case, rank 3 missing, and the synthetic training job) and those
sample_trace writes. Then each of a list of breakages is applied to a copy of a valid file, and the validator must exit
1 naming that breakage, so that it cannot pass everything.

Usage: validator_test.py VALIDATE_TRACE_PY TEST_TRACE_FORMAT SAMPLE_TRACE"""

import copy
import json
import os
import subprocess
import sys
import tempfile

VALIDATOR, UNIT_TEST, SAMPLE = sys.argv[1:4]
failures = []


def validate(path, *options):
    run = subprocess.run(
        [sys.executable, VALIDATOR, path] + [str(o) for o in options],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return run.returncode, run.stdout + run.stderr


def expect(name, path, options, code, text=None):
    rc, out = validate(path, *options)
    if rc != code or (text is not None and text not in out):
        failures.append("%s: exit %d (want %d%s)\n%s" % (name, rc, code, ", naming %r" % text if text else "", out))


def first(events, test):
    return next(i for i, e in enumerate(events) if test(e))


with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ, LOCKSTEP_TRACE_TEST_OUT=tmp)
    subprocess.run([UNIT_TEST, "--run_test=written_for_the_validator"], env=env, check=True, timeout=120)
    three = os.path.join(tmp, "three_ranks.json")
    job = os.path.join(tmp, "sample_job.json")
    expect("three ranks", three, ["--ranks", 3, "--straggler", 2], 0)
    expect("three ranks of four", three, ["--ranks", 4], 1, "rank 3: no slice")
    expect("three ranks, another straggler", three, ["--straggler", 0], 1, "the last arriver is rank 2, not rank 0")
    expect("sample job", job, ["--ranks", 4, "--straggler", 2], 0)
    for options, straggler in ((["--ranks", 8, "--straggler", 5, "--no-hang"], 5), (["--ranks", 2, "--steps", 3], 2)):
        path = os.path.join(tmp, "sample-%d.json" % len(options))
        subprocess.run([SAMPLE, path] + [str(o) for o in options], check=True, timeout=120, capture_output=True)
        ranks = options[1]
        expect(
            "sample_trace %s" % options,
            path,
            ["--ranks", ranks] + (["--straggler", straggler] if straggler < ranks else []),
            0,
        )
        expect("sample_trace %s, a wrong straggler" % options, path, ["--straggler", 0], 1, "not rank 0")

    with open(job) as f:
        valid = json.load(f)

    def broken(name, change, text, options=("--ranks", 4, "--straggler", 2), raw=None):
        trace = copy.deepcopy(valid)
        path = os.path.join(tmp, "broken.json")
        with open(path, "w") as f:
            if raw is not None:
                f.write(raw)
            else:
                change(trace)
                json.dump(trace, f)
        expect(name, path, list(options), 1, text)

    def events(trace):
        return trace["traceEvents"]

    def drop_field(field, ph):
        def change(trace):
            del events(trace)[first(events(trace), lambda e: e["ph"] == ph)][field]

        return change

    def ts_back(trace):
        # The last slice of rank 0's thread 0 moved before the first one.
        ev = events(trace)
        last = max(i for i, e in enumerate(ev) if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == 0)
        ev[last]["ts"] = 0.5

    def drop_rank(rank):
        def change(trace):
            trace["traceEvents"] = [e for e in events(trace) if e["pid"] != rank]

        return change

    def drop_first(ph):
        def change(trace):
            del events(trace)[first(events(trace), lambda e: e["ph"] == ph)]

        return change

    def other_last_arriver(trace):
        ev = events(trace)
        seq = ev[first(ev, lambda e: e["ph"] == "X" and e["args"].get("last_arriver"))]["args"]["seq"]
        for e in ev:
            if e["ph"] == "X" and e["args"].get("kind") == "collective" and e["args"]["seq"] == seq:
                e["args"]["last_arriver"] = e["pid"] == 0

    def overlap(trace):
        # A slice of rank 0 made to end in the middle of the next one on its track.
        ev = events(trace)
        slices = [e for e in ev if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == 0]
        a, b = next((a, b) for a, b in zip(slices, slices[1:]) if b["dur"] > 0 and b["ts"] >= a["ts"] + a["dur"])
        a["dur"] = b["ts"] + b["dur"] / 2 - a["ts"]

    def flow_outside(trace):
        ev = events(trace)
        ev[first(ev, lambda e: e["ph"] == "s")]["ts"] = 1e12

    def set_first(field, value, ph="X"):
        def change(trace):
            events(trace)[first(events(trace), lambda e: e["ph"] == ph)][field] = value

        return change

    broken("an X without dur", drop_field("dur", "X"), "missing dur")
    broken("an event without name", drop_field("name", "X"), "missing name")
    broken("an event without ts", drop_field("ts", "X"), "missing ts")
    broken("an event without pid", drop_field("pid", "X"), "missing pid")
    broken("an async begin without id", drop_field("id", "b"), "missing id")
    broken("a flow without id", drop_field("id", "s"), "missing id")
    broken("ts going back", ts_back, "goes back")
    broken("slices overlapping in part", overlap, "without nesting")
    broken("a negative ts", set_first("ts", -1.0), "not a number >= 0")
    broken("a ts that is a string", set_first("ts", "12"), "not a number >= 0")
    broken("args not an object", set_first("args", [1]), "args is not an object")
    broken("a rank left out", drop_rank(1), "rank 1: no slice")
    broken("a rank left out (its name)", drop_rank(1), "rank 1: no process_name")
    broken("a flow end taken away", drop_first("f"), "a flow start without an end")
    broken("a flow start taken away", drop_first("s"), "a flow end without a start")
    broken("a flow event outside its slice", flow_outside, "outside every slice")
    broken("an async end taken away", drop_first("e"), "an async begin without its end")
    broken("an async begin taken away", drop_first("b"), "an async end without its begin")
    broken("another last arriver", other_last_arriver, "the last arriver is rank 0, not rank 2")
    broken("not JSON", None, "cannot read a JSON document", raw='{"traceEvents": [')
    broken("a JSON array", None, "not an object with traceEvents", raw="[]")
    broken("no traceEvents", None, "no traceEvents list", raw='{"events": []}')

    # A usage error is not a verdict on a file.
    rc, _ = validate(job, "--ranks", "x")
    if rc != 2:
        failures.append("a usage error: exit %d (want 2)" % rc)

for failure in failures:
    print("FAIL", failure)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
