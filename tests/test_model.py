"""The run model and findings on synthetic logs: identities, runs, pools, counts, one scenario per finding."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from wp_autotrace.analysis.findings import FINDINGS
from wp_autotrace.analysis.fold.model import Waited
from wp_autotrace.analysis.fold.verdict import Reader
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze, analyze_view
from wp_autotrace.analysis.words.fmt import MIB

from .logs import AC, PLUGIN, SP, T0, LogWriter, call, kinds, report, seed_log, start, watcher
from .test_pools import device_pool, idle_pool, spawn_child_exit
from .test_threads import _renderer, _two_threads_pools

GOLDEN = Path(__file__).resolve().parent / "golden"


def clean_run() -> LogWriter:
    """main 100 makes one pool (sidecar 200), shuts it down, everything exits."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    start(w, 1.2, 200, 100, "compile-sidecar")
    call(w, 3, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 3.1, sidecar_pid=200)
    call(w, 3.05, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 1, 3.06)
    w.add(3.2, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(4, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def with_killed_sidecar() -> LogWriter:
    w = clean_run()
    w.lines = [r for r in w.lines if not (r["pid"] == 200 and r["event"] in ("process_exit", "call", "return"))
               and r.get("target") != f"{SP}:SubprocPool.shutdown" and r.get("call_id") != 2]
    w.add(2, 100, 1, "main", "tree", count=1, started=[], ended=[{"pid": 200, "end": T0 + 2}], run="r1")
    return w


def with_lost_job() -> LogWriter:
    """The sidecar was killed at 2 s; main sent another job at 2.5 s (its last, from its own line) and
    torch's shutdown at 3 s found one job still pending in the dead pool."""
    w = with_killed_sidecar()
    w.lines = [r for r in w.lines if not (r["pid"] == 100 and r["event"] == "process_exit")]
    w.add(3, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=2, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN, pending_jobs=[1], pool_running=True)
    w.add(3.1, 100, 1, "main", "return", call_id=2, duration_s=0.1, sidecar_pid=200)
    label = f"{SP}:SubprocPool.submit"
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={label: 2}, dropped=0,
          count_times={label: [T0 + 1.6, T0 + 2.5]}, count_callers={label: {"file": "/u/serve.py", "line": 9,
                                                                              "func": "handle"}})
    return w


def with_worker_lost() -> LogWriter:
    """Sidecar 200 forks workers 300, 301; at 2.5 s torch's job callback logs a job's BrokenProcessPool (a worker
    ended abruptly), the watcher misses both by 2.55 s, and the sidecar forks 302, 303 and serves on."""
    w = clean_run()
    frames = [{"file": "/site/torch/_inductor/compile_worker/subproc_pool.py", "line": 437, "func": "callback"},
              {"file": "/usr/lib/python3.11/concurrent/futures/_base.py", "line": 449, "func": "result"}]
    call(w, 1.25, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._start_pool", 10, 1.3, worker_pids=[300, 301])
    start(w, 1.26, 300, 200, "compile-worker")
    start(w, 1.27, 301, 200, "compile-worker")
    w.add(2.5, 200, 100, "compile-sidecar", "error", source="logging",
          logger="torch._inductor.compile_worker.subproc_pool", level="ERROR", exc_type="BrokenProcessPool",
          message="A process in the process pool was terminated abruptly while the future was running or pending.",
          frames=frames, log_message="Error in subprocess")
    watcher(w, 2.55, "tree", count=4, started=[], ended=[{"pid": 300, "end": T0 + 2.55},
                                                         {"pid": 301, "end": T0 + 2.55}])
    call(w, 2.51, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._start_pool", 11, 2.52, worker_pids=[300, 301])
    call(w, 2.52, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._start_pool", 12, 2.6, worker_pids=[302, 303])
    start(w, 2.56, 302, 200, "compile-worker")
    start(w, 2.58, 303, 200, "compile-worker")
    return w


def _slow_ready(ready_at: float, side_at: float | None = None, idle_s: float = 0.0,
                cpu: float | None = 0.5, side_created: bool = True) -> LogWriter:
    """main 100 (4 threads at 1.5 s) calls wait_pool_ready at 1.0 s; the pool it makes there gets its sidecar 200
    at side_at (default: 21.0 s, or 1 s before ready_at; its fork's create_time then, unless not side_created: an
    older writer's record, the sidecar's start known only from its process_start, written after its interpreter's
    start-up); the wait returns at ready_at; idle_s: the pool then idles that long, read at 250 MiB, before main
    shuts it down. cpu: the share of a core main used while it waited (the watcher's CPU readings of it 0.5 s
    after the sidecar's start and 0.2 s before ready; None: none)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(1.0, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait_pool_ready", call_id=1, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN)
    w.add(1.01, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=2, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN, parent_call=1)
    watcher(w, 1.5, "memory", procs=[{"pid": 100, "pss": 200 << 20, "uss": 1 << 20, "threads": 4}])
    side_at = min(21.0, ready_at - 1.0) if side_at is None else side_at
    start(w, side_at, 200, 100, "compile-sidecar", **({"create_time": T0 + side_at} if side_created else {}))
    if cpu is not None:
        a, b = side_at + 0.5, ready_at - 0.2
        for t, used in ((a, 3.0), (b, 3.0 + cpu * (b - a))):
            watcher(w, t, "memory", procs=[{"pid": 100, "pss": 200 << 20, "uss": 1 << 20, "threads": 4,
                                            "cpu_s": used}])
    w.add(side_at + 0.1, 100, 1, "main", "return", call_id=2, duration_s=side_at - 0.91, sidecar_pid=200)
    w.add(ready_at, 100, 1, "main", "return", call_id=1, duration_s=ready_at - 1.0)
    for t in (ready_at + 0.5, ready_at + idle_s / 2, ready_at + idle_s):
        watcher(w, t, "memory", procs=[{"pid": 200, "pss": 250 << 20, "uss": 1 << 20, "threads": 4}])
    ready_at += idle_s
    call(w, ready_at + 1, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 3, ready_at + 1.1, sidecar_pid=200)
    call(w, ready_at + 1.05, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 1, ready_at + 1.06)
    w.add(ready_at + 1.2, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(ready_at + 2, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(ready_at + 2, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def with_cut_off_job() -> LogWriter:
    """User code asked the live pool to stop while a job was in flight."""
    w = clean_run()
    for r in w.lines:
        if r["event"] == "call" and r.get("target") == f"{SP}:SubprocPool.shutdown":
            r.update(pending_jobs=[3], pool_running=True)
    return w


def with_zombie() -> LogWriter:
    """The sidecar ended and its parent never reaped it: the watcher saw it defunct, with its status."""
    w = clean_run()
    watcher(w, 3.3, "tree", count=1, started=[], ended=[{"pid": 200, "end": T0 + 3.3}],
            zombies=[{"pid": 200, "ppid": 1, "since": T0 + 3.3, "status": 9}])
    return w


def with_fork_hang() -> LogWriter:
    """main made a fork pool while running 3 threads; its AsyncCompile.wait on the pool was interrupted by
    Ctrl-C after 3.5 s and the process lived on until killed (no process_exit)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    w.add(2, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.process_pool", call_id=1, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN)
    w.add(2.001, 100, 1, "main", "call", call_id=2, parent_call=1, thread="MainThread", stack=[PLUGIN],
          caller=PLUGIN, target="torch._inductor.compile_worker.tracked_process_pool:TrackedProcessPoolExecutor"
          ".__init__", threads=3)
    w.add(2.002, 100, 1, "main", "return", call_id=2, duration_s=0.001)
    w.add(2.003, 100, 1, "main", "return", call_id=1, duration_s=0.003)
    w.add(2.4, 201, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7", forked=True,
          env={}, run="r1", root_pid=100)
    w.add(2.41, 201, 100, "compile-worker", "role")
    call(w, 2.5, 100, 1, "main", f"{AC}:AsyncCompile.wait", 3, None)
    w.add(6, 100, 1, "main", "return", call_id=3, duration_s=3.5, error="KeyboardInterrupt: ")
    watcher(w, 9, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 9}, {"pid": 201, "end": T0 + 9}])
    watcher(w, 9.2, "leftover", how="root-killed", count=0, pids=[], procs=[])
    return w


def with_sidecar_pool(workers: tuple[int, ...] = (201, 202)) -> LogWriter:
    """main 100 made a SubprocPool at 1 s (call 1): its sidecar 150 started at 1.2 s, its workers at 2.0 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    call(w, 1, 100, 1, "main", "torch._inductor.compile_worker.subproc_pool:SubprocPool.__init__", 1, None)
    w.add(1.5, 100, 1, "main", "return", call_id=1, duration_s=0.5, sidecar_pid=150)
    w.add(1.2, 150, 100, "compile-sidecar", "process_start", argv=["python", "__main__.py", "--workers=2"],
          python="3.11.7", forked=False, env={}, run="r1", root_pid=100)
    for pid in workers:
        w.add(2.0, pid, 150, "compile-worker", "process_start", argv=["python", "__main__.py"], python="3.11.7",
              forked=True, env={}, run="r1", root_pid=100)
    return w


def with_sidecar_hang(at: float = 8.0, error: str = "KeyboardInterrupt: ") -> LogWriter:
    """main made a SubprocPool (sidecar 150, workers 201/202); worker 201 took the ready job and ended it just
    after the wait began, then took slowjob:hang at 3.0 s and never ended it; main's AsyncCompile.wait from 2.9 s
    was interrupted (error: by Ctrl-C) at `at` (8 s: 5.0 s into the job); torch's atexit then stopped the pool (the
    workers ended 0.3 s later)."""
    w = with_sidecar_pool()
    w.add(2.5, 201, 150, "compile-worker", "job", state="start", work_id=0, fn=f"{AC}:AsyncCompile._get_ready")
    w.add(2.95, 201, 150, "compile-worker", "job", state="end", work_id=0)  # not the hung job
    call(w, 2.9, 100, 1, "main", f"{AC}:AsyncCompile.wait", 2, None)
    w.lines[-1].update(pool_jobs=1, pool_pending=[{"sidecar_pid": 150, "pending": 1}])  # captured as it began
    w.add(3.0, 201, 150, "compile-worker", "job", state="start", work_id=1, fn="slowjob:hang")
    w.add(at, 100, 1, "main", "return", call_id=2, duration_s=at - 2.9, error=error)
    ended = at + 0.3
    watcher(w, ended, "tree", count=2, started=[], ended=[{"pid": p, "end": T0 + ended} for p in (201, 202, 150)])
    w.add(at + 0.5, 100, 1, "main", "process_exit", how="exit", code=1)
    watcher(w, at + 0.6, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + at + 0.6}])
    watcher(w, at + 0.7, "leftover", how="root-exit", count=0, pids=[], procs=[])
    return w


def with_stuck_sidecar_job() -> LogWriter:
    """with_sidecar_hang, the Ctrl-C coming 405 s into the job: past torch's own bar for a stuck compile job."""
    return with_sidecar_hang(at=408.0)


def fork_pool_at_3(w: LogWriter, pid: int, ppid: int, role: str, line: int, threads: int, argv: list[str]
                   ) -> None:
    """pid's first Triton kernel at 3 s (main.py:line) made torch's fork pool (process_pool's
    TrackedProcessPoolExecutor, while pid ran `threads` threads), which forked compile workers 201 and 202."""
    user = {"file": "/home/u/main.py", "line": line, "func": "<module>"}
    call(w, 3, pid, ppid, role, f"{AC}:AsyncCompile.wait_pool_ready", 1, 3.1, caller=user)
    w.add(3.001, pid, ppid, role, "call", target=f"{AC}:AsyncCompile.process_pool", call_id=2, parent_call=1,
          thread="MainThread", stack=[user], caller=user)
    w.add(3.002, pid, ppid, role, "call", call_id=3, parent_call=2, thread="MainThread", stack=[user],
          caller=user, target="torch._inductor.compile_worker.tracked_process_pool:TrackedProcessPoolExecutor"
          ".__init__", threads=threads)
    w.add(3.003, pid, ppid, role, "return", call_id=3, duration_s=0.001)
    w.add(3.004, pid, ppid, role, "return", call_id=2, duration_s=0.003)
    for worker in (201, 202):
        w.add(3.05, worker, pid, "child", "process_start", argv=argv, python="3.11.7", forked=True, env={},
              run="r1", root_pid=100)
        w.add(3.06, worker, pid, "compile-worker", "role")


def with_orphaned_fork_pool() -> LogWriter:
    """pytorch#87335's shape: main (a harness) runs child 150, which makes a fork pool at 3 s and dies at 3.2 s
    without an exit of its own; its workers live on (re-parented) until 63.2 s; main ends only then."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    w.add(0.1, 150, 100, "child", "process_start", argv=["python", "main.py", "child"], python="3.11.7",
          forked=False, env={}, run="r1", root_pid=100)
    fork_pool_at_3(w, 150, 100, "child", 27, 1, ["python", "main.py", "child"])
    watcher(w, 3.2, "tree", count=3, started=[], ended=[{"pid": 150, "end": T0 + 3.2}])
    for t in (4.0, 30.0, 60.0):
        watcher(w, t, "memory", procs=[{"pid": pid, "pss": 100 * 2**20, "uss": 2**20} for pid in (201, 202)])
    watcher(w, 63.2, "tree", count=1, started=[],
            ended=[{"pid": 201, "end": T0 + 63.2}, {"pid": 202, "end": T0 + 63.2}])
    w.add(63.25, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 63.3, "leftover", how="root-exit", count=0, pids=[], procs=[])
    return w


def with_exit_hang() -> LogWriter:
    """with_fork_hang, and its exit: concurrent.futures' join (_python_exit) began at 6.1 s and never returned."""
    w = with_fork_hang()
    call(w, 6.1, 100, 1, "main", "concurrent.futures.process:_python_exit", 4, None)
    w.lines.sort(key=lambda r: r["ts"])
    return w


AT = "torch._inductor.autotune_process"


def with_autotune_kill(shutdown_at: float = 7.0, mib: int = 0) -> LogWriter:
    """main started a TuningProcess (201); its benchmark's get waited 3 s, then torch killed 201 (running) and
    started 202 for the next candidate; 201 stayed defunct under main (status 9) until main ended. mib: 202's PSS
    as the watcher read it every 2 s from its last get to its shutdown (at shutdown_at)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    call(w, 1, 100, 1, "main", f"{AT}:TuningProcess.start", 1, 1.01, autotune_pid=201)
    w.add(1.1, 201, 100, "autotune-worker", "process_start", argv=["python", "__autotune_main__.py"],
          python="3.11.7", forked=False, env={}, run="r1", root_pid=100)
    call(w, 1.2, 100, 1, "main", f"{AT}:TuningProcess.get", 2, None)
    w.add(4.2, 100, 1, "main", "call", target=f"{AT}:TuningProcess.kill", call_id=3, parent_call=2,
          thread="MainThread", stack=[PLUGIN], caller=PLUGIN, autotune_pid=201, running=True)
    w.add(4.21, 100, 1, "main", "return", call_id=3, duration_s=0.01)
    w.add(4.22, 100, 1, "main", "return", call_id=2, duration_s=3.02, error="TimeoutError: Timeout")
    call(w, 4.3, 100, 1, "main", f"{AT}:TuningProcess.start", 4, 4.31, autotune_pid=202)
    w.add(4.4, 202, 100, "autotune-worker", "process_start", argv=["python", "__autotune_main__.py"],
          python="3.11.7", forked=False, env={}, run="r1", root_pid=100)
    watcher(w, 4.5, "tree", count=2, started=[], ended=[{"pid": 201, "end": T0 + 4.4}],
            zombies=[{"pid": 201, "ppid": 100, "since": T0 + 4.4, "status": 9}])
    call(w, 4.6, 100, 1, "main", f"{AT}:TuningProcess.get", 5, 6)
    t = 6.5
    while mib and t < shutdown_at:
        w.add(t, 900, 1, "watcher", "memory", run="r1", root_pid=100, devices=[], procs=[
            {"pid": 202, "create_time": T0 + 4.4, "pss": mib * MIB, "uss": mib * MIB // 4, "rss": 4 * mib * MIB}])
        t += 2.0
    end = shutdown_at + 2
    call(w, shutdown_at, 100, 1, "main", f"{AT}:TuningProcess.shutdown", 6, shutdown_at + 0.5)
    w.add(shutdown_at + 0.4, 202, 100, "autotune-worker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(end, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, end + 0.2, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + end + 0.1},
                                                              {"pid": 202, "end": T0 + shutdown_at + 0.5}])
    watcher(w, end + 0.3, "leftover", how="root-exit", count=0, pids=[], procs=[])
    return w


def with_setting_overridden() -> LogWriter:
    """main started with TORCHINDUCTOR_COMPILE_THREADS=4; inductor's config loaded with compile_threads=1."""
    w = LogWriter()
    w.add(0, 100, 1, "main", "process_start", argv=["python", "main.py"], python="3.11.7", forked=False,
          env={"TORCHINDUCTOR_COMPILE_THREADS": "4"}, run="r1", root_pid=100)
    w.add(1, 100, 1, "main", "config", settings={"compile_threads": 1}, torch_version="2.13.0")
    call(w, 2, 100, 1, "main", "torch._dynamo.convert_frame:_compile", 1, 5)
    w.add(6, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def with_spawn_reimport() -> LogWriter:
    """A spawned child imported the unguarded main script again: its wait_pool_ready raised multiprocessing's
    bootstrapping error."""
    w = clean_run()
    w.add(1.0, 300, 100, "child", "process_start", python="3.11.7", forked=False, env={}, run="r1", root_pid=100,
          argv=["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork"])
    main = {"file": "/home/u/train.py", "line": 3, "func": "<module>"}
    stack = [{"file": "/usr/lib/python3.11/multiprocessing/spawn.py", "line": 297, "func": "_fixup_main_from_path"},
             main]
    w.add(1.5, 300, 100, "child", "call", target=f"{AC}:AsyncCompile.wait_pool_ready", call_id=1,
          thread="MainThread", stack=stack, caller=main)
    w.add(1.6, 300, 100, "child", "return", call_id=1, duration_s=0.1,
          error="RuntimeError: An attempt has been made to start a new process before the current process has "
                "finished its bootstrapping phase.")
    return w


def with_setting_too_late() -> LogWriter:
    """main made a SubprocPool at 2 s; an AsyncCompile.wait at 4 s, while it lived, began with
    TORCHINDUCTOR_WORKER_START=fork."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 2, 100, 1, "main", f"{SP}:SubprocPool.__init__", 10, 2.5, sidecar_pid=300)
    start(w, 2.2, 300, 100, "compile-sidecar")
    w.add(4, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait", call_id=20, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN, env={"TORCHINDUCTOR_WORKER_START": "fork"})
    w.add(4.1, 100, 1, "main", "return", call_id=20, duration_s=0.1)
    w.add(5, 300, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(5.1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def with_oom_killed() -> LogWriter:
    """A traced child of main ended unexplained as the cgroup's OOM kill count rose by one."""
    w = clean_run()
    start(w, 1.0, 300, 100, "child")
    watcher(w, 2.0, "tree", count=2, started=[], ended=[{"pid": 300, "end": T0 + 2.0}])
    watcher(w, 2.01, "oom", before=0, oom_kill=1, since=T0 + 1.91)
    return w


def with_oom_unnamed() -> LogWriter:
    """The cgroup's OOM kill count rose with no end of the run's processes near it (a process outside the run)."""
    w = clean_run()
    watcher(w, 1.51, "oom", before=0, oom_kill=1, since=T0 + 1.41)
    return w


def with_slow_exit(own: bool = False) -> LogWriter:
    """torch's own shutdown_compile_workers at exit took 12 s: its atexit handler calls it from no frame (stack [],
    caller None, as torch 2.13 writes it); own: the user's code called it (a user frame, PLUGIN here)."""
    w = clean_run()
    call(w, 3.5, 100, 1, "main", f"{AC}:shutdown_compile_workers", 9, 3.5 + 12)
    if not own:
        w.lines[-2].update(stack=[], caller=None)
    return w


def with_unreturned() -> LogWriter:
    w = clean_run()
    call(w, 3.5, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown_pool", 7, None)
    return w


def with_guard(refused: bool) -> Callable[[], LogWriter]:
    def make() -> LogWriter:
        w = LogWriter()
        start(w, 0, 100, 1, "main", guard=True)
        start(w, 1, 200, 100, "compile-sidecar", guard=True)
        if refused:
            w.add(2, 200, 100, "compile-sidecar", "blocked", target=f"{AC}:AsyncCompile.warm_pool", tag="warm-pool",
                  call_id=1, thread="MainThread", stack=[PLUGIN], caller=PLUGIN, action="skip")
        w.add(3, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
        w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
        return w
    return make


def with_tracer_errors() -> LogWriter:
    w = clean_run()
    w.add(2, 100, 1, "main", "tracer_error", where="record call", error="ValueError: x")
    w.lines[-2]["dropped"] = 3
    return w


def with_export_failed() -> LogWriter:
    """The watcher's live export could not send (a receiver answering 500): no record was lost."""
    w = clean_run()
    w.add(3.8, 900, 100, "watcher", "tracer_error", run="r1", where="live-export",
          error="4 span(s) not sent to http://127.0.0.1:4318/v1/traces, 0 sent; last failure: "
                "http://127.0.0.1:4318/v1/traces answered HTTP 500")
    return w


def with_cut_leftover() -> LogWriter:
    w = clean_run()
    w.add(3.9, 100, 1, "main", "leftover", how="root-exit", count=5, pids=[300], run="r1",
          procs=[{"pid": 300, "ppid": 1, "name": "python", "cmd": "x", "create_time": T0 + 1, "rss": 1 << 20}])
    return w


def with_raising_sidecar() -> LogWriter:
    w = clean_run()
    origin = {"file": "/site/torch/utils/_functools.py", "line": 50, "func": "__set__"}
    w.add(3.01, 200, 100, "compile-sidecar", "error", source="logging", logger="torch._inductor", level="ERROR",
          exc_type="RuntimeError", message="prefetchable_cache value already set", frames=[origin], origin=origin)
    w.lines = [r for r in w.lines if not (r["pid"] == 200 and r.get("target", "").endswith("_shutdown"))
               and not (r["pid"] == 200 and r["event"] == "return")]
    return w


def without_root_end(w: LogWriter) -> LogWriter:
    """w with the main process's process_exit and the leftover check taken out."""
    w.lines = [r for r in w.lines if not (r["pid"] == 100 and r["event"] in ("process_exit", "leftover"))]
    return w


def with_root_killed() -> LogWriter:
    """The main process SIGKILLed at 3.5 s: no process_exit; the watcher saw it go and sidecar 200 stay."""
    w = without_root_end(clean_run())
    w.lines = [r for r in w.lines if not (r["pid"] == 200 and r["event"] == "process_exit")]
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    watcher(w, 3.6, "tree", count=1, started=[], ended=[{"pid": 100, "end": T0 + 3.5}])
    watcher(w, 3.7, "leftover", how="root-killed", count=1, pids=[200],
            procs=[{"pid": 200, "ppid": 1, "name": "python", "cmd": "x", "rss": 280 << 20}])
    return w


def with_run_in_progress() -> LogWriter:
    """The watcher's latest tree record is not final, the main process has not exited: the run goes on."""
    w = without_root_end(clean_run())
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    watcher(w, 3.8, "tree", count=2, started=[], ended=[], final=False)
    call(w, 3.9, 100, 1, "main", f"{AC}:AsyncCompile.warm_pool", 11, None)
    return w


def with_verdict_pending() -> LogWriter:
    """The main process exited; the watcher runs but has written neither its verdict nor a sample since."""
    w = clean_run()
    w.lines = [r for r in w.lines if r["event"] != "leftover"]
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    watcher(w, 2.0, "tree", count=2, started=[{"pid": 200, "ppid": 100, "via": "child"}], ended=[])
    return w


GONE_WATCHER = 4_000_000  # above any pid_max: never a live process


def with_watcher_gone() -> LogWriter:
    """The main process exited; the watcher (on this host) is gone without leftover or watcher_exit."""
    w = LogWriter(host=os.uname().nodename)
    for r in clean_run().lines:
        if r["event"] != "leftover":
            w.add(r["ts"] - T0, r["pid"], r["ppid"], r["role"], r["event"],
                  **{k: v for k, v in r.items() if k not in ("v", "event", "ts", "pid", "ppid", "host", "role", "seq")})
    w.add(0.01, GONE_WATCHER, 100, "watcher", "watcher_start", interval=0.1, linger=5.0, run="r1", root_pid=100)
    w.add(2.0, GONE_WATCHER, 100, "watcher", "tree", count=2, started=[{"pid": 200, "ppid": 100, "via": "child"}],
          ended=[], run="r1", root_pid=100)
    return w


def with_records_lost() -> LogWriter:
    """The watcher could not write some records (a full disk), kept sampling, and said how many."""
    w = clean_run()
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    watcher(w, 4.1, "watcher_exit", reason="run-ended", samples=40, cpu_s=0.1, dropped=3)
    return w


def with_os_exit() -> LogWriter:
    """`run` saw the main process exit 0 with no process_exit (os._exit); the watcher saw it go."""
    w = with_root_killed()
    w.waited = Waited(100, 0)  # type: ignore[attr-defined]
    return w


def with_early_wakeup() -> LogWriter:
    """AsyncCompile.wakeup() returned without calling SubprocPool.wakeup (torch returned early)."""
    w = clean_run()
    call(w, 2, 100, 1, "main", f"{AC}:AsyncCompile.wakeup", 5, 2.001)
    return w


def with_forked_compile_hang(threads: int = 2, fork_at: float = 4.0, returns: bool = False) -> LogWriter:
    """main 100 (compile_threads=threads) compiles with async compile (its AsyncCompile.wait 2 -> 3 s), then forks
    child 300 at fork_at (a pre-forking server's worker: not exec'd), whose compile waits in AsyncCompile.wait from
    5 s; the master kills it at 95 s (gunicorn's worker timeout), or (returns) the wait returns at 6 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(0.5, 100, 1, "main", "config", settings={"compile_threads": threads}, torch_version="2.13.0")
    call(w, 2, 100, 1, "main", f"{AC}:AsyncCompile.wait", 1, 3.0)
    w.add(fork_at, 300, 100, "child", "process_start", argv=["python", "serve.py"], python="3.11.7", forked=True,
          env={}, run="r1", root_pid=100)
    call(w, 4.5, 300, 100, "child", "torch._dynamo.convert_frame:_compile", 1, 6.1 if returns else None)
    call(w, 5, 300, 100, "child", f"{AC}:AsyncCompile.wait", 2, 6.0 if returns else None)
    w.lines[-1 if not returns else -2]["parent_call"] = 1
    watcher(w, 95.1, "tree", count=1, started=[], ended=[{"pid": 300, "end": T0 + 95.0}])
    w.add(100, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(100, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def kernel_interrupted() -> LogWriter:
    """A Jupyter kernel interrupted while its pool's worker held a job (test_senders.kernel)."""
    from .test_senders import kernel

    return kernel()


def cpu_quota_pool() -> LogWriter:
    """A pool of 2 workers in a 0.2 CPU quota the kernel throttled during the run (test_cpu_quota._quota_run)."""
    from .test_cpu_quota import _quota_run

    return _quota_run(0.2, (2, 42))


def with_watcher_signalled() -> LogWriter:
    """A job step's end: slurmstepd sends SIGTERM to every process of the step, the watcher included; it watches on."""
    w = clean_run()
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    watcher(w, 3.5, "watcher_signal", signal="SIGTERM", sender_pid=7, sender_uid=0, sender="slurmstepd",
            action="watch-on")
    return w


def test_a_signal_to_the_watcher_alone_is_not_told_as_a_steps_end(tmp_path: Path) -> None:
    """The watcher alone sent SIGTERM by a shell (the program exits on its own): no record shows the step ending, and
    the finding does not say it; sent by slurmstepd, or with the main ended by the same signal, it does."""
    def said(sender: str, main_killed: bool = False) -> str:
        w = with_watcher_signalled()
        for r in w.lines:
            if r["event"] == "watcher_signal":
                r["sender"] = sender
        if main_killed:
            w.lines = [r for r in w.lines if not (r["event"] == "process_exit" and r["pid"] == 100)]
            watcher(w, 3.6, "tree", count=0, started=[], ended=[{"pid": 100, "create_time": T0, "end": T0 + 3.6}],
                    zombies=[{"pid": 100, "create_time": T0, "ppid": 1, "since": T0 + 3.6, "status": 15}])
        (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "watcher-signalled"]
        return str(f["text"])

    assert "a scheduler ending the job step (SLURM" in said("slurmstepd")
    alone = said("bash")
    assert "a scheduler ending the job step (SLURM" not in alone and "whether the step was ending is not known" in alone
    assert "a scheduler ending the job step (SLURM" in said("bash", main_killed=True)


SCENARIOS: dict[str, Callable[[], LogWriter]] = {
    "watcher-signalled": with_watcher_signalled,
    "cpu-quota-pool": cpu_quota_pool,
    "forked-compile-hang": with_forked_compile_hang,
    "idle-pool": idle_pool,
    "child-exit-wait": spawn_child_exit,
    "pool-device-files": device_pool,
    "root-killed": with_root_killed,
    "in-progress": with_run_in_progress,
    "verdict-pending": with_verdict_pending,
    "no-verdict": with_watcher_gone,
    "records-lost": with_records_lost,
    "root-os-exit": with_os_exit,
    "wakeup-no-pool": with_early_wakeup,
    "nested-pools": seed_log,
    "warm-pool-bypass": seed_log,
    "leftovers": seed_log,
    "pool-died": with_killed_sidecar,
    "worker-lost": with_worker_lost,
    "pool-ready-wait": lambda: _slow_ready(61.0),
    "pools-made-at-once": lambda: _two_threads_pools(0.01),
    "compile-after-exit": lambda: _renderer(2.0),
    "jobs-lost": with_lost_job,
    "jobs-cut-off": with_cut_off_job,
    "zombies": with_zombie,
    "fork-pool-hang": with_fork_hang,
    "pool-job-hang": with_stuck_sidecar_job,
    "pool-wait-interrupted": with_sidecar_hang,
    "pool-outlived-creator": with_orphaned_fork_pool,
    "interrupted-job": kernel_interrupted,
    "autotune-killed": with_autotune_kill,
    "setting-overridden": with_setting_overridden,
    "spawn-main-reimport": with_spawn_reimport,
    "setting-too-late": with_setting_too_late,
    "exit-hang": with_exit_hang,
    "compile-failed": lambda: _kernel_failed("RuntimeError: can't start new thread", 24),
    "oom-killed": with_oom_killed,
    "oom-in-cgroup": with_oom_unnamed,
    "sidecar-never-served": with_raising_sidecar,
    "slow-exit-wait": with_slow_exit,
    "call-never-returned": with_unreturned,
    "guard-refused": with_guard(True),
    "guard-idle": with_guard(False),
    "tracer-errors": with_tracer_errors,
    "export-failed": with_export_failed,
    "log-cut": with_cut_leftover,
}

# Where and when a scenario is read, where that decides its finding (default: here and now): a run that
# has not ended, read on another host right after its last record (nothing here can check it; only the
# log's age says it goes on).
SCENARIO_READERS = {"in-progress": Reader(T0 + 4, "elsewhere")}


def test_an_autotune_kill_is_told_cause_first(tmp_path: Path) -> None:
    """The hung benchmark and torch's SIGKILL lead the Answer, the zombie under the living main under it; the
    autotune subprocesses are one pool, counted and ended by its shutdown."""
    rep = report(with_autotune_kill(), tmp_path)
    (pool,) = rep["pools"]
    assert pool["kind"] == "autotune" and pool["worker_pids"] == [201, 202] and pool["jobs"] == 2
    assert pool["ending"]["kind"] == "shutdown-completed"
    (kill,) = pool["kills"]
    assert kill["pid"] == 201 and kill["replacement_pid"] == 202 and kill["waited_s"] == 3.0
    assert kill["signal"] == "SIGKILL" and kill["zombie_under_creator"] and kill["zombie_until_creator_end"]
    lines = rep["answer"].splitlines()
    assert lines[0].startswith("- Autotune subprocess 201 gave no answer to a benchmark for 3.0 s"), lines
    answer = " ".join(rep["answer"].split())
    assert "main 100 killed it with SIGKILL at 4.2 s, on its timeout, and started 202 in its place" in answer
    assert "- 201 stayed a zombie under main 100 (`ps` lists it <defunct>) from 4.4 s until main 100 ended" in answer
    assert "made an autotune pool (2 autotune subprocesses in all, no sidecar)" in answer
    assert "No compile pool" not in answer and "docker run --init" not in answer
    # the zombie finding says where it was (under the main, which ended), never "under pid 1"; it follows the kill
    kinds = [f["kind"] for f in rep["findings"]]
    (zombie,) = [f for f in rep["findings"] if f["kind"] == "zombies"]
    assert "its parent ended since, having reaped it first or handing it to pid 1" in zombie["text"]
    assert "each was under pid 1" not in zombie["text"]
    assert kinds.index("zombies") == kinds.index("autotune-killed") + 1


def test_an_autotune_kill_leads_an_idle_pool_after_it(tmp_path: Path) -> None:
    """The killed benchmark is lost work (torch scores its candidate inf and ignores it): it leads the Answer even
    where the pool then idled long enough for an idle-pool finding (202 holding 300 MiB for 8 s after its last
    get, then shut down): the cause first, the memory its pool held after it later. A real run told the idle
    pool first whenever its script's wait for a reading stretched the idle past IDLE_POOL_S."""
    w = with_autotune_kill(shutdown_at=14.0, mib=300)
    rep = report(w, tmp_path)
    found = [f["kind"] for f in rep["findings"]]
    assert "idle-pool" in found, found
    assert found.index("autotune-killed") < found.index("idle-pool"), found
    assert rep["answer"].startswith("- Autotune subprocess 201 gave no answer to a benchmark"), rep["answer"]


def test_every_finding_kind_has_a_scenario(tmp_path: Path) -> None:
    """Each finding in the registry has a scenario here, and none fires on a clean run."""
    assert len(SCENARIOS) == len(FINDINGS)
    assert kinds(report(clean_run(), tmp_path)) == set()


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
def test_finding_scenario(kind: str, tmp_path: Path) -> None:
    """The scenario for a finding kind raises that finding, with advice where there is some."""
    rep = report(SCENARIOS[kind](), tmp_path, reader=SCENARIO_READERS.get(kind))
    found = {f["kind"]: f for f in rep["findings"]}
    assert kind in found, rep["findings"]
    assert found[kind]["text"] and found[kind]["severity"] in ("problem", "warning", "info")
    json.dumps(rep, allow_nan=False)


def _threads_too_late(env: dict[str, str], at_call: dict[str, object]) -> LogWriter:
    """main made a SubprocPool for 2 workers (its sidecar's --workers=2); a later AsyncCompile.wait began with
    env and captured at_call (inductor's settings then)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 2, 100, 1, "main", f"{SP}:SubprocPool.__init__", 10, 2.5, sidecar_pid=300)
    w.add(2.2, 300, 100, "compile-sidecar", "process_start", argv=["x/compile_worker/__main__.py", "--workers=2"],
          python="3.11.7", forked=False, env={}, run="r1", root_pid=100)
    w.add(4, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait", call_id=20, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN, env=env, **at_call)
    w.add(4.1, 100, 1, "main", "return", call_id=20, duration_s=0.1)
    w.add(5, 300, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(5.1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_hang_at_exit_is_told_with_its_seconds_under_its_cause(tmp_path: Path) -> None:
    """concurrent.futures' exit join that never returned (the main killed inside it at 9 s): told with its seconds
    (2.9 s), as a symptom under the fork pool's hang that caused it, not as a call that never returned; a join
    that returned at once is no hang."""
    rep = report(with_exit_hang(), tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "exit-hang"]
    assert f["text"].startswith("At exit main 100 waited 2.9 s in concurrent.futures' join") and f["pids"] == [100]
    assert "call-never-returned" not in kinds(rep)
    lines = rep["answer"].splitlines()
    assert "fork compile pool" in lines[0] and lines[1].startswith("  - At exit main 100 waited 2.9 s"), lines
    quick = with_fork_hang()
    call(quick, 6.1, 100, 1, "main", "concurrent.futures.process:_python_exit", 4, 6.2)
    assert "exit-hang" not in kinds(report(quick, tmp_path))
    # its worker outlives the killed main: what was left follows from the hang too, and Fix first is the hang's
    left = with_exit_hang()
    for r in left.lines:
        if r["event"] == "tree":
            r["ended"] = [e for e in r["ended"] if e["pid"] != 201]
        if r["event"] == "leftover":
            r.update(count=1, pids=[201], procs=[{"pid": 201, "ppid": 1, "rss": 100 << 20}])
    watcher(left, 12, "tree", count=0, started=[], ended=[{"pid": 201, "end": T0 + 12}])
    rep = report(left, tmp_path)
    lines = rep["answer"].splitlines()
    assert "fork compile pool" in lines[0] and any(x.startswith("  - 1 process was left running") for x in lines)
    assert 'worker_start_method="subprocess"' in lines[-1] and lines[-1].startswith("- Fix first: "), lines


def test_who_changed_a_variable_before_the_config_loaded(tmp_path: Path) -> None:
    """The config record's env_changed (the imports around the change) names who changed the variable: the
    import of somelib, with both values; without it the finding says the log does not tell."""
    w = with_setting_overridden()
    (cfg,) = [r for r in w.lines if r["event"] == "config"]
    cfg["env_changed"] = [{"var": "TORCHINDUCTOR_COMPILE_THREADS", "old": "4", "new": "1", "before": "somelib",
                           "at": "torch"}]
    (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "setting-overridden"]
    assert "TORCHINDUCTOR_COMPILE_THREADS=4, but the import of somelib changed it to '1'" in f["text"], f["text"]
    assert "as the next import (torch) began" in f["text"] and "the log does not say" not in f["text"]
    assert "after importing somelib" in f["advice"]
    (f,) = [f for f in report(with_setting_overridden(), tmp_path)["findings"] if f["kind"] == "setting-overridden"]
    assert "the log does not say which" in f["text"]


def test_an_overridden_setting_that_left_no_pool_leads_the_answer(tmp_path: Path) -> None:
    """The user exported TORCHINDUCTOR_COMPILE_THREADS=4 and a library's import set 1: no pool, one process
    compiling. Their question is why: the override leads the Answer, before "Compiled without a process pool:
    compile_threads=1" (which says only the value in effect; it led, the override came third)."""
    lines = report(with_setting_overridden(), tmp_path)["answer"].splitlines()
    assert lines[0].startswith("- main 100 started with TORCHINDUCTOR_COMPILE_THREADS=4, but "), lines
    assert lines[1].startswith("- Compiled without a process pool"), lines
    assert sum("TORCHINDUCTOR_COMPILE_THREADS=4" in x for x in lines) == 1, lines  # told once


def test_a_start_variable_torch_does_not_read_is_told_so(tmp_path: Path) -> None:
    """torch 2.2-2.3 have worker_start_method (fork) but read no TORCHINDUCTOR_WORKER_START (from 2.4): a main
    started with it set to spawn got fork workers because its torch ignores the variable, not because something
    changed it first, nor because it was set after the pool existed (live on 2.3.1 both were said); the fix is the
    setting in code. On 2.4+ the same log is the override it was."""
    def run(version: str) -> dict[str, Any]:
        w = LogWriter()
        env = {"TORCHINDUCTOR_WORKER_START": "spawn"}
        w.add(0, 100, 1, "main", "process_start", argv=["python", "main.py"], python="3.11.7", forked=False,
              env=env, run="r1", root_pid=100)
        w.add(1, 100, 1, "main", "config", settings={"compile_threads": 2, "worker_start_method": "fork"},
              torch_version=version)
        call(w, 2, 100, 1, "main", "torch._inductor.codecache:AsyncCompile.process_pool", 1, 2.01)
        for pid in (201, 202):
            w.add(2.1, pid, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7",
                  forked=True, env=env, run="r1", root_pid=100)
            w.add(2.2, pid, 100, "compile-worker", "role")
        w.add(4, 100, 1, "main", "call", target="torch._inductor.codecache:AsyncCompile.wait", call_id=20,
              thread="MainThread", stack=[PLUGIN], caller=PLUGIN, env=env)
        w.add(4.1, 100, 1, "main", "return", call_id=20, duration_s=0.1)
        w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
        return report(w, tmp_path)

    rep = run("2.3.1+cu121")
    assert "setting-too-late" not in kinds(rep), rep["findings"]
    (f,) = [f for f in rep["findings"] if f["kind"] == "setting-overridden"]
    assert f["text"] == ("main 100 started with TORCHINDUCTOR_WORKER_START=spawn, which torch 2.3.1+cu121 does not "
                         "read (torch reads it from 2.4), so inductor's worker_start_method was fork."), f["text"]
    assert f["advice"].startswith("set it in code before the first compile: "
                                  "torch._inductor.config.worker_start_method = 'spawn'"), f["advice"]
    (f,) = [f for f in run("2.5.1")["findings"] if f["kind"] == "setting-overridden"]
    assert "but something in the process changed it first" in f["text"], f["text"]


def test_a_start_variable_on_torch_2_1_is_told_it_has_no_start_method(tmp_path: Path) -> None:
    """torch 2.1 has no worker_start_method at all (its process_pool forks, hard-coded; its config record has no
    such setting): a main started with TORCHINDUCTOR_WORKER_START=spawn got fork workers and, live on 2.1.2, nothing
    said so. The fix there is no pool; the start method is a setting from 2.2. A variable asking for fork is
    what 2.1 does anyway: nothing to tell."""
    def run(method: str) -> dict[str, Any]:
        w = LogWriter()
        env = {"TORCHINDUCTOR_WORKER_START": method}
        w.add(0, 100, 1, "main", "process_start", argv=["python", "main.py"], python="3.11.7", forked=False,
              env=env, run="r1", root_pid=100)
        w.add(1, 100, 1, "main", "config", settings={"compile_threads": 2}, torch_version="2.1.2+cu121")
        call(w, 2, 100, 1, "main", "torch._inductor.codecache:AsyncCompile.process_pool", 1, 2.01)
        for pid in (201, 202):
            w.add(2.1, pid, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7",
                  forked=True, env=env, run="r1", root_pid=100)
            w.add(2.2, pid, 100, "compile-worker", "role")
        w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
        return report(w, tmp_path)

    rep = run("spawn")
    (f,) = [f for f in rep["findings"] if f["kind"] == "setting-overridden"]
    assert f["text"] == ("main 100 started with TORCHINDUCTOR_WORKER_START=spawn, which torch 2.1.2+cu121 does not "
                         "read (torch reads it from 2.4); torch 2.1.2+cu121 has no start-method setting either: its "
                         "compile pool always forks its workers."), f["text"]
    assert f["advice"].startswith("compile without a pool: compile_threads=1"), f["advice"]
    assert "worker_start_method = 'spawn'" in f["advice"], f["advice"]
    assert "setting-overridden" not in kinds(run("fork")), run("fork")["findings"]


def test_a_setting_changed_after_a_2_3_pool_is_told_the_fix_that_release_has(tmp_path: Path) -> None:
    """TORCHINDUCTOR_COMPILE_THREADS set after torch 2.3's fork pool exists: no shutdown lets a later compile make a new
    pool there (codecache's shutdown_compile_workers leaves AsyncCompile.process_pool's cache; 2.1-2.2 have no
    shutdown), so the advice is to set it before the pool is made, never async_compile's shutdown (absent)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(1, 100, 1, "main", "config", settings={"compile_threads": 2, "worker_start_method": "fork"},
          torch_version="2.3.1")
    call(w, 2, 100, 1, "main", "torch._inductor.codecache:AsyncCompile.process_pool", 1, 2.01)
    for pid in (201, 202):
        w.add(2.1, pid, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7", forked=True,
              env={}, run="r1", root_pid=100)
        w.add(2.2, pid, 100, "compile-worker", "role")
    w.add(4, 100, 1, "main", "call", target="torch._inductor.codecache:AsyncCompile.wait", call_id=20,
          thread="MainThread", stack=[PLUGIN], caller=PLUGIN, env={"TORCHINDUCTOR_COMPILE_THREADS": "4"},
          compile_threads=2)
    w.add(4.1, 100, 1, "main", "return", call_id=20, duration_s=0.1)
    w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "setting-too-late"]
    assert f["text"].startswith("TORCHINDUCTOR_COMPILE_THREADS=4 was set in main 100"), f["text"]
    assert f["advice"].startswith("set torch._inductor.config.compile_threads (or TORCHINDUCTOR_COMPILE_THREADS "
                                  "before torch is imported) before the first compile makes the pool: torch 2.3.1 "
                                  "keeps the one pool it made"), f["advice"]
    assert "async_compile" not in f["advice"]


def test_compile_threads_changed_after_the_pool_exists(tmp_path: Path) -> None:
    """compile_threads set in code (the config's value at a later wait) or TORCHINDUCTOR_COMPILE_THREADS set in
    the environment after torch read it, while a pool made for 2 workers lived: changed nothing, said with the
    pool's own size; the same value as the pool's, or compile_threads=1 (then torch compiles in the process, a
    real change), is not told."""
    by_code = report(_threads_too_late({}, {"compile_threads": 4}), tmp_path)
    (f,) = [f for f in by_code["findings"] if f["kind"] == "setting-too-late"]
    assert f["text"].startswith("compile_threads=4 was set in main 100") and "kept its 2 workers" in f["text"]
    assert "before the first compile" in f["advice"]
    by_env = report(_threads_too_late({"TORCHINDUCTOR_COMPILE_THREADS": "4"}, {"compile_threads": 2}), tmp_path)
    (f,) = [f for f in by_env["findings"] if f["kind"] == "setting-too-late"]
    assert f["text"].startswith("TORCHINDUCTOR_COMPILE_THREADS=4 was set") and "compile_threads=2" in f["text"]
    assert "before torch is imported" in f["advice"]
    for env, at_call in (({}, {"compile_threads": 2}), ({}, {"compile_threads": 1}),
                         ({"TORCHINDUCTOR_COMPILE_THREADS": "2"}, {"compile_threads": 2})):
        assert "setting-too-late" not in kinds(report(_threads_too_late(env, at_call), tmp_path))


def test_slow_exit_cost_and_guard_idle_wording(tmp_path: Path) -> None:
    """The slow exit says how long, and costs it; guard idle says so in one line."""
    rep = report(with_slow_exit(), tmp_path)
    slow = next(f for f in rep["findings"] if f["kind"] == "slow-exit-wait")
    assert "12.0 s" in slow["text"] and slow["cost"]["exit_wait_s"] == pytest.approx(12.0)
    rep = report(with_guard(False)(), tmp_path)
    assert [f["text"] for f in rep["findings"]] == ["Guard nested-pools was on and refused nothing."]


def test_a_slow_shutdown_the_user_called_is_told_as_theirs(tmp_path: Path) -> None:
    """The user's own shutdown_compile_workers() took 12 s: told as their call, at its line, never as a wait "at
    exit" whose fix is the call they made; torch's own call at exit keeps its words and its advice."""
    own = next(f for f in report(with_slow_exit(own=True), tmp_path)["findings"] if f["kind"] == "slow-exit-wait")
    assert own["text"].startswith("The main process waited 12.0 s in its own call of shutdown_compile_workers() "
                                  "at /site/plugin/_inductor/__init__.py:5"), own["text"]
    assert "at exit" not in own["text"] and "shutdown_compile_workers" not in own["advice"], own
    assert "nothing in the call shortens it" in own["advice"] and own["cost"]["hang_s"] == pytest.approx(12.0)
    (tmp_path / "torch").mkdir()
    torchs = next(f for f in report(with_slow_exit(), tmp_path / "torch")["findings"] if f["kind"] == "slow-exit-wait")
    assert torchs["text"] == "The main process waited 12.0 s in shutdown_compile_workers at exit."
    assert "shutdown_compile_workers() after your last compile" in torchs["advice"]


def with_exit_wait_on_a_starting_sidecar() -> LogWriter:
    """main 100 makes a pool at 1 s (sidecar 200, started 1.2 s); torch's atexit shutdown_compile_workers begins at
    3.5 s and returns at 15.5 s; the sidecar reaches its serving loop only at 9.0 s, inside that wait (a loaded
    host: the sidecar still importing when the main's last test ended)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    start(w, 1.2, 200, 100, "compile-sidecar")
    call(w, 3.5, 100, 1, "main", f"{AC}:shutdown_compile_workers", 9, 15.5)
    w.lines[-2].update(stack=[], caller=None)
    call(w, 3.6, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 15.4, sidecar_pid=200)
    w.lines[-2].update(stack=[], caller=None, parent_call=9)
    call(w, 9.0, 200, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, 15.3)
    call(w, 15.2, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 2, 15.25)
    w.add(15.35, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(16, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(16, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_an_exit_wait_on_a_sidecar_still_starting_says_so(tmp_path: Path) -> None:
    """torch's exit wait on a sidecar that had not yet served says why it was slow: the sidecar was still starting,
    with when it was ready, told in the Answer under that pool; a wait on a sidecar with no later start says
    nothing of one."""
    rep = report(with_exit_wait_on_a_starting_sidecar(), tmp_path)
    slow = next(f for f in rep["findings"] if f["kind"] == "slow-exit-wait")
    assert slow["text"] == ("The main process waited 12.0 s in shutdown_compile_workers at exit: its sidecar 200 "
                            "was still starting (ready at 9.0 s)."), slow["text"]
    assert slow["advice"].startswith("the pool was stopped before its sidecar served") and \
        "after your last compile" not in slow["advice"], slow["advice"]
    # the Answer tells the pool first, the wait under it as what followed from it
    lines = rep["answer"].splitlines()
    assert lines[0].startswith("- main 100 made a compile pool (sidecar 200)") and \
        lines[0].endswith("What follows from it:") and lines[1].startswith("  - The main process waited 12.0 s"), lines
    (tmp_path / "ready").mkdir()
    ready = next(f for f in report(with_slow_exit(), tmp_path / "ready")["findings"] if f["kind"] == "slow-exit-wait")
    assert "starting" not in ready["text"], ready["text"]


def test_sidecar_error_explains_never_served(tmp_path: Path) -> None:
    """An error event in a sidecar says what its main() raised."""
    rep = report(with_raising_sidecar(), tmp_path)
    text = next(f["text"] for f in rep["findings"] if f["kind"] == "sidecar-never-served")
    assert "RuntimeError: prefetchable_cache value already set" in text
    assert "_functools.py:50" in text


def _sidecar_raised(file: str) -> LogWriter:
    """with_raising_sidecar, whose main() raised ENOSPC where `file` made something."""
    w = with_raising_sidecar()
    origin = {"file": file, "line": 57, "func": "__init__"}
    for r in w.lines:
        if r["event"] == "error":
            r.update(exc_type="OSError", message="[Errno 28] No space left on device", frames=[origin], origin=origin)
    return w


def test_a_sidecar_that_found_dev_shm_full_is_told_with_the_shm_fix(tmp_path: Path) -> None:
    """A sidecar whose main() raised ENOSPC where multiprocessing made its pool's lock (a POSIX semaphore, a file
    in /dev/shm) found /dev/shm full (a container's 64 MB, filled by an earlier job's leftovers): the fix is room
    in /dev/shm, a setting (--shm-size), not 'fix what its main() raised' in the standard library. The same
    errno where torch wrote a file of its own (a full disk) keeps the general words."""
    rep = report(_sidecar_raised("/usr/lib/python3.11/multiprocessing/synchronize.py"), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "sidecar-never-served")
    assert "No space left on device" in f["text"] and "): /dev/shm was full, where" in f["text"], f["text"]
    assert "--shm-size" in f["advice"] and "TORCHINDUCTOR_COMPILE_THREADS=1" in f["advice"], f["advice"]
    assert "/dev/shm was full" in rep["answer"] and "--shm-size" in rep["answer"], rep["answer"]
    (tmp_path / "disk").mkdir()
    rep = report(_sidecar_raised("/site/torch/_inductor/codecache.py"), tmp_path / "disk")
    f = next(f for f in rep["findings"] if f["kind"] == "sidecar-never-served")
    assert "/dev/shm" not in f["text"] + f["advice"] and f["advice"].startswith("fix what its main() raised"), f


def test_a_lost_jobs_wait_is_told_with_its_length_and_how_it_ended(tmp_path: Path) -> None:
    """A job its pool never answered costs the user the wait on it: main's wait_pool_ready() in flight when the
    sidecar died (at 2 s) ran until the job's own step timeout raised in it (at 3.5 s). jobs-lost says who waited,
    how long and how the wait ended, in the Answer too (its line would be cut before the wait). Without such a
    wait, none is told."""
    w = with_lost_job()
    call(w, 1.5, 100, 1, "main", f"{AC}:AsyncCompile.wait_pool_ready", 7, None)
    w.add(3.5, 100, 1, "main", "return", call_id=7, duration_s=2.0,
          error="TimeoutError: the first compile was still waiting after 90 s")
    rep = report(w, tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "jobs-lost")
    waited = ("main 100 waited 2.0 s in wait_pool_ready() (1.5 -> 3.5 s), until TimeoutError: the first compile "
              "was still waiting after 90 s")
    assert waited in f["text"] and waited in f["headline"], f
    assert waited in rep["answer"].replace("\n  ", " ").replace("\n", " "), rep["answer"]
    # under its cause (the sidecar's main() raised: /dev/shm was full) the Answer keeps the wait whole too
    origin = {"file": "/usr/lib/python3.11/multiprocessing/synchronize.py", "line": 57, "func": "__init__"}
    w.add(1.9, 200, 100, "compile-sidecar", "error", source="logging", logger="torch._inductor", level="ERROR",
          exc_type="OSError", message="[Errno 28] No space left on device", frames=[origin], origin=origin)
    (tmp_path / "cause").mkdir()
    answer = report(w, tmp_path / "cause")["answer"].replace("\n  ", " ").replace("\n", " ")
    assert "/dev/shm was full" in answer and "- 1 job(s) the compile pool of sidecar 200 never answered (it " \
        f"ended at 2.0 s): {waited}." in answer, answer
    (tmp_path / "none").mkdir()
    f = next(f for f in report(with_lost_job(), tmp_path / "none")["findings"] if f["kind"] == "jobs-lost")
    # without one, no wait is told; the Answer's line is the sentence up to what it means (its site kept whole)
    assert "waited" not in f["text"] and f["headline"] == f["text"].split(": they never return")[0] + ".", f


def test_a_lost_jobs_wait_that_never_returned_lasts_until_its_process_ended(tmp_path: Path) -> None:
    """The main, in wait_pool_ready() on a pool whose sidecar died, was killed at 4 s (no process_exit: the
    watcher missed it then) while something else of the run went on until 60 s: its wait lasted 2.5 s as far
    as any record shows, not until the log's last record (58.5 s), and it ended with its process, not 'never'."""
    w = with_lost_job()
    w.lines = [r for r in w.lines if not (r["pid"] == 100 and r["event"] == "process_exit")]
    call(w, 1.5, 100, 1, "main", f"{AC}:AsyncCompile.wait_pool_ready", 7, None)
    watcher(w, 4.0, "tree", count=1, started=[], ended=[{"pid": 100, "end": T0 + 4.0}])
    watcher(w, 60.0, "tree", count=1, started=[], ended=[])
    f = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "jobs-lost")
    assert "main 100 waited 2.5 s in wait_pool_ready() (1.5 -> 4.0 s), until its process ended" in f["text"], f


def test_a_worker_that_crashed_is_told_where_its_stacks_are_not_to_look_for_memory(tmp_path: Path) -> None:
    """A worker whose own compile aborted it (LLVM's fatal error calls abort(): pytorch/torchdynamo#1794; a
    segfault, pytorch#98237): its zombie's status says SIGABRT, which no process of the run sent. The fix is where
    the crash's stacks are and torch's in-process compile, never dmesg and memory (the OOM killer sends SIGKILL);
    a SIGKILL with no sender keeps the memory advice; no status read leaves both readings open."""
    def crashed(status: int) -> LogWriter:
        w = with_worker_lost()
        for r in w.lines:
            if r["event"] == "tree" and r["ts"] == T0 + 2.55:
                r["zombies"] = [{"pid": 301, "ppid": 200, "since": T0 + 2.5, "status": status}]
        return w

    f = next(f for f in report(crashed(6 | 0x80), tmp_path)["findings"] if f["kind"] == "worker-lost")
    assert "301: killed by SIGABRT" in f["text"], f["text"]
    assert f["advice"].startswith("worker 301's SIGABRT is a crash in it (abort() in native code"), f["advice"]
    assert "PYTHONFAULTHANDLER=1" in f["advice"] and "TORCHINDUCTOR_COMPILE_THREADS=1" in f["advice"], f["advice"]
    assert "dmesg" not in f["advice"] and "more memory" not in f["advice"], f["advice"]
    (tmp_path / "kill").mkdir()
    f = next(f for f in report(crashed(9), tmp_path / "kill")["findings"] if f["kind"] == "worker-lost")
    assert "301: killed by SIGKILL" in f["text"] and "dmesg" in f["advice"], f
    # no status read (the sidecar reaped the worker before a look): a crash and a kill for memory both stay open
    (tmp_path / "unread").mkdir()
    f = next(f for f in report(with_worker_lost(), tmp_path / "unread")["findings"] if f["kind"] == "worker-lost")
    assert "(no record shows how)" in f["text"], f["text"]
    assert f["advice"].startswith("find why the worker ended (no status read shows it): an abort or a fault in "
                                  "native code"), f
    assert "PYTHONFAULTHANDLER=1" in f["advice"] and "dmesg" in f["advice"], f["advice"]
    # the SIGTERM the sidecar's executor sends the other workers of a broken pool shows no cause: both stay open
    (tmp_path / "term").mkdir()
    f = next(f for f in report(crashed(15), tmp_path / "term")["findings"] if f["kind"] == "worker-lost")
    assert "301: killed by SIGTERM" in f["text"] and "PYTHONFAULTHANDLER=1" in f["advice"], f


def test_a_jobs_error_the_sidecar_logged_is_not_its_main_raising(tmp_path: Path) -> None:
    """A worker ended abruptly under a sidecar that went on serving: torch's job callback logs that one job's
    BrokenProcessPool in the sidecar (and the sidecar makes new workers). That is a job's failure, not the
    sidecar's main() raising: no 'never served' claim about a sidecar that served and was shut down."""
    w = clean_run()
    frames = [{"file": "/site/torch/_inductor/compile_worker/subproc_pool.py", "line": 437, "func": "callback"},
              {"file": "/usr/lib/python3.11/concurrent/futures/_base.py", "line": 449, "func": "result"}]
    w.add(2.5, 200, 100, "compile-sidecar", "error", source="logging",
          logger="torch._inductor.compile_worker.subproc_pool", level="ERROR", exc_type="BrokenProcessPool",
          message="A process in the process pool was terminated abruptly while the future was running or pending.",
          frames=frames)
    rep = report(w, tmp_path)
    assert "sidecar-never-served" not in {f["kind"] for f in rep["findings"]}, rep["findings"]
    assert "never served" not in rep["answer"]


def test_a_worker_lost_under_a_live_sidecar_is_told_with_its_job_and_the_new_workers(tmp_path: Path) -> None:
    """A compile worker that ended under a sidecar that served on leads the Answer: which workers ended, that
    the job in flight failed with BrokenProcessPool, the new workers; how they ended only where a record says
    (here none: no 'killed', no 'OOM')."""
    rep = report(with_worker_lost(), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "worker-lost")
    assert "300, 301 of sidecar 200" in f["text"] and "no record shows how" in f["text"], f["text"]
    assert "BrokenProcessPool at 2.5 s" in f["text"] and "2 new worker(s) (302, 303)" in f["text"], f["text"]
    assert "killed" not in f["text"] and "OOM" not in f["text"]
    assert f["cost"]["jobs_lost"] == 1 and "dmesg" in f["advice"]
    assert rep["answer"].lstrip("- ").startswith("Compile worker(s) 300, 301"), rep["answer"]
    # the same error after the sidecar was asked to stop (3.05 s) is the shutdown cutting a job off
    w = with_worker_lost()
    for r in w.lines:
        if r["event"] == "error":
            r["ts"] = T0 + 3.07
    (tmp_path / "at-stop").mkdir()
    assert "worker-lost" not in kinds(report(w, tmp_path / "at-stop"))


def test_workers_ended_by_their_sidecar_are_not_a_group_signal(tmp_path: Path) -> None:
    """All of the run in one process group (as a launcher starts it): the two workers that ended together as their
    sidecar logged a broken pool, and the two its shutdown ended, are not 'ended with the rest of its process
    group (a signal to the process group)': no record shows a signal; their sidecar explains each end."""
    w = with_worker_lost()
    watcher(w, 0.5, "tree", count=4, ended=[], started=[
        {"pid": pid, "ppid": ppid, "rss": 1 << 20, "via": "child", "pgid": 100}
        for pid, ppid in ((100, 1), (200, 100), (300, 200), (301, 200))])
    watcher(w, 2.6, "tree", count=4, ended=[], started=[
        {"pid": pid, "ppid": 200, "rss": 1 << 20, "via": "child", "pgid": 100} for pid in (302, 303)])
    watcher(w, 3.15, "tree", count=2, started=[], ended=[{"pid": 302, "end": T0 + 3.12},
                                                         {"pid": 303, "end": T0 + 3.12}])
    rep = report(w, tmp_path)
    endings = {p["pid"]: p["ending"]["kind"] for p in rep["processes"] if p["pid"] in (300, 301, 302, 303)}
    assert endings and "with-group" not in endings.values(), endings


def _spawn_pool_broken_by_its_worker() -> LogWriter:
    """main 100's wait_pool_ready makes a spawn executor (1.0 s) whose one worker 300 re-imports the unguarded
    script: there its own wait_pool_ready makes an executor and raises multiprocessing's bootstrapping error
    before starting any process; 300 exits at 2.05 s and the main's wait raises BrokenProcessPool at 3.4 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    tracked = "torch._inductor.compile_worker.tracked_process_pool:TrackedProcessPoolExecutor.__init__"
    main = {"file": "/home/u/train.py", "line": 3, "func": "<module>"}
    spawn = [{"file": "/usr/lib/python3.11/multiprocessing/spawn.py", "line": 297, "func": "_fixup_main_from_path"},
             main]
    for pid, t, stack in ((100, 1.0, [main]), (300, 2.0, spawn)):
        role = "main" if pid == 100 else "child"
        for cid, target in ((1, f"{AC}:AsyncCompile.wait_pool_ready"), (2, f"{AC}:AsyncCompile.process_pool"),
                            (3, tracked)):
            w.add(t + cid * 0.001, pid, 1 if pid == 100 else 100, role, "call", target=target, call_id=cid,
                  thread="MainThread", stack=stack, caller=main, **({"parent_call": cid - 1} if cid > 1 else {}))
        for cid in (3, 2):
            w.add(t + 0.01, pid, 1 if pid == 100 else 100, role, "return", call_id=cid, duration_s=0.01)
        if pid == 100:
            w.add(1.02, 300, 100, "child", "process_start", python="3.11.7", forked=False, env={}, run="r1",
                  root_pid=100, argv=["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()",
                                      "--multiprocessing-fork"])
    w.add(2.02, 300, 100, "child", "return", call_id=1, duration_s=0.02,
          error="RuntimeError: An attempt has been made to start a new process before the current process has "
                "finished its bootstrapping phase.")
    w.add(2.05, 300, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 2.5, "tree", count=1, started=[], ended=[{"pid": 300, "end": T0 + 2.5}])
    w.add(3.4, 100, 1, "main", "return", call_id=1, duration_s=2.4,
          error="BrokenProcessPool: A process in the process pool was terminated abruptly")
    call(w, 3.5, 100, 1, "main", "concurrent.futures.process:_python_exit", 9, 3.51)
    w.add(4, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_spawn_workers_failed_attempt_is_no_pool_and_its_parents_wait_is_told(tmp_path: Path) -> None:
    """The spawned worker's own attempt (it raised before starting any process) is not a second pool; the worker
    that died as it started is the main's pool's, which ended when it did (not at the main's exit); and the
    main's wait for it (2.4 s in wait_pool_ready, then BrokenProcessPool) is said."""
    rep = report(_spawn_pool_broken_by_its_worker(), tmp_path)
    (pool,) = rep["pools"]
    assert pool["creator_pid"] == 100 and pool["worker_pids"] == [300], pool
    assert pool["ending"]["kind"] != "ended-at-exit" and pool["ready_at"] is None, pool
    assert "each made a compile pool" not in rep["answer"]
    spawn = next(f for f in rep["findings"] if f["kind"] == "spawn-main-reimport")
    assert "main 100 waited 2.4 s in AsyncCompile.wait_pool_ready() from 1.0 s, then got BrokenProcessPool" in \
        spawn["text"], spawn["text"]
    assert "waited 2.4 s" in rep["answer"]


def test_golden_text_report(tmp_path: Path) -> None:
    """The seed scenario's text report, line for line (regenerate: WP_AUTOTRACE_GOLDEN=1)."""
    import os

    w = seed_log()
    data = read_logs([str(w.write(tmp_path / "seed.jsonl"))])
    text = render_text(analyze(data), data.skipped)
    text = text.replace(str(tmp_path), "TMP")
    golden = GOLDEN / "seed_report.txt"
    if os.environ.get("WP_AUTOTRACE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def test_150_leftovers_counted_from_the_data(tmp_path: Path) -> None:
    """150 processes left at main exit, long command lines, lists in parts: all 150 counted, peak >= 150."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", create_time=T0)
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    cmd = "/usr/bin/python -c 'from torch._inductor.compile_worker.__main__ import main; main()' " + "x" * 220
    kids = [{"pid": 1000 + i, "ppid": 100, "name": "python", "cmd": cmd, "create_time": T0 + 1, "rss": 280 << 20,
             "role": "compile-sidecar"} for i in range(150)]
    for part in range(5):
        watcher(w, 1.1, "tree", count=151, started=kids[part * 30:(part + 1) * 30], ended=[], part=part, parts=5)
    w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    for part in range(5):
        chunk = kids[part * 30:(part + 1) * 30]
        watcher(w, 5.1, "leftover", how="root-exit", count=150, pids=[k["pid"] for k in chunk], procs=chunk,
                part=part, parts=5)
    rep = report(w, tmp_path)
    assert len(rep["leftover_pids"]) == 150 and rep["leftover_count"] == 150
    assert rep["max_concurrent_processes"] >= 150
    assert rep["processes_started"] == 151  # the watcher is not one of the run's processes
    assert rep["leftover_rss_bytes"] == 150 * (280 << 20)
    assert "log-cut" not in kinds(rep)


def test_pid_reuse_is_a_new_process(tmp_path: Path) -> None:
    """A pid the run used before, reused by a new sidecar: a new process, its child tracked, the leftover reported."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", create_time=T0)
    start(w, 1, 500, 100, "child", create_time=T0 + 1)
    w.add(2, 500, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 2.1, "tree", count=1, started=[], ended=[{"pid": 500, "create_time": T0 + 1, "end": T0 + 2.1}])
    call(w, 3, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 3.2, sidecar_pid=500)
    start(w, 3.1, 500, 100, "compile-sidecar", create_time=T0 + 3.1)
    watcher(w, 3.3, "tree", count=3, ended=[], started=[
        {"pid": 500, "ppid": 100, "name": "python", "cmd": "sidecar", "create_time": T0 + 3.1, "rss": 5},
        {"pid": 501, "ppid": 500, "name": "python", "cmd": "worker", "create_time": T0 + 3.2, "rss": 5}])
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 4.1, "leftover", how="root-exit", count=2, pids=[500, 501], procs=[
        {"pid": 500, "ppid": 1, "name": "python", "cmd": "sidecar", "create_time": T0 + 3.1, "rss": 5},
        {"pid": 501, "ppid": 500, "name": "python", "cmd": "worker", "create_time": T0 + 3.2, "rss": 5}])
    rep = report(w, tmp_path)
    five = [p for p in rep["processes"] if p["pid"] == 500]
    assert [p["role"] for p in five] == ["child", "compile-sidecar"]
    # its end is when the watcher saw it go (2.1 s); its process_exit record (2.0 s) is kept apart
    assert five[0]["end_s"] == 2.1 and five[0]["exit_record_s"] == 2.0 and five[1]["left_behind"]
    assert rep["leftover_pids"] == [500, 501]
    assert rep["pools"][0]["sidecar_start"] == 3.1  # the new process, not the old one
    assert "leftovers" in kinds(rep)


def test_pid_reuse_without_create_time(tmp_path: Path) -> None:
    """Old logs (no create_time): a process_start after the pid's exit is a new process."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 1, 500, 100, "child")
    w.add(2, 500, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    start(w, 3, 500, 100, "compile-sidecar")
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    assert [p["role"] for p in rep["processes"] if p["pid"] == 500] == ["child", "compile-sidecar"]


def test_exec_after_fork_is_one_process(tmp_path: Path) -> None:
    """A forked child that execs: one process (exec), not killed, not two."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(1, 300, 100, "child", "process_start", argv=["python", "main.py"], forked=True, run="r1")
    w.add(1.1, 300, 100, "child", "process_start", argv=["python", "tool.py"], forked=False, run="r1")
    w.add(2, 300, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(3, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    procs = [p for p in rep["processes"] if p["pid"] == 300]
    assert len(procs) == 1 and procs[0]["execs"] == 1 and procs[0]["cmd"] == "python tool.py"
    assert rep["no_exit_pids"] == []


def two_runs() -> LogWriter:
    """Run A: main pid 1 calls warm_pool; run B (same log, pid 1 again): nothing."""
    w = LogWriter()
    w.add(0, 1, 0, "main", "process_start", argv=["python", "a.py"], forked=False, run="A", root_pid=1)
    w.warm(1, 1, 0, "main", 20)
    w.add(2, 1, 0, "main", "process_exit", how="exit", counts={}, dropped=0)
    w.add(100, 1, 0, "main", "process_start", argv=["python", "b.py"], forked=False, run="B", root_pid=1)
    w.add(101, 1, 0, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_two_runs_kept_apart(tmp_path: Path) -> None:
    """Two runs in one log: two runs, each with its own command; nothing credited across."""
    rep = report(two_runs(), tmp_path)
    assert [(r["id"], r["command"]) for r in rep["runs"]] == [("A", "python a.py"), ("B", "python b.py")]
    assert {(p["pid"], p["run"]) for p in rep["processes"]} >= {(1, "A"), (1, "B")}
    assert [c["run"] for c in rep["warm_pool_callers"]] == ["A"]
    only_b = report(two_runs(), tmp_path, run="B")
    assert only_b["warm_pool_pids"] == [] and only_b["pools"] == [] and only_b["runs"][0]["command"] == "python b.py"
    assert only_b["runs"][0]["duration_s"] == 1.0
    text = render_text(rep, {})
    assert "this log holds 2 runs (A, B)" in text


def test_two_pools_in_one_process(tmp_path: Path) -> None:
    """Two pools at once in one process, only one quiesced: counts per pool."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.1, sidecar_pid=200)
    call(w, 2, 100, 1, "main", f"{SP}:SubprocPool.__init__", 2, 2.1, sidecar_pid=300)
    call(w, 3, 100, 1, "main", f"{SP}:SubprocPool.quiesce", 3, 3.1, sidecar_pid=200)
    call(w, 4, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 4, 4.1, sidecar_pid=200)
    call(w, 5, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 5, 5.1, sidecar_pid=300)
    rep = report(w, tmp_path)
    counts = {p["sidecar_pid"]: (p["quiesces"], p["shutdowns"]) for p in rep["pools"]}
    assert counts == {200: (1, 1), 300: (0, 1)}


def test_ten_pools_one_after_another(tmp_path: Path) -> None:
    """Ten pools made and shut in turn by one process (no sidecar pid on the calls): each counts its own."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    for i in range(10):
        call(w, 1 + i, 100, 1, "main", f"{SP}:SubprocPool.__init__", 10 * i + 1, 1.1 + i, sidecar_pid=200 + i)
        call(w, 1.2 + i, 100, 1, "main", f"{SP}:SubprocPool.wakeup", 10 * i + 2, 1.3 + i)
        call(w, 1.4 + i, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 10 * i + 3, 1.5 + i)
    rep = report(w, tmp_path)
    assert [(p["wakeups"], p["shutdowns"]) for p in rep["pools"]] == [(1, 1)] * 10


def test_string_caller_is_shown_with_its_source(tmp_path: Path) -> None:
    """A warm_pool called from `python -c` names <string> (with the code's first line) instead of '?'."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    frame = {"file": "<string>", "line": 1, "func": "<module>", "src": "import torch; warm()"}
    w.add(1, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.warm_pool", call_id=1, thread="MainThread",
          stack=[frame], caller=None)
    rep = report(w, tmp_path)
    assert rep["warm_pool_callers"][0]["caller"]["file"] == "<string>"
    assert '<string>:1 (<module>) "import torch; warm()"' in render_text(rep, {})


def test_tags_not_names(tmp_path: Path) -> None:
    """A renamed target keeps its meaning through its tag (the report never matches names)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(1, 100, 1, "main", "call", target="torch.x:RenamedPool.start_it", tag="pool-create", call_id=1,
          thread="MainThread", stack=[], caller=PLUGIN)
    w.add(1.1, 100, 1, "main", "return", call_id=1, duration_s=0.1, sidecar_pid=200)
    assert [p["sidecar_pid"] for p in report(w, tmp_path)["pools"]] == [200]


def test_deep_chain_and_many_pools_are_linear(tmp_path: Path) -> None:
    """An 8,000-deep ppid chain and 8,000 pools: no recursion error, depths right."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    for i in range(8000):
        pid = 1000 + i
        w.add(1 + i * 1e-4, pid, pid - 1 if i else 100, "compile-sidecar", "process_start", argv=["s"],
              forked=False, run="r1")
    for i in range(8000):
        call(w, 2 + i * 1e-4, 100, 1, "main", f"{SP}:SubprocPool.__init__", i + 1, 2 + i * 1e-4, sidecar_pid=1000 + i)
    rep, view = analyze_view(read_logs([str(w.write(tmp_path / "chain.jsonl"))]))
    assert rep["max_sidecar_depth"] == 8000 and len(rep["pools"]) == 8000
    # each process counts in one pool (each sidecar heads its own): the rows add up, and the walks are linear
    assert [[p.pid for p in view.story(pool).procs] for pool in view.pools] == [[1000 + i] for i in range(8000)]
    render_text(rep, {})


def test_control_characters_escaped_in_text_exact_in_json(tmp_path: Path) -> None:
    """Logged strings with ESC/C1/newlines are escaped in text; JSON keeps them exact."""
    w = LogWriter()
    evil = "python \x1b]0;pwned\x07 \x9b31m\nfake line"
    w.add(0, 100, 1, "main", "process_start", argv=[evil], forked=False, run="r1")
    rep = report(w, tmp_path)
    text = render_text(rep, {})
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07 \\x9b31m\\x0afake line" in text
    assert rep["runs"][0]["command"] == evil


def test_workers_stopped_by_their_pool_are_not_unexplained(tmp_path: Path) -> None:
    """Workers of a sidecar that was asked to shut down end without process_exit, and that is not alarming."""
    w = clean_run()
    w.add(1.3, 201, 200, "compile-worker", "process_start", argv=["python"], forked=True, run="r1")
    rep = report(w, tmp_path)
    assert rep["no_exit_pids"] == []
    w.lines = [r for r in w.lines if r.get("target") != f"{SP}:SubprocMain._shutdown" and r["pid"] != 200
               or r["event"] == "process_start"]
    assert report(w, tmp_path)["no_exit_pids"] == [200, 201]


def test_rank_shown_in_the_tree(tmp_path: Path) -> None:
    """A process with a RANK is labelled with it in the text."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 1, 101, 100, "child", rank={"RANK": "3", "WORLD_SIZE": "8"})
    rep = report(w, tmp_path)
    assert next(p for p in rep["processes"] if p["pid"] == 101)["rank"] == {"RANK": "3", "WORLD_SIZE": "8"}
    assert "101 child (child.py) rank 3" in render_text(rep, {})


def test_run_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--run ID reports one run; an unknown id is a clear exit 2 naming the runs there are."""
    from wp_autotrace.cli.main import main

    path = two_runs().write(tmp_path / "two.jsonl")
    assert main(["report", "--json", "--run", "A", str(path)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rep["runs"]] == ["A"] and rep["all_runs"] == 2
    assert main(["report", "--run", "nope", str(path)]) == 2
    assert "no run 'nope' in the log; runs: A, B" in capsys.readouterr().err


def test_cut_record_is_said(tmp_path: Path) -> None:
    """A record the writer had to cut (`truncated`) is reported as such."""
    w = clean_run()
    w.add(2, 100, 1, "main", "call", truncated=70000)
    rep = report(w, tmp_path)
    assert "log-cut" in kinds(rep) and "a call record of pid 100 was cut" in rep["runs"][0]["cut"][0]


def test_findings_stay_short_at_8_ranks_by_30_sidecars(tmp_path: Path) -> None:
    """8 ranks, each with 30 nested sidecars left behind: the Findings section stays within 12 lines."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    pid = 1000
    for rank in range(8):
        rpid = pid
        start(w, 0.1, rpid, 100, "child", rank={"RANK": str(rank)})
        parent, role = rpid, "child"
        for depth in range(30):
            side = pid + 1 + depth
            w.warm(1 + depth * 0.01, parent, 100 if parent == rpid else parent - 1, role, side, cid=10 + depth * 2)
            start(w, 1.005 + depth * 0.01, side, parent, "compile-sidecar")
            parent, role = side, "compile-sidecar"
        pid += 100
    w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    left = [{"pid": 1000 + r * 100 + d, "ppid": 1, "rss": 280 << 20} for r in range(8) for d in range(1, 31)]
    w.add(5.1, 900, 100, "watcher", "leftover", run="r1", how="root-exit", count=len(left),
          pids=[x["pid"] for x in left], procs=left)
    rep = report(w, tmp_path)
    text = render_text(rep, {})
    section = text.split("== Findings\n")[1].split("\n\n")[0].splitlines()
    assert len(section) <= 12, "\n".join(section)
    assert rep["leftover_count"] == 240 and rep["leftover_rss_bytes"] == 240 * (280 << 20)


def test_killed_before_shutdown_is_still_killed(tmp_path: Path) -> None:
    """A sidecar or worker SIGKILLed mid-run is reported even though the pool is shut down later."""
    w = clean_run()
    w.add(1.3, 201, 200, "compile-worker", "process_start", argv=["python"], forked=True, run="r1")
    w.add(2, 100, 1, "main", "tree", count=2, started=[], ended=[{"pid": 201, "end": T0 + 2}], run="r1")
    rep = report(w, tmp_path)
    assert rep["no_exit_pids"] == [201]  # gone at 2 s, the shutdown request came at 3.05 s
    w = clean_run()
    w.lines = [r for r in w.lines if not (r["pid"] == 200 and r["event"] in ("process_exit", "call", "return"))]
    w.add(2, 100, 1, "main", "tree", count=1, started=[], ended=[{"pid": 200, "end": T0 + 2}], run="r1")
    rep = report(w, tmp_path)
    assert rep["pools"][0]["shutdowns"] == 1 and "pool-died" in kinds(rep)


def test_bypass_advice_knows_the_guard_is_on(tmp_path: Path) -> None:
    """The TORCH_WARM_POOL bypass advice offers the guard only when it is off; with it on, says where it acts."""
    off = next(f for f in report(seed_log(), tmp_path)["findings"] if f["kind"] == "warm-pool-bypass")
    assert "or use WP_AUTOTRACE_GUARD=nested-pools" in off["advice"]
    w = with_guard(True)()
    w.add(0.5, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.warm_pool", tag="warm-pool", call_id=1,
          thread="MainThread", stack=[PLUGIN], caller=PLUGIN, env={"TORCH_WARM_POOL": "0"})
    w.lines.insert(1, w.lines.pop())  # in time order: right after main's process_start
    on = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "warm-pool-bypass")
    assert "the guard is on" in on["advice"] and "or use WP_AUTOTRACE_GUARD" not in on["advice"]


# -- the model itself: records folded, Model / Run / Process / Pool objects checked -----------------------

def _fold(w: LogWriter) -> Any:
    from wp_autotrace.analysis.fold.verdict import fold_and_judge

    return fold_and_judge(dict(r) for r in w.lines)


def test_fold_one_identity_per_process_and_a_reused_pid_apart() -> None:
    """(host, pid, create_time) is one process: the watcher's entry joins the traced process; the same pid
    with a start 20 ms later (one tick past the tolerance) is another process, in the same run."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", create_time=T0)
    start(w, 1, 200, 100, "child", create_time=T0 + 1)
    w.add(1.5, 200, 100, "child", "process_exit", how="exit")
    start(w, 2, 200, 100, "child", create_time=T0 + 1.02)
    watcher(w, 2.1, "tree", count=3, ended=[], started=[
        {"pid": 100, "ppid": 1, "create_time": T0 + 0.01, "via": "root"},
        {"pid": 200, "ppid": 100, "create_time": T0 + 1.02, "via": "child", "rss": 5}])
    m = _fold(w)
    (run,) = m.runs.values()
    assert [(p.pid, p.create_time) for p in run.processes] == [(100, T0), (200, T0 + 1), (200, T0 + 1.02)]
    first, second = run.processes[1], run.processes[2]
    assert first.exited and not second.exited and second.peak_rss == 5 and second.via == "child"
    assert run.root is run.processes[0] and run.processes[0].via == "root"
    assert first.parent is run.root and second.parent is run.root and run.root.children == [first, second]


def test_fold_two_container_runs_with_pid_1() -> None:
    """Two runs whose main is pid 1: two processes, each call and pool its own run's."""
    m = _fold(two_runs())
    a, b = m.runs["A"], m.runs["B"]
    assert a.root is not None and b.root is not None and a.root is not b.root
    assert {c.proc.run.id for c in m.calls if c.proc.run} == {"A"}
    assert [pool.creator is a.root for pool in m.pools] == [True]


def test_feed_answers_between_records_and_ends_as_build() -> None:
    """Builder.feed folds one record at a time and names its writer (None for the watcher's); the model
    it finishes is the one build() makes."""
    from wp_autotrace.analysis.fold.fold import Builder

    w = seed_log()
    b = Builder()
    writers = [b.feed(dict(r)) for r in w.lines]
    assert writers[0] is not None and writers[0].pid == 100 and writers[1] is None  # the watcher's watcher_start
    assert writers[0] is b.model.runs["r1"].processes[0]  # answered before the end
    b.finish()
    built = _fold(seed_log())
    assert [(p.pid, p.role, p.end, p.depth) for p in b.model.processes] == \
        [(p.pid, p.role, p.end, p.depth) for p in built.processes]
    assert [pool.sidecar.pid if pool.sidecar else None for pool in b.model.pools] == [200, 300, 400]


def test_fold_verdict_pending_from_the_roots_below_then_the_verdict() -> None:
    """Before the watcher's leftover: the root's below list is the run's provisional leftover, and the run
    says its verdict is pending; the leftover record then is the verdict."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", create_time=T0)
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    w.add(2, 100, 1, "main", "process_exit", how="exit",
          below=[{"pid": 200, "ppid": 100, "create_time": T0 + 1, "name": "python"}], below_count=3)
    m = _fold(w)
    run = m.runs["r1"]
    assert run.verdict_pending and run.provisional_from == "below" and not run.verdict
    assert [p.pid for p in run.leftover] == [200] and run.leftover_count == 3  # 2 more not listed
    assert run.below == list(run.leftover) and run.below[0].via == "child"
    watcher(w, 2.4, "leftover", how="root-exit", count=1, pids=[200], procs=[{"pid": 200, "create_time": T0 + 1}])
    watcher(w, 2.5, "watcher_exit", reason="linger-end", samples=3, cpu_s=0.1)
    m = _fold(w)
    run = m.runs["r1"]
    assert run.verdict and not run.verdict_pending and run.watcher_exit == "linger-end"
    assert [p.pid for p in run.leftover] == [200] and run.leftover_count == 1


def test_fold_possible_processes_are_not_members() -> None:
    """An entry in tree.possible is kept apart: not a process of the run; proven later, it is one."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", create_time=T0)
    pager = {"pid": 300, "ppid": 1, "create_time": T0 + 0.5, "name": "less", "via": "group"}
    watcher(w, 1, "tree", count=1, started=[], ended=[], possible=[pager])
    m = _fold(w)
    run = m.runs["r1"]
    assert 300 not in {p.pid for p in m.processes} and list(run.possible.values()) == [pager]
    watcher(w, 2, "tree", count=2, ended=[], started=[dict(pager, via="claim")])
    run = _fold(w).runs["r1"]
    assert not run.possible and [p.via for p in run.processes if p.pid == 300] == ["claim"]


def test_fold_exec_then_end_or_failure() -> None:
    """An exec record: the process becomes that program, its end the watcher's; a later record of it means
    the exec failed; a process_start after it is an exec into Python."""
    from wp_autotrace.analysis.fold.verdict import RUN_ENDED, RUN_KILLED, run_state

    def log(after: str) -> LogWriter:
        w = LogWriter()
        start(w, 0, 100, 1, "main", create_time=T0)
        watcher(w, 0.1, "tree", count=1, ended=[], started=[{"pid": 100, "create_time": T0, "via": "root"}])
        w.add(1, 100, 1, "main", "exec", argv=["/usr/bin/env", "bash"], executable="/usr/bin/env")
        if after == "failed":
            w.add(1.1, 100, 1, "main", "tracer_error", where="exec", error="OSError")
        elif after == "python":
            start(w, 1.1, 100, 1, "main", create_time=T0)
        watcher(w, 3, "tree", count=0, started=[], ended=[{"pid": 100, "create_time": T0, "end": T0 + 3}])
        watcher(w, 3.3, "leftover", how="root-killed", count=0, pids=[], procs=[])
        return w

    run = _fold(log("none")).runs["r1"]
    assert run_state(run, T0 + 4) == RUN_ENDED and run.root is not None and run.root.exit_how == "exec'd into env"
    assert run.root.end == T0 + 3
    run = _fold(log("failed")).runs["r1"]
    assert run.root is not None and run.root.exec_into is None and run_state(run, T0 + 4) == RUN_KILLED
    run = _fold(log("python")).runs["r1"]
    assert run.root is not None and run.root.exec_into is None and run.root.execs == 1


def test_same_process_is_the_one_tolerance() -> None:
    """1.5 ticks: one process within it, another past it, never when a start is unknown."""
    from wp_autotrace.common.procfs import same_process

    assert same_process(T0, T0 + 0.01) and same_process(T0 + 0.01, T0)
    assert not same_process(T0, T0 + 0.02) and not same_process(None, T0) and not same_process(T0, None)


def test_jobs_lost_says_which_way_they_were_lost(tmp_path: Path) -> None:
    """A job sent after the sidecar's end 'went to' a dead pool; a job only in flight when it died (its
    last submit before the end) was 'never answered': the finding never says it was sent to a dead pool."""
    after = next(f for f in report(with_lost_job(), tmp_path)["findings"] if f["kind"] == "jobs-lost")
    assert "went to a compile pool whose sidecar" in after["text"] and "/u/serve.py:9" in after["text"]
    w = with_lost_job()
    label = f"{SP}:SubprocPool.submit"
    (end,) = [r for r in w.lines if r["event"] == "process_exit" and r["pid"] == 100]
    end["count_times"] = {label: [T0 + 1.2, T0 + 1.6]}  # both sent before the sidecar died at 2 s
    before = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "jobs-lost")
    assert "never answered" in before["text"] and "went to" not in before["text"], before["text"]
    assert before["cost"]["jobs_lost"] == 1


@pytest.mark.parametrize("scenario", [with_cut_off_job, "in-flight-at-death"])
def test_a_pool_with_a_job_pending_at_its_stop_was_not_idle(tmp_path: Path, scenario: Any) -> None:
    """Idle starts at the last submit (job ends are not logged), but a job torch still held pending when the
    shutdown came was running until then, or until its sidecar died with it: the pool was not idle, and is
    not said to hold memory idle (docs/users.md D6: 'idle 1.0 s after its last job' of a pool whose last
    job died with its sidecar)."""
    if scenario == "in-flight-at-death":  # sent at 1.6 s, the sidecar killed at 2 s, shutdown at 3 s finds it
        w = with_lost_job()
        for r in w.lines:
            if r["event"] == "process_exit" and r["pid"] == 100:
                r["counts"] = {f"{SP}:SubprocPool.submit": 1}
                r["count_times"] = {f"{SP}:SubprocPool.submit": [T0 + 1.6, T0 + 1.6]}
    else:
        w = scenario()
    (pool,) = report(w, tmp_path)["pools"]
    assert pool["idle_s"] == 0 and pool["idle_mib_s"] is None and pool["held_pss_bytes"] is None
    assert pool["jobs_lost" if scenario == "in-flight-at-death" else "jobs_cut_off"] == 1


def _two_runs_one_main_pid(second_waited: bool) -> LogWriter:
    """Two runs in one log whose main processes got the same pid on one host (a restarted container): the first,
    under `wp-autotrace run`, was killed (its run_exit: SIGKILL); the second exited 0 and wrote its
    process_exit (with its own run_exit when second_waited)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", run="r1")
    watcher(w, 0.9, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 0.9}])
    w.add(1, 50, 1, "run", "run_exit", root_pid=100, status=-9, forwarded=[])
    start(w, 5, 100, 1, "main", run="r2")
    w.add(6, 100, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0)
    if second_waited:
        w.add(6.1, 51, 1, "run", "run_exit", root_pid=100, status=0, forwarded=[])
    return w


@pytest.mark.parametrize("second_waited", [False, True])
def test_a_run_exit_is_its_own_runs_not_a_later_main_with_the_same_pid(tmp_path: Path, second_waited: bool) -> None:
    """run_exit names its main by pid and host only: it is the run's whose main had that pid and started last
    before the record, never a later run's main that got the pid again."""
    rep = report(_two_runs_one_main_pid(second_waited), tmp_path)
    mains = {p["run"]: p["ending"] for p in rep["processes"] if p["role"] == "main"}
    assert mains["r2"]["kind"] == "exit" and mains["r2"]["code"] == 0, mains["r2"]
    assert mains["r1"]["kind"] == "signal" and mains["r1"]["signal"] == "SIGKILL", mains["r1"]


def test_fork_hang_says_the_process_lived_on(tmp_path: Path) -> None:
    """The interrupted wait, the threads at the pool's making, and that the process did not end after the Ctrl-C
    (no process_exit, ended 3 s later): the words and the fix."""
    rep = report(with_fork_hang(), tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    assert "interrupted by Ctrl-C (KeyboardInterrupt) after 3.5 s" in hang["text"]
    assert "the process did not end then: it ran 3.0 s more" in hang["text"] and "ran 3 threads" in hang["text"]
    assert hang["cost"]["hang_s"] == 3.5 and 'worker_start_method="subprocess"' in hang["advice"]


def test_what_kept_a_process_alive_after_a_ctrl_c_is_told_only_from_a_record(tmp_path: Path) -> None:
    """with_fork_hang: after the Ctrl-C the process ran 3 s more, with no exit of its own and no record of what it
    did: the finding says no record says what kept it (never "concurrent.futures' exit handler waits", a cause
    nothing shows). With concurrent.futures' exit join traced from 6.2 s, it names that wait and when it began."""
    (hang,) = [f for f in report(with_fork_hang(), tmp_path)["findings"] if f["kind"] == "fork-pool-hang"]
    assert "it ran 3.0 s more, with no exit of its own (no record says what kept it)" in hang["text"], hang["text"]
    assert "concurrent.futures" not in hang["text"], hang["text"]
    w = with_fork_hang()
    call(w, 6.2, 100, 1, "main", "concurrent.futures.process:_python_exit", 9, None)
    (hang,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "fork-pool-hang"]
    assert "with no exit of its own (concurrent.futures' exit handler waited for the pool's jobs from 6.2 s)" \
        in hang["text"], hang["text"]


def test_a_ctrl_c_then_a_kill_is_told_as_the_kill_not_as_an_exit_handlers_wait(tmp_path: Path) -> None:
    """with_fork_hang, and `run` waited for the main: SIGKILL. The process lived on after the Ctrl-C and was
    killed: the words say so (the status is the evidence), never 'concurrent.futures' exit handler waits for the
    pool's jobs', a cause no record shows."""
    w = with_fork_hang()
    w.add(9.1, 51, 1, "run", "run_exit", root_pid=100, status=-9, forwarded=[])
    rep = report(w, tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    assert "the process did not end then: it ran 3.0 s more, then killed by SIGKILL" in hang["text"], hang["text"]
    assert "concurrent.futures" not in hang["text"], hang["text"]



def test_a_second_ctrl_c_that_killed_the_process_is_no_exit_handlers_run(tmp_path: Path) -> None:
    """with_fork_hang, and `run` waited for the main: SIGINT, with no process_exit (a Ctrl-C under SIGINT's default
    action, or a second one, killed it outright): nothing shows its exit handlers ran; it lived on and was killed."""
    w = with_fork_hang()
    w.add(9.1, 51, 1, "run", "run_exit", root_pid=100, status=-2, forwarded=[])
    (hang,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "fork-pool-hang"]
    assert "exit handlers ran" not in hang["text"], hang["text"]
    assert "the process did not end then: it ran 3.0 s more, then killed by SIGINT" in hang["text"], hang["text"]

def test_a_ctrl_c_whose_exit_began_at_once_is_not_told_as_living_on(tmp_path: Path) -> None:
    """with_sidecar_hang's Ctrl-C went uncaught: the exit join and torch's shutdown began 0.1 s after the interrupt,
    then the harness killed the process 6 s later (run's status SIGKILL). It was exiting, not living on: the
    finding says its exit began then, the Answer no 'lived on'. (A real run under load said 'the process lived on
    6.1 s after it, then killed by SIGKILL'.)"""
    w = with_sidecar_hang()
    w.lines = [r for r in w.lines if r["event"] not in ("process_exit", "tree", "leftover") or r["pid"] != 100
               and r["ts"] < T0 + 8.6]
    call(w, 8.1, 100, 1, "main", "concurrent.futures.process:_python_exit", 7, 8.12)
    call(w, 8.13, 100, 1, "main", f"{AC}:shutdown_compile_workers", 8, None)
    watcher(w, 14.1, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 14.1}])
    w.add(14.2, 51, 1, "run", "run_exit", root_pid=100, status=-9, forwarded=[])
    watcher(w, 14.3, "leftover", how="root-killed", count=0, pids=[], procs=[])
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "pool-wait-interrupted"]
    assert "after 5.1 s; its exit began then (8.1 s) and it ended 6.1 s later, killed by SIGKILL" in f["text"], \
        f["text"]
    assert "lived on" not in rep["answer"] and "did not end then" not in rep["answer"], rep["answer"]


def with_fork_hang_caught(sigint: bool = False) -> LogWriter:
    """with_fork_hang, but the program caught the KeyboardInterrupt and lived on: at 8.9 s it killed its pool's
    one worker (SIGKILL from its own line), its exit began at 8.95 s (process_exit, code 3), and it ended at 9.5 s.
    sigint: it did not catch it; its exit handlers ran until 9.5 s, and its wait status says SIGINT."""
    w = LogWriter()
    w.lines = [r for r in with_fork_hang().lines if r["event"] not in ("tree", "leftover") or r["ts"] < T0 + 9]
    w.add(8.9, 100, 1, "main", "signal_sent", how="kill", target=201, signal=9, frames=[
        {"file": "/home/u/main.py", "line": 30, "func": "<module>"}])
    w.add(8.95, 100, 1, "main", "process_exit", how="exit", **({} if sigint else {"code": 3}), counts={}, dropped=0)
    watcher(w, 9.0, "tree", count=1, started=[], ended=[{"pid": 201, "end": T0 + 9.0}])
    watcher(w, 9.5, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 9.5}],
            **({"zombies": [{"pid": 100, "ppid": 1, "since": T0 + 9.5, "status": 2}]} if sigint else {}))
    watcher(w, 9.6, "leftover", how="root-exit", count=0, pids=[], procs=[])
    return w


def test_a_ctrl_c_the_program_caught_is_told_with_how_it_lived_on_and_ended(tmp_path: Path) -> None:
    """A Ctrl-C whose KeyboardInterrupt the program caught: the interrupted wait, then that the process lived on
    (to its end as seen, 3.5 s after the interrupt) and how it ended (its own exit, code 3), in the finding and the
    Answer; its pool's workers, killed by its own SIGKILL just before its exit, were ended by the program itself,
    not "as main exited"."""
    rep = report(with_fork_hang_caught(), tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    assert "interrupted by Ctrl-C (KeyboardInterrupt) after 3.5 s; the process did not end then: it ran 3.5 s " \
           "more, then exited (code 3)" in hang["text"], hang["text"]
    words = " ".join(rep["answer"].split())
    assert "after 3.5 s; the process lived on 3.5 s after it, then exited (code 3)" in words, words
    (pool,) = rep["pools"]
    assert pool["ending"]["kind"] == "ended-by-creator", pool["ending"]
    assert "main 100 ended its workers itself, sending SIGKILL (os.kill at main.py:30 in <module>)" in words, words
    assert "as main 100 exited" not in words
    # a Ctrl-C that went uncaught ended it as its exit handlers ran (wait status SIGINT): it did not live on
    (tmp_path / "uncaught").mkdir()
    rep = report(with_fork_hang_caught(sigint=True), tmp_path / "uncaught")
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    assert "after 3.5 s; the process ended on a Ctrl-C (SIGINT) 3.5 s later, after its exit handlers ran" \
        in hang["text"], hang["text"]
    assert "lived on" not in rep["answer"] and "did not end then" not in rep["answer"], rep["answer"]


def test_a_long_wait_for_a_new_pool_to_be_ready_is_told_with_the_threads_then(tmp_path: Path) -> None:
    """A first compile that waited 60 s for its pool to be ready (the sidecar itself appeared 20 s after the call)
    in a process running 4 threads is told in the Answer with those figures; a 5 s start is no finding."""
    rep = report(_slow_ready(61.0), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "pool-ready-wait")
    assert f["text"].startswith("Main 100 waited 60.0 s (1.0 s -> 61.0 s) for its new compile pool to become "
                                "ready while it ran 4 threads"), f["text"]
    assert "its sidecar 200 starting only 20.0 s after the call" in f["text"] and f["cost"]["hang_s"] == 60.0
    assert "warm_pool()" in f["advice"]
    assert "Main 100 waited 60.0 s" in rep["answer"]
    (tmp_path / "fast").mkdir()
    assert "pool-ready-wait" not in kinds(report(_slow_ready(6.0, side_at=1.2), tmp_path / "fast"))


def test_a_short_wait_for_a_pool_is_told_where_the_waiting_process_slowed_its_start(tmp_path: Path) -> None:
    """A 7 s wait for a new pool whose sidecar started only 2 s after the call (the waiting process's own part of
    the start, slowed by its 4 threads), the sidecar ready 5 s later: told, and it leads the Answer before the
    pool's 20 s idle afterwards (the program stood still for it). Natural starts are not told: the sidecar 0.2 s
    after the call (idle box), or 1.0 s after it and ready 13 s later (a loaded box: both parts slow)."""
    rep = report(_slow_ready(8.0, side_at=3.0, idle_s=20.0), tmp_path)
    assert {"pool-ready-wait", "idle-pool"} <= kinds(rep), kinds(rep)
    f = next(f for f in rep["findings"] if f["kind"] == "pool-ready-wait")
    assert f["text"].startswith("Main 100 waited 7.0 s (1.0 s -> 8.0 s) for its new compile pool to become ready "
                                "while it ran 4 threads (ps count at 1.5 s), its sidecar 200 starting only 2.0 s "
                                "after the call; that part of the start is the waiting process's own"), f["text"]
    assert "the sidecar then took 5.0 s to be ready" in f["text"] and f["cost"]["blocked_s"] == 7.0
    assert rep["findings"][0]["kind"] == "pool-ready-wait"
    assert rep["answer"].startswith("- Main 100 waited 7.0 s"), rep["answer"]
    assert "warm_pool()" in rep["answer"].split("Fix first: ")[1]
    # the same wait where the sidecar's create_time is not in the log: its start is then its process_start record,
    # after its interpreter's start-up, and the "own part" would count that start-up too: nothing is said
    (tmp_path / "no-ct").mkdir()
    assert "pool-ready-wait" not in kinds(report(_slow_ready(8.0, side_at=3.0, side_created=False),
                                                 tmp_path / "no-ct"))
    for n, (side_at, ready_at) in enumerate(((1.2, 5.0), (2.0, 15.0))):
        (tmp_path / str(n)).mkdir()
        assert "pool-ready-wait" not in kinds(report(_slow_ready(ready_at, side_at=side_at), tmp_path / str(n)))


def test_a_long_wait_that_is_the_sidecars_own_start_is_no_finding(tmp_path: Path) -> None:
    """A 44 s wait for a new pool whose sidecar started 3.7 s after the call and took 40 s to be ready (a loaded box:
    three ranks starting their sidecars at once beside another job, both parts slow; 0.09 of the sidecar's part
    was the waiting process's own): the box, not the program. No pool-ready-wait, and the pool's idle span leads
    the Answer as it does on a quick box; the same wait with a slow own part (20 s against 24 s) is told."""
    rep = report(_slow_ready(45.0, side_at=4.7, idle_s=20.0), tmp_path)
    assert "pool-ready-wait" not in kinds(rep), rep["answer"]
    assert rep["findings"][0]["kind"] == "idle-pool", rep["answer"]
    (tmp_path / "own").mkdir()
    assert "pool-ready-wait" in kinds(report(_slow_ready(45.0, side_at=21.0, idle_s=20.0), tmp_path / "own"))
    # three threads running Python (0.106 of a core) at load 20: the sidecar's own start took 39.1 s, the waiting
    # process's part 7.6 s (0.19 of it): load slowed both parts, the threads still slowed the own part: told
    (tmp_path / "loaded").mkdir()
    rep = report(_slow_ready(47.7, side_at=8.6, idle_s=20.0, cpu=0.106), tmp_path / "loaded")
    assert rep["findings"][0]["kind"] == "pool-ready-wait", rep["answer"]


def test_a_slow_own_start_is_told_only_where_the_waiting_process_was_read_running_threads(tmp_path: Path) -> None:
    """An 8 s wait whose own part was 2 s against the sidecar's 6 s (over the bars), in a process of 4 threads: told
    only where the watcher read the process using CPU while its waiting thread stood in the wait (0.3 of a core:
    its other threads ran, which slow its own part through the GIL). Idle threads on a loaded box (pytest-xdist's
    test-runner threads: 0.000 of a core, a loaded box slowing the own part by itself) and a process whose CPU was
    not read then are no finding: no evidence the threads ran, so nothing blames them."""
    rep = report(_slow_ready(9.0, side_at=3.0, idle_s=20.0, cpu=0.3), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "pool-ready-wait")
    assert "its other threads slow where they run Python (the GIL), and they ran: it used 0.30 of a core while " \
           "its waiting thread stood in the wait" in f["text"], f["text"]
    assert rep["findings"][0]["kind"] == "pool-ready-wait"
    # three threads running Python at load 36 on 2 cores read 0.097 of a core (a runnable thread got about 0.06):
    # they ran, and the wait is told
    (tmp_path / "loaded").mkdir()
    rep = report(_slow_ready(9.0, side_at=3.0, idle_s=20.0, cpu=0.097), tmp_path / "loaded")
    assert rep["findings"][0]["kind"] == "pool-ready-wait", rep["answer"]
    for n, cpu in enumerate((0.0, 0.02, None)):
        (tmp_path / str(n)).mkdir()
        rep = report(_slow_ready(9.0, side_at=3.0, idle_s=20.0, cpu=cpu), tmp_path / str(n))
        assert "pool-ready-wait" not in kinds(rep), (cpu, rep["answer"])
        assert rep["findings"][0]["kind"] == "idle-pool", rep["answer"]


def test_a_forked_process_waiting_on_its_parents_compile_threads_is_told(tmp_path: Path) -> None:
    """A worker forked after its master compiled with compile threads waits in AsyncCompile.wait for ever (a real
    torch 2.13 hang: AsyncCompile.pool() has no threads in the child): the Answer leads with it, the calls that
    never returned under it, and Fix first is TORCHINDUCTOR_COMPILE_THREADS=1, not the master's idle pool. Not
    told where the master compiled without compile threads, forked before it compiled, or the wait returned."""
    rep = report(with_forked_compile_hang(), tmp_path)
    lines = rep["answer"].splitlines()[1:]  # after "Compiled without a process pool" (none was made here)
    assert lines[0] == ("- Child 300, forked from main 100 after it had compiled with compile threads, waited in "
                        "AsyncCompile.wait, which never returned (90.0 s, until it ended): the compile thread pool "
                        "torch keeps in the parent has no threads in a forked process. What follows from it:"), lines
    assert lines[1].startswith("  - 2 traced call(s) never returned"), lines
    fix = next(x for x in lines if x.startswith("- Fix first: "))
    assert fix.startswith("- Fix first: set TORCHINDUCTOR_COMPILE_THREADS=1"), fix
    f = next(f for f in rep["findings"] if f["kind"] == "forked-compile-hang")
    assert f["pids"] == [300] and f["cost"]["blocked_s"] == 90.0 and "called at /site/plugin" in f["text"]
    # how the child ended, in the words the Process tree uses, never the fold's internal "vanished"
    assert "(90.0 s, until it ended (how is not known))" in f["text"] and "vanished" not in f["text"], f["text"]
    for n, kw in enumerate(({"threads": 1}, {"fork_at": 1.5}, {"returns": True})):
        (tmp_path / str(n)).mkdir()
        assert "forked-compile-hang" not in kinds(report(with_forked_compile_hang(**kw), tmp_path / str(n))), kw
    # compile_threads set to 1 in code after torch loaded its config (8): the master's wait captured 1, so it made
    # no compile thread pool, and its child's wait is not this
    one = with_forked_compile_hang(threads=8)
    next(r for r in one.lines if r.get("call_id") == 1 and r["pid"] == 100 and r["event"] == "call")[
        "compile_threads"] = 1
    (tmp_path / "set-in-code").mkdir()
    assert "forked-compile-hang" not in kinds(report(one, tmp_path / "set-in-code"))


PIDS_CG = "/wp_users_pids_1"


def _kernel_failed(line: str, threads: int, uid: int = 65534, nproc: int = 24,
                   refused: tuple[int, ...] = (), own: tuple[int, ...] = ()) -> LogWriter:
    """main 100's pool (sidecar 200, workers 300 and 301), all run under ulimit -u 24 as uid 65534 (the watcher's
    tree entries); one sweep at 2.0 s read `threads` processes and threads of theirs at once; the compiled
    module's wait (2.0 -> 2.1 s) raised a kernel's job error whose own last line is `line`, past the record's
    head, as the runtime keeps it (head and tail). `refused`: all in pids cgroup PIDS_CG (pids.max 24), whose
    pidcg records at 1.3 s and (`final`) at 2.5 s read these pids.events max counts; with three counts, the second
    at 2.2 s, read as the watcher read the job's error (`after` its record's ts, 2.1 s). `own`: v2, the limit set
    on /job above PIDS_CG, and these the counts read at PIDS_CG beside them (`refused_own`)."""
    from wp_autotrace.runtime.reads import error_text

    w = clean_run()
    for i, (at, count) in enumerate(zip((1.3, 2.5) if len(refused) < 3 else (1.3, 2.2, 2.5), refused)):
        v2 = {"version": 2, "limit_path": "/job", "refused_own": own[i]} if own else {"version": 1}
        watcher(w, at, "pidcg", member=100, path=PIDS_CG, file="pids.max", limit=24, refused=count, **v2,
                **({"final": True} if at > 2.4 else {"after": T0 + 2.1} if at > 2 else {}))
    watcher(w, 1.3, "tree", count=4, started=[
        {"pid": pid, "ppid": ppid, "name": "python", "cmd": "python", "role": role, "via": "child",
         "nproc": nproc, "uid": uid, **({"pidcg": PIDS_CG} if refused else {})}
        for pid, ppid, role in ((100, 1, "main"), (200, 100, "compile-sidecar"), (300, 200, "compile-worker"),
                                (301, 200, "compile-worker"))], ended=[])
    start(w, 1.26, 300, 200, "compile-worker")
    start(w, 1.27, 301, 200, "compile-worker")
    split = [threads // 4] * 3
    watcher(w, 2.0, "memory", procs=[{"pid": pid, "pss": 90 << 20, "uss": 1 << 20, "threads": n} for pid, n in
                                     zip((100, 200, 300, 301), (*split, threads - sum(split)))])
    frames = "".join(f'  File "/site/triton/compiler/m{i}.py", line {i}, in f{i}\n    g{i}()\n' for i in range(30))
    details = ("An exception occurred in a subprocess:\n\nName=triton_poi_fused_add_0\nTraceback (most recent "
               f"call last):\n{frames}{line}\n")

    class SubprocException(Exception):
        pass

    call(w, 2.0, 100, 1, "main", "torch._inductor.async_compile:AsyncCompile.wait", 5, 2.1,
         error=error_text(SubprocException(details)))
    return w


def test_a_kernel_that_failed_in_the_pool_is_told_with_its_own_line_and_the_limit_only_where_reached(
        tmp_path: Path) -> None:
    """A compiled module's wait raised a kernel's job error (the pool's SubprocException): the Answer names the
    kernel, the job's own last line, and "the process limit (ulimit -u 24) was reached" only where that line is
    EAGAIN (a thread start refused) and one watcher sweep counted 24 processes and threads of the uid at once; with
    fewer counted, or another error, the failure is told and its cause is unknown (no limit claimed)."""
    rep = report(_kernel_failed("RuntimeError: can't start new thread", 24), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "compile-failed")
    answer = rep["answer"].replace("\n  ", " ").replace("\n", " ")
    for said in ("1 kernel (triton_poi_fused_add_0) failed to compile in the pool",
                 "the job's own error: RuntimeError: can't start new thread",
                 "the process limit (ulimit -u 24) was reached: 24 processes and threads of uid 65534 at once"):
        assert said in f["text"] and said in answer, (said, answer)
    assert "ulimit -u" in f["advice"] and "TORCHINDUCTOR_COMPILE_THREADS=1" in f["advice"], f["advice"]
    assert f["cost"]["limit_reached"] and f["cost"]["nproc_limit"] == 24 and f["cost"]["uid"] == 65534, f["cost"]
    assert "Fix first: ask for a higher process limit" in answer, answer  # the failed compile's, before an exit wait
    for sub, line, threads in (("short", "RuntimeError: can't start new thread", 20),
                               ("other", "subprocess.CalledProcessError: Command '['ld.lld']' returned non-zero "
                                         "exit status 1", 24)):
        (tmp_path / sub).mkdir()
        f = next(f for f in report(_kernel_failed(line, threads), tmp_path / sub)["findings"]
                 if f["kind"] == "compile-failed")
        assert f"the job's own error: {line}" in f["text"] and "24) was reached" not in f["text"], f["text"]
        assert "no record shows why the job failed (its processes ran under ulimit -u 24" in f["text"], f["text"]
        assert not f["cost"]["limit_reached"], f["cost"]


def test_a_limit_far_above_what_was_counted_is_not_told_beside_a_failed_kernel(tmp_path: Path) -> None:
    """A job error under a limit many times the uid's processes and threads counted (ulimit -u 96369, 24 read)
    says nothing of the limit: it is no cause and no lead, only noise beside the job's own line. Within a few
    times the count (24 under 24, or 24 under 90: the sweeps saw a tenth of a second's peak at most) it is told."""
    line = "subprocess.CalledProcessError: Command '['ld.lld']' returned non-zero exit status 1"
    far = next(f for f in report(_kernel_failed(line, 24, nproc=96369), tmp_path)["findings"]
               if f["kind"] == "compile-failed")
    assert "ulimit" not in far["text"] and "no record shows why the job failed." in far["text"], far["text"]
    assert far["cost"]["nproc_limit"] == 96369 and not far["cost"]["limit_reached"], far["cost"]
    (tmp_path / "near").mkdir()
    near = next(f for f in report(_kernel_failed(line, 24, nproc=90), tmp_path / "near")["findings"]
                if f["kind"] == "compile-failed")
    assert "its processes ran under ulimit -u 90" in near["text"], near["text"]


def test_a_kernel_that_failed_under_root_is_not_told_the_process_limit(tmp_path: Path) -> None:
    """The kernel holds no uid 0 process to ulimit -u outside a user namespace (fork's check skips INIT_USER):
    root's EAGAIN at 24 of 24 counted is another refusal's (a container's pids.max) as likely, so the limit is a
    possibility, never the cause told."""
    f = next(f for f in report(_kernel_failed("RuntimeError: can't start new thread", 24, uid=0), tmp_path)[
        "findings"] if f["kind"] == "compile-failed")
    assert "24) was reached" not in f["text"] and not f["cost"]["limit_reached"], f["text"]
    assert "root's processes are held to it only inside a user namespace" in f["text"], f["text"]
    assert f["advice"].startswith("if the process limit caused it: "), f["advice"]


def test_a_kernel_that_failed_under_a_containers_task_limit_is_told_the_kernels_count_of_refusals(
        tmp_path: Path) -> None:
    """A container's pids limit (podman's --pids-limit) counts root's tasks too, while ulimit -u is far away: a real
    job's linkers were refused threads and its kernels failed with the linker's exit status only. The kernel's own
    count of the refusals (pids.events max, the watcher's pidcg records at the cgroup's first join, as it read the
    job's error, and at its end: 0 -> 4 -> 4) is the evidence: the cause told is the cgroup's task limit, with the
    container's advice. Controls: the count did not rise, or its end was not read (no `final` record): the cause
    stays unknown."""
    line = "subprocess.CalledProcessError: Command '['ld.lld']' returned non-zero exit status 1"
    rep = report(_kernel_failed(line, 12, uid=0, nproc=96369, refused=(0, 4, 4)), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "compile-failed")
    said = (f"the task limit of its cgroup was reached: pids.max 24 ({PIDS_CG}; each process and each thread in it "
            "counts, root's too, the run's or not); the kernel refused 4 fork(s) or thread start(s) there between "
            "1.3 s and 2.2 s, as the watcher read the failure raised at 2.1 s (pids.events max 0 -> 4).")
    assert said in f["text"], f["text"]
    assert said in rep["answer"].replace("\n  ", " ").replace("\n", " "), rep["answer"]
    assert "--pids-limit" in f["advice"] and f["cost"]["limit_reached"], (f["advice"], f["cost"])
    assert (f["cost"]["pids_max"], f["cost"]["pids_refused"], f["cost"]["pids_placed"]) == (24, 4, "before")
    for sub, refused in (("flat", (4, 4)), ("unread", (0,))):
        (tmp_path / sub).mkdir()
        f = next(f for f in report(_kernel_failed(line, 12, uid=0, nproc=96369, refused=refused),
                                   tmp_path / sub)["findings"] if f["kind"] == "compile-failed")
        assert "pids" not in f["text"] and "no record shows why the job failed" in f["text"], f["text"]
        assert not f["cost"]["limit_reached"] and "pids_max" not in f["cost"], f["cost"]


def test_a_task_limits_refusals_are_the_cause_only_where_counted_by_the_time_the_failure_was_read(
        tmp_path: Path) -> None:
    """The job's line is a bare exit status (the linker's reason went to its stderr). The refusals' count read at
    the cgroup's join (1.3 s) and at the watcher's end (2.5 s) rose, but the failure was raised at 2.1 s: a refusal
    may have come after it. Only the count the watcher read as it read the job's error (2.2 s) places them: none
    by then (0 -> 0 -> 4) is "only after the failure", no cause, the advice the unknown one; with no read between
    (0 -> 4), the limit reached in the run is a possibility ("whether the limit caused it, no record shows", the
    advice an "if"); a read made long after the failure (the watcher behind the log) places nothing."""
    line = "subprocess.CalledProcessError: Command '['ld.lld']' returned non-zero exit status 1"
    f = next(f for f in report(_kernel_failed(line, 12, uid=0, nproc=96369, refused=(0, 0, 4)), tmp_path)[
        "findings"] if f["kind"] == "compile-failed")
    assert "no record shows why the job failed; the task limit of its cgroup was reached only after the failure: " \
        "pids.max 24" in f["text"], f["text"]
    assert "the kernel refused none there between 1.3 s and 2.2 s, as the watcher read the failure raised at " \
        "2.1 s, and 4 by its end at 2.5 s (pids.events max 0 -> 0 -> 4)." in f["text"], f["text"]
    assert f["advice"].startswith("read the job's own error line") and not f["cost"]["limit_reached"], f
    assert (f["cost"]["pids_refused"], f["cost"]["pids_placed"]) == (4, "after"), f["cost"]
    # the watcher killed before its end (no `final` record): the read as it read the error places them alone
    (tmp_path / "no-end").mkdir()
    w = _kernel_failed(line, 12, uid=0, nproc=96369, refused=(0, 4, 4))
    w.lines = [r for r in w.lines if not (r["event"] == "pidcg" and r.get("final"))]
    f = next(f for f in report(w, tmp_path / "no-end")["findings"] if f["kind"] == "compile-failed")
    assert "refused 4 fork(s) or thread start(s) there between 1.3 s and 2.2 s, as the watcher read the failure " \
        "raised at 2.1 s (pids.events max 0 -> 4)." in f["text"] and f["cost"]["pids_placed"] == "before", f["text"]
    for sub, late in (("unread", False), ("late", True)):
        (tmp_path / sub).mkdir()
        w = _kernel_failed(line, 12, uid=0, nproc=96369, refused=(0, 4) if not late else (0, 4, 4))
        if late:  # the watcher read the error 2.5 s after it was raised, and ended at 5.0 s
            for r in w.lines:
                if r["event"] == "pidcg":
                    r["ts"] += 2.5 if "after" in r else 2.5 if r.get("final") else 0.0
        f = next(f for f in report(w, tmp_path / sub)["findings"] if f["kind"] == "compile-failed")
        end = "2.5 s" if not late else "5.0 s"
        assert f"the task limit of its cgroup was reached in the run: pids.max 24 ({PIDS_CG}; " in f["text"], f
        assert f"the kernel refused 4 fork(s) or thread start(s) there between 1.3 s and {end} (pids.events max " \
            "0 -> 4); the failure was raised at 2.1 s, with no count read in between: whether the limit caused " \
            "it, no record shows." in f["text"], f["text"]
        assert f["advice"].startswith("if the task limit caused it: raise the task limit"), f["advice"]
        assert f["cost"]["pids_placed"] == "unknown", f["cost"]


def test_a_v2_task_limit_above_the_processs_cgroup_counts_refusals_in_either_cgroups_pids_events(
        tmp_path: Path) -> None:
    """v2 with the limit set above the process's own cgroup (a SLURM job's or a user slice's TasksMax): before Linux
    6.13 the kernel counts a refusal in the forking task's cgroup (`refused_own`), the limit's count stays 0; from
    6.13 in the limit's (`refused`) and may count it in both. A rise in either is the refusals, the larger one, never
    the sum; where the limit's count rose as much, the words are those of a count read at the limit alone."""
    line = "subprocess.CalledProcessError: Command '['ld.lld']' returned non-zero exit status 1"

    def told(sub: str, refused: tuple[int, ...], own: tuple[int, ...]) -> dict[str, Any]:
        (tmp_path / sub).mkdir()
        rep = report(_kernel_failed(line, 12, uid=0, nproc=96369, refused=refused, own=own), tmp_path / sub)
        return next(f for f in rep["findings"] if f["kind"] == "compile-failed")

    on = (f"pids.max 24 (/job, above its own {PIDS_CG}; each process and each thread in it counts, root's too, the "
          "run's or not)")
    own = f"in its own {PIDS_CG}: before Linux 6.13 the kernel counts a refusal in the forking task's cgroup, not " \
          "the limit's)"
    f = told("old-kernel", (0, 0, 0), (0, 4, 4))
    assert f"the task limit of its cgroup was reached: {on}; the kernel refused 4 fork(s) or thread start(s) there " \
        f"between 1.3 s and 2.2 s, as the watcher read the failure raised at 2.1 s (pids.events max 0 -> 4 {own}." \
        in f["text"], f["text"]
    assert (f["cost"]["pids_refused"], f["cost"]["pids_placed"]) == (4, "before") and f["cost"]["limit_reached"]
    f = told("after", (0, 0, 0), (0, 0, 3))
    assert "refused none there between 1.3 s and 2.2 s, as the watcher read the failure raised at 2.1 s, and 3 by " \
        f"its end at 2.5 s (pids.events max 0 -> 0 -> 3 {own}." in f["text"], f["text"]
    assert (f["cost"]["pids_refused"], f["cost"]["pids_placed"]) == (3, "after"), f["cost"]
    for sub, own_counts in (("both", (0, 4, 4)), ("new-kernel", (0, 0, 0))):  # 6.13+: the limit's count rose
        f = told(sub, (0, 4, 4), own_counts)
        assert f"{on}; the kernel refused 4 fork(s) or thread start(s) there between 1.3 s and 2.2 s, as the " \
            "watcher read the failure raised at 2.1 s (pids.events max 0 -> 4)." in f["text"], f["text"]
        assert f["cost"]["pids_refused"] == 4, f["cost"]  # not 8: one refusal counted in both
    f = told("larger", (0, 1, 1), (0, 3, 3))
    assert "refused 3 fork(s)" in f["text"] and "(pids.events max 0 -> 3 in its own" in f["text"], f["text"]


def test_a_task_limit_reached_beside_a_job_line_naming_its_own_cause_is_not_told_as_the_cause(
        tmp_path: Path) -> None:
    """The cgroup's count of refusals rose in the run, but the job's own line names a cause of its own (a file gone
    from a wiped cache, a C++ syntax error): the limit is told beside it, "whether the limit caused this failure, no
    record shows", and the advice stays the line's (the cache's, else read the line), not the container's limit."""
    for n, (line, advice) in enumerate((
            ("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/torchinductor_u/ab/cab.py'",
             "a file the job read back was gone"),
            ("torch._inductor.exc.CppCompileError: C++ compile error: error: expected ';' before '}' token",
             "read the job's own error line"))):
        (tmp_path / str(n)).mkdir()
        f = next(f for f in report(_kernel_failed(line, 12, uid=0, nproc=96369, refused=(0, 1)),
                                   tmp_path / str(n))["findings"] if f["kind"] == "compile-failed")
        assert "whether the limit caused this failure, no record shows" in f["text"], f["text"]
        assert f["advice"].startswith(advice) and "--pids-limit" not in f["advice"], f["advice"]


def test_a_task_limits_refusals_in_another_run_of_the_log_are_not_this_runs(tmp_path: Path) -> None:
    """Two traced programs append to one log in the same container (one pids cgroup path): the first was refused 4
    forks (0 -> 4) and ended; the second's own count stayed 4 -> 4 when its linker failed. Each process reads its
    own run's pidcg records: the second's failure is told no cause, not the first's refusals."""
    line = "subprocess.CalledProcessError: Command '['ld.lld']' returned non-zero exit status 1"
    w = _kernel_failed(line, 12, uid=0, nproc=96369, refused=(4, 4))
    early: list[dict[str, Any]] = []
    r0 = {"run": "r0", "root_pid": 50}

    def add(t: float, pid: int, role: str, event: str, **f: Any) -> None:
        early.append({"v": 1, "event": event, "ts": 1_800_000_000.0 + t, "pid": pid, "ppid": 1 if pid == 50 else 50,
                      "host": w.host, "role": role, "seq": len(early), **f})
    add(-60, 50, "main", "process_start", argv=["python", "other.py"], python="3.11.7", forked=False, env={}, **r0)
    add(-59.9, 950, "watcher", "watcher_start", interval=0.1, linger=60.0, **r0)
    add(-59.8, 950, "watcher", "pidcg", member=50, version=1, path=PIDS_CG, file="pids.max", limit=24, refused=0, **r0)
    add(-59.8, 950, "watcher", "tree", count=1, started=[{"pid": 50, "ppid": 1, "name": "python", "cmd": "python",
                                                          "role": "main", "via": "root", "pidcg": PIDS_CG}],
        ended=[], **r0)
    add(-50, 50, "main", "process_exit", how="exit", counts={}, dropped=0)
    add(-49.9, 950, "watcher", "pidcg", member=50, version=1, path=PIDS_CG, file="pids.max", limit=24, refused=4,
        final=True, **r0)
    add(-49.8, 950, "watcher", "tree", count=0, started=[], ended=[{"pid": 50, "end": 1_800_000_000.0 - 50}],
        final=True, **r0)
    add(-49.7, 950, "watcher", "watcher_exit", reason="root-exit", **r0)
    w.lines[:0] = early
    f = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "compile-failed")
    assert "pids" not in f["text"] and "no record shows why the job failed" in f["text"], f["text"]
    assert not f["cost"]["limit_reached"], f["cost"]


def test_a_kernel_whose_file_was_gone_is_told_with_the_shared_cache_advice(tmp_path: Path) -> None:
    """A job whose own line says the file it read back was gone ("OSError: source code not available", what
    inspect says as @triton.jit reads a kernel's module; FileNotFoundError): Fix first says, as an "if", what a
    compile cache shared with other jobs does and gives each job its own. A real run whose shared cache another
    job wiped got "read the job's own error line above". Control: another error keeps that advice."""
    rep = report(_kernel_failed("OSError: source code not available", 8), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "compile-failed")
    assert f["advice"].startswith("a file the job read back was gone") and "TORCHINDUCTOR_CACHE_DIR" in f["advice"]
    fix = rep["answer"].split("Fix first:", 1)[1].replace("\n  ", " ")
    assert "TORCHINDUCTOR_CACHE_DIR" in fix, rep["answer"]
    (tmp_path / "other").mkdir()
    other = report(_kernel_failed("ValueError: bad kernel", 8), tmp_path / "other")
    f = next(f for f in other["findings"] if f["kind"] == "compile-failed")
    assert "CACHE_DIR" not in f["advice"] and f["advice"].startswith("read the job's own error line"), f["advice"]


def with_killed_main_fork_pool(last_end: float | None, own_kill: bool = True) -> LogWriter:
    """torch 2.1's shape: main 100 makes a fork pool at 3 s and is SIGKILLed at 5.0 s; torch's worker watchdog
    (its 1 s poll) ends worker 201 at 5.15 s and 202 at `last_end` (None: never seen to end), each by its own
    SIGKILL (signal_sent; own_kill False: 202 ended with no record of how, as `cleanup` or a runner ends it). The
    watcher's verdict, 0.2 s after the main's end, names 202 left running."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=5.0)
    fork_pool_at_3(w, 100, 1, "main", 12, 2, ["python", "main.py"])
    watcher(w, 4.0, "memory", procs=[{"pid": pid, "pss": 100 * 2**20, "uss": 2**20} for pid in (201, 202)])
    watcher(w, 5.05, "tree", count=2, started=[], ended=[{"pid": 100, "end": T0 + 5.0}])
    watcher(w, 5.15, "tree", count=1, started=[], ended=[{"pid": 201, "end": T0 + 5.15}])
    watcher(w, 5.2, "leftover", how="root-killed", count=1, pids=[202],
            procs=[{"pid": 202, "ppid": 1, "name": "python", "cmd": "x", "rss": 240 << 20, "role": "compile-worker"}])
    watchdog = [{"file": "/site/torch/_inductor/codecache.py", "line": 1319, "func": "run"}]
    w.add(5.14, 201, 100, "compile-worker", "signal_sent", how="kill", target=201, signal=9, frames=watchdog)
    if last_end is not None:
        if own_kill:
            w.add(last_end - 0.01, 202, 100, "compile-worker", "signal_sent", how="kill", target=202, signal=9,
                  frames=watchdog)
        watcher(w, last_end, "tree", count=0, started=[], ended=[{"pid": 202, "end": T0 + last_end}])
    return w


def test_a_worker_ending_just_after_a_killed_main_is_not_left_running(tmp_path: Path) -> None:
    """A worker the verdict named, whose end the log shows 0.3 s after the main's kill (torch's watchdog), was not
    left running: no leftover finding or cleanup advice leads; its pool's story tells when it ended."""
    rep = report(with_killed_main_fork_pool(5.3), tmp_path)
    assert "leftovers" not in kinds(rep), rep["findings"]
    assert rep["leftover_count"] == 0 and rep["leftover_pids"] == []
    assert not any(p["left_behind"] for p in rep["processes"])
    answer = " ".join(rep["answer"].split())
    assert "left running" not in answer and "nothing is left of them to end" not in answer, answer
    assert "its workers ended 0.3 s after main 100" in answer, answer
    assert "The main process ended without process_exit" in answer, answer
    (killed,) = [f for f in rep["findings"] if f["kind"] == "root-killed"]
    assert "the last ended 0.3 s after it (none left running)" in killed["text"], killed["text"]


@pytest.mark.parametrize(("last_end", "own_kill"), [(None, True), (20.0, True), (5.3, False)])
def test_a_worker_living_on_after_a_killed_main_stays_left_running(last_end: float | None, own_kill: bool,
                                                                   tmp_path: Path) -> None:
    """The control: a worker never seen to end, seen to end long after the main (well past torch's watchdog), or
    ended soon with no record of how (`cleanup`'s own kill), stays a leftover, and the leftover finding tells it."""
    rep = report(with_killed_main_fork_pool(last_end, own_kill), tmp_path)
    assert "leftovers" in kinds(rep), rep["findings"]
    assert rep["leftover_pids"] == [202]
    assert "1 process was left running after the main process" in " ".join(rep["answer"].split())


def with_group_sigterm(end: float = 5.3, status: int = 15, pgid: int = 100) -> LogWriter:
    """A CI step's `timeout`: SIGTERM to process group 100 at 5.0 s ends main 100 (its zombie's wait status 15) and,
    on a loaded host a look later, worker 202 of its fork pool (in the group, seen ending at `end` with `status`,
    its process group `pgid` as the watcher first read it). Neither handles SIGTERM: no exit record, no signal_sent
    (the sender is outside the run). The verdict, 0.2 s after the main's end, names 202 left running."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=5.0)
    watcher(w, 0.1, "tree", count=1, ended=[], started=[{"pid": 100, "ppid": 1, "name": "python", "cmd": "main.py",
                                                          "create_time": T0, "pgid": 100, "role": "main"}])
    fork_pool_at_3(w, 100, 1, "main", 12, 2, ["python", "main.py"])
    watcher(w, 3.1, "tree", count=3, ended=[], started=[
        {"pid": q, "ppid": 100, "name": "python", "cmd": "main.py", "create_time": T0 + 3.05,
         "pgid": pgid if q == 202 else 100, "via": "child"} for q in (201, 202)])
    watcher(w, 4.0, "memory", procs=[{"pid": pid, "pss": 100 * 2**20, "uss": 2**20} for pid in (201, 202)])
    watcher(w, 5.05, "tree", count=1, started=[], ended=[{"pid": q, "end": T0 + 5.0} for q in (100, 201)],
            zombies=[{"pid": q, "ppid": 1, "since": T0 + 5.0, "status": 15} for q in (100, 201)])
    watcher(w, 5.2, "leftover", how="root-killed", count=1, pids=[202],
            procs=[{"pid": 202, "ppid": 1, "name": "python", "cmd": "x", "rss": 240 << 20, "role": "compile-worker",
                    "pgid": pgid}])
    watcher(w, end, "tree", count=0, started=[], ended=[{"pid": 202, "end": T0 + end}],
            zombies=[{"pid": 202, "ppid": 1, "since": T0 + end, "status": status}])
    return w


def test_a_worker_the_groups_sigterm_ended_a_look_after_the_main_was_not_left_running(tmp_path: Path) -> None:
    """The group's SIGTERM that killed the main killed its worker 0.3 s later (both wait statuses say SIGTERM, both
    in the main's group): it ended with the main, not left running; the Answer leads with no leftover and no
    "nothing is left of them to end" (a CI step's time limit over a hung compile once led with both). The
    controls stay leftovers: another signal (SIGKILL: `cleanup` or a runner ended it), another process group (the
    group signal did not reach it), or an end 15 s after the main's."""
    rep = report(with_group_sigterm(), tmp_path)
    assert "leftovers" not in kinds(rep) and rep["leftover_count"] == 0, rep["findings"]
    answer = " ".join(rep["answer"].split())
    assert "left running" not in answer and "nothing is left of them to end" not in answer, answer
    for name, kw in (("sigkill", {"status": 9}), ("other-group", {"pgid": 555}), ("late", {"end": 20.0})):
        (tmp_path / name).mkdir()
        rep = report(with_group_sigterm(**kw), tmp_path / name)
        assert "leftovers" in kinds(rep) and rep["leftover_pids"] == [202], (name, rep["findings"])


def with_orphan_sidecar_own_exit(exit_at: float, seen_gone: bool = True, teardown_s: float = 2.65) -> LogWriter:
    """torch 2.13's shape: main 100 is SIGKILLed at 3.5 s; its orphaned sidecar 200 reads the end of its pipe and
    returns from main(): its own process_exit at `exit_at`, then its interpreter's teardown: the watcher sees it
    gone 2.65 s after that record (2.7 s after the main: past LEFTOVER_ENDED_S), defunct under pid 1 with status 0.
    No traced process signalled it. The verdict, 0.2 s after the main's end, names it left running."""
    w = with_root_killed()
    made = T0 + 1.2  # its create time, as the watcher reads it: the verdict names the process that wrote the exit
    for r in w.lines:
        if r["event"] == "leftover":
            r["procs"][0]["create_time"] = made
    w.add(exit_at, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    gone = round(exit_at + teardown_s, 2)
    if not seen_gone:  # its teardown never ended, as far as the log shows
        return w
    watcher(w, gone, "tree", count=0, started=[], ended=[{"pid": 200, "create_time": made, "end": T0 + gone}],
            zombies=[{"pid": 200, "create_time": made, "ppid": 1, "since": T0 + gone, "status": 0}])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_sidecar_that_exits_by_itself_after_a_killed_main_is_not_left_running(tmp_path: Path) -> None:
    """The orphaned sidecar's own exit record came 0.05 s after the main's kill: it ended by itself (its exit
    handlers ran), however long its teardown took after that record; not left running, no leftover finding nor
    cleanup advice. The controls: its own exit 10 s after the main's end leaves it a leftover, then ended; its own
    exit with no end seen after it (its teardown may hang) leaves it a leftover."""
    rep = report(with_orphan_sidecar_own_exit(3.55), tmp_path)
    assert "leftovers" not in kinds(rep), rep["findings"]
    assert rep["leftover_count"] == 0 and not any(p["left_behind"] for p in rep["processes"])
    answer = " ".join(rep["answer"].split())
    assert "left running" not in answer and "cleanup" not in answer, answer
    (killed,) = [f for f in rep["findings"] if f["kind"] == "root-killed"]
    assert "(none left running)" in killed["text"], killed["text"]
    side = next(p for p in rep["processes"] if p["pid"] == 200)
    assert side["ending"]["words"] == "exited (code 0) 2.7 s after main 100's end", side["ending"]
    assert side["ending"]["exit_record_at"] == 3.55 and side["ending"]["at"] == 6.2
    # its record before the main's end (it then hung in its teardown until 60 s), or its teardown lingering 56 s
    # after a record just after the main's end: it was left running, whatever its record says
    # its record a moment before the main's end as seen (the watcher sees a kill up to a look late): ended with it
    (tmp_path / "seen-late").mkdir()
    late_seen = report(with_orphan_sidecar_own_exit(3.49), tmp_path / "seen-late")
    assert "leftovers" not in kinds(late_seen) and late_seen["leftover_count"] == 0, late_seen["findings"]
    for name, exit_at, teardown in (("before", 1.5, 58.5), ("lingered", 3.55, 56.45)):
        (tmp_path / name).mkdir()
        hung = report(with_orphan_sidecar_own_exit(exit_at, teardown_s=teardown), tmp_path / name)
        assert "leftovers" in kinds(hung) and hung["leftover_pids"] == [200], (name, hung["findings"])
    (tmp_path / "late").mkdir()
    late = report(with_orphan_sidecar_own_exit(13.5), tmp_path / "late")
    assert "leftovers" in kinds(late) and late["leftover_pids"] == [200], late["findings"]
    side = next(p for p in late["processes"] if p["pid"] == 200)
    assert "by itself" not in side["ending"]["words"], side["ending"]
    (tmp_path / "unseen").mkdir()  # its exit record, but never seen gone: its end is not assumed
    unseen = report(with_orphan_sidecar_own_exit(3.55, seen_gone=False), tmp_path / "unseen")
    assert unseen["leftover_pids"] == [200], unseen["findings"]


def test_a_pool_whose_sidecar_ended_with_no_status_read_keeps_both_readings(tmp_path: Path) -> None:
    """No status of the sidecar was read (the watcher saw it gone): its own abort or fault and a kill for memory stay
    both open in the fix, as for a worker lost unread; it gave the memory reading alone."""
    rep = report(with_killed_sidecar(), tmp_path)
    (died,) = [f for f in rep["findings"] if f["kind"] == "pool-died"]
    assert "PYTHONFAULTHANDLER=1" in died["advice"] and "dmesg" in died["advice"], died["advice"]
    assert "chose it" not in rep["answer"] and "OOM" not in rep["answer"], rep["answer"]
