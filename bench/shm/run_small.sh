#!/usr/bin/env bash
# The small-message path and the thread level, side by side (bench_shm only): 2 ranks at MPI_THREAD_SINGLE from 4 B
# to 256 MiB (every variant, lockstep in debug mode too), 2 ranks at MPI_THREAD_MULTIPLE up to 64 KiB (variants named
# *_mt: what the thread level costs each path), and 4 ranks at MPI_THREAD_SINGLE up to MAX4 (default 16 MiB;
# oversubscribed where the machine has fewer cores), then plot.py over the three.
#
#   bash bench/shm/run_small.sh [BUILD_DIR] [MAX4]
#
# Results: bench/shm/results-small/cpp_2_single.csv, cpp_2_multiple.csv, cpp_4_single.csv (+ .log), machine.txt,
# tables.md; plots: docs/images/shm_small_<op>_<ranks>ranks.png.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-build}"
max4="${2:-$((16 << 20))}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
bench="$build/bench/bench_shm"
if [ ! -x "$bench" ]; then echo "run_small.sh: $bench is missing: build first" >&2; exit 2; fi
results="$root/bench/shm/results-small"
mkdir -p "$results"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LOCKSTEP_CONFIG_FILE=""
export LOCKSTEP_SHM_ARENA_SIZE="${LOCKSTEP_SHM_ARENA_SIZE:-1GiB}"
cores=$(nproc)
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $cores cores"
  echo "mpi: $(mpirun --version 2>&1 | head -n 1)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$results/machine.txt"
run() {  # ranks level max-bytes
  local n=$1 level=$2 max=$3 flags=() note=()
  if [ "$n" -gt "$cores" ]; then flags=(--oversubscribe); note=(--note oversubscribed); fi
  local started
  started=$(date +%s)
  echo "== bench_shm, $n ranks, $level" >&2
  timeout 1200 mpirun -n "$n" "${flags[@]}" "$bench" --thread-level "$level" --max-bytes "$max" "${note[@]}" \
    --out "$results/cpp_${n}_$level.csv" 2> >(tee "$results/cpp_${n}_$level.log" >&2)
  echo "wall time, $n ranks, $level: $(( $(date +%s) - started )) s" | tee -a "$results/machine.txt" >&2
}
run 2 single $((256 << 20))
run 2 multiple $((64 << 10))
run 4 single "$max4"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$results/machine.txt"
/usr/bin/python3 "$root/bench/shm/plot.py" "$results" --images "$root/docs/images" --prefix shm_small \
  --markdown "$results/tables.md"
