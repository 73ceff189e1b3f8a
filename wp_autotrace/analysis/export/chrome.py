"""Export a run as Chrome Trace Event JSON, for Perfetto or chrome://tracing.

One track per process, named by role and pid (and host, when several logs
are merged); calls as complete ("X") slices; starts, exits, forks and guard
refusals as instant events; the run's process count as a counter track; a pool worker's jobs as slices on its
"jobs" track (one without an end, the job it held, to the worker's end: unfinished).
After the calls (the log read), the memory and the findings (``story``): each
pool's real memory as a counter on its sidecar's track (PSS summed at one
moment: memseries.at_once, the same points the HTML page draws), each sampled
process's own PSS as a counter on its track, and each finding as an instant
event with its words and advice in args (the report's own: report.report_of on
the model this export folded).
Each record's process is the run model's (fold.Builder.feed): a reused pid
(pid 1 of each container run) is a track of its own.

Written as it is made (jsonout.Chunks): an event goes out once its record
is read (a call's slice at its return), so memory holds the run model and
the calls still open, never the document. Events are therefore in the order
the log ends them, not sorted by ts (the format does not ask it; viewers
sort). The log is read twice: first for the run's first and last times and
its hosts (every event's time and track depend on them), then for the events.
"""

from __future__ import annotations

import io
import json
from typing import Any, Callable

from ...common.targets import short_label
from ...common.vocab import POOL_ROLES
from ..derive.memseries import held
from ..fold.fold import Builder
from ..fold.model import Model, Process, in_namespace
from ..fold.verdict import judge
from ..read.logread import LogData, LogStream
from ..words.fmt import MIB
from .jsonout import Chunks, dumps

# Trace pids are ints: each host gets its own range when logs of several merge
# (above any pid_max, 2**22).
HOST_PID_STRIDE = 10_000_000
# Counter names (tests/test_html.py and docs/export.md name them).
POOL_PSS = "pool PSS at once (MiB)"
HELD_PSS = "PSS (MiB)"
HELD_RSS = "RSS (MiB)"  # a process the watcher reads no PSS of (not a pool's): its RSS, never summed


def write_chrome_trace(data: LogData | LogStream, write: Callable[[str], Any]) -> int:
    """The trace as JSON text, handed to write in pieces as its events are made; how many events."""
    out = Chunks(write)
    out.add('{"traceEvents": [')
    trace = _Trace(data.records, lambda event: out.add((", " if trace.count else "") + dumps(event)))
    builder = Builder()
    for r in data.records:
        proc = builder.feed(r)
        trace.add(r, proc if proc is not None else ("watcher", str(r.get("host", "")), r["pid"]))
    builder.finish()
    trace.finish()
    trace.rename(builder.model)
    trace.story(builder.model, data)
    out.add('], "displayTimeUnit": "ms", "otherData": ' + dumps({"generator": "wp-autotrace", "files": data.files})
            + "}")
    out.flush()
    return trace.count


def to_chrome_trace(data: LogData | LogStream) -> dict[str, Any]:
    """The trace as a dict (write_chrome_trace's text, parsed: for tests and small logs)."""
    text = io.StringIO()
    write_chrome_trace(data, text.write)
    return json.loads(text.getvalue())  # type: ignore[no-any-return]


# Records shown as instant events on their process's track.
_INSTANT_EVENTS = ("process_start", "process_exit", "blocked", "import", "role", "leftover")
_INSTANT_ARGS = ("how", "code", "role", "pids", "module")


class _Trace:
    """The trace events of one export, added record by record."""

    def __init__(self, records: Any, emit: Callable[[dict[str, Any]], None]) -> None:
        self.t0 = self.t_end = 0.0
        found: set[str] = set()
        for n, r in enumerate(records):  # the first pass: times and hosts only, nothing kept
            ts = float(r["ts"])
            self.t0, self.t_end = (ts, ts) if not n else (min(self.t0, ts), max(self.t_end, ts))
            found.add(str(r.get("host", "")))
        hosts = sorted(found)
        self.host_index = {h: i for i, h in enumerate(hosts)}
        self.multi = len(hosts) > 1
        self.track_of: dict[Any, int] = {}  # a process (or a watcher) -> its trace pid
        self.used: set[int] = set()
        self.emit = emit
        self.count = 0  # events emitted
        self.names: dict[int, str] = {}
        self.threads: dict[tuple[int, str], int] = {}
        self.thread_count: dict[int, int] = {}  # per trace pid: tids handed out so far
        # (track, call id), or (track, ("job", work id)) for a worker's job (job())
        self.open_calls: dict[tuple[int, Any], dict[str, Any]] = {}
        self.open_procs: dict[tuple[int, Any], Any] = {}  # the same calls' processes (the model's)
        self.by_pid: dict[tuple[str, int], int] = {}  # (host, pid) -> the trace pid of its latest process
        self.role_of: dict[int, str] = {}

    def put(self, event: dict[str, Any]) -> None:
        self.emit(event)
        self.count += 1

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
            self.put({"ph": "M", "name": "thread_name", "pid": p, "tid": self.threads[key],
                                "args": {"name": key[1]}})
        return self.threads[key]

    def name_process(self, r: dict[str, Any], p: int) -> None:
        role = str(r.get("role") or "child")
        label = f"{role} {r['pid']}" + (f" @{r.get('host')}" if self.multi else "")
        self.role_of[p] = role
        if self.names.get(p) != label:
            self.names[p] = label
            self.put({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": label}})

    def add(self, r: dict[str, Any], who: Any) -> None:
        """The events of one record, on the track of who (its process in the model)."""
        p = self.tpid(str(r.get("host", "")), r["pid"], who)
        ts = self.us(r["ts"])
        event = r["event"]
        if event != "tree":
            self.name_process(r, p)
            if not isinstance(who, tuple):  # a process of the model, not the watcher
                self.by_pid[(str(r.get("host", "")), r["pid"])] = p
        if event == "call" and isinstance(r.get("call_id"), int):
            target = short_label(str(r.get("target", "?")))
            caller = r.get("caller") if isinstance(r.get("caller"), dict) else {}
            self.open_procs[(p, r["call_id"])] = who
            self.open_calls[(p, r["call_id"])] = {
                "ph": "X", "name": target, "cat": "call", "pid": p, "tid": self.tid(p, str(r.get("thread", ""))),
                "ts": ts, "args": {"caller": f"{caller.get('file')}:{caller.get('line')}" if caller else None},
            }
        elif event == "return" and isinstance(r.get("call_id"), int):
            self.open_procs.pop((p, r["call_id"]), None)
            ev = self.open_calls.pop((p, r["call_id"]), None)
            if ev is not None:
                ev["dur"] = max(round(ts - ev["ts"], 1), 0.0)
                if r.get("error"):
                    ev["args"]["error"] = str(r["error"])
                self.put(ev)
        elif event == "job" and isinstance(r.get("work_id"), int):
            self.job(r, p, ts, who)
        elif event in _INSTANT_EVENTS:
            self.put({"ph": "i", "s": "p", "name": _instant_name(r), "cat": "process", "pid": p, "tid": 0,
                                "ts": ts, "args": {k: r[k] for k in _INSTANT_ARGS if k in r}})
        elif event == "tree":
            count = r.get("count") if isinstance(r.get("count"), int) else 0
            self.put({"ph": "C", "name": "processes", "pid": p, "tid": 0, "ts": ts,
                                "args": {"count": count}})
            self.rss(r)

    def job(self, r: dict[str, Any], p: int, ts: float, who: Any) -> None:
        """A pool worker's job as a slice on its own "jobs" track, from its start record to its end record; one
        without an end runs to the worker's end (finish), marked unfinished: the job it held."""
        key = (p, ("job", r["work_id"]))
        if r.get("state") == "start":
            self.open_procs[key] = who
            self.open_calls[key] = {"ph": "X", "name": str(r.get("fn") or "job"), "cat": "job", "pid": p,
                                    "tid": self.tid(p, "jobs"), "ts": ts,
                                    "args": {"work_id": r["work_id"], "arg": r.get("arg")}}
        elif r.get("state") == "end":
            self.open_procs.pop(key, None)
            ev = self.open_calls.pop(key, None)
            if ev is not None:
                ev["dur"] = max(round(ts - ev["ts"], 1), 0.0)
                self.put(ev)

    def finish(self) -> None:
        """Calls that never returned run to their process's end (killed: a call never outlives its process),
        or to the log's end for a process still running then. After the fold's own finish (every end known)."""
        for key, ev in self.open_calls.items():
            who = self.open_procs.get(key)
            end = who.ended_at if isinstance(who, Process) else None
            ev["dur"] = max(round(self.us(end if end is not None else self.t_end) - ev["ts"], 1), 0.0)
            ev["args"]["unfinished"] = True
            self.put(ev)
        self.open_calls.clear()
        self.open_procs.clear()

    def rss(self, r: dict[str, Any]) -> None:
        """A tree record's RSS readings as each process's RSS counter: the processes the watcher reads no
        PSS of (pool processes get their PSS counter at the end); only those that have a track."""
        host = str(r.get("host", ""))
        latest: dict[int, int] = {}  # one reading per track and moment: a new process is in `started` and `rss`
        for entry in [*(r.get("started") or ()), *(r.get("rss") or ())]:
            n = self.by_pid.get((host, entry.get("pid")))
            if n is not None and isinstance(entry.get("rss"), int) and self.role_of.get(n) not in POOL_ROLES:
                latest[n] = entry["rss"]
        for n, rss in latest.items():
            self.counter(n, HELD_RSS, r["ts"], round(rss / MIB, 3))

    def counter(self, p: int, name: str, ts: float, mib: float) -> None:
        self.put({"ph": "C", "name": name, "pid": p, "tid": 0, "ts": self.us(ts), "args": {"MiB": mib}})

    def track(self, p: Process) -> int:
        """p's trace pid (a process that wrote no record, e.g. an untraced sidecar, gets one, named)."""
        known = p in self.track_of
        n = self.tpid(p.host, p.pid, p)
        if not known:
            self.name(n, p)
        return n

    def rename(self, model: Model) -> None:
        """The tracks' names once the log is folded: a process of a pid namespace joined to its host process
        (fold/pidns.py) by its host pid; one no reading joined, and a host process its records may be, said so."""
        for p in model.processes:
            n = self.track_of.get(p)
            if n is not None:
                self.name(n, p)

    def name(self, n: int, p: Process) -> None:
        """Name track n by p as the model holds it (name_process's words, with what is not known of its pid)."""
        pid: object = p.pid
        if in_namespace(p):
            may = p.may_be
            said = f"may be host pid {' or '.join(map(str, may))}, not proven" if may else "host pid not known"
            pid = f"{p.pid} (its pid namespace's; {said})"
        elif p.one_of and not p.traced:
            pid = f"{p.pid} (traced: not known)"
        self.name_process({"role": p.role, "pid": pid, "host": p.run.host_of(p) if p.run is not None else p.host}, n)

    def story(self, model: Model, data: LogData | LogStream) -> None:
        """Memory counters and finding marks, from the report of the model this export folded."""
        from ..fold.verdict import here_and_now
        from ..report import report_of

        reader = here_and_now()
        judge(model, reader)
        rep, v = report_of(model, data, None, reader.now)
        for pool in v.pools:
            side = pool.sidecar
            points = v.story(pool).series  # the one sweep the report made: the same points its peak is of
            if side is None or not points:
                continue
            n = self.track(side)
            for pt in points:
                self.counter(n, POOL_PSS, pt.ts, round(pt.pss / MIB, 3))
            gone = side.ended_at
            if gone is not None and gone > points[-1].ts:
                self.counter(n, POOL_PSS, gone, 0.0)  # the pool is gone: it holds nothing
        for p in v.procs:
            samples = held(p)
            if not samples:
                continue
            n = self.track(p)
            for ts, pss in samples:
                self.counter(n, HELD_PSS, ts, round(pss / MIB, 3))
            gone = p.ended_at
            if gone is not None and gone > samples[-1][0]:
                self.counter(n, HELD_PSS, gone, 0.0)
        self.findings(rep, v.procs)

    def findings(self, rep: dict[str, Any], procs: list[Process]) -> None:
        """Each finding as an instant on its first process's track, at that process's end (when the
        finding was complete; the log's end for one still running), its words and advice in args."""
        by_pid: dict[int, Process] = {}
        for q in procs:
            by_pid.setdefault(q.pid, q)
        for f in rep["findings"]:
            p = next((by_pid[x] for x in f["pids"] if x in by_pid), procs[0] if procs else None)
            if p is None:
                continue
            ts = p.ended_at
            self.put({"ph": "i", "s": "p", "name": f"finding: {f['kind']}", "cat": "finding", "pid": self.track(p),
                      "tid": 0, "ts": self.us(ts if ts is not None else self.t_end),
                      "args": {"severity": f["severity"], "text": f["text"], "advice": f["advice"],
                               "pids": f["pids"]}})


def _instant_name(r: dict[str, Any]) -> str:
    if r["event"] == "process_start" and r.get("forked"):
        return "fork"
    if r["event"] == "blocked":
        return f"blocked {short_label(str(r.get('target', '')))}"
    return str(r["event"])
