"""The wp-autotrace command: report, export, run, watch, cleanup, doctor."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import textwrap
from typing import NamedTuple

from .. import __version__
from ..analysis.read.logread import NoUsableLog
from . import cleanup, doctor, export, report, run, watch
from .base import INTERRUPTED, NO_USABLE_LOG, OK, OUTPUT_CLOSED, SOME_INPUT_UNREADABLE, USAGE, OutputClosed

# One module per command, in the help's order. Each has add_parser(sub), which adds its subcommand and
# arguments and sets func to its run(args) -> exit status. A new command: a module with those two, named
# here, and a row in EXIT_STATUSES for each status it returns (its own statuses live in its module).
COMMAND_MODULES = (report, export, run, watch, cleanup, doctor)
COMMANDS = tuple(m.__name__.rpartition(".")[2] for m in COMMAND_MODULES)

# Exit statuses (sysexits.h numbers where one fits): each command's own in its module, the shared ones in
# base.py. EXIT_STATUSES below is where they are all explained: the help's epilog and README's table are
# made from it (tests/test_exit_statuses.py).


class ExitStatus(NamedTuple):
    """One row of the exit-status table."""

    code: str
    commands: str
    meaning: str


EXIT_STATUSES = (
    ExitStatus(str(OK), "all", "done: report or export written, nothing left to clean up, "
               "watch saw the run end (or `q`)"),
    ExitStatus(str(doctor.DOCTOR_PROBLEM), "`doctor`", "a problem was found (each one is a `[FAIL]` line)"),
    ExitStatus(str(cleanup.REFUSED), "`cleanup`", "a process was refused (pid reused, another owner or host, "
               "no start time), survived SIGKILL, or a live process the log names as the run's was not ended"),
    ExitStatus(str(NO_USABLE_LOG), "`report`, `export`, `watch`, `cleanup`", "no usable log: missing, empty, no "
               "valid record, or none of a traced process (`report`, `watch`); a FIFO, device or directory given as "
               "a log (refused before reading); `report` or `cleanup --run ID` with an id the log does not hold"),
    ExitStatus(str(cleanup.STILL_RUNNING), "`cleanup`", "the run is still running (its main process is "
               "alive): nothing was signalled"),
    ExitStatus(str(USAGE), "all", "usage error (unknown command or option, missing argument)"),
    ExitStatus(str(SOME_INPUT_UNREADABLE), "`report`, `export`", "made, but an input (named on stderr and in "
               "`input.problems`) could not be read"),
    ExitStatus(str(export.UNREACHABLE), "`export --endpoint`", "the receiver could not be reached or answered "
               "with an error"),
    ExitStatus(str(export.CANT_CREATE), "`export`, `report --html`", "the output was refused: one of the "
               "input logs, a symlink, not a regular file, or an existing file without `--force` (outputs are "
               "created 0600; `-o -` writes to stdout)"),
    ExitStatus(str(OUTPUT_CLOSED), "`report`, `export`, `watch`", "stdout closed, or its reader went away: nothing "
               "more is printed; or the output file could not be written (a full disk: the partial file is removed)"),
    ExitStatus(str(run.NOT_TRACEABLE), "`run`", "the command's Python cannot trace (no package or no `.pth`, or "
               "`-S`): nothing was run"),
    ExitStatus(str(run.NOT_FOUND), "`run`", "the command was not found"),
    ExitStatus(str(INTERRUPTED), "all", "interrupted (Ctrl-C)"),
    ExitStatus(f"{run.SIGNALLED}+N", "`run`", "the program was ended by signal N: after its summary run "
               "ends by signal N too (a shell's `$?` shows 128+N); where it cannot (pid 1) it exits 128+N"),
    ExitStatus("other", "`run`", "the program's own exit code"),
)


def exit_status_table() -> str:
    """EXIT_STATUSES as a Markdown table (README's, between its exit-statuses markers)."""
    rows = [f"| {s.code} | {s.commands} | {s.meaning} |" for s in EXIT_STATUSES]
    return "\n".join(["| code | command | meaning |", "|---|---|---|", *rows])


EPILOG_WIDTH = 100  # the help's lines: as wide as its option lists


def _exit_status_epilog() -> str:
    """EXIT_STATUSES as plain text for the help's epilog."""
    lines = ["exit statuses:"]
    for s in EXIT_STATUSES:
        text = f"{s.code:>6}  {s.commands}: {s.meaning}".replace("`", "")
        lines += textwrap.wrap(text, width=EPILOG_WIDTH, subsequent_indent=" " * 8)
    return "\n".join(lines) + "\n"
DESCRIPTION = """\
See which processes start PyTorch inductor's compile pools, from which line,
and what they leave behind.

Trace a program by setting WP_AUTOTRACE=1 when you run it:
    WP_AUTOTRACE=1 python train.py
or let the run command set it:
    wp-autotrace run -- python train.py
then read the answers:
    wp-autotrace report wp_autotrace-*.jsonl
"""
EPILOG = _exit_status_epilog()


class _Help(argparse.RawDescriptionHelpFormatter):
    """Keeps DESCRIPTION's line breaks and examples."""


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per task (each added by its module), every argument with its help
    and default."""
    parser = argparse.ArgumentParser(prog="wp-autotrace", description=DESCRIPTION, epilog=EPILOG, formatter_class=_Help)
    parser.add_argument("--version", action="version", version=f"wp-autotrace {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", title="commands")
    for command in COMMAND_MODULES:
        command.add_parser(sub)
    return parser


# The commands that fold the logs once into a model, print what it says and end.
ONE_PASS = ("report", "export")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script and of python -m wp_autotrace (argv None: the process's own command
    line, which ends when this returns); a caller's argv runs the command alone, the process left as it was."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.cmd is None:
            parser.error("choose a command: " + ", ".join(COMMANDS))
    except SystemExit as exc:
        return int(exc.code or 0) and USAGE
    # A one-pass command as the process's own: its model (a million-call log's is millions of objects, linked
    # both ways) is alive or garbage until the exit, which frees it all at once. The cyclic collector would
    # walk it again and again after the fold, and once more at the exit to free it object by object (~10% of
    # the report's CPU): off for the command, and what it made frozen (never walked again) as it returns.
    # Only then: in a process that goes on (tests, a caller's argv), freezing would keep its garbage forever.
    one_pass = argv is None and args.cmd in ONE_PASS
    if one_pass:
        gc.disable()
    try:
        return int(args.func(args))
    except NoUsableLog as exc:
        print(f"wp-autotrace: nothing to report: {exc}", file=sys.stderr)
        return NO_USABLE_LOG
    except (OutputClosed, BrokenPipeError):
        _silence_stdout()
        return OUTPUT_CLOSED
    except KeyboardInterrupt:
        return INTERRUPTED
    finally:
        if one_pass:
            gc.freeze()


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's own flush at exit cannot complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
