#!/usr/bin/env python3
"""Runs hang_program under mpirun with a short collective timeout and checks that the hang is diagnosed.

Usage: hang_test.py MPIRUN PROGRAM NP DEBUG(0|1) [MODE]
Passes when the job exits non-zero within 20 s and the report says what hung: for a skipped collective (MODE skip,
the default, or first) the rank that never arrived and what it did last; for a stuck send or receive (MODE tag, late,
cycle) what the peer does instead of the matching call; for a program's collective whose leaver waits in lockstep's
check at finalize (MODE leader, upper) that the report leads with the program's call and its hint points into the
program.
"""
import os
import signal
import subprocess
import sys
import time

LIMIT_SECONDS = 20


def main() -> int:
    mpirun, program, np, debug = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    mode = sys.argv[5] if len(sys.argv) > 5 else "skip"
    env = dict(os.environ, LOCKSTEP_TIMEOUT="3", LOCKSTEP_DEBUG_MODE=debug)
    start = time.monotonic()
    proc = subprocess.Popen(
        [mpirun, "-n", str(np), "--oversubscribe", program, mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=LIMIT_SECONDS + 10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        print(output)
        print(f"FAIL: the job was still running after {LIMIT_SECONDS + 10} s: the hang was not turned into an error")
        return 1
    elapsed = time.monotonic() - start
    print(output)
    common = [
        (proc.returncode != 0, f"the job exits non-zero (got {proc.returncode})"),
        (elapsed < LIMIT_SECONDS, f"the job ends within {LIMIT_SECONDS} s (took {elapsed:.1f} s)"),
        ("hang_program.cpp:" in output, "the report gives the call site"),
    ]
    last = np - 1
    if mode == "skip":
        checks = common + [
            ("collective timed out after" in output, "a timeout report is printed"),
            (f"Never arrived: Process {last}\n" in output, f"the report names rank {last} as never arrived"),
            ("`lockstep::allreduce` #3" in output, "the report names the stuck call (allreduce #3)"),
            (
                f"Process {last} (host" in output and "last completed `lockstep::allreduce` #2" in output,
                f"the report says rank {last} last completed allreduce #2",
            ),
        ]
    elif mode == "first":
        checks = common + [
            (f"Never arrived: Process {last}\n" in output, f"the report names rank {last} as never arrived"),
            ("Operation: `lockstep::allreduce` #1" in output, "the report names the stuck call (allreduce #1)"),
            (
                "in lockstep's start-up checks at inventory.cpp:" in output,
                "the last completed call is shown as one of lockstep's start-up checks",
            ),
            (
                "Operation: `lockstep::allreduce` #1 float32[16] in lockstep" not in output,
                "the program's own call carries no label",
            ),
        ]
    elif mode == "tag":
        checks = common + [
            ("point-to-point call timed out after" in output, "a point-to-point timeout report is printed"),
            (
                "Operation: `lockstep::recv` from process 0 (tag 2) float32[262144]" in output,
                "process 1's report names its recv, peer, tag and tensor",
            ),
            (
                "Process 0 is in the matching `lockstep::send` to process 1 but with tag 1, and this call uses tag 2"
                in output
                or "Process 1 is in the matching `lockstep::recv` from process 0 but with tag 2, and this call uses "
                "tag 1" in output,
                "the report finds the peer in the matching call with the other tag",
            ),
        ]
    elif mode == "late":
        checks = common + [
            ("Operation: `lockstep::recv` from process 0 (tag 2)" in output, "process 1's recv is reported"),
            (
                "its last completed call was `lockstep::send` to process 1 (tag 1)" in output
                and "the tags differ (this call uses tag 2)" in output,
                "the report points to process 0's completed send with the other tag",
            ),
            ("(in lockstep::Runtime::finalize / MPI_Finalize)" in output, "the report says process 0 is finalising"),
        ]
    elif mode == "cycle":
        checks = common + [
            (
                "is in `lockstep::send` to this process too: both sides send" in output,
                "the report names the send/send cycle",
            ),
            ("even ranks send first" in output, "the report says how to order the calls"),
        ]
    elif mode in ("leader", "upper"):
        # The rank that left waits in lockstep's check at finalize, and it is the lowest waiting rank: the report's
        # headline and closing hint are still about the program's allreduce.
        report = output[output.find("lockstep: collective timed out after") :]
        headline = next((line for line in report.splitlines() if line.startswith("Operation:")), "")
        if mode == "leader":
            size, arrived = np, f"Processes 1-{last}" if last > 1 else "Process 1"
            left = "Process 0"
        else:
            size, arrived = (
                np - 1,
                "Process 1 (world rank 2)" if last == 2 else f"Processes 1-{last - 1} (world ranks 2-{last})",
            )
            left = "Process 0 (world rank 1)"
        checks = common + [
            (
                headline.startswith(
                    f"Operation: `lockstep::allreduce` #3 float32[16] on a communicator of {size} processes,"
                    " called at hang_program.cpp:"
                ),
                f"the headline is the program's allreduce (got: {headline})",
            ),
            (
                f"Arrived and waiting: {arrived}\nNever arrived: {left}\n" in report,
                f"the headline names {left} as never arrived",
            ),
            (
                f"{left} never called this collective and went on to lockstep's check at finalize: look for a "
                "branch, an early `break` or an exception that only some ranks take before hang_program.cpp:" in report,
                "the closing hint points into the program, before its allreduce",
            ),
            ("before world.cpp" not in output, "no hint points into lockstep's own source"),
        ]
    else:
        print(f"unknown mode {mode}")
        return 2
    failed = [what for ok, what in checks if not ok]
    for ok, what in checks:
        print(("ok:   " if ok else "FAIL: ") + what)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
