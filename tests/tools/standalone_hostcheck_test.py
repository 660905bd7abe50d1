"""`lockstep hostcheck` is the tool people run when MPI is broken: the program loads neither libmpi nor liblockstep,
and its other commands come from a module loaded on demand, which says why when it cannot load.

Usage: standalone_hostcheck_test.py LOCKSTEP_EXE"""

import os
import subprocess
import sys
import tempfile

exe = sys.argv[1]
failures = []


def expect(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def run(args, env=None):
    return subprocess.run([exe] + args, capture_output=True, text=True, timeout=60, env=env)


needed = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True, check=True, timeout=60).stdout
needed = [line for line in needed.splitlines() if "(NEEDED)" in line]
expect(
    needed and not any("libmpi" in line or "liblockstep" in line for line in needed),
    "the lockstep program needs neither libmpi nor liblockstep:\n" + "\n".join(needed),
)

r = run(["config", "--help"])
expect(r.returncode == 0 and "config" in r.stdout, f"config loads from the module (exit {r.returncode}) {r.stderr}")

# A broken MPI: the libmpi the runtime needs is found first and is not a library.
with tempfile.TemporaryDirectory() as broken:
    with open(os.path.join(broken, "libmpi.so.40"), "w", encoding="utf-8") as f:
        f.write("this is not a shared library\n")
    env = dict(os.environ, LD_LIBRARY_PATH=broken)
    r = run(["hostcheck", "--help"], env)
    expect(r.returncode == 0 and "hostcheck" in r.stdout, f"hostcheck starts with libmpi broken (exit {r.returncode})")
    expect(r.stderr == "", f"hostcheck says nothing of the runtime: {r.stderr!r}")
    # A real check of this machine, which needs no ssh: a JSON report, whatever it finds.
    r = run(["hostcheck", "--json", "--skip", "probe,mpirun", "-w", "localhost"], env)
    expect(
        r.returncode in (0, 1) and r.stdout.lstrip().startswith("{") and "libmpi" not in r.stderr,
        f"hostcheck checks a host with libmpi broken (exit {r.returncode}): {r.stdout[:200]!r} {r.stderr!r}",
    )
    r = run(["config"], env)
    expect(r.returncode == 1, f"config with libmpi broken exits 1 (exit {r.returncode})")
    expect(
        "lockstep config: needs the lockstep runtime, which could not be loaded" in r.stderr
        and "libmpi.so.40" in r.stderr
        and "lockstep hostcheck" in r.stderr,
        f"config says the runtime could not load, why, and what still works: {r.stderr!r}",
    )
    r = run(["--help"], env)
    expect(
        r.returncode == 0 and "hostcheck" in r.stdout and "unavailable" in r.stderr,
        f"--help lists what there is and says what is unavailable (exit {r.returncode}) {r.stderr!r}",
    )

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
