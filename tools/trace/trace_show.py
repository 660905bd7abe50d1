#!/usr/bin/python3
"""Draws a lockstep trace file as a PNG timeline: one row per rank, each call a bar coloured by its operation.

The waiting part of each collective is shaded (from this rank's arrival until the last member's arrival), the last
arriver of each collective has a red outline and a red marker above it, calls still in flight are hatched and
labelled, point-to-point calls are thinner bars and non-blocking calls sit in a thin lane under their rank's row. The
x axis is in milliseconds from the start of the window drawn; --calls N draws the last N collectives (and the other
calls of that time window) so that the picture stays readable.

With --whole-run it draws the run-long wait profile of every rank instead: per rank, the share of each time bin spent
waiting in collectives, as a heat strip, and beside it each rank's share over the whole run; the rank that waits
least (the one the others wait for) is named in red.

The file is the merged trace that lockstep writes (its "lockstep" key holds every rank's recorder snapshot); a Chrome
trace-event file without that key is read from its "traceEvents".

Usage: trace_show.py FILE --output PNG [--calls N] [--title T] [--whole-run]
Exits 0 with the PNG written, 1 when the PNG cannot be written, 2 when FILE is missing, not JSON or not a lockstep
trace (or, with --whole-run, holds no wait profile)."""

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

DEFAULT_CALLS = 50
# The whole-run picture's heat strips have at most this many columns.
WHOLE_RUN_COLUMNS = 60
# The late rank's colour; no operation gets it (OP_COLOURS leaves red out), so a red pixel means "last arriver".
LATE_COLOUR = "#e00000"
# The waiting part of a bar is washed out: the op's colour under white at this opacity.
WAIT_COLOUR = "#ffffff"
WAIT_ALPHA = 0.6
# tab10 and tab20's lighter shades without their reds and pinks.
OP_COLOURS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#c5b0d5",
    "#c49c94",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
]
# Row geometry, in row units (rank r's row is centred on y = r).
COLLECTIVE_HALF = 0.28
P2P_HALF = 0.12
NONBLOCKING_TOP, NONBLOCKING_HEIGHT = 0.31, 0.12


class TraceError(Exception):
    """FILE cannot be read as a lockstep trace (exit 2)."""


# ---------------------------------------------------------------------------------------------------------------------
# Reading


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _call_kind(op, args):
    kind = args.get("kind")
    if kind in ("collective", "send", "recv", "wait"):
        return kind
    lowered = str(op).lower()
    if "recv" in lowered:
        return "recv"
    if "send" in lowered:
        return "send"
    if "wait" in lowered or "test" in lowered:
        return "wait"
    if "arrival" in args or "last_arriver" in args:
        return "collective"
    return "send" if isinstance(args.get("peer"), int) and args.get("peer", -1) >= 0 else "collective"


def _from_snapshots(block, path):
    ranks = block.get("ranks")
    if not isinstance(ranks, list):
        raise TraceError(f'{path}: its "lockstep" key has no "ranks" list: not a lockstep trace')
    out = []
    for snap in ranks:
        if not isinstance(snap, dict) or not isinstance(snap.get("rank"), int):
            raise TraceError(f'{path}: a rank snapshot without a "rank": not a lockstep trace')
        offset = _number(snap.get("clock_offset_us")) or 0.0

        def shifted(value, offset=offset):
            v = _number(value)
            return None if v is None else v + offset

        calls = []
        for c in snap.get("calls") or []:
            if not isinstance(c, dict) or _number(c.get("issued_us")) is None:
                continue
            calls.append(
                {
                    "comm": c.get("comm", 0),
                    "seq": c.get("seq", 0),
                    "op": str(c.get("op", "?")),
                    "kind": _call_kind(c.get("op", ""), c),
                    "nonblocking": bool(c.get("nonblocking", False)),
                    "issued": shifted(c.get("issued_us")),
                    "completed": shifted(c.get("completed_us")),
                    "outcome": c.get("outcome", "ok"),
                    "site": c.get("site", ""),
                }
            )
        profile = snap.get("profile")
        if isinstance(profile, dict) and _number(profile.get("start_us")) is not None:
            profile = dict(profile, start_us=profile["start_us"] + offset)
        else:
            profile = None
        out.append(
            {
                "rank": snap["rank"],
                "host": str(snap.get("host", "")),
                "pid": snap.get("pid"),
                "snapshot": shifted(snap.get("snapshot_us")),
                "calls": calls,
                "profile": profile,
            }
        )
    return out


def _from_trace_events(events, path):
    """Calls from the slices of a Chrome trace-event file (times relative to its ts 0)."""
    ranks = {}
    names = {}
    opened = {}

    def add(pid, args, name, ts, dur, nonblocking):
        args = args if isinstance(args, dict) else {}
        op = args.get("op", name)
        outcome = args.get("outcome", "ok")
        ranks.setdefault(pid, []).append(
            {
                "comm": args.get("comm", 0),
                "seq": args.get("seq", 0),
                "op": str(op),
                "kind": _call_kind(op, args),
                "nonblocking": nonblocking,
                "issued": ts,
                "completed": None if outcome == "in_flight" else ts + dur,
                "end_if_in_flight": ts + dur,
                "outcome": outcome,
                "site": args.get("site", ""),
            }
        )

    for e in events:
        if not isinstance(e, dict) or not isinstance(e.get("pid"), int):
            continue
        ph, pid, ts = e.get("ph"), e["pid"], _number(e.get("ts"))
        if ph == "M" and e.get("name") == "process_name":
            names[pid] = (e.get("args") or {}).get("name", "")
        elif ph == "X" and ts is not None:
            add(pid, e.get("args"), e.get("name", "?"), ts, _number(e.get("dur")) or 0.0, False)
        elif ph == "b" and ts is not None:
            opened[(pid, e.get("id"))] = e
        elif ph == "e" and ts is not None and (pid, e.get("id")) in opened:
            b = opened.pop((pid, e.get("id")))
            add(pid, b.get("args"), b.get("name", "?"), b["ts"], ts - b["ts"], True)
    for (pid, _), b in opened.items():  # an async slice never ended: still in flight when written
        add(pid, dict(b.get("args") or {}, outcome="in_flight"), b.get("name", "?"), b["ts"], 0.0, True)
    if not ranks and not names:
        raise TraceError(f'{path}: no rank tracks in its "traceEvents": not a lockstep trace')
    out = []
    for pid in sorted(set(ranks) | set(names)):
        calls = sorted(ranks.get(pid, []), key=lambda c: c["issued"])
        ends = [c["end_if_in_flight"] for c in calls]
        out.append(
            {
                "rank": pid,
                "host": names.get(pid, ""),
                "pid": None,
                "snapshot": max(ends) if ends else None,
                "calls": calls,
                "profile": None,
            }
        )
    return out


def _members(block):
    """Communicator id -> the world ranks of its members, as the snapshots list them."""
    members = {}
    for snap in block.get("ranks") or []:
        for comm in snap.get("communicators") or []:
            if isinstance(comm, dict) and isinstance(comm.get("world_ranks"), list):
                members.setdefault(comm.get("id"), comm["world_ranks"])
    return members


def load_trace(path):
    """The trace in FILE as {"reason", "job", "missing_ranks", "ranks": [{"rank", "host", "pid", "snapshot", "calls",
    "profile"}], "members": {comm id: world ranks}}, times in microseconds on one clock; raises TraceError saying
    why FILE is not a lockstep trace."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file")
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: cannot be read: {getattr(e, 'strerror', None) or e}")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise TraceError(f"{path}: not JSON ({e}): not a lockstep trace")
    if not isinstance(data, dict):
        raise TraceError(f"{path}: JSON but not an object: not a lockstep trace")
    other = data.get("otherData") if isinstance(data.get("otherData"), dict) else {}
    block = data.get("lockstep")
    if isinstance(block, dict):
        ranks = _from_snapshots(block, path)
        members = _members(block)
        reason = block.get("reason", other.get("reason", ""))
        missing = block.get("missing_ranks") or []
    elif isinstance(data.get("traceEvents"), list):
        ranks = _from_trace_events(data["traceEvents"], path)
        members = {}
        reason = other.get("reason", "")
        missing = [int(r) for r in str(other.get("missing_ranks", "")).replace(",", " ").split() if r.isdigit()]
    else:
        raise TraceError(f'{path}: neither a "lockstep" key nor "traceEvents": not a lockstep trace')
    ranks.sort(key=lambda r: r["rank"])
    return {
        "reason": str(reason or ""),
        "job": str(other.get("job", "") or ""),
        "missing_ranks": missing,
        "ranks": ranks,
        "members": members,
    }


# ---------------------------------------------------------------------------------------------------------------------
# The timeline


def _end(call, rank):
    """Where a call's bar ends: its completion, or for a call in flight the rank's snapshot time."""
    if call["completed"] is not None:
        return call["completed"]
    return max(call["issued"], rank["snapshot"] if rank["snapshot"] is not None else call["issued"])


def collectives(trace):
    """Each collective (comm, seq) with two or more recorded members, in the order of their last arrival: {"key",
    "op", "arrivals": {rank: issued}, "last": the last arriver, "last_arrival", "absent": members that never arrived}.
    A collective still in flight on some member whose communicator lists members without a call in it waits for
    those: they are "absent" and its "last" is None (the last of the ranks that did arrive kept nobody waiting)."""
    groups = {}
    for rank in trace["ranks"]:
        for call in rank["calls"]:
            if call["kind"] == "collective":
                group = groups.setdefault(
                    (call["comm"], call["seq"]), {"op": call["op"], "arrivals": {}, "open": False}
                )
                group["arrivals"][rank["rank"]] = call["issued"]
                group["open"] |= call["completed"] is None
    present = {r["rank"] for r in trace["ranks"]}
    members = trace.get("members", {})
    out = []
    for key, group in groups.items():
        arrivals = group["arrivals"]
        absent = sorted(set(members.get(key[0], [])) - set(arrivals)) if group["open"] else []
        absent = [r for r in absent if r in present]
        if len(arrivals) >= 2 or absent:
            last = None if absent else max(arrivals, key=lambda r: (arrivals[r], r))
            out.append(
                {
                    "key": key,
                    "op": group["op"],
                    "arrivals": arrivals,
                    "last": last,
                    "last_arrival": max(arrivals.values()),
                    "absent": absent,
                }
            )
    out.sort(key=lambda g: (g["last_arrival"], g["key"]))
    return out


def select_window(trace, calls):
    """The time window of the last `calls` collectives: (start, end) in microseconds, or None when nothing was
    recorded. Calls still in flight are always in it."""
    groups = collectives(trace)
    ends = [_end(c, r) for r in trace["ranks"] for c in r["calls"]]
    if not ends:
        return None
    end = max(ends)
    chosen = groups[-calls:] if calls > 0 else []
    if chosen:
        start = min(min(g["arrivals"].values()) for g in chosen)
    else:
        start = min(c["issued"] for r in trace["ranks"] for c in r["calls"])
    in_flight = [c["issued"] for r in trace["ranks"] for c in r["calls"] if c["completed"] is None]
    if in_flight and calls > 0:
        start = min(start, min(in_flight))
    return start, end


def _op_colours(ops):
    return {op: OP_COLOURS[i % len(OP_COLOURS)] for i, op in enumerate(sorted(ops))}


def _title(trace, title, what):
    head = title or f"lockstep trace: {what}"
    parts = []
    if trace["reason"]:
        parts.append(f"reason: {trace['reason']}")
    if trace["job"]:
        parts.append(f"job: {trace['job']}")
    parts.append(f"{len(trace['ranks'])} ranks")
    if trace["missing_ranks"]:
        parts.append("missing: " + ", ".join(str(r) for r in trace["missing_ranks"]))
    return head + "\n" + ", ".join(parts)


def _row_label(rank):
    host = f" ({rank['host']})" if rank["host"] and not rank["host"].startswith("rank ") else ""
    return f"rank {rank['rank']}{host}"


def render(trace, output, calls=DEFAULT_CALLS, title=None):
    """Draws the timeline of the last `calls` collectives of `trace` (load_trace's value) into the PNG `output`.
    Returns what it drew: {"collectives": how many, "window_ms": the window's length, "view_ms": the axis's length
    (shorter when calls in flight run off its edge), and where the rows lie in the
    picture ("rows", "columns": see _rows_in_pixels)}."""
    window = select_window(trace, calls)
    groups = collectives(trace)
    chosen = {g["key"]: g for g in (groups[-calls:] if calls > 0 else [])}
    ranks = trace["ranks"]
    row_of = {r["rank"]: i for i, r in enumerate(ranks)}
    ops = {c["op"] for r in ranks for c in r["calls"]}
    colours = _op_colours(ops)

    fig_height = 1.6 + 0.55 * max(len(ranks), 1)
    fig, ax = plt.subplots(figsize=(13, fig_height), dpi=100)
    start, end = window if window else (0.0, 1000.0)
    span = max(end - start, 1.0)
    # A hang leaves calls in flight long after everything else: then the axis stops a little after the last event and
    # those calls run off its right edge, their labels saying for how long, so that the calls before stay readable.
    events = [
        t
        for r in ranks
        for c in r["calls"]
        for t in (c["issued"], c["completed"])
        if t is not None and start <= t <= end
    ]
    last_event = max(events, default=end)
    view_end = end
    if last_event > start and end - last_event > 2 * (last_event - start):
        view_end = last_event + 0.3 * (last_event - start)
    view = max(view_end - start, 1.0)

    def x(t):
        return (t - start) / 1000.0

    late_x, late_y = [], []
    used_ops = set()
    for rank in ranks:
        y = row_of[rank["rank"]]
        for call in rank["calls"]:
            c_end = _end(call, rank)
            if c_end < start or call["issued"] > end:
                continue
            collective = call["kind"] == "collective"
            key = (call["comm"], call["seq"])
            if collective and groups and calls > 0 and key not in chosen and call["completed"] is not None:
                # A collective older than the chosen ones that still overlaps the window: draw it, but faintly.
                alpha = 0.35
            else:
                alpha = 1.0
            if call["nonblocking"]:
                bottom, height = y + NONBLOCKING_TOP, NONBLOCKING_HEIGHT
            elif collective:
                bottom, height = y - COLLECTIVE_HALF, 2 * COLLECTIVE_HALF
            else:
                bottom, height = y - P2P_HALF, 2 * P2P_HALF
            left, width = x(call["issued"]), max((c_end - call["issued"]) / 1000.0, view / 1000.0 / 2000.0)
            in_flight = call["completed"] is None
            used_ops.add(call["op"])
            ax.add_patch(
                Rectangle(
                    (left, bottom),
                    width,
                    height,
                    facecolor=colours[call["op"]],
                    edgecolor="black" if in_flight else "none",
                    hatch="///" if in_flight else None,
                    linewidth=0.8,
                    alpha=alpha,
                    zorder=2,
                )
            )
            group = chosen.get(key) if collective else None
            if group is not None and rank["rank"] in group["arrivals"]:
                if group["last"] == rank["rank"]:
                    ax.add_patch(
                        Rectangle(
                            (left, bottom),
                            width,
                            height,
                            facecolor="none",
                            edgecolor=LATE_COLOUR,
                            linewidth=2.2,
                            zorder=4,
                        )
                    )
                    late_x.append(left)
                    late_y.append(bottom - 0.06)
                else:
                    # With members that never arrived, the whole call so far is waiting.
                    wait_end = c_end if group["absent"] else min(group["last_arrival"], c_end)
                    if wait_end > call["issued"]:
                        ax.add_patch(
                            Rectangle(
                                (left, bottom),
                                (wait_end - call["issued"]) / 1000.0,
                                height,
                                facecolor=WAIT_COLOUR,
                                edgecolor="none",
                                alpha=WAIT_ALPHA,
                                zorder=3,
                            )
                        )
            if in_flight:
                label = f"{call['op']} #{call['seq']} in flight {(c_end - call['issued']) / 1000.0:.1f} ms"
                _label_above(ax, label, min(left + width, x(view_end)), bottom, "black")
    for group in chosen.values():
        for absent in group["absent"]:
            # A member the others wait for that never arrived: a red dashed frame from the first arrival on.
            y, first = row_of[absent], max(min(group["arrivals"].values()), start)
            ax.add_patch(
                Rectangle(
                    (x(first), y - COLLECTIVE_HALF),
                    x(end) - x(first),
                    2 * COLLECTIVE_HALF,
                    facecolor="none",
                    edgecolor=LATE_COLOUR,
                    linestyle="--",
                    linewidth=2.2,
                    zorder=4,
                )
            )
            late_x.append(x(first))
            late_y.append(y - COLLECTIVE_HALF - 0.06)
            label = f"never arrived at {group['op']} #{group['key'][1]}"
            _label_above(ax, label, x(min(end, view_end)), y - COLLECTIVE_HALF, LATE_COLOUR)
    if late_x:
        ax.scatter(late_x, late_y, marker="v", s=46, color=LATE_COLOUR, zorder=5, clip_on=False)

    ax.set_xlim(0, view / 1000.0 * (1.02 if view_end == end else 1.0))
    ax.set_ylim(len(ranks) - 0.4 if ranks else 0.6, -0.6)
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([_row_label(r) for r in ranks])
    cut = "" if view_end == end else f" (calls in flight go on to the snapshot at {span / 1000.0:.0f} ms)"
    ax.set_xlabel("ms from the window's start" + cut)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    shown = len(chosen)
    what = f"the last {shown} collectives" if shown else "the recorded calls"
    ax.set_title(_title(trace, title, what), fontsize=10, loc="left")
    if not any(r["calls"] for r in ranks):
        ax.text(0.5, 0.5, "no calls recorded", transform=ax.transAxes, ha="center", va="center", fontsize=12)

    handles = [Patch(facecolor=colours[op], label=op) for op in sorted(used_ops)]
    handles += [
        Patch(facecolor="#e4e4e4", edgecolor="#888888", label="pale part: waiting for the last arriver"),
        Line2D([], [], color=LATE_COLOUR, marker="v", linewidth=2.2, label="last arriver"),
        Line2D([], [], color=LATE_COLOUR, linestyle="--", linewidth=2.2, label="never arrived"),
        Patch(facecolor="white", edgecolor="black", hatch="///", label="in flight"),
    ]
    if any(c["kind"] != "collective" for r in ranks for c in r["calls"]):
        handles.append(Patch(facecolor="#cccccc", label="thin bar: point-to-point"))
    if any(c["nonblocking"] for r in ranks for c in r["calls"]):
        handles.append(Patch(facecolor="#cccccc", label="lower lane: non-blocking"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    layout = {
        "collectives": len(chosen),
        "window_ms": span / 1000.0,
        "view_ms": view / 1000.0,
        **_rows_in_pixels(fig, ax, ranks),
    }
    _save(fig, output)
    return layout


def _label_above(ax, text, right, top, colour):
    """A bar's label in the gap above it (rows grow downwards), ending at `right`: calls in flight end at the right."""
    ax.annotate(
        text,
        (right, top),
        xytext=(0, 2),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=8,
        fontweight="bold",
        color=colour,
        zorder=5,
        annotation_clip=False,
    )


def _rows_in_pixels(fig, ax, ranks):
    """Where the axes lie in the saved picture: {"rows": rank -> (top, bottom) pixel rows of its row, counted from the
    top, "columns": (left, right) pixel columns of the axes}."""
    height = fig.get_size_inches()[1] * fig.dpi
    rows = {}
    for i, rank in enumerate(ranks):
        ys = [ax.transData.transform((0, i + d))[1] for d in (-0.5, 0.5)]
        rows[rank["rank"]] = (int(round(height - max(ys))), int(round(height - min(ys))))
    box = ax.get_window_extent()
    return {"rows": rows, "columns": (int(box.x0), int(math.ceil(box.x1)))}


# ---------------------------------------------------------------------------------------------------------------------
# The whole run


def wait_shares(rank, columns=WHOLE_RUN_COLUMNS):
    """A rank's profile as drawn: (column start times in us, column width in us, share of each column spent waiting,
    share of the whole run). Bins after the rank's snapshot (the profile's room to grow) are left out, and neighbouring
    bins are summed into at most `columns` columns, so that bins much shorter than the waits do not show as stripes."""
    p = rank["profile"]
    bin_us = float(p.get("bin_us") or 0)
    waits = [max(float(w), 0.0) for w in p.get("wait_us") or []]
    if bin_us <= 0 or not waits:
        return [], 0.0, [], 0.0
    used = len(waits)
    run_us = used * bin_us
    if rank["snapshot"] is not None and rank["snapshot"] > p["start_us"]:
        run_us = rank["snapshot"] - p["start_us"]
        used = min(used, max(1, math.ceil(run_us / bin_us)))
    # A collective's whole wait is counted in the bin where it started: what overflows a bin spills into the next ones.
    spread, carry = [], 0.0
    for w in waits[:used]:
        carry += w
        spread.append(min(carry, bin_us))
        carry -= spread[-1]
    per_column = max(1, math.ceil(used / columns))
    width = per_column * bin_us
    starts, shares = [], []
    for first in range(0, used, per_column):
        starts.append(p["start_us"] + first * bin_us)
        shares.append(min(sum(spread[first : first + per_column]) / width, 1.0))
    return starts, width, shares, min(sum(waits[:used]) / run_us, 1.0)


def render_whole_run(trace, output, title=None):
    """Draws every rank's run-long wait profile into the PNG `output`; raises TraceError when no rank has one.
    Returns {"straggler": the rank that waits least (None with one rank), "rows" and "columns" (see _rows_in_pixels)}.
    """
    ranks = [r for r in trace["ranks"] if r["profile"] is not None]
    if not ranks:
        raise TraceError('the trace holds no run-long wait profile ("profile") for any rank')
    profiles = {r["rank"]: wait_shares(r) for r in ranks}
    origin = min((s[0] for s, _, _, _ in profiles.values() if s), default=0.0)
    overall = {r: v[3] for r, v in profiles.items()}
    straggler = min(overall, key=lambda r: (overall[r], r)) if len(overall) >= 2 else None

    fig_height = 1.8 + 0.5 * len(ranks)
    fig, (heat, bars) = plt.subplots(
        1, 2, figsize=(13, fig_height), dpi=100, gridspec_kw={"width_ratios": [5, 1]}, sharey=True
    )
    cmap = plt.get_cmap("Blues")
    end = origin
    mesh = None
    for i, rank in enumerate(ranks):
        starts, width, shares, _ = profiles[rank["rank"]]
        if not starts:
            continue
        bin_s = width / 1e6
        edges = [(s - origin) / 1e6 for s in starts] + [(starts[-1] - origin) / 1e6 + bin_s]
        end = max(end, origin + edges[-1] * 1e6)
        mesh = heat.pcolormesh(edges, [i - 0.4, i + 0.4], [shares], cmap=cmap, vmin=0.0, vmax=1.0, shading="flat")
        if rank["rank"] == straggler:
            heat.add_patch(
                Rectangle(
                    (edges[0], i - 0.4), edges[-1] - edges[0], 0.8, fill=False, edgecolor=LATE_COLOUR, linewidth=2.2
                )
            )
    heat.set_xlim(0, max((end - origin) / 1e6, 1e-6))
    heat.set_ylim(len(ranks) - 0.5, -0.5)
    heat.set_yticks(range(len(ranks)))
    heat.set_yticklabels([_row_label(r) for r in ranks])
    heat.set_xlabel("seconds from the start of the run")
    for label, rank in zip(heat.get_yticklabels(), ranks):
        if rank["rank"] == straggler:
            label.set_color(LATE_COLOUR)
            label.set_fontweight("bold")
    if mesh is not None:
        bar = fig.colorbar(mesh, ax=heat, pad=0.01, fraction=0.03)
        bar.set_label("share of the bin spent waiting in collectives", fontsize=8)

    values = [overall[r["rank"]] * 100.0 for r in ranks]
    colours = [LATE_COLOUR if r["rank"] == straggler else "#4a7fb5" for r in ranks]
    bars.barh(range(len(ranks)), values, color=colours, height=0.6)
    for i, v in enumerate(values):
        bars.text(v, i, f" {v:.1f} %", va="center", fontsize=8)
    bars.set_xlim(0, max(max(values, default=0.0) * 1.35, 1.0))
    bars.set_xlabel("waiting, whole run (%)")
    bars.tick_params(axis="y", left=False)

    what = "waiting in collectives over the whole run"
    text = _title(trace, title, what)
    if straggler is not None:
        text += f"; rank {straggler} waits least: the others wait for it"
    heat.set_title(text, fontsize=10, loc="left")
    fig.tight_layout()
    layout = {"straggler": straggler, **_rows_in_pixels(fig, heat, ranks)}
    _save(fig, output)
    return layout


def _save(fig, output):
    try:
        fig.savefig(output, format="png")
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="trace_show.py",
        description="Draws a lockstep trace file as a PNG timeline of every rank's last calls (waits shaded, the last "
        "arriver of each collective in red, calls in flight hatched), or with --whole-run each rank's share of time "
        "spent waiting over the whole run.",
        epilog="Exit status: 0 the PNG is written, 1 it cannot be written, 2 FILE is not a lockstep trace.",
    )
    parser.add_argument("file", metavar="FILE", help="a merged trace file (lockstep trace, LOCKSTEP_TRACE_FILE, ...)")
    parser.add_argument("-o", "--output", metavar="PNG", help="the picture to write (default: FILE with .png)")
    parser.add_argument(
        "--calls",
        metavar="N",
        type=int,
        default=DEFAULT_CALLS,
        help=f"draw the last N collectives and the calls between them (default {DEFAULT_CALLS})",
    )
    parser.add_argument("--title", metavar="T", help="the picture's title (default: what it shows)")
    parser.add_argument(
        "--whole-run", action="store_true", help="draw each rank's run-long wait profile instead of the last calls"
    )
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error(f"--calls must be 1 or more, not {args.calls}")
    output = args.output or os.path.splitext(args.file)[0] + ".png"
    try:
        trace = load_trace(args.file)
        parent = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(parent):
            print(f"trace_show.py: cannot write {output}: {parent} is not a directory", file=sys.stderr)
            return 1
        if args.whole_run:
            render_whole_run(trace, output, args.title)
        else:
            render(trace, output, args.calls, args.title)
    except TraceError as e:
        where = "" if str(e).startswith(args.file) else f"{args.file}: "
        print(f"trace_show.py: {where}{e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"trace_show.py: cannot write {output}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
