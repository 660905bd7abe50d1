#!/usr/bin/env python3
"""Runs a Fortran MPI program under the real mpirun with liblockstep_check.so preloaded (debug mode on).

Usage:
  fortran_check_test.py clean[-off] MPIRUN LIBRARY NP PROGRAM
      A correct program: it must end with 0 and print exactly what it prints without the library, and no rank may
      print a lockstep report (clean: debug mode on; clean-off: off, the watchdog only).
  fortran_check_test.py bug MPIRUN LIBRARY NP PROGRAM SOURCE BUG
      A planted bug (bugs_*.f90 BUG): the job must end (not hang) with a non-zero code, and every rank's output must
      hold the report: the MPI function of the bug and SOURCE's file:line of a line marked `planted: BUG`. A hang is
      reported once for the whole job, as lockstep's watchdog reports its own: that report must name the function,
      the line and what every process is doing.

MPIRUN may be the lockstep program (bug only): the job is then started by `lockstep launch --check`, which finds the
library itself (LIBRARY is then only read for what it intercepts). Exit 77 (skipped) where the library does not
intercept the C function the bug needs yet.
"""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

# Each bug: the C functions the library must intercept to see it, and the MPI function its report names.
BUGS = {
    "count": (["MPI_Allreduce"], "MPI_Allreduce"),
    "type": (["MPI_Bcast"], "MPI_Bcast"),
    "skipped": (["MPI_Barrier", "MPI_Allreduce"], "MPI_Barrier"),
    "root": (["MPI_Bcast"], "MPI_Bcast"),
    "unmatched": (["MPI_Recv"], "MPI_Recv"),
    "unwaited": (["MPI_Irecv"], "MPI_Irecv"),
}
HANGS = {"unmatched"}
# A hang is reported after LOCKSTEP_TIMEOUT; the job must have ended well before this.
JOB_TIMEOUT = 120
REPORT = re.compile(r"lockstep", re.IGNORECASE)


def run(mpirun, np_, program, args, library=None, debug=True):
    """The job's exit code, stdout and stderr; with `library`, under the checks (in debug mode unless `debug` is
    false), a hang reported after 5 s. A job still running after JOB_TIMEOUT is killed, all of its processes, and the
    test fails."""
    if os.path.basename(mpirun) == "lockstep":
        command = [mpirun, "launch", "--check", "--debug", "--timeout", "5", "-n", str(np_)]
        command += ["--mpirun-args", "--tag-output", "--", program] + args
    else:
        command = [mpirun, "-n", str(np_), "--tag-output"]
        if library:
            for variable in ("LD_PRELOAD=" + library, f"LOCKSTEP_DEBUG_MODE={int(debug)}", "LOCKSTEP_TIMEOUT=5"):
                command += ["-x", variable]
        command += [program] + args
    env = dict(os.environ, LOCKSTEP_CONFIG_FILE="")
    job = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = job.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        stdout, stderr = job.communicate()
        raise SystemExit(f"FAIL: the job did not end within {JOB_TIMEOUT} s: {' '.join(command)}\n{stdout}{stderr}")
    print(" ".join(command))
    return SimpleNamespace(returncode=job.returncode, stdout=stdout, stderr=stderr)


def per_rank(output, np_):
    """--tag-output's lines, '[jobid,rank]<stdxxx>:text', gathered per rank."""
    ranks = {r: [] for r in range(np_)}
    for line in output.splitlines():
        m = re.match(r"\[\d+,(\d+)\]<\w+>:(.*)$", line)
        if m and int(m.group(1)) in ranks:
            ranks[int(m.group(1))].append(m.group(2))
    return ranks


def stdout_lines(result):
    return sorted(line for line in result.stdout.splitlines() if "<stdout>" in line)


def clean(mpirun, library, np_, program, debug):
    plain = run(mpirun, np_, program, [])
    checked = run(mpirun, np_, program, [], library, debug)
    failures = []
    if plain.returncode != 0:
        failures.append(f"without the library the program ended with {plain.returncode}")
    if checked.returncode != 0:
        failures.append(f"with the library the program ended with {checked.returncode}")
    if stdout_lines(plain) != stdout_lines(checked):
        failures.append("the output differs with the library")
    reports = [line for line in (checked.stdout + checked.stderr).splitlines() if REPORT.search(line)]
    if reports:
        failures.append("a report on a correct program:\n" + "\n".join(reports))
    if not stdout_lines(checked):
        failures.append("no output")
    print(checked.stdout + checked.stderr)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


def bug(mpirun, library, np_, program, source, name):
    needed, function = BUGS[name]
    exported = subprocess.run(
        ["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True
    ).stdout.split()
    absent = [c for c in needed if c not in exported]
    if absent:
        print(f"SKIP: {library} does not intercept {', '.join(absent)}")
        return 77
    lines = [i for i, text in enumerate(Path(source).read_text().splitlines(), 1) if f"planted: {name}" in text]
    sites = [f"{Path(source).name}:{line}" for line in lines]
    result = run(mpirun, np_, program, [name], library)
    output = result.stdout + result.stderr
    print(output)
    failures = []
    if result.returncode == 0:
        failures.append("the job ended with 0")
    if name in HANGS:
        failures += hang_report_failures(output, np_, function, sites)
    for rank, text in per_rank(output, np_).items():
        joined = "\n".join(text)
        if name not in HANGS and function not in joined:
            failures.append(f"rank {rank}'s output does not name {function}")
        if name not in HANGS and not any(site in joined for site in sites):
            failures.append(f"rank {rank}'s output names none of the planted lines {', '.join(sites)}")
        if name != "unwaited" and any("finished" in t for t in text):  # that one is found at MPI_Finalize
            failures.append(f"rank {rank} went on past the bug")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


def hang_report_failures(output, np_, function, sites):
    """The watchdog's one report: the function, a planted line, and a line for every process."""
    failures = []
    if function not in output:
        failures.append(f"the hang report does not name {function}")
    if not any(site in output for site in sites):
        failures.append(f"the hang report names none of the planted lines {', '.join(sites)}")
    for rank in range(np_):
        if not re.search(rf"Process {rank}\b", output):
            failures.append(f"the hang report does not say what process {rank} is doing")
    return failures


def main():
    if len(sys.argv) == 6 and sys.argv[1] in ("clean", "clean-off"):
        return clean(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[1] == "clean")
    if len(sys.argv) == 8 and sys.argv[1] == "bug" and sys.argv[7] in BUGS:
        return bug(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
