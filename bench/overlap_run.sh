#!/bin/bash
# The overlap benchmark on 2 and 4 ranks (4 oversubscribed where the machine has fewer cores), then its plot.
#   bash bench/overlap_run.sh [BUILD_DIR] [RESULTS_DIR] [-- extra bench_overlap arguments]
# Writes RESULTS_DIR/overlap_{2,4}ranks.{csv,json,md} and docs/images/overlap.png; builds nothing.
set -euo pipefail
build=${1:-build}
results=${2:-bench/results}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
mpirun -n 2 "$build/bench/bench_overlap" --out-dir "$results" "$@"
mpirun -n 4 --oversubscribe "$build/bench/bench_overlap" --out-dir "$results" "$@"
/usr/bin/python3 bench/overlap_plot.py "$results" --out docs/images/overlap.png
