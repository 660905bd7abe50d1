#!/usr/bin/env bash
# Installs the dependencies, then configures (once) and compiles lockstep into ${LOCKSTEP_BUILD_DIR:-build}: the
# targets named as arguments (meson compile's names, e.g. examples/train/lockstep_train) and what they need, else everything.
# --setup-only: installs and configures, compiles nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
builddir=${LOCKSTEP_BUILD_DIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" --buildtype=release
fi
if [ "${1:-}" = --setup-only ]; then exit 0; fi
meson compile -C "$builddir" "$@"
