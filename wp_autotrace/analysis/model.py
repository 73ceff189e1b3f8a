"""A run model: log records folded into Run -> Process -> Pool -> Call.

One handler per event (``visit_<event>``, as pytest's assertion rewriter
visits nodes). Identities:

- a process is (host, pid, create_time): a reused pid is a new process. The
  start time comes from process_start.create_time, else the watcher's
  entries; without either, a new process_start after an exit (or for
  another run) is a new process. A non-forked process_start for a live
  process is its exec (docs/contracts.md, "Exec keeps the process"), not a new process.
- a run is its run id (process_start.run; watcher records' run); a record
  belongs to the run of its process's latest process_start.
- a pool is its instance: the sidecar it started (pid captured by
  pool-create), so its wakeups, quiesces and shutdowns are its own.

Everything here is linear in the number of records: no per-process ancestor
walks, no per-pool scans.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterable
from typing import Any, Callable, NamedTuple

from ..common import targets as T
from ..common import vocab as V
from ..common.procfs import ProcReader, same_process
from ..common.vocab import SIDECAR_ROLES
from . import schema as S

# A sidecar starts after the pool-create call that makes it; allow clock skew.
SIDECAR_START_SLACK_S = 1.0
# Frames that hold a user's code without a file: python -c, stdin, a REPL.
SOURCELESS_FILES = ("<string>", "<stdin>")
# Without a watcher to say so, a run whose log's last record is this fresh may still be running.
RECENT_S = 120.0
# What is known of a run's end (report's `runs[].state`).
RUN_ENDED = "ended"  # its main process wrote process_exit
LEFT_THEN_ENDED = "ended after the main process"  # a leftover the watcher later saw end
RUN_IN_PROGRESS = "in progress"  # no end seen, and the watcher (or a fresh log) says it is alive
RUN_KILLED = "killed"  # no process_exit, and the watcher saw the main process end (or root-killed)
RUN_END_UNSEEN = "end not seen"  # no process_exit and nothing says why
# The watcher writes its verdict 0.2 s (watcher/main.py LEFTOVER_GRACE_S) after the main process's end, at a
# tick: within two sampling intervals. None this much later (plus those two intervals) will ever come:
# generous, for a loaded host's scheduling and the reader's clock against the log's.
VERDICT_LATE_S = 30.0
# The root starts its watcher at start-up, and the watcher's first record comes within milliseconds: none
# this long after the main process's end means no watcher ran (WP_AUTOTRACE_SAMPLE_INTERVAL=0, or it failed).
WATCHER_START_LATE_S = 10.0
# A watcher's pid whose live process started this long after its watcher_start is another process.
WATCHER_START_SLACK_S = 1.0
# Why a verdict will never come (Run.no_verdict starts with one of these).
NO_WATCHER = "no watcher ran"
WATCHER_ENDED = "the watcher ended without a verdict"


class Call:
    """One traced call (or a refused one, ``blocked``)."""

    __slots__ = ("proc", "call_id", "ts", "target", "tag", "caller", "parent", "env", "thread",
                 "end", "error", "ret", "blocked", "action", "pool")

    def __init__(self, proc: Process, r: dict[str, Any], blocked: bool) -> None:
        self.proc = proc
        self.call_id: int | None = r.get("call_id")
        self.ts: float = r["ts"]
        self.target: str = r.get("target") or "?"
        self.tag: str = r.get("tag") or T.USER_TAG
        self.caller: dict[str, Any] | None = r.get("caller") or _sourceless_frame(r.get("stack"))
        parent = r.get("parent_call")
        self.parent: Call | None = proc.calls.get(parent) if parent is not None else None
        self.env: dict[str, Any] = r.get("env") or {}
        self.thread: str = r.get("thread") or ""
        self.end: float | None = None
        self.error: str | None = None
        self.ret: dict[str, Any] = {}
        self.blocked = blocked
        self.action: str = r.get("action") or ""
        self.pool: Pool | None = None


class Pool:
    """One compile pool instance: the call that made it and the sidecar it started.

    Its lifecycle as the log shows it (analysis/pools.py derives the story: idle
    spans, memory, who asked for the shutdown): when it was ready, its jobs
    (counted submits: count, first, last), each quiesce call, and its shutdown
    requests. A SubprocPool can be shut down once: the first shutdown call is the
    request, later ones (torch's atexit, its finalizer, its reader thread) are no-ops
    counted in shutdown_calls.
    """

    __slots__ = ("creator", "call", "sidecar_pid", "sidecar", "wakeups", "quiesces", "shutdowns", "shutdown_at",
                 "ready_at", "jobs", "first_job", "last_job", "quiesce_calls", "shutdown_call", "shutdown_calls")

    def __init__(self, creator: Process, call: Call) -> None:
        self.creator = creator
        self.call = call
        self.sidecar_pid: int | None = None
        self.sidecar: Process | None = None
        self.wakeups = 0
        self.quiesces = 0
        self.shutdowns = 0  # distinct shutdown requests: 0 or 1
        self.shutdown_at: float | None = None  # when its creator first asked it to shut down
        self.ready_at: float | None = None  # wait_pool_ready returned, else its workers started
        self.jobs: int | None = None  # counted submits (None: not known, or split among several pools)
        self.first_job: float | None = None
        self.last_job: float | None = None
        self.quiesce_calls: list[Call] = []
        self.shutdown_call: Call | None = None  # the request (the first shutdown call)
        self.shutdown_calls = 0


class Process:
    """Everything the log says about one process (host, pid, create_time)."""

    __slots__ = ("host", "pid", "create_time", "run", "ppid", "parent", "children", "role", "traced",
                 "forked", "execs", "start", "end", "exit_how", "exited", "gone", "peak_rss", "last_rss",
                 "cmd", "name", "env", "rank", "calls", "pools", "open_pool", "pool_by_sidecar",
                 "worker_pids", "served", "served_at", "errors", "reparented_to", "depth", "guard", "python",
                 "index", "argv", "last", "exit_code", "via", "exec_into", "executable",
                 "mem", "devices", "count_times", "counts", "pool_starts", "knobs")

    def __init__(self, host: str, pid: int, index: int) -> None:
        self.host = host
        self.pid = pid
        self.index = index  # creation order: stable sort key
        self.create_time: float | None = None
        self.run: Run | None = None
        self.ppid: int | None = None
        self.parent: Process | None = None
        self.children: list[Process] = []
        self.role = ""
        self.traced = False
        self.forked = False
        self.execs = 0
        self.start: float | None = None
        self.end: float | None = None
        self.exit_how = ""
        self.exit_code: int | None = None  # process_exit's code
        self.exited = False  # a process_exit was written
        self.gone: float | None = None  # when the watcher first missed it
        self.peak_rss = 0
        self.last_rss = 0
        self.cmd = ""
        self.name = ""
        self.env: dict[str, Any] = {}
        self.rank: dict[str, Any] = {}
        self.calls: dict[int, Call] = {}
        self.pools: list[Pool] = []
        self.open_pool: Pool | None = None
        self.pool_by_sidecar: dict[int, Pool] = {}
        self.worker_pids: set[int] = set()
        self.served = False  # a sidecar that was asked to shut down (it served its pool)
        self.served_at: float | None = None  # when that request came
        self.errors: list[dict[str, Any]] = []
        self.reparented_to: int | None = None
        self.depth = 0
        self.guard = False
        self.python = ""
        self.argv: list[str] = []  # its command line as recorded (interpreter first)
        self.last: dict[str, Any] | None = None  # the last record it wrote: where it was when last seen
        self.mem: list[tuple[float, int, int]] = []  # watcher's (ts, pss, uss) samples, bytes
        self.devices: list[str] = []  # accelerator device files it held (watcher, read once)
        self.counts: dict[str, int] = {}  # counted hot calls (process_exit)
        self.count_times: dict[str, list[float]] = {}  # their first and last times
        self.pool_starts: list[float] = []  # a sidecar: when its worker pool was (re)started
        self.knobs: list[str] = []  # the pool settings its torch's config has (config record)
        self.executable = ""  # sys.executable, from its process_start
        self.via = ""  # how the watcher proved it the run's: root, child, claim ("" in older logs: a member)
        self.exec_into: dict[str, Any] | None = None  # its exec record, while no later record says it failed


class Run:
    """One run: its id, root, processes, and what the watcher saw of it."""

    def __init__(self, run_id: str) -> None:
        self.id = run_id
        self.root: Process | None = None
        self.root_pid: int | None = None
        self.processes: list[Process] = []
        self.start: float | None = None
        self.end: float | None = None
        self.tree_counts: list[tuple[float, int]] = []
        self.leftover: dict[Process, dict[str, Any]] = {}
        self.leftover_count = 0
        self.leftover_how = ""
        self.leftover_seen = False
        self.final_seen = False
        self.waited: Waited | None = None  # `run`'s waited status of the main process, when it ran it
        self.cut: list[str] = []  # what the log itself says was cut
        self.blocked: list[Call] = []
        self.tracer_errors: list[str] = []
        self.dropped = 0
        self.configs: list[tuple[Process, dict[str, Any], str]] = []
        self.guard = False
        self.watcher_pids: set[tuple[str, int]] = set()
        self.watcher_exit = ""  # the watcher's exit reason, once written
        self.watcher_started: dict[tuple[str, int], float] = {}  # (host, pid) -> its watcher_start's ts
        self.interval = 0.0  # the watcher's sampling interval (watcher_start)
        self.watcher_dropped = 0  # records the watcher could not write (a full disk), as it last said
        self.no_watcher = ""  # the root's tracer_error saying why it started no watcher
        self.last_sample: float | None = None  # ts of the watcher's latest tree record
        # Processes sharing only the root's group or session: possibly the run's, never proven, never signalled.
        self.possible: dict[tuple[str, int, float | None], dict[str, Any]] = {}
        self.below: list[Process] | None = None  # the root's live descendants at its exit (process_exit.below)
        self.below_count = 0
        # No leftover record yet although the main process ended: `leftover` then holds what the last
        # sample after that end (else the root's `below`) showed alive, and says so.
        self.verdict_pending = False
        self.provisional_from = ""  # "sample" or "below": where a pending (or lost) verdict's list comes from
        # Why no verdict will ever come (NO_WATCHER..., WATCHER_ENDED...), "" while one may: said instead of
        # "pending". The left-behind list then comes from provisional_from, as for a pending one.
        self.no_verdict = ""

    @property
    def verdict(self) -> bool:
        """The watcher has written what the run left behind (leftover), or has stopped (watcher_exit)."""
        return self.leftover_seen or bool(self.watcher_exit)

    def seen(self, ts: float) -> None:
        self.start = ts if self.start is None or ts < self.start else self.start
        self.end = ts if self.end is None or ts > self.end else self.end

    @property
    def hosts(self) -> list[str]:
        return sorted({p.host for p in self.processes})

    @property
    def command(self) -> str:
        return self.root.cmd if self.root else ""


class Waited(NamedTuple):
    """What `wp-autotrace run` knows of the program it started and waited for (no log says it)."""

    pid: int
    status: int  # Popen.returncode: the exit code, or -N for signal N
    forwarded: tuple[int, ...] = ()  # the signals `run` passed on to it
    host: str = ""  # the host it ran on ("": any)
    no_watcher: str = ""  # why no watcher ran, when `run` found none ("": one ran, or not known)


class Model:
    """The folded log: runs, processes, calls and pools, plus the reader's counts."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.processes: list[Process] = []
        self.calls: list[Call] = []
        self.pools: list[Pool] = []
        self.t0 = 0.0
        self.t_end = 0.0


def _sourceless_frame(stack: Any) -> dict[str, Any] | None:
    """The innermost frame in -c code or stdin, when no frame with a file is the caller."""
    for frame in reversed(stack or ()):
        if frame.get("file") in SOURCELESS_FILES:
            return frame  # type: ignore[no-any-return]
    return None


def _argv_text(argv: Any) -> str:
    return " ".join(argv) if isinstance(argv, list) else ""


class Builder:
    """Folds records, in time order, into a Model. One ``visit_<event>`` per event."""

    def __init__(self, waited: Waited | None = None) -> None:
        self.model = Model()
        self.waited = waited
        self.now: float | None = None  # the reader's time (tests set it), else time.time()
        self.hostname: str | None = None  # the reader's host (tests set it), else os.uname()
        self.current: dict[tuple[str, int], Process] = {}  # (host, pid) -> latest process
        self.by_start: dict[tuple[str, int, float], Process] = {}  # (host, pid, create_time)
        self.all_by_pid: dict[tuple[str, int], list[Process]] = {}
        self.watchers: dict[tuple[str, int], Run] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            event: getattr(self, "visit_" + event) for event in S.KNOWN_EVENTS}
        # One object per distinct value a call holds (target, tag, thread, caller frame): a long
        # run's calls repeat a few call sites, and memory then grows with the calls' count only.
        self._shared: dict[Any, Any] = {}

    # -- identities ---------------------------------------------------------

    def run(self, run_id: str) -> Run:
        run = self.model.runs.get(run_id)
        if run is None:
            run = self.model.runs[run_id] = Run(run_id)
        return run

    def new_process(self, host: str, pid: int, ppid: int | None, ts: float, run: Run | None) -> Process:
        p = Process(host, pid, len(self.model.processes))
        p.ppid = ppid
        p.start = ts
        if ppid is not None and ppid != pid:
            p.parent = self.current.get((host, ppid))
        if run is not None:
            self.join(p, run)
        self.model.processes.append(p)
        self.current[(host, pid)] = p
        self.all_by_pid.setdefault((host, pid), []).append(p)
        return p

    def join(self, p: Process, run: Run) -> None:
        if p.run is not run:
            p.run = run
            run.processes.append(p)

    def set_create_time(self, p: Process, ct: float | None) -> None:
        if ct is not None and p.create_time is None:
            p.create_time = round(ct, 2)
            p.start = ct if p.start is None or not p.traced else min(p.start, ct)
            self.by_start[(p.host, p.pid, p.create_time)] = p

    def writer(self, r: dict[str, Any]) -> Process:
        """The process that wrote r (not the watcher's subjects)."""
        key = (r["host"], r["pid"])
        p = self.current.get(key)
        if p is None:
            p = self.new_process(r["host"], r["pid"], r.get("ppid"), r["ts"], None)
        if not p.role and r.get("role"):
            p.role = r["role"]
        if r["event"] != V.PROCESS_EXIT:
            p.last = r
        if p.exec_into is not None and r["event"] != V.EXEC:
            p.exec_into = None  # it wrote again: the exec failed
        if p.run is not None:
            p.run.seen(r["ts"])
            if r.get("truncated") is not None:
                p.run.cut.append(f"a {r['event']} record of pid {p.pid} was cut to fit 32 KiB")
        return p

    def is_same(self, p: Process, ct: float | None, ts: float) -> bool:
        """Whether a process seen now with start time ct is p (not a reused pid)."""
        if ct is None:
            return not (p.exited and p.end is not None and ts > p.end)
        if p.create_time is not None:
            return same_process(p.create_time, ct)
        # p's start is only known from its first record: ct must not be later.
        first = p.start or ts
        return (ct <= first or same_process(first, ct)) and not (p.exited and p.end is not None and ct > p.end)

    def subject(self, host: str, entry: dict[str, Any], ts: float, run: Run) -> Process:
        """The process a watcher entry describes: found by (host, pid, create_time), or new."""
        pid, ct = entry["pid"], entry.get("create_time")
        if ct is not None:
            p = self.by_start.get((host, pid, round(ct, 2)))
            if p is not None:
                self.note_rss(p, entry.get("rss"))  # a later sample (a leftover's last RSS) is its peak too
                return p
        p = self.current.get((host, pid))
        if p is None or not self.is_same(p, ct, ts):
            p = self.new_process(host, pid, entry.get("ppid"), ct if ct is not None else ts, run)
        elif p.run is None:
            self.join(p, run)
        self.set_create_time(p, ct)
        self.describe(p, entry)
        return p

    def describe(self, p: Process, entry: dict[str, Any]) -> None:
        """What a watcher entry adds: parent, name, command, role, rss."""
        ppid = entry.get("ppid")
        if ppid is not None:
            if p.ppid is None:
                p.ppid = ppid
                p.parent = p.parent or self.current.get((p.host, ppid))
            elif ppid != p.ppid:
                p.reparented_to = ppid
        if not p.role and entry.get("role"):
            p.role = entry["role"]
        p.cmd = p.cmd or entry.get("cmd", "")
        p.name = p.name or entry.get("name", "")
        self.note_rss(p, entry.get("rss"))

    @staticmethod
    def note_rss(p: Process, rss: int | None) -> None:
        if rss is not None:
            p.last_rss = rss
            p.peak_rss = max(p.peak_rss, rss)

    def record_run(self, r: dict[str, Any]) -> Run:
        """The run a watcher record is about: its `run` (the watcher writes it on every record), else its
        writer's."""
        key = (r["host"], r["pid"])
        if r.get("run"):
            run = self.run(r["run"])
            if r.get("role") == V.WATCHER:
                self.watchers[key] = run
                run.watcher_pids.add(key)
        else:
            run = self.watchers.get(key) or self.run("")
        if r.get("root_pid") is not None and run.root_pid is None:
            run.root_pid = r["root_pid"]
        if r.get("truncated") is not None:
            run.cut.append(f"a {r['event']} record was cut to fit 32 KiB (its lists are incomplete)")
        run.seen(r["ts"])
        return run

    def is_watcher(self, r: dict[str, Any]) -> bool:
        return r.get("role") == V.WATCHER or (r["host"], r["pid"]) in self.watchers

    # -- fold ---------------------------------------------------------------

    def fold(self, records: Iterable[dict[str, Any]]) -> Model:
        """Every record, then finish(): the whole log's model."""
        handlers = self._handlers
        # The cyclic collector off while folding: records are freed by reference counting, what the
        # model keeps lives to the end, and each collection would walk every object kept so far
        # (~20% of a 1M-record report's CPU, growing with the log).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for r in records:
                handlers[r["event"]](r)
        finally:
            if collecting:
                gc.enable()
        self.finish()
        return self.model

    def feed(self, r: dict[str, Any]) -> Process | None:
        """Fold one record (in time order); the process that wrote it (None for the watcher's).

        Between feeds the model answers what the records so far say (processes, runs, calls); the
        links finish() adds (children, pool sidecars, roots, ends from `gone`) come once, at the end.
        """
        self._handlers[r["event"]](r)
        if self.is_watcher(r):
            return None
        return self.current.get((r["host"], r["pid"]))

    def visit_process_start(self, r: dict[str, Any]) -> None:
        if r.get("role") == V.WATCHER:
            if r.get("run"):
                self.record_run(r)
            return
        host, pid, ts, ct = r["host"], r["pid"], r["ts"], r.get("create_time")
        run = self.run(r.get("run") or "")
        p = self.by_start.get((host, pid, round(ct, 2))) if ct is not None else None
        if p is None:
            p = self.current.get((host, pid))
            if p is not None and self.is_new_start(p, r):
                p = None
        if p is None:
            p = self.new_process(host, pid, r.get("ppid"), ts if ct is None else ct, run)
        elif p.traced:
            p.execs += 1  # the same process again: an exec into another Python (docs/contracts.md)
            p.exec_into = None
        self.current[(host, pid)] = p
        self.join(p, run)
        self.set_create_time(p, ct)
        first = not p.traced
        p.traced = True
        p.role = r.get("role") or p.role
        if first:
            p.forked = bool(r.get("forked"))
            p.ppid = r.get("ppid", p.ppid)
        p.cmd = _argv_text(r.get("argv")) or p.cmd
        p.argv = [str(a) for a in r["argv"]] if isinstance(r.get("argv"), list) else p.argv
        p.last = r
        p.env = r.get("env") or p.env
        p.rank = r.get("rank") or p.rank
        p.python = r.get("python") or p.python
        p.executable = r.get("executable") or p.executable
        p.guard = bool(r.get("guard"))
        run.guard = run.guard or p.guard
        if r.get("root_pid") is not None:
            run.root_pid = run.root_pid or r["root_pid"]
        run.seen(ts)

    def is_new_start(self, p: Process, r: dict[str, Any]) -> bool:
        """Whether a process_start for a known (host, pid) starts a new process."""
        ct = r.get("create_time")
        if p.run is not None and r.get("run") and p.run.id != r["run"]:
            return True  # another run (pid 1 in a container, every run)
        if p.exited:
            return True  # an exec writes no process_exit: after one, this pid is a new process
        if ct is not None and p.create_time is not None:
            return not same_process(p.create_time, ct)
        if not p.traced:
            return not self.is_same(p, ct, r["ts"])
        # A live traced process starting again: an exec (same ppid), else a reused pid.
        return bool(r.get("forked")) or r.get("ppid") != p.ppid

    def visit_process_exit(self, r: dict[str, Any]) -> None:
        if self.is_watcher(r):
            return
        p = self.writer(r)
        p.end = r["ts"]
        p.exited = True
        p.exit_how = r.get("how") or "exit"
        p.counts = {k: v for k, v in (r.get("counts") or {}).items() if isinstance(v, int)}
        p.count_times = r.get("count_times") or {}
        p.exit_code = r["code"] if isinstance(r.get("code"), int) else p.exit_code
        if p.run is not None:
            p.run.dropped += r.get("dropped") or 0
            if "below" in r and p.role == V.MAIN:
                self.root_below(p.run, r)

    def root_below(self, run: Run, r: dict[str, Any]) -> None:
        """The root's live descendants at its exit: members by descent, seen before the watcher's verdict."""
        run.below = [self.subject(r["host"], e, r["ts"], run) for e in r.get("below") or ()]
        for q in run.below:
            q.via = q.via or "child"
        count = r.get("below_count")
        run.below_count = count if count is not None else len(run.below)

    def visit_exec(self, r: dict[str, Any]) -> None:
        """A process about to exec: it becomes `executable` unless a later record of it says the exec failed."""
        if not self.is_watcher(r):
            self.writer(r).exec_into = r

    def share(self, value: Any) -> Any:
        """The one kept object equal to value (a str, or a frame dict of plain values)."""
        key = tuple(value.items()) if type(value) is dict else value
        try:
            return self._shared.setdefault(key, value)
        except TypeError:  # an unhashable frame value (a crafted log): kept as it is
            return value

    def visit_call(self, r: dict[str, Any], blocked: bool = False) -> None:
        if self.is_watcher(r):
            return
        p = self.writer(r)
        c = Call(p, r, blocked)
        share = self.share
        c.target, c.tag, c.thread = share(c.target), share(c.tag), share(c.thread)
        if c.caller is not None:
            c.caller = share(c.caller)
        if c.call_id is not None and not blocked:
            p.calls[c.call_id] = c
        self.model.calls.append(c)
        if blocked:
            if p.run is not None:
                p.run.blocked.append(c)
        elif c.tag == T.POOL_CREATE:
            c.pool = Pool(p, c)
            p.pools.append(c.pool)
            p.open_pool = c.pool
            self.model.pools.append(c.pool)

    def visit_blocked(self, r: dict[str, Any]) -> None:
        self.visit_call(r, blocked=True)

    def visit_return(self, r: dict[str, Any]) -> None:
        if self.is_watcher(r):
            return
        p = self.writer(r)
        c = p.calls.get(r.get("call_id", -1))
        if c is None or c.end is not None:
            return
        c.end = r["ts"]
        c.error = r.get("error")
        # What the return captured (sidecar_pid, worker_pids, ...); not the record itself, which a
        # long run has hundreds of thousands of.
        c.ret = (_NO_RETURN_FIELDS if r.keys() <= _RETURN_OWN
                 else {k: v for k, v in r.items() if k not in _RETURN_OWN})
        sidecar = r.get("sidecar_pid")
        if c.pool is not None and sidecar is not None:
            c.pool.sidecar_pid = sidecar
            p.pool_by_sidecar[sidecar] = c.pool
        if c.tag == T.SIDECAR_POOL_START:
            p.worker_pids.update(r.get("worker_pids") or ())
            if r.get("worker_pids"):  # SubprocMain.__init__ from 2.9 starts none (lazy _start_pool)
                p.pool_starts.append(r["ts"])
        elif c.tag == T.WAIT_POOL_READY and not c.error:
            pool = p.open_pool
            if pool is not None and pool.ready_at is None:
                pool.ready_at = c.end
        elif c.tag == T.SIDECAR_SHUTDOWN:
            p.served = True
            p.served_at = c.ts if p.served_at is None else p.served_at
        self.credit_pool(c)

    def credit_pool(self, c: Call) -> None:
        """Count a wakeup/quiesce/shutdown for its own pool: by the sidecar pid it
        captured, else the caller's latest pool still open."""
        field = _POOL_COUNTS.get(c.tag)
        if field is None:
            return
        p = c.proc
        sidecar = c.ret.get("sidecar_pid")
        pool = p.pool_by_sidecar.get(sidecar) if sidecar is not None else None
        pool = pool or p.open_pool or (p.pools[-1] if p.pools else None)
        if pool is None:
            return
        if c.tag == T.POOL_SHUTDOWN:
            pool.shutdown_calls += 1
            if pool.shutdown_call is None or c.ts < pool.shutdown_call.ts:
                pool.shutdown_call = c
            pool.shutdowns = 1
            pool.shutdown_at = pool.shutdown_call.ts
            if pool is p.open_pool:
                p.open_pool = None
            return
        if c.tag == T.POOL_QUIESCE:
            pool.quiesce_calls.append(c)
        setattr(pool, field, getattr(pool, field) + 1)

    def visit_import(self, r: dict[str, Any]) -> None:
        if not self.is_watcher(r):
            self.writer(r)

    def visit_config(self, r: dict[str, Any]) -> None:
        if self.is_watcher(r):
            return
        p = self.writer(r)
        p.knobs = [k for k in r.get("knobs") or () if isinstance(k, str)]
        if p.run is not None:
            p.run.configs.append((p, r.get("settings") or {}, r.get("torch_version") or ""))

    def visit_role(self, r: dict[str, Any]) -> None:
        if not self.is_watcher(r):
            p = self.writer(r)
            p.role = r.get("role") or p.role

    def visit_tracer_error(self, r: dict[str, Any]) -> None:
        watcher = self.is_watcher(r)
        run = self.record_run(r) if watcher else self.writer(r).run or self.run("")
        if not watcher and r.get("where") == V.WATCHER and not run.no_watcher:
            run.no_watcher = str(r.get("error") or "")  # the root says why it started no watcher: not a fault
            return
        if watcher and isinstance(r.get("dropped"), int):
            run.watcher_dropped = max(run.watcher_dropped, r["dropped"])
            return  # the count, said again in watcher_exit: a finding of its own, not an error
        run.tracer_errors.append(f"pid {r['pid']}: {r.get('where', '')}: {r.get('error', '')}")

    def visit_error(self, r: dict[str, Any]) -> None:
        if not self.is_watcher(r):
            self.writer(r).errors.append(r)

    def visit_watcher_start(self, r: dict[str, Any]) -> None:
        run = self.record_run(r)
        run.watcher_started[(r["host"], r["pid"])] = r["ts"]
        if isinstance(r.get("interval"), (int, float)):
            run.interval = max(run.interval, float(r["interval"]))

    def visit_watcher_exit(self, r: dict[str, Any]) -> None:
        run = self.record_run(r)
        run.watcher_exit = r.get("reason") or V.EXIT_ERROR
        if isinstance(r.get("dropped"), int):
            run.watcher_dropped = max(run.watcher_dropped, r["dropped"])

    def visit_tree(self, r: dict[str, Any]) -> None:
        run = self.record_run(r)
        host, ts = r["host"], r["ts"]
        run.last_sample = ts
        for entry in r.get("started") or ():
            if (host, entry["pid"]) not in run.watcher_pids:
                p = self.subject(host, entry, ts, run)
                p.via = entry.get("via") or p.via
                run.possible.pop((host, p.pid, p.create_time), None)
        for entry in r.get("possible") or ():
            ct = entry.get("create_time")
            key = (host, entry["pid"], round(ct, 2) if ct is not None else None)
            if key[2] is None or key not in self.by_start:
                run.possible[key] = entry
        for entry in r.get("ended") or ():
            gone = self.find(host, entry)
            if gone is not None and gone.gone is None:
                gone.gone = entry.get("end", ts)
        for entry in r.get("rss") or ():
            seen = self.find(host, entry)
            if seen is not None:
                self.note_rss(seen, entry.get("rss"))
        if r.get("count") is not None:
            run.tree_counts.append((ts, r["count"]))
        run.final_seen = run.final_seen or bool(r.get("final"))

    def find(self, host: str, entry: dict[str, Any]) -> Process | None:
        ct = entry.get("create_time")
        if ct is not None:
            p = self.by_start.get((host, entry["pid"], round(ct, 2)))
            if p is not None:
                return p
        p = self.current.get((host, entry["pid"]))
        return p if p is not None and self.is_same(p, ct, p.start or 0.0) else None

    def visit_memory(self, r: dict[str, Any]) -> None:
        """The watcher's PSS/USS samples of pool processes, and the device files they hold."""
        run = self.record_run(r)
        host, ts = r["host"], r["ts"]
        for entry in r.get("procs") or ():
            p = self.find(host, entry)
            if p is not None and entry.get("pss") is not None:
                p.mem.append((ts, entry["pss"], entry.get("uss") or 0))
        for entry in r.get("devices") or ():
            p = self.find(host, entry)
            if p is not None:
                p.devices = sorted(set(p.devices) | set(entry.get("paths") or ()))
        del run

    def visit_leftover(self, r: dict[str, Any]) -> None:
        run = self.record_run(r)
        run.leftover_seen = True
        run.leftover_how = r.get("how") or run.leftover_how or V.ROOT_EXIT
        host = r["host"]
        listed = {e["pid"] for e in r.get("procs") or ()}
        for entry in r.get("procs") or ():
            run.leftover[self.subject(host, entry, r["ts"], run)] = dict(entry, seen_at=r["ts"])
        for pid in r.get("pids") or ():
            if pid not in listed:
                run.leftover[self.subject(host, {"pid": pid}, r["ts"], run)] = {"pid": pid, "seen_at": r["ts"]}
        count = r.get("count")
        run.leftover_count = max(run.leftover_count, count if count is not None else len(run.leftover))

    # -- after the last record ------------------------------------------------

    def finish(self) -> None:
        m = self.model
        if m.processes or m.runs:
            times = [r.start for r in m.runs.values() if r.start is not None]
            ends = [r.end for r in m.runs.values() if r.end is not None]
            m.t0 = min(times) if times else 0.0
            m.t_end = max(ends) if ends else m.t0
        orphan = None
        for p in m.processes:
            if p.parent is None and p.ppid is not None and p.ppid != p.pid:
                q = self.current.get((p.host, p.ppid))
                p.parent = q if q is not p else None
            if p.parent is not None:
                p.parent.children.append(p)
            if p.run is None:
                run = p.parent.run if p.parent is not None and p.parent.run is not None else None
                if run is None:
                    orphan = orphan or self.run("")
                    run = orphan
                self.join(p, run)
        self.finish_pools()
        self.finish_ends()
        _set_depths(m.processes)
        for run in m.runs.values():
            self.finish_run(run)

    def finish_pools(self) -> None:
        for pool in self.model.pools:
            if pool.sidecar_pid is None:
                continue
            candidates = self.all_by_pid.get((pool.creator.host, pool.sidecar_pid), [])
            after = pool.call.ts - SIDECAR_START_SLACK_S
            pool.sidecar = next((q for q in candidates if (q.start or 0.0) >= after),
                                candidates[-1] if candidates else None)
        for c in self.model.calls:  # calls that never returned still count for their pool
            if c.end is None and not c.blocked:
                self.credit_pool(c)
        for p in self.model.processes:
            if p.pools and p.count_times:
                _credit_jobs(p)

    def finish_ends(self) -> None:
        """A process with no process_exit ends when the watcher first missed it."""
        in_leftover = {p for run in self.model.runs.values() for p in run.leftover}
        for p in self.model.processes:
            if p.role == "":
                p.role = V.CHILD
            if p.end is None and p.gone is not None and p.exec_into is not None:
                p.end = p.gone  # it became another program; the watcher saw that one end
                p.exit_how = f"exec'd into {exec_name(p.exec_into)}"
            elif p.end is None and p.gone is not None and p not in in_leftover:
                p.end = p.gone
                p.exit_how = p.exit_how or "vanished"
            elif p.end is None and p.gone is not None:
                # Left behind, and the watcher saw it end later (killed, or it finished): not still running.
                p.end = p.gone
                p.exit_how = p.exit_how or LEFT_THEN_ENDED

    def finish_run(self, run: Run) -> None:
        mains = [p for p in run.processes if p.role == "main"]
        by_pid = [p for p in mains if p.pid == run.root_pid]
        run.root = by_pid[0] if by_pid else mains[0] if mains else None
        if run.root is not None and run.root_pid is None:
            run.root_pid = run.root.pid
        waited = self.waited
        if waited is not None and run.root is not None and run.root.pid == waited.pid \
                and waited.host in ("", run.root.host):
            run.waited = waited
        listed = len(run.leftover)
        if run.leftover_count > listed:
            run.cut.append(f"leftover: {listed} of {run.leftover_count} processes listed")
        self.pending_verdict(run)

    def pending_verdict(self, run: Run) -> None:
        """The main process ended and the watcher's verdict is not written: take what the last sample
        after that end (else the root's `below`) shows alive, and say whether the verdict is pending
        or will never come (run.no_verdict: no watcher ran, or it ended without one)."""
        root = run.root
        end = None if root is None else root.end if root.end is not None else root.gone
        if root is None or end is None or run.leftover_seen:
            return
        if root.pid == 1 and run.no_watcher and not run.watcher_pids:
            # A pid namespace's init: its exit made the kernel kill every process in that namespace.
            run.no_verdict = (f"{NO_WATCHER}: the main process was pid 1 (its pid namespace's init), and its "
                              "exit ended every process in that namespace: nothing can be left behind")
            run.leftover, run.leftover_count = {}, 0
            return
        if not (run.watcher_pids or run.below is not None):
            return
        # A watcher_exit without a leftover (log-gone, error, root-is-reaper): it left before its verdict.
        run.no_verdict = (f"{WATCHER_ENDED} (it left: {run.watcher_exit})" if run.watcher_exit
                          else self.verdict_lost(run, end))
        run.verdict_pending = not run.no_verdict
        if run.last_sample is not None and run.last_sample >= end:
            alive = [p for p in run.processes if p is not root and p.end is None and p.gone is None]
            run.provisional_from = "sample"
        elif run.below is not None:
            alive = [p for p in run.below if p.end is None and p.gone is None]
            run.provisional_from = "below"
        else:
            return  # nothing seen after the end yet: unknown, and said so
        run.leftover = {p: {"pid": p.pid, "rss": p.last_rss or None} for p in alive}
        unlisted = run.below_count - len(run.below) if run.provisional_from == "below" and run.below else 0
        run.leftover_count = len(alive) + max(unlisted, 0)

    def verdict_lost(self, run: Run, end: float) -> str:
        """Why no verdict will come for a run whose main process ended at `end`, or "" while one may.

        From the log first (a reader may be on another host, or read it a day later): no watcher_start
        long after the end, or no verdict long after it was due. From /proc only for a watcher on
        this host: its pid gone (or another process's) means it ended without writing one."""
        now = time.time() if self.now is None else self.now
        if not run.watcher_pids:
            if run.no_watcher:
                return f"{NO_WATCHER}: {run.no_watcher}"
            if run.waited is not None and run.waited.no_watcher:
                return f"{NO_WATCHER}: {run.waited.no_watcher}"
            if now - end > WATCHER_START_LATE_S:
                return (f"{NO_WATCHER} (no watcher record in the log: WP_AUTOTRACE_SAMPLE_INTERVAL=0, or it "
                        "could not start)")
            return ""
        here = self.hostname if self.hostname is not None else _hostname()
        if all(h == here for h, _ in run.watcher_pids):
            if not watchers_gone(run, here):
                return ""
            pids = ", ".join(str(pid) for _, pid in sorted(run.watcher_pids))
            return f"{WATCHER_ENDED} (no leftover or watcher_exit record; its pid {pids} is gone)"
        late = now - end - 2 * run.interval
        if late > VERDICT_LATE_S:
            return (f"{WATCHER_ENDED} (no leftover or watcher_exit record {now - end:.0f} s after the main "
                    f"process's end; it is written within a second or two)")
        return ""


def _hostname() -> str:
    return os.uname().nodename


def watchers_gone(run: Run, here: str | None = None) -> bool:
    """Every watcher of the run ran on this host (`here`) and its pid is gone: nothing more will come from it."""
    here = here or _hostname()
    return bool(run.watcher_pids) and all(host == here and not watcher_alive(pid, run.watcher_started.get((host, pid)))
                                          for host, pid in run.watcher_pids)


def watcher_alive(pid: int, started: float | None) -> bool:
    """Whether this host's process `pid` may still be the watcher that wrote watcher_start at `started`."""
    try:
        found = ProcReader().stat(pid)
    except OSError:
        return True  # cannot tell: not evidence of its end
    if found is None:
        return False
    return started is None or found["create_time"] <= started + WATCHER_START_SLACK_S


# A return record's fields that are not what the call returned: kept on the Call elsewhere or not at all.
_RETURN_OWN = frozenset(("v", "event", "ts", "pid", "ppid", "host", "role", "seq", "call_id", "duration_s", "error"))
_NO_RETURN_FIELDS: dict[str, Any] = {}  # shared by every call that captured nothing; never changed

_POOL_COUNTS = {T.POOL_WAKEUP: "wakeups", T.POOL_QUIESCE: "quiesces", T.POOL_SHUTDOWN: "shutdowns"}


# The counted (COUNT-mode) labels that are a pool's jobs: process_exit's counts are keyed by label.
_SUBMIT = {t.label: True for t in T.TARGETS if t.tag == T.POOL_SUBMIT}


def _credit_jobs(p: Process) -> None:
    """A process's counted submits (count, first, last) to its pools: the first job to the pool made
    last before it, the last job likewise; the count only when the process made one pool."""
    times = [t for label, t in p.count_times.items() if _SUBMIT.get(label) and len(t) == 2]
    if not times:
        return
    first, last = min(t[0] for t in times), max(t[1] for t in times)
    count = sum(n for label, n in p.counts.items() if _SUBMIT.get(label))

    def made_before(ts: float) -> Pool:
        return next((pool for pool in reversed(p.pools) if pool.call.ts <= ts), p.pools[0])

    made_before(first).first_job = first
    made_before(last).last_job = last
    if len(p.pools) == 1:
        p.pools[0].jobs = count


def _set_depths(processes: list[Process]) -> None:
    """Sidecars on the path from the root down to each process, itself included: linear, memoised."""
    done: set[int] = set()
    for p in processes:
        chain: list[Process] = []
        on_chain: set[int] = set()
        q: Process | None = p
        while q is not None and q.index not in done and q.index not in on_chain:
            chain.append(q)
            on_chain.add(q.index)
            q = q.parent
        base = q.depth if q is not None and q.index in done else 0
        for x in reversed(chain):
            base += x.role in SIDECAR_ROLES
            x.depth = base
            done.add(x.index)


def run_state(run: Run, now: float | None = None) -> str:
    """What is known of how a run ended (RUN_*): from its main process's records and the watcher's."""
    root = run.root
    if root is None or root.exited:
        return RUN_ENDED if root is not None else RUN_END_UNSEEN
    if root.exec_into is not None and (root.gone is not None or run.leftover_seen):
        return RUN_ENDED  # it exec'd into another program, whose end the watcher saw: not killed
    if run.waited is not None and run.waited.status >= 0:
        return RUN_ENDED  # `run` saw it exit with a code (os._exit: no exit handlers, no process_exit)
    if run.leftover_how == V.ROOT_KILLED or root.gone is not None:
        return RUN_KILLED
    if run.leftover_seen:
        return RUN_ENDED  # the watcher saw the main process end and checked what was left
    if run.watcher_pids:
        return RUN_END_UNSEEN if run.final_seen else RUN_IN_PROGRESS
    age = (time.time() if now is None else now) - (run.end or 0.0)
    if 0 <= age <= RECENT_S:
        return RUN_IN_PROGRESS
    return RUN_END_UNSEEN


def signal_name(n: int) -> str:
    import signal

    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def ended_by(run: Run) -> str | None:
    """The signal that ended the main process, as `run` saw it (its waited status); None if not known."""
    waited = run.waited
    return signal_name(-waited.status) if waited is not None and waited.status < 0 else None


def exec_name(record: dict[str, Any]) -> str:
    """What an exec record's process became: its program's name."""
    argv = record.get("argv") or []
    path = record.get("executable") or (argv[0] if argv else "") or "?"
    return str(path).rstrip("/").rpartition("/")[2] or str(path)


def build(records: Iterable[dict[str, Any]], waited: Waited | None = None) -> Model:
    """Fold checked records (logread) in time order into a Model; waited: what `run` saw of its program."""
    return Builder(waited).fold(records)
