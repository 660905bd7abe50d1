#!/usr/bin/env bash
# The whole test suite: installs, builds, runs every meson test, and ends with "N passed, N failed, N skipped"
# computed from meson's own results file. Exits non-zero when any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
builddir=${LOCKSTEP_BUILD_DIR:-build}
rm -f "$builddir/meson-logs/testlog.json"
status=0
meson test -C "$builddir" --print-errorlogs "$@" || status=$?
python3 tools/test-summary.py "$builddir/meson-logs/testlog.json" || status=$?
exit "$status"
