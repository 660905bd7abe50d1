#!/usr/bin/env bash
# The format gate itself: tools/check-format.sh must pass files as their formatters write them and without linter
# findings, fail a bad file with each of its checkers (clang-format, black, flake8 and shellcheck), naming the file
# and the fix, refuse a file that does not exist or that it has no checker for, and, run over a whole tree, skip
# build directories and subprojects.
set -u
gate="$1"
source_root="$(cd "$(dirname "$gate")/.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$source_root/.clang-format" "$work/"
printf 'int main() {\n    return 0;\n}\n' >"$work/good.cpp"
printf 'int  main( ){return 0;}\n' >"$work/bad.cpp"
printf 'import sys\n\n\ndef main():\n    return len(sys.argv)\n' >"$work/good.py"
# Lines up to 120 characters are black's and flake8's limit here (pyproject.toml, .flake8), not their default 88/79.
printf 'def long_enough():\n    return "%s"\n' "$(printf 'x%.0s' $(seq 100))" >"$work/long.py"
printf "x = {'a':1}\n" >"$work/black_bad.py"
printf 'import os\n\n\ndef main():\n    return 0\n' >"$work/flake8_bad.py"
cat >"$work/good.sh" <<'EOF'
#!/usr/bin/env bash
set -eu
echo "$1"
EOF
cat >"$work/bad.sh" <<'EOF'
#!/usr/bin/env bash
files=$(ls)
rm $files
EOF
cat >"$work/bad-script" <<'EOF'
#!/bin/bash
cd $1
EOF
printf 'just text\n' >"$work/notes"

fail=0
check() { # DESCRIPTION COMMAND...: runs COMMAND as the check
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fail=1; fi
}
# shellcheck disable=SC2317 # called as check's command, which shellcheck does not follow
has() { [[ $1 == *"$2"* ]]; }  # TEXT PART
# shellcheck disable=SC2317 # as has
lacks() { [[ $1 != *"$2"* ]]; }
run() { out=$(bash "$gate" "$@" 2>&1); rc=$?; }

run "$work/good.cpp" "$work/good.py" "$work/long.py" "$work/good.sh"
check "formatted, lint-free files pass (rc $rc: $out)" test "$rc" -eq 0

run "$work/good.cpp" "$work/bad.cpp"
check "an unformatted C++ file fails (rc $rc)" test "$rc" -eq 1
check "clang-format's report names it and the fix" has "$out" "  $work/bad.cpp"
check "... but not the formatted one" lacks "$out" "  $work/good.cpp"
check "... and the fix" has "$out" "-i $work/bad.cpp"

run "$work/good.py" "$work/black_bad.py"
check "a Python file black would reformat fails (rc $rc)" test "$rc" -eq 1
check "black's report names it and the fix" has "$out" "black $work/black_bad.py"
check "... but not the formatted one" lacks "$out" "good.py"

run "$work/good.py" "$work/flake8_bad.py"
check "a Python file with a flake8 finding fails (rc $rc)" test "$rc" -eq 1
check "flake8's finding is shown with its place" has "$out" "flake8_bad.py:1:1: F401"
check "... and black has nothing against it" lacks "$out" "black $work"

run "$work/good.sh" "$work/bad.sh"
check "a shell script with a shellcheck finding fails (rc $rc)" test "$rc" -eq 1
check "shellcheck's finding is shown with its place" has "$out" "bad.sh:3:4: note: Double quote to prevent globbing"
check "... and not for the good script" lacks "$out" "good.sh"

run "$work/bad-script"
check "a bash script without .sh, known by its shebang, is checked too (rc $rc)" test "$rc" -eq 1
check "... and its finding shown" has "$out" "bad-script:2:4"

run "$work/none.cpp"
check "a missing file is a usage error (rc $rc)" test "$rc" -eq 2
run "$work/notes"
check "a file of no kind the gate checks is a usage error (rc $rc)" test "$rc" -eq 2

# A whole tree: the gate run from its place in a copy of the project's layout, as a git checkout and as plain folders.
# Bad files under build*/ and subprojects/ are not the project's; the same file in the tree is.
tree="$work/tree"
mkdir -p "$tree/tools" "$tree/src" "$tree/build/meson-private" "$tree/build-asan" "$tree/subprojects/dep"
cp "$gate" "$tree/tools/check-format.sh"
cp "$source_root/.clang-format" "$source_root/pyproject.toml" "$source_root/.flake8" "$source_root/.shellcheckrc" \
  "$tree/"
cp "$work/good.cpp" "$work/good.py" "$work/good.sh" "$tree/src/"
cp "$work/bad.cpp" "$work/flake8_bad.py" "$tree/build/meson-private/"
cp "$work/black_bad.py" "$work/bad.sh" "$tree/build-asan/"
cp "$work/bad.sh" "$work/bad.cpp" "$tree/subprojects/dep/"
# A worktree inside the tree: a folder whose .git is a file pointing elsewhere.
mkdir -p "$tree/wt-other"
printf 'gitdir: /nonexistent/.git/worktrees/other\n' >"$tree/wt-other/.git"
cp "$work/bad.sh" "$work/black_bad.py" "$tree/wt-other/"
out=$(bash "$tree/tools/check-format.sh" 2>&1); rc=$?
check "a tree whose only bad files are under build*/, subprojects/ and a worktree passes (rc $rc: $out)" test "$rc" -eq 0
check "... counting its own files of each kind" has "$out" "all 1 C++, 1 Python and 2 shell files pass"
if git -C "$tree" init -q 2>/dev/null && git -C "$tree" add -A -f . 2>/dev/null; then
  out=$(bash "$tree/tools/check-format.sh" 2>&1); rc=$?
  check "the same tree as a git checkout, build folders added to git by force, passes (rc $rc: $out)" test "$rc" -eq 0
fi
cp "$work/bad.sh" "$tree/src/"
out=$(bash "$tree/tools/check-format.sh" 2>&1); rc=$?
check "a bad script in the tree itself fails it (rc $rc)" test "$rc" -eq 1
check "... naming it" has "$out" "src/bad.sh:3:4"
exit "$fail"
