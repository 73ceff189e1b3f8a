"""The wp-autotrace command: report, export, run, watch, cleanup, doctor."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from typing import Any, NamedTuple

from .. import __version__
from ..analysis.logread import NoUsableLog, read_logs, skipped_line, stream_logs
from ..common.cmdline import is_python, python_flags
from ..common.env import (
    ENABLE_ENV,
    GUARD_ENV,
    GUARD_NESTED_POOLS,
    LOG_ENV,
    RUN_IDENTITY_ENV,
    TRUE_WORDS,
    without_tracer_env,
)
from ..runtime.sink import default_log_name
from . import cleanup as cleanup_status

# Exit statuses (sysexits.h numbers where one fits). EXIT_STATUSES below is their one home:
# the help's epilog and README's table are made from it (tests/test_exit_statuses.py).
OK, NO_USABLE_LOG, USAGE = 0, 2, 64
DOCTOR_PROBLEM = 1
UNREACHABLE = 69  # export --endpoint: the receiver could not be reached or refused the data
NOT_TRACEABLE = 78  # run: the interpreter lacks the package or its .pth (a configuration problem)
NOT_FOUND = 127  # run: no such command, as shells say
CANT_CREATE = 73  # sysexits' EX_CANTCREAT: export refused its output path
SOME_INPUT_UNREADABLE = 66  # EX_NOINPUT: a report was made, but an input named on stderr could not be read
OUTPUT_CLOSED = 74  # stdout closed or a broken pipe: nothing more can be written (EX_IOERR)
INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells say
SIGNALLED = 128  # run: a program ended by signal N exits 128 + N


class ExitStatus(NamedTuple):
    """One row of the exit-status table."""

    code: str
    commands: str
    meaning: str


EXIT_STATUSES = (
    ExitStatus(str(OK), "all", "done: report or export written, nothing left to clean up, "
               "watch saw the run end (or `q`)"),
    ExitStatus(str(DOCTOR_PROBLEM), "`doctor`", "a problem was found (each one is a `[FAIL]` line)"),
    ExitStatus(str(cleanup_status.REFUSED), "`cleanup`", "a process was refused (pid reused, another owner or host, "
               "no start time), survived SIGKILL, or a live process the log names as the run's was not ended"),
    ExitStatus(str(NO_USABLE_LOG), "`report`, `export`, `watch`, `cleanup`", "no usable log: missing, empty, or no "
               "valid record; a FIFO, device or directory given as a log (refused before reading); "
               "`report --run ID` with an id the log does not hold"),
    ExitStatus(str(cleanup_status.STILL_RUNNING), "`cleanup`", "the run is still running (its main process is "
               "alive): nothing was signalled"),
    ExitStatus(str(USAGE), "all", "usage error (unknown command or option, missing argument)"),
    ExitStatus(str(SOME_INPUT_UNREADABLE), "`report`, `export`", "made, but an input (named on stderr and in "
               "`input.problems`) could not be read"),
    ExitStatus(str(UNREACHABLE), "`export --endpoint`", "the receiver could not be reached or answered with an error"),
    ExitStatus(str(CANT_CREATE), "`export`", "the output was refused: one of the input logs, a symlink, not a "
               "regular file, or an existing file without `--force` (outputs are created 0600; `-o -` writes "
               "to stdout)"),
    ExitStatus(str(OUTPUT_CLOSED), "`report`, `export`", "stdout closed, or its reader went away: nothing more "
               "is printed"),
    ExitStatus(str(NOT_TRACEABLE), "`run`", "the command's Python cannot trace (no package or no `.pth`, or "
               "`-S`): nothing was run"),
    ExitStatus(str(NOT_FOUND), "`run`", "the command was not found"),
    ExitStatus(str(INTERRUPTED), "all", "interrupted (Ctrl-C)"),
    ExitStatus(f"{SIGNALLED}+N", "`run`", "the program was ended by signal N"),
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
COMMANDS = ("report", "export", "run", "watch", "cleanup", "doctor")
INSTALL_ADVICE = "{python} -m pip install <path to a wp-autotrace checkout>"
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


class _OutputClosed(Exception):
    """stdout is closed or its reader went away."""


def _write_out(text: str) -> None:
    """Write to stdout; a closed stdout or broken pipe becomes _OutputClosed."""
    out = sys.stdout
    if out is None:
        raise _OutputClosed
    # A logged string the terminal's encoding cannot show (a non-UTF-8 argv's
    # surrogates, a strict locale) is shown escaped, never a failed report.
    encoding = getattr(out, "encoding", None) or "utf-8"
    text = text.encode(encoding, "backslashreplace").decode(encoding, "replace")
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
    from ..analysis.render import render_text
    from ..analysis.report import analyze

    data = stream_logs(args.logs)  # one streaming pass: memory grows with processes and calls, not records
    rep = analyze(data, args.run)
    if args.json:
        _write_out(_dumps(rep, indent=1) + "\n")
        return _warn_inputs(data)
    _write_out(render_text(rep, data.skipped, verbose=args.verbose))
    return _warn_inputs(data, skipped=False)


def _export(args: argparse.Namespace) -> int:
    from ..analysis.chrome import to_chrome_trace

    if args.format == "otlp":
        return _export_otlp(args)
    if args.endpoint:
        print("wp-autotrace export: --endpoint sends OTLP spans: add --format otlp (a Chrome trace has no "
              "receiver)", file=sys.stderr)
        return USAGE
    output = args.output or "trace.json"
    data = read_logs(args.logs)
    trace = to_chrome_trace(data)
    if not _write_output(output, _dumps(trace), args):
        return CANT_CREATE
    if output != "-":
        print(f"wrote {len(trace['traceEvents'])} events to {output} (open it in https://ui.perfetto.dev)",
              file=sys.stderr)
    return _warn_inputs(data)


def _export_otlp(args: argparse.Namespace) -> int:
    """OTLP/JSON to a file (default spans.json; none when only --endpoint is given) and/or an endpoint."""
    from ..analysis.otlp import to_otlp
    from .post import post

    data = stream_logs(args.logs)
    request = to_otlp(data)
    spans = sum(len(s["spans"]) for rs in request["resourceSpans"] for s in rs["scopeSpans"])
    output = args.output or (None if args.endpoint else "spans.json")
    if output:
        if not _write_output(output, _dumps(request), args):
            return CANT_CREATE
        if output != "-":
            print(f"wrote {spans} spans to {output} (OTLP/JSON)", file=sys.stderr)
    status = _warn_inputs(data)
    if args.endpoint:
        try:
            url = post(request, args.endpoint)
        except (OSError, ValueError) as exc:
            print(f"wp-autotrace export: spans not sent: {exc}", file=sys.stderr)
            return UNREACHABLE
        print(f"sent {spans} spans to {url}", file=sys.stderr)
    return status


def _write_output(path: str, text: str, args: argparse.Namespace) -> bool:
    """Write an export's text through the safe opener (never an input, a symlink, ...); False if refused."""
    from .outfile import UnsafeOutput, open_output

    try:
        out = open_output(path, args.logs, args.force)
    except UnsafeOutput as exc:
        print(f"wp-autotrace export: {exc}", file=sys.stderr)
        return False
    if out is sys.stdout:
        _write_out(text + "\n")
    else:
        with out:
            out.write(text)
    return True


SHELLS = ("sh", "bash", "dash", "zsh", "ksh")


def _python_in_script(command: list[str]) -> str | None:
    """The first Python a `sh -c SCRIPT` command names in its script, else None."""
    import shlex

    if os.path.basename(command[0]) not in SHELLS or "-c" not in command[1:-1]:
        return None
    try:
        words = shlex.split(command[command.index("-c", 1) + 1])
    except ValueError:
        return None
    return next((w for w in words if is_python(w)), None)


def _python_of(command: list[str], path: str | None) -> tuple[str | None, bool]:
    """The interpreter a command will run: itself if it is a Python, its #! line's Python, the Python a
    shell's -c script names, else the python on PATH; and whether the command says so (False: a guess)."""
    exe = shutil.which(command[0], path=path)
    if exe is None:
        return None, False
    if is_python(exe):
        return exe, True
    named = _python_in_script(command)
    if named is not None:
        return shutil.which(named, path=path) or named, True
    try:
        with open(exe, "rb") as f:
            first = f.readline(256).decode(errors="replace")
    except OSError:
        first = ""
    words = first[2:].split() if first.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    if words and is_python(words[0]):
        return shutil.which(words[0], path=path) or words[0], True
    return shutil.which("python", path=path) or shutil.which("python3", path=path), False


def _say(*lines: str) -> None:
    """`run`'s own message, on its stderr; dropped when that is closed (sys.stderr None) or fails
    (2>/dev/full): never sent to stdout, which is the program's, and never a reason not to run it."""
    err = sys.stderr
    if err is None:
        return
    try:
        print(*lines, sep="\n  ", file=err)
        err.flush()
    except (OSError, ValueError):
        pass


def _run(args: argparse.Namespace) -> int:
    """Check the interpreter, run the command traced, then print the short answer; the program's code."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _say("wp-autotrace run: give the command after --, e.g. wp-autotrace run -- python train.py")
        return USAGE
    # --log, else WP_AUTOTRACE_LOG as a traced program would take it, else the default name.
    log = os.path.abspath(args.log or os.environ.get(LOG_ENV) or default_log_name(os.uname().nodename, os.getpid()))
    env = dict(os.environ)
    # The program is a new run, with itself as the root, even if this command was started traced.
    for key in RUN_IDENTITY_ENV:
        env.pop(key, None)
    env[ENABLE_ENV] = TRUE_WORDS[0]
    env[LOG_ENV] = log
    if args.guard:
        env[GUARD_ENV] = GUARD_NESTED_POOLS
    python, told = _python_of(command, env.get("PATH"))
    if python is not None and is_python(command[0]) and "S" in python_flags(command):
        _say(f"wp-autotrace run: {command[0]} -S skips site, and so tracing; nothing was run")
        return NOT_TRACEABLE
    if python is not None:
        probe = probe_interpreter(python)
        if probe.problem:
            _say(f"wp-autotrace run: {python} cannot trace: {probe.problem}; nothing was run. Install the "
                 f"package into it ({INSTALL_ADVICE.format(python=python)}), then check with: "
                 f"wp-autotrace doctor --python {python}")
            return NOT_TRACEABLE
    if shutil.which(command[0], path=env.get("PATH")) is None:
        # Said before "logging to": no program, no log (the line would name a file never made).
        _say(f"wp-autotrace run: cannot run {command[0]}: command not found (or not executable); nothing was run")
        return NOT_FOUND
    _say(f"wp-autotrace: logging to {log}")
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        _say(f"wp-autotrace run: cannot run {command[0]}: {exc.strerror or exc}; nothing was run, no log "
             "was written")
        return NOT_FOUND
    code, forwarded = _wait_forwarding(child)
    from ..analysis.model import Waited

    waited = Waited(child.pid, code, forwarded, os.uname().nodename)
    if os.path.exists(log) and not await_verdict(log) and not _watcher_records(log):
        waited = waited._replace(no_watcher=_why_no_watcher(env))
    _summarize(log, python if told else None, waited, command[0])
    return SIGNALLED - code if code < 0 else code


def _watcher_records(log: str) -> bool:
    """Whether the log holds a watcher record (its watcher_start)."""
    try:
        with open(log, "rb") as f:
            return any(b'"role":"watcher"' in line or b'"role": "watcher"' in line for line in f)
    except OSError:
        return False


def _why_no_watcher(env: dict[str, str]) -> str:
    """Why the program's run has no watcher, as far as `run` can tell from what it gave the program."""
    from ..common.env import INTERVAL_ENV

    try:
        off = float(env.get(INTERVAL_ENV, "") or "nan") == 0
    except ValueError:
        off = False
    if off:
        return f"{INTERVAL_ENV}=0 starts none"
    return f"none wrote a record within {WATCHER_START_WAIT_S:g} s (it could not start, or the main process was pid 1)"


# The watcher writes its verdict (leftover) LEFTOVER_GRACE_S after it first misses the main process, sampling
# fast once the main process's process_exit is in the log (a killed one: at its next tick). `run` waits
# that long, two ticks (at most VERDICT_TICK_S each, whatever the interval: a watcher that samples every
# 600 s must not hold a batch job's end for 20 minutes) and this much slack for a loaded host's scheduling,
# before it summarises; then it says "verdict pending" rather than guess. It stops waiting as soon as the
# watcher is gone (its pid, from watcher_start, on this host): a dead watcher writes nothing more.
VERDICT_SLACK_S = 3.0
VERDICT_TICK_S = 1.0
# A run with no watcher record by then has none coming (WP_AUTOTRACE_SAMPLE_INTERVAL=0, or it could not
# start): nothing to wait for. The watcher writes watcher_start as soon as it runs, long before this.
WATCHER_START_WAIT_S = 1.0
VERDICT_POLL_S = 0.05


def await_verdict(log: str, clock: Any = None, sleep: Any = None) -> bool:
    """Wait, bounded, until every run in the log that has a watcher has its verdict (leftover or
    watcher_exit), or its watcher is gone; True if they all have a verdict. Reads the log
    incrementally into the run model."""
    import time

    from ..analysis.logread import Tail
    from ..analysis.model import Builder, watchers_gone
    from ..watcher.main import LEFTOVER_GRACE_S

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    builder = Builder()
    start = clock()
    try:
        tail = Tail(log)
    except OSError:
        return False
    with tail.file:
        gone = False
        while True:
            for r in tail.read():
                builder.feed(r)
            watched = [run for run in builder.model.runs.values() if run.watcher_pids]
            if not tail.behind and watched and all(run.verdict for run in watched):
                return True
            if gone and not tail.behind:
                return False  # read once more after the watcher was seen gone: no verdict will come
            waited = clock() - start
            if not watched and waited >= WATCHER_START_WAIT_S and not tail.behind:
                return False
            interval = min(max((run.interval for run in watched), default=0.0), VERDICT_TICK_S)
            if waited >= LEFTOVER_GRACE_S + 2 * interval + VERDICT_SLACK_S:
                return False
            gone = bool(watched) and all(watchers_gone(run) for run in watched if not run.verdict)
            if not tail.behind and not gone:
                sleep(VERDICT_POLL_S)


def _terminal_signals_child() -> bool:
    """True when a terminal's Ctrl-C reaches the child by itself (we are its foreground group)."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def _wait_forwarding(child: subprocess.Popen[bytes]) -> tuple[int, tuple[int, ...]]:
    """Wait for child, passing on SIGINT/SIGTERM/SIGHUP sent to us; its return code and the signals
    passed on (not a Ctrl-C the terminal sent the child itself)."""
    sent: list[int] = []

    def forward(sig: int, frame: Any) -> None:
        # Ctrl-C on a terminal goes to the whole foreground group: the child has it already.
        if sig == signal.SIGINT and _terminal_signals_child():
            return
        try:
            child.send_signal(sig)
            sent.append(sig)
        except OSError:
            pass

    forwarded = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.signal(sig, forward) for sig in forwarded}
    try:
        return child.wait(), tuple(sent)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def short_answer(log: str, waited: Any = None) -> list[str]:
    """The report's short answer for a log: the answer paragraph, then one line per finding and its advice;
    waited (analysis.model.Waited): what `run` saw of the program it ran."""
    from ..analysis.fmt import escape
    from ..analysis.render import summary_lines
    from ..analysis.report import analyze

    return [escape(line) for line in summary_lines(analyze(read_logs([log]), None, waited))]


def _summarize(log: str, python: str | None, waited: Any = None, program: str = "") -> None:
    """After the program: the short answer and where the log is, on stderr (stdout is the program's).
    python: the interpreter the command ran, None when the command does not say which."""
    if not os.path.exists(log):
        check = (f"wp-autotrace doctor --python {python}" if python else
                 f"wp-autotrace doctor --python PYTHON, naming the interpreter {program or 'the command'} ran "
                 "(it does not say which)")
        _say(f"wp-autotrace: no log was written ({log}): tracing did not start; check with: {check}")
        return
    try:
        lines = short_answer(log, waited)
    except NoUsableLog as exc:
        lines = [f"(no usable record: {exc})"]
    except Exception as exc:  # the program's exit code matters more than our summary
        lines = [f"(the report failed: {type(exc).__name__}: {exc})"]
    from ..analysis.fmt import escape

    if os.getpid() == 1:  # `unshare -fp wp-autotrace run …`, a container's entry point
        lines.append("wp-autotrace run is pid 1 here: its exit now ends every process left in this pid namespace")
    shown = escape(log)  # the user's path, shown as the report shows logged text
    _say("\nwp-autotrace:", *lines, f"log: {shown}", f"full report: wp-autotrace report {shown}")


# Run inside the interpreter being checked: where its wp_autotrace and .pth files are.
_PROBE = """
import importlib.util, os, site, sys
spec = importlib.util.find_spec("wp_autotrace")
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [getattr(site, "getusersitepackages", lambda: "")()]
pths = [os.path.join(d, "wp_autotrace.pth") for d in dirs if d and os.path.isfile(os.path.join(d, "wp_autotrace.pth"))]
print(spec.origin if spec and spec.origin else "")
print(os.pathsep.join(pths))
print(sys.flags.no_site)
editable = ""
try:  # an editable install (pip install -e) names its checkout in direct_url.json (PEP 610)
    import importlib.metadata, json, urllib.parse
    info = json.loads(importlib.metadata.distribution("wp-autotrace").read_text("direct_url.json") or "{}")
    if info.get("dir_info", {}).get("editable") and info.get("url", "").startswith("file://"):
        editable = urllib.parse.unquote(urllib.parse.urlsplit(info["url"]).path)
except Exception:
    pass
print(editable)
"""


class Probe(NamedTuple):
    """Where an interpreter finds wp_autotrace and its .pth, and what stops tracing there."""

    origin: str
    pths: str
    no_site: bool
    problem: str  # "" when tracing can start there
    editable: str = ""  # the checkout of an editable install, or ""


def probe_interpreter(python: str) -> Probe:
    """Ask python (from an empty folder, untraced) where its wp_autotrace and .pth are."""
    env = without_tracer_env(dict(os.environ))
    with tempfile.TemporaryDirectory() as tmp:
        # cwd is a fresh folder: a checkout in the current directory must not shadow the install.
        try:
            out = subprocess.run([python, "-c", _PROBE], env=env, cwd=tmp, capture_output=True, text=True,
                                 timeout=60).stdout.splitlines()
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Probe("", "", False, f"cannot run it: {exc}")  # editable: unknown
    origin, pths, no_site, editable = (out + ["", "", "", ""])[:4]
    problem = ("wp_autotrace is not importable there" if not origin
               else "no wp_autotrace.pth in its site-packages" if not pths
               else "it runs with -S: site, and so the .pth, is skipped" if no_site == "1" else "")
    return Probe(origin, pths, no_site == "1", problem, editable)


def _doctor(args: argparse.Namespace) -> int:
    from ..analysis.fmt import escape

    problems = 0

    def say(ok: bool | None, text: str) -> None:
        nonlocal problems
        mark = {True: "ok  ", False: "FAIL", None: "note"}[ok]
        problems += ok is False
        print(f"[{mark}] {escape(text)}")  # paths and a child's stderr: escaped for the terminal

    python = args.python or sys.executable
    say(None, f"interpreter: {python}")
    env = without_tracer_env(dict(os.environ))
    probe = probe_interpreter(python)
    if probe.problem.startswith("cannot run"):
        say(False, f"{python}: {probe.problem}")
        return DOCTOR_PROBLEM
    origin, pths = probe.origin, probe.pths
    advice = INSTALL_ADVICE.format(python=python)
    with tempfile.TemporaryDirectory() as tmp:
        say(bool(origin), f"wp_autotrace importable there: {origin or f'no (install it: {advice})'}")
        say(bool(pths), ".pth file: " + (pths or f"missing from site-packages (reinstall: {advice})"))
        home = os.path.dirname(os.path.dirname(origin)) if origin else ""
        if probe.editable and home == os.path.abspath(probe.editable):
            say(None, f"an editable install (pip install -e) of the checkout {probe.editable}: the .pth "
                      "imports it from there")
        elif origin and pths and not any(home == os.path.dirname(p) for p in pths.split(os.pathsep)):
            say(None, "the package imported is not the installed one beside the .pth (a checkout on "
                      "PYTHONPATH?): the .pth will import that one")
        if probe.no_site or sys.flags.no_site:
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
    from importlib.metadata import PackageNotFoundError, version

    from ..analysis.resolve import resolve

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


def _watch(args: argparse.Namespace) -> int:
    from ..analysis.fmt import escape
    from .watch import LogMoved, newest_log, watch

    log = args.log or newest_log()
    if log is None or not os.path.isfile(log):
        raise NoUsableLog(f"no such log: {log}" if log else "no wp_autotrace-*.jsonl in this folder; name the log")
    try:
        return watch(log, args.once, args.interval)
    except LogMoved:
        print(f"wp-autotrace watch: the log {escape(log)} was moved or removed while watched; stopping",
              file=sys.stderr)
        return NO_USABLE_LOG
    except OSError as exc:
        raise NoUsableLog(f"{log}: {exc.strerror or exc}") from None


def _owned_model(path: str) -> tuple[Any, int]:
    """A log's model and the uid that owns the very file read. The owner comes from fstat of the fd
    that is read (reopened through /proc/self/fd, which names that open file, not the path): a
    second lookup of the path could find another file, swapped in by a user who can write the folder."""
    from ..analysis.model import build

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # NONBLOCK: a FIFO must not hang
    alias = f"/proc/self/fd/{fd}"
    try:
        owner = os.fstat(fd).st_uid
        return build(stream_logs([alias]).records), owner
    except NoUsableLog as exc:
        raise NoUsableLog(str(exc).replace(alias, path)) from None
    except OSError as exc:
        raise OSError(str(exc).replace(alias, path)) from None
    finally:
        os.close(fd)


def _cleanup(args: argparse.Namespace) -> int:
    """Each log read and judged on its own: its candidates must be its owner's processes. cleanup reads
    the logs again between rounds (a successor forked by a leftover writes its own record); a log that
    cannot be read again keeps its last reading."""
    from .cleanup import cleanup

    last: dict[str, tuple[Any, int | None]] = {}
    unusable = []
    for path in args.logs:
        try:
            last[path] = _owned_model(path)
        except (OSError, NoUsableLog) as exc:
            unusable.append(f"{path}: {exc}")
    for problem in unusable:
        print(f"wp-autotrace: cannot read {problem}", file=sys.stderr)
    if not last:
        raise NoUsableLog("; ".join(unusable))

    def reload() -> list[tuple[Any, int | None]]:
        for path in list(last):
            try:
                last[path] = _owned_model(path)
            except (OSError, NoUsableLog):
                pass
        return list(last.values())

    return cleanup(list(last.values()), args.run, args.dry_run, args.grace, reload=reload)


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def _grace(text: str) -> float:
    """0, or a positive number of seconds up to cleanup.MAX_GRACE_S (argparse type)."""
    from .cleanup import MAX_GRACE_S

    value = 0.0 if text.strip() in ("0", "0.0") else _seconds(text)
    if value > MAX_GRACE_S:
        raise argparse.ArgumentTypeError(f"at most {MAX_GRACE_S:g} s (cleanup's whole budget: every wait is "
                                         f"capped by it): {text!r}")
    return value


class _Help(argparse.RawDescriptionHelpFormatter):
    """Keeps DESCRIPTION's line breaks and examples."""


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per task, every argument with its help and default."""
    from .cleanup import CLEANUP_BUDGET_S, DEFAULT_GRACE_S, MAX_GRACE_S
    from .watch import DEFAULT_INTERVAL_S

    parser = argparse.ArgumentParser(prog="wp-autotrace", description=DESCRIPTION, epilog=EPILOG, formatter_class=_Help)
    parser.add_argument("--version", action="version", version=f"wp-autotrace {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", title="commands")
    p = sub.add_parser("report", help="answer: who called warm_pool, which pools, what was left behind")
    p.add_argument("logs", nargs="+", metavar="LOG", help="wp_autotrace-*.jsonl file(s); several hosts/ranks merge")
    p.add_argument("--json", action="store_true", help="one JSON object with stable keys (default: text)")
    p.add_argument("--run", metavar="ID", help="report only this run (a log can hold several; default: all, apart)")
    p.add_argument("--verbose", action="store_true",
                   help="text: every table row, every tree line (toolchain processes unfolded), every finding's pids "
                        "(default: short tables, toolchain folded)")
    p.set_defaults(func=_report)
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
    p.set_defaults(func=_export)
    p = sub.add_parser("run", help="run a command traced, then print the short answer: wp-autotrace run -- python "
                                   "train.py")
    p.add_argument("--log", help="log path (default: ./wp_autotrace-<host>-<pid>-<random>.jsonl)")
    p.add_argument("--guard", action="store_true", help="also set WP_AUTOTRACE_GUARD=nested-pools (default: off)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the program and its arguments")
    p.set_defaults(func=_run)
    p = sub.add_parser("watch", help="live view of a running traced run: processes, roles, RSS, open calls")
    p.add_argument("log", nargs="?", metavar="LOG", help="the run's log (default: the newest wp_autotrace-*.jsonl "
                                                          "in this folder)")
    p.add_argument("--once", action="store_true", help="print the view once as plain text and exit (default: "
                                                        "refresh until the run ends; q quits)")
    p.add_argument("--interval", type=_seconds, default=DEFAULT_INTERVAL_S, metavar="S",
                   help=f"seconds between refreshes (default: {DEFAULT_INTERVAL_S:g})")
    p.set_defaults(func=_watch)
    p = sub.add_parser("cleanup", help="end a run's leftover processes, each checked by pid, start time and owner")
    p.add_argument("logs", nargs="+", metavar="LOG", help="the run's log(s)")
    p.add_argument("--run", metavar="ID", help="only this run id (default: every run in the log)")
    p.add_argument("--dry-run", action="store_true", help="say what would be ended; signal nothing (default: off)")
    p.add_argument("--grace", type=_grace, default=DEFAULT_GRACE_S, metavar="S",
                   help=f"seconds between SIGTERM and SIGKILL, at most {MAX_GRACE_S:g} (each wait is capped by "
                        f"what is left of cleanup's {CLEANUP_BUDGET_S:g} s; default: {DEFAULT_GRACE_S:g})")
    p.set_defaults(func=_cleanup)
    p = sub.add_parser("doctor", help="check that tracing activates in this (or another) interpreter")
    p.add_argument("--python", help="check this interpreter instead of the current one (default: this one)")
    p.set_defaults(func=_doctor)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script and of python -m wp_autotrace."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.cmd is None:
            parser.error("choose a command: " + ", ".join(COMMANDS))
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
        return INTERRUPTED


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's own flush at exit cannot complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
