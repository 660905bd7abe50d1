"""Writes merged lockstep trace files that follow docs/tracing.md, for testing the picture without running a job.

make_trace() builds a 4-rank trace: rank 3 computes longer than the others, so it is the last to arrive at every
collective; rank 2 exchanges point-to-point messages with rank 0 and is stuck in a receive when the snapshots are
taken, while ranks 0, 1 and 3 wait in flight in the next allreduce; rank 1 posts a non-blocking allreduce every few
steps. Every rank also carries a run-long wait profile in which rank 3 waits least."""

import json

ORIGIN_US = 1_764_900_000_000_000.0
STRAGGLER = 3
STUCK = 2
RANKS = 4


def _call(comm, seq, op, kind, issued, completed, nonblocking=False, peer=-1):
    return {
        "comm": comm,
        "seq": seq,
        "op": op,
        "kind": kind,
        "nonblocking": nonblocking,
        "dtype": "float32",
        "shape": [1024],
        "count": 1024,
        "bytes": 4096,
        "root": -1,
        "peer": peer,
        "tag": 0,
        "step": seq,
        "file": "train.cpp",
        "line": 40,
        "function": "main",
        "site": "train.cpp:40 (main)",
        "issued_us": issued,
        "signature_us": None,
        "payload_us": None,
        "completed_us": completed,
        "waited_us": completed if nonblocking else None,
        "outcome": "ok" if completed is not None else "in_flight",
    }


def make_trace(collectives=30, with_profile=True):
    """The merged trace as a dict; `collectives` completed allreduces, then one in flight."""
    step_us = 20_000.0
    calls = {r: [] for r in range(RANKS)}
    t = ORIGIN_US
    for seq in range(1, collectives + 1):
        # Each rank arrives after its compute; rank 3's compute is 8 ms longer, the others differ by a little.
        arrivals = {r: t + 4_000.0 + 300.0 * r + (8_000.0 if r == STRAGGLER else 0.0) for r in range(RANKS)}
        done = max(arrivals.values()) + 1_500.0
        for r in range(RANKS):
            calls[r].append(_call(0, seq, "allreduce", "collective", arrivals[r], done))
        if seq % 5 == 0:
            calls[1].append(_call(0, 1000 + seq, "iallreduce", "collective", t + 1_000.0, t + 15_000.0, True))
            calls[0].append(_call(0, 1000 + seq, "iallreduce", "collective", t + 1_200.0, t + 15_000.0, True))
        if seq % 3 == 0:
            calls[0].append(_call(1, 0, "send", "send", t + 500.0, t + 900.0, peer=2))
            calls[2].append(_call(1, 0, "recv", "recv", t + 450.0, t + 950.0, peer=0))
        t += step_us
    # The last step: rank 2 waits for a message that never comes; the others are in the next allreduce.
    seq = collectives + 1
    calls[2].append(_call(1, 0, "recv", "recv", t + 300.0, None, peer=0))
    for r in (0, 1, 3):
        calls[r].append(
            _call(0, seq, "allreduce", "collective", t + 4_000.0 + (8_000.0 if r == STRAGGLER else 0.0), None)
        )
    snapshot_us = t + 60_000.0
    ranks = []
    for r in range(RANKS):
        snap = {
            "rank": r,
            "host": "node%d" % (r // 2),
            "pid": 4000 + r,
            "snapshot_us": snapshot_us,
            "capacity": 2048,
            "communicators": [
                {
                    "id": 0,
                    "name": "world",
                    "size": RANKS,
                    "rank": r,
                    "world_ranks": list(range(RANKS)),
                    "recorded": len(calls[r]),
                    "dropped": 0,
                },
            ],
            "calls": sorted(calls[r], key=lambda c: c["issued_us"]),
            "clock_offset_us": 0.0,
        }
        if with_profile:
            snap["profile"] = make_profile(r)
        ranks.append(snap)
    return {
        "traceEvents": [],
        "displayTimeUnit": "ms",
        "otherData": {
            "lockstep_trace_version": "1",
            "reason": "hang",
            "job": "synthetic-42",
            "created": "2026-12-05T12:00:00Z",
            "ranks": str(RANKS),
            "missing_ranks": "",
        },
        "lockstep": {"version": 1, "reason": "hang", "ranks": ranks, "missing_ranks": [], "origin_us": ORIGIN_US},
    }


def make_profile(rank, bins=120, bin_us=500_000.0):
    """A run-long wait profile: the others wait 30-40 % of every bin, rank 3 about 2 %; all wait more in a slow phase
    in the middle of the run."""
    waits = []
    for i in range(bins):
        slow = 1.6 if bins // 3 <= i < bins // 2 else 1.0
        share = 0.02 if rank == STRAGGLER else (0.30 + 0.03 * rank) * slow
        waits.append(min(share, 1.0) * bin_us)
    return {"start_us": ORIGIN_US - 60e6, "bin_us": bin_us, "wait_us": waits, "calls": [50] * bins}


def write_trace(path, **kwargs):
    with open(path, "w") as f:
        json.dump(make_trace(**kwargs), f)
    return path
