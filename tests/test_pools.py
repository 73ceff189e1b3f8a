"""Pool lifecycle, real memory and the pool findings on synthetic logs (no torch needed).

Each builder is a log shaped like what torch 2.13 and the watcher write (the
shapes come from real runs: tests/test_scenarios.py runs them end to end).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.derive.callers import BY_POOL_ATEXIT
from wp_autotrace.analysis.derive.errors import shadowing
from wp_autotrace.analysis.derive.gaps import IDLE_GAP_S
from wp_autotrace.analysis.derive.memseries import STALE_S
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.analysis.words.fmt import mib_s_text
from wp_autotrace.common.vocab import MEMORY_KEPT_K
from wp_autotrace.watcher import memory

from .logs import PLUGIN, T0, LogWriter, seed_log

SP = "torch._inductor.compile_worker.subproc_pool"
AC = "torch._inductor.async_compile"
USER = {"file": "/home/u/train.py", "line": 12, "func": "main"}
SPAWN_STRING = {"file": "<string>", "line": 1, "func": "<module>"}
MIB = 2**20
IDLE_MIB_S = 230 * 10.1 + 200 * 39.91
KNOBS = ["compile_threads", "quiesce_async_compile_pool", "quiesce_async_compile_time"]
SETTINGS = {"compile_threads": 2, "worker_start_method": "subprocess", "quiesce_async_compile_pool": True,
            "quiesce_async_compile_time": 60}


def report(w: LogWriter, tmp_path: Path) -> dict[str, Any]:
    return analyze(read_logs([str(w.write(tmp_path / "log.jsonl"))]))


def start(w: LogWriter, t: float, pid: int, ppid: int, role: str, forked: bool = False, argv: Any = None) -> None:
    w.add(t, pid, ppid, role, "process_start", argv=argv or ["python", f"{role}.py"], python="3.11.7",
          forked=forked, env={}, run="r1", root_pid=100, create_time=T0 + t)


def call(w: LogWriter, t: float, pid: int, ppid: int, role: str, target: str, cid: int, end: float | None,
         caller: Any = None, thread: str = "MainThread", parent: int | None = None, **ret: Any) -> None:
    extra = {"parent_call": parent} if parent is not None else {}
    w.add(t, pid, ppid, role, "call", target=target, call_id=cid, thread=thread, stack=[caller] if caller else [],
          caller=caller, **extra)
    if end is not None:
        w.add(end, pid, ppid, role, "return", call_id=cid, duration_s=end - t, **ret)


def mem(w: LogWriter, t: float, procs: list[tuple[int, float, int]], devices: Any = ()) -> None:
    """A watcher memory record: (pid, start offset, pss MiB) each."""
    w.add(t, 900, 1, "watcher", "memory", run="r1", root_pid=100,
          procs=[{"pid": pid, "create_time": T0 + st, "pss": pss * MIB, "uss": pss * MIB // 4, "rss": 4 * pss * MIB}
                 for pid, st, pss in procs],
          devices=[{"pid": pid, "create_time": T0 + st, "paths": paths} for pid, st, paths in devices])


def keep_up(w: LogWriter, a: float, b: float, procs: list[tuple[int, float, int, float]], every: float = 2.0
            ) -> None:
    """The watcher keeping up with a pool (watcher/memory.py reads each pool process every MEMORY_EVERY_S): a
    reading of each of procs (pid, start offset, PSS MiB, alive until) every 2 s from a to b (every: a loaded
    watcher's longer period). Memory at once counts a reading 1.5 x the period the watcher kept at most
    (memseries.stale_s), STALE_S at least."""
    t = a
    while t <= b:
        mem(w, t, [(pid, st, pss) for pid, st, pss, until in procs if t < until])
        t = round(t + every, 6)


# idle_pool's processes as the watcher reads them: the sidecar until its exit, the workers until the quiesce
KEPT_UP = [(200, 1.2, 200, 60.3), (301, 3.6, 15, 20.1), (302, 3.6, 15, 20.1)]


def idle_pool(quiesce_at: float | None = 20.0, shutdown_by_user: bool = False, devices: Any = (),
              quiesced_by_user: bool = False, later: float = 0.0, read: bool = True) -> LogWriter:
    """torch 2.13's ordinary path: main makes the pool at train.py:12 (first Triton kernel), the pool is ready
    at 4 s, jobs 3.5 - 10 s, the quiesce timer stops the workers at 20 s, torch's atexit shuts it down at 60 s
    (later: that many seconds later, and everything after it). read: the watcher's readings at 5, 15 and 30 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    call(w, 1, 100, 1, "main", f"{AC}:AsyncCompile.wait_pool_ready", 1, 4.0, caller=USER)
    call(w, 1.1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 2, 1.5, caller=USER, parent=1, sidecar_pid=200)
    start(w, 1.2, 200, 100, "compile-sidecar")
    call(w, 3.0, 200, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, None)
    call(w, 3.5, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._start_pool", 2, 3.9, parent=1,
         worker_pids=[301, 302])
    for pid in (301, 302):
        start(w, 3.6, pid, 200, "compile-worker", forked=True)
    if read:
        mem(w, 5.0, [(200, 1.2, 200), (301, 3.6, 15), (302, 3.6, 15)], devices)
        mem(w, 15.0, [(200, 1.2, 200), (301, 3.6, 15), (302, 3.6, 15)])
    if quiesce_at is not None:
        who: dict[str, Any] = {"caller": USER} if quiesced_by_user else {"thread": "subproc_worker_timer"}
        call(w, quiesce_at, 100, 1, "main", f"{SP}:SubprocPool.quiesce", 3, quiesce_at + 0.01, sidecar_pid=200,
             **who)
        for pid in (301, 302):
            w.add(quiesce_at + 0.1, pid, 200, "compile-worker", "process_exit", how="os._exit", counts={}, dropped=0)
    if read:
        mem(w, 30.0, [(200, 1.2, 200)])
    if shutdown_by_user:
        call(w, 60 + later, 100, 1, "main", f"{AC}:shutdown_compile_workers", 4, 60.5 + later, caller=USER)
    else:
        call(w, 60 + later, 100, 1, "main", f"{AC}:shutdown_compile_workers", 4, 60.5 + later)
    call(w, 60.01 + later, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 5, 60.4 + later, parent=4, sidecar_pid=200)
    call(w, 60.02 + later, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 6, 60.03 + later, thread="InductorSubproc",
         sidecar_pid=200)
    call(w, 60.05 + later, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 3, 60.06 + later, parent=1)
    w.add(60.3 + later, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    call(w, 60.6 + later, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 7, 60.61 + later, sidecar_pid=200)
    w.add(60.7 + later, 900, 1, "watcher", "leftover", run="r1", root_pid=100, how="root-exit", count=0, pids=[],
          procs=[])
    label = f"{SP}:SubprocPool.submit"
    w.add(60.7 + later, 100, 1, "main", "process_exit", how="exit", counts={label: 7}, dropped=0,
          count_times={label: [T0 + 3.5, T0 + 10.0]})
    return w


def add_jobs(w: LogWriter, spans: tuple[tuple[int, int, float, float | None], ...]) -> LogWriter:
    """w with the job records of idle_pool's workers (of sidecar 200): each span (worker pid, work id, its start,
    its end: None for a job never ended)."""
    for pid, wid, a, b in spans:
        w.add(a, pid, 200, "compile-worker", "job", state="start", work_id=wid, fn="m:f")
        if b is not None:
            w.add(b, pid, 200, "compile-worker", "job", state="end", work_id=wid)
    return w


def test_lifecycle_of_an_idle_pool(tmp_path: Path) -> None:
    """Made where, ready, jobs (count, first, last), idle from the last job to the shutdown, the quiesce timer,
    who asked for the shutdown (torch's atexit), one request among three calls, workers' lifetimes."""
    w = idle_pool()
    keep_up(w, 3.7, 60.0, KEPT_UP)
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["caller"]["file"] == USER["file"] and pool["ready_at"] == 4.0
    assert (pool["jobs"], pool["first_job"], pool["last_job"]) == (7, 3.5, 10.0)
    assert pool["busy_until"] == 10.0 and pool["idle_to"] == 60.01 and pool["idle_s"] == 50.01
    assert pool["quiesced"] == [{"at": 20.0, "by": "the quiesce timer"}]
    assert pool["shutdown_by"] == "torch's atexit (shutdown_compile_workers)" and pool["shutdown_at"] == 60.01
    assert pool["shutdowns"] == 1 and pool["shutdown_calls"] == 3
    assert [(x["pid"], x["end"]) for x in pool["workers"]] == [(301, 20.1), (302, 20.1)]
    # real memory: 230 MiB held when the idle span starts; 10.1 s of 230 (until the workers end after the
    # quiesce) + 39.91 s of 200 (the sidecar alone, until the shutdown request)
    assert pool["held_pss_bytes"] == 230 * MIB
    assert pool["idle_mib_s"] == pytest.approx(IDLE_MIB_S, abs=1)
    text = render_text(rep, {})
    answer = text.split("\n")[1]
    assert answer.startswith("- main 100 made a compile pool (sidecar 200 + 2 workers) at /home/u/train.py:12")
    assert "idle 50.0 s after its last job, holding 230 MiB real memory (PSS): 10.1 GiB·s idle" in answer
    assert "torch's atexit (shutdown_compile_workers) shut it down" in answer
    assert "shutdown asked 60.0 s by torch's atexit (shutdown_compile_workers); 2 later no-op call(s)" in text
    assert "shutdowns 1" in text and "shutdowns 3" not in text


def _set_mem(w: LogWriter, at: float, procs: list[tuple[int, float, int]]) -> None:
    """Replace the memory record at `at` s with these (pid, start offset, pss MiB)."""
    for r in w.lines:
        if r["event"] == "memory" and r["ts"] == T0 + at:
            r["procs"] = [{"pid": pid, "create_time": T0 + st, "pss": pss * MIB, "uss": pss * MIB // 4,
                           "rss": 4 * pss * MIB} for pid, st, pss in procs]


def test_held_comes_from_the_idle_span_never_a_stale_earlier_sample(tmp_path: Path) -> None:
    """Review 2 #1: the sidecar's only sample before the idle span was taken right after exec, before it
    imported anything (2 MiB). The pool's held figure and its MiB·s come from the samples inside the span
    (200 + 15 + 15 MiB at 15 s), never from that one ("holding 32 MiB … 10.1 GiB·s" contradicted itself)."""
    w = idle_pool()
    _set_mem(w, 5.0, [(200, 1.2, 2), (301, 3.6, 15), (302, 3.6, 15)])
    keep_up(w, 10.0, 60.0, KEPT_UP)  # from the span's start on
    (pool,) = report(w, tmp_path)["pools"]
    assert pool["held_pss_bytes"] == 230 * MIB
    assert pool["idle_mib_s"] == pytest.approx(IDLE_MIB_S, abs=1)
    assert (pool["span_sampled"], pool["span_processes"]) == (3, 3)


def test_unread_pool_processes_are_said_not_counted_as_zero(tmp_path: Path) -> None:
    """Review 2 #2: worker 302 was never read during the idle span (only at its fork): the pool's figures
    cover the two read, and the Answer and the idle-pool finding say "2 of 3 processes read"."""
    w = idle_pool()
    _set_mem(w, 15.0, [(200, 1.2, 200), (301, 3.6, 15)])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["held_pss_bytes"] == 215 * MIB and (pool["span_sampled"], pool["span_processes"]) == (2, 3)
    assert "holding at least 215 MiB real memory (PSS, 2 of 3 processes read)" in rep["answer"]
    f = next(f for f in rep["findings"] if f["kind"] == "idle-pool")
    assert "holding at least 215 MiB (2 of 3 processes read)" in f["text"]


def test_idle_pool_finding_names_this_torchs_knobs(tmp_path: Path) -> None:
    """idle-pool: seconds, real MiB, MiB·s, and the knobs the run's torch config has (none it lacks)."""
    w = idle_pool()
    keep_up(w, 3.7, 60.0, KEPT_UP)
    rep = report(w, tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "idle-pool")
    assert "pool of sidecar 200 + 2 workers" in f["text"] and "idle 50.0 s after its last job" in f["text"]
    assert "holding 230 MiB: 10.1 GiB·s" in f["text"]
    assert "the quiesce timer stopped its workers at 20.0 s, the sidecar stayed" in f["text"]
    assert "torch._inductor.async_compile.shutdown_compile_workers()" in f["advice"]
    assert "compile_threads=1 / TORCHINDUCTOR_COMPILE_THREADS=1 (now 2)" in f["advice"]
    assert "quiesce_async_compile_time" in f["advice"]
    assert f["cost"]["idle_mib_s"] == pytest.approx(IDLE_MIB_S, abs=1)
    # a torch whose config has no quiesce settings (2.8): advice never names them
    w = idle_pool(quiesce_at=None)
    for r in w.lines:
        if r["event"] == "config":
            r["knobs"] = ["compile_threads"]
            r["settings"] = {"compile_threads": 2, "worker_start_method": "subprocess"}
    f = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "idle-pool")
    assert "quiesce" not in f["advice"] and "TORCHINDUCTOR_COMPILE_THREADS=1" in f["advice"]


def idle_fork_pool(method: str) -> LogWriter:
    """torch 2.13's fork/spawn pool (TORCHINDUCTOR_WORKER_START=fork|spawn): main's warm_pool made a
    TrackedProcessPoolExecutor at train.py:12, its 2 workers ran the ready job at 1.3 s, then idled until
    concurrent.futures stopped them at main's exit (30 s). The config has the quiesce knobs (2.13's)."""
    tracked = "torch._inductor.compile_worker.tracked_process_pool:TrackedProcessPoolExecutor"
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings={**SETTINGS, "worker_start_method": method},
          torch_version="2.13.0+cpu", knobs=KNOBS)
    call(w, 1.0, 100, 1, "main", f"{AC}:AsyncCompile.warm_pool", 1, 1.003, caller=USER)
    call(w, 1.001, 100, 1, "main", f"{AC}:AsyncCompile.process_pool", 2, 1.002, caller=USER, parent=1)
    call(w, 1.0015, 100, 1, "main", f"{tracked}.__init__", 3, 1.0018, caller=USER, parent=2, max_workers=2)
    for pid, at in ((201, 1.1), (202, 1.2)):
        w.add(at, 100, 1, "main", "worker_spawned", worker_pid=pid)
        start(w, at + 0.01, pid, 100, "child", forked=method == "fork")
        w.add(at + 0.02, pid, 100, "compile-worker", "role")
    w.add(1.3, 201, 100, "compile-worker", "job", state="start", work_id=0, fn=f"{AC}:AsyncCompile._get_ready")
    w.add(1.31, 201, 100, "compile-worker", "job", state="end", work_id=0)
    keep_up(w, 2.0, 29.0, [(100, 0.0, 300, 30.0), (201, 1.11, 150, 29.9), (202, 1.21, 150, 29.9)])
    for pid in (201, 202):
        w.add(29.9, pid, 100, "compile-worker", "process_exit", how="os._exit", counts={}, dropped=0)
    label = f"{tracked}.submit"
    w.add(30.0, 100, 1, "main", "process_exit", how="exit", counts={label: 1}, dropped=0,
          count_times={label: [T0 + 1.25, T0 + 1.25]})
    w.add(30.1, 900, 1, "watcher", "leftover", run="r1", root_pid=100, how="root-exit", count=0, pids=[], procs=[])
    return w


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_fork_or_spawn_pools_idle_advice_names_no_quiesce_and_no_sidecar(tmp_path: Path, method: str) -> None:
    """torch 2.13's quiesce is SubprocPool's (async_compile.process_pool passes quiesce= to it alone): a
    TrackedProcessPoolExecutor has no quiesce timer and no sidecar, so lowering quiesce_async_compile_time would
    change nothing for it; its advice is the shutdown and compile_threads=1, though the config has the knobs."""
    rep = report(idle_fork_pool(method), tmp_path)
    (pool,) = rep["pools"]
    assert pool["kind"] == "executor" and pool["worker_pids"] == [201, 202]
    f = next(f for f in rep["findings"] if f["kind"] == "idle-pool")
    assert "shutdown_compile_workers() after your last compile (it stops the pool's workers)" in f["advice"]
    assert "TORCHINDUCTOR_COMPILE_THREADS=1 (now 2)" in f["advice"]
    assert "quiesce" not in f["advice"] and "sidecar" not in f["advice"], f["advice"]
    assert "quiesce" not in rep["answer"] and "sidecar stays" not in rep["answer"], rep["answer"]


def test_quiesce_advice_uses_the_pools_own_setting_and_never_enables_what_is_on(tmp_path: Path) -> None:
    """Review 2 #5: the run set quiesce_async_compile_time = 3 after import; the pool captured its own delay
    (3 s) as it was made. torch 2.13 has quiesce_async_compile_pool on by default: the advice is to lower
    quiesce_async_compile_time, quoting this pool's value beside the import-time one, never to enable the
    pool setting. Where the setting was off at import, enabling it is the advice."""
    w = idle_pool()
    for r in w.lines:
        if r["event"] == "return" and r["pid"] == 100 and r["call_id"] == 2:
            r["quiesce_after_s"] = 3
    f = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "idle-pool")
    assert ("lower quiesce_async_compile_time (3 s for this pool; 60 s at import; its workers quiesced 10.0 s "
            "after its last job)") in f["advice"], f["advice"]
    assert "quiesce_async_compile_pool" not in f["advice"]
    w = idle_pool(quiesce_at=None)
    for r in w.lines:
        if r["event"] == "config":
            r["settings"] = {**SETTINGS, "quiesce_async_compile_pool": False}
    f = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "idle-pool")
    assert "quiesce_async_compile_pool=True (TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL=1)" in f["advice"]


def test_user_shutdown_is_credited_to_user_code(tmp_path: Path) -> None:
    """shutdown_compile_workers() from the user's own line: `user code` at that line, not torch's atexit."""
    rep = report(idle_pool(shutdown_by_user=True), tmp_path)
    (pool,) = rep["pools"]
    assert pool["shutdown_by"] == "user code" and pool["shutdown_caller"]["line"] == 12
    # the idle pool's fix is to move that call, never to make the call the program made
    idle = next(f for f in rep["findings"] if f["kind"] == "idle-pool")
    assert idle["advice"].startswith("your code's shutdown_compile_workers() at /home/u/train.py:12 (main) shut it "
                                     "down 50.0 s after its last job: call it right after the last compile"), idle
    assert "after your last compile (it stops" not in rep["answer"], rep["answer"]


def test_a_user_shutdown_that_cut_a_job_in_flight_is_not_told_to_move_earlier(tmp_path: Path) -> None:
    """A server's SIGTERM handler called shutdown_compile_workers() while a job was in flight (it cut that job:
    a live run told "shut it down -0.2 s after its last job: call it right after the last compile"): no negative
    seconds, and no advice to move a call that came before the last job's end."""
    w = add_jobs(idle_pool(quiesce_at=None, shutdown_by_user=True),
                 ((301, 0, 3.6, 3.8), (301, 1, 30.0, 31.0), (302, 2, 59.0, None)))
    rep = report(w, tmp_path)
    idle = next(f for f in rep["findings"] if f["kind"] == "idle-pool")
    assert "your code's" not in idle["advice"] and "s after its last job: call it" not in rep["answer"], idle
    assert " -" not in idle["advice"], idle["advice"]


def test_no_pool_is_said_plainly(tmp_path: Path) -> None:
    """A run that loaded inductor and made no pool: 'Compiled without a process pool', no pool story."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings={**SETTINGS, "compile_threads": 1}, torch_version="2.13.0",
          knobs=KNOBS)
    w.add(2, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    assert rep["answer"].startswith("- Compiled without a process pool: compile_threads=1")


def untraced_pool_under(launcher_traced_child: bool) -> LogWriter:
    """A traced launcher (main 100, no inductor) starts its compiling child 150 with an environment of its own
    (no WP_AUTOTRACE): the child (untraced; or, launcher_traced_child, traced but with no pool record) runs a
    compile pool, sidecar 200 + workers 301, 302, that only the watcher sees (its tree records: the roles it
    read from their command lines)."""
    from .logs import watcher

    side = "/venv/lib/python3.11/site-packages/torch/_inductor/compile_worker/__main__.py"
    sidecar_cmd = f"/venv/bin/python {side} --pickler=x --kind=fork --workers=2 --parent=150 --read-fd=3"
    w = LogWriter()
    start(w, 0, 100, 1, "main", argv=["python", "launch.py"])
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    if launcher_traced_child:
        start(w, 0.1, 150, 100, "child", argv=["/venv/bin/python", "train.py"])
    watcher(w, 0.2, "tree", count=2, started=[{"pid": 150, "ppid": 100, "create_time": T0 + 0.1,
                                                "cmd": "/venv/bin/python train.py", "name": "python"}], ended=[])
    watcher(w, 3.0, "tree", count=3, started=[{"pid": 200, "ppid": 150, "create_time": T0 + 2.9,
                                                "cmd": sidecar_cmd, "name": "python", "role": "compile-sidecar"}],
            ended=[])
    watcher(w, 5.0, "tree", count=5, started=[{"pid": pid, "ppid": 200, "create_time": T0 + 4.9, "cmd": sidecar_cmd,
                                                "name": "python", "role": "compile-worker"} for pid in (301, 302)],
            ended=[])
    watcher(w, 20.0, "tree", count=2, started=[], ended=[{"pid": pid, "create_time": T0 + st, "end": T0 + 19.9}
                                                         for pid, st in ((301, 4.9), (302, 4.9), (200, 2.9))])
    if launcher_traced_child:
        w.add(20.5, 150, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 21.0, "tree", count=1, started=[], ended=[{"pid": 150, "create_time": T0 + 0.1, "end": T0 + 20.6}])
    w.add(21.5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 21.7, "leftover", how="root-exit", count=0, pids=[], procs=[])
    return w


@pytest.mark.parametrize("child_traced", [False, True])
def test_a_pool_only_the_watcher_saw_is_never_no_pool(tmp_path: Path, child_traced: bool) -> None:
    """A compile sidecar and its workers that wrote no record (their maker untraced: a launcher's own environment
    for its child) are in the watcher's tree: the Answer names them and says their maker is unknown, never "No
    compile pool was made"; the advice to trace the maker's environment only where that maker wrote nothing."""
    rep = report(untraced_pool_under(child_traced), tmp_path)
    assert rep["pools"] == [] and "No compile pool was made" not in rep["answer"], rep["answer"]
    assert rep["no_pool_why"] == {"kind": "untraced"}
    (pool,) = rep["untraced_pools"]
    assert (pool["sidecar_pid"], pool["worker_pids"], pool["parent_pid"]) == (200, [301, 302], 150)
    assert pool["parent_traced"] is child_traced
    text = " ".join(rep["answer"].split())
    assert "1 compile pool ran untraced (the watcher saw it): sidecar 200 + 2 workers under train.py 150" in text
    assert "Who made it and from which line is not known" in text
    assert ("pass WP_AUTOTRACE=1" in text) is not child_traced, text


def test_a_pool_only_the_watcher_saw_is_told_beside_a_recorded_one(tmp_path: Path) -> None:
    """The launcher made a pool of its own too (SubprocPool.__init__ recorded; its sidecar 250 ran another Python
    and wrote nothing, the watcher saw it): the Answer tells that pool and, after it, the untraced one; the
    recorded pool's own sidecar is never counted as an untraced pool."""
    from .logs import watcher

    w = untraced_pool_under(False)
    call(w, 1.0, 100, 1, "main", f"{SP}:SubprocPool.__init__", 50, 1.2, caller=USER, sidecar_pid=250)
    side = "/other/bin/python /other/torch/_inductor/compile_worker/__main__.py --parent=100"
    watcher(w, 1.3, "tree", count=3, started=[{"pid": 250, "ppid": 100, "create_time": T0 + 1.1, "cmd": side,
                                                "name": "python", "role": "compile-sidecar"}], ended=[])
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    assert [p["sidecar_pid"] for p in rep["pools"]] == [250] and rep["no_pool_why"] is None
    assert [e["sidecar_pid"] for e in rep["untraced_pools"]] == [200]
    text = " ".join(rep["answer"].split())
    assert "Also 1 compile pool ran untraced (the watcher saw it): sidecar 200 + 2 workers under train.py 150" \
        in text, text
    assert text.index("sidecar 250") < text.index("Also 1 compile pool ran untraced"), text
    # a pool alive at the log's end: said once (its lifespan's words and its ending's had said it twice)
    assert text.count("still running at the end of the log") == 1, text


def test_a_ghost_or_a_recorded_pools_unnamed_sidecar_is_no_untraced_pool(tmp_path: Path) -> None:
    """Not an untraced pool: a sidecar entry with no start time of its own (a process known only from other
    records, as a log out of order makes a ghost of a traced sidecar), nor a sidecar under the creator of a
    recorded pool whose sidecar no record names (that pool's own, its records lost)."""
    w = untraced_pool_under(False)
    for r in w.lines:  # the watcher's entry of 200 without its start time: known to no tree reading of its own
        for e in r.get("started") or ():
            if e["pid"] == 200:
                e["create_time"] = None
    assert report(w, tmp_path)["untraced_pools"] == []
    w = untraced_pool_under(True)  # child 150 traced, and its pool recorded with no sidecar named
    call(w, 2.5, 150, 100, "child", f"{SP}:SubprocPool.__init__", 1, 2.6, caller=USER)
    w.lines.sort(key=lambda r: r["ts"])
    (tmp_path / "b").mkdir()
    rep = report(w, tmp_path / "b")
    assert [p["creator_pid"] for p in rep["pools"]] == [150] and rep["untraced_pools"] == [], rep["untraced_pools"]


def test_tree_and_costs_show_real_memory_never_summed_rss(tmp_path: Path) -> None:
    """The tree shows each pool process's PSS; costs the pools' peak PSS (230 MiB), not 4 x 230 MiB of RSS."""
    rep = report(idle_pool(), tmp_path)
    text = render_text(rep, {})
    assert "200 compile-sidecar pss 200 MiB" in text and "301 compile-worker pss 15 MiB" in text
    assert rep["costs"]["pool_peak_pss_bytes"] == 230 * MIB
    assert "pools' peak real memory 230 MiB (PSS)" in text and "GB" not in text


def device_pool() -> LogWriter:
    return idle_pool(devices=[(301, 3.6, ["/dev/nvidia0", "/dev/nvidiactl"]), (302, 3.6, ["/dev/nvidia0"])])


def test_device_files_finding(tmp_path: Path) -> None:
    """Compile workers holding /dev/nvidia*: named, with their pids (pytorch#134084)."""
    rep = report(device_pool(), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "pool-device-files")
    assert "2 compile pool process(es) (2 compile-worker) hold accelerator device files" in f["text"]
    assert "/dev/nvidia0, /dev/nvidiactl" in f["text"] and f["pids"] == [301, 302]
    assert rep["pools"][0]["device_files"] == ["/dev/nvidia0", "/dev/nvidiactl"]


def spawn_child_exit() -> LogWriter:
    """pytorch#115366: a spawn child (python -c spawn_main) compiles, makes a pool at train.py:12, and spends
    1.02 s in shutdown_compile_workers at its own exit; the parent's join() waits for it."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    start(w, 1, 150, 100, "child", argv=["python", "-c", "from multiprocessing.spawn import spawn_main"])
    w.add(1.5, 150, 100, "child", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    call(w, 2, 150, 100, "child", f"{SP}:SubprocPool.__init__", 1, 2.4, caller=USER, sidecar_pid=250)
    start(w, 2.1, 250, 150, "compile-sidecar")
    w.lines.append({**w.lines[-1]})  # keep the shape simple: the sidecar's own records are not needed
    w.lines.pop()
    w.add(5.0, 150, 100, "child", "call", target=f"{AC}:shutdown_compile_workers", call_id=2, thread="MainThread",
          stack=[SPAWN_STRING], caller=None)
    call(w, 5.01, 150, 100, "child", f"{SP}:SubprocPool.shutdown", 3, 6.0, parent=2, sidecar_pid=250)
    w.add(6.02, 150, 100, "child", "return", call_id=2, duration_s=1.02)
    w.add(6.1, 250, 150, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(6.2, 150, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(6.5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_child_exit_wait_names_the_users_frame(tmp_path: Path) -> None:
    """The spawn child's 1.02 s in pool shutdown at exit, with the user's line that made the pool, not <string>."""
    rep = report(spawn_child_exit(), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "child-exit-wait")
    assert f["text"].startswith("Spawned child 150 spent 1.0 s in shutdown_compile_workers at its exit")
    assert "the pool it made at /home/u/train.py:12 (main)" in f["text"] and "<string>" not in f["text"]
    assert "join() waits" in f["text"] and f["cost"]["exit_wait_s"] == pytest.approx(1.02)


def test_a_child_exit_in_torchs_usual_time_is_not_a_wait(tmp_path: Path) -> None:
    """The same child whose pool stops in 0.6 s (torch 2.13 stops a ready sidecar in ~0.5 s, untraced): no
    child-exit-wait, since every pool costs that; the finding's bar is 1.0 s."""
    w = spawn_child_exit()
    for r in w.lines:
        if r["pid"] == 150 and r["event"] == "return" and r["ts"] > T0 + 5:
            r["ts"] -= 0.42
            r["duration_s"] = round(r["duration_s"] - 0.42, 3)
    assert [r["duration_s"] for r in w.lines if r["pid"] == 150 and r["event"] == "return"][-1] == 0.6
    assert "child-exit-wait" not in {f["kind"] for f in report(w, tmp_path)["findings"]}


def executor_child_exit(executor_class: str) -> LogWriter:
    """A forked multiprocessing child made a fork pool at train.py:12 and spent 2.5 s at its exit in an executor's
    ProcessPoolExecutor.shutdown (multiprocessing's exit handler: the stack keeps the frame it was forked at)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 1, 150, 100, "child", forked=True)
    w.add(2, 150, 100, "child", "call", target=f"{AC}:AsyncCompile.process_pool", call_id=1, thread="MainThread",
          stack=[USER], caller=USER)
    w.add(2.001, 150, 100, "child", "call", call_id=2, parent_call=1, thread="MainThread", stack=[USER], caller=USER,
          target="torch._inductor.compile_worker.tracked_process_pool:TrackedProcessPoolExecutor.__init__", threads=1)
    w.add(2.002, 150, 100, "child", "return", call_id=2, duration_s=0.001)
    w.add(2.003, 150, 100, "child", "return", call_id=1, duration_s=0.003)
    forked_at = {"file": "/home/u/train.py", "line": 20, "func": "<module>"}
    mp_exit = {"file": "/usr/lib/python3.11/multiprocessing/util.py", "line": 334, "func": "_exit_function"}
    w.add(3, 150, 100, "child", "call", target="concurrent.futures.process:ProcessPoolExecutor.shutdown", call_id=3,
          thread="MainThread", stack=[forked_at, mp_exit], caller=forked_at, executor_class=executor_class)
    w.add(5.5, 150, 100, "child", "return", call_id=3, duration_s=2.5)
    w.add(5.6, 150, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(6, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_fork_pools_executor_shutdown_at_exit_is_a_child_exit_wait(tmp_path: Path) -> None:
    """torch's fork pool (a TrackedProcessPoolExecutor) shut down by multiprocessing's exit handler counts as
    SubprocPool.shutdown does; another executor's shutdown (the program's own) never does."""
    f = next(f for f in report(executor_child_exit("TrackedProcessPoolExecutor"), tmp_path)["findings"]
             if f["kind"] == "child-exit-wait")
    assert f["text"].startswith("Forked child 150 (child.py) spent 2.5 s in ProcessPoolExecutor.shutdown at its exit")
    assert "the pool it made at /home/u/train.py:12 (main)" in f["text"]
    (tmp_path / "own").mkdir()
    kinds = {f["kind"] for f in report(executor_child_exit("ProcessPoolExecutor"), tmp_path / "own")["findings"]}
    assert "child-exit-wait" not in kinds


def test_an_xdist_worker_exit_wait_is_named_and_not_a_join(tmp_path: Path) -> None:
    """pytest-xdist's worker (execnet's bootstrap line) spends its exit shutting its pool down: the finding
    names it as one, and does not say multiprocessing's join() waits for it (docs/users.md, D5)."""
    w = spawn_child_exit()
    for r in w.lines:
        if r["pid"] == 150 and r["event"] == "process_start":
            r["argv"] = ["python", "-c", "import sys;exec(eval(sys.stdin.readline()))"]
    f = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "child-exit-wait")
    assert f["text"].startswith("Spawned child 150 (pytest-xdist worker (execnet)) spent 1.0 s")
    assert "join()" not in f["text"] and "whatever waits for it to end" in f["text"]


def test_stuck_child_shutdown_names_the_pool_site_not_string(tmp_path: Path) -> None:
    """A child killed inside its exit shutdown: the open call names the pool's line; no cleanup advice when
    nothing is left; no OOM guess for a sidecar that was sent its shutdown."""
    w = spawn_child_exit()
    w.lines = [r for r in w.lines if not (r["pid"] == 150 and r["event"] in ("return", "process_exit")
                                          and r["ts"] > T0 + 5)]
    w.lines = [r for r in w.lines if not (r["pid"] == 250 and r["event"] == "process_exit")]
    w.add(6.3, 900, 1, "watcher", "tree", run="r1", root_pid=100, count=1, started=[],
          ended=[{"pid": 150, "create_time": T0 + 1, "end": T0 + 7}, {"pid": 250, "create_time": T0 + 2.1,
                                                                      "end": T0 + 6.4}])
    rep = report(w, tmp_path)
    never = next(f for f in rep["findings"] if f["kind"] == "call-never-returned")
    assert "<string>" not in never["text"] and "for the pool made at /home/u/train.py:12" in never["text"]
    assert "pool-died" not in {f["kind"] for f in rep["findings"]}


def test_root_killed_with_nothing_left_gives_no_cleanup_advice(tmp_path: Path) -> None:
    """The main process killed, and the watcher found nothing of the run alive: no `cleanup` advice."""
    w = idle_pool()
    w.lines = [r for r in w.lines if not (r["pid"] == 100 and r["event"] == "process_exit")]
    w.lines = [r for r in w.lines if r["event"] != "leftover"]
    w.add(61, 900, 1, "watcher", "tree", run="r1", root_pid=100, count=0, started=[],
          ended=[{"pid": 100, "create_time": T0, "end": T0 + 61}])
    w.add(61.2, 900, 1, "watcher", "leftover", run="r1", root_pid=100, how="root-killed", count=0, pids=[],
          procs=[])
    rep = report(w, tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert "cleanup" not in f["advice"] and "nothing of the run is left" in f["advice"]


def test_wakeup_advice_fits_the_run_line(tmp_path: Path) -> None:
    """compile_threads=2 on the Run line: wakeup-no-pool never says to check compile_threads."""
    w = idle_pool()
    call(w, 2, 100, 1, "main", f"{AC}:AsyncCompile.wakeup", 9, 2.001, caller=USER)
    rep = report(w, tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "wakeup-no-pool")
    assert "compile_threads is 2" in f["text"] and "check" not in f["advice"]
    assert "compile_threads=2" in render_text(rep, {})


def test_dataloader_worker_is_named(tmp_path: Path) -> None:
    """A forked child whose torch DataLoader worker loop ran shows as a dataloader-worker, not 'child'."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 1, 160, 100, "child", forked=True)
    call(w, 1.1, 160, 100, "dataloader-worker", "torch.utils.data._utils.worker:_worker_loop", 1, None)
    w.lines.append({**w.lines[-1], "event": "role", "role": "dataloader-worker", "seq": 99})
    for k in ("target", "call_id", "thread", "stack", "caller"):
        w.lines[-1].pop(k, None)
    w.add(3, 160, 100, "dataloader-worker", "process_exit", how="os._exit", counts={}, dropped=0)
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    text = render_text(rep, {})
    assert "160 dataloader-worker (" in text and "call-never-returned" not in {
        f["kind"] for f in rep["findings"]}


def test_counted_call_keeps_its_first_and_last_time() -> None:
    """The counting wrapper (a pool's submit) keeps [first, last] call times on the log's clock."""
    from wp_autotrace.runtime import recorder

    probes: Any = recorder.Probes.__new__(recorder.Probes)
    probes.counts, probes.count_times = {}, {}
    submit = probes._counting_call("m:SubprocPool.submit", lambda x: x + 1)
    before = time.time()
    assert submit(1) == 2
    middle = time.time()
    submit(2)
    first, last = probes.count_times["m:SubprocPool.submit"]
    assert probes.counts["m:SubprocPool.submit"] == 2
    assert before <= first <= middle <= last <= time.time()


# -- the watcher's side: smaps_rollup, fd links -------------------------------------------------

ROLLUP = b"""55d0-7ffe ---p 00000000 00:00 0    [rollup]
Rss:              212368 kB
Pss:               28700 kB
Pss_Anon:          14596 kB
Shared_Clean:      12696 kB
Private_Clean:      1076 kB
Private_Dirty:      2900 kB
Swap:                  0 kB
SwapPss:               0 kB
"""


def test_parse_rollup_in_bytes() -> None:
    got = memory.parse_rollup(ROLLUP)
    assert got == {"pss": 28700 * 1024, "rss": 212368 * 1024, "uss": (1076 + 2900) * 1024}
    assert memory.parse_rollup(b"") is None


def test_fd_link_classifier_on_crafted_targets() -> None:
    """Accelerator device files are named; anything else (null, pipes, sockets, files) is not."""
    for path in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/davinci3", "/dev/davinci_manager",
                 "/dev/dri/renderD128", "/dev/dri/card0", "/dev/accel/accel0"):
        assert memory.classify_fd_target(path) == path
    for path in ("/dev/null", "/dev/pts/3", "pipe:[123]", "socket:[9]", "/dev/shm/torch_1", "/home/u/nvidia0",
                 "anon_inode:[eventfd]", "/dev/drive"):
        assert memory.classify_fd_target(path) is None


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs smaps_rollup")
def test_device_opened_after_the_first_sample_is_recorded_once(tmp_path: Path) -> None:
    """Review 2 #9: a worker is first sampled right after fork, before its first job opens the device.
    Its fd links are read again with each later sample; a new device set is recorded once, not at every
    sample. A crafted /proc (smaps_rollup and fd links) stands in for the worker."""
    fd = tmp_path / "7" / "fd"
    fd.mkdir(parents=True)
    (tmp_path / "7" / "smaps_rollup").write_bytes(ROLLUP)
    (fd / "0").symlink_to("/dev/null")
    live = {7: {"pid": 7, "ppid": 1, "create_time": 5.0, "role": "compile-worker"}}
    s = memory.MemorySampler(proc=str(tmp_path), burst=1.0)
    first = s.tick(0.0, live)
    assert first is not None and first["devices"] == []  # just forked: no device yet
    (fd / "9").symlink_to("/dev/dri/renderD128")  # its first job initialises the accelerator
    later = s.tick(memory.EVERY_S, live)
    assert later is not None and later["devices"] == [{"pid": 7, "create_time": 5.0,
                                                       "paths": ["/dev/dri/renderD128"]}]
    again = s.tick(2 * memory.EVERY_S, live)
    assert again is not None and again["devices"] == []  # unchanged: not recorded again
    (fd / "10").symlink_to("/dev/dri/card0")
    more = s.tick(3 * memory.EVERY_S, live)
    assert more is not None and more["devices"][0]["paths"] == ["/dev/dri/card0", "/dev/dri/renderD128"]


def test_real_process_holding_dev_null_holds_no_device() -> None:
    """A live process with /dev/null open (and pipes): its fd links are read, and none is a device."""
    proc = _child("import os,sys; f=open('/dev/null'); sys.stdout.write('ok\\n'); sys.stdout.flush(); "
                  "sys.stdin.read()")
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ok\n"
        assert memory.device_files(proc.pid) == []
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs smaps_rollup")
def test_sampled_pss_within_2x_of_smaps_rollup_at_the_same_moment() -> None:
    """The sampler's PSS of a forked pair holding 64 MiB between them is within 2x of what
    /proc/PID/smaps_rollup says right after; USS <= PSS <= RSS."""
    code = ("import os,sys; b=bytearray(64<<20); b[::4096]=b'x'*len(b[::4096]); pid=os.fork()\n"
            "if pid==0:\n  sys.stdin.read(); os._exit(0)\n"
            "sys.stdout.write(f'{pid}\\n'); sys.stdout.flush(); sys.stdin.read()")
    proc = _child(code)
    try:
        assert proc.stdout is not None
        kid = int(proc.stdout.readline())
        live = {proc.pid: {"pid": proc.pid, "ppid": os.getpid(), "create_time": 1.0, "role": "compile-sidecar"},
                kid: {"pid": kid, "ppid": proc.pid, "create_time": 2.0, "role": "compile-worker"}}
        sampler = memory.MemorySampler()
        got = sampler.tick(time.time(), live)
        assert got is not None and {e["pid"] for e in got["procs"]} == {proc.pid, kid}
        for e in got["procs"]:
            direct = memory.read_rollup(e["pid"])
            assert direct is not None
            assert direct["pss"] / 2 <= e["pss"] <= direct["pss"] * 2
            assert e["uss"] <= e["pss"] <= e["rss"]
        # the two share the 64 MiB: their PSS sums to about it, their RSS sum counts it twice
        pss = sum(e["pss"] for e in got["procs"])
        rss = sum(e["rss"] for e in got["procs"])
        assert pss < rss and pss >= 60 * MIB
    finally:
        proc.kill()
        proc.wait(10)


def _sampler_paying_per_read(cost_s: float = 0.002) -> memory.MemorySampler:
    """A memory sampler whose every read costs cost_s of its own (fake) CPU clock, and reads PSS 1."""
    clock = [0.0]

    class FakeSampler(memory.MemorySampler):
        def _read(self, pid: int, key: tuple[int, float], devices: list[dict[str, Any]]) -> dict[str, Any]:
            clock[0] += cost_s
            return {"pid": pid, "create_time": key[1], "pss": 1, "uss": 1, "rss": 1}

    return FakeSampler(cpu_clock=lambda: clock[0])


def test_sampler_stays_within_its_cpu_budget() -> None:
    """A 33-process pool whose reads each cost 2 ms of CPU: over 60 s the sampler spends at most
    its share (0.4 % of a core) plus one burst, never more, and reads every process at least once."""
    s = _sampler_paying_per_read()
    live = {1: {"pid": 1, "ppid": 0, "create_time": 0.0, "role": "compile-sidecar"}}
    live.update({p: {"pid": p, "ppid": 1, "create_time": 0.0, "role": "compile-worker"} for p in range(2, 34)})
    live[99] = {"pid": 99, "ppid": 2, "create_time": 0.0, "name": "cc1plus"}  # a worker's compiler: not sampled
    seen: set[int] = set()
    t = 0.0
    while t < 60.0:
        got = s.tick(t, live)
        seen.update(e["pid"] for e in (got or {}).get("procs", []))
        t += 0.1
    # its share, plus one sweep of the pool (33 reads): a pool is read at once, never piecemeal; and the debt a
    # wanted pass may run the bucket into (paid back at the share)
    assert s.cpu_s <= 60 * memory.CPU_SHARE + max(memory.BURST_S, 33 * 0.002) + memory.DEBT_S
    assert seen == set(live) - {99}
    # and a process that is not in a pool is never read
    assert memory.MemorySampler().pool_pids({5: {"pid": 5, "ppid": 1, "create_time": 0.0}}) == []


def test_the_runs_pools_are_swept_in_one_tick() -> None:
    """D8 (docs/users.md): two 3-process pools (an xdist run's), reads at 2 ms each so the bucket cannot pay for
    both at every period. Every periodic sweep reads both pools in one tick (one memory record), so a sum
    across pools is one moment's; the CPU stays within the share plus one sweep of both pools."""
    s = _sampler_paying_per_read()
    live: dict[int, dict[str, Any]] = {}
    for side in (1, 10):
        live[side] = {"pid": side, "ppid": 0, "create_time": 0.0, "role": "compile-sidecar"}
        live.update({w: {"pid": w, "ppid": side, "create_time": 0.0, "role": "compile-worker"}
                     for w in (side + 1, side + 2)})
    records, t = [], 0.0
    while t < 120.0:
        got = s.tick(t, live)
        if got:
            records.append({e["pid"] for e in got["procs"]})
        t += 0.1
    assert len(records) >= 8  # read all along, not once
    halves = [r for r in records[1:] if bool(r & {1, 2, 3}) != bool(r & {10, 11, 12})]
    assert not halves, records
    assert s.cpu_s <= 120 * memory.CPU_SHARE + 6 * 0.002 + memory.BURST_S + memory.DEBT_S


def test_a_sidecar_first_seen_before_its_exec_is_read_once_it_is_one() -> None:
    """The watcher can see a sidecar between its fork and its exec: its parent's command line, no pool role.
    Once its entry says compile-sidecar (after the exec: same pid and create_time) the sampler reads it (a
    cached 'not a pool process' left one of three sidecars unread for a whole run under load)."""
    s = _sampler_paying_per_read()
    live: dict[int, dict[str, Any]] = {5: {"pid": 5, "ppid": 1, "create_time": 0.0, "role": "child"}}
    assert s.tick(0.0, live) is None
    live[5] = {"pid": 5, "ppid": 1, "create_time": 0.0, "role": "compile-sidecar"}  # exec'd
    got = s.tick(memory.LOOK_S, live)
    assert got is not None and [e["pid"] for e in got["procs"]] == [5]


def test_tree_figures_are_of_each_process_life_and_labelled(tmp_path: Path) -> None:
    """Review 2 #4, #2, #11. The sidecar read after its own process_exit (its workers gone: 700 MiB) keeps
    the figure it had while it lived (200 MiB); a worker never read for PSS shows its RSS labelled as
    such; the main's end is the watcher's (62.0 s, after the interpreter's teardown), not its
    process_exit record (60.7 s), which stays in exit_record_s."""
    w = idle_pool()
    mem(w, 60.5, [(200, 1.2, 700)])
    for r in w.lines:
        if r["event"] == "memory":
            r["procs"] = [e for e in r["procs"] if e["pid"] != 302]
    w.add(60.8, 900, 1, "watcher", "tree", run="r1", root_pid=100, count=0, started=[],
          ended=[{"pid": 100, "create_time": T0, "end": T0 + 62.0}],
          rss=[{"pid": 302, "create_time": T0 + 3.6, "rss": 214 * MIB}])
    rep = report(w, tmp_path)
    procs = {p["pid"]: p for p in rep["processes"]}
    assert procs[200]["held_bytes"] == 200 * MIB and rep["pools"][0]["peak_pss_bytes"] == 215 * MIB
    assert (procs[100]["end_s"], procs[100]["exit_record_s"]) == (62.0, 60.7)
    text = render_text(rep, {})
    assert "200 compile-sidecar pss 200 MiB" in text
    assert "302 compile-worker rss 214 MiB (PSS not read: RSS counts shared pages)" in text
    assert "301 compile-worker pss 15 MiB\n" in text or "301 compile-worker pss 15 MiB  [" in text
    assert any(line.lstrip().startswith("-0.00s   62.00s 100 main") or " 62.00s 100 main" in line
               for line in text.splitlines()), text


def test_slow_exit_advice_fits_a_run_without_nesting(tmp_path: Path) -> None:
    """The main process's long exit wait with one pool and no nesting: no 'stop the nested pools' advice."""
    w = idle_pool()
    for r in w.lines:
        if r["event"] == "return" and r["pid"] == 100 and r.get("call_id") == 4:
            r["ts"] = T0 + 72.0  # shutdown_compile_workers returned 12 s after it was called
    f = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "slow-exit-wait")
    assert "nested" not in f["advice"]
    assert "torch._inductor.async_compile.shutdown_compile_workers() after your last compile" in f["advice"]


def test_interrupted_shutdown_is_asked_not_done(tmp_path: Path) -> None:
    """Review 1 #14: torch's atexit asked the pool to shut down, was interrupted (KeyboardInterrupt), and the
    sidecar is left behind: 'asked it to shut down (interrupted …)', never 'shut it down'; the Answer,
    printed above the findings, never points at 'the findings above'."""
    w = idle_pool()
    for r in w.lines:
        if r["event"] == "return" and r["pid"] == 100 and r["call_id"] in (4, 5):
            r["error"] = "KeyboardInterrupt"
    w.lines = [r for r in w.lines if not (r["pid"] == 200 and r["event"] == "process_exit")]
    for r in w.lines:
        if r["event"] == "leftover":
            r.update(count=1, pids=[200], procs=[{"pid": 200, "ppid": 1, "rss": 200 * MIB,
                                                  "role": "compile-sidecar"}])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["alive_at_end"] and pool["shutdown_outcome"] == "raised KeyboardInterrupt"
    answer = rep["answer"]
    assert "shut it down" not in answer, answer
    assert "torch's atexit (shutdown_compile_workers) asked it to shut down (interrupted: KeyboardInterrupt)" in answer
    assert "findings above" not in render_text(rep, {})
    (left,) = [f for f in rep["findings"] if f["kind"] == "leftovers"]
    assert "compile pools left running, made at /home/u/train.py:12" in left["advice"]


def test_a_pool_is_swept_at_once_and_again_when_a_co_sharer_ends() -> None:
    """docs/evidence.md, memory at once: a pool's processes are read in one tick (one memory record), never
    piecemeal; when a worker ends the others are read again at the next look, even with the bucket empty
    (their PSS rose), and every pool once the main process has ended (a leftover's figure is after it)."""
    s = _sampler_paying_per_read()
    live = {1: {"pid": 1, "ppid": 0, "create_time": 0.0, "role": "compile-sidecar"},
            2: {"pid": 2, "ppid": 1, "create_time": 0.0, "role": "compile-worker"},
            3: {"pid": 3, "ppid": 1, "create_time": 0.0, "role": "compile-worker"},
            10: {"pid": 10, "ppid": 0, "create_time": 0.0, "role": "compile-sidecar"}}
    first = s.tick(0.0, live)
    assert first is not None and {e["pid"] for e in first["procs"]} >= {1, 2, 3}  # a pool, whole
    s.tokens = -1.0  # an empty bucket: nothing planned is read
    assert s.tick(memory.EVERY_S * 3, live) is None
    del live[3]  # a worker ends: the sidecar and the other worker are read again at once
    again = s.tick(memory.EVERY_S * 3 + memory.LOOK_S, live)
    assert again is not None and {e["pid"] for e in again["procs"]} == {1, 2}
    assert s.tick(memory.EVERY_S * 3 + 2 * memory.LOOK_S, live) is None  # once per end
    after = s.tick(memory.EVERY_S * 3 + 3 * memory.LOOK_S, live, root_ended=True)
    assert after is not None and {e["pid"] for e in after["procs"]} == {1, 2, 10}  # every pool after the root


def test_a_pool_is_swept_again_when_a_worker_joins_it() -> None:
    """Workers forked by a sidecar share its pages (its PSS falls): the pool is swept at the next look after
    one joins, even with the bucket empty, so an idle span that starts as the workers come has a reading
    (issue 31's pytest scenario lost its idle-pool finding on a loaded box without it); once per join."""
    s = _sampler_paying_per_read()
    live = {1: {"pid": 1, "ppid": 0, "create_time": 0.0, "role": "compile-sidecar"}}
    assert s.tick(0.0, live) is not None
    s.tokens = -1.0  # an empty bucket: nothing planned is read
    live[2] = {"pid": 2, "ppid": 1, "create_time": 1.0, "role": "compile-worker"}
    joined = s.tick(memory.LOOK_S, live)
    assert joined is not None and {e["pid"] for e in joined["procs"]} == {1, 2}
    assert s.tick(2 * memory.LOOK_S, live) is None  # once per join


def test_a_pool_process_that_grew_is_read_again_before_its_periodic_sweep() -> None:
    """A pool process whose resident size (the tree's stat, in its entry) grew by GROWN_BYTES and GROWN_FRACTION
    since its last reading is read at the next look the bucket pays for, not EVERY_S after the last: an
    autotune subprocess that grew after the watcher's last reading and ended before the next was read 11 %
    under the probe. A small move is no reason; each growth is read once."""
    s = _sampler_paying_per_read()
    live = {7: {"pid": 7, "ppid": 0, "create_time": 0.0, "role": "autotune-worker", "rss": 100 * MIB}}
    assert s.tick(0.0, live) is not None
    s.tokens = 1.0  # the bucket can pay: what decides is whether the pool is due
    live[7]["rss"] += memory.GROWN_BYTES // 2  # under both bars: no re-read
    assert s.tick(memory.LOOK_S, live) is None
    live[7]["rss"] = 150 * MIB
    grown = s.tick(2 * memory.LOOK_S, live)
    assert grown is not None and [e["pid"] for e in grown["procs"]] == [7]
    assert 2 * memory.LOOK_S < memory.EVERY_S  # before the periodic sweep was due
    assert s.tick(3 * memory.LOOK_S, live) is None  # once per growth
    s.tokens = -1.0  # an empty bucket: a growth waits for it (the CPU bound holds)
    live[7]["rss"] = 300 * MIB
    assert s.tick(4 * memory.LOOK_S, live) is None


def test_a_pool_process_is_read_as_it_writes_its_process_exit() -> None:
    """The tick that reads a pool process's process_exit in the log sweeps its pool at once, whatever the look's
    period and the bucket: the last reading of what it held as it ended (the kernel frees its memory before a
    pidfd or a zombie could say it ended: later there is nothing to read). Another process's exit record, or
    one written before this process started (its pid's earlier holder), is no reason."""
    s = _sampler_paying_per_read()
    live = {1: {"pid": 1, "ppid": 0, "create_time": 0.0, "role": "compile-sidecar"},
            2: {"pid": 2, "ppid": 1, "create_time": 5.0, "role": "compile-worker"},
            9: {"pid": 9, "ppid": 0, "create_time": 0.0, "role": "main"}}
    assert s.tick(0.0, live) is not None
    s.tokens = -1.0
    assert s.tick(0.1, live, ending={9: 0.1}) is None  # not a pool process
    assert s.tick(0.2, live, ending={2: 4.0}) is None  # an earlier holder of pid 2
    got = s.tick(0.3, live, ending={2: 6.0})
    assert got is not None and {e["pid"] for e in got["procs"]} == {1, 2}  # its pool, whole: one moment


def test_nested_pools_memory_at_once_counts_each_process_once(tmp_path: Path) -> None:
    """A nested pool's processes are its creator pool's too (a pool's processes are its sidecar's
    descendants): the seed's three nested sidecars, read in one sweep at 100 + 200 + 300 MiB, held 600 MiB at
    once, in costs and in the Answer's pools across processes; counted per pool it was 1,400 MiB (the
    bundled example said 24 GiB against its sidecars' 3.1 GiB)."""
    w = seed_log()
    mem(w, 9.6, [(200, 0.0, 100), (300, 0.0, 200), (400, 0.0, 300)])
    data = read_logs([str(w.write(tmp_path / "log.jsonl"))])
    rep = analyze(data)
    assert rep["costs"]["pool_peak_pss_bytes"] == 600 * MIB
    assert rep["pools_across"]["at_once_bytes"] == 600 * MIB


def test_a_pool_whose_sidecar_was_never_seen_is_not_called_running(tmp_path: Path) -> None:
    """warm_pool interrupted before it started a sidecar (the bundled example under load: SIGINT at the first
    warm_pool): the pool has no sidecar, so nothing of it can be 'still running' and no line says
    'sidecar None'; how it ended is not known, and the report says why."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(1, 100, 1, "main", "call", target="torch._inductor.async_compile:AsyncCompile.warm_pool", call_id=1,
          thread="MainThread", stack=[PLUGIN], caller=PLUGIN)
    w.add(1.1, 100, 1, "main", "call", target="torch._inductor.compile_worker.subproc_pool:SubprocPool.__init__",
          call_id=2, parent_call=1, thread="MainThread", stack=[PLUGIN], caller=PLUGIN)
    w.add(2, 100, 1, "main", "process_exit", how="signal", counts={}, dropped=0)
    rep = report(w, tmp_path)
    text = render_text(rep, {})
    assert len(rep["pools"]) == 1 and rep["pools"][0]["sidecar_pid"] is None
    assert "sidecar None" not in text and "still running" not in text, text
    assert "sidecar not seen" in text and "its sidecar was not seen" in text, text


def test_a_shutdown_by_a_childs_multiprocessing_exit_is_not_credited_to_the_fork_frame(tmp_path: Path) -> None:
    """docs/users.md D4: in a DataLoader worker, multiprocessing's exit handler runs the pool's finalizer; the
    caller the tracer finds is the main's line the worker was forked at (inherited), which asked for
    nothing. The shutdown is the finalizer's at exit, not 'user code at dataloader_compile.py:39'."""
    forked_at = {"file": "/home/u/dataloader_compile.py", "line": 39, "func": "<module>"}
    mp = "/usr/lib/python3.11/multiprocessing/"
    stack = [{"file": mp + "process.py", "line": 317, "func": "_bootstrap"},
             {"file": mp + "util.py", "line": 334, "func": "_exit_function"},
             {"file": mp + "util.py", "line": 300, "func": "_run_finalizers"},
             {"file": mp + "util.py", "line": 224, "func": "__call__"}]
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 101, 100, "dataloader-worker", "process_start", argv=["python"], python="3.11.7", forked=True,
          env={}, run="r1", root_pid=100)
    w.warm(1, 101, 100, "dataloader-worker", 200)
    w.add(5, 101, 100, "dataloader-worker", "call", target="torch._inductor.compile_worker.subproc_pool:"
          "SubprocPool.shutdown", tag="pool-shutdown", call_id=9, thread="MainThread", stack=stack, caller=forked_at)
    w.add(5.1, 101, 100, "dataloader-worker", "return", call_id=9, duration_s=0.1)
    (pool,) = report(w, tmp_path)["pools"]
    assert pool["shutdown_by"] == "torch's multiprocessing finalizer at exit", pool
    assert pool["shutdown_caller"] is None, pool


def test_an_explicit_quiesce_says_what_the_sidecar_still_holds(tmp_path: Path) -> None:
    """docs/users.md (quiesced server): the program quiesces its pool itself; the Answer and the idle-pool
    finding say what the sidecar still held after it (its last reading), and the advice is to shut the pool
    down, not to lower a quiesce timer that never acted."""
    w = idle_pool(quiesced_by_user=True)
    mem(w, 40.0, [(200, 1.2, 231)])  # forked workers shared its pages: its PSS rose once they ended
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["after_quiesce"] == {"at": 40.0, "sidecar_pss_bytes": 231 * MIB}, pool
    assert "user code quiesced it at 20.0 s: its workers stopped, its sidecar still held 231 MiB" in (
        rep["answer"].replace("\n  ", " ")), rep["answer"]
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert "the sidecar stayed, holding 231 MiB" in idle["text"], idle["text"]
    assert "stops only the workers" in idle["advice"] and "lower quiesce" not in idle["advice"], idle["advice"]


def test_a_timer_quiesce_keeps_the_timer_advice(tmp_path: Path) -> None:
    """The quiesce timer acted: lowering its time is advice that applies."""
    (idle,) = [f for f in report(idle_pool(), tmp_path)["findings"] if f["kind"] == "idle-pool"]
    assert "lower quiesce_async_compile_time" in idle["advice"], idle["advice"]


def _left_sidecar(reread_alone: bool, workers_listed: bool = False) -> LogWriter:
    """The main process ends at 40 s with its pool running; the watcher reads the pool at 40.2 s (the
    workers still share the sidecar's pages: 200 MiB), the workers end at 44 s, the sidecar at 45 s (both past
    LEFTOVER_ENDED_S: left running, then ended); with reread_alone, the watcher read the sidecar alone at 44.5 s
    (260 MiB)."""
    w = idle_pool(quiesce_at=None)
    w.lines = [r for r in w.lines if r["ts"] < T0 + 40]
    tree = {"run": "r1", "root_pid": 100}
    w.add(40.0, 900, 1, "watcher", "tree", count=3, started=[], ended=[{"pid": 100, "create_time": T0,
                                                                         "end": T0 + 40.0}], **tree)
    mem(w, 40.2, [(200, 1.2, 200), (301, 3.6, 15), (302, 3.6, 15)])
    roles = ((200, 1, "compile-sidecar"), (301, 200, "compile-worker"), (302, 200, "compile-worker"))
    left = [{"pid": p, "ppid": pp, "rss": 300 * MIB, "role": role} for p, pp, role in roles]
    left = left if workers_listed else left[:1]
    w.add(40.5, 900, 1, "watcher", "leftover", how="root-exit", count=len(left), pids=[e["pid"] for e in left],
          procs=left, **tree)
    w.add(44.0, 900, 1, "watcher", "tree", count=1, started=[], ended=[
        {"pid": p, "create_time": T0 + 3.6, "end": T0 + 44.0} for p in (301, 302)], **tree)
    if reread_alone:
        mem(w, 44.5, [(200, 1.2, 260)])
    w.add(45.0, 900, 1, "watcher", "tree", count=0, started=[], ended=[
        {"pid": 200, "create_time": T0 + 1.2, "end": T0 + 45.0}], **tree)
    return w


@pytest.mark.parametrize(("reread_alone", "workers_listed", "held_mib", "sum_at_least"),
                         [(True, False, 260, False), (False, False, 200, True), (False, True, 200, False)])
def test_a_leftovers_figure_read_while_its_workers_shared_is_a_lower_bound(
        tmp_path: Path, reread_alone: bool, workers_listed: bool, held_mib: int, sum_at_least: bool) -> None:
    """A leftover sidecar's figure is its latest reading after the main ended; where that reading was taken
    while its workers still shared its pages and they ended before it (a loaded host's niced watcher missed
    the moment alone), the figure is a lower bound: held_at_least; and the leftovers' sum is 'at least' in the
    finding and the Answer unless those workers are in the sum."""
    rep = report(_left_sidecar(reread_alone, workers_listed), tmp_path)
    side = next(p for p in rep["processes"] if p["pid"] == 200)
    assert (side["held_bytes"], side["held_at_least"]) == (held_mib * MIB, not reread_alone)
    # the sum: a lower bound only where the sharers that ended are not in it (listed, it was their sum then)
    f = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert rep["costs"]["leftover_at_least"] == sum_at_least
    assert ("holding at least" in f["text"]) == sum_at_least and ("holding about" in f["text"]) != sum_at_least
    about = "at least" if sum_at_least else "about"
    assert f"({about} " in rep["answer"] or "leftover" not in rep["answer"]


@pytest.mark.parametrize(("torch_version", "stop"), [
    ("2.3.1", "torch._inductor.codecache.shutdown_compile_workers()"),
    # 2.1-2.2 have no shutdown_compile_workers (nor async_compile): their one pool stops by its own shutdown()
    ("2.2.2", "torch._inductor.codecache.AsyncCompile.process_pool().shutdown()"),
])
def test_legacy_fork_executor_is_a_pool(tmp_path: Path, torch_version: str, stop: str) -> None:
    """torch 2.1-2.7 build a fork ProcessPoolExecutor in AsyncCompile.process_pool with no
    TrackedProcessPoolExecutor call to mark it: the compile workers the main forked after that call are the
    evidence of a pool, with its caller; it is no 'sidecar not seen' and no 'Compiled without a process pool'."""
    from .logs import LogWriter, call, start, watcher

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    w.add(1, 100, 1, "main", "config", settings={"compile_threads": 2}, torch_version=torch_version)
    call(w, 2, 100, 1, "main", "torch._inductor.codecache:AsyncCompile.process_pool", 1, 2.01)
    for pid in (201, 202):
        w.add(2.1, pid, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7", forked=True,
              env={}, run="r1", root_pid=100)
        w.add(2.2, pid, 100, "compile-worker", "role")
    watcher(w, 3, "memory", procs=[{"pid": 201, "pss": 50 * MIB, "uss": MIB}, {"pid": 202, "pss": 50 * MIB,
                                                                              "uss": MIB}])
    watcher(w, 5, "memory", procs=[{"pid": 201, "pss": 50 * MIB, "uss": MIB}, {"pid": 202, "pss": 50 * MIB,
                                                                              "uss": MIB}])
    for pid in (201, 202):
        w.add(9.5, pid, 100, "compile-worker", "process_exit", how="os._exit", counts={}, dropped=0)
    w.add(10, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 10.5, "leftover", how="root-exit", count=0, pids=[], procs=[])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["kind"] == "executor" and pool["start_method"] == "fork" and pool["worker_pids"] == [201, 202]
    assert pool["processes"] == 2 and pool["held_pss_bytes"] == 100 * MIB
    assert pool["ending"]["kind"] == "ended-at-exit"
    assert "made a compile pool (2 forked workers, no sidecar) at /site/plugin/_inductor/__init__.py:5" \
        in rep["answer"] and "without a process pool" not in rep["answer"]
    # It ran no job (torch 2.1-2.3 warm it at import, and a CPU host never sends it one): idle from its ready, told
    # so; torch's shutdown stops its workers, and there is no sidecar to stop.
    assert pool["idle_after"] == "ready" and pool["jobs"] is None
    assert "idle 7.4 s after it was ready" in rep["answer"] and "after its last job" not in rep["answer"]
    assert f"call {stop} after your last compile (it stops the pool's workers)" in rep["answer"]


def spawn_pool_worker_killed_importing(named: bool = True) -> LogWriter:
    """main 100's spawn pool: worker 201 (its ready job) wrote its role at 2.8 s; worker 203, started at 3.0 s for
    the next job (the pid an earlier helper child of main had until 1.5 s), was still importing (no role record)
    when it ended at 4.0 s, unseen how; main's AsyncCompile.wait got BrokenProcessPool at 4.01 s, concurrent.futures
    SIGTERMed 201, and main exited. The watcher read 203 twice (30 MiB) beside 201 (50 MiB). named: main wrote
    worker_spawned for both as concurrent.futures started them."""
    from .logs import call, start, watcher

    tracked = "torch._inductor.compile_worker.tracked_process_pool:TrackedProcessPoolExecutor"
    spawned = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork"]
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    w.add(1.0, 203, 100, "child", "process_start", argv=["ldconfig", "-p"], python="", forked=False, env={},
          run="r1", root_pid=100)
    w.add(1.5, 203, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 1.6, "tree", count=1, started=[], ended=[{"pid": 203, "end": T0 + 1.55}])
    call(w, 2, 100, 1, "main", f"{AC}:AsyncCompile.process_pool", 1, None)
    call(w, 2.001, 100, 1, "main", f"{tracked}.__init__", 2, 2.01, max_workers=2)
    w.add(2.02, 100, 1, "main", "return", call_id=1, duration_s=0.02)
    for pid, at in ((201, 2.1), (203, 3.0)):
        if named:
            w.add(at + 0.001, 100, 1, "main", "worker_spawned", worker_pid=pid)
        watcher(w, at + 0.05, "tree", count=2, started=[{"pid": pid, "ppid": 100, "create_time": T0 + at,
                                                         "cmd": " ".join(spawned)}], ended=[])
        w.add(at + 0.2, pid, 100, "child", "process_start", argv=spawned, python="3.11.7", forked=False, env={},
              run="r1", root_pid=100)
    w.add(2.8, 201, 100, "compile-worker", "role")
    call(w, 3.0, 100, 1, "main", f"{AC}:AsyncCompile.wait", 3, None)
    for t in (3.5, 3.9):
        watcher(w, t, "memory", procs=[{"pid": 201, "pss": 50 * MIB, "uss": MIB},
                                       {"pid": 203, "pss": 30 * MIB, "uss": MIB}])
    watcher(w, 4.0, "tree", count=2, started=[], ended=[{"pid": 203, "end": T0 + 4.0}])
    w.add(4.01, 100, 1, "main", "return", call_id=3, duration_s=1.01, error="BrokenProcessPool: A process in the "
          "process pool was terminated abruptly while the future was running or pending.")
    w.add(4.02, 100, 1, "main", "signal_sent", how="kill", target=201, signal=15, frames=[
        {"file": "/usr/lib/python3.11/concurrent/futures/process.py", "line": 484, "func": "terminate_broken"}])
    watcher(w, 4.1, "tree", count=1, started=[], ended=[{"pid": 201, "end": T0 + 4.1}])
    w.add(4.2, 100, 1, "main", "process_exit", how="exit", code=1, counts={}, dropped=0)
    watcher(w, 4.3, "leftover", how="root-exit", count=0, pids=[], procs=[])
    return w


def test_a_worker_killed_while_it_imports_is_its_pools_from_its_creators_word(tmp_path: Path) -> None:
    """A fork/spawn pool's worker that ended before torch's initializer ran in it (no role record: still importing)
    is its pool's all the same, from the record its creator wrote as concurrent.futures started it: counted in the
    pool's processes as ps listed them, its memory in the pool's at once, and its end told as the pool's breaking
    (how it ended: unknown, no record shows it). A child of the creator that had the same pid earlier is not it."""
    rep = report(spawn_pool_worker_killed_importing(), tmp_path)
    (pool,) = rep["pools"]
    assert pool["worker_pids"] == [201, 203] and pool["processes"] == 2, pool
    assert pool["counts"]["pids"] == [201, 203] and pool["counts"]["pool_pss_bytes"] == 80 * MIB, pool["counts"]
    assert pool["peak_pss_bytes"] == 80 * MIB, pool
    ending = pool["ending"]
    assert ending["kind"] == "broke" and ending["at"] == pytest.approx(4.1), ending
    words = " ".join(rep["answer"].split())
    assert "worker 203 ended (how is not known) while it still imported (torch's initializer never ran in it)" \
        in words, words
    assert "main 100's AsyncCompile.wait() got BrokenProcessPool at 4.0 s" in words, words
    assert "killed" not in ending["words"] and "ended as main 100 exited" not in words
    # the earlier child of pid 203 (ldconfig, ended at 1.5 s) is no worker of the pool: the worker is the one read
    assert sorted(p["start_s"] for p in rep["processes"] if p["pid"] == 203) == [1.0, 3.0]
    # without the creator's word, the worker that never said its role is no member (the old reading)
    (old,) = report(spawn_pool_worker_killed_importing(named=False), tmp_path)["pools"]
    assert old["worker_pids"] == [201] and old["processes"] == 1, old


def test_a_pool_whose_sidecar_never_served_is_neither_busy_nor_idle(tmp_path: Path) -> None:
    """The bundled example's nested pools: a job sent to a pool whose traced sidecar never reached its serving
    loop (its main() raised), then torch's atexit asked it to stop with that job pending. The pool was never
    busy (nothing ran the job) nor idle after a job: the text says 'never served', the page draws that span
    apart, not a busy bar for its whole life (whose end, and so any idle figure, was timing)."""
    from wp_autotrace.analysis.present.html import render_html
    from wp_autotrace.analysis.present.render import render_text
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    from .logs import PLUGIN, SP, LogWriter, call, start

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    start(w, 1.2, 200, 100, "compile-sidecar")
    w.add(1.8, 200, 100, "compile-sidecar", "error", where="SubprocMain.main", error="RuntimeError: nested")
    w.add(2, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=2, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN, pending_jobs=[1], pool_running=True)
    w.add(2.1, 100, 1, "main", "return", call_id=2, duration_s=0.1, sidecar_pid=200)
    w.add(2.2, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(3, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = analyze(read_logs([str(w.write(tmp_path / "log.jsonl"))]))
    (pool,) = rep["pools"]
    assert pool["busy_until"] == 1.5 and pool["idle_s"] == 0 and pool.get("never_served"), pool
    assert "never served (1.5 s -> 2.0 s)" in render_text(rep, {}), render_text(rep, {})
    page = render_html(rep, render_text(rep, {}))
    assert "url(#unserved)" in page and "busy 1.00 -> 2.00" not in page


def test_a_nested_pools_memory_is_its_own_not_its_nested_pools(tmp_path: Path) -> None:
    """seed_log's nesting (main -> sidecar 200 -> sidecar 300 -> sidecar 400), each sidecar read at 100, 200 and
    300 MiB at one moment: each pool's peak is its own processes' (the outer one no longer adds the pools made
    inside it: 600 MiB, 500, 300 once), so the rows add up to the pools' peak at once, never above it."""
    w = seed_log()
    mem = [{"pid": pid, "pss": mib * 2**20, "uss": mib * 2**20, "rss": mib * 2**20}
           for pid, mib in ((200, 100), (300, 200), (400, 300))]
    w.add(9.6, 900, 100, "watcher", "memory", procs=mem, run="r1", root_pid=100)
    rep = report(w, tmp_path)
    peaks = {p["sidecar_pid"]: p["peak_pss_bytes"] for p in rep["pools"]}
    assert peaks == {200: 100 * 2**20, 300: 200 * 2**20, 400: 300 * 2**20}, peaks
    assert sum(peaks.values()) == rep["costs"]["pool_peak_pss_bytes"] == 600 * 2**20


def test_a_pools_creator_is_read_in_its_sweep_unless_it_is_large() -> None:
    """The main that made a pool is read in the pool's own sweep (its memory and the pool's one moment's), but
    not when it is resident beyond CREATOR_MAX_RSS: its smaps_rollup read (~9 ms a GiB resident) would stretch
    every pool's sweep period under the sampler's CPU share."""
    for rss, read in ((300 * MIB, True), (memory.CREATOR_MAX_RSS + 1, False)):
        s = _sampler_paying_per_read()
        live = {1: {"pid": 1, "ppid": 0, "create_time": 0.0, "role": "main", "rss": rss},
                2: {"pid": 2, "ppid": 1, "create_time": 0.0, "role": "compile-sidecar", "rss": MIB},
                3: {"pid": 3, "ppid": 2, "create_time": 0.0, "role": "compile-worker", "rss": MIB}}
        got = s.tick(0.0, live)
        assert got is not None and [e["pid"] for e in got["procs"]] == ([2, 3, 1] if read else [2, 3]), (rss, got)


def test_a_wait_begun_after_a_pool_stopped_is_not_on_that_pool(tmp_path: Path) -> None:
    """A wait its creator began once the pool was shut down (on the pool made again, or on nothing) does not
    make the stopped pool busy: its idle span still runs from its last job to its shutdown, forwards."""
    w = idle_pool()
    exit_record = w.lines.pop()  # main's process_exit: the wait comes before it
    call(w, 60.62, 100, 1, "main", f"{AC}:AsyncCompile.wait", 30, 60.65, caller=USER)
    w.lines.append(exit_record)
    (pool,) = report(w, tmp_path)["pools"]
    assert pool["busy_until"] == 10.0 and pool["idle_to"] == 60.01 and pool["idle_s"] == 50.01, pool


def test_a_pool_that_outlived_its_crashed_creator_is_told_with_the_fix_that_works(tmp_path: Path) -> None:
    """pytorch#87335: a child made a fork pool and died (no process_exit) at 3.2 s; its workers lived until 63.2 s
    and its parent (the harness) ended only then. The Answer says the pool outlived its creator by 60 s, with
    the creator's end, not "idle 60 s after its last job"; Fix first is the start method
    (a shutdown call cannot run in a process that crashed), and no idle-pool finding counts the orphan span."""
    from .test_model import with_orphaned_fork_pool

    rep = report(with_orphaned_fork_pool(), tmp_path)
    (pool,) = rep["pools"]
    assert pool["outlived_creator"]["s"] == pytest.approx(60.0, abs=0.01), pool["outlived_creator"]
    assert pool["outlived_creator"]["held_pss_bytes"] == 200 * MIB
    assert pool["idle_to"] == pytest.approx(3.2, abs=0.01), pool
    kinds = [f["kind"] for f in rep["findings"]]
    assert "pool-outlived-creator" in kinds and "idle-pool" not in kinds, kinds
    answer = rep["answer"]
    assert "Child 150 ended at 3.2 s with no exit of its own (how, the log does not say)" in answer, answer
    # its parent ended only then, but no record shows it waiting for them (test_orphan_fds: the pipe it read)
    assert "outlived it by 60.0 s, until 63.2 s" in answer and "its parent" not in answer, answer
    assert "died with its creator" not in answer, answer
    assert "idle 60" not in answer, answer
    fix = answer.split("Fix first: ", 1)[1]
    assert fix.startswith('start the workers without fork: worker_start_method="subprocess"'), fix
    assert "compile_threads=1" in fix and "shutdown_compile_workers" not in fix, fix


def test_an_orphaned_fork_pool_on_torch_2_3_is_told_the_fix_it_has(tmp_path: Path) -> None:
    """torch 2.1-2.3 have no sidecar start method and read no TORCHINDUCTOR_WORKER_START: a fork pool (codecache's)
    that outlived its crashed creator there is told to compile without a pool, not to start its workers with
    worker_start_method="subprocess" (which 2.3 does not have); from 2.4 the start method leads, as before."""
    from .logs import call, start, watcher

    def run(version: str) -> dict[str, Any]:
        w = LogWriter()
        start(w, 0, 100, 1, "main")
        watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
        w.add(0.1, 150, 100, "child", "process_start", argv=["python", "main.py", "child"], python="3.11.7",
              forked=False, env={}, run="r1", root_pid=100)
        w.add(1, 150, 100, "child", "config", settings={"compile_threads": 2, "worker_start_method": "fork"},
              torch_version=version)
        call(w, 3, 150, 100, "child", "torch._inductor.codecache:AsyncCompile.process_pool", 1, 3.01, caller=USER)
        for pid in (201, 202):
            w.add(3.05, pid, 150, "child", "process_start", argv=["python", "main.py", "child"], python="3.11.7",
                  forked=True, env={}, run="r1", root_pid=100)
            w.add(3.06, pid, 150, "compile-worker", "role")
        watcher(w, 3.2, "tree", count=3, started=[], ended=[{"pid": 150, "end": T0 + 3.2}])
        for t in (4.0, 30.0):
            watcher(w, t, "memory", procs=[{"pid": pid, "pss": 100 * MIB, "uss": MIB} for pid in (201, 202)])
        watcher(w, 33.2, "tree", count=1, started=[],
                ended=[{"pid": 201, "end": T0 + 33.2}, {"pid": 202, "end": T0 + 33.2}])
        w.add(33.25, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
        watcher(w, 33.3, "leftover", how="root-exit", count=0, pids=[], procs=[])
        return report(w, tmp_path)

    advice = {v: next(f["advice"] for f in run(v)["findings"] if f["kind"] == "pool-outlived-creator")
              for v in ("2.3.1", "2.5.1")}
    assert advice["2.3.1"].startswith("compile without a pool: compile_threads=1") and \
        "TORCHINDUCTOR_WORKER_START" not in advice["2.3.1"], advice
    assert advice["2.5.1"].startswith('start the workers without fork: worker_start_method="subprocess"'), advice


def orphaned_pool_read_late() -> Any:
    """with_orphaned_fork_pool's log with its own readings: at 3.15 s (the idle span) worker 201 and the dying
    creator 150 only (1 of the pool's 2 read); from 8 s on, both workers (108.2 MiB each), the creator gone."""
    from .test_model import with_orphaned_fork_pool

    w = with_orphaned_fork_pool()
    w.lines = [r for r in w.lines if r["event"] != "memory"]
    w.add(3.15, 900, 100, "watcher", "memory", run="r1", root_pid=100, devices=[], procs=[
        {"pid": 201, "pss": 77508608, "uss": 5718016, "threads": 2}, {"pid": 150, "pss": 138117120, "uss": 2**20}])
    for t in (8.0, 30.0, 60.0):
        w.add(t, 900, 100, "watcher", "memory", run="r1", root_pid=100, devices=[], procs=[
            {"pid": 201, "pss": 113459200, "uss": 6328320, "threads": 2},
            {"pid": 202, "pss": 113448960, "uss": 6324224, "threads": 2}])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_pool_that_outlived_its_creator_is_told_by_what_it_held_once_orphaned(tmp_path: Path) -> None:
    """bench/users/pipe_held's log: the watcher read one of the 2 forked workers (77,508,608 B) beside its creator
    (138,117,120 B) 0.05 s before the creator died, inside the pool's 0.1 s idle span (it ends at the creator's
    end), then both workers every few seconds for the 60 s they outlived it: 113,459,200 + 113,448,960 B, where
    the user's probe read 108.2 + 108.2 = 216.4 MiB. The Answer told the idle span's 74 MiB, counted "1 of 2
    read" beside the dead creator's pages; what the pool held while the sentence says it outlived its creator
    is the 216 MiB, counted at that moment (2 workers, their threads, no creator line)."""
    w = orphaned_pool_read_late()
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["idle_to"] == pytest.approx(3.2, abs=0.01) and pool["held_pss_bytes"] == 77508608, pool
    probe_mib = 108.2 + 108.2
    held = pool["outlived_creator"]["held_pss_bytes"]
    assert abs(held / MIB - probe_mib) < 0.1 * probe_mib, held
    answer = rep["answer"]
    assert "outliving its creator by 60.0 s (ended at 3.2 s; the pool at 63.2 s), holding 216 MiB real memory " \
           "(PSS)" in answer, answer
    assert "74 MiB" not in answer and "1 of 2" not in answer, answer
    assert "the pool was 2 processes (2 workers), 4 threads (2 + 2)." in answer, answer


def test_the_leftovers_memory_is_one_moments_never_above_the_peak_at_once(tmp_path: Path) -> None:
    """seed_log's leftovers 300 and 400, read together at 7.2 and 9.6 s (200 + 300 MiB), then 300 alone at 12.0 s
    (250) and 400 alone at 16.0 s (350: 300's reading is 4 s old then, stale: the watcher kept a 2.4 s period, a
    reading counts 3.6 s). Their latest readings summed (600 MiB) were never held at one moment; what they held
    together is a point of the same sum at once the pools' peak is the largest of: 12.0 s, 250 + 300 = 550 MiB,
    the peak itself."""
    w = seed_log()
    for ts, mem in ((7.2, ((300, 200), (400, 300))), (9.6, ((300, 200), (400, 300))), (12.0, ((300, 250),)),
                    (16.0, ((400, 350),))):
        w.add(ts, 900, 100, "watcher", "memory", run="r1", root_pid=100,
              procs=[{"pid": pid, "pss": mib * MIB, "uss": mib * MIB, "rss": mib * MIB} for pid, mib in mem])
    rep = report(w, tmp_path)
    costs = rep["costs"]
    assert costs["pool_peak_pss_bytes"] == 550 * MIB, costs
    assert costs["leftover_real_bytes"] == 550 * MIB, costs
    left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert "holding about 550 MiB:" in left["text"], left["text"]


def test_the_leftovers_memory_under_a_slow_watcher_is_one_moments_too(tmp_path: Path) -> None:
    """A loaded watcher swept seed_log's leftovers 300 and 400 in turn, 4.5 s apart, after reading them together
    at 12.0 s (250 + 300 MiB): a reading counts for 1.5 x that pace, so a point sums 400's reading with 300's of
    4.5 s before (250 + 350 = 600 MiB), a sum no moment held, which the pools' peak (550 MiB, 12.0 s) leaves out.
    The leftovers' figure is read the same way, one moment's: 550 MiB at 12.0 s, never above the peak."""
    w = seed_log()
    sweeps = [(12.0, ((300, 250), (400, 300)))] + [(t, ((300, 250),) if n % 2 == 0 else ((400, 350),))
                                                    for n, t in enumerate((21.0, 25.5, 30.0, 34.5))]
    for ts, mem in sweeps:
        w.add(ts, 900, 100, "watcher", "memory", run="r1", root_pid=100,
              procs=[{"pid": pid, "pss": mib * MIB, "uss": mib * MIB, "rss": mib * MIB} for pid, mib in mem])
    rep = report(w, tmp_path)
    costs = rep["costs"]
    assert costs["pool_peak_pss_bytes"] == 550 * MIB, costs
    assert costs["leftover_real_bytes"] == 550 * MIB, costs


def test_the_pools_peak_at_once_is_never_under_one_pools_own(tmp_path: Path) -> None:
    """seed_log's sidecars 300 and 400 (each its own pool; 200 ended at 10 s) read together at 10.5 and 12.9 s
    (100 + 100 MiB), then 400 alone at 16.3 s at 350 MiB: a reading counts 3.6 s (1.5 x the 2.4 s the watcher
    kept), so the run's 16.3 s point sums 300's reading of 3.4 s before, no one moment's (STALE_S 2.5 s). Pool
    400's own peak is that moment, 350 MiB; the pools' peak at once over every pool's processes is at least that
    (what it read then: 400's 350 MiB, 300's reading too old to count), never the 200 MiB of the sweeps it read
    whole."""
    w = seed_log()
    for ts, mem in ((10.5, ((300, 100), (400, 100))), (12.9, ((300, 100), (400, 100))), (16.3, ((400, 350),))):
        w.add(ts, 900, 100, "watcher", "memory", run="r1", root_pid=100,
              procs=[{"pid": pid, "pss": mib * MIB, "uss": mib * MIB, "rss": mib * MIB} for pid, mib in mem])
    rep = report(w, tmp_path)
    peaks = {p["sidecar_pid"]: p["peak_pss_bytes"] for p in rep["pools"]}
    assert peaks[400] == 350 * MIB, peaks
    assert rep["costs"]["pool_peak_pss_bytes"] == 350 * MIB, rep["costs"]
    assert rep["pools_across"]["at_once_bytes"] == 350 * MIB and not rep["pools_across"]["at_once_all_read"]


def test_leftovers_read_together_only_before_the_main_ended_say_when(tmp_path: Path) -> None:
    """No reading after the main process's end (11 s), 300 and 400 read together only at 9.6 s: their figure is
    that moment's, and the text says so rather than pass it for what was left after the end."""
    w = seed_log()
    w.add(9.6, 900, 100, "watcher", "memory", run="r1", root_pid=100,
          procs=[{"pid": pid, "pss": mib * MIB, "uss": mib * MIB, "rss": mib * MIB} for pid, mib in ((300, 200),
                                                                                                   (400, 300))])
    rep = report(w, tmp_path)
    assert rep["costs"]["leftover_real_bytes"] == 500 * MIB == rep["costs"]["pool_peak_pss_bytes"], rep["costs"]
    left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert "(all 2 read together, at 9.6 s, before the main process ended)" in left["text"], left["text"]
    assert "at 9.6 s, before the main process ended" in rep["answer"], rep["answer"]


def test_leftovers_a_reading_left_out_make_their_figure_a_lower_bound(tmp_path: Path) -> None:
    """Only 300 was read (9.6 s, 200 MiB); sidecar 400, left behind too, was never read for its own share: the
    figure leaves it out, so it is at least 200 MiB, never "about", and the text says which were read."""
    w = seed_log()
    w.add(9.6, 900, 100, "watcher", "memory", run="r1", root_pid=100,
          procs=[{"pid": 300, "pss": 200 * MIB, "uss": 200 * MIB, "rss": 200 * MIB}])
    rep = report(w, tmp_path)
    assert rep["costs"]["leftover_real_bytes"] == 200 * MIB and rep["costs"]["leftover_at_least"], rep["costs"]
    left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert "holding at least 200 MiB (1 of the 2 read at 9.6 s, before the main process ended)" in left["text"], \
        left["text"]
    assert "(at least 200 MiB: 1 of the 2 read at 9.6 s" in rep["answer"], rep["answer"]
    assert "; left at least 200 MiB;" in render_text(rep, {}), render_text(rep, {})


def test_leftovers_of_two_kinds_place_each_one_the_text_counts(tmp_path: Path) -> None:
    """Sidecars 300 and 400 read together at 9.6 s and a plain child 500 of the main known by its RSS alone: the
    text names the pool processes as such and the child as the other one, so a reader places all three."""
    w = seed_log()
    run = {"run": "r1", "root_pid": 100}
    w.add(9.55, 900, 100, "watcher", "tree", count=5, started=[{"pid": 500, "ppid": 100, "rss": 50 * MIB,
                                                                 "via": "child"}], ended=[], **run)
    w.add(9.6, 900, 100, "watcher", "memory", procs=[{"pid": pid, "pss": mib * MIB, "uss": mib * MIB, "rss": mib * MIB}
                                                     for pid, mib in ((300, 200), (400, 300))], **run)
    w.lines = [r for r in w.lines if r.get("event") != "leftover"]
    w.add(11.4, 900, 100, "watcher", "leftover", how="root-exit", count=3, pids=[300, 400, 500],
          procs=[{"pid": 300, "ppid": 1, "rss": 300 * MIB}, {"pid": 400, "ppid": 300, "rss": 300 * MIB},
                 {"pid": 500, "ppid": 1, "rss": 50 * MIB}], **run)
    rep = report(w, tmp_path)
    assert rep["costs"]["leftover_real_bytes"] == 550 * MIB and not rep["costs"]["leftover_at_least"], rep["costs"]
    left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert "(all 2 pool processes read together, at 9.6 s, before the main process ended; RSS for the other one, " \
           "its own share not read)" in left["text"], left["text"]


def test_the_fx_subprocess_pool_is_named_and_gets_its_own_advice(tmp_path: Path) -> None:
    """The pool TORCHINDUCTOR_FX_COMPILE_MODE=subprocess makes (its SubprocPool made inside
    _SubprocessFxCompile.process_pool) is named so, and its idle advice is not shutdown_compile_workers(), which
    never stops it (it is outside torch's _pool_set)."""
    w = idle_pool(quiesce_at=None)
    for r in w.lines:
        if r.get("target", "").endswith("SubprocPool.__init__"):
            r["parent_call"] = 9
    fx = {"file": "/home/u/train.py", "line": 12, "func": "main"}
    w.add(1.05, 100, 1, "main", "call", target="torch._inductor.compile_fx_subproc:_SubprocessFxCompile.process_pool",
          call_id=9, parent_call=1, thread="MainThread", stack=[fx], caller=fx)
    w.add(1.6, 100, 1, "main", "return", call_id=9, duration_s=0.55)
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["fx_subprocess"]
    idle = next(f for f in rep["findings"] if f["kind"] == "idle-pool")
    assert idle["advice"].startswith("this is the FX-subprocess compile pool (TORCHINDUCTOR_FX_COMPILE_MODE=")
    assert "shutdown_compile_workers() after your last compile" not in idle["advice"]
    assert "made an FX-subprocess compile pool (sidecar 200 + 2 workers)" in " ".join(rep["answer"].split())


def fx_pool(job_at: float = 2.1, caller: dict[str, Any] = USER) -> LogWriter:
    """torch 2.13 under TORCHINDUCTOR_FX_COMPILE_MODE=subprocess, as its records come (compile_threads=2 at import,
    never changed): the first compile makes the FX pool inside _SubprocessFxCompile.process_pool (sidecar 200,
    its one spawned worker 301), the compile job 2-4 s, the main's AsyncCompile.wait inside it captures
    compile_threads=2; at exit atexit runs pool.shutdown itself (no Python frame above it: an empty stack) at
    10 s, then shutdown_compile_workers (the pool is not in its _pool_set). job_at: when the worker began the job
    (submitted at 1.45 s); caller: the frame that made the pool."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    call(w, 1, 100, 1, "main", "torch._inductor.compile_fx_subproc:_SubprocessFxCompile.process_pool", 1, 1.5,
         caller=caller)
    call(w, 1.1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 2, 1.4, caller=caller, parent=1, sidecar_pid=200)
    start(w, 1.2, 200, 100, "fx-compile-sidecar", argv=["python", "x/compile_worker/__main__.py", "--workers=1",
                                                         "--kind=spawn"])
    call(w, 1.8, 200, 100, "fx-compile-sidecar", f"{SP}:SubprocMain.main", 1, None)
    call(w, 2.0, 200, 100, "fx-compile-sidecar", f"{SP}:SubprocMain._start_pool", 2, 2.1, parent=1,
         worker_pids=[301])  # at the first job's submit (SubprocMain.submit): spawn's worker, started then
    start(w, 2.05, 301, 200, "compile-worker")
    w.add(job_at, 301, 200, "compile-worker", "job", state="start", work_id=0, fn="builtins:getattr")
    w.add(job_at + 1.9, 301, 200, "compile-worker", "job", state="end", work_id=0)
    w.add(job_at + 1.8, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait", call_id=3, thread="MainThread",
          stack=[caller], caller=caller, env={}, compile_threads=2)
    w.add(job_at + 1.85, 100, 1, "main", "return", call_id=3, duration_s=0.05)
    d = job_at - 2.1  # what follows the job moves with it
    mem(w, d + 5.0, [(200, 1.2, 200), (301, 2.05, 300)])
    mem(w, d + 8.0, [(200, 1.2, 200), (301, 2.05, 300)])
    # no caller: stack [] (atexit called it)
    call(w, d + 10.0, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 4, d + 10.4, sidecar_pid=200)
    call(w, d + 10.05, 200, 100, "fx-compile-sidecar", f"{SP}:SubprocMain._shutdown", 3, d + 10.1, parent=1)
    w.add(d + 10.2, 301, 200, "compile-worker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(d + 10.3, 200, 100, "fx-compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    call(w, d + 10.5, 100, 1, "main", f"{AC}:shutdown_compile_workers", 5, d + 10.6)
    w.add(d + 10.7, 900, 1, "watcher", "leftover", run="r1", root_pid=100, how="root-exit", count=0, pids=[],
          procs=[])
    label = f"{SP}:SubprocPool.submit"
    w.add(d + 10.7, 100, 1, "main", "process_exit", how="exit", counts={label: 1}, dropped=0,
          count_times={label: [T0 + 1.45, T0 + 1.45]})
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_the_fx_pools_own_atexit_is_named_and_no_setting_is_told_late(tmp_path: Path) -> None:
    """torch registers the FX pool's shutdown with atexit itself (compile_fx_subproc: atexit.register(
    pool.shutdown)): a shutdown with no Python frame above it, in the main thread, is that handler's, not
    multiprocessing's finalizer (whose stack passes through util._exit_function). And compile_threads, 2 from
    import on, sizes nothing here (torch makes the FX pool with 1 worker whatever it says): no setting-too-late,
    which led the Answer of a real run with "compile_threads=2 was set ... after its compile pool existed"."""
    rep = report(fx_pool(), tmp_path)
    (pool,) = rep["pools"]
    assert pool["fx_subprocess"] and pool["worker_pids"] == [301]
    assert pool["shutdown_by"] == BY_POOL_ATEXIT and pool["ending"]["kind"] == "shutdown-completed", pool
    assert f"{BY_POOL_ATEXIT} shut it down" in " ".join(rep["answer"].split()), rep["answer"]
    assert "setting-too-late" not in {f["kind"] for f in rep["findings"]}, rep["answer"]
    assert rep["answer"].startswith("- main 100 made an FX-subprocess compile pool"), rep["answer"]


def test_a_library_made_fx_pools_fix_is_its_mode_not_compile_threads(tmp_path: Path) -> None:
    """An installed library's line made the FX pool: the setting the user can apply comes first, but for this pool
    it is TORCHINDUCTOR_FX_COMPILE_MODE (torch makes it whatever compile_threads says, and
    shutdown_compile_workers() never stops it): a real run's Fix first said "set TORCHINDUCTOR_COMPILE_THREADS=1
    ... no pool is made", which would have changed nothing."""
    lib = {"file": "/venv/lib/python3.11/site-packages/wp_fx_serve/fxstep.py", "line": 14, "func": "warm",
           "dist": "wp-fx-serve", "dist_version": "0.1", "rel": "wp_fx_serve/fxstep.py"}
    rep = report(fx_pool(caller=lib), tmp_path)
    assert rep["pools"][0]["made_in"]["dist"] == "wp-fx-serve"
    fix = rep["answer"].split("Fix first: ")[1]
    assert fix.startswith("unset TORCHINDUCTOR_FX_COMPILE_MODE in the environment"), fix
    assert "wp-fx-serve 0.1" in fix and "_SubprocessFxCompile.process_pool().shutdown()" in fix, fix
    assert "TORCHINDUCTOR_COMPILE_THREADS=1 in the environment" not in fix, fix


def test_a_job_queued_before_the_worker_was_ready_leaves_no_idle_gap(tmp_path: Path) -> None:
    """The FX pool's one job is submitted (1.45 s) before its spawned worker is up (2.05 s); the worker begins it
    only at 14 s, having imported what the job's function needs (12 s on a loaded box, real torch). The pool had
    work pending all along: no idle stretch "between its ready and its first job" (a real run told 11.8 s)."""
    rep = report(fx_pool(job_at=14.0), tmp_path)
    (pool,) = rep["pools"]
    assert pool["jobs"] == 1 and pool["idle_gaps"] == [], pool["idle_gaps"]
    assert "between its ready" not in rep["answer"], rep["answer"]


def test_an_autotune_pools_own_atexit_is_named(tmp_path: Path) -> None:
    """torch 2.11+'s AutotuneProcessPool registers its own _shutdown with atexit as it makes its executor
    (autotune_process.py: atexit.register(self._shutdown)); a real CPU run's end (the call with no Python frame
    above it, in the main thread) was told as multiprocessing's finalizer."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", "torch._inductor.autotune_process:AutotuneProcessPool.__init__", 1, 1.1, caller=USER)
    start(w, 1.5, 301, 100, "autotune-worker", argv=["python", "-c", "from multiprocessing.spawn import spawn_main",
                                                      "--multiprocessing-fork"])
    mem(w, 3.0, [(301, 1.5, 240)])
    call(w, 5.0, 100, 1, "main", "torch._inductor.autotune_process:AutotuneProcessPool._shutdown", 2, 5.01)
    w.add(5.2, 301, 100, "autotune-worker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(5.3, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    (pool,) = report(w, tmp_path)["pools"]
    assert pool["kind"] == "autotune" and pool["worker_pids"] == [301], pool
    assert pool["shutdown_by"] == BY_POOL_ATEXIT, pool["shutdown_by"]


def test_an_autotune_pool_ended_by_the_exit_join_before_its_atexit_is_told_so(tmp_path: Path) -> None:
    """concurrent.futures' exit join runs before any atexit handler and joins every executor's workers: an
    AutotuneProcessPool's worker that wrote its exit inside the main's join, which returned before torch's atexit
    _shutdown was called, was ended by the join (a real CPU run: told as "torch's atexit ... shut it down", which
    found nothing to stop). Without the join, the atexit shutdown is still what ended it."""
    def log(join: bool) -> LogWriter:
        w = LogWriter()
        start(w, 0, 100, 1, "main")
        call(w, 1, 100, 1, "main", "torch._inductor.autotune_process:AutotuneProcessPool.__init__", 1, 1.1, caller=USER)
        start(w, 1.5, 301, 100, "autotune-worker", argv=["python", "-c", "from multiprocessing.spawn import x"])
        mem(w, 3.0, [(301, 1.5, 240)])
        if join:
            call(w, 4.0, 100, 1, "main", "concurrent.futures.process:_python_exit", 3, 4.9)
        w.add(4.1 if join else 5.2, 301, 100, "autotune-worker", "process_exit", how="exit", counts={}, dropped=0)
        call(w, 5.0, 100, 1, "main", "torch._inductor.autotune_process:AutotuneProcessPool._shutdown", 2, 5.01)
        w.add(5.3, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
        w.lines.sort(key=lambda r: r["ts"])
        return w

    (pool,) = report(log(join=True), tmp_path)["pools"]
    assert pool["ending"]["kind"] == "ended-at-exit" and pool["ending"]["by"] == "main 100's exit", pool["ending"]
    (pool,) = report(log(join=False), tmp_path)["pools"]
    assert pool["ending"]["kind"] == "shutdown-completed" and pool["ending"]["by"] == BY_POOL_ATEXIT, pool["ending"]


def test_an_autotune_pool_handed_jobs_no_record_bounds_has_no_idle_told(tmp_path: Path) -> None:
    """AutotuneProcessPool.warm_up and submit return the job's future at once: where its worker's loop wrote no job
    record (an older log, a worker not traced), a real CPU run whose worker spent 2.13 s of CPU on its warm-up and a
    submitted job was told "idle 6.6 s after it was ready", 1.2 GiB·s, and advised its shutdown. Its idle is not
    known: no idle seconds, no idle MiB·s, no idle-pool finding, and the text says so; so too where its worker
    recorded fewer jobs than were handed (one job's end bounded by nothing). The same pool handed nothing is
    still told idle."""
    rep = report(autotune_pool(handed=True), tmp_path)
    (pool,) = rep["pools"]
    assert pool["idle_known"] is False and pool["idle_s"] == 0 and pool["idle_total_s"] == 0, pool
    assert pool["idle_mib_s"] is None and pool["held_pss_bytes"] is None and pool["idle_cpu"] is None, pool
    assert pool["peak_pss_bytes"] == 260 * MIB, pool
    assert "idle-pool" not in {f["kind"] for f in rep["findings"]}, rep["findings"]
    answer = " ".join(rep["answer"].split())
    assert "idle not known (its worker recorded fewer jobs than it was handed" in answer, answer
    assert "idle 1" not in answer, answer
    (pool,) = report(autotune_pool(handed=True, recorded=1), tmp_path)["pools"]
    assert pool["idle_known"] is False and pool["idle_s"] == 0 and pool["held_pss_bytes"] is None, pool
    control = report(autotune_pool(handed=False), tmp_path)
    (pool,) = control["pools"]
    assert pool["idle_known"] is True and pool["idle_s"] > 10 and pool["held_pss_bytes"] == 260 * MIB, pool
    assert "idle-pool" in {f["kind"] for f in control["findings"]}, control["findings"]


def test_an_autotune_pool_whose_worker_recorded_its_jobs_is_told_busy_and_idle(tmp_path: Path) -> None:
    """An AutotuneProcessPool's worker recorded each job it ran (its loop watched in the role warm_up handed it):
    busy exactly while it held one (the warm-up 12.0 -> 12.2 s, the job 12.3 -> 12.8 s), idle from the last one's
    end to the pool's shutdown (18 s: 5.2 s), holding what the watcher read then, with the idle-pool finding and its
    advice. The worker's import before its first job (the warm-up handed at 1.02 s, the worker read as started at
    1.015 s: its create_time's clock is coarser than the log's; queued all along) is no idle gap, though longer than
    one."""
    (pool,) = report(autotune_pool(handed=True, recorded=2, nested=True), tmp_path)["pools"]
    assert pool["idle_known"] is True and pool["jobs"] == 2, pool  # 2.14's warm_up hands its job by submit: one job
    rep = report(autotune_pool(handed=True, recorded=2), tmp_path)
    (pool,) = rep["pools"]
    assert pool["idle_known"] is True and pool["jobs"] == 2 and pool["idle_gaps"] == [], pool
    assert pool["busy_until"] == pytest.approx(12.8) and pool["idle_s"] == pytest.approx(5.2), pool
    assert pool["held_pss_bytes"] == 260 * MIB and pool["idle_mib_s"] == pytest.approx(5.2 * 260, rel=0.05), pool
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert idle["pids"] == [301] and "AutotuneProcessPool.shutdown_instance()" in idle["advice"], idle
    answer = " ".join(rep["answer"].split())
    assert "idle 5.2 s after its last job" in answer and "idle not known" not in answer, answer
    assert "holding 260 MiB real memory (PSS)" in answer, answer


def autotune_pool(handed: bool, recorded: int = 0, nested: bool = False) -> LogWriter:
    """main 100 makes an AutotuneProcessPool at 1 s; handed: warms it up (1.02 s), submits a job (1.5 s) and warms
    it up again (14 s: compile_fx_inner does so for each graph, and torch hands its worker nothing then); its
    worker 301 (spawned at 1.015 s, 260 MiB) records the first `recorded` of its two jobs (the warm-up 12.0 -> 12.2 s,
    the job 12.3 -> 12.8 s: it imported torch first, 10.9 s); the pool is shut down at 18 s. nested: the first
    warm_up hands its job by a submit call inside it (torch 2.14's)."""
    at = "torch._inductor.autotune_process:AutotuneProcessPool"
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{at}.__init__", 1, 1.01, caller=USER)
    if handed:
        call(w, 1.02, 100, 1, "main", f"{at}.warm_up", 2, 1.03, caller=USER)
        if nested:
            call(w, 1.021, 100, 1, "main", f"{at}.submit", 6, 1.022, caller=USER, parent=2)
        call(w, 1.5, 100, 1, "main", f"{at}.submit", 3, 1.501, caller=USER)
        call(w, 14.0, 100, 1, "main", f"{at}.warm_up", 5, 14.001, caller=USER)  # the next graph's: hands nothing
    # spawned inside the warm-up call, its start (a create_time) read a little before that call's, as a real one was
    start(w, 1.015, 301, 100, "autotune-worker", argv=["python", "-c", "from multiprocessing.spawn import x"])
    for work_id, (a, b, fn) in enumerate([(12.0, 12.2, "torch._inductor.autotune_process:_init_autotune_subprocess"),
                                          (12.3, 12.8, "time:sleep")][:recorded]):
        w.add(a, 301, 100, "autotune-worker", "job", state="start", work_id=work_id, fn=fn)
        w.add(b, 301, 100, "autotune-worker", "job", state="end", work_id=work_id)
    for t in (2.0, 6.0, 10.0, 13.0, 15.0, 17.0):
        mem(w, t, [(301, 1.015, 260)])
    call(w, 18, 100, 1, "main", f"{at}._shutdown", 4, 18.5)
    w.add(18.4, 301, 100, "autotune-worker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(19, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_quacks_compile_workers_are_a_pool(tmp_path: Path) -> None:
    """torch._vendor.quack's precompile Popens its compile workers (2.13+; run for real on CPU with stand-ins in
    tests/test_quack_pool.py): they are a pool of kind quack, made at the user's line, its workers as ps lists
    them, its memory at once, ended by its handle's shutdown."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", "torch._vendor.quack.autotuner:Autotuner._precompile", 1, 1.5, caller=USER)
    for pid in (201, 202):
        start(w, 1.1, pid, 100, "quack-worker", argv=["python", "-m", "torch._vendor.quack._compile_worker"])
    mem(w, 2.0, [(201, 1.1, 90), (202, 1.1, 110)])
    mem(w, 4.0, [(201, 1.1, 95), (202, 1.1, 120)])
    call(w, 5, 100, 1, "main", "torch._vendor.quack.autotuner:_PrecompileHandle.shutdown", 2, 5.5, caller=USER)
    for pid in (201, 202):
        w.add(5.3, pid, 100, "quack-worker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(6, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["kind"] == "quack" and pool["worker_pids"] == [201, 202] and pool["processes"] == 2
    assert pool["peak_pss_bytes"] == 215 * MIB and pool["ending"]["kind"] == "shutdown-completed"
    assert ("made a quack compile pool (torch._vendor.quack's precompile) (2 quack compile workers, no sidecar) at "
            "/home/u/train.py:12 (main)") in " ".join(rep["answer"].split())


def test_an_idle_autotune_pool_is_not_advised_shutdown_compile_workers(tmp_path: Path) -> None:
    """An autotune subprocess idle for 13 s: its advice names what stops it (shutdown_compile_workers() and
    compile_threads never touch it)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    at = "torch._inductor.autotune_process"
    call(w, 1, 100, 1, "main", f"{at}:TuningProcess.start", 1, 1.01, caller=USER, autotune_pid=201)
    start(w, 1.1, 201, 100, "autotune-worker", argv=["python", "__autotune_main__.py"])
    call(w, 1.5, 100, 1, "main", f"{at}:TuningProcess.get", 2, 2.0, caller=USER)
    mem(w, 3.0, [(201, 1.1, 250)])
    mem(w, 10.0, [(201, 1.1, 250)])
    call(w, 15, 100, 1, "main", f"{at}:TuningProcess.shutdown", 3, 15.5, caller=USER)
    w.add(15.4, 201, 100, "autotune-worker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(16, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["kind"] == "autotune" and pool["idle_s"] == 13.0
    idle = next(f for f in rep["findings"] if f["kind"] == "idle-pool")
    assert idle["advice"].startswith("these are max-autotune's benchmark subprocesses")
    assert "shutdown_compile_workers() after your last compile" not in idle["advice"]


def _pool_made_again() -> LogWriter:
    """tnt#713's shape: main makes a pool through a helper (compile_step, train.py:21) called from train.py:26,
    user code shuts it down at 10 s, and the same helper, called from train.py:31, makes a second one at 20 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    step = {"file": "/home/u/train.py", "line": 21, "func": "compile_step"}
    torch_frame = {"file": "/v/lib/python3.11/site-packages/torch/_inductor/async_compile.py", "line": 353,
                   "func": "wait_pool_ready"}
    for n, (t, outer_line, side) in enumerate(((1.0, 26, 200), (20.0, 31, 400))):
        outer = {"file": "/home/u/train.py", "line": outer_line, "func": "<module>"}
        cid = 10 * (n + 1)
        w.add(t, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=cid, thread="MainThread",
              stack=[outer, step, torch_frame], caller=step)
        w.add(t + 0.5, 100, 1, "main", "return", call_id=cid, duration_s=0.5, sidecar_pid=side)
        start(w, t + 0.2, side, 100, "compile-sidecar")
        call(w, t + 1, side, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, None)
        stop = t + 9
        call(w, stop, 100, 1, "main", f"{SP}:SubprocPool.shutdown", cid + 1, stop + 0.2, caller=outer,
             sidecar_pid=side)
        call(w, stop + 0.05, side, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 2, stop + 0.06, parent=1)
        w.add(stop + 0.1, side, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(30.7, 900, 1, "watcher", "leftover", run="r1", root_pid=100, how="root-exit", count=0, pids=[], procs=[])
    w.add(30.7, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_pool_made_again_is_told_with_the_caller_that_tells_it_apart(tmp_path: Path) -> None:
    """Two pools one process made one after the other at one helper's line: the Answer tells each (not "+1 more
    pools"), each with where the helper was called from, the frame that differs (train.py:26, train.py:31)."""
    rep = report(_pool_made_again(), tmp_path)
    first, second = rep["pools"]
    assert first["called_from"]["line"] == 26 and second["called_from"]["line"] == 31, rep["pools"]
    answer = rep["answer"]
    assert "more pools" not in answer, answer
    assert ("made a compile pool (sidecar 200) at /home/u/train.py:21 (compile_step), called from "
            "/home/u/train.py:26 (<module>)") in answer, answer
    assert ("Then main 100 made another compile pool (sidecar 400) at /home/u/train.py:21 (compile_step), called "
            "from /home/u/train.py:31 (<module>)") in answer, answer
    # a pool alone at its line is told by its line only
    assert report(idle_pool(), tmp_path)["pools"][0]["called_from"] is None


def _sidecar_start_failed() -> LogWriter:
    """pytorch#196972's shape under pytest: test_a's first compile makes a pool whose sidecar dies as it starts
    (its import of typing found a stale backport in a folder the main put on sys.path); test_a and test_b each
    wait on the pool's ready job until their timeout; torch's atexit finds one job pending in the dead pool."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    step = {"file": "/home/u/tests/test_model.py", "line": 24, "func": "compile_once"}
    for n, (a, b) in enumerate(((1.0, 9.1), (9.2, 17.1))):
        nodeid = f"tests/test_model.py::test_{'ab'[n]}"
        w.add(a, 100, 1, "main", "test", nodeid=nodeid, phase="start")
        cid = 10 * (n + 1)
        w.add(a + 0.05, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait_pool_ready", call_id=cid,
              thread="MainThread", stack=[step], caller=step)
        if n == 0:
            w.add(1.1, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=2, parent_call=cid,
                  thread="MainThread", stack=[step], caller=step, env={"PYTEST_CURRENT_TEST": f"{nodeid} (call)"})
            w.add(1.2, 100, 1, "main", "return", call_id=2, duration_s=0.1, sidecar_pid=200)
            start(w, 1.3, 200, 100, "compile-sidecar")
            bad = {"file": "/home/u/tests/vendored/typing.py", "line": 4, "func": "<module>"}
            w.add(1.5, 200, 100, "compile-sidecar", "error", source="excepthook", exc_type="ImportError",
                  message="typing 3.7.4.3 backport: incompatible with this Python",
                  frames=[{"file": "/v/lib/python3.11/site-packages/torch/_inductor/compile_worker/__main__.py",
                           "line": 9, "func": "<module>"}, bad], origin=bad)
            w.add(1.6, 200, 100, "compile-sidecar", "process_exit", how="exit", code=1, counts={}, dropped=0)
        w.add(b - 0.1, 100, 1, "main", "return", call_id=cid, duration_s=8.0, error="TimeoutError: ")
        w.add(b, 100, 1, "main", "test", nodeid=nodeid, phase="end")
    w.add(20, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=30, thread="MainThread",
          stack=[], pending_jobs=[1], pool_running=True)
    w.add(20.1, 100, 1, "main", "return", call_id=30, duration_s=0.1, sidecar_pid=200)
    label = f"{SP}:SubprocPool.submit"
    w.add(21, 100, 1, "main", "process_exit", how="exit", counts={label: 1}, dropped=0,
          count_times={label: [T0 + 1.25, T0 + 1.25]})
    return w


def test_a_sidecar_that_died_as_it_started_leads_with_its_cause_and_its_fix(tmp_path: Path) -> None:
    """The failed start is the cause, its lost job under it, and Fix first removes the shadowing module (a new
    pool, "make a new pool after the old one died", would die the same way); the later test that waited on the
    dead pool's ready job used it (waiting on it is use)."""
    rep = report(_sidecar_start_failed(), tmp_path)
    (pool,) = rep["pools"]
    assert pool["test"] == "tests/test_model.py::test_a", pool
    assert pool["tests_used"] == ["tests/test_model.py::test_b"], pool
    answer = rep["answer"]
    lines = answer.splitlines()
    assert lines[0].startswith("- 1 compile sidecar(s) never served their pool"), answer
    assert lines[1].startswith("  - ") and "never answered" in lines[1], answer
    fix = answer.split("Fix first: ", 1)[1]
    assert fix.startswith("take /home/u/tests/vendored off sys.path before the first compile"), fix
    assert "make a new pool" not in fix and "as the standard library's `typing`" in fix, fix
    assert "used again by 1 later test: tests/test_model.py::test_b" in answer, answer


@pytest.mark.parametrize("has_names", [True, False], ids=["stdlib_module_names", "python3.9"])
def test_a_module_shadowing_the_standard_librarys_is_found_on_every_python(
        has_names: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidecar's shadowed-module advice reads the log, not the analyzing Python: where sys has no
    stdlib_module_names (3.9) the standard library's own folders give the names, so a 3.9 reader gives the same
    advice (a plain module, a package, a compiled one, a built-in one); the standard library's own files, the
    test package and third-party names are no shadow."""
    if not has_names:
        monkeypatch.delattr(sys, "stdlib_module_names", raising=False)
    assert shadowing("/home/u/tests/vendored/typing.py") == ("typing", "/home/u/tests/vendored")
    assert shadowing("/v/lib/python3.9/site-packages/enum.py") == ("enum", "/v/lib/python3.9/site-packages")
    assert shadowing("/home/u/src/json/__init__.py") == ("json", "/home/u/src")
    assert shadowing("/home/u/src/math.py") == ("math", "/home/u/src")
    assert shadowing("/home/u/src/sys.py") == ("sys", "/home/u/src")
    assert shadowing("/usr/lib/python3.9/typing.py") is None
    assert shadowing("/home/u/src/test/__init__.py") is None
    assert shadowing("/home/u/src/numpy/__init__.py") is None
    assert shadowing("/home/u/src/typing.so") is None


def test_a_pools_idle_cpu_is_told_where_its_samples_show_it(tmp_path: Path) -> None:
    """The watcher's samples carry each process's CPU so far (the stat read its thread count already takes): the
    pool's CPU over the idle span is each process's last reading in the span less its first, said with the part
    of the span read; a log without those readings says nothing of CPU."""
    w = idle_pool()
    cpu = {(5.0, 200): 2.31, (15.0, 200): 2.33, (30.0, 200): 2.36, (5.0, 301): 0.5, (15.0, 301): 0.5}
    for r in w.lines:
        if r["event"] == "memory":
            for e in r["procs"]:
                e["cpu_s"] = cpu.get((round(r["ts"] - T0, 1), e["pid"]))
    (pool,) = report(w, tmp_path)["pools"]
    # idle from 10 s (its last job): the sidecar read at 15 and 30 s (+0.03 s), worker 301 once (nothing told)
    assert pool["idle_cpu"] == {"cpu_s": 0.03, "from": 15.0, "to": 30.0}, pool["idle_cpu"]
    assert "its processes used 0.03 s of CPU in the 15.0 s of it read" in render_text(report(w, tmp_path), {})
    (plain,) = report(idle_pool(), tmp_path)["pools"]
    assert plain["idle_cpu"] is None


def test_the_watchers_cpu_reading_agrees_with_psutil() -> None:
    """read_stat's CPU of a process (utime + stime) lies between psutil's readings taken just before and after."""
    import psutil

    me = psutil.Process()
    end = time.process_time() + 0.3
    while time.process_time() < end:  # some CPU of our own, so the figure is not 0
        pass
    before = sum(me.cpu_times()[:2])
    threads, cpu = memory.read_stat(os.getpid())
    after = sum(me.cpu_times()[:2])
    assert threads == me.num_threads() and cpu is not None
    assert before - 0.011 <= cpu <= after + 0.011, (before, cpu, after)


def async_wait(w: LogWriter, t: float, end: float, cid: int, pool_jobs: int | None) -> None:
    """main's AsyncCompile.wait, with the pool jobs pending as it began (None: a log written before that capture)."""
    at_call = {"pool_jobs": pool_jobs} if pool_jobs is not None else {}
    w.add(t, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait", call_id=cid, thread="MainThread",
          stack=[USER], caller=USER, compile_threads=2, **at_call)
    w.add(end, 100, 1, "main", "return", call_id=cid, duration_s=end - t)


def test_a_wait_begun_with_no_pool_job_pending_does_not_keep_the_pool_busy(tmp_path: Path) -> None:
    """CPU torch compiles C++ in the process: its AsyncCompile.wait then waits on no pool job. A wait begun with
    pool jobs pending (9 -> 12 s) keeps the pool busy until it returns; a later one begun with none pending
    (30 -> 40 s) does not, nor a wait_pool_ready on the pool already ready (45 s): the idle span starts at 12 s,
    not 45 s. A wait without the capture (older logs) is still counted as one on the pool."""
    w = idle_pool(quiesce_at=None)
    async_wait(w, 9.0, 12.0, 10, pool_jobs=3)
    async_wait(w, 30.0, 40.0, 11, pool_jobs=0)
    # a later test's wait_pool_ready on the pool already ready: it sends no job (torch keeps the done future)
    call(w, 45.0, 100, 1, "main", f"{AC}:AsyncCompile.wait_pool_ready", 12, 45.001, caller=USER)
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["busy_until"] == 12.0 and pool["idle_s"] == pytest.approx(48.01), pool
    assert "idle 48.0 s after its last job" in render_text(rep, {})
    old = idle_pool(quiesce_at=None)
    async_wait(old, 9.0, 12.0, 10, pool_jobs=3)
    async_wait(old, 30.0, 40.0, 11, pool_jobs=None)
    (pool,) = report(old, tmp_path)["pools"]
    assert pool["busy_until"] == 40.0, pool


def test_where_its_workers_recorded_their_jobs_a_pool_is_busy_only_while_one_held_a_job(tmp_path: Path) -> None:
    """The workers' own job records are the evidence: a pool is busy while one of its workers held a job (their
    union), idle the rest. Here the creator waits 30 -> 40 s with its pending jobs not captured (a torch keeping no
    pool set): from its side alone the pool was busy until 40 s, but no worker held a job after 10.5 s. The ready
    probe (3.6 -> 3.8 s) is a job like the others, inside the pool's start. A job never ended holds the pool busy
    until its worker ended."""
    def with_jobs(w: LogWriter) -> LogWriter:
        return add_jobs(w, ((301, 0, 3.6, 3.8), (301, 1, 5.0, 6.0), (302, 2, 9.0, 10.5)))

    older = idle_pool(quiesce_at=None)
    async_wait(older, 30.0, 40.0, 10, pool_jobs=None)
    (pool,) = report(older, tmp_path)["pools"]
    assert pool["busy_until"] == 40.0, pool  # no job records: the creator's wait is all the log says
    w = with_jobs(idle_pool(quiesce_at=None))
    async_wait(w, 30.0, 40.0, 10, pool_jobs=None)
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["busy_until"] == 10.5 and pool["idle_s"] == pytest.approx(60.0 - 10.5, abs=0.05), pool
    assert "idle 49.5 s after its last job" in render_text(rep, {})
    held = with_jobs(idle_pool(quiesce_at=None))
    held.add(50.0, 302, 200, "compile-worker", "job", state="start", work_id=3, fn="m:f")
    held.add(55.0, 302, 200, "compile-worker", "process_exit", how="exit", counts={}, dropped=0)
    (pool,) = report(held, tmp_path)["pools"]
    assert pool["busy_until"] == 55.0, pool


def test_a_pool_idle_between_its_uses_is_told_from_its_workers_job_records(tmp_path: Path) -> None:
    """A pool idle between its uses (a notebook's next cell compiles a minute after the first) is told from its
    workers' job records: each stretch of IDLE_GAP_S or more with no job held, from its ready (4 s) to its first
    job after it (30 s), and between two jobs (33 -> 50 s); the total idle counts them with the span after its
    last job (51 -> 60 s); the MiB·s over each is what its processes held there (the crafted samples: sidecar
    200 MiB, two workers 15 MiB each). Without job records nothing tells the gaps: none is told."""
    assert IDLE_GAP_S == 10.0  # the bar the figures below sit far from (gaps of 26 and 17 s; merged jobs 30-33 s)
    rep = report(_gapped_pool(), tmp_path)
    (pool,) = rep["pools"]
    assert [(g["from_s"], g["to_s"], g["s"], g["first"]) for g in pool["idle_gaps"]] == [
        (4.0, 30.0, 26.0, True), (33.0, 50.0, 17.0, False)], pool["idle_gaps"]
    assert [g["mib_s"] for g in pool["idle_gaps"]] == [pytest.approx(200 * 26 + 2 * 15 * 26, abs=0.1),
                                                      pytest.approx(230 * 17, abs=0.1)]
    after = 60.01 - 51.0  # to the pool's shutdown
    assert pool["idle_s"] == pytest.approx(after) and pool["idle_mib_s"] == pytest.approx(230 * after, abs=0.1)
    assert pool["idle_total_s"] == pytest.approx(26 + 17 + after), pool
    assert pool["idle_total_mib_s"] == pytest.approx((200 + 2 * 15) * 26 + 230 * 17 + 230 * after, abs=0.3)
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert "idle 26.0 s between its ready at 4.0 s and its first job at 30.0 s, 52.0 s idle in all" in idle["text"]
    assert "; idle 9.0 s after its last job (from 51.0 s)" in idle["text"], idle["text"]
    assert idle["cost"]["idle_s"] == pytest.approx(26 + 17 + after)
    assert idle["cost"]["idle_mib_s"] == pytest.approx(pool["idle_total_mib_s"], abs=0.1)
    older = idle_pool(quiesce_at=None)  # no job records: the creator's side cannot tell when no job was held
    (pool,) = report(older, tmp_path)["pools"]
    assert pool["idle_gaps"] == [] and pool["idle_total_s"] == pool["idle_s"], pool


def test_a_ready_probe_whose_end_record_lands_after_the_ready_still_opens_the_first_gap(tmp_path: Path) -> None:
    """The worker writes its job's end record after it sends the result: on a loaded box the main's
    wait_pool_ready returned first (the ready probe's end 12 ms after the ready, in a CI run). The gap after the
    probe is still the one from the pool's ready to its first job (the probe began before the ready; no job came
    between): its start is the probe's recorded end, and it is told as after the ready, as on a quiet box."""
    w = add_jobs(idle_pool(quiesce_at=None), ((301, 0, 3.6, 4.012), (301, 1, 30.0, 31.0), (301, 2, 50.0, 51.0)))
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["ready_at"] == 4.0
    assert [(g["from_s"], g["to_s"], g["first"]) for g in pool["idle_gaps"]] == [
        (4.012, 30.0, True), (31.0, 50.0, False)], pool["idle_gaps"]
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert "between its ready at 4.0 s and its first job at 30.0 s" in idle["text"], idle["text"]


def test_a_first_compile_that_starts_before_the_probes_end_record_is_no_ready_in_the_gaps_words(
        tmp_path: Path) -> None:
    """The creator's first compile, sent as wait_pool_ready returned, started in the other worker before the ready
    probe's worker wrote its end record (1.9 ms before it, in a live run): the two spans merge, the stretch after
    them begins at that compile's end (8 s), not at the ready (4 s), and it follows a job: told "between a job's
    end at 8.0 s and its next job at 30.0 s", never "between its ready at 8.0 s and its first job"."""
    w = add_jobs(idle_pool(quiesce_at=None), ((301, 0, 3.6, 4.012), (302, 1, 4.010, 8.0), (301, 2, 30.0, 31.0)))
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["ready_at"] == 4.0
    assert [(g["from_s"], g["to_s"], g["first"]) for g in pool["idle_gaps"]] == [(8.0, 30.0, False)], pool["idle_gaps"]
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert "between a job's end at 8.0 s and its next job at 30.0 s" in idle["text"], idle["text"]
    assert "between its ready" not in idle["text"] + rep["answer"], idle["text"]


class _Subproc:
    def __init__(self, n: int) -> None:
        self.pending_futures = {i: object() for i in range(n)}


class _Executor:
    def __init__(self, n: int) -> None:
        self._pending_work_items = {i: object() for i in range(n)}


def test_pool_jobs_sums_the_live_pools_pending_jobs_and_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """process.pool_jobs: the pending jobs of every pool in torch's _pool_set (a SubprocPool's pending_futures, a
    ProcessPoolExecutor's _pending_work_items), from whichever module keeps the set; None when unknown."""
    import types

    from wp_autotrace.runtime.reads import read_pool_jobs, read_pool_pending, resolve

    # the tracer's own set of compile executors too (runtime/jobs.py): another test file importing it (collected
    # in the same session) must not make the reads below find an empty one
    for name in ("torch._inductor.async_compile", "torch._inductor.codecache", "wp_autotrace.runtime.jobs"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert read_pool_jobs() is None  # torch's pool module not imported: unknown, and nothing imported
    assert "torch._inductor.async_compile" not in sys.modules
    ac = types.ModuleType("torch._inductor.async_compile")
    monkeypatch.setitem(sys.modules, ac.__name__, ac)
    assert read_pool_jobs() is None  # a torch keeping no pool set (2.1, 2.2)
    ac._pool_set = {_Subproc(2), _Executor(3), _Subproc(0)}  # type: ignore[attr-defined]
    assert read_pool_jobs() == 5 and resolve("process.pool_jobs", None, None) == 5
    ac._pool_set = set()  # type: ignore[attr-defined]
    assert read_pool_jobs() == 0
    ac._pool_set = {object()}  # type: ignore[attr-defined]  # a pool whose pending jobs cannot be read
    assert read_pool_jobs() is None

    class Raising:
        def __iter__(self) -> Any:
            raise RuntimeError("Set changed size during iteration")

    ac._pool_set = Raising()  # type: ignore[attr-defined]
    assert read_pool_jobs() is None
    monkeypatch.delitem(sys.modules, ac.__name__)
    cc = types.ModuleType("torch._inductor.codecache")  # torch 2.3 keeps the set in codecache
    cc._pool_set = {_Executor(1)}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, cc.__name__, cc)
    assert read_pool_jobs() == 1
    # process.pool_pending: the same reads, per pool, named by its sidecar's pid or its workers' pids
    side, executor = _Subproc(2), _Executor(1)
    side.process = types.SimpleNamespace(pid=150)  # type: ignore[attr-defined]
    executor._processes = {202: object(), 201: object()}  # type: ignore[attr-defined]
    cc._pool_set = [side, executor]  # type: ignore[attr-defined]
    assert resolve("process.pool_pending", None, None) == [{"sidecar_pid": 150, "pending": 2},
                                                           {"worker_pids": [201, 202], "pending": 1}]
    cc._pool_set = [side, object()]  # type: ignore[attr-defined]
    assert read_pool_pending() is None


def _torch_job(kernel: str) -> None:
    """Stands in for torch's per-kernel compile function (named torch.* below)."""


_torch_job.__module__ = "torch._inductor.fake"


def test_a_fork_pools_pending_jobs_are_named_newest_first_as_a_worker_names_them() -> None:
    """named_work: the newest PENDING_NAMED of an executor's pending work items, each named as a worker's job
    record names the job it takes (a torch function's first name argument; a user's function by name only); only
    concurrent.futures' own _WorkItem is read (a stand-in whose attribute access would run code is skipped)."""
    import functools
    from concurrent.futures import Future
    from concurrent.futures.process import _WorkItem

    from wp_autotrace.runtime.reads import PENDING_NAMED, named_work

    class Trap:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError("a pending item's own __getattr__ was called")

    pending: dict[Any, Any] = {i: _WorkItem(Future(), _torch_job, (f"triton_poi_fused_{i}",), {})
                               for i in range(PENDING_NAMED + 4)}
    pending[100] = _WorkItem(Future(), functools.partial(_torch_job, "triton_red_fused_9"), (), {})
    pending[101] = _WorkItem(Future(), os.getpid, ("secret-token",), {})
    pending[102] = Trap()
    got = named_work(pending)
    assert [j["work_id"] for j in got] == list(range(7, PENDING_NAMED + 4)) + [100, 101], got
    assert got[0] == {"work_id": 7, "fn": "torch._inductor.fake:_torch_job", "arg": "triton_poi_fused_7"}
    assert got[-2]["arg"] == "triton_red_fused_9" and got[-1] == {"work_id": 101, "fn": "posix:getpid"}, got


def _blocking_job(fd: int) -> int:
    return len(os.read(fd, 1))


def test_the_exit_joins_capture_counts_and_names_a_torch_pools_pending_jobs() -> None:
    """process.exit_pending, read as concurrent.futures' exit join starts: each executor with a manager thread
    whose initializer is torch's compile initializer, its worker pids, pending jobs and their names (a real fork
    executor: one worker holding a job blocked on a pipe, two more queued); an executor started without torch's
    initializer is not read."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from wp_autotrace.runtime.reads import resolve

    def _async_compile_initializer() -> None:
        pass

    _async_compile_initializer.__module__ = "torch._inductor.async_compile"
    _async_compile_initializer.__qualname__ = "_async_compile_initializer"
    ctx = multiprocessing.get_context("fork")
    r, w = os.pipe()
    torch_pool = ProcessPoolExecutor(1, mp_context=ctx, initializer=_async_compile_initializer)
    own_pool = ProcessPoolExecutor(1, mp_context=ctx)
    try:
        futures = [torch_pool.submit(_blocking_job, r) for _ in range(3)]
        assert own_pool.submit(os.getpid).result(timeout=60) > 0
        got = resolve("process.exit_pending", None, None)
        workers = sorted(torch_pool._processes)  # type: ignore[attr-defined]
        assert got == [{"worker_pids": workers, "pending": 3,
                        "jobs": [{"work_id": i, "fn": f"{__name__}:_blocking_job"} for i in range(3)]}], got
    finally:
        os.write(w, b"xxx")
        assert [f.result(timeout=60) for f in futures] == [1, 1, 1]
        torch_pool.shutdown(wait=True)
        own_pool.shutdown(wait=True)
        os.close(r)
        os.close(w)


def _gapped_pool() -> LogWriter:
    """idle_pool whose workers wrote job records: the ready probe, jobs at 30-33 s and 50-51 s; gaps 4 -> 30 s
    and 33 -> 50 s (the gaps tests' log); read every 2 s from the workers' start on."""
    w = add_jobs(idle_pool(quiesce_at=None),
                 ((301, 0, 3.6, 3.8), (301, 1, 30.0, 31.0), (302, 2, 30.5, 33.0), (301, 3, 50.0, 51.0)))
    keep_up(w, 3.7, 60.0, [(200, 1.2, 200, 60.3), (301, 3.6, 15, 60.3), (302, 3.6, 15, 60.3)])
    return w


def test_a_pools_idle_gaps_are_told_where_the_user_reads_with_one_figure(tmp_path: Path) -> None:
    """The gaps between a pool's uses (26 s from its ready to its first job, 17 s between jobs) are told wherever
    its idle time is: the run's costs (`costs.idle_s` / `idle_mib_s` and the cost line), the Pools section and
    the Answer's pool sentence, each with the pool's one figure (idle_total_s: 26 + 17 + 9.01 s after its last
    job; idle_total_mib_s), not the 9 s after its last job alone; the page draws each gap as an idle phase and
    shades it under the memory line with its report's seconds and MiB·s."""
    rep = report(_gapped_pool(), tmp_path)
    (pool,) = rep["pools"]
    total_s, total_mib_s = 26 + 17 + (60.01 - 51.0), (200 + 2 * 15) * 26 + 230 * 17 + 230 * (60.01 - 51.0)
    assert pool["idle_total_s"] == pytest.approx(total_s) and pool["idle_total_mib_s"] == pytest.approx(
        total_mib_s, abs=0.3), pool
    costs = rep["costs"]
    assert costs["idle_s"] == pytest.approx(total_s) and costs["idle_mib_s"] == pytest.approx(total_mib_s, abs=0.3)
    text = render_text(rep, {})
    assert f"; pools idle {total_s:.1f} s: {total_mib_s / 1024:.1f} GiB·s" in text, text
    assert ("idle 9.0 s (51.0 s -> 60.0 s); idle gaps 26.0 s (4.0 s -> 30.0 s), 17.0 s (33.0 s -> 50.0 s); idle in "
            f"all {total_s:.1f} s") in text, text
    assert f"real memory peak 230 MiB (PSS), {total_mib_s / 1024:.1f} GiB·s idle" in text, text
    answer = text.split("\n")[1]
    assert ("idle 26.0 s between its ready at 4.0 s and its first job at 30.0 s (+1 more idle gap of 17.0 s), "
            f"idle 9.0 s after its last job ({total_s:.1f} s idle in all), holding 230 MiB real memory (PSS): "
            f"{total_mib_s / 1024:.1f} GiB·s idle") in answer, answer
    from wp_autotrace.analysis.present.html import render_html

    page = render_html(rep, text)
    assert page.count('class="phase idle"') == 3, page  # two gaps and the span after its last job
    assert "idle 26.0 s between its ready (4.00 -&gt; 30.00 s); 5.8 GiB·s idle" in page, page
    assert "idle 17.0 s between its uses (33.00 -&gt; 50.00 s): 3.8 GiB·s held idle" in page, page


def test_a_pool_stopped_while_a_worker_held_a_job_tells_no_idle_span_running_backwards(tmp_path: Path) -> None:
    """A worker took a job at 50 s that no record ends; torch's atexit shut the pool down at 60.01 s while it was
    still held: its busy time runs past the stop, so there was no idle span after its last job. The Pools line
    said "idle 0.0 s (60.7 s -> 60.0 s)" and the idle-pool finding "idle 0.0 s after its last job (from 60.7 s)
    until ... at 60.0 s": a span running backwards. The gap before that job is still told."""
    w = idle_pool(quiesce_at=None)
    w.add(50.0, 301, 200, "compile-worker", "job", state="start", work_id=0, fn="m:f")
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["busy_past_stop"] and pool["idle_s"] == 0 and pool["busy_until"] > pool["idle_to"], pool
    text = render_text(rep, {})
    assert "not idle after its last job: busy until 60.7 s, past its stop at 60.0 s" in text, text
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert "idle 46.0 s between its ready at 4.0 s and its first job at 50.0 s" in idle["text"], idle["text"]
    assert "0 s after its last job: still busy until torch's atexit" in idle["text"], idle["text"]
    assert "(from 60.7 s)" not in idle["text"] and "(60.7 s -> 60.0 s)" not in text


def test_a_pool_shut_down_before_its_sidecar_served_is_not_told_busy_nor_idle_backwards(tmp_path: Path) -> None:
    """A child makes its pool and shuts it down at once (its exit): the shutdown is asked at 1.5 s, before its
    sidecar reaches its serving loop at 3.0 s. No job record: its busy time is inferred (serving), and ran past
    the stop; the Pools line said "idle 0.0 s (3.0 s -> 1.5 s)" (a saved two-child log said "(9.5 s -> 7.9 s)"),
    and no record shows it busy: it stopped first."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1.1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.2, caller=USER, sidecar_pid=200)
    start(w, 1.15, 200, 100, "compile-sidecar")
    call(w, 1.5, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 3.6, sidecar_pid=200)
    call(w, 3.0, 200, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, 3.4)
    mem(w, 3.1, [(200, 1.15, 60)])
    w.add(3.5, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(3.7, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["stopped_first"] and not pool["busy_past_stop"] and pool["idle_s"] == 0, pool
    text = render_text(rep, {})
    assert "not idle: stopped at 1.5 s, before 3.0 s (its serving or ready came after)" in text, text
    assert "(3.0 s -> 1.5 s)" not in text and "busy until" not in text, text


def test_a_held_figure_from_a_moment_that_read_some_of_the_pool_says_how_many(tmp_path: Path) -> None:
    """The held figure is the most the pool held at one moment of its idle span; where that moment read only
    some of its processes alive (one worker unread then, though read later), every text of it says "N of M" and
    "at least": the Findings, the Answer and the page's idle phase (which said "holding 215 MiB" unqualified).
    pipe_held's orphan (one of its two workers read in the 0.09 s span, 74 MiB) says "1 of 2" too, and its page
    tells the 216 MiB it held once orphaned, as the Answer does."""
    w = idle_pool(quiesce_at=None)
    _set_mem(w, 15.0, [(200, 1.2, 200), (301, 3.6, 15)])  # 302 not read at 15 s (its 5 s reading is before)
    mem(w, 40.0, [(302, 3.6, 15)])  # 302 read in the span, alone: read, not at the held moment
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["held_pss_bytes"] == 215 * MIB and (pool["held_read"], pool["held_processes"]) == (2, 3), pool
    assert pool["span_sampled"] == 3  # every one was read in the span: at the held moment, not all
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert "holding at least 215 MiB (2 of 3 processes read)" in idle["text"], idle["text"]
    assert "holding at least 215 MiB real memory (PSS, 2 of 3 processes read)" in rep["answer"], rep["answer"]
    from wp_autotrace.analysis.present.html import render_html

    page = render_html(rep, render_text(rep, {}))
    assert "holding at least 215 MiB (PSS, 2 of 3 processes read)" in page, page
    assert "holding 215 MiB" not in page

    w = orphaned_pool_read_late()
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["held_pss_bytes"] == 77508608 and (pool["held_read"], pool["held_processes"]) == (1, 2), pool
    page = render_html(rep, render_text(rep, {}))
    assert "outlived its creator 60.0 s (3.20 -&gt; 63.20 s), holding 216 MiB (PSS)" in page, page


def _watcher_stopped() -> LogWriter:
    """idle_pool read every 2 s until 30.0 s, then never again (a watcher killed, or a sampler far behind) while
    the pool idles on to its shutdown request at 60.01 s: the sidecar's last reading (30.0 s, 200 MiB) is the
    last word on it for the 30 s after."""
    w = idle_pool()
    keep_up(w, 3.7, 28.0, KEPT_UP)
    return w


def test_a_reading_older_than_the_staleness_window_adds_nothing_to_an_idle_pools_mib_s(tmp_path: Path) -> None:
    """Memory at once counts a reading for its run's window at most (memseries.stale_s: 1.5 x the 2 s period the
    watcher kept here = 3 s; a stale reading is not memory at that moment); the idle MiB·s is its integral, so
    the sidecar's last reading (30.0 s) counts until 33 s, not to the end of the idle span at 60.01 s: the
    watcher stopped, a gap far beyond its own pace. 230 MiB x 10.1 s (workers until their quiesce exit at
    20.1 s) + 200 MiB x 12.9 s, and the 27 s no reading covered are told as unread. (A second rule carried each
    process's last reading to the span's end: 10.1 GiB·s, with nothing read for half of it.)"""
    rep = report(_watcher_stopped(), tmp_path)
    (pool,) = rep["pools"]
    assert (pool["busy_until"], pool["idle_to"]) == (10.0, 60.01)
    stale = 30.0 + max(STALE_S, MEMORY_KEPT_K * 2.0)  # the run's kept period: a reading every 2 s
    assert pool["idle_mib_s"] == pytest.approx(230 * 10.1 + 200 * (stale - 20.1), abs=0.1), pool
    assert pool["idle_unread_s"] == pytest.approx(60.01 - stale), pool
    assert rep["costs"]["idle_mib_s"] == pool["idle_total_mib_s"] == pool["idle_mib_s"]
    # the floor is told as one: 23 of the 50.0 s read
    assert re.search(r"holding 230 MiB real memory \(PSS\): at least 4\.8 GiB·s \(read for 23 of 50 s\) idle",
                     rep["answer"]), rep["answer"]
    assert mib_s_text(pool["idle_mib_s"]) == "4.8 GiB·s"


def test_a_pool_a_loaded_watcher_read_every_9_s_is_read_for_its_whole_idle_span(tmp_path: Path) -> None:
    """A loaded watcher (its CPU budget, smaps_rollup slower under load) swept an idle pool every 9 s, not its
    2 s: a reading counts 1.5 x the period the watcher kept (13.5 s), so each holds until the next, and the idle
    MiB·s is the sample-and-hold integral of the pool's constant PSS: 230 MiB until the workers' exit at 20.1 s,
    200 MiB to the shutdown request at 60.01 s, as a watcher keeping up reads it (IDLE_MIB_S), with nothing
    unread and no floor. (A window of the watcher's nominal 2.5 s counted 2.5 s of every 9: 'at least'.)"""
    w = idle_pool(read=False)
    keep_up(w, 3.7, 60.0, KEPT_UP, every=9.0)  # 3.7, 12.7, ..., 57.7 s
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert (pool["busy_until"], pool["idle_to"]) == (10.0, 60.01)
    assert pool["idle_mib_s"] == pytest.approx(IDLE_MIB_S, abs=0.1) and pool["idle_unread_s"] == 0, pool
    assert rep["costs"]["idle_mib_s"] == pool["idle_mib_s"] and rep["costs"]["idle_unread_s"] == 0
    assert "holding 230 MiB real memory (PSS): 10.1 GiB·s idle" in rep["answer"], rep["answer"]
    assert "at least" not in rep["answer"]


def test_a_watcher_that_stopped_reading_leaves_the_rest_of_the_idle_span_unread(tmp_path: Path) -> None:
    """The same 9 s pace until 48.7 s, then no reading for 63 s while the pool idles on (the watcher stopped),
    one at 111.7 s: a gap far beyond the pace the watcher kept is not carried, nor does it set the pace (the
    median gap, 9 s). The 48.7 s reading counts its 13.5 s (to 62.2 s), the 49.5 s after are unread, the
    111.7 s reading holds to the shutdown request at 120.01 s, and the MiB·s is told as a floor."""
    w = idle_pool(read=False, later=60.0)  # shutdown request at 120.01 s
    keep_up(w, 3.7, 50.0, KEPT_UP, every=9.0)  # 3.7, 12.7, ..., 48.7 s
    mem(w, 111.7, [(200, 1.2, 200)])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert (pool["busy_until"], pool["idle_to"]) == (10.0, 120.01)
    held_to = 48.7 + MEMORY_KEPT_K * 9.0
    assert pool["idle_mib_s"] == pytest.approx(230 * 10.1 + 200 * (held_to - 20.1 + 120.01 - 111.7), abs=0.1), pool
    assert pool["idle_unread_s"] == pytest.approx(111.7 - held_to, abs=1e-3), pool
    assert re.search(r"holding 230 MiB real memory \(PSS\): at least 12\.1 GiB·s \(read for 61 of 110 s\) idle",
                     rep["answer"]), rep["answer"]


@pytest.mark.parametrize("log", ["sparse", "watcher_stopped", "gapped", "kept_up", "every_9_s", "stopped_9_s"])
def test_an_idle_mib_s_is_the_integral_of_the_pools_memory_at_once(tmp_path: Path, log: str) -> None:
    """Every MiB·s of a pool (its idle span, each idle gap, the costs) is memory at once, its definition read at
    every moment (tests/memdef.py, not the report's code), integrated over that stretch; and the pool's series
    (whose largest point is its peak) is that same definition at each reading."""
    from wp_autotrace.analysis.report import analyze_view

    from .memdef import at_once_by_definition, integral_by_definition

    w = {"sparse": idle_pool, "watcher_stopped": _watcher_stopped, "gapped": _gapped_pool}.get(log, idle_pool)()
    if log == "kept_up":
        keep_up(w, 3.7, 60.0, KEPT_UP)
    if log in ("every_9_s", "stopped_9_s"):  # a loaded watcher's pace; one that stopped after 48.7 s
        w = idle_pool(read=False, later=60.0 if log == "stopped_9_s" else 0.0)
        keep_up(w, 3.7, 50.0 if log == "stopped_9_s" else 60.0, KEPT_UP, every=9.0)
        if log == "stopped_9_s":
            mem(w, 111.7, [(200, 1.2, 200)])
    rep, view = analyze_view(read_logs([str(w.write(tmp_path / "log.jsonl"))]))
    (pool,), (model_pool,) = rep["pools"], view.pools
    story = view.story(model_pool)
    series = at_once_by_definition(story.procs)
    assert story.series == series and pool["peak_pss_bytes"] == max(pt.pss for pt in series)
    assert pool["idle_s"] > 0
    byte_s, unread_s = integral_by_definition(story.procs, story.busy_until, story.idle_to)
    assert pool["idle_mib_s"] == round(byte_s / MIB, 1), (pool, byte_s / MIB)
    gaps = [integral_by_definition(story.procs, g.start, g.end) for g in story.gaps]
    assert [g["mib_s"] for g in pool["idle_gaps"]] == [round(b / MIB, 1) for b, _ in gaps]
    assert pool["idle_unread_s"] == pytest.approx(unread_s, abs=1e-3)
    assert [g["unread_s"] for g in pool["idle_gaps"]] == [pytest.approx(u, abs=1e-3) for _, u in gaps]
    assert pool["idle_total_unread_s"] == pytest.approx(unread_s + sum(u for _, u in gaps), abs=1e-3)
    assert rep["costs"]["idle_mib_s"] == pytest.approx((byte_s + sum(b for b, _ in gaps)) / MIB, abs=0.2)
    if log == "sparse":  # read at 5, 15 and 30 s only: near the last reading the watcher kept 10 and 15 s
        # (the median of the sweeps near it, 12.5 s), so each reading holds until the next or 18.75 s: the workers
        # to their exit at 20.1 s, the sidecar's 30 s one to 48.75 s
        assert pool["idle_mib_s"] == pytest.approx(230 * 10.1 + 200 * (30 + MEMORY_KEPT_K * 12.5 - 20.1), abs=0.1)
        assert pool["idle_unread_s"] == pytest.approx(60.01 - 48.75, abs=1e-3)
    if log == "kept_up":
        assert pool["idle_mib_s"] == pytest.approx(IDLE_MIB_S, abs=0.1) and pool["idle_unread_s"] == 0


def test_a_watcher_whose_pace_changed_mid_run_is_read_at_the_pace_it_kept_there(tmp_path: Path) -> None:
    """The watcher swept the pool every 2.5 s until 33.7 s, then every 6 s (the box got busier) to 81.7 s, the
    pool idle from 10 s to the shutdown request at 90.01 s. Most of the run's sweep periods are 2.5 s, so one
    window for the whole run (1.5 x the median, 3.75 s) left 2.25 s of every 6 s gap unread (a plain figure
    10-13 % under the probe on saved logs where the pace changed so). A reading counts for 1.5 x the pace kept
    near it (fold/pace.py): each 6 s gap is read, and the MiB·s is the sample-and-hold integral of the pool's
    constant PSS, with nothing unread and no floor."""
    w = idle_pool(read=False, later=30.0)
    procs = [(200, 1.2, 200, 90.3), *KEPT_UP[1:]]  # the sidecar lives to 90.3 s (later)
    keep_up(w, 3.7, 33.7, procs, every=2.5)
    keep_up(w, 39.7, 82.0, procs, every=6.0)  # 39.7, 45.7, ..., 81.7 s
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert (pool["busy_until"], pool["idle_to"]) == (10.0, 90.01)
    assert pool["idle_unread_s"] == 0, pool
    assert pool["idle_mib_s"] == pytest.approx(230 * 10.1 + 200 * (90.01 - 20.1), abs=0.1), pool
    assert "holding 230 MiB real memory (PSS): 15.9 GiB·s idle" in rep["answer"], rep["answer"]


def test_the_first_gap_after_a_slow_phase_counts_at_the_runs_own_pace(tmp_path: Path) -> None:
    """Swept every 6 s to 63.7 s (the run's pace), then 8.5 s to the next sweep (its budget still paying for
    the slow phase) and every 2.5 s after. The sweeps around that gap are half 6 s, half 2.5 s (a local pace of
    4.25 s, a 6.4 s window); a reading never counts less than 1.5 x the run's own period (9 s), so the gap is
    read, as the run-wide rule read it, and nothing of the idle span is unread."""
    w = idle_pool(read=False, later=30.0)
    procs = [(200, 1.2, 200, 90.3), *KEPT_UP[1:]]
    keep_up(w, 3.7, 63.7, procs, every=6.0)
    keep_up(w, 72.2, 82.2, procs, every=2.5)  # 72.2, 74.7, ..., 82.2 s
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert (pool["busy_until"], pool["idle_to"]) == (10.0, 90.01)
    assert pool["idle_unread_s"] == 0, pool
    assert pool["idle_mib_s"] == pytest.approx(230 * 10.1 + 200 * (90.01 - 20.1), abs=0.1), pool


def test_a_pools_peak_that_read_some_of_its_processes_says_so(tmp_path: Path) -> None:
    """The watcher read the sidecar and one worker of idle_pool, never worker 302: no moment read the pool whole,
    so its peak is a floor (200 + 15 MiB, 2 of the 3 alive read). The report carries the point's read and alive
    (pools[].peak_read / peak_processes, the series' peak), and the pool's line, the page's key row say "at
    least ... (2 of 3 ... read)", never the bare figure as if all were read."""
    from wp_autotrace.analysis.present.html import render_html
    from wp_autotrace.analysis.present.render import render_text

    w = idle_pool(read=False)
    keep_up(w, 5.0, 19.0, [(200, 1.2, 200, 60.3), (301, 3.6, 15, 20.1)])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert (pool["peak_pss_bytes"], pool["peak_read"], pool["peak_processes"]) == (215 * MIB, 2, 3), pool
    (series,) = rep["runs"][0]["memory_at_once"]
    assert series["peak"][1:4] == [215 * MIB, 2, 3], series["peak"]
    text = render_text(rep, {})
    assert "real memory peak at least 215 MiB (PSS, 2 of 3 processes read)" in text, text
    assert "peak at least 215 MiB at once (PSS, 2 of 3 read), at " in render_html(rep, text)


def test_a_pools_peak_is_a_moment_one_sweep_read_on_the_report_and_the_page(tmp_path: Path) -> None:
    """A watcher at a 9 s pace (a reading counts 13.5 s) read one worker alone at 16.0 s, 3.3 s after the pool's
    12.7 s sweep, at 500 MiB: that point sums it with the sidecar's and the other worker's readings of 3.3 s
    before (715 MiB), a sum no one sweep saw. It stays on the report's line; the pool's peak, the report's
    series peak and the page's key row are the largest point one moment read (230 MiB, the 3.7 s sweep)."""
    from wp_autotrace.analysis.present.html import render_html
    from wp_autotrace.analysis.present.render import render_text

    w = idle_pool(read=False)
    keep_up(w, 3.7, 60.0, KEPT_UP, every=9.0)  # 3.7, 12.7, 21.7, ... s
    mem(w, 16.0, [(301, 3.6, 500)])
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    (series,) = rep["runs"][0]["memory_at_once"]
    assert max(pt[1] for pt in series["points"]) == 715 * MIB  # on the line
    assert pool["peak_pss_bytes"] == 230 * MIB and series["peak"][1] == 230 * MIB, (pool["peak_pss_bytes"], series)
    assert "pool of sidecar 200: peak 230 MiB at once" in render_html(rep, render_text(rep, {}))


def threads_set_late(env_at_start: dict[str, str]) -> LogWriter:
    """main 100 (started with env_at_start) loads inductor's config with compile_threads=2 at 0.5 s; a library then
    sets TORCHINDUCTOR_COMPILE_THREADS=1 in the process (after torch read it); the pool made at 1.0 s has 2 workers."""
    w = LogWriter()
    w.add(0, 100, 1, "main", "process_start", argv=["python", "serve.py"], python="3.11.7", forked=False,
          env=env_at_start, run="r1", root_pid=100, create_time=T0)
    w.add(0.5, 100, 1, "main", "config", settings=SETTINGS, torch_version="2.13.0+cpu", knobs=KNOBS)
    w.add(1.0, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=1, thread="MainThread",
          stack=[USER], caller=USER, env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})
    w.add(1.4, 100, 1, "main", "return", call_id=1, duration_s=0.4, sidecar_pid=200)
    start(w, 1.2, 200, 100, "compile-sidecar", argv=["python", "x/compile_worker/__main__.py", "--workers=2"])
    w.add(5.0, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    w.add(5.1, 900, 1, "watcher", "leftover", run="r1", root_pid=100, how="root-exit", count=0, pids=[], procs=[])
    return w


def test_a_threads_variable_set_after_the_config_loaded_and_before_the_pool_is_told_with_the_fix_in_code(
        tmp_path: Path) -> None:
    """TORCHINDUCTOR_COMPILE_THREADS=1 set inside the process after torch._inductor.config read the variable (a
    serving library's plugin loader): the pool is made with the config's 2 workers all the same. Told, with the
    setting in code as the fix (the variable is read once, at the config's load). Set as the process started, the
    config reads it: not this finding (setting-overridden tells a value changed before the load)."""
    rep = report(threads_set_late({}), tmp_path)
    late = next(f for f in rep["findings"] if f["kind"] == "setting-too-late")
    assert late["text"].startswith("TORCHINDUCTOR_COMPILE_THREADS=1 was set in main 100 after torch._inductor."
                                   "config loaded (with compile_threads=2) and before its compile pool was made at "
                                   "1.0 s"), late
    assert "the pool has 2 workers" in late["text"], late["text"]
    assert late["advice"].startswith("set it in code before the first compile: torch._inductor.config.compile_threads"
                                     " = 1"), late["advice"]
    assert rep["answer"].startswith("- TORCHINDUCTOR_COMPILE_THREADS=1 was set in main 100 after"), rep["answer"]
    (tmp_path / "started").mkdir()
    started = report(threads_set_late({"TORCHINDUCTOR_COMPILE_THREADS": "1"}), tmp_path / "started")
    assert "setting-too-late" not in {f["kind"] for f in started["findings"]}, started["findings"]
