#!/usr/bin/env bash
# Regenerates the ABI baseline of liblockstep_c.so.1 from a build (default: build/), after a compatible change such
# as a new entry point. Commit the result with the change; tests/bindings/c/abi_test.py compares every build against it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
builddir="${1:-$here/../../../build}"
library="$builddir/bindings/c/liblockstep_c.so.1"
# The baseline is read from a build against Open MPI (abi_test.py leaves the MPI handle types out for other MPIs).
if ! readelf -d "$library" | grep -q 'NEEDED.*\[libmpi\.so\.'; then
  echo "update.sh: $library is not built against Open MPI (libmpi.so); give a build directory that is" >&2
  exit 2
fi
abidw --headers-dir "$here/.." --drop-private-types --no-show-locs --no-corpus-path --drop-undefined-syms \
  --out-file "$here/liblockstep_c.so.1.abi" "$library"
echo "wrote $here/liblockstep_c.so.1.abi"
