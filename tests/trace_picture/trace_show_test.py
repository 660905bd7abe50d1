"""tools/trace/trace_show.py on synthetic traces (synthetic_trace.py): the timeline's pixels show the last arriver's
red in the straggler's row only and the washed-out waits in the others; --calls narrows the window; the whole-run
picture marks the rank that waits least; a trace read from its traceEvents alone draws too; bad inputs exit 2 and an
unwritable picture exits 1, each with a one-line message naming the path.

Usage: trace_show_test.py SOURCE_ROOT [SAMPLE_TRACE]   (tests/trace/sample_trace: its files are drawn too)"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from matplotlib import image

ROOT = sys.argv[1]
SCRIPT = os.path.join(ROOT, "tools", "trace", "trace_show.py")
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(SCRIPT)]
import synthetic_trace  # noqa: E402
import trace_show  # noqa: E402
from picture_pixels import pale_blue_pixels, red_pixels  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*args):
    return subprocess.run(
        [sys.executable, SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, MPLBACKEND=""),
    )


def read_png(path):
    with open(path, "rb") as f:
        magic = f.read(8)
    return magic, image.imread(path)


with tempfile.TemporaryDirectory() as tmp:
    trace_file = synthetic_trace.write_trace(os.path.join(tmp, "trace.json"))
    trace = trace_show.load_trace(trace_file)
    check([r["rank"] for r in trace["ranks"]] == [0, 1, 2, 3], "load_trace reads the four ranks")
    check(trace["reason"] == "hang" and trace["job"] == "synthetic-42", "load_trace reads reason and job")

    # The timeline through the command line, and the same drawing through render() for where its rows lie.
    png = os.path.join(tmp, "trace.png")
    r = run(trace_file, "--output", png)
    check(r.returncode == 0, f"the timeline exits 0 (got {r.returncode}: {r.stderr.strip()})")
    check(os.path.isfile(png) and os.path.getsize(png) > 20_000, "the timeline PNG exists and is not trivial")
    magic, img = read_png(png)
    check(magic == b"\x89PNG\r\n\x1a\n", "the timeline has PNG magic bytes")
    check(img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 800, f"the timeline decodes ({img.shape})")
    layout = trace_show.render(trace, os.path.join(tmp, "again.png"), trace_show.DEFAULT_CALLS)
    again = image.imread(os.path.join(tmp, "again.png"))
    check(again.shape == img.shape and np.array_equal(again, img), "render() draws what the command line draws")
    straggler_red = red_pixels(img, layout, synthetic_trace.STRAGGLER)
    check(straggler_red > 300, f"the straggler's row shows the last arriver's red ({straggler_red} pixels)")
    # Rank 0 is last into the non-blocking allreduces that it posts after rank 1 (marked too); rank 1 never.
    n = red_pixels(img, layout, 1)
    check(n == 0, f"rank 1's row has no red ({n} pixels)")
    # Rank 2, stuck in a receive, never arrives at the allreduce the others are in: its row is framed in red.
    n = red_pixels(img, layout, synthetic_trace.STUCK)
    check(n > 300, f"rank 2's row shows that it never arrived ({n} pixels)")
    groups = trace_show.collectives(trace)
    check(groups[-1]["absent"] == [synthetic_trace.STUCK] and groups[-1]["last"] is None, "the last allreduce waits")
    waits = {rank: pale_blue_pixels(img, layout, rank) for rank in range(synthetic_trace.RANKS)}
    for rank in (0, 1, 2):
        check(waits[rank] > 500, f"rank {rank}'s row shows its waits ({waits[rank]} washed-out pixels)")
    # The straggler waits only in the last allreduce, for rank 2 (in flight: a short stretch of its bar).
    check(waits[3] < min(waits[r] for r in (0, 1, 2)) / 4, f"the straggler's row shows few waits ({waits[3]} pixels)")

    # In flight: ranks 0, 1, 3 in the last allreduce, rank 2 in a receive; hatched and labelled.
    in_flight = [(r["rank"], c["op"]) for r in trace["ranks"] for c in r["calls"] if c["completed"] is None]
    check(sorted(in_flight) == [(0, "allreduce"), (1, "allreduce"), (2, "recv"), (3, "allreduce")], "calls in flight")
    check(layout["collectives"] == trace_show.DEFAULT_CALLS or layout["collectives"] == 37, "collectives drawn")

    # --calls limits the window: the last 5 collectives span about 5 steps of 20 ms and the in-flight tail.
    five = os.path.join(tmp, "five.png")
    r = run(trace_file, "--output", five, "--calls", "5", "--title", "five calls")
    check(r.returncode == 0 and os.path.getsize(five) > 10_000, "--calls 5 exits 0 with a PNG")
    small = trace_show.render(trace, os.path.join(tmp, "five2.png"), 5)
    check(small["collectives"] == 5, f"--calls 5 draws 5 collectives ({small['collectives']})")
    check(small["window_ms"] < layout["window_ms"] / 3, f"--calls 5 narrows the window ({small['window_ms']} ms)")
    check(red_pixels(image.imread(five), small, synthetic_trace.STRAGGLER) > 100, "--calls 5: red straggler")
    window = trace_show.select_window(trace, 5)
    groups = trace_show.collectives(trace)
    check(window[0] == min(groups[-5]["arrivals"].values()), "the window starts at the 5th last collective")
    check(small["view_ms"] == small["window_ms"], "a short tail in flight leaves the axis whole")
    small_groups = [g for g in groups[-5:] if g["last"] is not None]
    check(all(g["last"] == synthetic_trace.STRAGGLER for g in small_groups if g["op"] == "allreduce"), "last arrivers")

    # The whole run: rank 3 waits least, its label and strip in red, nobody else's.
    whole = os.path.join(tmp, "whole.png")
    r = run(trace_file, "--output", whole, "--whole-run")
    check(r.returncode == 0 and os.path.getsize(whole) > 10_000, f"--whole-run exits 0 with a PNG ({r.stderr.strip()})")
    w_layout = trace_show.render_whole_run(trace, os.path.join(tmp, "whole2.png"))
    check(w_layout["straggler"] == synthetic_trace.STRAGGLER, f"the whole run names rank 3 ({w_layout['straggler']})")
    w_img = image.imread(whole)
    n3 = red_pixels(w_img, w_layout, synthetic_trace.STRAGGLER)
    check(n3 > 300, f"the whole run marks the straggler's row in red ({n3} pixels)")
    for rank in (0, 1, 2):
        n = red_pixels(w_img, w_layout, rank)
        check(n == 0, f"the whole run: rank {rank}'s row has no red ({n} pixels)")
    # The heat strip is darker where the others wait more (the slow phase) than where the straggler is.
    top, bottom = w_layout["rows"][0]
    mid = (top + bottom) // 2
    blues = w_img[mid, :, 2] - w_img[mid, :, 0]
    check(float(blues.max()) > 0.3, "the whole run's heat strip is coloured for a rank that waits")
    # Bins after the snapshot are left out; a wait longer than its bin spills into the next ones.
    rank = {"snapshot": 5000.0, "profile": {"start_us": 0.0, "bin_us": 1000.0, "wait_us": [3000.0] + [0.0] * 9}}
    starts, width, shares, overall = trace_show.wait_shares(rank)
    check(shares == [1.0, 1.0, 1.0, 0.0, 0.0] and width == 1000.0, f"a long wait spills over bins ({shares})")
    check(abs(overall - 0.6) < 1e-9, f"the whole run's share counts up to the snapshot ({overall})")
    starts, width, shares, overall = trace_show.wait_shares(rank, columns=2)
    check(width == 3000.0 and shares == [1.0, 0.0], f"bins summed into at most 2 columns ({width}, {shares})")
    no_profile = synthetic_trace.write_trace(os.path.join(tmp, "noprofile.json"), with_profile=False)
    r = run(no_profile, "--output", os.path.join(tmp, "np.png"), "--whole-run")
    check(r.returncode == 2 and "profile" in r.stderr, f"--whole-run without a profile exits 2 ({r.stderr.strip()})")

    # A trace read from its traceEvents alone (as another tool may write it): the same straggler in red.
    events = []
    for rank in trace["ranks"]:
        events.append(
            {"ph": "M", "name": "process_name", "pid": rank["rank"], "args": {"name": f"rank {rank['rank']}"}}
        )
        for i, c in enumerate(rank["calls"]):
            ts = c["issued"] - synthetic_trace.ORIGIN_US
            end = trace_show._end(c, rank) - synthetic_trace.ORIGIN_US
            args = {"comm": c["comm"], "seq": c["seq"], "op": c["op"], "outcome": c["outcome"]}
            if c["kind"] != "collective":
                args["peer"] = 0
            if c["nonblocking"]:
                events.append(
                    {
                        "ph": "b",
                        "cat": "nonblocking",
                        "name": c["op"],
                        "pid": rank["rank"],
                        "tid": 0,
                        "id": i,
                        "ts": ts,
                        "args": args,
                    }
                )
                events.append(
                    {
                        "ph": "e",
                        "cat": "nonblocking",
                        "name": c["op"],
                        "pid": rank["rank"],
                        "tid": 0,
                        "id": i,
                        "ts": end,
                    }
                )
            else:
                events.append(
                    {"ph": "X", "name": c["op"], "pid": rank["rank"], "tid": 0, "ts": ts, "dur": end - ts, "args": args}
                )
    events_file = os.path.join(tmp, "events.json")
    with open(events_file, "w") as f:
        json.dump({"traceEvents": events, "otherData": {"reason": "demand"}}, f)
    ev_trace = trace_show.load_trace(events_file)
    check(len(ev_trace["ranks"]) == 4 and ev_trace["reason"] == "demand", "traceEvents alone: four ranks, the reason")
    ev_layout = trace_show.render(ev_trace, os.path.join(tmp, "events.png"), 10)
    ev_img = image.imread(os.path.join(tmp, "events.png"))
    check(red_pixels(ev_img, ev_layout, 3) > 100, "traceEvents alone: the straggler in red")
    # Without the snapshots' member lists nobody is known to be absent: rank 2 is not marked.
    check(red_pixels(ev_img, ev_layout, 2) == 0, "traceEvents alone: rank 2 not in red")

    # Bad inputs: exit 2, one line, naming the file.
    bad = {
        "missing": os.path.join(tmp, "nope.json"),
        "not JSON": os.path.join(tmp, "garbage.json"),
        "a JSON list": os.path.join(tmp, "list.json"),
        "a JSON object without a trace": os.path.join(tmp, "other.json"),
        "a directory": tmp,
    }
    with open(bad["not JSON"], "w") as f:
        f.write("this is { not json")
    with open(bad["a JSON list"], "w") as f:
        json.dump([1, 2], f)
    with open(bad["a JSON object without a trace"], "w") as f:
        json.dump({"name": "something else"}, f)
    for what, path in bad.items():
        out = os.path.join(tmp, "bad.png")
        r = run(path, "--output", out)
        lines = r.stderr.strip().splitlines()
        check(
            r.returncode == 2 and len(lines) == 1 and path in lines[0] and not os.path.exists(out),
            f"{what}: exit 2 with one line naming it (got {r.returncode}: {r.stderr.strip()!r})",
        )
    r = run(trace_file, "--output", os.path.join(tmp, "x.png"), "--calls", "0")
    check(r.returncode == 2, "--calls 0 is a usage error")

    # An unwritable picture: exit 1 naming the path and the reason.
    for what, out in (
        ("a missing directory", os.path.join(tmp, "no", "such", "dir", "t.png")),
        ("a directory as the picture", os.path.join(tmp)),
    ):
        r = run(trace_file, "--output", out)
        check(
            r.returncode == 1 and out in r.stderr and len(r.stderr.strip().splitlines()) == 1,
            f"{what}: exit 1 naming the path (got {r.returncode}: {r.stderr.strip()!r})",
        )
    # A device that is always full: the reason as the system gives it, as root too.
    if os.path.exists("/dev/full"):
        r = run(trace_file, "--output", "/dev/full")
        check(
            r.returncode == 1 and "/dev/full" in r.stderr and "No space" in r.stderr,
            f"a full device: exit 1 with the reason ({r.stderr.strip()!r})",
        )
    if os.geteuid() != 0:
        ro = os.path.join(tmp, "readonly")
        os.mkdir(ro, 0o500)
        r = run(trace_file, "--output", os.path.join(ro, "t.png"))
        check(r.returncode == 1 and "ermission" in r.stderr, f"a read-only directory: exit 1 ({r.stderr.strip()!r})")

    # Files that the library's merge_trace and write_trace wrote (tests/trace/sample_trace), with rank 1 as the
    # straggler: in a job that ends normally and in one that hangs because rank 1 never arrives.
    if len(sys.argv) > 2:
        for extra in ([], ["--no-hang"]):
            sample = os.path.join(tmp, "sample%s.json" % "".join(extra))
            subprocess.run(
                [sys.argv[2], sample, "--straggler", "1", *extra], check=True, timeout=60, capture_output=True
            )
            out = sample + ".png"
            r = run(sample, "--output", out)
            check(r.returncode == 0 and os.path.getsize(out) > 10_000, f"sample {extra}: drawn ({r.stderr.strip()})")
            s_trace = trace_show.load_trace(sample)
            s_layout = trace_show.render(s_trace, out, trace_show.DEFAULT_CALLS)
            s_img = image.imread(out)
            # The hang's calls in flight last 2 s after 30 ms of steps: the axis stops after the last event.
            hang = not extra
            cut = s_layout["view_ms"] < s_layout["window_ms"] / 5
            check(cut == hang, f"sample {extra}: axis {s_layout['view_ms']:.0f} of {s_layout['window_ms']:.0f} ms")
            n = red_pixels(s_img, s_layout, 1)
            check(n > 300, f"sample {extra}: the straggler's row in red ({n} pixels)")
            for rank in (0, 2, 3):
                n = red_pixels(s_img, s_layout, rank)
                check(n < 200, f"sample {extra}: rank {rank}'s row (almost) without red ({n} pixels)")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("all checks passed")
