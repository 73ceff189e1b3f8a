"""Which worker held a hung job: the worker's own job records (runtime/jobs.py) and what the hang findings say of
them (derive/held.py, findings/held.py). Crafted logs and the recording pieces in-process; the real torch
scenarios are tests/test_pool_kinds.py's fork hang and sidecar hang."""

from __future__ import annotations

import functools
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from wp_autotrace.common.targets import JOBS, TARGETS
from wp_autotrace.runtime.jobs import JobQueue, drop_get_frame, job_names, pickled_names, watch_queue
from wp_autotrace.runtime.recorder import Probes
from wp_autotrace.runtime.sink import Sink

from .logs import AC, PLUGIN, SP, T0, LogWriter, call, kinds, report, start, watcher
from .test_model import with_fork_hang, with_sidecar_hang, with_sidecar_pool, with_stuck_sidecar_job


def job(w: LogWriter, t: float, pid: int, ppid: int, state: str, work_id: int, **extra: Any) -> None:
    w.add(t, pid, ppid, "compile-worker", "job", state=state, work_id=work_id, **extra)


def test_a_fork_hang_names_the_worker_whose_job_started_and_never_ended(tmp_path: Path) -> None:
    """Worker 201 took job 0 at 2.6 s and wrote no end: it held the hung job, told with its function, since when
    and for how long (until the worker ended at 9 s); worker 202's job ended before the wait: not named. The
    pool's pending jobs as the wait began (its capture) are told per pool. Without job records: unknown."""
    w = with_fork_hang()
    w.add(2.45, 202, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7", forked=True,
          env={}, run="r1", root_pid=100)
    w.add(2.451, 202, 100, "compile-worker", "role")
    job(w, 2.46, 202, 100, "start", 5, fn="mod:quick")
    job(w, 2.47, 202, 100, "end", 5)
    job(w, 2.6, 201, 100, "start", 0, fn="__main__:job", arg="triton_poi_fused_0")
    for r in w.lines:
        if r.get("target") == f"{AC}:AsyncCompile.wait":
            r["pool_pending"] = [{"worker_pids": [201, 202], "pending": 1}, {"sidecar_pid": 999, "pending": 4}]
    rep = report(w, tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    text = " ".join(hang["text"].split())
    assert ("1 of its 2 workers held a job then: worker 201 ran __main__:job(triton_poi_fused_0) from 2.6 s and "
            "never ended it (6.4 s, until the worker ended at 9.0 s); 1 job(s) were pending in this pool as the "
            "wait began.") in text, text
    assert "202" not in text.split("held a job then")[1]
    # without the workers' records, who held it is not guessed
    rep = report(with_fork_hang(), tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    assert "Which worker held its job is not known: no worker of the pool recorded its jobs" in hang["text"]
    assert rep["pools"][0]["unended_jobs"] is None


def test_a_hang_names_the_jobs_queued_behind_it_that_no_worker_took(tmp_path: Path) -> None:
    """The wait's capture names the fork pool's newest pending jobs (work ids 0, 2, 3): job 0 is the one worker
    201 held; job 2 worker 202 took during the wait; job 3 no worker ever took: only it is told as queued behind
    (a job named by the capture is told as never taken only where no worker's job record has its work id). The
    exit join's capture of the same pool is told the same way, as the join began."""
    from .test_model import with_exit_hang

    named = [{"work_id": 0, "fn": "__main__:job", "arg": "triton_poi_fused_0"},
             {"work_id": 2, "fn": "torch.x:_worker_compile_triton", "arg": "triton_poi_fused_2"},
             {"work_id": 3, "fn": "torch.x:_worker_compile_triton", "arg": "triton_poi_fused_3"}]
    for build, tag in ((with_fork_hang, "AsyncCompile.wait"), (with_exit_hang, "_python_exit")):
        w = build()
        w.add(2.45, 202, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7", forked=True,
              env={}, run="r1", root_pid=100)
        w.add(2.451, 202, 100, "compile-worker", "role")
        job(w, 2.6, 201, 100, "start", 0, fn="__main__:job", arg="triton_poi_fused_0")
        job(w, 4.0, 202, 100, "start", 2, fn="torch.x:_worker_compile_triton", arg="triton_poi_fused_2")
        job(w, 4.1, 202, 100, "end", 2)
        for r in w.lines:
            if r.get("target", "").endswith(tag):
                r["pool_pending"] = [{"worker_pids": [201, 202], "pending": 3, "jobs": named}]
        w.lines.sort(key=lambda r: r["ts"])
        (tmp_path / tag).mkdir()
        rep = report(w, tmp_path / tag)
        kind = "fork-pool-hang" if tag == "AsyncCompile.wait" else "exit-hang"
        (hang,) = [f for f in rep["findings"] if f["kind"] == kind]
        text = " ".join(hang["text"].split())
        began = "the wait began" if kind == "fork-pool-hang" else "the exit join began"
        assert (f"3 job(s) were pending in this pool as {began}; no worker took 1 of them before it ended "
                "(queued): torch.x:_worker_compile_triton(triton_poi_fused_3)") in text, text
        assert "triton_poi_fused_2" not in text, text


def test_a_hung_sidecar_job_names_its_worker(tmp_path: Path) -> None:
    """pool-job-hang: the wait on a SubprocPool interrupted 405 s into its job (past the 300 s torch's own CI gives
    a compile job), the worker that took the job and never ended it (201, slowjob:hang, from 3.0 s), the pool's 1
    pending job; the ready job that ended before the wait is not named. torch's own timeout error is a hang at
    any length. A wait interrupted while no worker held a job is no pool-job-hang."""

    rep = report(with_stuck_sidecar_job(), tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "pool-job-hang"]
    text = " ".join(hang["text"].split())
    assert text.startswith("main 100's AsyncCompile.wait() on its compile pool (sidecar 150) was interrupted by "
                           "Ctrl-C (KeyboardInterrupt) after 405.1 s."), text
    assert ("1 of its 2 workers held a job then: worker 201 ran slowjob:hang from 3.0 s and never ended it (405.3 s, "
            "until the worker ended at 408.3 s); 1 job(s) were pending in this pool as the wait began.") in text
    assert "_get_ready" not in text and hang["pids"] == [100, 201] and hang["cost"]["hang_s"] == 405.1
    assert hang["advice"].startswith("see what worker 201 is doing while it hangs"), hang
    assert "pool-wait-interrupted" not in kinds(rep)
    (pool,) = rep["pools"]
    assert pool["unended_jobs"] == [{"worker_pid": 201, "fn": "slowjob:hang", "arg": None, "since": 3.0,
                                     "until": 408.3, "held_s": 405.3, "worker_ended": True}]
    (tmp_path / "timeout").mkdir()
    torch_says = ("RuntimeError: Inductor compile-worker future for 'k' did not complete within 5s. Override with "
                  "TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=<seconds>.")
    timed_out = report(with_sidecar_hang(error=torch_says), tmp_path / "timeout")
    assert "pool-job-hang" in kinds(timed_out) and "pool-wait-interrupted" not in kinds(timed_out)
    w = with_stuck_sidecar_job()
    w.lines = [r for r in w.lines if not (r["event"] == "job" and r["work_id"] == 1)]
    (tmp_path / "none").mkdir()
    assert not {"pool-job-hang", "pool-wait-interrupted"} & kinds(report(w, tmp_path / "none"))


def test_a_ctrl_c_a_few_seconds_into_a_job_is_not_told_as_a_hang(tmp_path: Path) -> None:
    """The same wait interrupted by Ctrl-C 5 s into its job (a first Triton compile takes seconds): nothing in the
    log shows a hang, so no pool-job-hang and no hang cost (it does not rank as one); a warning says which worker
    ran which job then and how long it had run, against the 300 s torch's own CI gives a compile job, and the
    setting that makes torch name a stuck job. Where the job's end came after the interrupt, it finished."""
    rep = report(with_sidecar_hang(), tmp_path)
    assert "pool-job-hang" not in kinds(rep)
    (f,) = [f for f in rep["findings"] if f["kind"] == "pool-wait-interrupted"]
    text = " ".join(f["text"].split())
    assert f["severity"] == "warning" and "hang_s" not in f["cost"] and f["cost"]["waited_s"] == 5.1, f
    assert text.startswith("main 100's AsyncCompile.wait() on its compile pool (sidecar 150) was interrupted by Ctrl-C "
                           "(KeyboardInterrupt) after 5.1 s; nothing in the log shows a hang: worker 201's job had run "
                           "5.0 s then, 5.3 s in all (until the worker ended at 8.3 s), under the 300 s torch's own CI "
                           "allows a compile job"), text
    assert "worker 201 ran slowjob:hang from 3.0 s" in text and "1 job(s) were pending" in text, text
    assert f["advice"].startswith("nothing to fix from this log; if a compile seems stuck again, set "
                                  "TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=300"), f["advice"]
    assert "worker 201 ran its job (slowjob:hang) from 3.0 s: nothing in the log shows a hang" in rep["answer"]
    # torch's exit then shut the pool down with the job in flight: the cut-off job is told under the interrupt,
    # and "Fix first" is not the cut-off's "wait for the jobs before shutting down" (the user stopped waiting)
    w = with_sidecar_hang()
    call(w, 8.05, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 3, 8.2, sidecar_pid=150)
    w.lines[-2].update(pending_jobs=[1], pool_running=True)
    call(w, 8.1, 150, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 1, 8.15)
    w.lines.sort(key=lambda r: r["ts"])
    (tmp_path / "cut").mkdir()
    cut = report(w, tmp_path / "cut")
    order = [f["kind"] for f in cut["findings"]]
    assert "jobs-cut-off" in order and order.index("pool-wait-interrupted") < order.index("jobs-cut-off"), order
    lines = cut["answer"].splitlines()
    assert "nothing in the log shows a hang" in lines[0] and lines[1].startswith("  - 1 job(s)"), lines
    fix = next(x for x in lines if x.startswith("- Fix first: "))
    assert "TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=300" in fix and "before shutting" not in fix, fix
    w = with_sidecar_hang()
    w.add(8.1, 201, 150, "compile-worker", "job", state="end", work_id=1)  # the job finished after the Ctrl-C
    w.lines.sort(key=lambda r: r["ts"])
    (tmp_path / "ended").mkdir()
    (f,) = [f for f in report(w, tmp_path / "ended")["findings"] if f["kind"] == "pool-wait-interrupted"]
    assert "worker 201's job ended at 8.1 s, 0.1 s after it: it was running, not hung" in f["text"], f["text"]


def test_the_worker_loops_queue_records_each_jobs_start_and_end() -> None:
    """JobQueue: a job's start as get() hands it over (its function through a partial, its first name argument),
    its end at the next get() (the loop sent the result and asks for more) or at end(); the None that stops the
    loop starts nothing; a queue's other attributes are its own."""
    class Item:
        def __init__(self, work_id: int, fn: Any, args: tuple[Any, ...]) -> None:
            self.work_id, self.fn, self.args = work_id, fn, args

    class Sink:
        def __init__(self) -> None:
            self.records: list[tuple[str, dict[str, Any]]] = []

        def emit(self, event: str, **fields: Any) -> None:
            self.records.append((event, fields))

    def compile_kernel(name: str, source: str) -> None:
        """Stands for torch's job function (its module is torch's: its first name argument is written)."""

    compile_kernel.__module__ = "torch._inductor.async_compile"
    compile_kernel.__qualname__ = "compile_kernel"
    items = [Item(3, functools.partial(compile_kernel, "a"), ("kernel_x",)), Item(4, print, ("not a name!",)),
             None]
    sink = Sink()
    q = JobQueue(type("Q", (), {"get": lambda self, block=True: items.pop(0), "size": 7})(), sink)  # type: ignore
    assert q.get(block=True).work_id == 3 and q.size == 7
    assert sink.records == [("job", {"state": "start", "work_id": 3,
                                     "fn": "torch._inductor.async_compile:compile_kernel", "arg": "a"})]
    q.get(block=True)
    q.get(block=True)  # None: the loop's stop
    q.end()
    assert [r[1]["state"] for r in sink.records] == ["start", "end", "start", "end"]
    assert sink.records[2][1] == {"state": "start", "work_id": 4, "fn": "builtins:print"}


def test_only_a_loop_started_with_torchs_compile_initializer_is_watched() -> None:
    """A worker loop's queue is watched (its jobs recorded) only where its initializer is torch's compile
    initializer, through partials; a program's own pool (no initializer, its own, another torch function) is left
    alone: its jobs may number millions and hold its secrets."""
    def _async_compile_initializer(orig_ppid: int) -> None:
        """Stands for torch's (its module is torch's)."""

    def manual_seed(seed: int) -> None:
        """Another torch function: not the compile initializer."""

    for fn in (_async_compile_initializer, manual_seed):
        fn.__module__ = "torch._inductor.compile_worker.utils"
    queue = type("Q", (), {"get": lambda self: None})()
    torch_init = functools.partial(_async_compile_initializer, 1)
    for init, watched in ((torch_init, True), (functools.partial(torch_init), True), (None, False),
                          (print, False), (functools.partial(manual_seed, 0), False)):
        found, args = watch_queue(None, (queue, "results", init, ()))  # type: ignore[arg-type]
        assert (found is not None) == watched, init
        assert (args[0] is found) if watched else (args[0] is queue)


def test_an_autotune_pool_workers_loop_is_watched_in_the_role_its_pool_handed_it(tmp_path: Path) -> None:
    """AutotuneProcessPool's worker runs concurrent.futures' loop with no initializer (a plain spawn executor): the
    table's row watches it in the autotune-worker role warm_up/submit handed it (loop_roles), each job's start and
    end written, and the worker keeps its role (no compile-worker role record); the same loop with no initializer
    in a process of another role (a program's own pool's worker) writes nothing."""
    (row,) = [t for t in TARGETS if t.mode == JOBS]
    Item = type("Item", (), {"__init__": lambda self, i: setattr(self, "work_id", i), "fn": print, "args": ()})

    def loop(call_queue: Any, result_queue: Any, initializer: Any, initargs: Any, max_tasks: Any = None) -> None:
        """Stands for concurrent.futures.process._process_worker: runs jobs until the None that stops it."""
        while call_queue.get(block=True) is not None:
            result_queue.append("done")

    for role, watched in (("autotune-worker", True), ("child", False)):
        log = tmp_path / f"{role}.jsonl"
        sink = Sink(str(log), "testhost", role)
        wrap = Probes(sink, stack_limit=8, guard=False, notice=lambda info: None).make_wrapper(row, row.label)
        items, results = [Item(0), Item(1), None], []  # type: ignore[call-arg]
        queue = type("Q", (), {"items": items, "get": lambda self, block=True: self.items.pop(0)})()
        wrap(loop, False)(queue, results, None, ())
        recs = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        jobs = [(r["state"], r["work_id"]) for r in recs if r["event"] == "job"]
        assert results == ["done", "done"], role
        assert jobs == ([("start", 0), ("end", 0), ("start", 1), ("end", 1)] if watched else []), (role, jobs)
        assert not [r for r in recs if r["event"] == "role"] and sink.role == role, recs


def test_a_users_own_pool_job_writes_its_function_never_its_arguments() -> None:
    """A user's ProcessPoolExecutor runs the same worker loop: its job's first string (a token here) is never
    written, only torch's jobs' (a kernel's name); nothing of a job's objects is asked but a partial's fields (a
    user object whose __getattr__ does work, or answers itself for ever, is never asked), a callable object
    named by its class."""
    def fetch(token: str) -> None:
        """A user's job."""

    assert job_names(fetch, ("ghp_abcdEFGH1234secret",)) == (f"{__name__}:{fetch.__qualname__}", None)
    assert job_names(functools.partial(fetch, "AKIAIOSFODNN7EXAMPLE"), ())[1] is None
    asked: list[str] = []

    class Lazy:
        """A user's object that loads what it is asked for (and answers itself for ever)."""

        def __getattr__(self, name: str) -> Any:
            asked.append(name)
            return self

        def __iter__(self) -> Any:
            return iter(())

        def __call__(self) -> None:
            pass

    fetch.__module__ = "torch._inductor.fake"  # even torch's own job: an object argument is not asked
    assert job_names(fetch, (Lazy(), "kernel_a"))[1] == "kernel_a"
    assert job_names(Lazy(), ()) == (f"{__name__}:{Lazy.__qualname__}", None)  # returns: no loop through it
    assert asked == []


def test_a_job_torch_214s_autotune_pool_wraps_is_named_by_the_function_it_carries() -> None:
    """torch 2.14's AutotuneProcessPool.submit hands every job (warm_up's too) as _run_with_subprocess_env(fn, env,
    *args): the job is fn, with its first name argument where fn is torch's; the env dict is never read."""
    def _run_with_subprocess_env(fn: Any, extra_env: Any, *args: Any) -> None:
        """Stands for torch 2.14's wrapper (its module is torch's)."""

    def benchmark(name: str) -> None:
        """Stands for a torch job function."""

    _run_with_subprocess_env.__module__ = benchmark.__module__ = "torch._inductor.autotune_process"
    _run_with_subprocess_env.__qualname__, benchmark.__qualname__ = "_run_with_subprocess_env", "benchmark"
    env = {"TOKEN_KERNEL": "secret_value"}
    assert job_names(_run_with_subprocess_env, (benchmark, env, "kernel_a")) == (
        "torch._inductor.autotune_process:benchmark", "kernel_a")
    assert job_names(_run_with_subprocess_env, (sum, env, "a_name")) == ("builtins:sum", None)
    assert job_names(_run_with_subprocess_env, ()) == ("torch._inductor.autotune_process:_run_with_subprocess_env",
                                                       None)


def test_a_sidecar_jobs_names_come_from_its_pickle_without_unpickling() -> None:
    """SubprocMain.do_job's data is the pickled job: its function and a kernel's name are read from the bytes,
    as torch's SubprocPickler writes them (pickle protocol 5; a Triton job's shape)."""
    inner = functools.partial(os.path.join, "triton_poi_fused_add_0", "import triton\n" * 3)
    data = pickle.dumps(functools.partial(os.path.normpath, inner, {}, {}), protocol=5)
    # pickle names a function by its module and qualname: 3.13's os.path.normpath is posix:_path_normpath (C)
    normpath = f"{os.path.normpath.__module__}:{os.path.normpath.__qualname__}"
    assert pickled_names(data) == (normpath, "triton_poi_fused_add_0")
    do_job = type("SubprocMain", (), {})
    fn = functools.partial(lambda pickler, data: None, object(), data)
    fn.func.__qualname__ = "SubprocMain.do_job"  # type: ignore[attr-defined]
    assert job_names(fn, ())[0] == normpath and do_job
    assert pickled_names(b"\x80\x05garbage\x8c\xff") == (None, None)


def test_a_ctrl_c_in_the_queues_wait_prints_as_untraced() -> None:
    """multiprocessing prints a worker's KeyboardInterrupt with its traceback: JobQueue.get's frame is taken out,
    so it reads as it would untraced."""
    def blocked(block: bool = True) -> None:
        raise KeyboardInterrupt

    q = JobQueue(type("Q", (), {"get": staticmethod(blocked)})(), None)  # type: ignore[arg-type]
    try:
        q.get(block=True)
    except KeyboardInterrupt as exc:
        drop_get_frame(exc)
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
    assert "get" not in frames and frames[-1] == "blocked", frames
    assert sys.version_info >= (3, 9)


def test_a_slow_ready_wait_says_when_a_worker_took_the_ready_probe(tmp_path: Path) -> None:
    """pool-ready-wait: the sidecar's worker took the pool's first job (its ready probe) at 59.5 s, 58.5 s into the
    61 s wait: the wait was the workers' start, not the job. Without job records nothing is said of it."""
    from .test_model import _slow_ready

    w = _slow_ready(61.0)
    w.add(58.0, 201, 200, "compile-worker", "process_start", argv=["python", "__main__.py"], python="3.11.7",
          forked=True, env={}, run="r1", root_pid=100)
    w.add(59.5, 201, 200, "compile-worker", "job", state="start", work_id=0, fn=f"{AC}:AsyncCompile._get_ready")
    w.add(59.6, 201, 200, "compile-worker", "job", state="end", work_id=0)
    (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "pool-ready-wait"]
    assert "; worker 201 took its ready probe (the pool's first job) at 59.5 s, 58.5 s in; " in f["text"], f["text"]
    (f,) = [f for f in report(_slow_ready(61.0), tmp_path)["findings"] if f["kind"] == "pool-ready-wait"]
    assert "ready probe" not in f["text"]


def test_a_main_killed_in_its_wait_tells_the_held_job_first(tmp_path: Path) -> None:
    """The main killed inside its wait (no return, no exit): the held job leads the Answer, naming the worker, and
    the wait that never returned is told under it, not as a problem of its own."""
    w = with_sidecar_hang()
    w.lines = [r for r in w.lines if r["event"] != "process_exit"
               and not (r["event"] == "return" and r["pid"] == 100 and r.get("call_id") == 2)]
    for r in w.lines:
        if r["event"] == "leftover":
            r["how"] = "root-killed"
    lines = report(w, tmp_path)["answer"].splitlines()
    assert lines[0].startswith("- main 100's AsyncCompile.wait() on its compile pool never returned (5.7 s, until "
                               "the process ended): worker 201 held its job (slowjob:hang) from 3.0 s"), lines
    assert lines[1].startswith("  - 1 traced call(s) never returned"), lines


def test_the_chrome_trace_shows_each_workers_jobs_and_the_one_it_held(tmp_path: Path) -> None:
    """Each job is a slice on its worker's "jobs" track: the ready probe with its length; the hung job without an
    end runs to the worker's end (8.3 s), marked unfinished."""
    from wp_autotrace.analysis.export.chrome import to_chrome_trace
    from wp_autotrace.analysis.read.logread import read_logs

    from .logs import check_chrome_trace

    trace = to_chrome_trace(read_logs([str(with_sidecar_hang().write(tmp_path / "log.jsonl"))]))
    check_chrome_trace(trace)
    jobs = {e["name"]: e for e in trace["traceEvents"] if e.get("cat") == "job"}
    assert set(jobs) == {f"{AC}:AsyncCompile._get_ready", "slowjob:hang"}
    assert jobs[f"{AC}:AsyncCompile._get_ready"]["dur"] == 450000.0
    hung = jobs["slowjob:hang"]
    assert hung["dur"] == 5300000.0 and hung["args"]["unfinished"] and hung["args"]["work_id"] == 1


def test_a_hang_at_exit_in_the_programs_own_pool_is_not_told_as_the_compile_pools(tmp_path: Path) -> None:
    """concurrent.futures' exit join waits on every executor of the process: where the job that never ended is
    one a worker of the program's own ProcessPoolExecutor held (its job records), that pool is named, with the
    worker, not the compile pool beside it (a SubprocPool, whose executor is its sidecar's, with no job open),
    and no 'job still queued' is said of a pool that held none."""
    w = with_sidecar_pool(workers=(201,))
    job(w, 2.5, 201, 150, "start", 0, fn=f"{AC}:AsyncCompile._get_ready")
    job(w, 2.6, 201, 150, "end", 0)
    w.add(3.0, 301, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7", forked=True,
          env={}, run="r1", root_pid=100)
    w.add(3.2, 301, 100, "child", "job", state="start", work_id=0, fn="app:stuck")
    call(w, 6.1, 100, 1, "main", "concurrent.futures.process:_python_exit", 4, None)
    watcher(w, 9, "tree", count=0, started=[], ended=[{"pid": p, "end": T0 + 9} for p in (100, 150, 201, 301)])
    watcher(w, 9.2, "leftover", how="root-killed", count=0, pids=[], procs=[])
    w.lines.sort(key=lambda r: r["ts"])
    (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "exit-hang"]
    text = " ".join(f["text"].split())
    assert "a job of a process pool the program made itself (not a compile pool) had not ended" in text, text
    assert "Worker 301 ran app:stuck from 3.2 s and never ended it (5.8 s, until the worker ended at 9.0 s)" in text
    assert "plugin" not in text and "queued" not in text, text


def _spawn_pool_exit(held: bool = False, own_child: bool = False) -> LogWriter:
    """main 100 made a spawn pool (workers 201, 202) beside no thread; 201 ran its three jobs by 3.1 s (202 none);
    at exit concurrent.futures' join ran 6.0 -> 13.9 s, its capture reading the pool with 0 pending, the workers
    ending at 13.8 s: their own exit (torch loaded, a loaded box) took the join's 7.9 s. held: 201 also took a
    job at 5.0 s and never ended it. own_child: a child of main in no compile pool (a program's own pool's
    worker, which records no jobs) was alive during the join."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    call(w, 2, 100, 1, "main", f"{AC}:AsyncCompile.process_pool", 1, 2.003)
    w.add(2.001, 100, 1, "main", "call", call_id=2, parent_call=1, thread="MainThread", stack=[PLUGIN],
          caller=PLUGIN, target="torch._inductor.compile_worker.tracked_process_pool:TrackedProcessPoolExecutor"
          ".__init__", threads=1)
    w.add(2.002, 100, 1, "main", "return", call_id=2, duration_s=0.001)
    for pid in (201, 202):
        w.add(2.1, pid, 100, "child", "process_start", argv=["python", "-c", "from multiprocessing.spawn ..."],
              python="3.11.7", forked=False, env={}, run="r1", root_pid=100)
        w.add(2.5, pid, 100, "compile-worker", "role")
    for n in range(3):
        job(w, 2.6 + n * 0.2, 201, 100, "start", n, fn="time:sleep")
        job(w, 2.7 + n * 0.2, 201, 100, "end", n)
    if held:
        job(w, 5.0, 201, 100, "start", 3, fn="__main__:job")
    if own_child:
        w.add(3.5, 301, 100, "child", "process_start", argv=["python", "main.py"], python="3.11.7", forked=True,
              env={}, run="r1", root_pid=100)
    call(w, 6.0, 100, 1, "main", "concurrent.futures.process:_python_exit", 4, 13.9)
    w.lines[-2]["pool_pending"] = [{"worker_pids": [201, 202], "pending": 0}]
    watcher(w, 13.8, "tree", count=1, started=[], ended=[{"pid": p, "end": T0 + 13.8} for p in (201, 202, 301)])
    w.add(14.0, 100, 1, "main", "process_exit", how="exit", code=0)
    watcher(w, 14.1, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 14.1}])
    watcher(w, 14.2, "leftover", how="root-exit", count=0, pids=[], procs=[])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_an_exit_join_that_waited_on_no_job_is_no_hang(tmp_path: Path) -> None:
    """A spawn pool's exit join took 7.9 s (a real run at load 20) while its capture said 0 jobs pending and no
    worker held a job: the workers' own exit took it, and no hang is told (it read "a job ... had not ended ...
    None of its 2 workers held an unfinished job then (a job still queued); 0 job(s) were pending"). With a job
    held, or a child of unknown jobs beside the pool's workers, the hang is told as before."""
    quiet = report(_spawn_pool_exit(), tmp_path)
    assert "exit-hang" not in {f["kind"] for f in quiet["findings"]}, quiet["answer"]
    assert "concurrent.futures' join" not in quiet["answer"], quiet["answer"]
    for w in (_spawn_pool_exit(held=True), _spawn_pool_exit(own_child=True)):
        (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "exit-hang"]
        assert f["cost"]["hang_s"] == 7.9, f


def _autotune_exit(left: float | None = 6.3, held: bool = False) -> LogWriter:
    """main 100 made torch's AutotuneProcessPool (its own ProcessPoolExecutor: one spawned worker 201, beside
    multiprocessing's resource tracker 150); at exit concurrent.futures' join ran 6.0 -> 35.8 s, its capture
    finding no compile pool (`pool_pending: []`). left: when 201 wrote its process_exit (None: never); it ended
    at 35.8 s (a real run at load 40: 0.3 s into a 29.8 s join, torch's teardown the rest). held: 201 took a job
    at 5.0 s and never ended it."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    start(w, 2.0, 150, 100, "resource-tracker")
    start(w, 2.1, 201, 100, "autotune-worker")
    if held:
        job(w, 5.0, 201, 100, "start", 0, fn="__main__:job")
    call(w, 6.0, 100, 1, "main", "concurrent.futures.process:_python_exit", 4, 35.8)
    w.lines[-2]["pool_pending"] = []
    if left is not None:
        w.add(left, 201, 100, "autotune-worker", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 35.8, "tree", count=2, started=[], ended=[{"pid": 201, "end": T0 + 35.8}])
    w.add(36.0, 100, 1, "main", "process_exit", how="exit", code=0)
    watcher(w, 36.1, "tree", count=0, started=[], ended=[{"pid": p, "end": T0 + 36.1} for p in (100, 150)])
    watcher(w, 36.2, "leftover", how="root-exit", count=0, pids=[], procs=[])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_an_exit_join_whose_workers_left_their_loop_at_once_is_no_hang(tmp_path: Path) -> None:
    """An exit join whose every child wrote its process_exit (left its worker loop) early in the join, holding no
    job, waited on their teardown, not a job: no hang is told (it read "At exit main waited 29.8 s in
    concurrent.futures' join ...: a job had not ended"). A worker that held a job, never wrote its exit, or left
    its loop only HANG_S or more into the join (a job may have kept it) keeps the hang told."""
    quiet = report(_autotune_exit(), tmp_path)
    assert "exit-hang" not in kinds(quiet), quiet["answer"]
    assert "concurrent.futures' join" not in quiet["answer"], quiet["answer"]
    for w in (_autotune_exit(left=None), _autotune_exit(held=True), _autotune_exit(left=20.0)):
        (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "exit-hang"]
        assert f["cost"]["hang_s"] == 29.8, f


def test_a_job_whose_end_record_was_lost_is_not_told_as_held_for_ever(tmp_path: Path) -> None:
    """A worker runs one job at a time: its next start proves the job before it ended by then, though that job's
    end record was lost (a full disk drops records); only the job left open at the end is told as never ended."""
    w = with_fork_hang()
    job(w, 2.55, 201, 100, "start", 0, fn="mod:first")  # its end was never written
    job(w, 2.6, 201, 100, "start", 1, fn="mod:second")
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    assert [j["fn"] for j in rep["pools"][0]["unended_jobs"]] == ["mod:second"]
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    assert "mod:first" not in hang["text"] and "worker 201 ran mod:second from 2.6 s" in hang["text"], hang["text"]


def _slow_ready_then_jobs(jobs: list[tuple[float, float]], wait: tuple[float, float] | None = None) -> LogWriter:
    """_slow_ready's 60 s wait (4 threads running: 0.5 of a core), its worker 201 taking the ready probe at 59.5 s,
    then these jobs (start, end) after the pool was ready at 61 s; wait: the main's AsyncCompile.wait on them
    (call, return), captured with 30 jobs pending."""
    from .test_model import _slow_ready

    w = _slow_ready(61.0, idle_s=20.0)
    w.add(58.0, 201, 200, "compile-worker", "process_start", argv=["python", "__main__.py"], python="3.11.7",
          forked=True, env={}, run="r1", root_pid=100)
    for i, (a, b) in enumerate([(59.5, 59.6), *jobs]):
        w.add(a, 201, 200, "compile-worker", "job", state="start", work_id=i, fn=f"{AC}:AsyncCompile._get_ready")
        w.add(b, 201, 200, "compile-worker", "job", state="end", work_id=i)
    if wait is not None:
        w.add(wait[0], 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait", call_id=9, thread="MainThread",
              stack=[], caller=None, pool_jobs=30)
        w.add(wait[1], 100, 1, "main", "return", call_id=9, duration_s=wait[1] - wait[0])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_the_results_after_a_slow_pool_start_are_told_with_the_seconds_the_jobs_ran(tmp_path: Path) -> None:
    """collector_threads' second figure (30 results in 2.2 s loaded, 9.7 s on the first run, 0.1 s without the
    threads): after the ready wait, the pool's 30 jobs took 2.2 s from the first one's start to the last one's end
    while its workers held a job for 6 ms of it (their job records): the time went outside the jobs, and the
    Answer tells both figures. The same 2.2 s run by the jobs themselves (3 jobs of 0.7 s) is told as slow
    compiles; a main's AsyncCompile.wait on the jobs gives the wait's own seconds; a 0.5 s stretch (the quiet
    control's order) is not told."""
    quick = [(61.2 + i * 2.2 / 29, 61.2 + i * 2.2 / 29 + 0.0002) for i in range(30)]
    rep = report(_slow_ready_then_jobs(quick), tmp_path)
    (f,) = [f for f in rep["findings"] if f["kind"] == "pool-ready-wait"]
    assert ("; then its pool's 30 jobs took 2.2 s (61.2 s -> 63.4 s, the first job start to the last job end), its "
            "workers running jobs for 6 ms of it (the union of their job records): the rest went outside the jobs"
            ) in f["text"], f["text"]
    assert rep["answer"].startswith("- Main 100 waited 60.0 s (1.0 s -> 61.0 s) for its new compile pool to become "
                                    "ready while it ran 4 threads (ps count at 1.5 s); then its pool's 30 jobs took "
                                    "2.2 s (61.2 s -> 63.4 s), its workers running jobs for 6 ms of it."), rep["answer"]
    (tmp_path / "slow").mkdir()
    slow = [(61.2, 61.9), (61.95, 62.65), (62.7, 63.4)]
    (f,) = [f for f in report(_slow_ready_then_jobs(slow), tmp_path / "slow")["findings"]
            if f["kind"] == "pool-ready-wait"]
    assert ("its pool's 3 jobs took 2.2 s (61.2 s -> 63.4 s, the first job start to the last job end), its workers "
            "running jobs for 2.10 s of it (the union of their job records): the jobs' own run time: slow compiles, "
            "not the pool") in f["text"], f["text"]
    (tmp_path / "waited").mkdir()
    (f,) = [f for f in report(_slow_ready_then_jobs(quick, wait=(61.1, 63.6)), tmp_path / "waited")["findings"]
            if f["kind"] == "pool-ready-wait"]
    assert ("; then it waited 2.5 s in AsyncCompile.wait on its pool's 30 jobs (61.1 s -> 63.6 s), its workers "
            "running jobs for 6 ms of it (the union of their job records): the rest went outside") in f["text"]
    (tmp_path / "quiet").mkdir()
    brief = [(61.2 + i * 0.5 / 29, 61.2 + i * 0.5 / 29 + 0.0002) for i in range(30)]
    (f,) = [f for f in report(_slow_ready_then_jobs(brief), tmp_path / "quiet")["findings"]
            if f["kind"] == "pool-ready-wait"]
    assert "then its pool" not in f["text"] and "jobs for" not in f["text"], f["text"]


def sidecar_exit_hang(captured: bool = True) -> LogWriter:
    """main 100's SubprocPool (sidecar 150, workers 201/202): 201 took slowjob:hang at 3.0 s and never ended it; 202
    ran job 2 from 3.1 s to 3.2 s. The sidecar quiesced its pool at 4.0 s (torch 2.13: shutdown(wait=False), the
    workers left to finish); main was killed at 5.0 s, the sidecar read the end of its pipe and shut down (its pool
    already handed off: nothing terminated), and its exit join (_python_exit) began at 5.1 s, captured
    (captured=True) with 2 jobs pending: the held one and job 3, which no worker took. Torch's watchdog ended the
    sidecar at 65.1 s, its workers at 66 s."""
    w = with_sidecar_pool()
    job(w, 3.0, 201, 150, "start", 1, fn="slowjob:hang")
    job(w, 3.1, 202, 150, "start", 2, fn="slowjob:quick")
    job(w, 3.2, 202, 150, "end", 2)
    call(w, 1.3, 150, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, 5.06)
    call(w, 4.0, 150, 100, "compile-sidecar", f"{SP}:SubprocMain._quiesce", 2, 4.01)
    watcher(w, 5.0, "tree", count=3, started=[], ended=[{"pid": 100, "end": T0 + 5.0}])
    call(w, 5.05, 150, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 3, 5.055)
    call(w, 5.1, 150, 100, "compile-sidecar", "concurrent.futures.process:_python_exit", 4, None)
    if captured:
        w.lines[-1]["pool_pending"] = [{"worker_pids": [201, 202], "pending": 2, "jobs": [
            {"work_id": 1, "fn": "slowjob:hang"}, {"work_id": 3, "fn": "slowjob:other"}]}]
    watcher(w, 65.1, "tree", count=2, started=[], ended=[{"pid": 150, "end": T0 + 65.1}])
    watcher(w, 66.0, "tree", count=0, started=[], ended=[{"pid": p, "end": T0 + 66.0} for p in (201, 202)])
    watcher(w, 66.1, "leftover", how="root-killed", count=0, pids=[], procs=[])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_sidecars_own_exit_hang_names_its_pending_jobs_and_who_held_them(tmp_path: Path) -> None:
    """A sidecar blocked at exit in concurrent.futures' join of its workers (its pool quiesced while a job ran, whose
    job never ends): the exit hang names the pool it serves, its jobs pending as the join began (the sidecar's own
    capture), which worker held which job since when, and the one no worker took; its advice is the held job's.
    Without the capture, how many were pending is not known, and said so; which worker held the job still comes
    from the workers' records."""
    rep = report(sidecar_exit_hang(), tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "exit-hang"]
    text = " ".join(hang["text"].split())
    assert text.startswith("At exit compile-sidecar 150 waited 60.0 s in concurrent.futures' join of its process "
                           "pool's workers, until it ended inside it: a job of the compile pool it serves, made by "
                           "main 100 at /site/plugin/_inductor/__init__.py:5 (<module>), had not ended"), text
    assert ("1 of its 2 workers held a job then: worker 201 ran slowjob:hang from 3.0 s and never ended it (63.0 s, "
            "until the worker ended at 66.0 s); 2 job(s) were pending in this pool as the exit join began; no worker "
            "took 1 of them before it ended (queued): slowjob:other.") in text, text
    assert "slowjob:quick" not in text
    # the program cannot end a sidecar's workers at its exit: the advice is the held job's, naming its worker
    assert hang["advice"].startswith("see what worker 201 is doing while it hangs"), hang["advice"]
    (tmp_path / "uncaptured").mkdir()
    rep = report(sidecar_exit_hang(captured=False), tmp_path / "uncaptured")
    (hang,) = [f for f in rep["findings"] if f["kind"] == "exit-hang"]
    text = " ".join(hang["text"].split())
    assert ("worker 201 ran slowjob:hang from 3.0 s and never ended it (63.0 s, until the worker ended at 66.0 s); "
            "how many jobs were pending in this pool as the exit join began is not known.") in text, text


def exit_shutdown(w: LogWriter, at: float, back: tuple[float, float], fn: str, error: str | None = None) -> None:
    """Main 100's exit at `at`: torch's atexit shutdown_compile_workers, inside it SubprocPool.shutdown with job 1
    pending, returning at back's times (with error, where the wait raised); sidecar 150's stop 0.01 s later and its
    exit join (concurrent.futures' _python_exit, capturing job 1 running fn in workers 201/202) from at + 0.03."""
    calls = ((10, f"{AC}:shutdown_compile_workers", back[0]), (11, f"{SP}:SubprocPool.shutdown", back[1]))
    for cid, target, end in calls:
        w.add(at, 100, 1, "main", "call", target=target, call_id=cid, thread="MainThread", stack=[], caller=None,
              **({"parent_call": 10, "pending_jobs": [1]} if cid == 11 else {}))
        w.add(end, 100, 1, "main", "return", call_id=cid, duration_s=end - at,
              **({"error": error} if error is not None else {}), **({"sidecar_pid": 150} if cid == 11 else {}))
    call(w, round(at + 0.01, 3), 150, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 3, round(at + 0.015, 3))
    w.add(round(at + 0.03, 3), 150, 100, "compile-sidecar", "call", target="concurrent.futures.process:_python_exit",
          call_id=4, thread="MainThread", stack=[], caller=None,
          pool_pending=[{"worker_pids": [201, 202], "pending": 1, "jobs": [{"work_id": 1, "fn": fn}]}])


def quiesced_job_at_exit() -> LogWriter:
    """torch 2.13; main 100's SubprocPool (sidecar 150, workers 201/202): 201 took slowjob:held at 3.0 s; the pool
    quiesced at 4.0 s (the executor handed off, its job running on); main's exit at 4.1 s: torch's atexit
    shutdown_compile_workers (no user frame) asked the sidecar to stop with that job pending; the sidecar's stop
    found no pool to end and its exit join (captured: 1 pending) waited until 201 ended the job at 10.0 s and the
    workers exited; main's shutdown returned at 10.4 s."""
    w = with_sidecar_pool()
    w.add(0.5, 100, 1, "main", "config", settings={"compile_threads": 2}, torch_version="2.13.0+cpu")
    job(w, 3.0, 201, 150, "start", 1, fn="slowjob:held")
    call(w, 1.3, 150, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, 4.12)
    call(w, 4.0, 150, 100, "compile-sidecar", f"{SP}:SubprocMain._quiesce", 2, 4.01)
    exit_shutdown(w, 4.1, (10.4, 10.39), "slowjob:held")
    job(w, 10.0, 201, 150, "end", 1)
    for pid in (201, 202):
        w.add(10.05, pid, 150, "compile-worker", "process_exit", how="os._exit", counts={}, dropped=0)
    w.add(10.1, 150, 100, "compile-sidecar", "return", call_id=4, duration_s=5.97)
    watcher(w, 10.1, "tree", count=2, started=[], ended=[{"pid": p, "end": T0 + 10.08} for p in (201, 202)])
    w.add(10.2, 150, 100, "compile-sidecar", "process_exit", how="exit", code=0, counts={}, dropped=0)
    watcher(w, 10.35, "tree", count=1, started=[], ended=[{"pid": 150, "end": T0 + 10.3}])
    w.add(10.5, 100, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0)
    watcher(w, 10.6, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 10.6}])
    watcher(w, 10.7, "leftover", how="root-exit", count=0, pids=[], procs=[])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_job_that_ran_on_past_torchs_exit_shutdown_is_waited_for_not_cut_off(tmp_path: Path) -> None:
    """torch 2.13's sidecar stops its workers at once, but a job of a pool it had quiesced runs on, and its worker
    ended it after the request (its end record): that job was not cut off. The sidecar's exit join on that job is
    the cause and leads the Answer, the main's exit-time wait on the sidecar told under it (one cause, its symptom:
    not two bullets), the fix the job's; the join names the job it waited for (held as the join began, ended as it
    returned), never "None of its workers held an unfinished job then (a job still queued)"."""
    rep = report(quiesced_job_at_exit(), tmp_path)
    assert "jobs-cut-off" not in kinds(rep), rep["answer"]
    (pool,) = rep["pools"]
    assert not pool["jobs_cut_off"], pool
    assert [f["kind"] for f in rep["findings"][:2]] == ["exit-hang", "slow-exit-wait"], rep["answer"]
    assert rep["answer"].startswith(
        "- Sidecar 150's own exit waited 6.0 s for a job still running in its pool (worker 201 ran slowjob:held from "
        "3.0 s and ended it at 10.0 s). What follows from it:\n  - The main process waited 6.3 s in "
        "shutdown_compile_workers at exit.\n"), rep["answer"]
    assert "Fix first: a job still running in the pool at exit keeps it" in rep["answer"], rep["answer"]
    # the main's wait says what it waited for in full (its sidecar's own exit, on that job), its advice the job's
    slow = rep["findings"][1]
    assert "at exit: its sidecar 150's own exit waited 6.0 s for a job still running in its pool" in slow["text"]
    assert slow["advice"].startswith("a job still running in the pool at exit keeps it"), slow["advice"]
    (hang,) = [f for f in rep["findings"] if f["kind"] == "exit-hang"]
    assert hang["advice"] == slow["advice"], hang["advice"]
    text = " ".join(hang["text"].split())
    assert "1 of its 2 workers held a job then: worker 201 ran slowjob:held from 3.0 s and ended it at 10.0 s " \
           "(7.0 s); 1 job(s) were pending in this pool as the exit join began" in text, text
    assert "a job still queued" not in text


def test_a_job_a_quiesce_left_running_at_exit_is_told_with_the_quiesce_and_its_fix(tmp_path: Path) -> None:
    """The same exit wait, where the creator's own record shows who quiesced the pool while the job ran (torch's
    SubprocPool.quiesce at 4.0 s). Its quiesce timer (a compile longer than quiesce_async_compile_time, whose wait a
    CI timeout gave up): the cause names the timer, and the fix is the quiesce's (TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE
    _POOL=0, or a longer timer), not "wait for the pool's jobs", which the program did until its timeout; a job that
    never ends is no job cut off by the stop (its worker ran on). The program's own quiesce: the fix is to quiesce
    after the jobs. A quiesce before the job began (its job then went to a new, live pool) or after it ended is not
    its cause."""
    timer = {"file": "/usr/lib/python3.11/threading.py", "line": 1002, "func": "_bootstrap"}
    user = {"file": "/app/serve.py", "line": 12, "func": "warmup"}
    for name, thread, caller, at in (("timer", "subproc_worker_timer", None, 4.0), ("user", "MainThread", user, 4.0),
                                     ("never", "subproc_worker_timer", None, 4.0),
                                     ("never-before", "subproc_worker_timer", None, 2.5),
                                     ("before", "subproc_worker_timer", None, 2.5),
                                     ("after", "subproc_worker_timer", None, 10.2)):
        w = quiesced_job_at_exit()
        w.lines[next(i for i, r in enumerate(w.lines) if r["event"] == "return" and r["pid"] == 100)][
            "quiesce_after_s"] = 60
        if name.startswith("never"):  # the job never ends: its worker ran it until it exited
            w.lines = [r for r in w.lines if not (r["event"] == "job" and r["state"] == "end")]
        w.add(at, 100, 1, "main", "call", target=f"{SP}:SubprocPool.quiesce", call_id=30, thread=thread,
              stack=[caller or timer], caller=caller)
        w.add(at + 0.001, 100, 1, "main", "return", call_id=30, duration_s=0.001)
        w.lines.sort(key=lambda r: r["ts"])
        (tmp_path / name).mkdir()
        rep = report(w, tmp_path / name)
        hang = next(f for f in rep["findings"] if f["kind"] == "exit-hang")
        slow = next(f for f in rep["findings"] if f["kind"] == "slow-exit-wait")
        # not cut off by the stop where a quiesce had handed its executor off; a live executor's job is
        assert ("jobs-cut-off" in kinds(rep)) == (name == "never-before"), (name, rep["answer"])
        if name == "never-before":
            continue
        if name == "never":  # the quiesce is its exit's cause too: the same advice, not "find why the job hangs"
            assert hang["advice"].startswith("torch's exit stops a live pool's workers at once"), hang["advice"]
            continue
        assert [f["kind"] for f in rep["findings"][:2]] == ["exit-hang", "slow-exit-wait"], rep["answer"]
        assert hang["advice"] == slow["advice"], (hang["advice"], slow["advice"])
        said = " ".join(rep["answer"].split())
        if name in ("before", "after"):
            assert "had quiesced" not in said and hang["advice"].startswith("a job still running in the pool"), said
            continue
        by = "torch's quiesce timer" if name == "timer" else "your code at /app/serve.py:12 (warmup)"
        assert said.startswith("- Sidecar 150's own exit waited 6.0 s for a job still running in its pool (worker 201 "
                               f"ran slowjob:held from 3.0 s and ended it at 10.0 s), a pool {by} had quiesced at "
                               "4.0 s while the job ran. What follows from it:"), said
        assert "its sidecar 150's own exit waited 6.0 s" in " ".join(slow["text"].split()), slow["text"]
        if name == "timer":
            assert "set TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL=0" in hang["advice"], hang["advice"]
            assert "quiesce_async_compile_time (60 s for this pool)" in hang["advice"], hang["advice"]
        else:
            assert hang["advice"].startswith("quiesce the pool only once its jobs have ended"), hang["advice"]
        assert "wait for the pool's jobs" not in hang["advice"], hang["advice"]


def stuck_job_under_a_quiesce(ended: float | None = None) -> LogWriter:
    """pytorch#162199's shape on torch 2.13: main 100's wait (from 2.9 s) on worker 201's job (from 3.0 s, never
    ended) gave up at 19.0 s on torch's compile wait timeout; the quiesce timer had quiesced the pool at 12.0 s; at
    exit torch's shutdown (19.1 s) waited its 300 s for sidecar 150, whose own exit join (19.13 s) waited on that
    job, and raised TimeoutExpired; main exited at 319.3 s; torch's parent watchdog ended the sidecar at 379.0 s,
    its workers at 380.0 s. ended: the job's end instead (a long compile, not a hung one): the sidecar's exit join
    returns then, and the main's shutdown 0.3 s later, its exit right after."""
    w = with_sidecar_pool()
    w.add(0.5, 100, 1, "main", "config", settings={"compile_threads": 2}, torch_version="2.13.0+cpu")
    w.lines[next(i for i, r in enumerate(w.lines) if r["event"] == "return" and r["pid"] == 100)][
        "quiesce_after_s"] = 60
    call(w, 1.3, 150, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, 19.12)
    job(w, 3.0, 201, 150, "start", 1, fn="slowjob:hang")
    call(w, 2.9, 100, 1, "main", f"{AC}:AsyncCompile.wait", 2, None)
    w.add(19.0, 100, 1, "main", "return", call_id=2, duration_s=16.1, error="RuntimeError: Inductor compile-worker "
          "future for 'triton_red_fused_2' did not complete within 16s. Override with "
          "TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=<seconds>.")
    w.add(12.0, 100, 1, "main", "call", target=f"{SP}:SubprocPool.quiesce", call_id=3, thread="subproc_worker_timer",
          stack=[{"file": "/usr/lib/python3.11/threading.py", "line": 1002, "func": "_bootstrap"}], caller=None)
    w.add(12.001, 100, 1, "main", "return", call_id=3, duration_s=0.001)
    call(w, 12.01, 150, 100, "compile-sidecar", f"{SP}:SubprocMain._quiesce", 2, 12.02)
    back = ended + 0.3 if ended is not None else 319.1
    timed_out = "TimeoutExpired: Command '['python', '__main__.py']' timed out after 300 seconds"
    exit_shutdown(w, 19.1, (back, back), "slowjob:hang", timed_out if ended is None else None)
    if ended is not None:
        job(w, ended, 201, 150, "end", 1)
        for q in (201, 202):
            w.add(ended + 0.05, q, 150, "compile-worker", "process_exit", how="os._exit", counts={}, dropped=0)
        w.add(ended + 0.1, 150, 100, "compile-sidecar", "return", call_id=4, duration_s=ended + 0.1 - 19.13)
        w.add(ended + 0.2, 150, 100, "compile-sidecar", "process_exit", how="exit", code=0, counts={}, dropped=0)
        watcher(w, ended + 0.25, "tree", count=1, started=[],
                ended=[{"pid": q, "end": T0 + ended + 0.2} for q in (150, 201, 202)])
        w.add(ended + 0.4, 100, 1, "main", "process_exit", how="exit", code=1, counts={}, dropped=0)
        watcher(w, ended + 0.5, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + ended + 0.5}])
        watcher(w, ended + 0.6, "leftover", how="root-exit", count=0, pids=[], procs=[])
        w.lines.sort(key=lambda r: r["ts"])
        return w
    w.add(319.3, 100, 1, "main", "process_exit", how="exit", code=1, counts={}, dropped=0)
    watcher(w, 319.4, "tree", count=3, started=[], ended=[{"pid": 100, "end": T0 + 319.4}])
    watcher(w, 319.6, "leftover", how="root-exit", count=3, pids=[150, 201, 202],
            procs=[{"pid": 150, "ppid": 1, "rss": 250 << 20}, *({"pid": q, "ppid": 150, "rss": 100 << 20}
                                                                for q in (201, 202))])
    watcher(w, 379.0, "tree", count=2, started=[], ended=[{"pid": 150, "end": T0 + 379.0}])
    watcher(w, 380.0, "tree", count=0, started=[], ended=[{"pid": q, "end": T0 + 380.0} for q in (201, 202)])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_stuck_job_tells_the_exit_wait_its_quiesced_pool_made_under_it(tmp_path: Path) -> None:
    """The sidecar's exit join waited on the stuck job the main's wait gave up on (the same worker's job): that join
    and the main's 300 s exit wait on it follow from the stuck job, told under it in the Answer (the user's question
    in pytorch#162199 is why the exit took five minutes), not left below the pool's story or under Findings only;
    the job is not "cut off" (its worker ran it past the stop, its pool quiesced under it)."""
    rep = report(stuck_job_under_a_quiesce(), tmp_path)
    lines = rep["answer"].splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("- main 100's AsyncCompile.wait() on its compile pool "
                                                                "was interrupted by RuntimeError"))
    assert lines[at].endswith("worker 201 held its job (slowjob:hang) from 3.0 s and never ended it. What follows "
                              "from it:"), rep["answer"]
    under = []  # the bullets told under it (a symptom's bullet is indented)
    for ln in lines[at + 1:]:
        if not ln.startswith("  - "):
            break
        under.append(ln)
    assert any(ln.startswith("  - Sidecar 150's own exit waited 359.9 s for a job still running in its pool (worker "
                             "201 ran slowjob:hang from 3.0 s and never ended it), a pool torch's quiesce timer had "
                             "quiesced at 12.0 s while the job ran.") for ln in under), rep["answer"]
    waited = "  - The main process waited 300.0 s in shutdown_compile_workers at exit"
    assert any(ln.startswith(waited) for ln in under), rep["answer"]
    # a long compile the wait gave up on, which ended at 40 s: no hang; the exit's wait on it leads, the fix the
    # quiesce's (not "see what the worker is doing while it hangs")
    (tmp_path / "ended").mkdir()
    rep = report(stuck_job_under_a_quiesce(ended=40.0), tmp_path / "ended")
    assert rep["answer"].startswith("- Sidecar 150's own exit waited 21.0 s for a job still running "
                                    "in its pool"), rep["answer"]
    fix = " ".join(rep["answer"].split("Fix first: ", 1)[1].split())
    assert fix.startswith("torch's exit stops a live pool's workers at once"), rep["answer"]
    assert "jobs-cut-off" not in kinds(rep), rep["answer"]


def test_a_wait_that_raised_a_jobs_own_error_is_no_interrupt_and_no_hang(tmp_path: Path) -> None:
    """A compiled module's wait that raised a kernel's job error (torch's SubprocException: the pool answered, with
    the job's exception) while another worker still ran its job: compile-failed tells it, with the job's own line.
    Not 'interrupted by SubprocException: <the job's traceback>' with 'nothing in the log shows a hang' (a real run
    whose shared compile cache another job wiped gave both, the traceback's lines raw in the Answer), nor a hang at
    any length. Control: the same wait ended by Ctrl-C is still told as interrupted."""
    job_error = ("SubprocException: An exception occurred in a subprocess:\n\nName=<unknown>\nTraceback (most "
                 'recent call last):\n  File "/site/torch/_inductor/codecache.py", line 4690, in '
                 "_load_triton_kernel_from_source\n    return getattr(PyCodeCache.load(source_code), kernel_name)\n"
                 "OSError: source code not available")
    for at in (8.0, 408.0):
        (tmp_path / str(at)).mkdir()
        rep = report(with_sidecar_hang(at=at, error=job_error), tmp_path / str(at))
        assert not {"pool-job-hang", "pool-wait-interrupted"} & kinds(rep), kinds(rep)
        (f,) = [f for f in rep["findings"] if f["kind"] == "compile-failed"]
        assert "the job's own error: OSError: source code not available" in f["text"], f["text"]
        assert "interrupted" not in rep["answer"] and "Traceback" not in rep["answer"], rep["answer"]
    assert "pool-wait-interrupted" in kinds(report(with_sidecar_hang(), tmp_path))


def test_a_hung_jobs_child_still_running_at_its_end_is_what_the_job_waited_on(tmp_path: Path) -> None:
    """The held job ran a compiler (worker 201's child 301, cc1plus, started 0.1 s into the job and seen ending
    with the workers' group at 408.4 s): the finding and the Answer name it beside the worker, and the advice looks
    at both (no record says the worker waited on it). A child that was done long before (302, a linker that ended
    at 3.5 s) is no such child, nor a resource tracker the job started (it outlives its starter by design); with
    none, the words and the advice are the worker's as before."""
    w = with_stuck_sidecar_job()
    watcher(w, 3.2, "tree", count=6, ended=[], started=[
        {"pid": 301, "ppid": 201, "name": "cc1plus", "cmd": "cc1plus -O3 kernel.cpp", "create_time": T0 + 3.1,
         "via": "child"},
        {"pid": 302, "ppid": 201, "name": "ld", "cmd": "ld kernel.o", "create_time": T0 + 3.15, "via": "child"}])
    watcher(w, 3.5, "tree", count=5, started=[], ended=[{"pid": 302, "end": T0 + 3.5}])
    watcher(w, 408.4, "tree", count=2, started=[], ended=[{"pid": 301, "end": T0 + 408.4}])
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "pool-job-hang"]
    text = " ".join(hang["text"].split())
    assert ("worker 201 ran slowjob:hang from 3.0 s and never ended it (405.3 s, until the worker ended at 408.3 s), "
            "while its child 301 (cc1plus), started at 3.1 s, ran until 408.4 s;") in text, text
    assert "302" not in text and "302" not in hang["advice"]
    assert hang["advice"].startswith("see what worker 201 is doing while it hangs (`py-spy dump --pid 201` prints "
                                     "its stack: a wait in subprocess waits on its child) and what its child 301 "
                                     "(cc1plus), started during the job and still running at its end, is doing"), \
        hang["advice"]
    answer = " ".join(rep["answer"].split())
    assert ("worker 201 held its job (slowjob:hang) from 3.0 s and never ended it, while its child 301 (cc1plus), "
            "started at 3.1 s, ran until 408.4 s") in answer, answer
    # a resource tracker the job started (a spawn-context Queue's) outlives it by design: no job's child process
    tracker = [r for r in w.lines if r["event"] == "tree" and any(e.get("pid") == 301 for e in r["started"])][0]
    tracker["started"][0].update(role="resource-tracker", name="python3",
                                 cmd="python3 -c from multiprocessing.resource_tracker import main;main(12)")
    (tmp_path / "tracker").mkdir()
    rep = report(w, tmp_path / "tracker")
    (hang,) = [f for f in rep["findings"] if f["kind"] == "pool-job-hang"]
    assert "child" not in hang["text"] and hang["advice"].startswith("see what worker 201 is doing while it hangs (`")
    # the linker alone (done at 3.5 s, long before the job's end): the worker is what is looked at
    w.lines = [r for r in w.lines if not (r["event"] == "tree" and any(e.get("pid") == 301 for e in
                                                                       r.get("started", []) + r.get("ended", [])))]
    (tmp_path / "linker").mkdir()
    rep = report(w, tmp_path / "linker")
    (hang,) = [f for f in rep["findings"] if f["kind"] == "pool-job-hang"]
    assert "child" not in hang["text"] and hang["advice"].startswith("see what worker 201 is doing while it hangs")
