"""Runs the example of bindings/python/README.md's "Non-blocking operations" as it is written there, under mpirun, so
that the documented example cannot drift from the package.

Run by run_job.py: mpirun -n 2 python3 readme_example_test.py PATH/TO/bindings/python/README.md
"""
import re
import sys

import lockstep
from harness import run

SECTION = "## Non-blocking operations"


def example(readme):
    """The first ```python block of the section."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    start = text.index(SECTION)
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match is not None, f"no python block after {SECTION!r} in {readme}"
    return match.group(1)


def main():
    source = example(sys.argv[1])
    exec(compile(source, "README.md example", "exec"), {"__name__": "__main__"})
    return lockstep.rank(), lockstep.size()


if __name__ == "__main__":
    run("readme_example", main)
