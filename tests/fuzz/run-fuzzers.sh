#!/usr/bin/env bash
# Builds one fuzz harness with clang++-14 and libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer, and runs
# it for MINUTES minutes on its seed corpus:
#
#   tests/fuzz/run-fuzzers.sh HARNESS MINUTES      HARNESS: hostfile nodelist remote_text config_yaml config_values
#
# New inputs go to $FUZZ_WORK/HARNESS/corpus (default: build-fuzz/), crashes, leaks and timeouts to
# $FUZZ_WORK/HARNESS/artifacts; the seed corpus in tests/fuzz/corpus is only read. A finding is fixed, then its input
# is copied to tests/fuzz/regressions/HARNESS, where the test suite replays it from then on.
#
# The hostcheck targets are built from tools/hostcheck, tools/mpi_launcher and base alone. The config targets
# instrument runtime/config/ and base (whose symbols liblockstep keeps hidden) and link the rest of liblockstep from
# a meson build directory ($LOCKSTEP_BUILD_DIR, default build/), which also provides the generated include/lockstep
# headers.
set -euo pipefail

usage() {
    echo "usage: $0 HARNESS MINUTES   (HARNESS: hostfile nodelist remote_text config_yaml config_values)" >&2
    exit 2
}
[[ $# -eq 2 ]] || usage
harness=$1
minutes=$2
[[ $minutes =~ ^[0-9]+$ ]] || usage

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${LOCKSTEP_BUILD_DIR:-$root/build}
work=${FUZZ_WORK:-$root/build-fuzz}
cxx=${CXX_FUZZ:-clang++-14}
# shellcheck disable=SC2054 # the commas separate the compiler's values, not bash's elements
sanitize=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
flags=(-std=c++20 -g -O1 -DNDEBUG -pthread "${sanitize[@]}" -include "$root/tests/fuzz/source_location_shim.hpp")

hostcheck_sources() {
    local f
    for f in "$root"/tools/hostcheck/*.cpp "$root"/tools/mpi_launcher/*.cpp "$root"/base/*.cpp; do
        [[ $(basename "$f") == command.cpp ]] || echo "$f"
    done
}

if [[ ! -d $build/include/lockstep ]]; then
    echo "$0: $build/include/lockstep is missing: run 'meson setup $build' and 'ninja -C $build' first" >&2
    exit 2
fi

case $harness in
    hostfile | nodelist | remote_text)
        mapfile -t sources < <(hostcheck_sources)
        compile=("$root/tests/fuzz/fuzz_$harness.cpp" "${sources[@]}" -I"$root/tools" -I"$root/tools/hostcheck"
                 -I"$root/base" -I"$build/include" -DLOCKSTEP_TOOL_VERSION='"fuzz"' -lfmt)
        ;;
    config_yaml | config_values)
        if [[ ! -e $build/liblockstep.so ]]; then
            echo "$0: $build/liblockstep.so is missing: run 'ninja -C $build' first" >&2
            exit 2
        fi
        # The instrumented config sources take precedence over the library's copy of the same exported functions.
        # shellcheck disable=SC2054 # the commas separate the linker's values, not bash's elements
        compile=("$root/tests/fuzz/fuzz_$harness.cpp" "$root"/runtime/config/*.cpp "$root"/base/*.cpp
                 -I"$build/include" -I"$root/runtime" -I"$root/base" -L"$build" -Wl,-rpath,"$build" -llockstep
                 -lyaml-cpp -lfmt)
        ;;
    *)
        usage
        ;;
esac

mkdir -p "$work/$harness/corpus" "$work/$harness/artifacts"
binary=$work/$harness/fuzz_$harness
echo "building $binary"
"$cxx" "${flags[@]}" -o "$binary" "${compile[@]}"

echo "fuzzing $harness for $minutes minute(s); new inputs in $work/$harness/corpus"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
exec "$binary" -max_total_time=$((minutes * 60)) -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$work/$harness/artifacts/" \
    "$work/$harness/corpus" "$root/tests/fuzz/corpus/$harness"
