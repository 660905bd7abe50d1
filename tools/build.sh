#!/usr/bin/env bash
# Installs the dependencies, then configures (once) and compiles lockstep into ${LOCKSTEP_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
builddir=${LOCKSTEP_BUILD_DIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" --buildtype=release
fi
meson compile -C "$builddir"
