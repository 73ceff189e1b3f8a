"""``wp-autotrace doctor``: check that tracing activates in this (or another) interpreter.

Also the interpreter probe that ``run`` asks before it runs a command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from typing import Any, NamedTuple

from ...analysis.read.logread import count_events
from ...common.env import LOG_ENV, PREFIX, ROOT_ENV, RUN_ENV, WATCHED_ENV
from ...common.vocab import PROCESS_START
from ..base import OK

DOCTOR_PROBLEM = 1  # a problem was found


def without_tracer_env(environ: dict[str, str]) -> dict[str, str]:
    """A copy of an environment with every WP_AUTOTRACE* variable removed."""
    return {k: v for k, v in environ.items() if not k.startswith(PREFIX)}
INSTALL_ADVICE = "{python} -m pip install <path to a wp-autotrace checkout>"


def add_parser(sub: Any) -> None:
    """doctor's subcommand and its arguments."""
    p = sub.add_parser("doctor", help="check that tracing activates in this (or another) interpreter")
    p.add_argument("--python", help="check this interpreter instead of the current one (default: this one)")
    p.set_defaults(func=run)


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
    # a path with a slash names a file from the current folder, as the command runs it: not from the probe's folder
    python = os.path.abspath(python) if os.sep in python else python
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


def run(args: argparse.Namespace) -> int:
    from ...analysis.words.fmt import escape

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
        starts = count_events(log, event=PROCESS_START) if os.path.exists(log) else 0
        say(starts == 1, f"a child interpreter with WP_AUTOTRACE=1 wrote {starts} process_start record(s)"
            + (f"; stderr: {stderr[:300]}" if stderr else "")
            + ("" if starts else " (python -S, or no .pth: tracing cannot start there)"))
    shell_log(say, os.environ.get(LOG_ENV, ""))
    shell_run(say, os.environ.get(RUN_ENV, ""))
    if not args.python:
        _doctor_torch(say)
    print("all good" if not problems else f"{problems} problem(s)")
    return OK if not problems else DOCTOR_PROBLEM


# Less free space than this on the log's filesystem: a run's records are dropped (one line says so) soon.
LOW_SPACE_BYTES = 1 << 20


def shell_log(say: Any, log: str) -> None:
    """The shell's own WP_AUTOTRACE_LOG, said: doctor's child writes a log of its own, while every traced run
    started from this shell writes this one. A log the start refuses (runtime/sink.py's check_log_file: a
    folder, a symlink, another user's or a shared file; a folder that is missing or not writable) makes each
    such run print one line and run untraced; a full filesystem drops its records."""
    if not log:
        return
    from ...runtime.sink import check_log_file

    folder = os.path.dirname(os.path.abspath(log))
    try:
        check_log_file(os.lstat(log), log)
        problem = ""
    except FileNotFoundError:
        problem = ("" if os.access(folder, os.W_OK | os.X_OK) else f"its folder {folder} does not exist"
                   if not os.path.isdir(folder) else f"its folder {folder} is not writable by this user")
    except OSError as exc:
        problem = str(exc)
    if problem:
        say(False, f"{LOG_ENV}={log} (set in this shell): {problem}; every traced run started from here prints "
                   "one line and runs untraced")
        return
    try:
        st = os.statvfs(folder)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = LOW_SPACE_BYTES
    if free < LOW_SPACE_BYTES:
        say(False, f"{LOG_ENV}={log} (set in this shell): its filesystem has {free} bytes free; a traced run's "
                   "records are dropped once it is full")
        return
    say(None, f"{LOG_ENV}={log} (set in this shell): every traced run started from here appends to it "
              "(`wp-autotrace report --run ID` tells one of them)")


def shell_run(say: Any, run_id: str) -> None:
    """The shell's own WP_AUTOTRACE_RUN, said: a shell below a traced run (a traced program's terminal, `wp-autotrace
    run -- bash`) passes that run on, so a program started from it with WP_AUTOTRACE=1 is one more process of that
    run, in its log, and no run of its own (doctor's child, started without it, cannot show this)."""
    if run_id:
        say(None, f"{RUN_ENV}={run_id} (set in this shell): it runs below the traced run {run_id}; a program "
                  f"started here with WP_AUTOTRACE=1 joins that run and its log, never a run of its own: start it "
                  f"with `wp-autotrace run -- ...`, or unset {RUN_ENV} {ROOT_ENV} {WATCHED_ENV} first")


def _doctor_torch(say: Any) -> None:
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    from .resolve import resolve

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

