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
    records = data.records
    t0: float = min(float(r["ts"]) for r in records)
    t_end: float = max(float(r["ts"]) for r in records)
    hosts = sorted({str(r.get("host", "")) for r in records})
    host_index = {h: i for i, h in enumerate(hosts)}
    multi = len(hosts) > 1

    def us(ts: float) -> float:
        return round((float(ts) - t0) * 1e6, 1)

    track_of: dict[Any, int] = {}  # a process (or a watcher) -> its trace pid
    used: set[int] = set()

    def tpid(host: str, pid: int, who: Any) -> int:
        # Trace pids are ints: give each host its own range when merging, and a
        # reused pid a number of its own above every host's range.
        if who not in track_of:
            n = host_index[host] * HOST_PID_STRIDE + pid if multi else pid
            if n in used:
                n = len(hosts) * HOST_PID_STRIDE + len(used)
            used.add(n)
            track_of[who] = n
        return track_of[who]

    events: list[dict[str, Any]] = []
    names: dict[int, str] = {}
    threads: dict[tuple[int, str], int] = {}
    thread_count: dict[int, int] = {}  # per trace pid: tids handed out so far
    open_calls: dict[tuple[int, int], dict[str, Any]] = {}

    def tid(p: int, name: str) -> int:
        key = (p, name or "MainThread")
        if key not in threads:
            thread_count[p] = threads[key] = thread_count.get(p, 0) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": p, "tid": threads[key], "args": {"name": key[1]}})
        return threads[key]

    def name_process(r: dict[str, Any], p: int) -> None:
        role = str(r.get("role") or "child")
        label = f"{role} {r['pid']}" + (f" @{r.get('host')}" if multi else "")
        if names.get(p) != label:
            names[p] = label
            events.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": label}})

    builder = Builder()
    for r in records:
        host = str(r.get("host", ""))
        proc = builder.feed(r)
        p = tpid(host, r["pid"], proc if proc is not None else ("watcher", host, r["pid"]))
        ts = us(r["ts"])
        event = r["event"]
        if event != "tree":
            name_process(r, p)
        if event == "call" and isinstance(r.get("call_id"), int):
            target = short_label(str(r.get("target", "?")))
            caller = r.get("caller") if isinstance(r.get("caller"), dict) else {}
            open_calls[(p, r["call_id"])] = {
                "ph": "X", "name": target, "cat": "call", "pid": p, "tid": tid(p, str(r.get("thread", ""))),
                "ts": ts, "args": {"caller": f"{caller.get('file')}:{caller.get('line')}" if caller else None},
            }
        elif event == "return" and isinstance(r.get("call_id"), int):
            ev = open_calls.pop((p, r["call_id"]), None)
            if ev is not None:
                ev["dur"] = max(round(ts - ev["ts"], 1), 0.0)
                if r.get("error"):
                    ev["args"]["error"] = str(r["error"])
                events.append(ev)
        elif event in ("process_start", "process_exit", "blocked", "import", "role", "leftover"):
            label = event
            if event == "process_start" and r.get("forked"):
                label = "fork"
            elif event == "blocked":
                label = f"blocked {short_label(str(r.get('target', '')))}"
            events.append({"ph": "i", "s": "p", "name": label, "cat": "process", "pid": p, "tid": 0, "ts": ts,
                           "args": {k: r[k] for k in ("how", "code", "role", "pids", "module") if k in r}})
        elif event == "tree":
            count = r.get("count") if isinstance(r.get("count"), int) else 0
            events.append({"ph": "C", "name": "processes", "pid": p, "tid": 0, "ts": ts, "args": {"count": count}})

    # Calls that never returned (killed process, or still running at the end).
    for ev in open_calls.values():
        ev["dur"] = max(round(us(t_end) - ev["ts"], 1), 0.0)
        ev["args"]["unfinished"] = True
        events.append(ev)
    events.sort(key=lambda e: (e.get("ts", -1.0), e["ph"] != "M"))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "wp-autotrace", "files": data.files}}
