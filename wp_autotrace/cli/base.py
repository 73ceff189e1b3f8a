"""What every command shares: the exit statuses more than one command returns, and stdout and stderr.

A command's own statuses live in its module (run.NOT_FOUND, cleanup.REFUSED, ...); main.py's
EXIT_STATUSES explains them all.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..analysis.words.fmt import skipped_line

# Exit statuses (sysexits.h numbers where one fits) that several commands return; their meanings:
# main.py EXIT_STATUSES.
OK, NO_USABLE_LOG, USAGE = 0, 2, 64
SOME_INPUT_UNREADABLE = 66  # EX_NOINPUT: a report was made, but an input named on stderr could not be read
OUTPUT_CLOSED = 74  # stdout closed or a broken pipe: nothing more can be written (EX_IOERR)
INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells say


def text_width(stream: Any) -> int:
    """Columns for the report's wrapped sections: the terminal's when stream is one, else fmt.WIDTH (100): a
    pipe, a file or CI's log reads the same everywhere."""
    import shutil

    from ..analysis.words.fmt import WIDTH

    try:
        tty = stream is not None and stream.isatty()
    except (ValueError, OSError):
        tty = False
    return shutil.get_terminal_size((WIDTH, 24)).columns if tty else WIDTH


class OutputClosed(Exception):
    """stdout is closed or its reader went away."""


def write_out(text: str) -> None:
    """Write to stdout; a closed stdout or broken pipe becomes OutputClosed."""
    out = sys.stdout
    if out is None:
        raise OutputClosed
    # A logged string the terminal's encoding cannot show (a non-UTF-8 argv's
    # surrogates, a strict locale) is shown escaped, never a failed report.
    encoding = getattr(out, "encoding", None) or "utf-8"
    text = text.encode(encoding, "backslashreplace").decode(encoding, "replace")
    try:
        out.flush()
        raw = getattr(out, "buffer", None)
        if raw is None:
            out.write(text)
            out.flush()
            return
        # Bytes, each write's count checked: under PYTHONUNBUFFERED (-u) the text layer sits on the raw
        # FileIO and drops what a short write (a reader gone mid-write) left over: a cut report, exit 0.
        view = memoryview(text.encode(encoding, "replace"))
        while view:
            n = raw.write(view)
            if not n:  # None: a non-blocking stdout would block
                raise OutputClosed
            view = view[n:]
        raw.flush()
    except (BrokenPipeError, ValueError, OSError) as exc:
        raise OutputClosed from exc


def warn_inputs(data: Any, skipped: bool = True) -> int:
    """Name each unreadable input (and what was skipped) on stderr; the exit status they call for."""
    for problem in data.problems:
        print(f"wp-autotrace: cannot read {problem}", file=sys.stderr)
    line = skipped_line(data.skipped) if skipped else ""
    if line:
        print(f"wp-autotrace: {line}", file=sys.stderr)
    return SOME_INPUT_UNREADABLE if data.problems else OK


def dumps(value: Any, indent: int | None = None) -> str:
    """value as JSON, indented by indent spaces (None: on one line).

    Indented, json's encoder runs in pure Python (its C encoder only writes one line): the one line is written in
    C and msgspec (when installed; loaded only here) indents it. The same text: msgspec's format copies every
    token as written and puts the newlines and spaces where json's indent does ("key": value, empty [] and {})."""
    # allow_nan=False: the reader has already made every number finite; never print NaN.
    text = json.dumps(value, allow_nan=False, default=str)
    if indent is None:
        return text
    try:
        import msgspec
    except ImportError:  # pragma: no cover - msgspec missing: json's own indent
        return json.dumps(value, indent=indent, allow_nan=False, default=str)
    if indent >= 1:  # msgspec's indent 0 is one line, json's is a newline per item
        try:
            formatted: str = msgspec.json.format(text, indent=indent)
            return formatted
        except msgspec.DecodeError:  # a lone surrogate's escape (a log's undecodable bytes), which msgspec refuses
            pass
    return json.dumps(value, indent=indent, allow_nan=False, default=str)


def seconds(text: str) -> float:
    """A positive number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value

