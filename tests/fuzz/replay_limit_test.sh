#!/usr/bin/env bash
# The fuzz replay's time limit (replay_main.cpp), with a harness whose input `sleep MS` sleeps: an input past the
# limit fails the replay and is named; the limit grows in proportion when the reference workload runs slower than on
# the machine the limit was set for (LOCKSTEP_FUZZ_REFERENCE_MS stands for that machine here), and never falls below
# LOCKSTEP_FUZZ_INPUT_SECONDS; SIGTERM from the test runner names the input that was running; a bad setting is a
# usage error.
# Usage: replay_limit_test.sh REPLAY_PROGRAM
set -u
replay=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'quick' >"$work/quick"
printf 'sleep 3000' >"$work/slow"
fail=0
check() { # DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
# shellcheck disable=SC2317 # called as check's command, which shellcheck does not follow
has() { [[ $1 == *"$2"* ]]; } # TEXT PART
replay() { # ENVIRONMENT...: runs the replay over both inputs with those variables
  out=$(env "$@" "$replay" "$work/quick" "$work/slow" 2>&1)
  rc=$?
}

# A machine counted as fast as the limit's (a reference time no run can beat): the limit is the 1 s given.
replay LOCKSTEP_FUZZ_INPUT_SECONDS=1 LOCKSTEP_FUZZ_REFERENCE_MS=1e9
check "an input past a 1 s limit fails the replay (rc $rc)" test "$rc" -eq 1
check "... naming it and the limit ($out)" has "$out" "ran past its time limit of 1.0 s"
check "... by its path" has "$out" "$work/slow"
check "... after the quick input passed" has "$out" "$work/quick: 5 bytes"

# A machine counted as a million times slower than the limit's: the same input is well within its limit.
replay LOCKSTEP_FUZZ_INPUT_SECONDS=1 LOCKSTEP_FUZZ_REFERENCE_MS=0.000001
check "on a slower machine the limit grows and the 3 s input passes (rc $rc: $out)" test "$rc" -eq 0
check "... and the replay says by how much" has "$out" "(1.0 s scaled by "
check "... then replays both" has "$out" "2 inputs replayed"

# The runner's own timeout (SIGTERM) while an input runs: the input is named, and the replay ends by the signal.
mark="$work/running"
LOCKSTEP_FUZZ_SELFTEST_MARK=$mark LOCKSTEP_FUZZ_INPUT_SECONDS=60 "$replay" "$work/slow" >"$work/term.out" 2>&1 &
pid=$!
for _ in $(seq 300); do
  [ -e "$mark" ] && break
  sleep 0.1
done
kill -TERM "$pid"
wait "$pid"
rc=$?
out=$(<"$work/term.out")
check "SIGTERM ends the replay by that signal (rc $rc)" test "$rc" -eq 143
check "... naming the input that was running ($out)" has "$out" "ended while running: $work/slow"

replay LOCKSTEP_FUZZ_INPUT_SECONDS=soon
check "a limit that is not a positive number is a usage error (rc $rc)" test "$rc" -eq 2
check "... saying so" has "$out" "LOCKSTEP_FUZZ_INPUT_SECONDS must be a positive number"
exit "$fail"
