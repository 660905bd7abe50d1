#!/usr/bin/env bash
# The shared-memory collectives benchmark, end to end: bench_shm (lockstep through the arena and through MPI, raw MPI
# on malloc'ed and huge-page buffers, the minimal shared-memory floor, memcpy) and side_by_side.py (mpi4py, torch
# gloo) on 2 ranks and on 4 ranks (--oversubscribe; marked "oversubscribed" in every row's note where the machine has
# fewer cores), then the training example with the arena on and off, then the plots and tables (plot.py).
#
#   bash bench/shm/run.sh [BUILD_DIR] [--quick] [--ranks "2 4"] [--max-bytes N] [--max-bytes-oversubscribed N]
#                         [--no-train]
#
# Builds nothing: BUILD_DIR (default build) must hold bench/bench_shm and examples/train/lockstep_train. Results:
# bench/shm/results/{cpp,python}_<ranks>.csv (+ .log), train.csv, tables.md; plots: docs/images/shm_*.png.
# LOCKSTEP_SHM_ARENA_SIZE (default here 1GiB per process) must hold one size's tensors: 384 MiB for the 256 MiB
# allgather on 2 ranks. Debian's /usr/bin/python3 runs the Python parts (numpy, mpi4py, torch, matplotlib).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build=build
quick=()
ranks_list="2 4"
max_bytes=$((256 << 20))
max_bytes_oversubscribed=$((64 << 20))
train_too=1
while [ "$#" -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick); shift ;;
    --ranks) ranks_list="$2"; shift 2 ;;
    --max-bytes) max_bytes="$2"; shift 2 ;;
    --max-bytes-oversubscribed) max_bytes_oversubscribed="$2"; shift 2 ;;
    --no-train) train_too=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done
case "$build" in /*) ;; *) build="$root/$build" ;; esac
bench="$build/bench/bench_shm"
train="$build/examples/train/lockstep_train"
python=/usr/bin/python3
for f in "$bench" "$train"; do
  if [ ! -x "$f" ]; then echo "run.sh: $f is missing: build first (meson compile -C $build)" >&2; exit 2; fi
done
results="$root/bench/shm/results"
mkdir -p "$results"
cd "$root"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LOCKSTEP_CONFIG_FILE=""  # no config.yaml of the user's in the way
export LOCKSTEP_SHM_ARENA_SIZE="${LOCKSTEP_SHM_ARENA_SIZE:-1GiB}"
cores=$(nproc)
started=$(date +%s)
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  echo "host: $model, $cores cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  thp=/sys/kernel/mm/transparent_hugepage
  echo "kernel: $(uname -r); THP: $(cat $thp/enabled); shmem THP: $(cat $thp/shmem_enabled 2>/dev/null || echo n/a)"
  echo "mpi: $(mpirun --version 2>&1 | head -n 1)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "arena: LOCKSTEP_SHM_ARENA_SIZE=$LOCKSTEP_SHM_ARENA_SIZE per process"
  echo "arena sources now (sha256, first 12): $(for f in runtime/shared_memory.cpp collectives/shm/*.cpp; do
    [ -f "$f" ] && printf '%s %s  ' "$f" "$(sha256sum "$f" | cut -c1-12)"; done)"
  stamp() { date -u -r "$1" '+%Y-%m-%d %H:%M UTC'; }
  echo "built: $bench $(stamp "$bench"), $build/liblockstep.so $(stamp "$build/liblockstep.so")"
} > "$results/machine.txt"
cat "$results/machine.txt"

for n in $ranks_list; do
  flags=()
  note=()
  size_cap=$max_bytes
  if [ "$n" -gt "$cores" ]; then
    flags=(--oversubscribe)
    note=(--note oversubscribed)
    # Oversubscribed, every 256 MiB row costs about a minute per program: up to 64 MiB keeps the run under 10 minutes.
    size_cap=$(( max_bytes < max_bytes_oversubscribed ? max_bytes : max_bytes_oversubscribed ))
  fi
  stage=$(date +%s)
  echo "== bench_shm, $n ranks" >&2
  LOCKSTEP_SHM=on timeout 900 mpirun -n "$n" "${flags[@]}" "$bench" "${quick[@]}" "${note[@]}" --max-bytes "$size_cap" \
    --out "$results/cpp_$n.csv" 2> >(tee "$results/cpp_$n.log" >&2)
  echo "== side_by_side.py, $n ranks" >&2
  timeout 900 mpirun -n "$n" "${flags[@]}" "$python" bench/shm/side_by_side.py "${quick[@]}" "${note[@]}" \
    --max-bytes "$size_cap" --out "$results/python_$n.csv" 2> >(tee "$results/python_$n.log" >&2)
  echo "wall time, $n ranks (C++ and Python): $(( $(date +%s) - stage )) s" | tee -a "$results/machine.txt" >&2
done

# The training example on 2 ranks, 3 runs per setting (as bench/train_epochs.py: same global batch, 10 epochs).
# Its default model has about 2,200 parameters (8.8 KB of gradients): under the default 64 KiB threshold its
# tensors stay in private memory, so the arena is also measured with the threshold lowered to 4 KiB (the gradients
# go to the arena) and with a wider model (--hidden 1024: 139 KB of gradients, in the arena at the default threshold).
train_args=(--epochs 10 --samples 16384 --global-batch 256 --patience 1000)
run_train() {  # config shm threshold extra-args...
  local config=$1 shm=$2 threshold=$3
  shift 3
  for run in 1 2 3; do
    local text
    text=$(LOCKSTEP_SHM=$shm LOCKSTEP_SHM_THRESHOLD=$threshold \
      timeout 300 mpirun -n 2 "$train" "${train_args[@]}" "$@" 2>&1) || {
      echo "$text" >&2
      echo "run.sh: lockstep_train ($config, LOCKSTEP_SHM=$shm) failed" >&2
      return 1
    }
    local line
    line=$(grep -o '([0-9.]* s per epoch, [0-9.]* % of' <<<"$text" | head -n 1)
    local epoch share
    epoch=$(sed -E 's/\(([0-9.]+) s per epoch.*/\1/' <<<"$line")
    share=$(sed -E 's/.*epoch, ([0-9.]+) % of/\1/' <<<"$line")
    echo "$config,$shm,$threshold,$run,$epoch,$share" >> "$results/train.csv"
    echo "  $config LOCKSTEP_SHM=$shm threshold=$threshold run $run: $epoch s per epoch, $share % in collectives" >&2
  done
}
if [ "$train_too" = 1 ]; then
  stage=$(date +%s)
  echo "== training example, 2 ranks" >&2
  echo "config,shm,threshold,run,seconds_per_epoch,collective_share" > "$results/train.csv"
  run_train "32-64-1 (2.2k parameters)" off 65536
  run_train "32-64-1 (2.2k parameters)" on 65536
  run_train "32-64-1 (2.2k parameters)" on 4096
  run_train "32-1024-1 (35k parameters)" off 65536 --hidden 1024
  run_train "32-1024-1 (35k parameters)" on 65536 --hidden 1024
  echo "wall time, training example: $(( $(date +%s) - stage )) s" | tee -a "$results/machine.txt" >&2
fi

"$python" bench/shm/plot.py "$results" --images docs/images --markdown "$results/tables.md"
echo "wall time, all: $(( $(date +%s) - started )) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee -a "$results/machine.txt" >&2
echo "run.sh: tables in $results/tables.md" >&2
