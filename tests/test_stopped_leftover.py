"""A leftover stopped by SIGSTOP (state T) runs no code: the watcher's verdict writes its state, and the report says
it was left behind stopped, never "left running" (watcher/main.py leftover, findings/leftovers.py)."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

from .conftest import report_json, run_python, traced_env, wait_for_watcher

PROGRAM = textwrap.dedent('''
    import json, os, signal, subprocess, sys, time
    # each in a session of its own: the kernel ends a stopped process whose group the main's exit orphans
    # (SIGHUP, SIGCONT), and in ours it would be
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={"PATH": os.environ.get("PATH", "")}, **quiet) for _ in range(2)]
    os.kill(kids[0].pid, signal.SIGSTOP)
    while open(f"/proc/{kids[0].pid}/stat").read().rpartition(")")[2].split()[0] != "T":
        time.sleep(0.01)
    def seen():  # the watcher has both as the run's: the verdict will name them
        pids = set()
        for line in open(os.environ["WP_AUTOTRACE_LOG"]):
            if '"tree"' in line:
                pids.update(e["pid"] for e in json.loads(line).get("started", ()))
        return {k.pid for k in kids} <= pids
    while not seen():
        time.sleep(0.05)
    print(kids[0].pid, kids[1].pid, flush=True)
''')


def test_a_stopped_leftover_is_said_stopped_not_running(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    res = run_python(["-c", PROGRAM], traced_env(log))
    assert res.returncode == 0, res.stderr
    stopped, running = map(int, res.stdout.split())
    try:
        recs = wait_for_watcher(log, event="leftover")
        (verdict,) = [r for r in recs if r["event"] == "leftover"]
        states = {e["pid"]: e.get("state") for e in verdict["procs"]}
        assert states == {stopped: "T", running: None}, verdict
        rep = report_json(log)
        left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
        assert f"pid {stopped} was stopped as the verdict was written (state T" in left["text"], left
        assert left["cost"]["stopped"] == 1, left["cost"]
        assert "2 processes were left behind (1 stopped, state T) after the main process" in rep["answer"], \
            rep["answer"]
    finally:
        for pid in (stopped, running):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
