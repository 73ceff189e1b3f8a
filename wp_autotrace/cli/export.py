"""``wp-autotrace export LOG...``: a timeline, as Chrome Trace JSON for Perfetto or OTLP/JSON spans (to a
file and/or an OTLP/HTTP receiver)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from typing import Any

from ..analysis.read.logread import stream_logs
from .base import USAGE, OutputClosed, warn_inputs, write_out

# export's own exit statuses (their meanings: main.py EXIT_STATUSES).
UNREACHABLE = 69  # export --endpoint: the receiver could not be reached or refused the data
CANT_CREATE = 73  # sysexits' EX_CANTCREAT: export refused its output path


def add_parser(sub: Any) -> None:
    """export's subcommand and its arguments."""
    p = sub.add_parser("export", help="a timeline: Chrome Trace JSON for Perfetto, or OpenTelemetry (OTLP/JSON)")
    p.add_argument("logs", nargs="+", metavar="LOG", help="wp_autotrace-*.jsonl file(s) to export together")
    p.add_argument("--format", choices=["chrome", "otlp"], default="chrome",
                   help="chrome: Perfetto / chrome://tracing; otlp: OTLP/JSON spans (default: chrome)")
    p.add_argument("-o", "--output", default=None,
                   help="output file (created 0600), or - for stdout (default: trace.json; spans.json for otlp, "
                        "none when --endpoint is given)")
    p.add_argument("--endpoint", metavar="URL",
                   help="otlp only: also POST the spans to this OTLP/HTTP receiver (/v1/traces is appended "
                        "when missing; default: no POST)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output file, never an input log (default: refuse)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.export.chrome import write_chrome_trace

    if args.format == "otlp":
        return _export_otlp(args)
    if args.endpoint:
        print("wp-autotrace export: --endpoint sends OTLP spans: add --format otlp (a Chrome trace has no "
              "receiver)", file=sys.stderr)
        return USAGE
    output = args.output or "trace.json"
    data = _usable_stream(args.logs)
    events = _write_output(output, lambda write: write_chrome_trace(data, write), args)
    if events is None:
        return CANT_CREATE
    if output != "-":
        print(f"wrote {events} events to {output} (open it in https://ui.perfetto.dev)", file=sys.stderr)
    return warn_inputs(data)


def _usable_stream(logs: list[str]) -> Any:
    """The logs as a stream (the exports write as they read: memory never holds the document), after its
    first record: NoUsableLog comes before any output is opened."""
    data = stream_logs(logs)
    next(iter(data.records), None)
    return data


def _export_otlp(args: argparse.Namespace) -> int:
    """OTLP/JSON to a file (default spans.json; none when only --endpoint is given) and/or an endpoint."""
    from ..analysis.export.otlp import write_otlp

    data = _usable_stream(args.logs)
    output = args.output or (None if args.endpoint else "spans.json")
    # With --endpoint, the POST's body goes to a private temporary file as it is written: never whole in memory.
    with tempfile.TemporaryFile() if args.endpoint else contextlib.nullcontext() as body:
        def make(write: Any) -> int:
            if body is None:
                return write_otlp(data, write)
            return write_otlp(data, lambda text: (write(text), body.write(text.encode())))

        spans = _write_output(output, make, args) if output else make(lambda text: None)
        if spans is None:
            return CANT_CREATE
        if output and output != "-":
            print(f"wrote {spans} spans to {output} (OTLP/JSON)", file=sys.stderr)
        status = warn_inputs(data)
        return status if body is None else _post_spans(body, args.endpoint, spans) or status


def _post_spans(body: Any, endpoint: str, spans: int) -> int:
    """POST the OTLP/JSON in body (a binary file) to the endpoint; UNREACHABLE if not delivered, else 0."""
    from ..analysis.words.fmt import escape
    from .post import post

    body.seek(0)
    try:
        url = post(body, endpoint)
    except (OSError, ValueError) as exc:
        # The receiver's own words (its status reason, a redirect's Location) are anyone's bytes: escaped, as
        # every text from outside is before it reaches a terminal.
        print(f"wp-autotrace export: spans not sent: {escape(str(exc))}", file=sys.stderr)
        return UNREACHABLE
    print(f"sent {spans} spans to {escape(url)}", file=sys.stderr)
    return 0


def _write_output(path: str, make: Any, args: argparse.Namespace) -> int | None:
    """Open an export's output through the safe opener (never an input, a symlink, ...) and let make(write)
    write into it; what make returns, or None if the output was refused."""
    from .outfile import UnsafeOutput, WriteFailed, open_output, write_file

    try:
        out = open_output(path, args.logs, args.force)
    except UnsafeOutput as exc:
        print(f"wp-autotrace export: {exc}", file=sys.stderr)
        return None
    if out is sys.stdout:
        made = make(write_out)
        write_out("\n")
        return made  # type: ignore[no-any-return]
    try:
        return write_file(out, path, make)  # type: ignore[no-any-return]
    except WriteFailed as exc:
        print(f"wp-autotrace export: {exc}", file=sys.stderr)
        raise OutputClosed from None
