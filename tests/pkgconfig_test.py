#!/usr/bin/env python3
"""Installs lockstep into a scratch prefix and builds a program against it with pkg-config alone.

Usage: pkgconfig_test.py BUILD_DIR
Checks the installed layout (shared library with its soversion, headers, the umbrella header, lockstep.pc), compiles
and links a program using only `pkg-config --cflags --libs lockstep`, and runs it.
"""
import glob
import os
import subprocess
import sys
import tempfile

PROGRAM = r"""
#include <lockstep.hpp>
#include <cstdio>
int main() {
    lockstep::Tensor t = lockstep::ops::add(lockstep::Tensor::ones({2, 3}), 1.0);
    std::printf("%s %g\n", t.str().c_str(), lockstep::ops::sum(t).item<double>());
    return 0;
}
"""


def main() -> int:
    build = sys.argv[1]
    with tempfile.TemporaryDirectory() as dest:
        subprocess.run(["meson", "install", "-C", build, "--destdir", dest, "--quiet", "--no-rebuild"], check=True)
        pcs = glob.glob(os.path.join(dest, "**", "lockstep.pc"), recursive=True)
        libs = glob.glob(os.path.join(dest, "**", "liblockstep.so.0"), recursive=True)
        umbrella = glob.glob(os.path.join(dest, "**", "include", "lockstep.hpp"), recursive=True)
        tensor_h = glob.glob(os.path.join(dest, "**", "include", "lockstep", "tensor.hpp"), recursive=True)
        missing = [n for n, found in (("lockstep.pc", pcs), ("liblockstep.so.0", libs), ("lockstep.hpp", umbrella),
                                      ("lockstep/tensor.hpp", tensor_h)) if not found]
        if missing:
            print("FAIL: not installed:", ", ".join(missing))
            return 1
        # Relocate the .pc file into the scratch tree: only its own prefix line changes.
        relocated = os.path.join(dest, "pkgconfig")
        os.makedirs(relocated)
        with open(pcs[0], encoding="utf-8") as f:
            lines = f.read().splitlines()
        lines = [f"prefix={dest}{line[len('prefix='):]}" if line.startswith("prefix=") else line for line in lines]
        with open(os.path.join(relocated, "lockstep.pc"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        env = dict(os.environ, PKG_CONFIG_PATH=relocated)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "lockstep"], env=env,
                               check=True, capture_output=True, text=True).stdout.split()
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
        out = subprocess.run([exe], check=True, capture_output=True, text=True,
                             env=dict(os.environ, LOCKSTEP_CONFIG_FILE="")).stdout.strip()
        expected = "float32[2, 3] cpu 12"
        print(("ok:   " if out == expected else "FAIL: ") + f"the program prints '{out}' (expected '{expected}')")
        return 0 if out == expected else 1


if __name__ == "__main__":
    sys.exit(main())
