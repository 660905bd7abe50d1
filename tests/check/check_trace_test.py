"""The trace at exit of an MPI program that lockstep does not carry: `lockstep launch --check --trace FILE` runs a C
program under the checking library, and its MPI_Finalize gathers every process's recorded MPI calls into FILE.

Usage: check_trace_test.py LOCKSTEP PROGRAM VALIDATOR NP

The file must pass the trace-event validator with every rank present; every rank's calls are the program's MPI
functions; MPI_COMM_WORLD's collectives have every rank as a member (the check library's communicator ids use all 64
bits: a merge that read them as doubles or 32-bit numbers would put every communicator together); the summary names
MPI_COMM_WORLD with all its ranks; the launcher names the file, and says so when a program wrote none."""

import json
import os
import signal
import subprocess
import sys
import tempfile

LIMIT_SECONDS = 120


def main():
    lockstep, program, validator, np = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    failures = []

    def check(ok, what):
        print(("ok: " if ok else "FAIL: ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "exit.json")
        command = [lockstep, "launch", "--check", "--no-debug", "--trace", file, "-n", str(np), "--oversubscribe"]
        command += ["--", program]
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        try:
            output, _ = proc.communicate(timeout=LIMIT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            print(output)
            print(f"FAIL: the job was still running after {LIMIT_SECONDS} s")
            sys.exit(1)
        print(" ".join(command))
        print(output)
        check(proc.returncode == 0, f"the job exits 0 (got {proc.returncode})")
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
    if failures:
        print(f"{len(failures)} checks failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
