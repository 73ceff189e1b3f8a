"""What cleanup says of a leftover that was stopped before it began (state T), and of a run whose verdict a full log
holds: the words a user of `kill` and a reader of the report would expect."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from wp_autotrace.analysis.fold.verdict import VERDICT_HELD, VERDICT_HELD_FIX
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze

from .clock import started
from .conftest import clean_env, wait_until
from .logs import T0
from .test_cleanup import _cleanup, _dead_pid, _log
from .test_end_unseen import GONE_PID, killed_before_the_watcher

# Handles SIGTERM (exit 7: its handler ran, not a SIGKILL), says when the handler is set.
HANDLES_TERM = ("import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
                "print('ready', flush=True)\n"
                "time.sleep(120)\n")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0]


def test_a_stopped_leftover_that_handles_sigterm_is_continued_and_said_so(tmp_path: Path) -> None:
    """A leftover stopped (SIGSTOP) whose program handles SIGTERM would stay stopped with SIGTERM alone: cleanup sends
    SIGCONT after it, its handler runs (exit 7, within the grace: no SIGKILL), and the output says it was stopped."""
    proc = subprocess.Popen([sys.executable, "-c", HANDLES_TERM], env=clean_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        os.kill(proc.pid, signal.SIGSTOP)
        wait_until(lambda: _state(proc.pid) == "T", 10, what=f"{proc.pid} to stop")
        began = started(proc.pid)
        root = _dead_pid()
        log = _log(tmp_path / "run.jsonl", root,
                   [{"pid": proc.pid, "create_time": began, "ppid": root, "via": "child", "state": "T"}])
        dry = _cleanup(str(log), "--dry-run")
        assert f"would end: {proc.pid} child, stopped (state T)" in dry.stdout, dry.stdout
        res = _cleanup(str(log), "--grace", "30")
        assert res.returncode == 0, res.stdout + res.stderr
        assert (f"ended: {proc.pid} child (SIGTERM; it was stopped (state T) when cleanup began: SIGCONT followed its "
                "SIGTERM") in res.stdout, res.stdout
        assert proc.wait(10) == 7
    finally:
        proc.kill()
        proc.wait(10)


def test_a_verdict_held_by_a_full_log_is_said_as_the_report_says_it(tmp_path: Path) -> None:
    """A main gone with no watcher record in a log that dropped records (a full disk): no proof that no watcher ran,
    its verdict waits for room. cleanup's note says the report's finding's words and its one fix, where it said
    'no verdict will come (no watcher ran ...)' of a log an hour old."""
    w = killed_before_the_watcher()
    w.add(0.6, GONE_PID, 1, "main", "tracer_error", where="log", error="OSError: [Errno 28] No space left on device",
          dropped=2)
    ago = T0 - (time.time() - 3600)  # an hour ago: long past any wait for a watcher to start
    for line in w.lines:
        line["ts"] -= ago
        if "create_time" in line:
            line["create_time"] -= ago
    log = w.write(tmp_path / "run.jsonl")
    pending = next(f for f in analyze(read_logs([str(log)]))["findings"] if f["kind"] == "verdict-pending")
    assert pending["text"].startswith(VERDICT_HELD) and pending["advice"].startswith(VERDICT_HELD_FIX), pending
    res = _cleanup(str(log))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"run r1: {VERDICT_HELD}: {VERDICT_HELD_FIX}; using what the log last showed alive" in res.stdout, res.stdout
    assert "no verdict will come" not in res.stdout and "verdict pending" not in res.stdout, res.stdout
