#!/usr/bin/env bash
# The format gate: every source of the project as its formatter writes it, and no linter finding in its scripts.
#   C++ and CUDA  clang-format, with the .clang-format above each file (clang-format 14, Debian 12's, is preferred:
#                 other versions format some constructs differently)
#   Python        black (the root pyproject.toml's [tool.black]) and flake8 (the root .flake8)
#   shell         shellcheck (.shellcheckrc): every *.sh and every file whose first line runs bash or sh
# Prints, for each checker, the files that fail and how to fix them, and exits 1; exits 0 when all pass.
# With FILE arguments, checks those files (each by its kind) instead of the project's; a file that does not exist or
# is of no kind above is a usage error (exit 2).
# The project's files are git's tracked and new files (or, outside a git checkout, what find sees), never those under
# build*/ or subprojects/ nor in another checkout inside this one (git lists none of its files either).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

missing_tool() { # TOOL PACKAGE
  echo "check-format: $1 is not installed (Debian: apt-get install $2; tools/install-deps.sh installs it)" >&2
  exit 1
}
clang_format=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null 2>&1; then clang_format=$candidate; break; fi
done
[ -n "$clang_format" ] || missing_tool clang-format clang-format
for tool in black flake8 shellcheck; do
  command -v "$tool" >/dev/null 2>&1 || missing_tool "$tool" "$tool"
done

# A script is a file without a known extension whose first line (read by the shell, no process per file) is a bash
# or sh shebang.
is_shell_script() { # FILE
  local first=""
  IFS= read -r -n 128 first <"$1" 2>/dev/null || true
  [[ $first =~ ^#!.*[/\ ](ba)?sh([[:space:]]|$) ]]
}
cpp=() python=() shell=() unknown=()
classify() { # FILE: appends it to its kind's list
  case "$1" in
    *.cpp | *.hpp | *.h | *.c | *.cu | *.cuh) cpp+=("$1") ;;
    *.py) python+=("$1") ;;
    *.sh) shell+=("$1") ;;
    *) if is_shell_script "$1"; then shell+=("$1"); else unknown+=("$1"); fi ;;
  esac
}

if [ "$#" -gt 0 ]; then
  for f in "$@"; do
    if [ ! -f "$f" ]; then
      echo "check-format: $f: no such file" >&2
      exit 2
    fi
    classify "$f"
  done
  if [ "${#unknown[@]}" -ne 0 ]; then
    echo "check-format: not C++, Python or a shell script: ${unknown[*]}" >&2
    exit 2
  fi
else
  cd "$root"
  if [ -d .git ] || [ -f .git ] && command -v git >/dev/null 2>&1; then
    # Tracked and new files; a tracked file deleted in the work tree is not there to check.
    mapfile -t files < <(git ls-files --cached --others --exclude-standard)
  else
    mapfile -t files < <(find . \( -name '.git' -o -path './build*' -o -name subprojects \) -prune -o -type f -print |
      sed 's|^\./||' | sort)
  fi
  # Another checkout inside this one (a worktree or a clone: a folder with its own .git) is not this project's.
  mapfile -t nested < <(find . -mindepth 2 \( -path './build*' -o -name subprojects \) -prune -o -name .git -print |
    sed 's|^\./||; s|/\.git$||')
  for f in "${files[@]}"; do
    case "$f" in build*/* | subprojects/* | */subprojects/*) continue ;; esac
    for n in "${nested[@]}"; do
      if [[ $f == "$n"/* ]]; then continue 2; fi
    done
    [ -f "$f" ] || continue
    case "$f" in
      *.cpp | *.hpp | *.h | *.c | *.cu | *.cuh | *.py | *.sh) classify "$f" ;;
      # Only files without an extension may be scripts named by their shebang (.ci/run, tools without .sh).
      */*.* | *.*) ;;
      *) classify "$f" ;;
    esac
  done
fi

failed=0
# C++: one clang-format run over all files; only when it fails is each file run alone, to name the ones that differ.
if [ "${#cpp[@]}" -ne 0 ] && ! "$clang_format" --dry-run --Werror "${cpp[@]}" >/dev/null 2>&1; then
  unformatted=()
  for f in "${cpp[@]}"; do
    if ! "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1; then unformatted+=("$f"); fi
  done
  if [ "${#unformatted[@]}" -ne 0 ]; then
    echo "check-format: ${#unformatted[@]} of ${#cpp[@]} files differ from .clang-format" \
      "($("$clang_format" --version | head -n 1)):"
    printf '  %s\n' "${unformatted[@]}"
    echo "Fix them with: $clang_format -i ${unformatted[*]}"
    failed=1
  fi
fi

if [ "${#python[@]}" -ne 0 ]; then
  # black --check names each file it would reformat as "would reformat PATH".
  if ! out=$(black --config "$root/pyproject.toml" --check "${python[@]}" 2>&1); then
    mapfile -t unformatted < <(sed -n 's/^would reformat //p' <<<"$out")
    if [ "${#unformatted[@]}" -eq 0 ]; then
      printf 'check-format: black failed:\n%s\n' "$out"
    else
      echo "check-format: ${#unformatted[@]} of ${#python[@]} Python files differ from black" \
        "($(black --version | head -n 1)):"
      printf '  %s\n' "${unformatted[@]}"
      echo "Fix them with: black ${unformatted[*]}"
    fi
    failed=1
  fi
  if ! out=$(flake8 --config "$root/.flake8" "${python[@]}" 2>&1); then
    printf 'check-format: flake8 (%s) finds in the Python files:\n%s\n' "$(flake8 --version | head -n 1)" "$out"
    echo "Fix each finding in the code (black fixes none of them)"
    failed=1
  fi
fi

if [ "${#shell[@]}" -ne 0 ]; then
  if ! out=$(shellcheck --format=gcc "${shell[@]}" 2>&1); then
    printf 'check-format: shellcheck (%s) finds in the shell scripts:\n%s\n' \
      "$(shellcheck --version | sed -n 's/^version: //p')" "$out"
    echo "Fix each finding (https://www.shellcheck.net/wiki/SCnnnn explains it); where the code is right, disable" \
      "that one check on that line with a comment that says why: # shellcheck disable=SCnnnn # reason"
    failed=1
  fi
fi

if [ "$failed" -ne 0 ]; then exit 1; fi
echo "check-format: all ${#cpp[@]} C++, ${#python[@]} Python and ${#shell[@]} shell files pass"
