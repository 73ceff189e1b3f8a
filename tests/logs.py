"""Synthetic logs for the analysis tests: a writer that builds records as the runtime writes them,
the seed scenario, the helpers the scenarios are made of, and the export checks.

Shared by every test module that needs a log without running a tracer (tests/conftest.py and
tests/procs.py hold the helpers that run real processes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.fold.verdict import Reader
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.common import targets as T

T0 = 1_800_000_000.0
TAGS = {t.label: t.tag for t in T.TARGETS}  # what the recorder writes as each target's call tag
PLUGIN = {"file": "/site/plugin/_inductor/__init__.py", "line": 5, "func": "<module>"}


class LogWriter:
    """Builds a log as the runtime would write it."""

    def __init__(self, host: str = "h1") -> None:
        self.lines: list[dict[str, Any]] = []
        self.seq: dict[int, int] = {}
        self.host = host

    def add(self, t: float, pid: int, ppid: int, role: str, event: str, **fields: Any) -> None:
        if event in ("call", "blocked") and "tag" not in fields:  # the recorder writes every call's tag
            fields["tag"] = TAGS.get(fields.get("target", ""), T.USER_TAG)
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + 1
        self.lines.append({"v": 1, "event": event, "ts": T0 + t, "pid": pid, "ppid": ppid, "host": self.host,
                           "role": role, "seq": seq, **fields})

    def warm(self, t: float, pid: int, ppid: int, role: str, sidecar: int, cid: int = 1) -> None:
        env = {"TORCH_WARM_POOL": "0"} if role != "main" else {}
        self.add(t, pid, ppid, role, "call", target="torch._inductor.async_compile:AsyncCompile.warm_pool",
                 call_id=cid, thread="MainThread", stack=[PLUGIN], caller=PLUGIN, env=env)
        self.add(t + 0.01, pid, ppid, role, "call",
                 target="torch._inductor.compile_worker.subproc_pool:SubprocPool.__init__",
                 call_id=cid + 1, parent_call=cid, thread="MainThread", stack=[PLUGIN], caller=PLUGIN)
        self.add(t + 0.2, pid, ppid, role, "return", call_id=cid + 1, duration_s=0.19, sidecar_pid=sidecar)
        self.add(t + 0.21, pid, ppid, role, "return", call_id=cid, duration_s=0.21)

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(r) + "\n" for r in self.lines))
        return path


def seed_log() -> LogWriter:
    """main 100 -> sidecar 200 -> sidecar 300 -> sidecar 400; main exits, 300/400 left behind."""
    w = LogWriter()
    run = {"run": "r1", "root_pid": 100}
    w.add(0, 100, 1, "main", "process_start", argv=["train.py"], python="3.11.7", forked=False, env={}, **run)
    w.add(0.05, 900, 100, "watcher", "watcher_start", interval=0.1, linger=60.0, **run)
    w.add(0.1, 900, 100, "watcher", "tree", count=1, started=[{"pid": 100, "ppid": 1, "rss": 10 << 20,
                                                                "role": "main", "via": "root"}], ended=[], **run)
    w.add(1, 100, 1, "main", "config", settings={"compile_threads": 2}, torch_version="2.13.0")
    w.warm(2, 100, 1, "main", 200)
    w.add(3, 200, 100, "compile-sidecar", "process_start", argv=["x/compile_worker/__main__.py"], forked=False,
          env={"TORCH_WARM_POOL": "0"}, **run)
    w.warm(5, 200, 100, "compile-sidecar", 300)
    w.add(6, 300, 200, "compile-sidecar", "process_start", argv=["x/compile_worker/__main__.py"], forked=False, **run)
    w.warm(8, 300, 200, "compile-sidecar", 400)
    w.add(9, 400, 300, "compile-sidecar", "process_start", argv=["x/compile_worker/__main__.py"], forked=False, **run)
    procs = [{"pid": p, "ppid": pp, "rss": 300 << 20} for p, pp in ((100, 1), (200, 100), (300, 200), (400, 300))]
    w.add(9.5, 900, 100, "watcher", "tree", count=4, started=[dict(e, via="child") for e in procs[1:]], ended=[],
          rss=[procs[0]], **run)
    w.add(10, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(10.5, 900, 100, "watcher", "tree", count=3, started=[], ended=[{"pid": 200, "end": T0 + 10.5}], **run)
    w.add(11, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    left = [{"pid": 300, "ppid": 1, "rss": 300 << 20}, procs[3]]  # 300 re-parented when 200 ended
    w.add(11.4, 900, 100, "watcher", "leftover", how="root-exit", count=2, pids=[300, 400], procs=left, **run)
    return w


def check_chrome_trace(trace: dict[str, Any]) -> None:
    """The Trace Event Format rules our export relies on."""
    json.dumps(trace)
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    named = set()
    for e in events:
        assert e["ph"] in {"X", "i", "C", "M"}
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int)
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "thread_name"} and isinstance(e["args"]["name"], str)
            if e["name"] == "process_name":
                named.add(e["pid"])
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["name"], str)
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        if e["ph"] == "i":
            assert e["s"] in {"g", "p", "t"}
        if e["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
    assert {e["pid"] for e in events if e["ph"] == "X"} <= named


SP = "torch._inductor.compile_worker.subproc_pool"
AC = "torch._inductor.async_compile"


def report(w: LogWriter, tmp_path: Path, run: str | None = None, reader: Reader | None = None) -> dict[str, Any]:
    """The report of w's log; w.waited (when a scenario sets it) is what `run` saw of the program;
    reader: where and when it is read (None: here and now)."""
    return analyze(read_logs([str(w.write(tmp_path / "log.jsonl"))]), run, getattr(w, "waited", None), reader)


def kinds(rep: dict[str, Any]) -> set[str]:
    return {f["kind"] for f in rep["findings"]}


def start(w: LogWriter, t: float, pid: int, ppid: int, role: str, run: str = "r1", **extra: Any) -> None:
    w.add(t, pid, ppid, role, "process_start", argv=["python", f"{role}.py"], python="3.11.7", forked=False,
          env={}, run=run, root_pid=100, **extra)


def call(w: LogWriter, t: float, pid: int, ppid: int, role: str, target: str, cid: int, end: float | None,
         **ret: Any) -> None:
    w.add(t, pid, ppid, role, "call", target=target, call_id=cid, thread="MainThread", stack=[PLUGIN],
          caller=PLUGIN)
    if end is not None:
        w.add(end, pid, ppid, role, "return", call_id=cid, duration_s=end - t, **ret)


def watcher(w: LogWriter, t: float, event: str, **fields: Any) -> None:
    w.add(t, 900, 100, "watcher", event, run="r1", root_pid=100, **fields)
