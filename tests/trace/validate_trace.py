"""Checks a trace file against the Chrome trace-event format, as Perfetto and chrome://tracing read it, and against
what lockstep's merged trace promises.

Usage: validate_trace.py FILE [--ranks N] [--straggler R]

Checked:
- the file is a JSON object with a "traceEvents" list (and "displayTimeUnit", if any, is "ms" or "ns");
- every event is an object with the fields its phase needs: name, ph, ts, pid, tid (metadata "M" events need no ts);
  dur for complete slices "X"; id for async "b"/"e" and flow "s"/"t"/"f" events; args, where present, an object;
  ts and dur numbers >= 0, pid and tid integers;
- ts never decreases on one track (pid, tid) in file order (metadata events aside), and the complete slices of one
  track nest or follow each other, never overlap in part;
- async slices pair: each "b" has an "e" of the same cat, id and name after it, and no "e" comes without its "b";
- flows pair: each "s" has at least one "f" of the same id and cat, each "f" an "s" no later in time (viewers read
  events in time order), and each flow event lies inside a complete slice of its own track, the slice it binds to;
- with --ranks N: every rank 0..N-1 has a process_name and at least one slice ("X" or "b");
- with --straggler R: in every collective of the program of two or more recorded ranks that R belongs to (slices with
  args.kind "collective", one collective per args.comm and args.seq; lockstep's own communicators, whose
  args.comm_name starts with "lockstep's", are left out: their calls follow each other with no program code between
  them, so who arrives last there is chance), R is the one marked args.last_arriver, or the collective names R in
  args.not_arrived; and there is at least one such collective.

Exit status: 0 when the file passes, 1 with each violation printed, 2 on a usage error."""

import argparse
import collections
import json
import numbers
import sys

NEEDS_ID = {"b", "e", "n", "s", "t", "f"}
SLICES = {"X", "b"}
MAX_PRINTED = 100


def is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def describe(index, event):
    return "event %d (ph %r, name %r, pid %r, tid %r)" % (
        index,
        event.get("ph"),
        event.get("name"),
        event.get("pid"),
        event.get("tid"),
    )


def check_fields(index, event, problems):
    """The fields the event's phase needs; False when the event is too broken to look at further."""
    if not isinstance(event, dict):
        problems.append("event %d is not an object" % index)
        return False
    ph = event.get("ph")
    if not isinstance(ph, str) or len(ph) != 1:
        problems.append("%s: ph missing or not a one-letter string" % describe(index, event))
        return False
    ok = True
    required = ["name", "pid", "tid"] + ([] if ph == "M" else ["ts"])
    if ph == "X":
        required.append("dur")
    if ph in NEEDS_ID:
        required.append("id")
    for field in required:
        if field not in event:
            problems.append("%s: missing %s" % (describe(index, event), field))
            ok = False
    if "name" in event and not isinstance(event["name"], str):
        problems.append("%s: name is not a string" % describe(index, event))
        ok = False
    for field in ("pid", "tid"):
        if field in event and not is_integer(event[field]):
            problems.append("%s: %s is not an integer" % (describe(index, event), field))
            ok = False
    for field in ("ts", "dur"):
        if field in event and (not is_number(event[field]) or event[field] < 0):
            problems.append("%s: %s is not a number >= 0: %r" % (describe(index, event), field, event[field]))
            ok = False
    if "id" in event and not (is_integer(event["id"]) or isinstance(event["id"], str)):
        problems.append("%s: id is neither an integer nor a string" % describe(index, event))
        ok = False
    if "args" in event and not isinstance(event["args"], dict):
        problems.append("%s: args is not an object" % describe(index, event))
        ok = False
    if ph == "M" and not isinstance(event.get("args"), dict):
        problems.append("%s: a metadata event without args" % describe(index, event))
        ok = False
    return ok


def check_events(events, problems):
    """Everything about the events themselves; returns the well-formed ones as (index, event)."""
    good = []
    for index, event in enumerate(events):
        if check_fields(index, event, problems):
            good.append((index, event))

    last_ts = {}
    for index, event in good:
        if event["ph"] == "M":
            continue
        track = (event["pid"], event["tid"])
        if track in last_ts and event["ts"] < last_ts[track][1]:
            problems.append(
                "%s: ts %r goes back from %r (event %d) on track pid %r tid %r"
                % (describe(index, event), event["ts"], last_ts[track][1], last_ts[track][0], track[0], track[1])
            )
        else:
            last_ts[track] = (index, event["ts"])

    open_async = collections.defaultdict(list)
    for index, event in good:
        if event["ph"] not in ("b", "e"):
            continue
        key = (event.get("cat"), event["id"], event["name"])
        if event["ph"] == "b":
            open_async[key].append((index, event))
        elif not open_async[key]:
            problems.append(
                "%s: an async end without its begin (cat %r, id %r)" % (describe(index, event), key[0], key[1])
            )
        else:
            begin_index, begin = open_async[key].pop()
            if event["ts"] < begin["ts"]:
                problems.append("%s: ends before its begin (event %d)" % (describe(index, event), begin_index))
    for key, begins in open_async.items():
        for index, event in begins:
            problems.append(
                "%s: an async begin without its end (cat %r, id %r)" % (describe(index, event), key[0], key[1])
            )

    slices_of = collections.defaultdict(list)
    for index, event in good:
        if event["ph"] == "X":
            slices_of[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"], index))
    # Slices of one track nest or follow each other; a partial overlap is a slice a viewer cannot place.
    for track, slices in slices_of.items():
        open_ends = []
        for start, end, index in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1][0] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1][0] + 1e-6:
                problems.append(
                    "%s: overlaps event %d on its track without nesting in it"
                    % (describe(index, events[index]), open_ends[-1][1])
                )
                continue
            open_ends.append((end, index))
    # Viewers read events in time order, not file order: a flow's start must not come after its end in time.
    starts = {}
    for index, event in good:
        if event["ph"] == "s":
            starts.setdefault((event["id"], event.get("cat")), (index, event))
    ends = collections.Counter()
    for index, event in good:
        if event["ph"] not in ("s", "t", "f"):
            continue
        key = (event["id"], event.get("cat"))
        if event["ph"] == "f":
            ends[key] += 1
            if key not in starts:
                problems.append(
                    "%s: a flow end without a start (id %r, cat %r)" % (describe(index, event), key[0], key[1])
                )
            elif starts[key][1]["ts"] > event["ts"]:
                problems.append(
                    "%s: a flow end before its start in time (event %d)" % (describe(index, event), starts[key][0])
                )
        ts = event["ts"]
        if not any(
            start <= ts < end or start == ts == end for start, end, _ in slices_of[(event["pid"], event["tid"])]
        ):
            problems.append("%s: a flow event outside every slice of its track" % describe(index, event))
    for key, (index, event) in starts.items():
        if ends[key] == 0:
            problems.append(
                "%s: a flow start without an end (id %r, cat %r)" % (describe(index, event), key[0], key[1])
            )
    return good


def check_ranks(good, ranks, problems):
    named = {event["pid"] for _, event in good if event["ph"] == "M" and event["name"] == "process_name"}
    with_slices = {event["pid"] for _, event in good if event["ph"] in SLICES}
    for rank in range(ranks):
        if rank not in named:
            problems.append("rank %d: no process_name metadata event" % rank)
        if rank not in with_slices:
            problems.append("rank %d: no slice" % rank)


def check_straggler(good, straggler, problems):
    collectives = collections.defaultdict(list)
    for index, event in good:
        args = event.get("args") or {}
        if event["ph"] in SLICES and args.get("kind") == "collective":
            if str(args.get("comm_name", "")).startswith("lockstep's"):
                continue  # lockstep's own start-up and finalize checks: no program code delays anyone there
            collectives[(args.get("comm"), args.get("seq"))].append((index, event))
    checked = 0
    for (comm, seq), members in sorted(collectives.items(), key=lambda item: str(item[0])):
        ranks = {event["pid"] for _, event in members}
        not_arrived = set()
        for _, event in members:
            not_arrived.update(event["args"].get("not_arrived") or [])
        if straggler in not_arrived:
            checked += 1
            continue
        if len(members) < 2 or straggler not in ranks:
            continue
        checked += 1
        last = sorted(event["pid"] for _, event in members if event["args"].get("last_arriver") is True)
        if last != [straggler]:
            problems.append(
                "collective seq %r on communicator %r: the last arriver is %s, not rank %d"
                % (seq, comm, ", ".join("rank %d" % r for r in last) or "unmarked", straggler)
            )
    if checked == 0:
        problems.append("rank %d is in no collective of two or more recorded ranks" % straggler)


def validate(path, ranks=None, straggler=None):
    """The violations found in the file at `path` (an empty list when it passes), and its number of events."""
    problems = []
    try:
        with open(path, "rb") as f:
            trace = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return ["cannot read a JSON document: %s" % e], 0
    if not isinstance(trace, dict):
        return ["the file is a JSON %s, not an object with traceEvents" % type(trace).__name__], 0
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        return ["no traceEvents list"], 0
    if "displayTimeUnit" in trace and trace["displayTimeUnit"] not in ("ms", "ns"):
        problems.append("displayTimeUnit is %r, neither 'ms' nor 'ns'" % (trace["displayTimeUnit"],))
    good = check_events(events, problems)
    if ranks is not None:
        check_ranks(good, ranks, problems)
    if straggler is not None:
        check_straggler(good, straggler, problems)
    return problems, len(events)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--ranks", type=int, help="every rank 0..N-1 must be in the trace")
    parser.add_argument("--straggler", type=int, help="this rank must be the last arriver of its collectives")
    args = parser.parse_args(argv)
    problems, count = validate(args.file, args.ranks, args.straggler)
    for problem in problems[:MAX_PRINTED]:
        print("%s: %s" % (args.file, problem))
    if len(problems) > MAX_PRINTED:
        print("%s: ... and %d more violations" % (args.file, len(problems) - MAX_PRINTED))
    if problems:
        return 1
    print("%s: a valid trace (%d events)" % (args.file, count))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
