#!/usr/bin/env bash
# The main job: installs, builds, and trains the example MLP data-parallel on 2 local ranks through `lockstep launch`,
# under a 4 MiB host-memory cap per rank so that the batch-size search has to back off; the learning rate follows the
# global batch it settles on. Arguments go to the training program (`--help` lists them with their defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the job needs: the launcher, its runtime commands and the training program (with liblockstep).
bash tools/build.sh tools/lockstep:executable tools/lockstep_commands examples/train/lockstep_train
builddir=${LOCKSTEP_BUILD_DIR:-build}
# The launcher forwards every LOCKSTEP_* variable to every rank; a cap already set in the environment wins.
export LOCKSTEP_CPU_MEMORY_LIMIT=${LOCKSTEP_CPU_MEMORY_LIMIT:-4MiB}
# Two ranks need two slots (cores); on a one-core machine let the launcher put both on it.
oversubscribe=()
if [ "$(nproc)" -lt 2 ]; then oversubscribe=(--oversubscribe); fi
exec "$builddir/tools/lockstep" launch -n 2 "${oversubscribe[@]}" -- "$builddir/examples/train/lockstep_train" "$@"
