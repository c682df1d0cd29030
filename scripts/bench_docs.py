"""Write a bench script's result into its own section of scripts/BENCHMARKS.md.

Each script owns the text between two marker comments:

    <!-- begin NAME -->
    ...
    <!-- end NAME -->

`write_section(NAME, table_lines, isa=...)` replaces that text with the date, the command
line, the CPU model and the ISA, then the table, so a rerun with --write-docs updates the
numbers without touching the prose around them. The markers must already be in the file:
a missing or doubled marker is an error, so a typo cannot append a stray section.
"""

import datetime
import os
import platform
import shlex
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BENCHMARKS = os.path.join(ROOT, "scripts", "BENCHMARKS.md")


def begin_marker(name):
    return f"<!-- begin {name} -->"


def end_marker(name):
    return f"<!-- end {name} -->"


def replace_section(text, name, body):
    """Return text with the lines between NAME's markers replaced by body (a string).

    The marker lines stay. Raises ValueError when a marker is missing, doubled or the end
    comes before the begin."""
    begin, end = begin_marker(name), end_marker(name)
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == begin]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(starts) != 1 or len(ends) != 1:
        raise ValueError(f"need exactly one '{begin}' and one '{end}' line "
                         f"(found {len(starts)} and {len(ends)})")
    b, e = starts[0], ends[0]
    if e < b:
        raise ValueError(f"'{end}' comes before '{begin}'")
    if body and not body.endswith("\n"):
        body += "\n"
    return "".join(lines[:b + 1]) + body + "".join(lines[e:])


def check_section(name, path=BENCHMARKS):
    """Raise (OSError, ValueError) unless path has NAME's markers: a script calls it before
    a long run, so --write-docs fails at once rather than after the measurements."""
    with open(path, encoding="utf-8") as f:
        replace_section(f.read(), name, "")


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (else what platform knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command_line(argv=None, executable=None):
    """The command as run from the repository root: interpreter, script path relative to
    the root when it lies inside it, arguments."""
    argv = list(sys.argv if argv is None else argv)
    executable = executable or sys.executable or "python3"
    if argv:
        script = os.path.abspath(argv[0])
        if script.startswith(ROOT + os.sep):
            argv[0] = os.path.relpath(script, ROOT)
    return shlex.join([executable] + argv)


def section_body(table_lines, isa, command=None, cpu=None, date=None, notes=()):
    """The section's text: date, command, CPU and ISA lines, optional notes, the table."""
    date = date or datetime.date.today().isoformat()
    command = command or command_line()
    cpu = cpu or f"{cpu_model()} ({os.cpu_count()} logical CPUs)"
    out = [f"- Date: {date}",
           f"- Command: `{command}`",
           f"- CPU: {cpu}",
           f"- ISA: {isa}"]
    out += [f"- {n}" for n in notes]
    out.append("")
    out += [line.rstrip("\n") for line in table_lines]
    return "\n".join(out) + "\n"


def write_section(name, table_lines, isa, path=BENCHMARKS, **kwargs):
    """Replace NAME's section of path (scripts/BENCHMARKS.md) with section_body(...).

    Written to a temporary file and renamed, so an interrupted run leaves the old file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    new = replace_section(text, name, section_body(table_lines, isa, **kwargs))
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, path)
    return path
