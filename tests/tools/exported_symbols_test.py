#!/usr/bin/env python3
"""Checks what liblockstep.so exports: the public API, and none of the library's internals.

Usage: exported_symbols_test.py LIBRARY
The library is compiled with hidden visibility and exports what the public headers mark LOCKSTEP_API. This reads its
dynamic symbol table (`nm -D --defined-only`, demangled) and fails when an internal symbol is exported (namespace
detail, the kernels' backends, the communicator's implementation) or when a public entry point, or the typeinfo that
lets a program catch a lockstep exception by type, is missing.
"""
import re
import subprocess
import sys

# Internal namespaces and classes: nothing of theirs may be exported.
FORBIDDEN = ["lockstep::detail::", "lockstep::kernels::", "lockstep::Communicator::Impl::"]
# Internal names a public header still needs exported: LOCKSTEP_MPI_CHECK expands to a call of this in the program.
ALLOWED = ["lockstep::detail::throw_mpi_error("]

# One or more entry points of every public header, and the exception types a program catches.
REQUIRED = [
    "lockstep::Runtime::init(",
    "lockstep::Runtime::finalize()",
    "lockstep::config()",
    "lockstep::Config::resolve(",
    "lockstep::parse_bytes(",
    "lockstep::allocator_for(",
    "lockstep::Device::parse(",
    "lockstep::parse_dtype(",
    "lockstep::float16::float16(float)",
    "lockstep::default_generator()",
    "lockstep::host_facts()",
    "lockstep::Tensor::ones(",
    "lockstep::Tensor::from_bytes(",  # private, but called by the inline Tensor::from_data templates
    "lockstep::ops::add(",
    "lockstep::ops::matmul(",
    "lockstep::get_logger(",
    "lockstep::Logger::emit(",  # private, but called by the inline Logger::log templates
    "lockstep::Communicator::world()",
    "lockstep::Communicator::allreduce(",
    "lockstep::find_executable_batch_size(",
    "lockstep::check_trigger(",
    "lockstep::straggler_report(",
    "lockstep::run_startup_checks(",
    "lockstep::check_signatures(",
    "lockstep::op_name(",
    "lockstep::detail::throw_mpi_error(",
    "typeinfo for lockstep::Error",
    "typeinfo for lockstep::ConfigError",
    "typeinfo for lockstep::OutOfMemoryError",
    "typeinfo for lockstep::MpiError",
    "typeinfo for lockstep::DistributedOperationError",
    "typeinfo for lockstep::ReadOnlyError",
    "typeinfo for lockstep::UnsupportedError",
]


def main() -> int:
    library = sys.argv[1]
    out = subprocess.run(
        ["nm", "-D", "--defined-only", "--demangle", library], check=True, capture_output=True, text=True
    ).stdout
    # "address type name": the name may contain spaces once demangled.
    # ABI tags ("f[abi:cxx11](...)") are not part of what a reader calls the name.
    names = [re.sub(r"\[abi:[^]]*\]", "", line.split(" ", 2)[2]) for line in out.splitlines() if line.count(" ") >= 2]
    lockstep_names = [n for n in names if "lockstep::" in n]
    print(f"{len(names)} symbols exported, {len(lockstep_names)} of them lockstep's")

    # The entity a symbol belongs to: its own qualified name, or the class of a vtable, typeinfo or guard variable.
    # Arguments are left out: a public function may take an internal type by pointer.
    def entity(name: str) -> str:
        name = re.sub(
            r"^(typeinfo name for|typeinfo for|vtable for|VTT for|guard variable for|construction vtable for) ",
            "",
            name,
        )
        return name.split("(", 1)[0]

    leaked = [
        n
        for n in names
        if any(entity(n).startswith(f) for f in FORBIDDEN) and not any(n.startswith(a) for a in ALLOWED)
    ]
    missing = [r for r in REQUIRED if not any(n.startswith(r) for n in names)]
    for n in leaked:
        print(f"FAIL: internal symbol exported: {n}")
    for r in missing:
        print(f"FAIL: public symbol not exported: {r}")
    if not leaked and not missing:
        print(f"ok:   no internal symbol exported, all {len(REQUIRED)} public entry points present")
    return 1 if leaked or missing else 0


if __name__ == "__main__":
    sys.exit(main())
