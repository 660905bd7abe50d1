#!/usr/bin/env python3
"""Writes the man page lockstep(1) from the program's own help text, so that the page says what --help says.

Usage: make_manpage.py LOCKSTEP OUTPUT

Reads `lockstep --version`, `lockstep --help` and `lockstep help COMMAND` for every command that help lists. The help
text has one form (tools/help_format.hpp): a "Usage:" line, the description, sections such as "Options:" whose rows
start with two spaces (continuation lines are indented further), then the footer. The page's date is
SOURCE_DATE_EPOCH when set (reproducible builds), else none.
"""
import datetime
import os
import re
import subprocess
import sys


def run(lockstep, *args):
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    return subprocess.run([lockstep, *args], capture_output=True, text=True, check=True, env=env, timeout=60).stdout


def escape(text):
    """Roff-safe text: backslashes and hyphens escaped, no line starting with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n"))


def parse_help(text):
    """{'usage': str, 'description': [lines], 'sections': [(title, [(name, text)])], 'footer': [lines]}"""
    lines = text.rstrip("\n").split("\n")
    parsed = {"usage": "", "description": [], "sections": [], "footer": []}
    i = 0
    if lines and lines[0].startswith("Usage: "):
        parsed["usage"] = lines[0][len("Usage: ") :]
        i = 1
    part = "description"
    rows = None
    for line in lines[i:]:
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", line):
            rows = []
            parsed["sections"].append((line[:-1], rows))
            part = "rows"
        elif part == "rows" and line.startswith("  "):
            if line.startswith("   ") and rows:  # a continuation of the row above
                name, desc = rows[-1]
                rows[-1] = (name, (desc + " " + line.strip()).strip())
            else:
                name, _, desc = line.strip().partition("  ")
                rows.append((name.strip(), desc.strip()))
        elif part == "rows" and line == "":
            part = "after rows"
        elif part == "description":
            parsed["description"].append(line)
        elif part == "after rows" and line != "":
            part = "footer"
            parsed["footer"].append(line)
        elif part == "footer":
            parsed["footer"].append(line)
    return parsed


def paragraphs(lines):
    """Lines of help text as roff paragraphs, filled by the man reader: a blank line, or a line that opens with
    "Exit status", starts a new paragraph (footers are written line by line at the help's width, not the page's)."""
    out = []
    block = []
    for line in lines + [""]:
        if (line == "" or line.startswith("Exit status")) and block:
            out += [".PP", "\n".join(escape(b) for b in block)]
            block = []
        if line != "":
            block.append(line)
    return out


def rows_roff(rows):
    out = []
    for name, desc in rows:
        out += [".TP", "\\fB" + escape(name) + "\\fR", escape(desc) if desc else ""]
    return out


def manpage(lockstep):
    version = run(lockstep, "--version").strip()
    top = parse_help(run(lockstep, "--help"))
    commands = next((rows for title, rows in top["sections"] if title == "Commands"), [])
    date = ""
    if "SOURCE_DATE_EPOCH" in os.environ:
        stamp = datetime.datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), datetime.timezone.utc)
        date = stamp.strftime("%Y-%m-%d")
    summary = " ".join(top["description"]).strip().rstrip(".")
    out = [
        f'.TH LOCKSTEP 1 "{date}" "{escape(version)}" "User Commands"',
        ".SH NAME",
        "lockstep \\- " + escape(summary[:1].lower() + summary[1:]),
        ".SH SYNOPSIS",
    ]
    helps = {name: parse_help(run(lockstep, "help", name)) for name, _ in commands}
    out += [".B lockstep", escape(top["usage"].partition(" ")[2]), ".br"]
    for name, _ in commands:
        operands = helps[name]["usage"].partition(" ")[2].partition(" ")[2]  # after "lockstep NAME"
        out += [".B lockstep " + escape(name), escape(operands), ".br"]
    out += [".SH DESCRIPTION"] + paragraphs(top["description"])
    for title, rows in top["sections"]:
        if title != "Commands":
            out += [".SH " + escape(title.upper())] + rows_roff(rows)
    out += [".SH COMMANDS"]
    for name, _ in commands:
        sub = helps[name]
        out += [".SS " + escape(name), ".B " + escape(sub["usage"])]
        out += paragraphs(sub["description"])
        for title, rows in sub["sections"]:
            out += [".PP", "\\fI" + escape(title) + "\\fR", ".RS"] + rows_roff(rows) + [".RE"]
        out += paragraphs(sub["footer"])
    out += [".SH EXIT STATUS"] + paragraphs([line for line in top["footer"] if line.startswith("Exit status")])
    out += [
        ".SH FILES",
        ".TP",
        escape(
            "$LOCKSTEP_CONFIG_FILE, else $XDG_CONFIG_HOME/lockstep/config.yaml, else ~/.config/lockstep/config.yaml"
        ),
        escape("The config file every rank reads (see lockstep config)."),
        ".SH SEE ALSO",
        "\\fBmpirun\\fR(1), \\fBsrun\\fR(1); docs/cli.md in the lockstep sources.",
    ]
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    text = manpage(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
