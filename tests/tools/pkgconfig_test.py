#!/usr/bin/env python3
"""Installs lockstep into a scratch prefix and builds a program against it with pkg-config alone.

Usage: pkgconfig_test.py BUILD_DIR [MPI_PC]
Checks the installed layout (shared library with its soversion, headers, the umbrella header, lockstep.pc), compiles
and links a program using only `pkg-config --cflags --libs lockstep`, and runs it: it must catch an exception the
library throws by its type. lockstep.pc must require the MPI the build used (MPI_PC, the pkg-config module meson found
it through, when there is one) and nothing of Eigen, which no installed header may include.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

PROGRAM = r"""
#include <lockstep.hpp>
#include <cstdio>
int main() {
    lockstep::Tensor t = lockstep::ops::add(lockstep::Tensor::ones({2, 3}), 1.0);
    const char* caught = "nothing";
    try {
        (void)lockstep::ops::add(t, lockstep::Tensor::ones({4}));
    } catch (const lockstep::ShapeError&) {
        caught = "ShapeError";
    } catch (const std::exception&) {
        caught = "another exception";
    }
    std::printf("%s %g %s\n", t.str().c_str(), lockstep::ops::sum(t).item<double>(), caught);
    return 0;
}
"""


def main() -> int:
    build = sys.argv[1]
    mpi_pc = sys.argv[2] if len(sys.argv) > 2 else ""
    with tempfile.TemporaryDirectory() as dest:
        subprocess.run(["meson", "install", "-C", build, "--destdir", dest, "--quiet", "--no-rebuild"], check=True)
        pcs = glob.glob(os.path.join(dest, "**", "lockstep.pc"), recursive=True)
        libs = glob.glob(os.path.join(dest, "**", "liblockstep.so.0"), recursive=True)
        umbrella = glob.glob(os.path.join(dest, "**", "include", "lockstep.hpp"), recursive=True)
        tensor_h = glob.glob(os.path.join(dest, "**", "include", "lockstep", "tensor.hpp"), recursive=True)
        missing = [
            n
            for n, found in (
                ("lockstep.pc", pcs),
                ("liblockstep.so.0", libs),
                ("lockstep.hpp", umbrella),
                ("lockstep/tensor.hpp", tensor_h),
            )
            if not found
        ]
        if missing:
            print("FAIL: not installed:", ", ".join(missing))
            return 1
        # The installed program finds its runtime commands (lib/.../lockstep/liblockstep_commands.so, whose run path
        # reaches liblockstep.so one folder up) in the scratch prefix, with no loader path set.
        programs = glob.glob(os.path.join(dest, "**", "bin", "lockstep"), recursive=True)
        if programs:
            env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
            r = subprocess.run([programs[0], "config", "--help"], capture_output=True, text=True, timeout=60, env=env)
            if r.returncode != 0 or "Usage: lockstep config" not in r.stdout:
                print(
                    f"FAIL: the installed lockstep cannot load its commands (exit {r.returncode}): {r.stderr.strip()}"
                )
                return 1
            print("ok:   the installed lockstep loads its runtime commands from its own prefix")
        else:
            print("FAIL: not installed: bin/lockstep")
            return 1
        # The installed include tree is the public surface only: the umbrella header and lockstep/*.hpp.
        include_dir = os.path.dirname(umbrella[0])
        problems = []
        for path in glob.glob(os.path.join(include_dir, "**", "*"), recursive=True):
            rel = os.path.relpath(path, include_dir)
            if os.path.isdir(path):
                if rel != "lockstep":
                    problems.append(f"unexpected folder include/{rel}")
                continue
            if rel not in ("lockstep.hpp", "lockstep.h", "lockstep_mpi.h") and os.path.dirname(rel) != "lockstep":
                problems.append(f"unexpected file include/{rel}")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if re.search(r"#\s*include\s*[<\"](Eigen|unsupported/Eigen)", text):
                problems.append(f"include/{rel} includes Eigen")
            for quoted in re.findall(r'#\s*include\s*"([^"]+)"', text):
                if not os.path.isfile(os.path.join(os.path.dirname(path), quoted)):
                    problems.append(f'include/{rel} includes "{quoted}", a header that is not installed')
        # Relocate the .pc file into the scratch tree: only its own prefix line changes.
        relocated = os.path.join(dest, "pkgconfig")
        os.makedirs(relocated)
        with open(pcs[0], encoding="utf-8") as f:
            lines = f.read().splitlines()
        lines = [f"prefix={dest}{line[len('prefix='):]}" if line.startswith("prefix=") else line for line in lines]
        with open(os.path.join(relocated, "lockstep.pc"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        env = dict(os.environ, PKG_CONFIG_PATH=relocated)
        requires = subprocess.run(
            ["pkg-config", "--print-requires", "--print-requires-private", "lockstep"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        if any("eigen" in r.lower() for r in requires):
            problems.append(f"lockstep.pc passes Eigen on: requires {requires}")
        if mpi_pc and mpi_pc not in requires:
            problems.append(f"lockstep.pc does not require {mpi_pc}, the MPI of this build: requires {requires}")
        libs_flags = subprocess.run(
            ["pkg-config", "--libs", "lockstep"], env=env, check=True, capture_output=True, text=True
        ).stdout.split()
        if "-lmpi_cxx" in libs_flags:
            problems.append(f"lockstep.pc links MPI's C++ bindings, which lockstep turns off: {' '.join(libs_flags)}")
        if problems:
            for p in problems:
                print("FAIL:", p)
            return 1
        print(f"ok:   installed headers are the public ones only; lockstep.pc requires {' '.join(requires)}")
        flags = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "lockstep"], env=env, check=True, capture_output=True, text=True
        ).stdout.split()
        source = os.path.join(dest, "user.cpp")
        with open(source, "w", encoding="utf-8") as f:
            f.write(PROGRAM)
        exe = os.path.join(dest, "user")
        libdir = os.path.dirname(libs[0])
        compile_cmd = ["g++", source, "-o", exe, *flags, f"-Wl,-rpath,{libdir}"]
        result = subprocess.run(compile_cmd, capture_output=True, text=True)
        if result.returncode != 0:
            print("FAIL: compiling against the installed lockstep:", " ".join(compile_cmd))
            print(result.stderr[-4000:])
            return 1
        out = subprocess.run(
            [exe], check=True, capture_output=True, text=True, env=dict(os.environ, LOCKSTEP_CONFIG_FILE="")
        ).stdout.strip()
        expected = "float32[2, 3] cpu 12 ShapeError"
        print(("ok:   " if out == expected else "FAIL: ") + f"the program prints '{out}' (expected '{expected}')")
        if out != expected:
            return 1
        return check_c_interface(dest, relocated) or check_build_tree(build, dest)


C_PROGRAM = r"""
#include <lockstep.h>
#include <stdio.h>
int main(void) {
    lockstep_tensor_t t = NULL;
    int64_t shape[1] = {3};
    lockstep_device_t cpu = {LOCKSTEP_DEVICE_CPU, 0};
    int32_t major = 0, minor = 0, patch = 0;
    lockstep_status_t s = lockstep_tensor_empty(shape, 1, 42, cpu, &t);
    lockstep_get_version(&major, &minor, &patch);
    printf("%d.%d.%d %s\n", (int)major, (int)minor, (int)patch, lockstep_status_string(s));
    return 0;
}
"""


def check_c_interface(dest: str, relocated: str) -> int:
    """liblockstep_c.so.1 and lockstep-c.pc installed; a C99 program builds from the .pc file alone and runs."""
    pcs = glob.glob(os.path.join(dest, "**", "lockstep-c.pc"), recursive=True)
    libs = glob.glob(os.path.join(dest, "**", "liblockstep_c.so.1"), recursive=True)
    if not pcs or not libs:
        print("FAIL: not installed:", "lockstep-c.pc" if not pcs else "liblockstep_c.so.1")
        return 1
    with open(pcs[0], encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines = [f"prefix={dest}{line[len('prefix='):]}" if line.startswith("prefix=") else line for line in lines]
    with open(os.path.join(relocated, "lockstep-c.pc"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    env = dict(os.environ, PKG_CONFIG_PATH=relocated)
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "lockstep-c"], env=env, check=True, capture_output=True, text=True
    ).stdout.split()
    source = os.path.join(dest, "user.c")
    with open(source, "w", encoding="utf-8") as f:
        f.write(C_PROGRAM)
    exe = os.path.join(dest, "user_c")
    libdir = os.path.dirname(libs[0])
    cmd = [
        "gcc",
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-pedantic",
        "-Werror",
        source,
        "-o",
        exe,
        *flags,
        f"-Wl,-rpath,{libdir}",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        print("FAIL: compiling a C99 program against the installed lockstep-c:", " ".join(cmd))
        print(result.stderr[-4000:])
        return 1
    # The executable's runpath does not reach liblockstep_c's own dependency (liblockstep.so.0, installed beside it,
    # where the system's loader finds both after ldconfig): the loader path stands in for that here.
    out = subprocess.run(
        [exe],
        check=True,
        capture_output=True,
        text=True,
        env=dict(os.environ, LOCKSTEP_CONFIG_FILE="", LD_LIBRARY_PATH=libdir),
    ).stdout.strip()
    version = subprocess.run(
        ["pkg-config", "--modversion", "lockstep-c"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    expected = f"{version} LOCKSTEP_ERROR_DTYPE"
    print(
        ("ok:   " if out == expected else "FAIL: ")
        + f"the C program prints '{out}' (expected '{expected}': lockstep-c.pc's version is the library's)"
    )
    return 0 if out == expected else 1


def check_build_tree(build: str, scratch: str) -> int:
    """From a build tree, as docs/c_api.md and README.md say: PKG_CONFIG_PATH=<build>/meson-uninstalled, and the
    build's library folders as run paths. Both the C++ and the C program compile and run."""
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(os.path.abspath(build), "meson-uninstalled"))
    failures = 0
    for module, source_text, compiler, name, expected_end in (
        ("lockstep", PROGRAM, "g++", "tree.cpp", "ShapeError"),
        ("lockstep-c", C_PROGRAM, "gcc", "tree.c", "LOCKSTEP_ERROR_DTYPE"),
    ):
        result = subprocess.run(["pkg-config", "--cflags", "--libs", module], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            print(f"FAIL: pkg-config {module} from the build tree: {result.stderr.strip()}")
            failures += 1
            continue
        flags = result.stdout.split()
        rpaths = [f"-Wl,-rpath,{flag[2:]}" for flag in flags if flag.startswith("-L")]
        source = os.path.join(scratch, name)
        with open(source, "w", encoding="utf-8") as f:
            f.write(source_text)
        exe = os.path.join(scratch, name + ".out")
        result = subprocess.run([compiler, source, "-o", exe, *flags, *rpaths], capture_output=True, text=True)
        if result.returncode != 0:
            print(f"FAIL: compiling against the build tree with pkg-config {module}: {result.stderr[-3000:]}")
            failures += 1
            continue
        out = subprocess.run(
            [exe], capture_output=True, text=True, env=dict(os.environ, LOCKSTEP_CONFIG_FILE=""), timeout=60
        ).stdout.strip()
        ok = out.endswith(expected_end)
        print(("ok:   " if ok else "FAIL: ") + f"a program built from the build tree with {module} prints '{out}'")
        failures += 0 if ok else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
