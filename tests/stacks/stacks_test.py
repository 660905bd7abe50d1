#!/usr/bin/env python3
"""Runs hung jobs under mpirun and checks the stacks in the watchdog's report.

Usage:
  stacks_test.py native MPIRUN NP PROGRAM [MODE]
      stacks_hang.cpp: the last rank loops in spin_in_computation(), the others wait in an allreduce. The report's
      native tree names the last rank alone at spin_in_computation (stacks_hang.cpp:LINE), and the others together
      at the allreduce; MODE blocked: the last rank blocks the signal, the report says its stack could not be taken.
  stacks_test.py python MPIRUN NP PYTHON SCRIPT [MODE]
      stacks_hang.py: the last rank's main thread is at its line in spin_in_python, the others' at the allreduce,
      and every rank's helper thread at its line in idle_thread; MODE gil: the last rank holds the GIL in C, the
      report says its Python stack could not be taken and shows its native frames in sleep.
  stacks_test.py setting MPIRUN NP PROGRAM all|python|off
      stacks_hang.cpp sleep, under LOCKSTEP_HANG_STACKS: all takes native stacks (the sleeping rank's sleep returns
      early, as documented); python takes none and sends no signal (the sleep is never cut short, each rank's native
      stack is "not taken"); off takes none (no Stacks section, no process asked).
Every job must end non-zero with the report within the limit.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "collectives"))
from watchdog_test import run_job  # noqa: E402  (the hang tests' launcher: mpirun with a limit, output merged)

TIMEOUT_SECONDS = 2


def marked_line(path: str, marker: str) -> int:
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if marker in line:
                return number
    raise SystemExit(f"no line marked {marker!r} in {path}")


def section(output: str, title: str) -> list[str]:
    """The lines of one tree of the Stacks section ("Native, ..." or "Python, ...")."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(title)), None)
    if start is None:
        return []
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def owner(lines: list[str], pattern: str) -> str | None:
    """The rank header ("Process 2:", "Processes 0-1:") over the first line that matches `pattern`."""
    for i, line in enumerate(lines):
        if re.search(pattern, line):
            for above in reversed(lines[:i]):
                text = above.strip()
                if indent(above) < indent(line) and re.match(r"Process(es)? [0-9, -]+:", text):
                    return text
            return None
    return None


def ranks(first: int, last: int) -> str:
    return f"Process {first}:" if first == last else f"Processes {first}-{last}:"


def main() -> int:
    what, mpirun, np = sys.argv[1], sys.argv[2], int(sys.argv[3])
    last = np - 1
    checks: list[tuple[bool, str]] = []
    if what == "setting":
        program, which = sys.argv[4], sys.argv[5]
        os.environ["LOCKSTEP_HANG_STACKS"] = which
        code, _, output = run_job(mpirun, np, [program, "sleep"], timeout=TIMEOUT_SECONDS)
        native = section(output, "Native, the thread that initialised lockstep:")
        cut_short = "the program's sleep returned early" in output
        checks.append((code not in (None, 0), f"the job ended non-zero (exit {code})"))
        checks.append(("collective timed out after" in output, "the report came"))
        if which == "all":
            checks.append((bool(native), "the report has the native stacks"))
            at_sleep = owner(native, r"sleep_in_program \(stacks_hang\.cpp:\d+\)")
            checks.append((at_sleep == ranks(last, last), f"rank {last} in sleep_in_program ({at_sleep})"))
            checks.append((cut_short, "the signal that took the stack ended the program's sleep (documented)"))
        elif which == "python":
            not_taken = f"{ranks(0, last)} not taken (hang_stacks is python: no signal interrupts the program)"
            checks.append((not_taken in output, "every native stack named as not taken, and why"))
            checks.append(("sleep_in_program" not in output, "no native frames in the report"))
            checks.append((not cut_short, "the program's sleep was never cut short"))
        else:
            checks.append(("Stacks" not in output and "not taken" not in output, "no stacks section, nobody asked"))
            checks.append((not cut_short, "the program's sleep was never cut short"))
    elif what == "native":
        program = sys.argv[4]
        mode = sys.argv[5] if len(sys.argv) > 5 else "spin"
        code, _, output = run_job(mpirun, np, [program, mode], timeout=TIMEOUT_SECONDS)
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stacks_hang.cpp")
        native = section(output, "Native, the thread that initialised lockstep:")
        checks.append((code not in (None, 0), f"the job ended non-zero (exit {code})"))
        checks.append(("collective timed out after" in output, "the report came"))
        checks.append((bool(native), "the report has the native stacks"))
        waiting = owner(native, r"lockstep::Communicator::allreduce")
        checks.append((waiting == ranks(0, last - 1), f"the waiting ranks together at the allreduce ({waiting})"))
        if mode == "blocked":
            checks.append(
                (
                    re.search(rf"Process {last}: the stack could not be taken: .*blocks signal", output) is not None,
                    "the blocked rank's stack could not be taken, and the report says why",
                )
            )
        else:
            line = marked_line(source, "spins here")
            spinning = owner(native, rf"spin_in_computation \(stacks_hang\.cpp:{line}\)")
            checks.append((spinning == ranks(last, last), f"rank {last} in spin_in_computation:{line} ({spinning})"))
            checks.append((re.search(r"main \(stacks_hang\.cpp:\d+\)", "\n".join(native)) is not None, "main named"))
    else:
        python, script = sys.argv[4], sys.argv[5]
        mode = sys.argv[6] if len(sys.argv) > 6 else "spin"
        code, _, output = run_job(mpirun, np, [python, script, mode], timeout=TIMEOUT_SECONDS)
        tree = section(output, "Python, every thread:")
        checks.append((code not in (None, 0), f"the job ended non-zero (exit {code})"))
        checks.append(("collective timed out after" in output, "the report came"))
        checks.append((bool(tree), "the report has the Python stacks"))
        spin = marked_line(script, "spins here")
        waits = marked_line(script, "waits here")
        sleeps = marked_line(script, "sleeps here")
        at_wait = owner(tree, rf"main \(stacks_hang\.py:{waits}\)")
        checks.append((at_wait == ranks(0, last - 1), f"the others at the allreduce, line {waits} ({at_wait})"))
        at_sleep = owner(tree, rf"idle_thread \(stacks_hang\.py:{sleeps}\)")
        if mode == "gil":
            checks.append(
                (
                    re.search(rf"Process {last}: the Python stack could not be taken: the GIL was not released", output)
                    is not None,
                    "the rank that holds the GIL named",
                )
            )
            native = section(output, "Native, the thread that initialised lockstep:")
            in_sleep = owner(native, r"sleep")
            checks.append((in_sleep == ranks(last, last), f"its native frames in sleep ({in_sleep})"))
            checks.append((at_sleep == ranks(0, last - 1), f"the others' helper threads ({at_sleep})"))
        else:
            # The loop's two lines: the interpreter may be at either.
            at_spin = owner(tree, rf"spin_in_python \(stacks_hang\.py:({spin - 1}|{spin})\)")
            checks.append((at_spin == ranks(last, last), f"rank {last} in spin_in_python's loop ({at_spin})"))
            checks.append((at_sleep == ranks(0, last), f"every helper thread at line {sleeps} ({at_sleep})"))
        checks.append(("main thread" in "\n".join(tree), "the main thread named"))
    for ok, text in checks:
        print(("ok:   " if ok else "FAIL: ") + text)
    if not all(ok for ok, _ in checks):
        print("---- job output ----")
        print(output)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
