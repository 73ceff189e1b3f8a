"""Pools a process's threads made at once (findings/threads.py): two request threads' first compiles ask
AsyncCompile.process_pool() together, and its lru_cache lets both in (pytorch#136833; bench/users/threads_race.py)."""

from __future__ import annotations

from pathlib import Path

from .logs import AC, PLUGIN, SP, T0, LogWriter, call, kinds, report, start, watcher


def _two_threads_pools(apart: float) -> LogWriter:
    """main 100's threads request-0 and request-1 each make a SubprocPool, `apart` s apart (each call 1 s long):
    sidecars 150 (workers 151, 152) and 160 (161, 162); both take their ready probe at 3 s, only 160's workers run
    the program's jobs (the pool inductor hands out since); both idle until torch's atexit at 30 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    for n, (side, thread) in enumerate(((150, "request-0"), (160, "request-1"))):
        t = 1.0 + n * apart
        w.add(t, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=n + 1, thread=thread,
              stack=[PLUGIN], caller=PLUGIN)
        start(w, t + 0.2, side, 100, "compile-sidecar", create_time=T0 + t + 0.2)
        call(w, t + 0.5, side, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, None)
        w.add(t + 1.0, 100, 1, "main", "return", call_id=n + 1, duration_s=1.0, sidecar_pid=side)
        for k in (1, 2):
            start(w, t + 1.5, side + k, side, "compile-worker")
        w.add(t + 2.0, side + 1, side, "compile-worker", "job", state="start", work_id=0,
              fn=f"{AC}:AsyncCompile._get_ready")
        w.add(t + 2.01, side + 1, side, "compile-worker", "job", state="end", work_id=0)
    for i in range(1, 6):
        w.add(4 + apart + i * 0.1, 161, 160, "compile-worker", "job", state="start", work_id=i, fn="posix:getpid")
        w.add(4 + apart + i * 0.1 + 0.01, 161, 160, "compile-worker", "job", state="end", work_id=i)
    for t in (6.0 + apart, 18.0, 29.0):
        watcher(w, t, "memory", procs=[{"pid": q, "pss": 80 << 20, "uss": 1 << 20, "threads": 2}
                                       for q in (150, 151, 152, 160, 161, 162)])
    for n, side in enumerate((150, 160)):
        call(w, 30 + n, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 10 + n, 30.5 + n, sidecar_pid=side)
        watcher(w, 30.8 + n, "tree", count=1, started=[],
                ended=[{"pid": q, "end": T0 + 30.8 + n} for q in (side, side + 1, side + 2)])
    w.add(33, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(33, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_two_threads_making_a_pool_at_once_lead_with_the_race_and_its_fix(tmp_path: Path) -> None:
    """Two threads' first compiles ask AsyncCompile.process_pool() at once (an lru_cache lets both in): the Answer
    leads with the two pools one process made at once, names the threads and the pool that ran no job of the
    program's, with its idle pool under it, and Fix first makes the pool once before the threads. Pools made one
    after the other (a shutdown, then a new pool) are no race."""
    rep = report(_two_threads_pools(0.01), tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "pools-made-at-once"]
    assert f["text"].startswith("2 threads of main 100 (request-0, request-1) each made a compile pool at once"), f
    assert "sidecar 160's (5 jobs)" in f["text"] and "sidecar 150's ran none of them" in f["text"], f["text"]
    first = rep["answer"].split("\n- ")[0]
    assert "2 threads of main 100" in first and "What follows from it:" in first, rep["answer"]
    assert "warm_pool()" in rep["answer"].split("Fix first: ")[1].split(";")[0], rep["answer"]
    (tmp_path / "apart").mkdir()
    apart = report(_two_threads_pools(5.0), tmp_path / "apart")
    assert "pools-made-at-once" not in kinds(apart)
