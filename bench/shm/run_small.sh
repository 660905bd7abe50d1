#!/usr/bin/env bash
# The small-message path and the thread level, side by side (bench_shm only): 2 ranks at MPI_THREAD_SINGLE from 4 B
# to 256 MiB (every variant, lockstep in debug mode too), 2 ranks at MPI_THREAD_MULTIPLE up to 64 KiB (variants named
# *_mt: what the thread level costs each path), and 4 ranks at MPI_THREAD_SINGLE up to MAX4 (default 16 MiB;
# oversubscribed where the machine has fewer cores), then plot.py over the three.
#
#   bash bench/shm/run_small.sh [BUILD_DIR] [MAX4]
#
# Results: bench/shm/results-small/cpp_<ranks>_<level>_{small,large}.csv (+ .log), machine.txt, tables.md; plots:
# docs/images/shm_small_<op>_<ranks>ranks.png.
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
run() {  # ranks level min-bytes max-bytes name
  local n=$1 level=$2 min=$3 max=$4 name=$5 flags=() note=()
  if [ "$n" -gt "$cores" ]; then flags=(--oversubscribe); note=(--note oversubscribed); fi
  local started
  started=$(date +%s)
  echo "== bench_shm, $n ranks, $level, $min to $max bytes" >&2
  timeout 1200 mpirun -n "$n" "${flags[@]}" "$bench" --thread-level "$level" --min-bytes "$min" --max-bytes "$max" \
    "${note[@]}" --out "$results/$name.csv" 2> >(tee "$results/$name.log" >&2)
  echo "wall time, $name: $(( $(date +%s) - started )) s" | tee -a "$results/machine.txt" >&2
}
# Up to 64 KiB and from 1 MiB in separate runs: after the large sizes the machine's small-message times stay slower
# for a while (raw MPI's too: 1 KiB broadcasts 3x slower seen here), which would be charged to the small sizes.
run 2 single 0 $((64 << 10)) cpp_2_single_small
run 2 multiple 0 $((64 << 10)) cpp_2_multiple_small
run 4 single 0 $((64 << 10)) cpp_4_single_small
run 2 single $((1 << 20)) $((256 << 20)) cpp_2_single_large
run 4 single $((1 << 20)) "$max4" cpp_4_single_large
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$results/machine.txt"
/usr/bin/python3 "$root/bench/shm/plot.py" "$results" --images "$root/docs/images" --prefix shm_small \
  --markdown "$results/tables.md"
