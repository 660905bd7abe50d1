"""Runs one job for the check tests: the command in a session of its own, its output merged, within a limit.

job(command, env, limit) prints the command and its output and returns (exit code, output); a job still running at
the limit is killed with its whole session, and the calling test fails with its output."""
import os
import signal
import subprocess
import sys


def job(command, env=None, limit=60):
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        print(output)
        print(f"FAIL: the job was still running after {limit} s")
        sys.exit(1)
    print(" ".join(command))
    print(output)
    return proc.returncode, output
