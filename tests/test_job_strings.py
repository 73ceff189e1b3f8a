"""A pool worker's jobs (JobSpan) as the log has them, each job function and kernel name held once however many jobs
repeat it: a long run's workers compile the same few functions' jobs, every rank the same kernels, and the spans are
kept to the end of the report (on a realistic 1M-record log, 0.97x the log's size at peak without it, 0.6x with)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wp_autotrace.analysis.fold.fold import build
from wp_autotrace.analysis.read import logread
from wp_autotrace.analysis.read.logread import stream_logs

from .logs import LogWriter

FN = "torch._inductor.runtime.compile_tasks:_worker_compile_triton"


@pytest.fixture(params=[True, False], ids=["fast", "json"])
def path_taken(request: pytest.FixtureRequest) -> Iterator[bool]:
    logread.use_fast(request.param)
    try:
        yield request.param
    finally:
        logread.use_fast()


def _log() -> LogWriter:
    """A sidecar 200 and two workers, each taking three jobs (two kernels' names and one without a name)."""
    w = LogWriter()
    w.add(0, 200, 100, "compile-sidecar", "process_start", argv=["python", "__main__.py"], forked=False, run="r1",
          root_pid=100)
    for pid in (201, 202):
        w.add(0.1, pid, 200, "compile-worker", "process_start", argv=["python"], forked=True, run="r1", root_pid=100)
        for k in range(3):
            t = 1 + k + (pid - 201) * 0.1
            extra = {"arg": f"triton_poi_fused_add_{k}"} if k < 2 else {}
            w.add(t, pid, 200, "compile-worker", "job", state="start", work_id=k * 2 + pid - 201, fn=FN, **extra)
            w.add(t + 0.5, pid, 200, "compile-worker", "job", state="end", work_id=k * 2 + pid - 201)
    return w


def test_jobs_are_the_logs_with_each_name_held_once(tmp_path: Path, path_taken: bool) -> None:
    w = _log()
    model = build(stream_logs([str(w.write(tmp_path / "jobs.jsonl"))]).records)
    # The log's own reading: each worker's (work_id, fn, arg, start, end) in order.
    want: dict[int, list[tuple[object, ...]]] = {}
    for r in w.lines:
        if r["event"] == "job" and r["state"] == "start":
            want.setdefault(r["pid"], []).append((r["work_id"], r["fn"], r.get("arg"), r["ts"]))
    ends = {(r["pid"], r["work_id"]): r["ts"] for r in w.lines if r["event"] == "job" and r["state"] == "end"}
    workers = {p.pid: p for p in model.processes if p.pid in (201, 202)}
    got = {pid: [(j.work_id, j.fn, j.arg, j.start) for j in p.jobs_run] for pid, p in workers.items()}
    assert got == want
    assert all(j.end == ends[(pid, j.work_id)] for pid, p in workers.items() for j in p.jobs_run)
    spans = [j for p in workers.values() for j in p.jobs_run]
    assert len({id(j.fn) for j in spans}) == 1  # one string for the six jobs' function
    named = [j for j in spans if j.arg is not None]
    assert len({id(j.arg) for j in named}) == len({j.arg for j in named}) == 2  # one per kernel name
