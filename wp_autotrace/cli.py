"""The ``wp-autotrace`` command: report, export, run, doctor."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from .logread import NoUsableLog, read_logs, skipped_line

# Exit statuses, as documented in README.
OK, NO_USABLE_LOG, USAGE = 0, 2, 64
DOCTOR_PROBLEM = 1
SOME_INPUT_UNREADABLE = 3  # a report was made, but an input named on stderr could not be read
OUTPUT_CLOSED = 74  # stdout closed or a broken pipe: nothing more can be written (EX_IOERR)


class _OutputClosed(Exception):
    """stdout is closed or its reader went away."""


def _write_out(text: str) -> None:
    """Write to stdout; a closed stdout or broken pipe becomes _OutputClosed."""
    out = sys.stdout
    if out is None:
        raise _OutputClosed
    try:
        out.write(text)
        out.flush()
    except (BrokenPipeError, ValueError, OSError) as exc:
        raise _OutputClosed from exc


def _warn_inputs(data: Any, skipped: bool = True) -> int:
    """Name each unreadable input (and what was skipped) on stderr; the exit status they call for."""
    for problem in data.problems:
        print(f"wp-autotrace: cannot read {problem}", file=sys.stderr)
    line = skipped_line(data.skipped) if skipped else ""
    if line:
        print(f"wp-autotrace: {line}", file=sys.stderr)
    return SOME_INPUT_UNREADABLE if data.problems else OK


def _dumps(value: Any, indent: int | None = None) -> str:
    # allow_nan=False: the reader has already made every number finite; never print NaN.
    return json.dumps(value, indent=indent, allow_nan=False, default=str)


def _report(args: argparse.Namespace) -> int:
    from .render import render_text
    from .report import analyze

    data = read_logs(args.logs)
    rep = analyze(data, args.run)
    if args.json:
        _write_out(_dumps(rep, indent=1) + "\n")
        return _warn_inputs(data)
    _write_out(render_text(rep, data.skipped))
    return _warn_inputs(data, skipped=False)


def _export(args: argparse.Namespace) -> int:
    from .export import to_chrome_trace

    data = read_logs(args.logs)
    trace = to_chrome_trace(data)
    if args.output == "-":
        _write_out(_dumps(trace))
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(_dumps(trace))
        print(f"wrote {len(trace['traceEvents'])} events to {args.output} (open it in https://ui.perfetto.dev)",
              file=sys.stderr)
    return _warn_inputs(data)


def _run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("wp-autotrace run: give the command after --, e.g. wp-autotrace run -- python train.py",
              file=sys.stderr)
        return USAGE
    # exec keeps our pid, so the program becomes the root with this pid.
    log = os.path.abspath(args.log or f"wp_autotrace-{os.uname().nodename}-{os.getpid()}.jsonl")
    env = os.environ
    for key in ("WP_AUTOTRACE_RUN", "WP_AUTOTRACE_ROOT_PID", "WP_AUTOTRACE_NOTICE"):
        env.pop(key, None)
    env["WP_AUTOTRACE"] = "1"
    env["WP_AUTOTRACE_LOG"] = log
    if args.guard:
        env["WP_AUTOTRACE_GUARD"] = "nested-pools"
    print(f"wp-autotrace: logging to {log}; afterwards: wp-autotrace report {log}", file=sys.stderr)
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"wp-autotrace run: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return OK  # not reached


# Run inside the interpreter being checked: where its wp_autotrace and .pth files are.
_PROBE = """
import importlib.util, os, site, sys
spec = importlib.util.find_spec("wp_autotrace")
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [getattr(site, "getusersitepackages", lambda: "")()]
pths = [os.path.join(d, "wp_autotrace.pth") for d in dirs if d and os.path.isfile(os.path.join(d, "wp_autotrace.pth"))]
print(spec.origin if spec and spec.origin else "")
print(os.pathsep.join(pths))
print(sys.flags.no_site)
"""


def _doctor(args: argparse.Namespace) -> int:
    problems = 0

    def say(ok: bool | None, text: str) -> None:
        nonlocal problems
        mark = {True: "ok  ", False: "FAIL", None: "note"}[ok]
        problems += ok is False
        print(f"[{mark}] {text}")

    python = args.python or sys.executable
    say(None, f"interpreter: {python}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    with tempfile.TemporaryDirectory() as tmp:
        # cwd is a fresh folder: a checkout in the current directory must not shadow the install.
        try:
            out = subprocess.run([python, "-c", _PROBE], env=env, cwd=tmp, capture_output=True, text=True,
                                 timeout=60).stdout.splitlines()
        except (OSError, subprocess.TimeoutExpired) as exc:
            say(False, f"cannot run {python}: {exc}")
            return DOCTOR_PROBLEM
        origin, pths, no_site = (out + ["", "", ""])[:3]
        say(bool(origin), f"wp_autotrace importable there: {origin or 'no (pip install wp-autotrace into it)'}")
        say(bool(pths), ".pth file: " + (pths or "missing from site-packages (reinstall: pip install wp-autotrace)"))
        if origin and pths and not any(os.path.dirname(os.path.dirname(origin)) == os.path.dirname(p)
                                       for p in pths.split(os.pathsep)):
            say(None, "the package imported is not the installed one beside the .pth (a checkout on "
                      "PYTHONPATH?): the .pth will import that one")
        if no_site == "1" or sys.flags.no_site:
            say(False, "this interpreter runs with -S: site, and so the .pth, is skipped")
        log = os.path.join(tmp, "doctor.jsonl")
        env.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=log, WP_AUTOTRACE_SAMPLE_INTERVAL="0")
        try:
            run = subprocess.run([python, "-c", "pass"], env=env, cwd=tmp, capture_output=True, text=True,
                                 timeout=60)
            stderr = run.stderr.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            stderr = str(exc)
        starts = 0
        if os.path.exists(log):
            with open(log, "rb") as f:
                starts = sum(1 for line in f if b'"event":"process_start"' in line)
        say(starts == 1, f"a child interpreter with WP_AUTOTRACE=1 wrote {starts} process_start record(s)"
            + (f"; stderr: {stderr[:300]}" if stderr else "")
            + ("" if starts else " (python -S, or no .pth: tracing cannot start there)"))
    if not args.python:
        _doctor_torch(say)
    print("all good" if not problems else f"{problems} problem(s)")
    return OK if not problems else DOCTOR_PROBLEM


def _doctor_torch(say: Any) -> None:
    import importlib.util

    from .resolve import resolve

    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # Python < 3.8 is not supported; keep mypy calm
        return
    for dist in ("torch", "torch_npu", "intel_extension_for_pytorch"):
        try:
            say(None, f"{dist} {version(dist)}")
        except PackageNotFoundError:
            if dist == "torch":
                say(None, "torch is not installed here: nothing to trace yet")
    spec = importlib.util.find_spec("torch")  # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    found = [r for r in resolve(root) if r.name_found]
    modules = sorted({r.target.module for r in found})
    say(bool(found), f"{len(found)} target(s) resolve in this torch, in {len(modules)} module(s):")
    for r in found:
        where = f":{r.line}" if r.line else ""
        print(f"         {r.target.module}{where} {r.target.qualname or '(' + r.target.mode + ')'}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wp-autotrace", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("report", help="answer: who called warm_pool, which pools, what was left behind")
    p.add_argument("logs", nargs="+", help="wp_autotrace-*.jsonl file(s); several hosts/ranks merge")
    p.add_argument("--json", action="store_true", help="one JSON object with stable keys")
    p.add_argument("--run", metavar="ID", help="report only this run (a log can hold several)")
    p.set_defaults(func=_report)
    p = sub.add_parser("export", help="Chrome Trace Event JSON for Perfetto / chrome://tracing")
    p.add_argument("logs", nargs="+")
    p.add_argument("--format", choices=["chrome"], default="chrome")
    p.add_argument("-o", "--output", default="trace.json", help="output file, or - for stdout")
    p.set_defaults(func=_export)
    p = sub.add_parser("run", help="run a command traced: wp-autotrace run [--log PATH] -- python train.py")
    p.add_argument("--log", help="log path (default ./wp_autotrace-<host>-<pid>.jsonl)")
    p.add_argument("--guard", action="store_true", help="also set WP_AUTOTRACE_GUARD=nested-pools")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=_run)
    p = sub.add_parser("doctor", help="check that tracing activates in this (or another) interpreter")
    p.add_argument("--python", help="check this interpreter instead of the current one")
    p.set_defaults(func=_doctor)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script and of ``python -m wp_autotrace``."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and USAGE
    try:
        return int(args.func(args))
    except NoUsableLog as exc:
        print(f"wp-autotrace: nothing to report: {exc}", file=sys.stderr)
        return NO_USABLE_LOG
    except (_OutputClosed, BrokenPipeError):
        _silence_stdout()
        return OUTPUT_CLOSED
    except KeyboardInterrupt:
        return 130


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's own flush at exit cannot complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
