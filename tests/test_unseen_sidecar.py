"""A compile pool whose sidecar died as it started, before any look of the watcher: the creator's own records (its
wait's error, torch's process.wait() of the sidecar as the shutdown returned) still tell the lost job and how the
sidecar ended; "Nothing unusual" was said before (bench/users/other_python.py, a sidecar started with another Python
that died within a tick).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.findings.sidecars import OTHER_PYTHON_ADVICE
from wp_autotrace.runtime.reads import resolve

from .logs import AC, SP, T0, LogWriter, call, kinds, report, start, watcher

MAIN_PYTHON = "/app/bundle/bin/python"


def _died_unseen(rc: int | None, exe: str | None = None) -> LogWriter:
    """main 100's first Triton kernel (wait_pool_ready at 1 s) made a SubprocPool whose sidecar 150 no tree record
    lists; the wait raised TimeoutError at 21 s; torch's atexit shutdown at 21.1 s had the ready job (0) pending
    and its process.wait() of the sidecar gave `rc`; `exe`: the program SubprocPool.__init__ started it with."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", executable=MAIN_PYTHON)
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    watcher(w, 0.1, "tree", count=1, started=[{"pid": 100, "ppid": 1, "name": "python", "cmd": "python main.py",
                                               "create_time": T0, "rss": 1 << 20, "role": "main", "via": "root"}],
            ended=[])
    call(w, 1.0, 100, 1, "main", f"{AC}:AsyncCompile.wait_pool_ready", 1, None)
    w.add(1.001, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=2, parent_call=1,
          thread="MainThread", stack=[], caller=None)
    w.add(1.5, 100, 1, "main", "return", call_id=2, duration_s=0.5, sidecar_pid=150,
          **({"sidecar_exe": exe} if exe else {}))
    w.add(21.0, 100, 1, "main", "return", call_id=1, duration_s=20.0, error="TimeoutError: ")
    w.add(21.1, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=3, thread="MainThread",
          stack=[], caller=None, pending_jobs=[0], pool_running=True)
    w.add(21.2, 100, 1, "main", "return", call_id=3, duration_s=0.1, sidecar_pid=150,
          **({"sidecar_returncode": rc} if rc is not None else {}))
    w.add(21.3, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 21.4, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 21.4}])
    watcher(w, 21.5, "leftover", how="root-exit", count=0, pids=[], procs=[])
    return w


def test_a_sidecar_no_look_saw_that_exited_non_zero_lost_the_job(tmp_path: Path) -> None:
    """torch's wait gave exit code 1: the pool's ending says so (never seen alive), and the ready job it never
    answered is told with the wait it cost, in the Answer."""
    rep = report(_died_unseen(1), tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "jobs-lost"]
    said = ("1 job(s) the compile pool of sidecar 150 never answered (it ended before the watcher's first look): "
            "main 100 waited 20.0 s in wait_pool_ready() (1.0 -> 21.0 s), until TimeoutError")
    assert said in " ".join(rep["answer"].split()), rep["answer"]
    pool: dict[str, Any] = rep["pools"][0]
    assert pool["ending"]["words"].startswith("its sidecar exited (code 1), never seen alive by the watcher"), pool
    assert "Nothing unusual" not in rep["answer"]


@pytest.mark.parametrize("rc", [0, None])
def test_a_sidecar_no_look_saw_that_torch_found_ended_cleanly_or_never_waited_for_is_not_known(
        tmp_path: Path, rc: int | None) -> None:
    """Exit code 0 (a sidecar asked to stop exits so) or no status: how it ended is not known, no job is lost."""
    rep = report(_died_unseen(rc), tmp_path)
    assert "jobs-lost" not in kinds(rep)
    assert rep["pools"][0]["ending"]["words"] == "how it ended is not known (its sidecar was not seen)"


def test_a_sidecar_no_look_saw_that_ran_another_python_is_the_cause(tmp_path: Path) -> None:
    """The creator's SubprocPool.__init__ says torch started the sidecar with /opt/py39/bin/python, not the Python
    it runs on: the failed start leads with both Pythons, the lost job under it, and Fix first is the Python's;
    the same program as the creator's is no such cause."""
    rep = report(_died_unseen(1, "/opt/py39/bin/python"), tmp_path)
    lines = rep["answer"].splitlines()
    said = ("1 compile sidecar(s) never served their pool: sidecar 150 exited (code 1) before the watcher's first "
            "look; torch started it with /opt/py39/bin/python, not the Python main 100 runs on "
            f"({MAIN_PYTHON}, Python 3.11.7)")
    assert lines[0] == f"- {said}. What follows from it:", lines
    assert lines[1].startswith("  - 1 job(s) the compile pool of sidecar 150 never answered"), lines
    fix = " ".join(rep["answer"].split("- Fix first: ", 1)[1].split())
    assert fix == " ".join(OTHER_PYTHON_ADVICE.format(exe=MAIN_PYTHON).split()) + ".", fix
    (lost,) = [f for f in rep["findings"] if f["kind"] == "jobs-lost"]
    assert lost["advice"].startswith("see sidecar-never-served for why its sidecar died"), lost["advice"]
    (tmp_path / "same").mkdir()
    assert "sidecar-never-served" not in kinds(report(_died_unseen(1, MAIN_PYTHON), tmp_path / "same"))


def test_a_capture_path_indexes_a_list() -> None:
    """resolve: a number after a list or tuple takes that item (the Popen's argv[0]); past its end, or on what is no
    list, nothing."""
    class Popen:
        args = ["/opt/py39/bin/python", "__main__.py"]

    class Pool:
        process = Popen()

    assert resolve("self.process.args.0", Pool(), None) == "/opt/py39/bin/python"
    assert resolve("self.process.args.2", Pool(), None) is None
    assert resolve("self.process.0", Pool(), None) is None
