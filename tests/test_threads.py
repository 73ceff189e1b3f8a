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


REFUSED = ("InductorError: RuntimeError: cannot schedule new futures after interpreter shutdown\n\n"
           "Set TORCHDYNAMO_VERBOSE=1")


def _renderer(exit_at: float | None, error: str = REFUSED) -> LogWriter:
    """main 100's thread renderer makes a SubprocPool (sidecar 150) at 3 s and compiles from 5 s to 20 s, when the
    compile raises `error`; the main thread returned at exit_at (concurrent.futures' _python_exit on MainThread;
    None: never); torch's atexit shuts the pool down at 21 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    if exit_at is not None:
        w.add(exit_at, 100, 1, "main", "call", target="concurrent.futures.process:_python_exit", call_id=9,
              thread="MainThread", stack=[], caller=None)
        w.add(exit_at + 0.01, 100, 1, "main", "return", call_id=9, duration_s=0.01)
    w.add(3.0, 100, 1, "main", "call", target=f"{SP}:SubprocPool.__init__", call_id=1, thread="renderer",
          stack=[PLUGIN], caller=PLUGIN)
    start(w, 3.2, 150, 100, "compile-sidecar", create_time=T0 + 3.2)
    call(w, 3.5, 150, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, None)
    w.add(4.0, 100, 1, "main", "return", call_id=1, duration_s=1.0, sidecar_pid=150)
    for k in (1, 2):
        start(w, 4.5, 150 + k, 150, "compile-worker")
    w.add(4.6, 151, 150, "compile-worker", "job", state="start", work_id=0, fn=f"{AC}:AsyncCompile._get_ready")
    w.add(4.61, 151, 150, "compile-worker", "job", state="end", work_id=0)
    w.add(5.0, 100, 1, "main", "call", target="torch._dynamo.convert_frame:_compile", call_id=2, thread="renderer",
          stack=[PLUGIN], caller=PLUGIN)
    for t in (6.0, 12.0, 19.0):
        watcher(w, t, "memory", procs=[{"pid": q, "pss": 80 << 20, "uss": 1 << 20, "threads": 2}
                                       for q in (150, 151, 152)])
    w.add(20.0, 100, 1, "main", "return", call_id=2, duration_s=15.0, error=error)
    call(w, 21, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 3, 21.5, sidecar_pid=150)
    watcher(w, 21.8, "tree", count=1, started=[], ended=[{"pid": q, "end": T0 + 21.8} for q in (150, 151, 152)])
    w.add(22, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(22, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_compile_refused_after_the_main_thread_returned_leads_with_why(tmp_path: Path) -> None:
    """A thread compiling after the main thread returned (huggingface/diffusers#3764): concurrent.futures refuses
    new work from concurrent.futures' _python_exit on, inductor's compile thread pool included, and the compile
    raised. The Answer leads with that (the thread, when the main thread returned), the never-used pool's idle
    span under it, and Fix first joins the thread. The same error without the main thread's return before it
    (a program that shut its own executor down), or another error, is not this."""
    rep = report(_renderer(2.0), tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "compile-after-exit"]
    assert "served none of it" in f["text"] and "cannot schedule new futures" in f["text"], f["text"]
    first = rep["answer"].split("\n- ")[0]
    assert first.startswith("- Main 100's thread renderer compiled after the main thread had returned (at 2.0 s)")
    assert "What follows from it:" in first and "idle" in first, rep["answer"]
    assert rep["answer"].split("Fix first: ")[1].startswith("keep the main thread alive"), rep["answer"]
    for n, w in enumerate((_renderer(None), _renderer(2.0, error="InductorError: RuntimeError: boom"))):
        (tmp_path / str(n)).mkdir()
        assert "compile-after-exit" not in kinds(report(w, tmp_path / str(n)))
