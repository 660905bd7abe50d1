#!/usr/bin/env python3
"""Checks every #include of the tree against lockstep's layer table (docs/architecture.md, "Layers").

A layer may include its own headers and those of the layers below it, never a layer above. Each include is resolved
to the folder that holds the header: <lockstep/NAME.hpp> to the layer whose lockstep/ folder has NAME.hpp,
<lockstep/base/...> to base, <lockstep/internal/...> to the runtime's shared private headers, <lockstep.h> to the C
bindings, "relative/paths" to the folder they name; system and third-party headers are not the table's business.

Usage: check-layers.py [ROOT]   (default: the repository this script lives in)
Exit status: 0 no backwards include; 1 some, each named as FILE:LINE with the rule it breaks; 2 usage error.
"""

import os
import re
import sys

# Layer -> the layers it may include (itself included). Bottom to top.
ALLOWED = {
    "base": {"base"},
    "runtime": {"base", "runtime"},
    "kernels": {"base", "runtime", "kernels"},
    "logging": {"base", "runtime", "logging"},
    "collectives": {"base", "runtime", "kernels", "logging", "collectives"},
    "bindings": {"base", "runtime", "kernels", "logging", "collectives", "bindings"},
    "check": {"base", "runtime", "kernels", "logging", "collectives", "bindings", "check"},
}
# Programs above every layer: anything.
TOP = {"tools", "examples", "bench", "tests"}
# Tools that must run where the runtime cannot load (a broken MPI): base, the runtime's header-only error classes, and
# one another.
STANDALONE_TOOLS = ("tools/hostcheck/", "tools/mpi_launcher/")
STANDALONE_MAY_INCLUDE = STANDALONE_TOOLS + ("tools/subcommand.hpp", "tools/help_format.hpp", "tools/terminal.hpp")
STANDALONE_HEADERS = {"lockstep/errors.hpp", "lockstep/export.hpp"}
SOURCE_SUFFIXES = (".c", ".h", ".cpp", ".hpp", ".cu", ".cuh")
SKIP_DIRS = {".git", "subprojects", "__pycache__", "node_modules"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
C_HEADERS = {"lockstep.h": "bindings", "lockstep_mpi.h": "bindings"}


def layer_of(rel_path):
    """The layer a path of the tree belongs to, or None outside every layer."""
    top = rel_path.split("/", 1)[0]
    if top in ALLOWED or top in TOP:
        return top
    return None


def public_headers(root):
    """lockstep/NAME -> the layer whose folder holds it (its lockstep/ include folder)."""
    owners = {}
    for layer in ALLOWED:
        base = os.path.join(root, layer)
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            rel = os.path.relpath(folder, root).replace(os.sep, "/")
            marker = rel.find("/lockstep")
            if marker < 0 or not (rel.endswith("/lockstep") or "/lockstep/" in rel + "/"):
                continue
            inside = rel[marker + 1 :]  # lockstep/..., as included
            for name in files:
                if name.endswith(SOURCE_SUFFIXES):
                    owners.setdefault(f"{inside}/{name}", layer)
    owners["lockstep/build_config.hpp"] = "runtime"  # generated from runtime/lockstep/meson.build
    owners["lockstep.hpp"] = "collectives"  # the umbrella: every layer's public headers
    return owners


def resolve(root, including, quote, name, owners):
    """(layer, path in the tree or None) of the included header; layer None when it is not lockstep's."""
    if name in owners:
        return owners[name], None
    if name in C_HEADERS:
        return C_HEADERS[name], None
    if name.startswith("lockstep/base/"):
        return "base", None
    if name.startswith("lockstep/internal/"):
        return "runtime", None
    if quote == '"':
        path = os.path.normpath(os.path.join(os.path.dirname(including), name)).replace(os.sep, "/")
        if os.path.exists(os.path.join(root, path)):
            return layer_of(path), path
    # Source-root includes of white-box tests (<collectives/watchdog.hpp>).
    first = name.split("/", 1)[0]
    if "/" in name and (first in ALLOWED) and os.path.exists(os.path.join(root, name)):
        return first, name
    return None, None


def source_files(root):
    for top in sorted(set(ALLOWED) | TOP):
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def check(root):
    owners = public_headers(root)
    problems = []
    for rel in source_files(root):
        layer = layer_of(rel)
        allowed, standalone = ALLOWED.get(layer), rel.startswith(STANDALONE_TOOLS)
        if standalone:
            allowed = {"base"}
        if allowed is None:
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target, path = resolve(root, rel, m.group(1), m.group(2), owners)
                if target is None or target in allowed:
                    continue
                if standalone and (m.group(2) in STANDALONE_HEADERS or (path or "").startswith(STANDALONE_MAY_INCLUDE)):
                    continue
                what = f"{rel}:{number}: #include {m.group(1)}{m.group(2)}{'>' if m.group(1) == '<' else chr(34)}"
                if standalone:
                    problems.append(
                        f"{what}: {target}; {rel.rsplit('/', 1)[0]}/ runs without the runtime and may"
                        f" include only base, {', '.join(sorted(STANDALONE_HEADERS))} and"
                        f" {', '.join(STANDALONE_MAY_INCLUDE)}"
                    )
                    continue
                may = ", ".join(sorted(allowed, key=list(ALLOWED).index))
                problems.append(f"{what}: {target} is above {layer}; {rel.rsplit('/', 1)[0]}/ may include {may}")
    return problems


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isdir(root):
        print(f"check-layers: {root}: not a folder", file=sys.stderr)
        return 2
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(
            f"check-layers: {len(problems)} include(s) point up the layer table; move the code down or the include"
            ' out (docs/architecture.md, "Layers")',
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
