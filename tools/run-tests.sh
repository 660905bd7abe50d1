#!/usr/bin/env bash
# The whole test suite: installs, builds (the benchmark programs no test runs only once the plain tests are over),
# runs every meson test (those that may run side by side first, together: tools/test-order.py) while the other builds
# compile at low priority (tests/sanitizers/run.sh: ASan+UBSan+LSan in build-asan, TSan in build-tsan, then lockstep
# against MPICH in build-mpich), then their tests, and ends with "N passed, N failed, N skipped" over all of them,
# computed from meson's own results files. Exits non-zero when any test failed or a program did not build.
# Arguments go to the plain build's `meson test`. LOCKSTEP_SANITIZERS chooses the sanitizer builds: all by default
# (and in CI), 0 for none, or a comma-separated list (asan,tsan). LOCKSTEP_MPICH=0 leaves the MPICH build out.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
# The plain build: first what the tests need (tools/build-first.py: all but the benchmark programs no test runs), the
# rest once its tests are over (below).
bash tools/build.sh --setup-only
builddir=${LOCKSTEP_BUILD_DIR:-build}
mapfile -t first < <(python3 tools/build-first.py "$builddir")
if [ "${#first[@]}" -eq 0 ]; then
  echo "run-tests: tools/build-first.py failed" >&2
  exit 1
fi
ninja -C "$builddir" "${first[@]}"
echo "run-tests: plain build ready after $((SECONDS - started)) s"
rm -f "$builddir/meson-logs/testlog.json"
status=0

sanitizers=${LOCKSTEP_SANITIZERS:-asan,tsan}
case "$sanitizers" in
  0 | no | false | off | none) sanitizers="" ;;
  1 | yes | true | on | all) sanitizers=asan,tsan ;;
esac
variants=${sanitizers//,/ }
case "${LOCKSTEP_MPICH:-1}" in
  0 | no | false | off) ;;
  *) variants="$variants mpich" ;;
esac
# The sanitizer builds compile at the lowest priority while the plain tests run: those spend most of their time
# waiting (launchers, timeouts, ssh), and take the processor first whenever they need it.
# Each build leaves build-logs/NAME.done when it ends; the tests of one build run while the next one builds.
builder=""
if [ -n "${variants// /}" ]; then
  mkdir -p build-logs
  rm -f build-logs/*.done
  (
    for variant in $variants; do
      started_build=$SECONDS
      LOCKSTEP_SANITIZER_PHASE=build nice -n 19 bash tests/sanitizers/run.sh "$variant" \
        >"build-logs/$variant-build.log" 2>&1 || true
      echo "run-tests: $variant build took $((SECONDS - started_build)) s" >>"build-logs/$variant-build.log"
      : >"build-logs/$variant.done"
    done
  ) &
  builder=$!
fi

phase=$SECONDS
# Without arguments, every test, named in tools/test-order.py's order: those that may run side by side first, together.
if [ $# -eq 0 ]; then
  mapfile -t ordered < <(python3 tools/test-order.py "$builddir")
  if [ "${#ordered[@]}" -eq 0 ]; then
    echo "run-tests: tools/test-order.py failed" >&2
    exit 1
  fi
  set -- "${ordered[@]}"
fi
meson test -C "$builddir" --print-errorlogs "$@" || status=$?
echo "run-tests: plain tests took $((SECONDS - phase)) s"
logs=("$builddir/meson-logs/testlog.json")

# The rest of the plain build (the benchmark programs no test runs), at the lowest priority while the sanitizer tests
# run: nothing else uses the plain build tree now. It must build all the same (checked at the end).
mkdir -p build-logs
nice -n 19 ninja -C "$builddir" >build-logs/plain-rest.log 2>&1 &
rest=$!

for variant in $variants; do
  phase=$SECONDS
  # The builder always leaves the marker; should it die first, the test phase reports what is missing.
  while [ ! -f "build-logs/$variant.done" ] && kill -0 "$builder" 2>/dev/null; do sleep 1; done
  echo "run-tests: waited $((SECONDS - phase)) s for the $variant build"
  tail -n 5 "build-logs/$variant-build.log" 2>/dev/null || true
  phase=$SECONDS
  LOCKSTEP_SANITIZER_PHASE="test" bash tests/sanitizers/run.sh "$variant" || status=$?
  echo "run-tests: $variant tests took $((SECONDS - phase)) s"
  logs+=("$variant=build-$variant/meson-logs/testlog.json")
done
if [ -n "$builder" ]; then wait "$builder" || true; fi
if ! wait "$rest"; then
  tail -n 20 build-logs/plain-rest.log
  echo "run-tests: the rest of the plain build failed (build-logs/plain-rest.log)" >&2
  status=1
fi
if [ -z "$sanitizers" ]; then
  echo "run-tests: sanitizer builds skipped (LOCKSTEP_SANITIZERS=${LOCKSTEP_SANITIZERS:-})"
fi

echo "run-tests: $((SECONDS - started)) s in all"
python3 tools/test-summary.py "${logs[@]}" || status=$?
exit "$status"
