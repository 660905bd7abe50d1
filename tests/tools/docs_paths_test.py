"""Every repository path the docs name exists: each path in inline code or in a table cell of README.md, docs/*.md and
bindings/python/README.md that starts with one of the tree's top folders is looked up from the source root; a missing
one is reported with its doc and line. Placeholders (a path containing '<', '*' or '...') and paths under a folder that
.gitignore names from the root (bench/results/, where the benchmarks write) are skipped; `a/{b,c}.hpp` and
`a/b.hpp/.cpp` stand for each file they list. Then the check is run on a copy of the docs with a path planted in
one of them, and must name that doc, that line and that path.

Usage: docs_paths_test.py SOURCE_ROOT"""

import glob
import os
import re
import shutil
import sys
import tempfile

TOP_FOLDERS = (
    "base",
    "runtime",
    "kernels",
    "logging",
    "collectives",
    "bindings",
    "tools",
    "tests",
    "examples",
    "bench",
    "docs",
    "hostfiles",
)
# A path starts at a top folder that is not itself part of a longer path or word (build/tools/lockstep is the build
# tree's, not a source path); it runs over path characters and whole {a,b} groups.
PATH_RE = re.compile(r"(?<![\w./~$-])(?:%s)/(?:[\w.<>*+-]|/|\{[^}\s]*\})*" % "|".join(TOP_FOLDERS))
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
FENCE_RE = re.compile(r"^\s*(```|~~~)")


def doc_files(root):
    names = ["README.md", os.path.join("bindings", "python", "README.md")]
    names += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    return [n for n in names if os.path.isfile(os.path.join(root, n))]


def expand(path):
    """The files a written path stands for: {a,b} groups and a trailing /.ext list (watchdog.hpp/.cpp)."""
    m = re.search(r"\{([^}]*)\}", path)
    if m:
        out = []
        for alt in m.group(1).split(","):
            out += expand(path[: m.start()] + alt + path[m.end() :])
        return out
    m = re.fullmatch(r"(.*?)(\.\w+)((?:/\.\w+)+)", path)
    if m:
        return [m.group(1) + ext for ext in [m.group(2)] + m.group(3).split("/")[1:]]
    return [path]


def candidates(line):
    """The text of a line that may name paths: its inline code spans, and its cells when it is a table row."""
    texts = [m.group(2) for m in CODE_SPAN_RE.finditer(line)]
    if line.lstrip().startswith("|"):
        texts += line.strip().strip("|").split("|")
    return texts


def output_folders(tree_root):
    """The folders .gitignore names from the root: what programs write there is not in the tree."""
    try:
        with open(os.path.join(tree_root, ".gitignore"), encoding="utf-8") as f:
            entries = [line.strip() for line in f]
    except FileNotFoundError:
        return ()
    return tuple(e[1:] for e in entries if e.startswith("/") and e.endswith("/") and "*" not in e)


def missing_paths(docs_root, tree_root):
    """(doc, line number, path) for every path named in the docs under docs_root that tree_root does not have."""
    missing = []
    outputs = output_folders(tree_root)
    for doc in doc_files(docs_root):
        with open(os.path.join(docs_root, doc), encoding="utf-8") as f:
            lines = f.read().split("\n")
        in_fence = False
        for number, line in enumerate(lines, start=1):
            if FENCE_RE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue  # folder listings in code blocks name files relative to their folder
            seen = set()
            for text in candidates(line):
                for written in PATH_RE.findall(text):
                    written = written.rstrip(".")
                    if "<" in written or "*" in written or "..." in written or written.startswith(outputs):
                        continue
                    if written in seen:
                        continue
                    seen.add(written)
                    for path in expand(written):
                        if not os.path.exists(os.path.join(tree_root, path)):
                            missing.append((doc, number, path))
    return missing


def report(missing):
    return "".join(f"{doc}:{number}: {path} does not exist in the source tree\n" for doc, number, path in missing)


def main():
    source_root = sys.argv[1]
    failures = []

    # 1. The docs as they are.
    missing = missing_paths(source_root, source_root)
    if missing:
        failures.append("the docs name paths that do not exist:\n" + report(missing))
    else:
        print(f"ok   every path named in {len(doc_files(source_root))} docs exists")

    # 2. A copy of the docs with one bad path planted in a paragraph and one in a table cell, next to a placeholder
    #    and a brace list that must pass: exactly the two bad paths are named, each with its doc and line.
    with tempfile.TemporaryDirectory() as tmp:
        for doc in doc_files(source_root):
            os.makedirs(os.path.join(tmp, os.path.dirname(doc)), exist_ok=True)
            shutil.copy(os.path.join(source_root, doc), os.path.join(tmp, doc))
        planted = os.path.join(tmp, "docs", "architecture.md")
        with open(planted, encoding="utf-8") as f:
            count = f.read().count("\n")
        with open(planted, "a", encoding="utf-8") as f:
            f.write(
                "\nA new file, `collectives/ops/no_such_op.cpp`, next to `collectives/ops/<name>.cpp` and"
                " `collectives/watchdog/{board.hpp,state.hpp}`.\n"
                "\n| folder | what |\n|---|---|\n| runtime/no_such_folder/ | nothing |\n"
            )
        got = [m for m in missing_paths(tmp, source_root) if m not in missing]
        want = [
            ("docs/architecture.md", count + 2, "collectives/ops/no_such_op.cpp"),
            ("docs/architecture.md", count + 6, "runtime/no_such_folder/"),
        ]
        if got == want:
            print("ok   the planted paths are named with their doc and line:\n" + report(got), end="")
        else:
            failures.append(f"planted paths: expected\n{report(want)}got\n{report(got)}")

    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
