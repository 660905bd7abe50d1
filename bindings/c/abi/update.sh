#!/usr/bin/env bash
# Regenerates the ABI baseline of liblockstep_c.so.1 from a build (default: build/), after a compatible change such
# as a new entry point. Commit the result with the change; tests/c_api/abi_test.py compares every build against it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
builddir="${1:-$here/../../../build}"
abidw --headers-dir "$here/.." --drop-private-types --no-show-locs --no-corpus-path --drop-undefined-syms \
  --out-file "$here/liblockstep_c.so.1.abi" "$builddir/bindings/c/liblockstep_c.so.1"
echo "wrote $here/liblockstep_c.so.1.abi"
