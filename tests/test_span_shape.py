"""One OTLP span shape: the watcher's live export (LiveSpans, fed record by record as the watcher reads
them) and the finished-log export (to_otlp, through the run model) give the same spans for the same log:
the same ids, parents, names, times and attributes, also for an exec (whose new program's call ids
start again at 1: distinct span ids all the same), a reused pid, a worker that
outlives its parent, a refused call, an error and a call that never returned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wp_autotrace.analysis.export.otlp import to_otlp
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.watcher.export import LiveSpans

from .logs import AC, SP, T0, LogWriter, call, start, watcher

RUN = "r1"
SERVICE = {"service.name": "wp-autotrace"}


def _log() -> LogWriter:
    w = LogWriter()
    start(w, 0, 100, 1, "main", create_time=T0)
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    call(w, 1, 100, 1, "main", f"{AC}:AsyncCompile.warm_pool", 1, 3)
    call(w, 1.1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 2, 1.5, sidecar_pid=200)
    start(w, 1.2, 200, 100, "compile-sidecar", create_time=T0 + 1.2)
    # A forked worker whose parent (the sidecar) ends first: it still hangs under the sidecar.
    w.add(1.3, 201, 200, "compile-worker", "process_start", argv=["python", "w.py"], forked=True, env={},
          run=RUN, root_pid=100, create_time=T0 + 1.3)
    w.add(1.4, 100, 1, "main", "blocked", target=f"{AC}:AsyncCompile.warm_pool", call_id=5, thread="MainThread")
    call(w, 2, 100, 1, "main", f"{AC}:shutdown_compile_workers", 3, 2.5, error="RuntimeError: boom")
    w.add(2.6, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    # 300 execs into another Python (the same create_time: one process, one span); the call its first
    # program left open never returns and ends with the process.
    start(w, 3, 300, 100, "child", create_time=T0 + 3)
    call(w, 3.05, 300, 100, "child", f"{AC}:AsyncCompile.warm_pool", 1, 3.08)  # call 1 of its first program
    call(w, 3.1, 300, 100, "child", f"{AC}:AsyncCompile.compile_worker_pool", 7, None)
    w.add(3.5, 300, 100, "child", "process_start", argv=["python", "exec.py"], python="3.11.7", forked=False,
          env={}, run=RUN, root_pid=100, create_time=T0 + 3)
    # its second program's call 1 makes a pool: the sidecar hangs under that call, not the first program's call 1
    call(w, 3.6, 300, 100, "child", f"{SP}:SubprocPool.__init__", 1, 3.7, sidecar_pid=350)
    start(w, 3.65, 350, 300, "compile-sidecar", create_time=T0 + 3.65)
    w.add(3.9, 350, 300, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(4, 300, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    start(w, 5, 300, 100, "child", create_time=T0 + 5)  # pid 300 reused: another process, its own span
    w.add(6, 300, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(7, 201, 200, "compile-worker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(8, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    # The watcher sees the worker and the main go after their process_exit (the interpreter's teardown):
    # their spans end then, at Process.ended_at, the one end rule.
    watcher(w, 8.4, "tree", count=0, started=[], ended=[{"pid": 201, "end": T0 + 7.3, "create_time": T0 + 1.3},
                                                         {"pid": 100, "end": T0 + 8.3, "create_time": T0}])
    return w


def _key(span: dict[str, Any]) -> tuple[str, str]:
    return span["spanId"], span["startTimeUnixNano"]


def test_live_spans_equal_the_finished_log_export(tmp_path: Path) -> None:
    data = read_logs([str(_log().write(tmp_path / "run.jsonl"))])
    finished: list[dict[str, Any]] = []
    resource_of: dict[str, Any] = {}
    for rs in to_otlp(data)["resourceSpans"]:
        spans = rs["scopeSpans"][0]["spans"]
        finished += spans
        resource_of[spans[0]["spanId"]] = rs["resource"]["attributes"]
    live: list[dict[str, Any]] = []
    live_resource: dict[str, Any] = {}

    def out(_key: Any, resource: Any, span: dict[str, Any]) -> None:
        live.append(span)
        if span["name"].split()[-1].isdigit():  # a process's span: its resource as it ended
            live_resource[span["spanId"]] = resource

    spans = LiveSpans(RUN, "h1", SERVICE, out)
    last_tick = data.records[0]["ts"]
    for r in data.records:
        spans.record(r)
        if r["event"] == "tree":  # what the watcher's tick hands the live export (LiveExport.tick)
            spans.settle(last_tick)
            for e in r["ended"]:
                spans.gone(e["pid"], e["end"], e.get("create_time"))
            last_tick = r["ts"]
    spans.close(data.records[-1]["ts"])
    assert len(finished) == 13  # 6 processes (300 twice: reused), 4 calls of 100, 3 of the first 300
    # each program of an exec'ing process numbers its calls from 1: a span id each all the same
    assert len({s["spanId"] for s in finished}) == len(finished)
    assert sorted(live, key=_key) == sorted(finished, key=_key)
    assert live_resource == resource_of
    ends = {s["name"]: int(s["endTimeUnixNano"]) for s in finished if s["name"].split()[-1] in ("100", "201")}
    assert ends == {"main 100": round((T0 + 8.3) * 1e9), "compile-worker 201": round((T0 + 7.3) * 1e9)}, ends
