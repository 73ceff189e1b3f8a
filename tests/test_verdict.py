"""True when read: `run` waits for the watcher's verdict; report says when it is pending; an exec'd main.

The verdict (the watcher's `leftover` record) comes a few hundred ms after the main process ends. A
reader that comes first must not say "Nothing unusual" for a run that left a process behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze

from .conftest import clean_env, run_python
from .logs import T0, LogWriter
from .procs import kill_run

# The program starts a long sleeper in a session of its own (it outlives the program), prints its pid, exits 0.
LEAVES_ONE = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
              "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, "
              "start_new_session=True); print(p.pid)")


# The same with an untraced leftover (not Python).
LEAVES_SLEEP = ("import subprocess; p = subprocess.Popen(['sleep', '120'], stdin=subprocess.DEVNULL, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True); print(p.pid)")


@pytest.mark.parametrize("program", [LEAVES_ONE, LEAVES_SLEEP], ids=["traced-python", "untraced"])
def test_run_waits_for_the_verdict_before_its_summary(tmp_path: Path, program: str) -> None:
    """`run` on a program that leaves a process behind: its summary names it (it said "Nothing unusual",
    having read the log before the watcher wrote its verdict)."""
    log = tmp_path / "run.jsonl"
    pid = 0
    try:
        res = run_python(["-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, "-c", program],
                         clean_env(), cwd=tmp_path, timeout=90)
        assert res.returncode == 0, res.stderr
        pid = int(res.stdout)
        assert "Nothing unusual" not in res.stderr, res.stderr
        assert "1 process(es) outlived the main process" in res.stderr and str(pid) in res.stderr, res.stderr
        assert "verdict pending" not in res.stderr
    finally:
        kill_run(log)
        _kill(pid)


def _leaves_one(w: LogWriter, below: bool) -> LogWriter:
    """main 100 exits at 2 s leaving child 200 alive; the watcher runs and has not written its verdict."""
    w.add(0, 100, 1, "main", "process_start", argv=["python", "train.py"], forked=False, run="r1", root_pid=100,
          create_time=T0)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=0.1, linger=60.0, run="r1", root_pid=100)
    w.add(1, 200, 100, "child", "process_start", argv=["python", "side.py"], forked=False, run="r1", root_pid=100,
          create_time=T0 + 1)
    exit_fields: dict[str, Any] = {"how": "exit", "code": 0}
    if below:
        exit_fields.update(below=[{"pid": 200, "ppid": 100, "create_time": T0 + 1, "name": "python"}], below_count=1)
    w.add(2, 100, 1, "main", "process_exit", **exit_fields)
    return w


def report_of(w: LogWriter, tmp_path: Path) -> tuple[dict[str, Any], str]:
    data = read_logs([str(w.write(tmp_path / "log.jsonl"))])
    rep = analyze(data)
    return rep, render_text(rep, data.skipped)


def test_pending_verdict_with_nothing_after_the_end_is_said(tmp_path: Path) -> None:
    """No verdict and no look after the main's end: "not known yet", never "Nothing unusual"."""
    rep, text = report_of(_leaves_one(LogWriter(), below=False), tmp_path)
    assert rep["verdict_pending"] and rep["runs"][0]["verdict_from"] is None
    assert "Nothing unusual" not in text and "Verdict pending" in text
    assert "left behind at main exit: not known yet (verdict pending" in text


def test_pending_verdict_uses_the_roots_below_list(tmp_path: Path) -> None:
    """No verdict yet, but the root listed what was below it at exit: that is what the report shows."""
    rep, text = report_of(_leaves_one(LogWriter(), below=True), tmp_path)
    assert rep["verdict_pending"] and rep["leftover_pids"] == [200] and rep["runs"][0]["verdict_from"] == "below"
    assert "verdict pending: from the main process's own list of its descendants at exit" in text
    assert "1 process(es) outlived the main process" in text


def test_pending_verdict_uses_the_last_sample_after_the_end(tmp_path: Path) -> None:
    """A sample after the main's end beats the below list: here it saw child 200 end already."""
    w = _leaves_one(LogWriter(), below=True)
    w.add(2.2, 900, 100, "watcher", "tree", count=0, started=[], run="r1", root_pid=100,
          ended=[{"pid": 200, "create_time": T0 + 1, "end": T0 + 2.1}, {"pid": 100, "create_time": T0,
                                                                       "end": T0 + 2.1}])
    rep, text = report_of(w, tmp_path)
    assert rep["verdict_pending"] and rep["runs"][0]["verdict_from"] == "sample"
    assert rep["leftover_count"] == 0 and rep["findings"] == [] and "left behind at main exit: none" in text
    assert "cleanup" not in text.split("== Findings")[1].split("==")[0]  # no cleanup advice: nothing is left


def test_the_verdict_ends_pending(tmp_path: Path) -> None:
    """Once the leftover record is there, the verdict is the answer."""
    w = _leaves_one(LogWriter(), below=True)
    w.add(2.4, 900, 100, "watcher", "leftover", how="root-exit", count=1, pids=[200], run="r1", root_pid=100,
          procs=[{"pid": 200, "ppid": 100, "create_time": T0 + 1, "rss": 1 << 20}])
    rep, text = report_of(w, tmp_path)
    assert not rep["verdict_pending"] and rep["leftover_checked"] and rep["leftover_pids"] == [200]
    assert "verdict pending" not in text


def test_possible_members_are_shown_apart(tmp_path: Path) -> None:
    """A process sharing only the root's group (tree.possible) is listed apart, never as left behind."""
    w = _leaves_one(LogWriter(), below=False)
    w.add(1.5, 900, 100, "watcher", "tree", count=2, run="r1", root_pid=100, ended=[],
          started=[{"pid": 200, "ppid": 100, "create_time": T0 + 1, "via": "child"}],
          possible=[{"pid": 300, "ppid": 1, "create_time": T0 + 1.2, "name": "less", "via": "group"}])
    w.add(2.4, 900, 100, "watcher", "leftover", how="root-exit", count=1, pids=[200], run="r1", root_pid=100,
          procs=[{"pid": 200, "ppid": 100, "create_time": T0 + 1}])
    rep, text = report_of(w, tmp_path)
    assert rep["leftover_pids"] == [200] and [e["pid"] for e in rep["possible"]] == [300]
    assert rep["possible"][0]["via"] == "group"
    assert 300 not in {p["pid"] for p in rep["processes"]}
    assert "possibly the run's (they share only its process group or session; cleanup never ends them): 300" in text


def _execs(w: LogWriter, failed: bool) -> LogWriter:
    """main 100 execs /bin/sh (it writes `exec` first); the watcher sees the sh end, no process_exit."""
    w.add(0, 100, 1, "main", "process_start", argv=["python", "wrap.py"], forked=False, run="r1", root_pid=100,
          create_time=T0)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=0.1, linger=60.0, run="r1", root_pid=100)
    w.add(0.1, 900, 100, "watcher", "tree", count=1, started=[{"pid": 100, "ppid": 1, "create_time": T0,
                                                               "via": "root"}], ended=[], run="r1", root_pid=100)
    w.add(1, 100, 1, "main", "exec", argv=["/bin/sh", "-c", "sleep 1"], executable="/bin/sh")
    if failed:
        w.add(1.01, 100, 1, "main", "tracer_error", where="exec", error="FileNotFoundError")
    w.add(2.1, 900, 100, "watcher", "tree", count=0, started=[], run="r1", root_pid=100,
          ended=[{"pid": 100, "create_time": T0, "end": T0 + 2.1}])
    w.add(2.5, 900, 100, "watcher", "leftover", how="root-killed", count=0, pids=[], procs=[], run="r1", root_pid=100)
    return w


def test_an_execd_main_is_not_killed(tmp_path: Path) -> None:
    """A main process that exec'd a non-Python program and ended: "exec'd into sh", never "killed"."""
    rep, text = report_of(_execs(LogWriter(), failed=False), tmp_path)
    assert rep["runs"][0]["state"] == "ended" and rep["runs"][0]["exec_into"] == "sh"
    assert "killed" not in text and "exec'd into sh" in text, text
    main = next(p for p in rep["processes"] if p["pid"] == 100)
    assert main["exit"] == "exec'd into sh"
    assert "cleanup" not in text


def test_a_failed_exec_is_not_an_exec(tmp_path: Path) -> None:
    """A record of the process after its exec record: the exec failed; without process_exit it was killed."""
    rep, text = report_of(_execs(LogWriter(), failed=True), tmp_path)
    assert rep["runs"][0]["state"] == "killed" and rep["runs"][0]["exec_into"] is None


def test_report_right_after_the_job_is_not_wrong(tmp_path: Path) -> None:
    """WP_AUTOTRACE=1 python p.py; wp-autotrace report LOG at once: the leftover is named (from the verdict,
    or from what is known before it, said so), never "left behind at main exit: none"."""
    log = tmp_path / "run.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    try:
        res = run_python(["-c", LEAVES_ONE], env, cwd=tmp_path, timeout=60)
        assert res.returncode == 0, res.stderr
        pid = int(res.stdout)
        rep = run_python(["-m", "wp_autotrace", "report", str(log)], clean_env(), timeout=60)
        assert rep.returncode == 0, rep.stderr
        assert "left behind at main exit: none" not in rep.stdout, rep.stdout
        assert str(pid) in rep.stdout or "not known yet (verdict pending" in rep.stdout, rep.stdout
    finally:
        kill_run(log)
        _kill(pid if "pid" in locals() else 0)


def _kill(pid: int) -> None:
    if pid > 0:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.timing
def test_await_verdict_is_bounded_without_a_watcher(tmp_path: Path) -> None:
    """A log with no watcher record: `run` does not wait for a verdict that cannot come."""
    from wp_autotrace.cli.run import WATCHER_START_WAIT_S, await_verdict

    log = tmp_path / "run.jsonl"
    log.write_text(json.dumps({"v": 1, "event": "process_start", "ts": time.time(), "pid": 5, "ppid": 1,
                               "host": "h", "role": "main", "seq": 0, "run": "r", "root_pid": 5}) + "\n")
    start = time.monotonic()
    assert await_verdict(str(log)) is False
    assert time.monotonic() - start < WATCHER_START_WAIT_S + 2


def test_a_killed_main_with_nothing_left_gets_no_cleanup_advice(tmp_path: Path) -> None:
    """The verdict says nothing was left: the report does not tell the user to run cleanup."""
    w = LogWriter()
    w.add(0, 100, 1, "main", "process_start", argv=["python", "train.py"], forked=False, run="r1", root_pid=100,
          create_time=T0)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=0.1, linger=60.0, run="r1", root_pid=100)
    # the watcher's first look saw it alive (else how it ended is not known: test_main_end_words)
    w.add(0.06, 900, 100, "watcher", "tree", count=1, ended=[], run="r1", root_pid=100,
          started=[{"pid": 100, "ppid": 1, "create_time": T0, "rss": 10 << 20, "via": "root"}])
    w.add(2.1, 900, 100, "watcher", "tree", count=0, started=[], run="r1", root_pid=100,
          ended=[{"pid": 100, "create_time": T0, "end": T0 + 2.1}])
    w.add(2.5, 900, 100, "watcher", "leftover", how="root-killed", count=0, pids=[], procs=[], run="r1",
          root_pid=100)
    rep, text = report_of(w, tmp_path)
    assert rep["runs"][0]["state"] == "killed" and "(killed, or os._exit)" in text
    assert "cleanup" not in text, text
