#!/usr/bin/env python3
"""Runs jobs that hang under mpirun and checks what the watchdog makes of them.

Usage:
  watchdog_test.py repeat MPIRUN HANG_PROGRAM NP RUNS [DEBUG]
      The skip-and-exit job (the last rank leaves the loop and returns from main) RUNS times in a row, debug mode
      DEBUG: 0 (the default), 1, or both (on in every other run): every run must end non-zero, with the report,
      within the timeout + 15 s.
  watchdog_test.py headline MPIRUN HANG_PROGRAM NP MODE
      A hang whose headline is not "never arrived" (MODE op, extra, cross): the report groups the ranks by the call
      they are in, and names each stuck communicator's ranks by world rank.
  watchdog_test.py settings MPIRUN HANG_PROGRAM NP
      Rank 0 alone runs with debug mode on (then, in a second job, with another timeout): every rank raises the same
      ConfigError at start-up, and the job ends at once instead of waiting for the watchdog.
  watchdog_test.py finalize MPIRUN HANG_PROGRAM NP
      The last rank makes one broadcast more than the others (as its root it does not wait for them): at
      Runtime::finalize every rank reports that the call counts differ, and the job ends.
  watchdog_test.py exit MPIRUN HANG_PROGRAM NP LOCKSTEP
      Jobs the watchdog ends under mpirun settings that let a job run on when its processes exit non-zero: the
      skip-and-exit job, the one whose rank 0 leaves early, and the one whose last rank waits in MPI_Finalize must end
      non-zero, with the report, in time. Under `mpirun --mca orte_abort_on_non_zero_status 0` (the job's own exit
      status), and under `lockstep launch` with --enable-recovery, after which Open MPI 4.1's mpirun exits 0 whatever
      its processes did (MPI_Abort included).
  watchdog_test.py channel MPIRUN WATCHDOG_CHANNEL NP
      The channel refuses queries without the job's key, and a report comes in time while every watchdog is flooded
      with idle and half-open connections.
"""
import os
import signal
import subprocess
import sys
import time

TIMEOUT_SECONDS = 1
GRACE_SECONDS = 15


def run_job(
    mpirun: str,
    np: int,
    argv: list[str],
    debug: str = "0",
    timeout: int = TIMEOUT_SECONDS,
    app: list[str] | None = None,
) -> tuple[int | None, float, str]:
    """Returns (exit code or None when killed at the limit, seconds, output). `app` replaces the default
    `-n NP --oversubscribe ARGV` (for jobs whose ranks get different settings, or launcher options); `mpirun` may be
    another launcher (lockstep)."""
    env = dict(os.environ, LOCKSTEP_TIMEOUT=str(timeout), LOCKSTEP_DEBUG_MODE=debug)
    start = time.monotonic()
    command = [mpirun, *(app or ["-n", str(np), "--oversubscribe", *argv])]
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_SECONDS + GRACE_SECONDS)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        code = None
    return code, time.monotonic() - start, output


def report(checks: list[tuple[bool, str]]) -> int:
    for ok, what in checks:
        print(("ok:   " if ok else "FAIL: ") + what)
    return 0 if all(ok for ok, _ in checks) else 1


def repeat(mpirun: str, program: str, np: int, runs: int, debug: str) -> int:
    failed = 0
    slowest = 0.0
    for i in range(1, runs + 1):
        mode = debug if debug != "both" else str(i % 2)  # both: debug mode on in every other run
        code, seconds, output = run_job(mpirun, np, [program, "skip"], debug=mode)
        slowest = max(slowest, seconds)
        ok = code not in (None, 0) and "collective timed out after" in output
        if not ok:
            failed += 1
            print(output)
            print(
                f"FAIL: run {i} (debug mode {mode}): exit code {code} after {seconds:.1f} s"
                f"{'' if code is not None else ' (killed: mpirun did not return)'}"
            )
    print(
        f"{runs - failed} of {runs} runs ended non-zero with the report; slowest {slowest:.1f} s "
        f"(limit {TIMEOUT_SECONDS + GRACE_SECONDS} s)"
    )
    return 1 if failed else 0


def headline(mpirun: str, program: str, np: int, mode: str) -> int:
    code, seconds, output = run_job(mpirun, np, [program, mode])
    print(output)
    last = np - 1
    checks = [
        (code not in (None, 0), f"the job exits non-zero (got {code})"),
        (seconds < TIMEOUT_SECONDS + GRACE_SECONDS, f"the job ends in time (took {seconds:.1f} s)"),
        (output.count("lockstep: collective timed out after") == 1, "one report, not one per stuck call"),
        ("Never arrived: none" not in output, "no empty 'Never arrived' line"),
    ]
    if mode == "op":
        checks += [
            (
                "The processes are in different calls on this communicator: the ranks disagree on the operation"
                in output,
                "the headline says the ranks disagree on the operation",
            ),
            (
                f"  - {'Processes 0-' + str(last - 1) if last > 1 else 'Process 0'}: `lockstep::allreduce` #3" in output
                and f"  - Process {last}: `lockstep::barrier` #3" in output,
                "the ranks are grouped by the call they are in",
            ),
            ("Never arrived:" not in output, "nobody is said to be missing: every rank is in a call"),
        ]
    elif mode == "extra":
        checks += [
            ("the ranks are at different call numbers" in output, "the headline says the call numbers differ"),
            (f"  - Process {last}: `lockstep::barrier` #4" in output, f"rank {last} is shown in barrier #4"),
        ]
    elif mode == "cross":
        # The communicator of world ranks 1 and up: its last process waits, the others are in the world's call.
        upper = "Process 0 (world rank 1)" if last == 2 else f"Processes 0-{last - 2} (world ranks 1-{last - 1})"
        checks += [
            (f"Never arrived: Process {last}\n" in output, f"the world's call misses rank {last}"),
            (
                "The processes missing here are stuck in another collective:" in output,
                "the other stuck call is in the same report",
            ),
            (
                f"Arrived and waiting: Process {last - 1} (world rank {last})" in output,
                "the sub-communicator's headline names its rank by world rank",
            ),
            (f"Never arrived: {upper}\n" in output, "the sub-communicator's missing ranks are named by world rank"),
            ("These 2 calls wait for each other" in output, "the report says the calls wait for each other"),
        ]
    else:
        print(f"unknown mode {mode}")
        return 2
    return report(checks)


def settings(mpirun: str, program: str, np: int) -> int:
    # A long timeout: the job must end because the ranks compared their settings, not because the watchdog fired.
    timeout = 120
    checks = []
    for setting, value, text in [
        ("LOCKSTEP_DEBUG_MODE", "1", "Debug mode (LOCKSTEP_DEBUG_MODE):"),
        ("LOCKSTEP_TIMEOUT", "90", "Watchdog timeout (LOCKSTEP_TIMEOUT):"),
    ]:
        app = [
            "--oversubscribe",
            "-n",
            "1",
            "-x",
            f"{setting}={value}",
            program,
            "steps",
            ":",
            "-n",
            str(np - 1),
            program,
            "steps",
        ]
        code, seconds, output = run_job(mpirun, np, [], timeout=timeout, app=app)
        print(output)
        checks += [
            (code not in (None, 0), f"{setting} on rank 0 only: the job exits non-zero (got {code})"),
            (seconds < GRACE_SECONDS, f"{setting} on rank 0 only: the job ends at once (took {seconds:.1f} s)"),
            (
                output.count("they disagree on settings that every process must share") == np,
                f"{setting} on rank 0 only: every rank raises the error",
            ),
            (output.count(text) == np, f"{setting} on rank 0 only: every rank names the setting"),
            ("collective timed out" not in output, f"{setting} on rank 0 only: no hang report"),
            ("done" not in output, f"{setting} on rank 0 only: no rank went on"),
        ]
    return report(checks)


def finalize(mpirun: str, program: str, np: int) -> int:
    code, seconds, output = run_job(mpirun, np, [program, "eager"], timeout=60)
    print(output)
    return report(
        [
            (code is not None, f"the job ends (exit code {code})"),
            (seconds < GRACE_SECONDS, f"the job ends at once (took {seconds:.1f} s)"),
            (
                output.count("Processes made different numbers of collectives on the world communicator") == np,
                "every rank reports the different call counts",
            ),
            (f"Process {np - 1}: 4 collectives" in output, f"the report gives rank {np - 1}'s count"),
            (all(output.count(f"rank {r} done") == 1 for r in range(np)), "every rank finished its program"),
            ("collective timed out" not in output, "no hang report"),
        ]
    )


def exit_status(mpirun: str, program: str, np: int, lockstep: str) -> int:
    checks = []
    launch = [
        lockstep,
        "launch",
        "--mpirun",
        mpirun,
        "--mpirun-args",
        "--enable-recovery",
        "-n",
        str(np),
        "--oversubscribe",
        "--",
    ]
    for name, command in [
        (
            "mpirun --mca orte_abort_on_non_zero_status 0",
            [mpirun, "-n", str(np), "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0"],
        ),
        ("lockstep launch --mpirun-args --enable-recovery", launch),
    ]:
        for mode in ["skip", "leader", "host"]:
            code, seconds, output = run_job(command[0], np, [], app=[*command[1:], program, mode])
            what = f"{name}, {mode}"
            print(f"--- {what}\n{output}")
            checks += [
                (code not in (None, 0), f"{what}: the job exits non-zero (got {code})"),
                ("lockstep: collective timed out after" in output, f"{what}: the report is printed"),
                (seconds < TIMEOUT_SECONDS + GRACE_SECONDS, f"{what}: the job ends in time (took {seconds:.1f} s)"),
            ]
    return report(checks)


def channel(mpirun: str, program: str, np: int) -> int:
    code, seconds, output = run_job(mpirun, np, [program])
    print(output)
    oks = output.count("channel: ok:")
    return report(
        [
            (code not in (None, 0), f"the job exits non-zero (got {code})"),
            ("channel: FAIL" not in output and oks == 6 * np, f"every channel check passed ({oks} of {6 * np})"),
            (f"Never arrived: Process {np - 1}\n" in output, "the report names the rank that never arrived"),
            ("no answer" not in output, "every process answered the report's queries despite the flood"),
            (seconds < TIMEOUT_SECONDS + GRACE_SECONDS, f"the job ends in time (took {seconds:.1f} s)"),
        ]
    )


def main() -> int:
    what = sys.argv[1]
    if what == "repeat":
        return repeat(
            sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] if len(sys.argv) > 6 else "0"
        )
    if what == "settings":
        return settings(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if what == "finalize":
        return finalize(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if what == "headline":
        return headline(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    if what == "exit":
        return exit_status(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    if what == "channel":
        return channel(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
