#!/usr/bin/env bash
# The format gate itself: tools/check-format.sh must pass a file as clang-format writes it, fail one that is not
# (naming it and the fix), and refuse a file that does not exist.
set -u
gate="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$(dirname "$gate")/../.clang-format" "$work/"
printf 'int main() {\n    return 0;\n}\n' > "$work/good.cpp"
printf 'int  main( ){return 0;}\n' > "$work/bad.cpp"
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }
out=$(bash "$gate" "$work/good.cpp" 2>&1); rc=$?
check '[ "$rc" -eq 0 ]' "a formatted file passes (rc $rc: $out)"
out=$(bash "$gate" "$work/good.cpp" "$work/bad.cpp" 2>&1); rc=$?
check '[ "$rc" -eq 1 ]' "an unformatted file fails (rc $rc)"
check '[[ "$out" == *bad.cpp* && "$out" != *"  $work/good.cpp"* && "$out" == *"-i "* ]]' "the report names it and the fix"
out=$(bash "$gate" "$work/none.cpp" 2>&1); rc=$?
check '[ "$rc" -eq 2 ]' "a missing file is a usage error (rc $rc)"
exit "$fail"
