#!/usr/bin/env bash
# The format gate: every C++ and CUDA source of the project must be as clang-format (the root .clang-format) writes
# it. Prints the files that are not, with the command that fixes them, and exits 1; exits 0 when all are formatted.
# clang-format 14 (Debian 12's) is preferred: other versions format some constructs differently.
# With FILE arguments, checks those files (against the .clang-format above each) instead of the project's.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
formatter=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null 2>&1; then formatter=$candidate; break; fi
done
if [ -z "$formatter" ]; then
  echo "check-format: clang-format is not installed (Debian: apt-get install clang-format)" >&2
  exit 1
fi
if [ "$#" -gt 0 ]; then
  files=("$@")
elif cd "$root" && [ -d .git ] && command -v git >/dev/null 2>&1; then
  # Tracked and new files; a tracked file deleted in the work tree is not there to check.
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp' '*.h' '*.c' '*.cu' '*.cuh' |
    while read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done)
else
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o -type f \
    \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)
fi
unformatted=()
for f in "${files[@]}"; do
  if [ ! -f "$f" ]; then
    echo "check-format: $f: no such file" >&2
    exit 2
  fi
  if ! "$formatter" --dry-run --Werror "$f" >/dev/null 2>&1; then unformatted+=("$f"); fi
done
if [ "${#unformatted[@]}" -ne 0 ]; then
  echo "check-format: ${#unformatted[@]} of ${#files[@]} files differ from .clang-format ($("$formatter" --version | head -n 1)):"
  printf '  %s\n' "${unformatted[@]}"
  echo "Fix them with: $formatter -i ${unformatted[*]}"
  exit 1
fi
echo "check-format: all ${#files[@]} files formatted"
