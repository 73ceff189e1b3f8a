"""Python's own command-line grammar, parsed in one place: what an interpreter's argv runs (a script,
-m module, -c code, stdin, the REPL), its one-letter options, and the short labels made from them.

The analysis labels recorded command lines with it (analysis/derive/labels.py), the runtime reads its own
command line with it where it needs to (env.runs_own_cli, dists: a ``-c`` program's first line), and the
tests hold it to CPython's argument rules. Not on a traced start's path: env.runs_own_cli loads it only where
an argument names the wp-autotrace command. Stdlib only.
"""

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from collections.abc import Sequence


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
    return program(argv)


def program(argv: "Sequence[str]") -> "tuple[str, str]":
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


def first_line(code: str, limit: int = MAX_CODE) -> str:
    """The first non-blank line of code, shortened to limit characters."""
    line = next((s.strip() for s in code.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."
