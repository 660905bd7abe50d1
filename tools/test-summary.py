#!/usr/bin/env python3
"""Reads meson's testlog.json (one JSON object per test) and prints 'N passed, N failed, N skipped'.

Exits 1 when a test failed or the log is missing or empty, 0 otherwise."""
import json
import sys

PASSED = {"OK", "EXPECTEDFAIL"}
SKIPPED = {"SKIP"}


def main(path: str) -> int:
    passed = failed = skipped = 0
    failures = []
    try:
        with open(path, encoding="utf-8") as log:
            for line in log:
                if not line.strip():
                    continue
                result = json.loads(line)
                outcome = result.get("result", "ERROR")
                if outcome in PASSED:
                    passed += 1
                elif outcome in SKIPPED:
                    skipped += 1
                else:
                    failed += 1
                    failures.append(f"{result.get('name', '?')} ({outcome})")
    except FileNotFoundError:
        print(f"test-summary: {path} does not exist: the tests did not run")
        print("0 passed, 1 failed")
        return 1
    total = passed + failed + skipped
    if total == 0:
        print(f"test-summary: {path} holds no results")
        print("0 passed, 1 failed")
        return 1
    for name in failures:
        print(f"FAILED: {name}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/meson-logs/testlog.json"))
