"""Export a run as Chrome Trace Event JSON, for Perfetto or chrome://tracing.

One track per process, named by role and pid (and host, when several logs
are merged); calls as complete ("X") slices; starts, exits, forks and guard
refusals as instant events; the run's process count as a counter track.
Each record's process is the run model's (model.Builder.feed): a reused pid
(pid 1 of each container run) is a track of its own.
"""

from __future__ import annotations

from typing import Any

from ..common.targets import short_label
from .logread import LogData
from .model import Builder

# Trace pids are ints: each host gets its own range when logs of several merge
# (above any pid_max, 2**22).
HOST_PID_STRIDE = 10_000_000


def to_chrome_trace(data: LogData) -> dict[str, Any]:
    """The trace as a dict ready for json.dump."""
    trace = _Trace(data.records)
    builder = Builder()
    for r in data.records:
        proc = builder.feed(r)
        trace.add(r, proc if proc is not None else ("watcher", str(r.get("host", "")), r["pid"]))
    events = trace.finish()
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "wp-autotrace", "files": data.files}}


# Records shown as instant events on their process's track.
_INSTANT_EVENTS = ("process_start", "process_exit", "blocked", "import", "role", "leftover")
_INSTANT_ARGS = ("how", "code", "role", "pids", "module")


class _Trace:
    """The trace events of one export, added record by record."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.t0: float = min(float(r["ts"]) for r in records)
        self.t_end: float = max(float(r["ts"]) for r in records)
        hosts = sorted({str(r.get("host", "")) for r in records})
        self.host_index = {h: i for i, h in enumerate(hosts)}
        self.multi = len(hosts) > 1
        self.track_of: dict[Any, int] = {}  # a process (or a watcher) -> its trace pid
        self.used: set[int] = set()
        self.events: list[dict[str, Any]] = []
        self.names: dict[int, str] = {}
        self.threads: dict[tuple[int, str], int] = {}
        self.thread_count: dict[int, int] = {}  # per trace pid: tids handed out so far
        self.open_calls: dict[tuple[int, int], dict[str, Any]] = {}

    def us(self, ts: float) -> float:
        return round((float(ts) - self.t0) * 1e6, 1)

    def tpid(self, host: str, pid: int, who: Any) -> int:
        """who's trace pid: each host its own range when merging, a reused pid a number above them all."""
        if who not in self.track_of:
            n = self.host_index[host] * HOST_PID_STRIDE + pid if self.multi else pid
            if n in self.used:
                n = len(self.host_index) * HOST_PID_STRIDE + len(self.used)
            self.used.add(n)
            self.track_of[who] = n
        return self.track_of[who]

    def tid(self, p: int, name: str) -> int:
        key = (p, name or "MainThread")
        if key not in self.threads:
            self.thread_count[p] = self.threads[key] = self.thread_count.get(p, 0) + 1
            self.events.append({"ph": "M", "name": "thread_name", "pid": p, "tid": self.threads[key],
                                "args": {"name": key[1]}})
        return self.threads[key]

    def name_process(self, r: dict[str, Any], p: int) -> None:
        role = str(r.get("role") or "child")
        label = f"{role} {r['pid']}" + (f" @{r.get('host')}" if self.multi else "")
        if self.names.get(p) != label:
            self.names[p] = label
            self.events.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": label}})

    def add(self, r: dict[str, Any], who: Any) -> None:
        """The events of one record, on the track of who (its process in the model)."""
        p = self.tpid(str(r.get("host", "")), r["pid"], who)
        ts = self.us(r["ts"])
        event = r["event"]
        if event != "tree":
            self.name_process(r, p)
        if event == "call" and isinstance(r.get("call_id"), int):
            target = short_label(str(r.get("target", "?")))
            caller = r.get("caller") if isinstance(r.get("caller"), dict) else {}
            self.open_calls[(p, r["call_id"])] = {
                "ph": "X", "name": target, "cat": "call", "pid": p, "tid": self.tid(p, str(r.get("thread", ""))),
                "ts": ts, "args": {"caller": f"{caller.get('file')}:{caller.get('line')}" if caller else None},
            }
        elif event == "return" and isinstance(r.get("call_id"), int):
            ev = self.open_calls.pop((p, r["call_id"]), None)
            if ev is not None:
                ev["dur"] = max(round(ts - ev["ts"], 1), 0.0)
                if r.get("error"):
                    ev["args"]["error"] = str(r["error"])
                self.events.append(ev)
        elif event in _INSTANT_EVENTS:
            self.events.append({"ph": "i", "s": "p", "name": _instant_name(r), "cat": "process", "pid": p, "tid": 0,
                                "ts": ts, "args": {k: r[k] for k in _INSTANT_ARGS if k in r}})
        elif event == "tree":
            count = r.get("count") if isinstance(r.get("count"), int) else 0
            self.events.append({"ph": "C", "name": "processes", "pid": p, "tid": 0, "ts": ts,
                                "args": {"count": count}})

    def finish(self) -> list[dict[str, Any]]:
        """Every event, in time order; calls that never returned (killed, or running at the end) run to the end."""
        for ev in self.open_calls.values():
            ev["dur"] = max(round(self.us(self.t_end) - ev["ts"], 1), 0.0)
            ev["args"]["unfinished"] = True
            self.events.append(ev)
        self.events.sort(key=lambda e: (e.get("ts", -1.0), e["ph"] != "M"))
        return self.events


def _instant_name(r: dict[str, Any]) -> str:
    if r["event"] == "process_start" and r.get("forked"):
        return "fork"
    if r["event"] == "blocked":
        return f"blocked {short_label(str(r.get('target', '')))}"
    return str(r["event"])
