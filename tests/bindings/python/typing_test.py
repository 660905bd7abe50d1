#!/usr/bin/env python3
"""The package's type stubs: mypy passes on the Python examples, and the stubs agree with the package itself.

Usage: typing_test.py PACKAGE_DIR EXAMPLES_DIR

PACKAGE_DIR holds the package lockstep with its stubs (<builddir>/bindings/python). Two checks, with Debian's mypy:
  - mypy --strict on every .py file of EXAMPLES_DIR, the package's stubs found through MYPYPATH (torch 1.13 is partly
    untyped, so calls into it are allowed);
  - mypy.stubtest on lockstep and lockstep._lockstep: every public name and argument of the imported package has its
    stub, with the same names, kinds and defaults. lockstep.torch's stub covers its public names only (a subclass of
    torch's ProcessGroup, whose own stubs do not match torch's runtime), and pybind11 classes have a metaclass and an
    __init__ the stubs leave out: those are allowed (tests/bindings/python/stubtest_allowlist.txt).
The two run at the same time. mypy's cache lives in MYPY_CACHE_DIR (the build tree) between runs; stubtest keeps
none. Neither analyses torch's own sources (follow_imports = skip for torch.*: its names are Any to mypy): what is
checked is lockstep's stubs and the examples' use of lockstep, and analysing torch 1.13 took 35 to 40 s of each run.
"""
import glob
import os
import subprocess
import sys
import tempfile

LIMIT_SECONDS = 900  # each


def main() -> int:
    package_dir, examples_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    try:
        import mypy  # noqa: F401 (only whether it is there)
    except ImportError:
        print("FAIL: mypy is missing: install Debian's mypy (tools/install-deps.sh does)")
        return 1
    env = dict(os.environ, MYPYPATH=package_dir, PYTHONPATH=package_dir)
    examples = sorted(glob.glob(os.path.join(examples_dir, "*.py")))
    if not examples:
        print(f"FAIL: no example in {examples_dir}")
        return 1
    allowlist = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubtest_allowlist.txt")
    # Both at once (neither depends on the other); their outputs are printed one after the other.
    # From a folder without a lockstep of its own: the package is the one on MYPYPATH and PYTHONPATH.
    with tempfile.TemporaryDirectory(prefix="lockstep-typing-") as logs:
        config = os.path.join(logs, "mypy.ini")
        with open(config, "w") as f:
            f.write("[mypy]\n[mypy-torch.*]\nfollow_imports = skip\n")
        checker = [sys.executable, "-m", "mypy", "--config-file", config, "--strict", "--allow-untyped-calls"]
        stubtest = [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", config, "lockstep"]
        commands = [checker + ["--no-error-summary"] + examples, stubtest + ["--allowlist", allowlist]]
        running = []
        for number, command in enumerate(commands):
            log = open(os.path.join(logs, f"{number}.log"), "w+")
            running.append((command, log, subprocess.Popen(command, env=env, cwd=package_dir, stdout=log, stderr=log)))
        status = 0
        for command, log, process in running:
            try:
                returncode = process.wait(timeout=LIMIT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                returncode = process.wait()
                print(f"FAIL: {command[2]} was still running after {LIMIT_SECONDS} s")
            log.seek(0)
            print("$ " + " ".join(command) + "\n" + log.read(), end="", flush=True)
            log.close()
            if returncode != 0:
                print(f"FAIL: {command[2]} exited {returncode}", flush=True)
                status = 1
    if status == 0:
        print(f"PASS: mypy on {len(examples)} examples, stubtest on lockstep")
    return status


if __name__ == "__main__":
    sys.exit(main())
