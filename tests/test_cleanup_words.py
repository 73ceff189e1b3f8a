"""What cleanup says of a leftover that was stopped before it began (state T), and of a run whose verdict a full log
holds: the words a user of `kill` and a reader of the report would expect."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from .clock import started
from .conftest import clean_env, wait_until
from .test_cleanup import _cleanup, _dead_pid, _log

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

