"""The trace at exit of an MPI program that lockstep does not carry: `lockstep launch --check --trace FILE` runs a C
program under the checking library, and its MPI_Finalize gathers every process's recorded MPI calls into FILE.

Usage: check_trace_test.py LOCKSTEP PROGRAM VALIDATOR NP PLANTED

The file must pass the trace-event validator with every rank present; every rank's calls are the program's MPI
functions; MPI_COMM_WORLD's collectives have every rank as a member (the check library's communicator ids use all 64
bits: a merge that read them as doubles or 32-bit numbers would put every communicator together); the summary names
MPI_COMM_WORLD with all its ranks; the launcher names the file, and says so when a program wrote none. A call that
failed is recorded with its error (PLANTED, tests/check/planted_bugs.c): MPI's own (truncate: MPI_ERR_TRUNCATE on the
receiving rank alone, debug mode off) and debug mode's mismatch returned to the program (return: on every rank)."""

import json
import os
import subprocess
import sys
import tempfile

from job import job

LIMIT_SECONDS = 120


def calls_named(trace, op):
    """{rank: [calls of `op`]} of a trace's snapshots."""
    return {s["rank"]: [c for c in s["calls"] if c["op"] == op] for s in trace["ranks"]}


def main():
    lockstep, program, validator, np, planted = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    failures = []

    def check(ok, what):
        print(("ok: " if ok else "FAIL: ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "exit.json")
        command = [lockstep, "launch", "--check", "--no-debug", "--trace", file, "-n", str(np), "--oversubscribe"]
        returncode, output = job(command + ["--", program], limit=LIMIT_SECONDS)
        check(returncode == 0, f"the job exits 0 (got {returncode})")
        check(os.path.isfile(file) and os.path.isfile(file + ".txt"), "the trace and its summary are written")
        check(f"lockstep launch: the trace of every rank's last calls is in {file}" in output, "launch names it")
        if failures:
            sys.exit(1)
        r = subprocess.run([sys.executable, validator, file, "--ranks", str(np)], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        check(r.returncode == 0, "the trace passes the trace-event validator with every rank present")
        trace = json.load(open(file))["lockstep"]
        check(trace.get("reason") == "exit", "the reason is exit")
        for snapshot in trace["ranks"]:
            ops = {c["op"] for c in snapshot["calls"]}
            check(
                {"MPI_Allreduce", "MPI_Bcast", "MPI_Barrier"} <= ops and all(op.startswith("MPI_") for op in ops),
                f"rank {snapshot['rank']} recorded the program's MPI calls ({sorted(ops)[:6]}...)",
            )
            ids = [c["id"] for c in snapshot["communicators"]]
            check(len(set(ids)) == len(ids) and len(ids) > 2, f"rank {snapshot['rank']}'s communicators are apart")
        world = [c for c in trace["collectives"] if c.get("comm_name") == "MPI_COMM_WORLD"]
        check(len(world) > 5, f"MPI_COMM_WORLD's collectives are matched across ranks ({len(world)})")
        check(
            all(c["members"] == np and len({a["rank"] for a in c["arrivals"]}) == np for c in world),
            "every rank arrived once in each of MPI_COMM_WORLD's collectives",
        )
        summary = open(file + ".txt").read()
        print(summary)
        check(f"Communicator MPI_COMM_WORLD (id 9223372036854775808, {np} ranks)" in summary, "the summary names it")
        # A program that never finalizes lockstep writes no trace: the launcher says so rather than nothing.
        other = os.path.join(tmp, "none.json")
        r = subprocess.run(
            [lockstep, "launch", "--trace", other, "-n", "1", "--", "/bin/true"],
            capture_output=True,
            text=True,
            timeout=LIMIT_SECONDS,
        )
        print(r.stdout + r.stderr)
        check(r.returncode == 0, f"a job that writes no trace still exits 0 (got {r.returncode})")
        check(f"no trace was written to {other}" in r.stderr, "and the launcher says that no trace was written")

        # Calls that failed: MPI's own error on the receiving rank alone, and debug mode's mismatch on every rank.
        mismatch = [("error", "lockstep::SignatureMismatchError")]
        for bug, mode, op, expected in [
            ("truncate", "--no-debug", "MPI_Recv", {0: [], 1: [("error", "MPI_ERR_TRUNCATE")]}),
            ("return", "--debug", "MPI_Bcast", {0: mismatch, 1: mismatch}),
        ]:
            failed = os.path.join(tmp, f"{bug}.json")
            command = [lockstep, "launch", "--check", mode, "--trace", failed, "-n", "2", "--oversubscribe"]
            returncode, output = job(command + ["--", planted, bug], limit=LIMIT_SECONDS)
            check(returncode == 0 and os.path.isfile(failed), f"{bug}: the job exits 0 and writes its trace")
            if not os.path.isfile(failed):
                continue
            trace = json.load(open(failed))["lockstep"]
            by_rank = calls_named(trace, op)
            for rank, want in expected.items():
                got = [(c["outcome"], c.get("error")) for c in by_rank.get(rank, [])]
                check(got == want, f"{bug}: rank {rank}'s {op} calls are recorded as {want} (got {got})")
            if bug == "truncate":
                sent = [c["outcome"] for c in calls_named(trace, "MPI_Send").get(0, [])]
                check(sent == ["ok"], f"truncate: rank 0's MPI_Send is recorded as ok (got {sent})")
    if failures:
        print(f"{len(failures)} checks failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
