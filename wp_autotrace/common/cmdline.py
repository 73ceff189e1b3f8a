"""What a command line runs: Python's own argv grammar, parsed in one place.

Stdlib only, import-cheap (the host side reads its own command line with it,
the analysis labels recorded ones, the watcher names roles from it).
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# Roles recognised from a process's command line at start (script path,
# -m module or -c code). Checked in order; the first marker found wins.
ARGV_ROLES: "tuple[tuple[str, str], ...]" = (
    ("_inductor/compile_worker/__main__.py", "compile-sidecar"),
    ("_inductor/__autotune_main__.py", "autotune-worker"),
    ("quack._compile_worker", "quack-worker"),
    # Started by multiprocessing's spawn/forkserver pools; it outlives its
    # starter by a moment, by design.
    ("multiprocessing.resource_tracker", "resource-tracker"),
    # multiprocessing's forkserver: started on demand, lives until its starter exits.
    ("multiprocessing.forkserver", "forkserver"),
)

# Longest -c first line kept in a label.
MAX_CODE = 40
# Python options that take a value (the next argument, or the rest of this one).
_VALUE_OPTIONS = "WX"
# Long options that take a value.
_LONG_VALUE_OPTIONS = ("--check-hash-based-pycs",)


def basename(path: str) -> str:
    """The last part of a path as a command line names it (trailing slashes ignored)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def is_python(program: str) -> bool:
    """Whether a program name or path is a Python interpreter (python, python3.11, pypy3)."""
    name = basename(program)
    return name.startswith(("python", "pypy")) and name.rstrip("0123456789.mdu").endswith(("python", "pypy"))


def python_command(argv: "Sequence[str]") -> "tuple[str, str] | None":
    """What a Python command line runs: ("script", path), ("-m", module), ("-c", code),
    ("stdin", "") or ("repl", ""); None if argv[0] is not a Python interpreter."""
    if not argv or not is_python(argv[0]):
        return None
    return _program(argv)


def _program(argv: "Sequence[str]") -> "tuple[str, str]":
    """python_command's answer for an interpreter's argv, whatever argv[0] is called."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-" or not arg.startswith("-"):
            return ("stdin", "") if arg == "-" else ("script", arg)
        if arg.startswith("--"):
            i += 2 if arg in _LONG_VALUE_OPTIONS else 1
            continue
        for j, flag in enumerate(arg[1:], 1):
            if flag in "cm" or flag in _VALUE_OPTIONS:
                rest = arg[j + 1:]
                if not rest:
                    i += 1
                    rest = argv[i] if i < len(argv) else ""
                if flag in "cm":
                    return ("-" + flag, rest)
                break
        i += 1
    return ("repl", "")


def python_flags(argv: "Sequence[str]") -> str:
    """The one-letter options a Python command line gives the interpreter before what it runs
    ("IS" for ``python -I -S SCRIPT`` or ``python -IS SCRIPT``; -c/-m end the options)."""
    letters = ""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-" or not arg.startswith("-"):
            break
        if arg.startswith("--"):
            i += 2 if arg in _LONG_VALUE_OPTIONS else 1
            continue
        for j, flag in enumerate(arg[1:], 1):
            if flag in "cm":
                return letters
            if flag in _VALUE_OPTIONS:
                i += 0 if arg[j + 1:] else 1  # the value is the rest of this argument, or the next one
                break
            letters += flag
        i += 1
    return letters


# How the wp-autotrace command shows in a command line: it never traces itself
# (`run` execs the program, which is traced as its own interpreter starts).
CLI_SCRIPT = "wp-autotrace"
CLI_MODULE = "wp_autotrace"


def runs_own_cli(argv: "Sequence[str]") -> bool:
    """Whether an interpreter's argv runs the wp-autotrace command (its console script, or
    python -m wp_autotrace); argv[0] may be any interpreter's name."""
    kind, what = _program(argv) if argv else ("repl", "")
    return (kind, what) == ("-m", CLI_MODULE) or (kind == "script" and basename(what) == CLI_SCRIPT)


def first_line(code: str, limit: int = MAX_CODE) -> str:
    """The first non-blank line of code, shortened to limit characters."""
    line = next((s.strip() for s in code.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def own_argv() -> "list[str]":
    """This interpreter's full command line (sys.orig_argv; /proc on Python < 3.10)."""
    argv = getattr(sys, "orig_argv", None)
    if argv:
        return list(argv)
    from .procfs import proc_cmdline  # only here: a traced start-up on 3.10+ never loads procfs

    return proc_cmdline()


def role_from_cmd(cmd: str) -> "str | None":
    """The role a command line shows (a compile sidecar, say), if any."""
    for suffix, role in ARGV_ROLES:
        if suffix in cmd.replace(os.sep, "/"):
            return role
    return None
