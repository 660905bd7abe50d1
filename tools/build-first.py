#!/usr/bin/env python3
"""Prints what the tests need built first: the outputs (paths relative to BUILDDIR, as ninja names them) of every
target built by default except the benchmark programs (bench/) that no test runs.

Usage: build-first.py BUILDDIR

tools/run-tests.sh builds these before the tests and the rest (`ninja -C BUILDDIR`: the benchmarks, which must still
build) once the plain build's tests are over, while the sanitizer builds' tests run.
"""
import json
import os
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    builddir = os.path.realpath(sys.argv[1])

    def load(name):
        with open(os.path.join(builddir, "meson-info", name), encoding="utf-8") as f:
            return json.load(f)

    tested = {dep for test in load("intro-tests.json") for dep in test["depends"]}
    source = load("meson-info.json")["directories"]["source"]
    bench = os.path.join(os.path.realpath(source), "bench") + os.sep
    first = []
    for target in load("intro-targets.json"):
        if not target["build_by_default"]:
            continue
        defined_in = os.path.realpath(target["defined_in"])
        if defined_in.startswith(bench) and target["id"] not in tested:
            continue
        first += [os.path.relpath(path, builddir) for path in target["filename"]]
    print("\n".join(first))
    return 0


if __name__ == "__main__":
    sys.exit(main())
