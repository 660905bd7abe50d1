#!/usr/bin/env python3
"""Runs nonblocking_program under mpirun with a 3 s collective timeout and checks what lockstep says about requests
left behind.

Usage: nonblocking_test.py MPIRUN PROGRAM NP MODE
  never_wait  (LOCKSTEP_PROGRESS_THREAD=0) the job ends non-zero within 30 s; the report names the last rank as never
              arrived, lists its request as queued and never waited for, and says why it never started.
  unwaited    the job completes (exit 0); the last rank's warning at finalize names its allreduce and its receive,
              with their call sites, and says the receive was cancelled.
  die         (mpirun --enable-recovery, so that the watchdog, not mpirun, ends the job) the last rank is killed; the
              job ends within 30 s with the report, which lists the requests the others wait for.
  recv        process 0 waits for an irecv that is never sent: a stuck-receive report naming the request.
"""
import os
import signal
import subprocess
import sys
import time

LIMIT_SECONDS = 30


def main() -> int:
    mpirun, program, np, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    env = dict(os.environ, LOCKSTEP_TIMEOUT="3", LOCKSTEP_DEBUG_MODE="0")
    if mode == "never_wait":
        env["LOCKSTEP_PROGRESS_THREAD"] = "0"
    extra = ["--enable-recovery"] if mode == "die" else []
    start = time.monotonic()
    proc = subprocess.Popen(
        [mpirun, *extra, "-n", str(np), "--oversubscribe", program, mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=LIMIT_SECONDS + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        print(output)
        print(f"FAIL: the job was still running after {LIMIT_SECONDS + 30} s")
        return 1
    elapsed = time.monotonic() - start
    print(output)
    last = np - 1
    ended = [
        (elapsed < LIMIT_SECONDS, f"the job ends within {LIMIT_SECONDS} s (took {elapsed:.1f} s)"),
        ("collective timed out after" in output or "timed out" in output, "a timeout report is printed"),
        ("nonblocking_program.cpp:" in output, "the report gives the call site"),
    ]
    if mode == "never_wait":
        checks = ended + [
            (proc.returncode != 0, f"the job exits non-zero (got {proc.returncode})"),
            (f"Never arrived: Process {last}\n" in output, f"rank {last} never arrived"),
            ("`lockstep::allreduce` float32[16] issued at nonblocking_program.cpp:" in output, "the request is listed"),
            ("queued, not started; never waited for so far" in output, "its state: queued, never waited for"),
            ("issued the call without blocking (request #" in output, "the hint names the request"),
            ("runs only inside wait() or test()" in output, "the hint says why it never started"),
            ("... and 12 more requests not waited for" in output, "each process lists 8 of its 20 requests"),
        ]
    elif mode == "unwaited":
        checks = [
            (proc.returncode == 0, f"the job completes (exit code {proc.returncode})"),
            (
                "the runtime finalized with 2 non-blocking operations never waited for" in output,
                "the warning at finalize counts the requests",
            ),
            ("`lockstep::allreduce` float32[16] issued at nonblocking_program.cpp:" in output, "names the allreduce"),
            ("`lockstep::recv` from process 0 (tag 42)" in output, "names the receive"),
            ("cancelled" in output, "says the receive was cancelled"),
            (f"[rank {last}/{np}" in output, "the warning comes from the last rank"),
        ]
    elif mode == "die":
        checks = ended + [
            ("no answer" in output, "the killed rank is named as not answering"),
            ("a thread waits for it in wait()" in output, "the report lists the request a rank waits for"),
            (
                f"`lockstep::recv` from process {last} (tag 43)" in output and "posted, not matched yet" in output,
                "and the receive posted from the killed rank",
            ),
        ]
    elif mode == "recv":
        checks = ended + [
            (proc.returncode != 0, f"the job exits non-zero (got {proc.returncode})"),
            ("`lockstep::recv` from process 1 (tag 5)" in output, "the report names the stuck receive"),
            ("a thread waits for it in wait()" in output, "and the request waited for"),
        ]
    else:
        print(f"unknown mode {mode}")
        return 2
    failed = [what for ok, what in checks if not ok]
    for ok, what in checks:
        print(("ok   " if ok else "FAIL ") + what)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
