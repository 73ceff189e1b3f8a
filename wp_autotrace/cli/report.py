"""``wp-autotrace report LOG...``: the answers, as text or one JSON object."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..analysis.read.logread import NoUsableLog, stream_logs
from . import export
from .base import OUTPUT_CLOSED, USAGE, dumps, text_width, warn_inputs, write_out


def add_parser(sub: Any) -> None:
    """report's subcommand and its arguments."""
    p = sub.add_parser("report", help="answer: who called warm_pool, which pools, what was left behind")
    p.add_argument("logs", nargs="+", metavar="LOG", help="wp_autotrace-*.jsonl file(s); several hosts/ranks merge")
    p.add_argument("--json", action="store_true", help="one JSON object with stable keys (default: text)")
    p.add_argument("--html", action="store_true",
                   help="one self-contained HTML page (timeline, pool memory; no script, nothing fetched), "
                        "written to -o (default: report.html)")
    p.add_argument("-o", "--output", default=None,
                   help="--html: the page's file (created 0600; default report.html), or - for stdout")
    p.add_argument("--force", action="store_true",
                   help="--html: replace an existing output file, never an input log (default: refuse)")
    p.add_argument("--run", metavar="ID", help="report only this run (a log can hold several; default: all, apart)")
    p.add_argument("--verbose", action="store_true",
                   help="text: every table row, every tree line (toolchain processes unfolded), every finding's pids "
                        "(default: short tables, toolchain folded)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.present.render import render_text

    # one streaming pass: memory grows with processes and calls, not records; typed: the fold alone reads them
    data = stream_logs(args.logs, typed=True)
    if args.html:
        return _html(args, data)
    if args.output or args.force:
        print("wp-autotrace report: -o and --force go with --html (text and --json go to stdout)", file=sys.stderr)
        return USAGE
    rep = _analyzed(data, args)
    if args.json:
        write_out(dumps(rep, indent=1) + "\n")
        return warn_inputs(data)
    write_out(render_text(rep, data.skipped, verbose=args.verbose, width=text_width(sys.stdout)))
    return warn_inputs(data, skipped=False)


def _analyzed(data: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The report's model; NoUsableLog where its valid records name no process (a log cut down to its run_exit
    lines, a watcher's alone): a report of nothing would read as a run in which nothing happened ("Nothing
    unusual", "main waited 0.0 s at exit"), as watch says of the same log."""
    from ..analysis.report import analyze

    rep = analyze(data, args.run)
    if not rep["processes"]:
        raise NoUsableLog(f"no traced process in {', '.join(args.logs)}: its records name none")
    return rep


def _html(args: argparse.Namespace, data: Any) -> int:
    """The page (analysis/present/html.py) through the safe opener: never an input log, a symlink, an existing file
    without --force."""
    from ..analysis.present.html import render_html
    from ..analysis.present.render import render_text
    from .outfile import UnsafeOutput, WriteFailed, open_output, write_file

    rep = _analyzed(data, args)
    page = render_html(rep, render_text(rep, data.skipped))  # the page embeds the text report, unwrapped
    output = args.output or "report.html"
    try:
        out = open_output(output, args.logs, args.force)
    except UnsafeOutput as exc:
        print(f"wp-autotrace report: {exc}", file=sys.stderr)
        return export.CANT_CREATE  # as export's: the same refusal
    if out is sys.stdout:
        write_out(page)
    else:
        try:
            write_file(out, output, lambda write: write(page))
        except WriteFailed as exc:
            print(f"wp-autotrace report: {exc}", file=sys.stderr)
            return OUTPUT_CLOSED
        print(f"wrote {output} ({len(page.encode()) // 1024} KiB; open it in any browser, offline)", file=sys.stderr)
    return warn_inputs(data, skipped=False)
