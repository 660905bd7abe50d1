#!/usr/bin/env python3
"""Checks that every MPI function liblockstep_check.so intercepts in C has its Fortran entry points too.

Usage: entry_points_test.py LIBRARY F08_PROGRAM
F08_PROGRAM is a program built with `use mpi_f08`: Open MPI's binding libraries are those it loads (ldd). For each C
function MPI_Xxx the library exports, where Open MPI's Fortran bindings have it (libmpi_mpifh.so defines ompi_xxx_f),
the library must export the four manglings a Fortran compiler may call (mpi_xxx, mpi_xxx_, mpi_xxx__, MPI_XXX) and
the symbol through which Open MPI's mpi_f08 module reaches it, read from libmpi_usempif08.so's undefined symbols
(ompi_xxx_f, or pmpi_xxx_ where the module converts LOGICALs itself). All of them must be one function.
"""
import re
import subprocess
import sys

# Intercepted C functions that keep Open MPI's own Fortran binding, and why.
KEPT = {
    # Open MPI marks an op made from Fortran as one whose function takes Fortran arguments, a flag that only its own
    # binding can set: such an op reaches the checks as "a user op" (every one compares equal to every other).
    "MPI_Op_create": "the op's function takes Fortran arguments",
}


def dynamic_symbols(library, defined):
    """name -> address (defined) or the set of undefined names."""
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", flag, library], check=True, capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        fields = line.split()
        if defined and len(fields) == 3:
            symbols[fields[2].split("@")[0]] = fields[0]
        elif not defined and fields:
            symbols[fields[-1].split("@")[0]] = None
    return symbols


def binding_library(program, name):
    """The path of the library `name` (libmpi_mpifh.so) that ldd resolves for `program`."""
    out = subprocess.run(["ldd", program], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0].startswith(name + ".") and "=>" in fields:
            return fields[fields.index("=>") + 1]
    raise SystemExit(f"{program} does not load {name}:\n{out}")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    library, program = sys.argv[1:]
    mpifh = binding_library(program, "libmpi_mpifh.so")
    usempif08 = binding_library(program, "libmpi_usempif08.so")
    ours = dynamic_symbols(library, defined=True)
    fortran_bindings = dynamic_symbols(mpifh, defined=True)
    f08_calls = dynamic_symbols(usempif08, defined=False)

    intercepted = sorted(name for name in ours if re.fullmatch(r"MPI_[A-Z][a-z0-9_]+", name))
    problems, covered = [], []
    for c_name in intercepted:
        stem = c_name[len("MPI_") :].lower()
        if f"ompi_{stem}_f" not in fortran_bindings or c_name in KEPT:
            continue  # no Fortran binding in Open MPI, or Open MPI's is kept
        f08_symbol = f"pmpi_{stem}_" if f"pmpi_{stem}_" in f08_calls else f"ompi_{stem}_f"
        wanted = [f"mpi_{stem}", f"mpi_{stem}_", f"mpi_{stem}__", c_name.upper(), f"ompi_{stem}_f", f08_symbol]
        missing = [name for name in wanted if name not in ours]
        if missing:
            problems.append(f"{c_name} is intercepted but not its Fortran entry points {', '.join(missing)}")
            continue
        if len({ours[name] for name in wanted}) != 1:
            problems.append(f"{c_name}: its Fortran entry points are not one function")
            continue
        covered.append(c_name)
    if not intercepted:
        problems.append(f"{library} exports no MPI_ function")
    print(f"{len(covered)} intercepted MPI functions have their Fortran entry points: {' '.join(covered)}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
