#!/usr/bin/env python3
"""Prints the order in which to hand tests to `meson test`: first every test that may run beside others, then the ones
that must run alone (is_parallel: false), each group in the order given (all of BUILDDIR's tests, in meson's order,
when no name is given).

Usage: test-order.py BUILDDIR [NAME...]

meson test runs named tests in the order of its arguments, and a test that must run alone waits until every test
before it has ended. Interleaved, as the tests are defined, the tests that may run side by side mostly meet tests
that must run alone and run one at a time all the same; grouped first, they share the processors (meson's -j).
Exits 2 when a NAME is not one of BUILDDIR's tests.
"""
import json
import os
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    builddir, wanted = sys.argv[1], sys.argv[2:]
    with open(os.path.join(builddir, "meson-info", "intro-tests.json"), encoding="utf-8") as f:
        tests = json.load(f)
    parallel = {t["name"]: t["is_parallel"] for t in tests}
    names = wanted or [t["name"] for t in tests]
    unknown = [name for name in names if name not in parallel]
    if unknown:
        print(f"test-order.py: no such test in {builddir}: {' '.join(unknown)}", file=sys.stderr)
        return 2
    ordered = [name for name in names if parallel[name]] + [name for name in names if not parallel[name]]
    print("\n".join(ordered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
