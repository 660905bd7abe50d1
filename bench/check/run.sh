#!/usr/bin/env bash
# The cost per MPI call of liblockstep_check.so, side by side: the program plain, under the library with debug mode off
# (the watchdog hooks only) and on, on 1 and 2 processes. Run from the build folder: bench/check/run.sh [ITERATIONS].
set -euo pipefail
build=${BUILD:-.}
iterations=${1:-20000}
program="$build/bench/bench_check_overhead"
library="$build/check/liblockstep_check.so"
for np in 1 2; do
  mpirun -n "$np" --oversubscribe "$program" "$iterations" plain
  mpirun -n "$np" --oversubscribe -x LD_PRELOAD="$library" -x LOCKSTEP_DEBUG_MODE=0 "$program" "$iterations" off
  mpirun -n "$np" --oversubscribe -x LD_PRELOAD="$library" -x LOCKSTEP_DEBUG_MODE=1 "$program" "$iterations" debug
done
