#!/usr/bin/env python3
"""Reads meson's testlog.json files (one JSON object per test) and prints 'N passed, N failed, N skipped' over all.

Usage: test-summary.py [LABEL=]TESTLOG.json ...
Each argument is the results file of one build directory; a LABEL (e.g. 'asan') prefixes that build's per-test lines
so that a failure under a sanitizer is not mistaken for one in the plain build. A missing or empty file counts as one
failure: a build whose tests never ran must not look green. A test whose output holds a sanitizer's report counts as
failed whatever its exit status.

Exits 1 when a test failed or a log is missing or empty, 0 otherwise."""
import json
import re
import sys

PASSED = {"OK", "EXPECTEDFAIL"}
SKIPPED = {"SKIP"}
# The last line of every AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer and ThreadSanitizer report. A
# test that passes with one in its output still failed: a rank's report may be lost behind an exit code that the test
# expected anyway (a hang test expects a non-zero exit).
SANITIZER_REPORT = re.compile(r"^SUMMARY: (Address|Leak|UndefinedBehavior|Thread)Sanitizer", re.MULTILINE)
# Lines of a failed test's output worth showing first: a check's own verdict, an error, a timeout.
TELLING = re.compile(r"^(FAIL|ERROR|Traceback)|error:|not ready|timed out|Sanitizer", re.IGNORECASE)
DIGEST_TELLING, DIGEST_TAIL, DIGEST_WIDTH = 12, 8, 300
digests: list[list[str]] = []


def split_argument(argument: str) -> tuple[str, str]:
    label, sep, path = argument.partition("=")
    # A path may itself hold '=': only a plain word before the first '=' is a label.
    if sep and label and "/" not in label:
        return label, path
    return "", argument


def digest(name: str, output: str) -> list[str]:
    """A few lines of a failed test's output that say why: its own FAIL lines and error lines, then its last lines.
    CI shows only the end of the run's output, so this goes just above the summary line."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    telling = [line for line in lines if TELLING.search(line)][:DIGEST_TELLING]
    tail = [line for line in lines[-DIGEST_TAIL:] if line not in telling]
    return [f"--- why {name} failed:"] + [f"  {line[:DIGEST_WIDTH]}" for line in telling + tail]


def read_log(label: str, path: str) -> tuple[int, int, int, list[str]]:
    prefix = f"{label}: " if label else ""
    passed = failed = skipped = 0
    failures = []
    try:
        with open(path, encoding="utf-8") as log:
            for line in log:
                if not line.strip():
                    continue
                result = json.loads(line)
                outcome = result.get("result", "ERROR")
                output = (result.get("stdout") or "") + (result.get("stderr") or "")
                if outcome in PASSED and SANITIZER_REPORT.search(output):
                    outcome = "OK, BUT A SANITIZER REPORTED"
                if outcome in PASSED:
                    passed += 1
                elif outcome in SKIPPED:
                    skipped += 1
                else:
                    failed += 1
                    failures.append(f"{prefix}{result.get('name', '?')} ({outcome})")
                    digests.append(digest(f"{prefix}{result.get('name', '?')}", output))
    except FileNotFoundError:
        print(f"test-summary: {prefix}{path} does not exist: the tests did not run")
        return 0, 1, 0, [f"{prefix}{path} (MISSING)"]
    if passed + failed + skipped == 0:
        print(f"test-summary: {prefix}{path} holds no results")
        return 0, 1, 0, [f"{prefix}{path} (EMPTY)"]
    print(f"test-summary: {prefix}{passed} passed, {failed} failed, {skipped} skipped ({path})")
    return passed, failed, skipped, failures


def main(arguments: list[str]) -> int:
    passed = failed = skipped = 0
    failures = []
    for argument in arguments:
        p, f, s, names = read_log(*split_argument(argument))
        passed, failed, skipped = passed + p, failed + f, skipped + s
        failures += names
    for lines in digests:
        print("\n".join(lines))
    for name in failures:
        print(f"FAILED: {name}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["build/meson-logs/testlog.json"]))
