#!/usr/bin/env python3
"""Runs a job whose communicator times out and checks how it ended.

Usage: timeout_job.py EXIT LIMIT [--expect TEXT]... -- COMMAND...

Passes when COMMAND ends within LIMIT seconds with exit status EXIT and its output (stdout and stderr) holds every
TEXT. EXIT 0 also needs every rank to have printed "PASS <name> rank r/n" (what timeout_raise_program and the Python
timeout programs print); EXIT 124 is the watchdog's ending of the job (on_timeout end).
"""
import os
import re
import signal
import subprocess
import sys


def main() -> int:
    expected_exit, limit = int(sys.argv[1]), float(sys.argv[2])
    rest = sys.argv[3:]
    split = rest.index("--")
    options, command = rest[:split], rest[split + 1 :]
    expected_texts = [options[i + 1] for i in range(0, len(options), 2) if options[i] == "--expect"]
    print("$ " + " ".join(command), flush=True)
    proc = subprocess.Popen(
        command,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        print(output)
        print(f"FAIL: the job was still running after {limit:g} s")
        return 1
    print(output)
    failures = []
    if proc.returncode != expected_exit:
        failures.append(f"the job exits {expected_exit} (got {proc.returncode})")
    for text in expected_texts:
        if text not in output:
            failures.append(f"the output holds {text!r}")
    if expected_exit == 0:
        np = int(command[command.index("-n") + 1])
        passed = set(re.findall(r"PASS \S+ rank (\d+)/(\d+)", output))
        for rank in range(np):
            if (str(rank), str(np)) not in passed:
                failures.append(f"rank {rank} of {np} printed PASS")
    for failure in failures:
        print("FAIL: " + failure)
    if not failures:
        print("ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
