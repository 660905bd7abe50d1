#!/usr/bin/env bash
# The main job: installs, builds, and runs the demo on 2 local ranks through mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
builddir=${LOCKSTEP_BUILD_DIR:-build}
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec mpirun -n 2 --oversubscribe "$builddir/examples/demo/lockstep_demo"
