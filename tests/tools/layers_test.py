"""The layer table, enforced twice: tools/check-layers.py passes on the tree and names a planted backwards include
by file and line; and each layer's include root in the build tree (build/layers/<layer>) shows the headers of its own
and lower layers only, so a backwards include does not compile.

Usage: layers_test.py SOURCE_ROOT BUILD_ROOT C++_COMPILER"""

import os
import shutil
import subprocess
import sys
import tempfile

source_root, build_root, compiler = sys.argv[1], sys.argv[2], sys.argv[3]
checker = os.path.join(source_root, "tools", "check-layers.py")
failures = []


def expect(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def run_checker(root):
    return subprocess.run([sys.executable, checker, root], capture_output=True, text=True, timeout=120)


# 1. The tree as it is.
r = run_checker(source_root)
expect(r.returncode == 0, f"check-layers passes on the tree (exit {r.returncode}){r.stdout}{r.stderr}")

# 2. A copy of the tree with two includes planted: one layer up, and the runtime into a tool that must run without it.
with tempfile.TemporaryDirectory() as tmp:
    for top in ("base", "runtime", "kernels", "logging", "collectives", "bindings", "tools"):
        if os.path.isdir(os.path.join(source_root, top)):
            shutil.copytree(
                os.path.join(source_root, top),
                os.path.join(tmp, top),
                ignore=shutil.ignore_patterns("build*", "*.png", "*.abi"),
                symlinks=True,
            )
    planted = {
        "runtime/tensor.cpp": "#include <lockstep/communicator.hpp>\n",
        "kernels/dispatch.cpp": '#include "../logging/lockstep/logging.hpp"\n',
        "logging/sinks.cpp": "#include <lockstep/kernels.hpp>\n",
        "tools/hostcheck/hostfile.cpp": "#include <lockstep/config.hpp>\n",
    }
    lines = {}
    for rel, text in planted.items():
        path = os.path.join(tmp, rel)
        with open(path, encoding="utf-8") as f:
            body = f.readlines()
        lines[rel] = len(body) + 1
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    r = run_checker(tmp)
    expect(r.returncode == 1, f"check-layers fails on planted backwards includes (exit {r.returncode})")
    for rel, line in lines.items():
        expect(f"{rel}:{line}: #include" in r.stdout, f"the report names {rel}:{line}\n{r.stdout}")
    expect(r.stdout.count("\n") == len(planted), f"only the planted includes are reported:\n{r.stdout}")


# 3. The build's include roots: what each layer's compilation can see.
def visible(layer, header):
    source = f"#if !__has_include(<lockstep/{header}>)\n#error not visible\n#endif\n"
    r = subprocess.run(
        [compiler, "-std=c++20", "-fsyntax-only", "-x", "c++", "-", "-I", os.path.join(build_root, "layers", layer)],
        input=source,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.returncode == 0


for layer, sees, blind in [
    ("runtime", ["tensor.hpp", "config.hpp", "build_config.hpp"], ["kernels.hpp", "logging.hpp", "communicator.hpp"]),
    ("kernels", ["tensor.hpp", "kernels.hpp"], ["logging.hpp", "communicator.hpp"]),
    ("logging", ["config.hpp", "logging.hpp"], ["kernels.hpp", "communicator.hpp"]),
    ("collectives", ["tensor.hpp", "kernels.hpp", "logging.hpp", "communicator.hpp"], []),
]:
    for header in sees:
        expect(visible(layer, header), f"{layer} compiles against <lockstep/{header}>")
    for header in blind:
        expect(not visible(layer, header), f"{layer} cannot include <lockstep/{header}>")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
