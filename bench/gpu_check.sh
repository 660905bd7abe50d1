#!/usr/bin/env bash
# The GPU checks in one run, for a machine with a CUDA device: a release build with CUDA required, then
#   1. bench_kernels (full run): bandwidth rows on cuda:0 timed with CUDA events, matmul through cuBLAS against the
#      device's peak, the CPU rows beside them                                  -> bench/results/kernels_gpu.md
#   2. the CUDA test suite (meson test --suite cuda: kernels, staged and CUDA-aware collectives, C and Python)
#                                                                               -> bench/results/gpu_tests.txt
#   3. `lockstep test` on 2 ranks, which must run every collective on CUDA tensors too
#                                                                               -> bench/results/selftest_gpu.txt
# and a summary of the three with the machine's description                    -> bench/results/gpu_check.md
# Every step runs even when an earlier one failed; the exit status is 0 only when all three passed, 77 when the
# machine has no CUDA device (nothing is run then).
#
#   bash bench/gpu_check.sh [BUILD_DIR]        (default build-gpu; LOCKSTEP_GPU_ARCH=sm_90 narrows the kernels' targets)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
build=${1:-build-gpu}
results=bench/results
mkdir -p "$results"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no CUDA device (nvidia-smi -L failed); run this on a machine with a GPU" >&2
    exit 77
fi
# mpirun refuses root unless told; containers on GPU machines often run as root.
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# The checks must not pick up a developer's own configuration.
export LOCKSTEP_CONFIG_FILE=""

status=0
step() {  # step NAME LOG COMMAND...: runs COMMAND, output to LOG and the terminal; records the outcome
    local name=$1 log=$2
    shift 2
    echo "== $name"
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        status=1
        outcomes+=("| $name | FAILED (exit $rc) | \`$log\` |")
    else
        outcomes+=("| $name | passed | \`$log\` |")
    fi
    return "$rc"
}
outcomes=()

setup_args=(--buildtype=release -Dcuda=enabled -Dtests=true -Dbenchmarks=true)
if [ -n "${LOCKSTEP_GPU_ARCH:-}" ]; then setup_args+=("-Dgpu_arch=$LOCKSTEP_GPU_ARCH"); fi
if [ -d "$build" ]; then
    configure=(meson setup --reconfigure "$build" "${setup_args[@]}")
else
    configure=(meson setup "$build" "${setup_args[@]}")
fi
# shellcheck disable=SC2317  # reached through step
build_all() { "${configure[@]}" && meson compile -C "$build"; }
if ! step "build (CUDA enabled)" "$results/gpu_build.txt" build_all; then
    echo "gpu_check: the build failed; see $results/gpu_build.txt" >&2
    exit 1
fi

step "bench_kernels" "$results/kernels_gpu.log" "$build/bench/bench_kernels" --out "$results/kernels_gpu.md"
if step "CUDA tests" "$results/gpu_tests.txt" meson test -C "$build" --suite cuda --print-errorlogs; then
    # A CUDA test skips itself (77) where it sees no device, or (the torch ones) where torch was built without CUDA:
    # name the skipped ones in the summary, since on a GPU machine each is a check that did not run.
    skipped=$(grep -E '^ *[0-9]+/[0-9]+ .* SKIP' "$results/gpu_tests.txt" | sed -E 's/^ *[0-9]+\/[0-9]+ +//; s/ +SKIP.*//' |
        paste -sd, -)
    if [ -n "$skipped" ]; then
        outcomes[-1]="| CUDA tests | passed; skipped: $skipped | \`$results/gpu_tests.txt\` |"
    fi
fi
lockstep="$build/tools/lockstep"
if step "lockstep test, 2 ranks" "$results/selftest_gpu.txt" \
    "$lockstep" launch -n 2 --oversubscribe -- "$lockstep" test --color never; then
    # On a GPU machine the self-test must have run its checks on CUDA tensors, not skipped them.
    if grep -q "cuda: skipped" "$results/selftest_gpu.txt"; then
        status=1
        outcomes[-1]="| lockstep test, 2 ranks | FAILED (the CUDA rows were skipped) | \`$results/selftest_gpu.txt\` |"
    fi
fi

{
    echo "# GPU check"
    echo
    echo "lockstep $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M UTC')," \
        "load average $(cut -d' ' -f1 /proc/loadavg)."
    echo
    echo '```'
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    grep -m1 "model name" /proc/cpuinfo
    echo "$(nproc) CPUs"
    echo '```'
    echo
    echo "| Step | Outcome | Output |"
    echo "|---|---|---|"
    printf '%s\n' "${outcomes[@]}"
    echo
    if [ -f "$results/kernels_gpu.md" ]; then
        echo "## bench_kernels"
        echo
        cat "$results/kernels_gpu.md"
        echo
    fi
    echo "## lockstep test on 2 ranks"
    echo
    echo '```'
    cat "$results/selftest_gpu.txt"
    echo '```'
} >"$results/gpu_check.md"
echo "gpu_check: summary in $results/gpu_check.md ($([ "$status" = 0 ] && echo "all passed" || echo "something failed"))"
exit "$status"
