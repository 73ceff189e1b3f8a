"""wp-autotrace cleanup: ends a run's real leftovers, spares reused pids, --dry-run signals nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.cli.cleanup import Candidate, _children_first, leftover_procs
from wp_autotrace.common.procfs import ProcReader

from .conftest import clean_env, events, run_python, wait_for_watcher

HOST = os.uname().nodename
SLEEPER = "import time; time.sleep(120)"


def _alive(pid: int, create_time: float) -> bool:
    info = ProcReader().stat(pid)
    return info is not None and abs(info["create_time"] - create_time) < 0.015


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A long-lived untraced process this test owns (its parent: reaped here)."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], env=clean_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def _record(event: str, pid: int, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "event": event, "ts": time.time(), "pid": pid, "ppid": 1, "host": HOST, "role": "main",
            "seq": 0, **fields}


def _log(path: Path, root: int, procs: list[dict[str, Any]]) -> Path:
    """A run whose (dead) root left procs behind, in the root's leftover shape."""
    records = [_record("process_start", root, run="feedc0ffee00", root_pid=root, forked=False, argv=["python"]),
               _record("leftover", root, pids=[p["pid"] for p in procs], procs=procs),
               _record("process_exit", root, how="exit")]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    proc.wait()
    return proc.pid


def _cleanup(*args: str) -> Any:
    return run_python(["-m", "wp_autotrace", "cleanup", *args], clean_env(), timeout=60)


def test_real_leftover_is_ended(tmp_path: Path) -> None:
    """A traced run leaves a child behind; cleanup verifies it against the log and ends it."""
    log = tmp_path / "run.jsonl"
    code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], "
            "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True); "
            "print(p.pid)")
    root = subprocess.run([sys.executable, "-c", code], env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                          capture_output=True, text=True, timeout=60)
    pid = int(root.stdout)
    try:
        (left,) = events(wait_for_watcher(log, 20, event="leftover"), "leftover")  # the watcher writes it
        assert pid in left["pids"]
        create_time = next(p["create_time"] for p in left["procs"] if p["pid"] == pid)
        assert _alive(pid, create_time)
        res = _cleanup(str(log), "--grace", "5")
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"ended: {pid} child" in res.stdout
        deadline = time.monotonic() + 10
        while _alive(pid, create_time) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid, create_time)
        res = _cleanup(str(log))  # again: nothing left to do
        assert res.returncode == 0 and f"already gone: {pid}" in res.stdout
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_pid_with_another_start_time_is_spared(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The log's start time differs from the live process's by one second: refused, never signalled."""
    info = ProcReader().stat(sleeper.pid)
    assert info is not None
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid, "create_time": info["create_time"] - 1,
                                                       "role": "compile-sidecar", "cmd": "python"}])
    res = _cleanup(str(log), "--grace", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"refused: {sleeper.pid} compile-sidecar" in res.stdout and "pid reused" in res.stdout
    time.sleep(0.2)
    assert sleeper.poll() is None


def test_dry_run_changes_nothing(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """--dry-run names what it would end and signals nothing; without it the same log ends the process."""
    info = ProcReader().stat(sleeper.pid)
    assert info is not None
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid, "create_time": info["create_time"],
                                                       "role": "compile-sidecar", "cmd": "python -c sleep"}])
    res = _cleanup(str(log), "--dry-run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"would end: {sleeper.pid} compile-sidecar" in res.stdout
    time.sleep(0.2)
    assert sleeper.poll() is None
    res = _cleanup(str(log))
    assert res.returncode == 0 and f"ended: {sleeper.pid} compile-sidecar (SIGTERM)" in res.stdout
    assert sleeper.wait(10) == -signal.SIGTERM


def test_sigkill_after_grace(tmp_path: Path) -> None:
    """A process that ignores SIGTERM gets SIGKILL after --grace."""
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"],
                            env=clean_env(), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        info = ProcReader().stat(proc.pid)
        assert info is not None
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": info["create_time"]}])
        res = _cleanup(str(log), "--grace", "0.5")
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"ended: {proc.pid} child (SIGKILL after 0.5 s)" in res.stdout
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait(10)


def test_a_running_run_is_left_alone(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """While the run's main process (here: this test) is alive, nothing is signalled; exit 3."""
    me = ProcReader().stat(os.getpid())
    info = ProcReader().stat(sleeper.pid)
    assert me is not None and info is not None
    records = [_record("process_start", os.getpid(), run="0123abcd0123", root_pid=os.getpid(), forked=False),
               _record("tree", os.getpid(), count=2, procs=[{"pid": os.getpid(), "create_time": me["create_time"]},
                                                            {"pid": sleeper.pid, "create_time": info["create_time"]}])]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cleanup(str(log))
    assert res.returncode == 3 and "still running" in res.stdout, res.stdout + res.stderr
    # No start time for the root anywhere (no tree record): its process_start time still identifies it.
    records[0]["ts"] = me["create_time"] + 0.5  # when the root wrote its process_start
    records = [records[0], _record("leftover", os.getpid(), pids=[sleeper.pid],
                                   procs=[{"pid": sleeper.pid, "create_time": info["create_time"]}])]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cleanup(str(log))
    assert res.returncode == 3 and "still running" in res.stdout, res.stdout + res.stderr
    assert sleeper.poll() is None


def test_no_start_time_or_other_host_is_refused(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """A pid without a start time in the log, or on another host, is never signalled."""
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid}])
    res = _cleanup(str(log))
    assert res.returncode == 1 and "no start time" in res.stdout, res.stdout
    text = log.read_text().replace(f'"host": "{HOST}"', '"host": "elsewhere"')
    log.write_text(text)
    res = _cleanup(str(log))
    assert res.returncode == 1 and "on host elsewhere" in res.stdout, res.stdout
    assert sleeper.poll() is None


def test_leftover_shapes_and_order() -> None:
    """Both leftover shapes are read; deeper processes come first."""
    old = {"pids": [5, 6], "procs": [{"pid": 5, "create_time": 1.0}]}
    new = {"how": "root-exit", "count": 2, "pids": [5, 6], "procs": [{"pid": 5, "create_time": 1.0},
                                                                    {"pid": 6, "create_time": 2.0}]}
    assert [p["pid"] for p in leftover_procs(old)] == [5, 6] and "create_time" not in leftover_procs(old)[1]
    assert [p.get("create_time") for p in leftover_procs(new)] == [1.0, 2.0]
    targets = [(Candidate("r", HOST, pid, 1.0, "x", "", None, None), {"ppid": ppid})
               for pid, ppid in ((10, 1), (12, 11), (11, 10))]
    assert [c.pid for c, _ in _children_first(targets)] == [12, 11, 10]


def test_never_init_itself_or_processes_outside_the_run(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """A crafted log naming init, cleanup's own parents, or a live process (right start time) that started
    before the run's root or after the record naming it: every one refused, none signalled."""
    reader = ProcReader()
    me, init, info = reader.stat(os.getpid()), reader.stat(1), reader.stat(sleeper.pid)
    assert me and init and info
    names = [{"pid": 1, "create_time": init["create_time"]},
             {"pid": os.getpid(), "create_time": me["create_time"]}]
    log = _log(tmp_path / "a.jsonl", _dead_pid(), names)
    res = _cleanup(str(log), "--dry-run")
    assert res.returncode == 1 and "would end" not in res.stdout, res.stdout
    assert res.stdout.count("never a run's process") == 2
    # The sleeper, named by a record written before it started.
    stale = [json.loads(line) for line in _log(tmp_path / "b.jsonl", _dead_pid(), [
        {"pid": sleeper.pid, "create_time": info["create_time"]}]).read_text().splitlines()]
    for r in stale:
        r["ts"] = info["create_time"] - 60
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stale))
    res = _cleanup(str(tmp_path / "b.jsonl"))
    assert res.returncode == 1 and "started after the record that names it" in res.stdout, res.stdout
    # The sleeper, started before the run's root did.
    later = [json.loads(line) for line in _log(tmp_path / "c.jsonl", _dead_pid(), [
        {"pid": sleeper.pid, "create_time": info["create_time"]}]).read_text().splitlines()]
    later[0]["create_time"] = info["create_time"] + 5
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in later))
    res = _cleanup(str(tmp_path / "c.jsonl"))
    assert res.returncode == 1 and "started before the run's main process" in res.stdout, res.stdout
    time.sleep(0.2)
    assert sleeper.poll() is None
