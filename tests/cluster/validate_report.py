#!/usr/bin/env python3
"""Runs a `lockstep hostcheck --json` command (or reads a JSON file) and validates the document against the
published JSON Schema, docs/hostcheck.schema.json, with the jsonschema library.

usage: validate_report.py SCHEMA [--exit N] -- COMMAND [ARGS...]
       validate_report.py SCHEMA --file REPORT.json

Exit status 0 when the document validates (and COMMAND exited with N, when given), 1 otherwise, 77 (skipped) when
the jsonschema module is missing.
"""
import json
import subprocess
import sys


def main(argv: list[str]) -> int:
    try:
        import jsonschema
    except ImportError:
        print("validate_report.py: skipped: python3-jsonschema is not installed", file=sys.stderr)
        return 77
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    rest = argv[2:]
    expected_exit = None
    if rest[0] == "--file":
        with open(rest[1], encoding="utf-8") as f:
            text = f.read()
    else:
        if rest[0] == "--exit":
            expected_exit = int(rest[1])
            rest = rest[2:]
        if not rest or rest[0] != "--":
            print(__doc__, file=sys.stderr)
            return 2
        run = subprocess.run(rest[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
        text = run.stdout
        if expected_exit is not None and run.returncode != expected_exit:
            print(
                f"validate_report.py: exit code {run.returncode}, expected {expected_exit}\n{run.stderr}",
                file=sys.stderr,
            )
            return 1
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"validate_report.py: not JSON: {e}\n{text[:2000]}", file=sys.stderr)
        return 1
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(document), key=lambda e: list(e.path))
    for e in errors:
        print(f"validate_report.py: {'/'.join(str(p) for p in e.path) or '(root)'}: {e.message}", file=sys.stderr)
    if errors:
        return 1
    print(f"validate_report.py: valid against {schema.get('title')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
