#!/usr/bin/env python3
"""Checks what liblockstep_c.so.1 exports and that its ABI matches the committed baseline.

Usage: abi_test.py LIBRARY HEADER_DIR BASELINE [SUPPRESSIONS]
- Exports: every defined dynamic symbol is a lockstep_* entry point of version node LOCKSTEP_C_1, and every function
  that lockstep.h or lockstep_mpi.h declares is exported. The soname is liblockstep_c.so.1.
- ABI: abidiff (Debian's abigail-tools) compares the library, read with the public headers, against the baseline
  (bindings/c/abi/liblockstep_c.so.1.abi). Any difference fails: an incompatible one must not ship under this
  soname, and a compatible one (a new entry point) means the baseline must be regenerated with
  bindings/c/abi/update.sh and committed with the change. The baseline is read from a build against Open MPI; a build
  against another MPI passes SUPPRESSIONS (bindings/c/abi/other_mpi.supp), which leaves out the MPI handle types.
"""
import pathlib
import re
import shutil
import subprocess
import sys


def fail(message: str) -> None:
    print(f"FAIL: {message}")
    sys.exit(1)


def main() -> int:
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    library, header_dir, baseline = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    suppressions = ["--suppressions", sys.argv[4]] if len(sys.argv) == 5 else []

    soname = subprocess.run(["readelf", "-d", library], check=True, capture_output=True, text=True).stdout
    if "Library soname: [liblockstep_c.so.1]" not in soname:
        fail(f"{library} has no soname liblockstep_c.so.1:\n{soname}")

    out = subprocess.run(
        ["nm", "-D", "--defined-only", "--with-symbol-versions", library], check=True, capture_output=True, text=True
    ).stdout
    exported = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        name = parts[2]
        if name == "LOCKSTEP_C_1" or name == "LOCKSTEP_C_1@@LOCKSTEP_C_1":  # the version node itself
            continue
        base, _, version = name.partition("@")
        exported[base] = version.lstrip("@")
    strays = sorted(n for n in exported if not n.startswith("lockstep_"))
    if strays:
        fail(f"symbols outside the C interface are exported: {strays[:20]}")
    unversioned = sorted(n for n, v in exported.items() if v != "LOCKSTEP_C_1")
    if unversioned:
        fail(f"symbols without version node LOCKSTEP_C_1: {unversioned}")

    declared = set()
    for header in ("lockstep.h", "lockstep_mpi.h"):
        text = (header_dir / header).read_text()
        declared |= set(re.findall(r"LOCKSTEP_C_API\s+[^;(]*?\b(lockstep_\w+)\s*\(", text))
    if len(declared) < 60:
        fail(f"only {len(declared)} declarations found in the headers: the pattern no longer matches them")
    missing = sorted(declared - set(exported))
    if missing:
        fail(f"declared in the headers but not exported: {missing}")
    undeclared = sorted(set(exported) - declared)
    if undeclared:
        fail(f"exported but declared in no public header: {undeclared}")
    print(f"exports: {len(exported)} lockstep_* entry points, all declared, all of LOCKSTEP_C_1")

    abidiff = shutil.which("abidiff")
    if abidiff is None:
        fail("abidiff not found: install abigail-tools (tools/install-deps.sh does)")
    r = subprocess.run(
        [abidiff, "--drop-private-types", "--hd2", str(header_dir), *suppressions, baseline, library],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        kind = (
            "an INCOMPATIBLE change"
            if r.returncode & 8
            else ("a compatible change" if r.returncode & 4 else f"an abidiff error (exit {r.returncode})")
        )
        fail(
            f"the ABI differs from the baseline {baseline}: {kind}.\n{r.stdout}{r.stderr}\n"
            "A compatible change (a new entry point) needs the baseline regenerated with "
            "bindings/c/abi/update.sh; an incompatible one must not ship under soname liblockstep_c.so.1."
        )
    print(f"ABI: identical to {baseline}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
