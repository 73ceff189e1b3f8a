"""A compile sidecar started with another Python than its creator runs on (an embedding host's or a packaged
application's sys.executable): it dies as it starts, untraced, and the pool is never ready. The failed start is
told as the cause, with what the sidecar ran beside what its creator runs on, and Fix first gives torch the right
Python; a sidecar that ran its creator's own Python is not told so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .logs import AC, SP, T0, LogWriter, report

BUNDLED = "/opt/deploy/releases/2026-12-06/serving-app/runtime/bin/python3.11"  # long, as bundles' are
PLATFORM = "/usr/bin/python3.9"
RUN = {"run": "r1", "root_pid": 100}
STEP = {"file": "/opt/app/serve.py", "line": 40, "func": "<module>"}


def _other_python(sidecar_exe: str) -> LogWriter:
    """main 100 (BUNDLED) makes a pool at its first kernel; sidecar 200 runs sidecar_exe, exits 1 at 1.4 s, never
    traced (the watcher saw it, a zombie until torch's atexit reaped it); the main's wait_pool_ready times out."""
    w = LogWriter()
    w.add(0, 100, 1, "main", "process_start", argv=[BUNDLED, "/opt/app/serve.py"], executable=BUNDLED,
          python="3.11.7", forked=False, env={"TORCHINDUCTOR_COMPILE_THREADS": "2"}, create_time=T0, **RUN)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=0.1, linger=60.0, **RUN)
    w.add(0.1, 900, 100, "watcher", "tree", count=1, started=[{"pid": 100, "ppid": 1, "rss": 280 << 20,
                                                                "role": "main", "via": "root"}], ended=[], **RUN)
    w.add(0.5, 100, 1, "main", "config", settings={"compile_threads": 2, "worker_start_method": "subprocess"},
          torch_version="2.13.0+cpu")
    w.add(1.0, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait_pool_ready", call_id=1, thread="MainThread",
          stack=[STEP], caller=STEP)
    w.add(1.05, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=2, parent_call=1,
          thread="MainThread", stack=[STEP], caller=STEP)
    w.add(1.3, 100, 1, "main", "return", call_id=2, duration_s=0.25, sidecar_pid=200, quiesce_after_s=60)
    cmd = f"{sidecar_exe} /opt/app/lib/python3.11/site-packages/torch/_inductor/compile_worker/__main__.py --kind=fork"
    w.add(1.32, 900, 100, "watcher", "tree", count=2, started=[
        {"pid": 200, "ppid": 100, "name": "python", "create_time": T0 + 1.26, "rss": 8 << 20, "cmd": cmd,
         "role": "compile-sidecar", "via": "child"}], ended=[], **RUN)
    w.add(1.42, 900, 100, "watcher", "tree", count=1, started=[], ended=[
        {"pid": 200, "create_time": T0 + 1.26, "end": T0 + 1.4, "seen": T0 + 1.32}], zombies=[
        {"pid": 200, "create_time": T0 + 1.26, "ppid": 100, "since": T0 + 1.4, "status": 256}], **RUN)
    w.add(21.0, 100, 1, "main", "return", call_id=1, duration_s=20.0, error="TimeoutError: ")
    w.add(21.1, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=3, thread="MainThread",
          stack=[], pending_jobs=[1], pool_running=True)
    w.add(21.2, 100, 1, "main", "return", call_id=3, duration_s=0.1, sidecar_pid=200, sidecar_returncode=1)
    w.add(21.25, 900, 100, "watcher", "tree", count=1, started=[], ended=[],
          reaped=[{"pid": 200, "create_time": T0 + 1.26, "end": T0 + 21.2}], **RUN)
    label = f"{SP}:SubprocPool.submit"
    w.add(21.3, 100, 1, "main", "process_exit", how="exception", counts={label: 1}, dropped=0,
          count_times={label: [T0 + 1.31, T0 + 1.31]})
    return w


def _finding(rep: dict[str, Any]) -> dict[str, Any] | None:
    return next((f for f in rep["findings"] if f["kind"] == "sidecar-never-served"), None)


def test_a_sidecar_that_ran_another_python_is_the_cause_with_both_pythons_named(tmp_path: Path) -> None:
    rep = report(_other_python(PLATFORM), tmp_path)
    f = _finding(rep)
    assert f is not None, [x["kind"] for x in rep["findings"]]
    assert f["pids"] == [200], f
    assert f"ran {PLATFORM}, not the Python main 100 runs on ({BUNDLED}, Python 3.11.7)" in f["text"], f["text"]
    assert "exited (code 1)" in f["text"], f["text"]
    answer = rep["answer"]
    first = answer.split("\n- ", 1)[0]
    assert PLATFORM in first and BUNDLED in first, answer  # the Answer's cut keeps both Pythons
    assert "never answered" in answer.split("What follows from it:", 1)[1], answer  # the lost job under it
    fix = answer.split("Fix first: ", 1)[1]
    assert fix.startswith(f"give torch the Python the job runs on: sys.executable = '{BUNDLED}'"), fix
    assert "make a new pool after" not in fix, fix
    lost = next(x for x in rep["findings"] if x["kind"] == "jobs-lost")  # under Findings: points at its cause
    assert lost["advice"].startswith("see sidecar-never-served for why its sidecar died"), lost["advice"]


@pytest.mark.parametrize("exe", [BUNDLED, ""], ids=["its_own_python", "cmd_unread"])
def test_a_sidecar_that_ran_its_creators_python_is_not_told_as_another(exe: str, tmp_path: Path) -> None:
    """The same death with the creator's own Python (or a command the watcher never read) says nothing of
    another Python: the log shows no such thing."""
    w = _other_python(exe or PLATFORM)
    if not exe:
        for r in w.lines:
            for e in r.get("started") or ():
                e.pop("cmd", None)
    rep = report(w, tmp_path)
    f = _finding(rep)
    assert f is None or "not the Python" not in f["text"], f
    assert "not the Python" not in rep["answer"] and "sys.executable =" not in rep["answer"], rep["answer"]
    lost = next(x for x in rep["findings"] if x["kind"] == "jobs-lost")
    if not any(x["kind"] == "pool-died" for x in rep["findings"]):  # no finding to point at: its exit code instead
        assert "see pool-died" not in lost["advice"], lost["advice"]
        assert lost["advice"].startswith("find why first: its sidecar exited (code 1) on its own"), lost["advice"]


SPACED = "/home/me/My Envs/py/bin/python3.11"  # a folder with a space: the watcher's cmd joins argv with spaces


@pytest.mark.parametrize("other", [False, True], ids=["its_own", "another"])
def test_a_python_under_a_folder_with_a_space_is_read_whole(other: bool, tmp_path: Path) -> None:
    """The creator runs SPACED. A sidecar that ran SPACED too is not told as another Python (its command's first
    word, "/home/me/My", is not a Python); one that ran another Python under a spaced folder is named in full."""
    w = _other_python("/opt/Other Py/bin/python3.9" if other else SPACED)
    for r in w.lines:
        if r["event"] == "process_start" and r["pid"] == 100:
            r["executable"], r["argv"] = SPACED, [SPACED, "/opt/app/serve.py"]
    rep = report(w, tmp_path)
    f = _finding(rep)
    if other:
        assert f is not None and f"ran /opt/Other Py/bin/python3.9, not the Python main 100 runs on ({SPACED}" \
            in f["text"], f
    else:
        assert f is None or "not the Python" not in f["text"], f
        assert "sys.executable =" not in rep["answer"], rep["answer"]


def test_lost_jobs_point_at_pool_died_only_where_it_tells_their_pool(tmp_path: Path) -> None:
    """A pool whose sidecar was killed has a pool-died finding: the lost jobs' advice points there."""
    from .test_model import with_lost_job
    rep = report(with_lost_job(), tmp_path)
    assert "pool-died" in [x["kind"] for x in rep["findings"]], rep["findings"]
    lost = next(x for x in rep["findings"] if x["kind"] == "jobs-lost")
    assert lost["advice"].endswith("see pool-died for why it died"), lost["advice"]
