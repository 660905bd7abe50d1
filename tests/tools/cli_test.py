#!/usr/bin/env python3
"""Runs the real `lockstep` program and checks its manners: suggestions for mistakes, help, version, exit codes, the
bash completion script and the man page built with it, `config --check`, and a quiet self-test.

Usage: cli_test.py LOCKSTEP COMPLETION MANPAGE CASE
COMPLETION and MANPAGE are the files the build generated (tools/completion/lockstep, tools/lockstep.1).
CASE: commands (no MPI), completion, manpage, config_check, selftest_quiet (runs `lockstep launch -n 2`).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FAILURES = []
COMMANDS = ["hostcheck", "launch", "config", "env", "test", "trace", "help", "version", "completion"]


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        FAILURES.append(what)


def run(args, env=None, input_text=None, timeout=60):
    proc = subprocess.run(
        args,
        env=env if env is not None else os.environ.copy(),
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(f"$ {' '.join(args)}  -> {proc.returncode}")
    if proc.stdout:
        print(proc.stdout[-2000:])
    if proc.stderr:
        print("stderr:", proc.stderr[-2000:])
    return proc


def case_commands(lockstep, *_):
    p = run([lockstep, "lauch"])
    check(
        p.returncode == 2 and "'lauch' is not a lockstep command. Did you mean 'launch'?" in p.stderr,
        "an unknown command names the nearest one and exits 2",
    )
    p = run([lockstep, "tset"])
    check(p.returncode == 2 and "Did you mean 'test'?" in p.stderr, "a transposition is one edit")
    p = run([lockstep, "frobnicate"])
    check(
        p.returncode == 2 and "Did you mean" not in p.stderr and "launch" in p.stderr,
        "a word near no command lists the commands",
    )
    p = run([lockstep, "--verison"])
    check(p.returncode == 2 and "Did you mean '--version'?" in p.stderr, "an unknown top-level option: nearest one")
    p = run([lockstep, "launch", "--dryrun", "prog"])
    check(
        p.returncode == 2 and "unknown option '--dryrun'. Did you mean '--dry-run'?" in p.stderr,
        "an unknown option of a command: the nearest option of that command",
    )
    p = run([lockstep, "config", "--chek"])
    check(p.returncode == 2 and "Did you mean '--check'?" in p.stderr, "config's options are suggested too")
    p = run([lockstep, "env", "extra"])
    check(p.returncode == 2 and "unexpected argument 'extra'" in p.stderr, "a stray word is a usage error")
    p = run([lockstep, "launch", "--launcher", "opnmpi", "prog"])
    check(
        p.returncode == 2
        and "is not one of auto, openmpi, hydra, srun" in p.stderr
        and "Did you mean 'openmpi'?" in p.stderr,
        "a value outside the accepted words: listed, nearest one named",
    )
    p = run([lockstep, "launch", "-n", "0", "prog"])
    check(p.returncode == 2 and "whole number" in p.stderr and "INT" not in p.stderr, "a range error in words")
    p = run([lockstep, "launch", "--timeout"])
    check(p.returncode == 2 and "--timeout needs a value" in p.stderr, "a missing value is named")
    p = run([lockstep])
    check(p.returncode == 2 and "a command is required" in p.stderr, "no command: usage error")

    versions = [run([lockstep, *a]) for a in (["version"], ["-V"], ["--version"])]
    pattern = r"lockstep \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,40}|unknown)\)\n"
    check(
        all(v.returncode == 0 and re.fullmatch(pattern, v.stdout) for v in versions)
        and len({v.stdout for v in versions}) == 1,
        "version, -V and --version print the version with the commit",
    )

    top = run([lockstep, "help"])
    check(top.returncode == 0 and top.stdout.startswith("Usage: lockstep [OPTIONS] COMMAND"), "lockstep help")
    check(top.stdout == run([lockstep, "--help"]).stdout, "lockstep help is lockstep --help")
    check(all(re.search(rf"^  {c}\s", top.stdout, re.M) for c in COMMANDS), "every command is listed")
    for command in COMMANDS:
        p = run([lockstep, "help", command])
        q = run([lockstep, command, "--help"])
        check(p.returncode == 0 and p.stdout == q.stdout, f"help {command} is {command} --help")
        check(
            p.stdout.count("Usage:") == 1 and p.stdout.startswith(f"Usage: lockstep {command}"),
            f"{command}: one usage line, first",
        )
        jargon = [j for j in ("TEXT", "INT:", "UINT", "Excludes:", "REQUIRED", "Positionals", " in [") if j in p.stdout]
        check(not jargon, f"{command}: no parser jargon ({jargon})")
    p = run([lockstep, "help", "launch"])
    check(p.stdout.startswith("Usage: lockstep launch [OPTIONS] [--] PROGRAM [ARGS...]\n"), "launch shows PROGRAM")
    check(
        "--launcher auto|openmpi|hydra|srun" in p.stdout and "(default: auto)" in p.stdout,
        "accepted words and defaults are shown",
    )
    p = run([lockstep, "help", "lauch"])
    check(p.returncode == 2 and "Did you mean 'launch'?" in p.stderr, "help of an unknown command: nearest one")


def complete(script, words):
    """What the completion function offers for the command line `words` (the last word is being completed)."""
    line = " ".join(words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={line!r}\nCOMP_POINT={len(line)}\n"
        "_lockstep\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, timeout=30)
    print(f"complete {words!r} -> {p.stdout.split()} {p.stderr}")
    return p.stdout.split()


def case_completion(lockstep, script, _):
    check(os.path.exists(script), f"the build generated {script}")
    p = run([lockstep, "completion", "bash"])
    check(p.returncode == 0 and p.stdout == open(script).read(), "the installed script is what the program prints")
    p = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f"source {script} && complete -p lockstep"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    check(p.returncode == 0 and "-F _lockstep" in p.stdout and p.stderr == "", "the script loads in bash")
    check(complete(script, ["lockstep", "lau"]) == ["launch"], "a command is completed")
    check(set(complete(script, ["lockstep", ""])) >= set(COMMANDS), "every command is offered")
    check(complete(script, ["lockstep", "launch", "--dry"]) == ["--dry-run"], "a command's option is completed")
    check(complete(script, ["lockstep", "launch", "--launcher", "op"]) == ["openmpi"], "an option's accepted words")
    check(complete(script, ["lockstep", "env", "--color", ""]) == ["auto", "always", "never"], "env --color words")
    check(complete(script, ["lockstep", "help", "con"]) == ["config"], "help completes command names")
    check(complete(script, ["lockstep", "trace", "s"]) == ["show"], "trace completes its actions")
    check(
        complete(script, ["lockstep", "launch", "-n", "2", "./train", "--de"]) == [],
        "the launched program's own options are left alone",
    )
    check(complete(script, ["lockstep", "config", "--file", "x"]) == [], "an option's value is left to file names")
    # Every option that `help` shows is offered for completion.
    for command in COMMANDS:
        text = run([lockstep, "help", command]).stdout
        shown = set(re.findall(r"^  (?:-\w, )?(--[\w-]+)", text, re.M))
        offered = set(complete(script, ["lockstep", command, "--"]))
        check(shown <= offered, f"{command}: every option shown is completed ({sorted(shown - offered)} missing)")


def case_manpage(lockstep, _, manpage):
    check(os.path.exists(manpage), f"the build generated {manpage}")
    text = open(manpage).read()
    check(text.startswith(".TH LOCKSTEP 1"), "a section 1 man page")
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS", "FILES"):
        check(f".SH {section}" in text, f"section {section}")
    for command in COMMANDS:
        check(f".SS {command}\n" in text, f"command {command} has its subsection")
    check("\\-\\-dry\\-run" in text and "\\-\\-check" in text, "options are in the page, escaped for roff")
    version = run([lockstep, "--version"]).stdout.strip()
    check(version.replace("-", "\\-") in text, "the page carries the version and commit")
    if shutil.which("man") and shutil.which("groff"):
        p = subprocess.run(
            ["man", "-l", manpage],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, MANWIDTH="100", MANPAGER="cat", PAGER="cat"),
        )
        check(p.returncode == 0 and "lockstep launch [OPTIONS] [--] PROGRAM" in p.stdout, "man renders it")


def case_config_check(lockstep, *_):
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKSTEP_") and k != "XDG_CONFIG_HOME"}
        env["HOME"] = os.path.join(tmp, "home")
        default = os.path.join(env["HOME"], ".config", "lockstep", "config.yaml")
        p = run([lockstep, "config", "--check"], env)
        check(
            p.returncode == 0 and f"no file at {default}" in p.stdout,
            "without FILE or a default file: says which file it looked for",
        )
        run([lockstep, "config", "--default"], env)
        p = run([lockstep, "config", "--check"], env)
        check(
            p.returncode == 0 and f"checking {default}" in p.stdout and f"{default}: valid" in p.stdout,
            "without FILE: checks the default file and says which",
        )
        p = run([lockstep, "config", "--check", default], env)
        check(
            p.returncode == 0 and "(given to --check)" in p.stdout and "API argument" not in p.stdout,
            "a valid file: exit 0, its source is --check",
        )
        typo = os.path.join(tmp, "typo.yaml")
        with open(typo, "w") as f:
            f.write("lockstep: 1\ntimout: 3\n")
        p = run([lockstep, "config", "--check", typo], env)
        check(
            p.returncode == 1
            and "valid\n" not in p.stdout
            and "not valid" in p.stderr
            and "'timout'" in p.stderr
            and "did you mean 'timeout'" in p.stderr,
            "an unknown key: exit 1, not called valid, the key and the likely key named",
        )
        p = run([lockstep, "config", "--check"], dict(env, LOCKSTEP_CONFIG_FILE=typo))
        check(
            p.returncode == 1 and f"checking {typo} (named by LOCKSTEP_CONFIG_FILE)" in p.stdout,
            "without FILE: LOCKSTEP_CONFIG_FILE's file is the one checked",
        )
        p = run([lockstep, "config", "--check"], dict(env, LOCKSTEP_CONFIG_FILE=os.path.join(tmp, "absent.yaml")))
        check(p.returncode == 1 and "absent.yaml" in p.stderr, "a named file that is missing is a problem")
        p = run([lockstep, "config", "--check", os.path.join(tmp, "absent.yaml")], env)
        check(p.returncode == 2, "FILE that does not exist: usage error")
        written = os.path.join(tmp, "asked.yaml")
        p = run([lockstep, "config", "--interactive", "--file", written], env, input_text="2\nloud\nno\n\n\n\n\n\n")
        check(
            p.returncode == 0
            and "Your answer for debug mode cannot be used: 'loud'" in p.stdout
            and "environment LOCKSTEP_" not in p.stdout,
            "a refused answer is blamed on the answer, not a variable",
        )


def case_selftest_quiet(lockstep, *_):
    p = run([lockstep, "launch", "-n", "2", "--", lockstep, "test"], timeout=240)
    check(p.returncode == 0 and " 0 failed" in p.stdout, "the self-test passes")
    records = [line for line in p.stderr.splitlines() if re.search(r"\b(ERROR|CRITICAL)\b", line)]
    check(not records, f"a passing self-test logs no ERROR record ({records[:1]})")
    p = run([lockstep, "launch", "-n", "2", "--log-level", "info", "--", lockstep, "test"], timeout=240)
    check(
        p.returncode == 0
        and "INFO" in p.stderr
        and "expected: the deliberate shape mismatch" in p.stderr
        and "ERROR" not in p.stderr,
        "at INFO the deliberate mismatch is shown, labelled as expected",
    )


def main():
    lockstep, script, manpage, case = sys.argv[1:5]
    globals()["case_" + case](lockstep, script, manpage)
    print(f"{len(FAILURES)} failed" if FAILURES else "all checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
