#!/bin/bash
# The interposition library's per-call cost on 2 ranks: bench_check_cost without the library (both columns raw: the
# noise floor), with the library and the watchdog only, and with the library in debug mode.
#   bash bench/check/run.sh [BUILD_DIR] [RESULTS_FILE] [-- extra bench_check_cost arguments]
# Appends the three tables to RESULTS_FILE (default bench/check/results/call_cost.md, started afresh); builds nothing.
set -euo pipefail
build=${1:-build}
results=${2:-bench/check/results/call_cost.md}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
library=$(realpath "$build/check/liblockstep_check.so")
bench=$build/bench/bench_check_cost
mkdir -p "$(dirname "$results")"
{
    echo "# bench_check_cost on $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "MPI: $(mpirun --version 2>&1 | head -1)"
} > "$results"
mpirun -n 2 "$bench" --label "without the library (both columns are the raw call)" --out "$results" "$@"
mpirun -n 2 -x LD_PRELOAD="$library" -x LOCKSTEP_DEBUG_MODE=0 "$bench" \
    --label "the library, watchdog only" --out "$results" "$@"
mpirun -n 2 -x LD_PRELOAD="$library" -x LOCKSTEP_DEBUG_MODE=1 "$bench" \
    --label "the library, debug mode (signature check)" --out "$results" "$@"
echo "written: $results"
