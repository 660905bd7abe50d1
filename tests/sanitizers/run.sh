#!/usr/bin/env bash
# Builds lockstep with one sanitizer (or against MPICH) in its own build directory and runs the tests it can judge:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer, in build-asan: the unit and mpi suites, and
#         the fuzz suite (every harness replays its corpus and its regression inputs).
#   tsan  ThreadSanitizer, in build-tsan: the tests where lockstep's own threads run (watchdog, logging, the
#         threaded unit tests) and the collectives they watch.
#   mpich lockstep built against MPICH instead of Open MPI (Debian installs both), in build-mpich, with no sanitizer:
#         the tests that tell whether lockstep works on another MPI, run under MPICH's Hydra launcher.
# Usage: tests/sanitizers/run.sh asan|tsan|mpich [meson test arguments...]
# Leaves meson's results in <builddir>/meson-logs/testlog.json for tools/test-summary.py; exits non-zero when a test
# failed. Every sanitizer report fails its test: UB is not recoverable (-fno-sanitize-recover), ASan, LSan and TSan
# halt on the first report, and a report that a test script swallowed still fails it (tools/test-summary.py looks
# for the sanitizers' SUMMARY lines in each test's output).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
flavour=${1:?usage: tests/sanitizers/run.sh asan|tsan|mpich [meson test arguments...]}
shift
supp="$root/tests/sanitizers"
# The suites whose tests need the slow unwinder for every allocation (ASan, below); the others run first without it.
slow_unwind_suites=()

# Shared by both: no CUDA (ASan's shadow memory and TSan's address layout clash with the CUDA driver, and no
# instrumented code would run on the device), no benchmarks or examples (programs, not tests), line tables
# (-g1) so that reports carry file:line at a fraction of -g's compile time, frame pointers for whole stacks.
# b_lundef=false: the sanitizer runtimes are linked into programs, not into liblockstep.so.
# Assertions on (b_ndebug=false, _GLIBCXX_ASSERTIONS): Eigen's and libstdc++'s bounds checks find what the sanitizers'
# shadow memory cannot see, an index past a vector's size but within its capacity.
common_options=(-Ddebug=false -Db_ndebug=false -Db_lundef=false
  -Dcuda=disabled -Dbenchmarks=false -Dexamples=false)
common_flags="-g1 -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS"

case "$flavour" in
  asan)
    builddir=build-asan
    # shellcheck disable=SC2054 # the comma separates meson's values, not bash's elements
    # -O0: the ASan build is the largest (every test program); unoptimised code compiles in about half the time and
    # the tests spend theirs waiting for MPI, launchers and timeouts, not computing.
    options=("${common_options[@]}" -Doptimization=0 -Db_sanitize=address,undefined
      "-Dcpp_args=$common_flags -fno-sanitize-recover=undefined")
    # Tests that run no lockstep code of their own, or that cannot run against an instrumented library:
    #   format, format_gate, layers the clang-format gate and the layer table read sources; the plain build runs them
    #   docs_paths, test_summary      Python alone: the paths docs/ names, and tools/test-summary.py
    #   exported_symbols           reads liblockstep.so's symbol table, which instrumentation changes
    #   install_and_pkgconfig      builds an uninstrumented program with pkg-config alone against the installed,
    #                              instrumented library: ASan refuses to start when its runtime is not loaded first
    #   hang_repeat_*              the skip-and-exit job 20 times over: the same code as hang_diagnosed_*, run
    #                              for the launcher's sake (does mpirun always return?), which is not instrumented
    #   shm_hang_*_np3, _np4       the shared-memory skip and kill jobs on 3 and 4 ranks: the same waits as on 2
    #                              ranks (kept), which the watchdog, not the instrumented code, ends
    #   hang_exit_status_*         mpirun's and the launcher's exit status under settings that ignore exit codes: the
    #                              launchers' behaviour, not instrumented code (hang_leader/hang_upper keep the report)
    #   check_launch_*, check_hpcc_*, check_mpi4py_*, check_fortran_*  the checking library preloaded by
    #                              `lockstep launch --check` (which names the library alone), into hpcc or Python (not
    #                              instrumented: their own leaks would be reported), or into the Fortran programs
    #                              (whose test reads the library's symbols from the path it preloads); the other
    #                              check_* tests preload it here after the ASan runtime (check/meson.build)
    #   trace_show, trace_validator, stacks_python_*  Python (the renderer, the validator, an interpreter's frames):
    #                              nothing instrumented runs but the small programs the other trace tests cover
    #   recorder_np*               a million calls for the ring's bound, 75 s under ASan: every other test writes
    #                              the recorder's entries, and the trace_dump_* tests take its snapshots
    #   stacks_healthy_100_np4     the stack captures of stacks_healthy_300_np2 (kept) on 4 ranks, 14 s under ASan
    #   <name>_np4                 where <name>_np2 or <name>_np3 runs too: the same code on one more rank
    #                              (fewer_ranks=1 below); tests that exist only on 4 ranks stay
    #   <name>_np3                 where <name>_np2 runs too (fewer_ranks=2): the same instrumented code on one
    #                              more rank, except the collectives' own algorithms (odd_ranks_kept), whose
    #                              non-power-of-two paths only 3 ranks take
    # The cluster suite (real sshd nodes, 15 minutes of timeout) and cuda stay with the plain build.
    suites=(--suite unit --suite mpi --suite fuzz)
    exclude=(format format_gate layers docs_paths test_summary exported_symbols c_api_abi install_and_pkgconfig
      'hang_repeat_*' 'shm_hang_*_np3' 'shm_hang_*_np4' 'hang_exit_status_*'
      'check_launch_*' 'check_hpcc_*' 'check_mpi4py_*' 'check_fortran_*'
      trace_show trace_validator 'stacks_python_*' 'recorder_np*' stacks_healthy_100_np4)
    include=()
    fewer_ranks=2
    odd_ranks_kept=(collectives_np3 shm_collectives_np3 'shm_small_*_np3' reduce_ops_mpi_np3)
    # Reports go to stderr, into each test's log; exitcode 23 tells a sanitizer's exit from the exit codes that tests
    # expect from lockstep (1, 2, 124, ...). LeakSanitizer runs at every exit (detect_leaks=1), with MPI's own
    # libraries suppressed (lsan.supp). Open MPI forwards the environment to its local ranks, so the options reach
    # every rank without -x.
    # fast_unwind_on_malloc=0 (the slow unwinder, for every allocation's stack) is for MPI's libraries: Debian builds
    # Open MPI without frame pointers, and only the slow unwinder reaches the frames that lsan.supp names. It makes
    # every allocation several times dearer (trace_format: 7 s with frame pointers, 55 to 80 s without), so the tests
    # outside the mpi suite, which never start MPI, run first with the fast one (slow_unwind_suites). Should one of
    # them start MPI after all, MPI's allocations show up as leaks of one frame and fail it: it belongs in the mpi
    # suite.
    export ASAN_OPTIONS="detect_leaks=1:exitcode=23:abort_on_error=0:detect_stack_use_after_return=0:\
check_initialization_order=1:strict_init_order=1:print_suppressions=0"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0:exitcode=23"
    slow_unwind_suites=(mpi)
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=23"
    # The flight recorder keeps 256 calls per communicator here instead of 2048: the same code (its rings wrap
    # sooner), and the dumps that hangs and debug-mode errors write merge an eighth of the calls. Unoptimised and
    # instrumented, with every allocation's stack unwound the slow way, one dump of a full 2048-call ring took 18 s
    # (shm_small_np2: 45 s, 5 s with 256). The recorder's own tests, which count on the default, run in the other
    # builds (recorder_np* above).
    export LOCKSTEP_TRACE_CALLS=256
    ;;
  tsan)
    builddir=build-tsan
    options=("${common_options[@]}" -Doptimization=1 -Db_sanitize=thread "-Dcpp_args=$common_flags")
    suites=()
    exclude=()
    # As under ASan, no 4-rank copy of a test that runs on 2 or 3 ranks too: a race is between the threads of one
    # process, which one more rank does not add to (hang_diagnosed_np4_*, collectives_np4, debug_mode_np4,
    # logging_mpi_np4: 11 s).
    fewer_ranks=1
    # lockstep's threads: the watchdog's loop and report threads (collectives/watchdog.cpp), the hostcheck resolver's
    # workers (tools/hostcheck/resolve.cpp), and the tests that call into the library from several threads. Every
    # collective runs with the watchdog on (its default), so its board is read while the ranks' calls write it; the
    # hang tests make it report. Left to the plain and ASan builds: hang_repeat (the same job 20 times over) and
    # hang_p2p_* (with two ranks timing out together, which one's report names the headline depends on timing, and
    # TSan's pace changes it). Entries are bash patterns; each must match at least one test.
    include=(watchdog_board allocator config 'logging' 'logging_before_init_*' hostcheck_fanout
      'collectives_np*' 'debug_mode_np*' 'logging_mpi_np*' 'logging_host_mpi_np*'
      'hang_diagnosed_*' hang_first_np3 'hang_headline_*' 'watchdog_channel_*'
      # The progress threads of non-blocking collectives, and requests waited for from other threads.
      'nonblocking_np2' 'nonblocking_np3' 'nonblocking_unwaited_np2' 'nonblocking_die_np3'
      # The flight recorder's snapshots, read while the calls write the rings.
      'recorder_np2')
    # halt_on_error: the first race fails the test; exitcode 66 is TSan's own, distinct from lockstep's codes.
    # Open MPI is not instrumented: tsan.supp silences what TSan sees only through MPI's libraries.
    # second_deadlock_stack: both stacks of a lock-order inversion.
    export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$supp/tsan.supp:\
print_suppressions=0"
    ;;
  mpich)
    builddir=build-mpich
    # Unoptimised, for the compile time: these tests judge MPI portability, not speed. No CUDA, benchmarks or
    # examples, as above; the Python package is left out of a build against MPICH (Debian's mpi4py and torch use Open
    # MPI).
    options=(-Dmpi=mpich -Doptimization=0 -Ddebug=false -Dcuda=disabled -Dbenchmarks=false -Dexamples=false)
    suites=()
    exclude=()
    # The C interface's tests, the collectives and debug mode on 2 and 3 ranks, the requests of non-blocking calls,
    # checks every rank makes alone, a hang that the watchdog must diagnose and end (debug mode on and off),
    # `lockstep launch` with Hydra found by itself and named (lockstep_hydra_*), and the checking library preloaded
    # into MPICH programs: a correct one clean with debug mode on and off, planted bugs reported (and returned as
    # errors), `lockstep launch --check`, MPICH's datatypes in type signatures. Tests that read Open MPI's own
    # variables (OMPI_COMM_WORLD_*) or options, or run programs built against Open MPI (mpi4py, hpcc), stay with the
    # plain build.
    include=('c_api_*' collectives_np2 collectives_np3 debug_mode_np2 debug_mode_np3 nonblocking_np2 local_checks_np2
      hang_diagnosed_np2_debug1 hang_diagnosed_np3_debug0 launch_unit lockstep_launch_np2 lockstep_exit_codes_np2
      'lockstep_hydra_*' check_correct_debug_np3 check_correct_off_np2 check_planted_type_np2 check_planted_count_np3
      check_planted_alltoallv_np3 check_planted_request_np3 check_planted_errors_return_np3
      check_launch_planted_type_np2 check_type_signature)
    fewer_ranks=0
    ;;
  *)
    echo "tests/sanitizers/run.sh: unknown flavour '$flavour' (asan, tsan or mpich)" >&2
    exit 2
    ;;
esac

# LOCKSTEP_SANITIZER_PHASE: build (configure and build only), test (run what an earlier build phase built), or all
# (the default). tools/run-tests.sh builds while the plain build's tests run, whose time is mostly spent waiting.
phase=${LOCKSTEP_SANITIZER_PHASE:-all}
case "$phase" in
  build | test | all) ;;
  *)
    echo "tests/sanitizers/run.sh: LOCKSTEP_SANITIZER_PHASE must be build, test or all (got '$phase')" >&2
    exit 2
    ;;
esac

# A new directory is configured; an existing one takes the options again through `meson configure`, so that an edit
# here reaches it (`meson setup --reconfigure` keeps the values it stored for cpp_args and b_ndebug).
if [ "$phase" = test ]; then
  if [ ! -f "$builddir/sanitizer-build-status" ]; then
    echo "tests/sanitizers/run.sh: $flavour: nothing built yet (run the build phase first)" >&2
    exit 1
  fi
elif [ -f "$builddir/build.ninja" ]; then
  meson configure "$builddir" "${options[@]}"
else
  meson setup "$builddir" "${options[@]}"
fi

# The tests to run, by name: meson's own list, filtered by the lists above.
mapfile -t listed < <(meson test -C "$builddir" --no-rebuild --list "${suites[@]}" 2>/dev/null |
  sed -n 's/^[^:]*:[^ ]* \/ //p')
matches() { # NAME PATTERN...: whether NAME matches one of the patterns
  local name=$1 pattern
  shift
  for pattern in "$@"; do
    # shellcheck disable=SC2053 # a pattern, on purpose
    if [[ $name == $pattern ]]; then return 0; fi
  done
  return 1
}
tests=()
for name in "${listed[@]}"; do
  if [ "${#exclude[@]}" -gt 0 ] && matches "$name" "${exclude[@]}"; then continue; fi
  if [ "${#include[@]}" -gt 0 ] && ! matches "$name" "${include[@]}"; then continue; fi
  if [ "$fewer_ranks" -ge 1 ] && [[ $name == *_np4* ]] &&
    printf '%s\n' "${listed[@]}" | grep -qxF -e "${name/_np4/_np2}" -e "${name/_np4/_np3}"; then
    continue
  fi
  if [ "$fewer_ranks" = 2 ] && [[ $name == *_np3* ]] && ! matches "$name" "${odd_ranks_kept[@]}" &&
    printf '%s\n' "${listed[@]}" | grep -qxF -e "${name/_np3/_np2}"; then
    continue
  fi
  tests+=("$name")
done
# A test renamed in tests/*/meson.build must not drop out of the run unnoticed.
for pattern in "${include[@]}"; do
  found=0
  for name in "${tests[@]}"; do
    if matches "$name" "$pattern"; then found=1; break; fi
  done
  if [ "$found" = 0 ]; then
    echo "tests/sanitizers/run.sh: $flavour: no test matches '$pattern' (renamed in tests/*/meson.build?)" >&2
    exit 1
  fi
done
if [ "${#tests[@]}" -eq 0 ]; then
  echo "tests/sanitizers/run.sh: $flavour: no tests selected" >&2
  exit 1
fi
# Those that may run side by side first, together (tools/test-order.py).
mapfile -t ordered < <(python3 tools/test-order.py "$builddir" "${tests[@]}")
if [ "${#ordered[@]}" -ne "${#tests[@]}" ]; then
  echo "tests/sanitizers/run.sh: $flavour: tools/test-order.py failed" >&2
  exit 1
fi
tests=("${ordered[@]}")

# Only the programs of the selected tests are built (meson's introspection names each test's dependencies): the TSan
# build then compiles a fraction of the project.
mapfile -t targets < <(python3 - "$builddir" "${tests[@]}" <<'EOF'
import json, os, sys
builddir, wanted = sys.argv[1], set(sys.argv[2:])
def load(name):
    with open(os.path.join(builddir, "meson-info", name), encoding="utf-8") as f:
        return json.load(f)
outputs = {t["id"]: t["filename"] for t in load("intro-targets.json")}
needed = {os.path.relpath(path, os.path.realpath(builddir))
          for test in load("intro-tests.json") if test["name"] in wanted
          for dep in test["depends"] for path in outputs.get(dep, [])}
print("\n".join(sorted(needed)))
EOF
)
build_status=0
if [ "$phase" = test ]; then
  build_status=$(<"$builddir/sanitizer-build-status")
else
  echo "sanitizers: $flavour: building ${#targets[@]} programs in $builddir for ${#tests[@]} tests"
  # -k 0: a program that does not build fails its own tests, not the whole sanitizer run.
  ninja -C "$builddir" -k 0 "${targets[@]}" || build_status=$?
  echo "$build_status" >"$builddir/sanitizer-build-status"
  if [ "$phase" = build ]; then exit "$build_status"; fi
fi

rm -f "$builddir/meson-logs/testlog.json"
# Instrumented programs start and run several times slower: timeouts are doubled (ASan) or tripled (TSan); the
# MPICH build is not instrumented.
multiplier=2
if [ "$flavour" = tsan ]; then multiplier=3; fi
if [ "$flavour" = mpich ]; then multiplier=1; fi
status=0
# Under ASan, the tests of no slow_unwind_suites first, with the fast unwinder (see above), into a log of their own,
# which is then added to testlog.json.
fast=()
if [ "${#slow_unwind_suites[@]}" -gt 0 ]; then
  # meson's list names each test as "project:suite+suite / name".
  mapfile -t unwound_fast < <(meson test -C "$builddir" --no-rebuild --list "${suites[@]}" 2>/dev/null |
    awk -v slow="${slow_unwind_suites[*]}" -F' / ' '
      BEGIN { n = split(slow, s, " "); for (i = 1; i <= n; i++) wanted[s[i]] = 1 }
      NF == 2 { sub(/^[^:]*:/, "", $1); k = split($1, in_suites, "+"); hit = 0
                for (i = 1; i <= k; i++) if (in_suites[i] in wanted) hit = 1
                if (!hit) print $2 }')
  rest=()
  for name in "${tests[@]}"; do
    if [ "${#unwound_fast[@]}" -gt 0 ] && matches "$name" "${unwound_fast[@]}"; then
      fast+=("$name")
    else
      rest+=("$name")
    fi
  done
  tests=("${rest[@]}")
fi
rm -f "$builddir/meson-logs/testlog-fast-unwind.json"
if [ "${#fast[@]}" -gt 0 ]; then
  LSAN_OPTIONS=${LSAN_OPTIONS/fast_unwind_on_malloc=0:/} meson test -C "$builddir" --no-rebuild --print-errorlogs \
    --timeout-multiplier "$multiplier" --logbase testlog-fast-unwind "$@" "${fast[@]}" || status=$?
fi
if [ "${#tests[@]}" -gt 0 ]; then
  meson test -C "$builddir" --no-rebuild --print-errorlogs --timeout-multiplier "$multiplier" "$@" "${tests[@]}" ||
    status=$?
fi
if [ -f "$builddir/meson-logs/testlog-fast-unwind.json" ]; then
  cat "$builddir/meson-logs/testlog-fast-unwind.json" >>"$builddir/meson-logs/testlog.json"
fi
if [ "$build_status" != 0 ]; then
  echo "tests/sanitizers/run.sh: $flavour: some programs did not build (ninja exit $build_status)" >&2
  status=1
fi
exit "$status"
