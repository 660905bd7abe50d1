#!/usr/bin/env bash
# The main job: installs, builds, and trains the example MLP data-parallel on 2 local ranks through mpirun, under a
# 4 MiB host-memory cap per rank so that the batch-size search has to back off.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
builddir=${LOCKSTEP_BUILD_DIR:-build}
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec mpirun -n 2 --oversubscribe -x LOCKSTEP_CPU_MEMORY_LIMIT=4MiB "$builddir/examples/train/lockstep_train" "$@"
