#!/usr/bin/env python3
"""tools/test-summary.py on real meson-style testlog.json files written here: the counts, a missing or empty log
counted as a failure, a sanitizer report turning a pass into a failure, and the digest of a failed test's output
printed just above the summary line (the part of a CI log that is shown).

Usage: test_summary_test.py TEST_SUMMARY_PY"""
import json
import os
import subprocess
import sys
import tempfile

FAILURES = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def write_log(path, results):
    with open(path, "w", encoding="utf-8") as f:
        for name, result, stdout in results:
            f.write(json.dumps({"name": name, "result": result, "stdout": stdout, "stderr": ""}) + "\n")


def summarise(script, *args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.splitlines()


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        plain, asan, empty = (os.path.join(tmp, n) for n in ("plain.json", "asan.json", "empty.json"))
        noisy = "\n".join(f"ok:   check {i}" for i in range(50))
        write_log(
            plain,
            [
                ("a", "OK", "fine"),
                ("b", "SKIP", ""),
                ("c", "FAIL", noisy + "\nFAIL: the allreduce is right\n$ salloc x -> 1\nlast words\n"),
                ("d", "TIMEOUT", "waiting\n"),
            ],
        )
        write_log(asan, [("e", "OK", "==1==ERROR\nSUMMARY: AddressSanitizer: heap-use-after-free\n")])
        open(empty, "w").close()

        rc, lines = summarise(script, plain, f"asan={asan}")
        check(rc == 1, "a failed test makes the exit status 1")
        check(lines[-1] == "1 passed, 3 failed, 1 skipped", f"the last line counts every result ({lines[-1]!r})")
        check("FAILED: asan: e (OK, BUT A SANITIZER REPORTED)" in lines, "a pass with a sanitizer report failed")
        check("FAILED: d (TIMEOUT)" in lines, "a timeout is a failure")
        why = lines.index("--- why c failed:") if "--- why c failed:" in lines else -1
        check(why >= 0, "a failed test's output is digested")
        block = lines[why + 1 : lines.index("--- why d failed:")] if why >= 0 and "--- why d failed:" in lines else []
        check(block[:1] == ["  FAIL: the allreduce is right"], f"the check's own FAIL line comes first ({block[:1]})")
        check(
            "  last words" in block and len(block) <= 20, f"the last lines follow, and no more than 20 ({len(block)})"
        )
        check(lines.index("FAILED: c (FAIL)") > why, "the digest comes before the FAILED lines and the summary")

        rc, lines = summarise(script, empty, os.path.join(tmp, "missing.json"))
        check(rc == 1 and lines[-1] == "0 passed, 2 failed, 0 skipped", "an empty and a missing log each fail once")

        write_log(plain, [("a", "OK", ""), ("b", "EXPECTEDFAIL", "")])
        rc, lines = summarise(script, plain)
        check(
            rc == 0 and lines[-1] == "2 passed, 0 failed, 0 skipped" and not any("why" in line for line in lines),
            "all passing: exit 0 and no digest",
        )
    print(f"{len(FAILURES)} failed" if FAILURES else "all checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
