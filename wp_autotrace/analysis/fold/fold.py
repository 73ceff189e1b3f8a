"""The fold: log records, in time order, into a Model (model.py). One ``visit_<event>`` per event.

Builder holds a Registry (identities.py: which process and run a record is about) and ends with
finish.py (what comes after the last record). A pure function of the records: what depends on when and where the
log is read is verdict.py's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from functools import partial
from typing import Any, Callable

from ...common import targets, vocab
from ..read import schema
from . import autotune
from .finish import POOL_COUNTS, credit_pool, finish
from .identities import Registry
from .model import EXECUTOR, LIVE_EXPORT, SUBPROC, JobSpan, Model, Pool, Process, Run, Waited, new_call, seen

# A return record's fields that are not what the call returned: kept on the Call elsewhere or not at all.
_RETURN_OWN = frozenset((*vocab.HEADER_KEYS, "call_id", "duration_s", "error"))
# The calls fold/autotune.py folds into autotune pools.
AUTOTUNE_TAGS = frozenset((targets.AUTOTUNE_POOL, targets.AUTOTUNE_START, targets.AUTOTUNE_STOP,
                           targets.AUTOTUNE_KILL, targets.QUACK_PRECOMPILE, targets.QUACK_SHUTDOWN))
_NO_RETURN_FIELDS: dict[str, Any] = {}  # shared by every call that captured nothing; never changed
# The tags whose call (visit_call) or return (visit_return) folds more than the Call: one set test for the rest.
_CALL_TAGS = frozenset((targets.POOL_CREATE, targets.TRACKED_POOL, *AUTOTUNE_TAGS))
_RETURN_TAGS = frozenset((targets.SIDECAR_POOL_START, targets.WAIT_POOL_READY, targets.SIDECAR_SHUTDOWN, *POOL_COUNTS))


def _argv_text(argv: Any) -> str:
    return " ".join(argv) if isinstance(argv, list) else ""


def _env_changed(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A config record's env_changed entries that name their variable (EnvWatch's changes before it loaded); a
    field of any other type (the schema keeps it as written: ANY) gives none."""
    changed = r.get("env_changed")
    return [c for c in changed if isinstance(c, dict) and isinstance(c.get("var"), str)] \
        if isinstance(changed, list) else []


class Builder:
    """Folds records, in time order, into a Model. One ``visit_<event>`` per event (or REGISTRY_VISITS'); the
    state the visits share, and who each record is about, is its Registry (identities.py)."""

    def __init__(self, waited: Waited | None = None) -> None:
        self.reg = Registry(waited)
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            event: getattr(self, "visit_" + event, None) or partial(REGISTRY_VISITS[event], self.reg)
            for event in schema.KNOWN_EVENTS}

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
        return self.reg.model

    def feed(self, r: dict[str, Any]) -> Process | None:
        """Fold one record (in time order); the process that wrote it (None for the watcher's).

        Between feeds the model answers what the records so far say (processes, runs, calls); the
        links finish() adds (children, pool sidecars, roots, ends from `gone`) come once, at the end.
        """
        self._handlers[r["event"]](r)
        if self.reg.is_watcher(r):
            return None
        return self.reg.current.get((r["host"], r["pid"]))

    @property
    def model(self) -> Model:
        """The model so far (whole once finish() ran)."""
        return self.reg.model

    def finish(self) -> None:
        """After the last record (finish.py): links, pools, ends, roots; fold() calls it."""
        finish(self.reg)

    def visit_process_start(self, r: dict[str, Any]) -> None:
        if r.get("role") == vocab.WATCHER:
            if r.get("run"):
                self.reg.record_run(r)
            return
        host, pid, ts, ct = r["host"], r["pid"], r["ts"], r.get("create_time")
        run = self.reg.run(r.get("run") or "")
        p = self.reg.by_start.get((host, pid, round(ct, 2))) if ct is not None else None
        if p is None:
            p = self.reg.current.get((host, pid))
            if p is not None and self.reg.is_new_start(p, r):
                p = None
        if p is None:
            p = self.reg.new_process(host, pid, r.get("ppid"), ts if ct is None else ct, run)
        elif p.traced:
            p.execs += 1  # the same process again: an exec into another Python (docs/contracts.md)
            p.exec_into = None
        self.reg.current[(host, pid)] = p
        self.reg.join(p, run)
        self.reg.set_create_time(p, ct)
        first = not p.traced
        p.traced = True
        p.role = r.get("role") or p.role
        if first:
            p.forked = bool(r.get("forked"))
            p.ppid = r.get("ppid", p.ppid)
        p.cmd = _argv_text(r.get("argv")) or p.cmd
        p.argv = [str(a) for a in r["argv"]] if isinstance(r.get("argv"), list) else p.argv
        p.cwd = r.get("cwd") or p.cwd
        p.last = seen(r)
        p.env = r.get("env") or p.env
        p.rank = r.get("rank") or p.rank
        p.python = r.get("python") or p.python
        p.executable = r.get("executable") or p.executable
        p.guard = bool(r.get("guard"))
        run.guard = run.guard or p.guard
        if r.get("root_pid") is not None:
            run.root_pid = run.root_pid or r["root_pid"]
        run.seen(ts)

    def visit_process_exit(self, r: dict[str, Any]) -> None:
        p = self.reg.writer(r)
        if p is None:
            return
        p.end = r["ts"]
        p.exited = True
        p.exit_how = r.get("how") or "exit"
        p.counts = {k: v for k, v in (r.get("counts") or {}).items() if isinstance(v, int)}
        p.count_times = r.get("count_times") or {}
        p.count_callers = r.get("count_callers") or {}
        p.exit_code = r["code"] if isinstance(r.get("code"), int) else p.exit_code
        count_dropped(p, r.get("dropped"))
        if p.run is not None and "below" in r and p.role == vocab.MAIN:
            self.root_below(p.run, r)

    def root_below(self, run: Run, r: dict[str, Any]) -> None:
        """The root's live descendants at its exit: members by descent, seen before the watcher's verdict."""
        run.below = [self.reg.subject(r["host"], e, r["ts"], run) for e in r.get("below") or ()]
        for q in run.below:
            q.via = q.via or "child"
        count = r.get("below_count")
        run.below_count = count if count is not None else len(run.below)

    def visit_exec(self, r: dict[str, Any]) -> None:
        """A process about to exec: it becomes `executable` unless a later record of it says the exec failed."""
        p = self.reg.writer(r)
        if p is not None:
            p.exec_into = r

    def visit_call(self, r: dict[str, Any], blocked: bool = False) -> None:
        p = self.reg.writer(r)
        if p is None:
            return
        c = new_call(p, r, blocked, self.reg.shared, self.reg.share)
        # where p was last seen: this call (its Call holds the record's target, but for none: "?", the record's own)
        p.last = c if c.target != "?" else seen(r)
        p.last_return = False
        if c.call_id is not None and not blocked:
            p.calls[c.call_id] = c
        self.reg.model.calls.append(c)
        tagged = self.reg.model.tagged.get(c.tag)
        if tagged is None:
            tagged = self.reg.model.tagged[c.tag] = []
        tagged.append(c)
        if blocked:
            if p.run is not None:
                p.run.blocked.append(c)
        elif c.tag not in _CALL_TAGS:
            return  # nearly every call: nothing more to fold at its start
        elif c.tag == targets.POOL_CREATE or (c.tag == targets.TRACKED_POOL and c.parent is not None
                                              and c.parent.tag == targets.PROCESS_POOL):
            # A TrackedProcessPoolExecutor made by AsyncCompile.process_pool (fork or spawn) is a pool of its
            # own; the one a sidecar makes for its workers (SubprocMain._start_pool) is its SubprocPool's.
            c.pool = Pool(p, c, SUBPROC if c.tag == targets.POOL_CREATE else EXECUTOR, r.get("stack"))
            p.pools.append(c.pool)
            p.open_pool = c.pool
            self.reg.model.pools.append(c.pool)
        elif c.tag in AUTOTUNE_TAGS:
            autotune.on_call(c, self.reg.model)

    def visit_blocked(self, r: dict[str, Any]) -> None:
        self.visit_call(r, blocked=True)

    def visit_return(self, r: dict[str, Any]) -> None:
        p = self.reg.writer(r)
        if p is None:
            return
        c = p.calls.get(r.get("call_id", -1))
        if c is None or c.end is not None:
            p.last = seen(r)
            return
        c.end = r["ts"]
        p.last, p.last_return = c, True
        c.error = r.get("error")
        # What the return captured (sidecar_pid, worker_pids, ...); not the record itself, which a
        # long run has hundreds of thousands of.
        c.ret = (_NO_RETURN_FIELDS if _RETURN_OWN.issuperset(r)
                 else {k: v for k, v in r.items() if k not in _RETURN_OWN})
        if c.pool is not None:
            sidecar = r.get("sidecar_pid")
            if sidecar is not None:
                c.pool.sidecar_pid = sidecar
                p.pool_by_sidecar[sidecar] = c.pool
        if c.tag not in _RETURN_TAGS:
            return  # nearly every return: nothing more to fold at its end
        if c.tag == targets.SIDECAR_POOL_START:
            p.worker_pids.update(r.get("worker_pids") or ())
            if r.get("worker_pids"):  # SubprocMain.__init__ from 2.9 starts none (lazy _start_pool)
                p.pool_starts.append(r["ts"])
        elif c.tag == targets.WAIT_POOL_READY and not c.error:
            pool = p.open_pool
            if pool is not None and pool.ready_at is None:
                pool.ready_at = c.end
        elif c.tag == targets.SIDECAR_SHUTDOWN:
            p.served = True
            p.served_at = c.ts if p.served_at is None else p.served_at
        elif c.tag in POOL_COUNTS:
            credit_pool(c)

    def visit_config(self, r: dict[str, Any]) -> None:
        p = self.reg.writer(r)
        if p is None:
            return
        p.knobs, p.env_changed = [k for k in r.get("knobs") or () if isinstance(k, str)], _env_changed(r)
        if p.run is not None:
            p.run.configs.append((p, r.get("settings") or {}, r.get("torch_version") or ""))

    def visit_tracer_error(self, r: dict[str, Any]) -> None:
        p = self.reg.writer(r)
        watcher = p is None
        run = self.reg.record_run(r) if p is None else p.run or self.reg.run("")
        if not watcher and r.get("where") == vocab.WATCHER and not run.no_watcher:
            run.no_watcher = str(r.get("error") or "")  # the root says why it started no watcher: not a fault
            return
        if watcher and isinstance(r.get("dropped"), int):
            run.watcher_dropped = max(run.watcher_dropped, r["dropped"])
            return  # the count, said again in watcher_exit: a finding of its own, not an error
        if p is not None and r.get("where") == "log" and isinstance(r.get("dropped"), int):  # the sink's count
            count_dropped(p, r["dropped"])  # (runtime/sink.py; a watcher's count returned above)
            return
        if r.get("where") == LIVE_EXPORT:
            run.export_errors.append(str(r.get("error") or ""))  # the receiver's failure: no record was lost
            return
        run.tracer_errors.append(f"pid {r['pid']}: {r.get('where', '')}: {r.get('error', '')}")

    def visit_error(self, r: dict[str, Any]) -> None:
        p = self.reg.writer(r)
        if p is not None:
            p.errors.append(r)

    def visit_watcher_start(self, r: dict[str, Any]) -> None:
        run = self.reg.record_run(r)
        run.watcher_started[(r["host"], r["pid"])] = r["ts"]
        if isinstance(r.get("oom_kill"), int):
            run.oom_start = r["oom_kill"]
        if isinstance(r.get("interval"), (int, float)):
            run.interval = max(run.interval, float(r["interval"]))

    def visit_watcher_exit(self, r: dict[str, Any]) -> None:
        run = self.reg.record_run(r)
        run.watcher_exit = r.get("reason") or vocab.EXIT_ERROR
        if isinstance(r.get("dropped"), int):
            run.watcher_dropped = max(run.watcher_dropped, r["dropped"])

    def visit_tree(self, r: dict[str, Any]) -> None:
        run = self.reg.record_run(r)
        host, ts = r["host"], r["ts"]
        run.last_sample = ts
        for entry in r.get("started") or ():
            if (host, entry["pid"]) not in run.watcher_pids:
                p = self.reg.subject(host, entry, ts, run)
                p.via = entry.get("via") or p.via
                p.pgid = entry.get("pgid", p.pgid)
                note_limits(p, entry)
                run.possible.pop((host, p.pid, p.create_time), None)
        for entry in r.get("possible") or ():
            ct = entry.get("create_time")
            key = (host, entry["pid"], round(ct, 2) if ct is not None else None)
            if key[2] is None or key not in self.reg.by_start:
                run.possible[key] = entry
        for entry in r.get("ended") or ():
            gone = self.reg.find(host, entry)
            if gone is not None and gone.gone is None:
                gone.gone = entry.get("end", ts)
                gone.seen = entry.get("seen")
        tree_zombies(self.reg, host, r)
        for entry in r.get("rss") or ():
            seen = self.reg.find(host, entry)
            if seen is not None:
                self.reg.note_rss(seen, entry.get("rss"))
        if r.get("count") is not None:
            run.tree_counts.append((ts, r["count"]))
        run.final_seen = run.final_seen or bool(r.get("final"))

    def visit_run_exit(self, r: dict[str, Any]) -> None:
        """`wp-autotrace run`'s record of the status it waited for: its main process's (by root pid, at finish)."""
        self.reg.run_exits.append(r)

    def visit_memory(self, r: dict[str, Any]) -> None:
        """The watcher's PSS/USS samples of pool processes, and the device files they hold."""
        run = self.reg.record_run(r)
        host, ts = r["host"], r["ts"]
        for entry in r.get("procs") or ():
            p = self.reg.find(host, entry)
            if p is not None and entry.get("pss") is not None:
                add_sample(p, ts, entry)
        for entry in r.get("devices") or ():
            p = self.reg.find(host, entry)
            if p is not None:
                p.devices = sorted(set(p.devices) | set(entry.get("paths") or ()))
        del run

    def visit_leftover(self, r: dict[str, Any]) -> None:
        run = self.reg.record_run(r)
        run.leftover_seen = True
        run.leftover_how = r.get("how") or run.leftover_how or vocab.ROOT_EXIT
        host = r["host"]
        listed = {e["pid"] for e in r.get("procs") or ()}
        for entry in r.get("procs") or ():
            run.leftover[self.reg.subject(host, entry, r["ts"], run)] = dict(entry, seen_at=r["ts"])
        for pid in r.get("pids") or ():
            if pid not in listed:
                run.leftover[self.reg.subject(host, {"pid": pid}, r["ts"], run)] = {"pid": pid, "seen_at": r["ts"]}
        count = r.get("count")
        run.leftover_count = max(run.leftover_count, count if count is not None else len(run.leftover))


def build(records: Iterable[dict[str, Any]], waited: Waited | None = None) -> Model:
    """Fold checked records (logread) in time order into a Model; waited: what `run` saw of its program."""
    return Builder(waited).fold(records)


def tree_zombies(reg: Registry, host: str, r: dict[str, Any]) -> None:
    """Members the watcher wrote off while defunct (their parent, since when, their wait status), and
    their reaping (docs/evidence.md): found through the registry, as any watcher record's subjects."""
    for entry in r.get("zombies") or ():
        p = reg.find(host, entry)
        if p is not None:
            p.zombie = dict(entry)
    for entry in r.get("reaped") or ():
        p = reg.find(host, entry)
        if p is not None and p.zombie is not None:
            p.zombie["reaped"] = entry.get("end", r["ts"])


def note_unwritten(reg: Registry, r: dict[str, Any]) -> None:
    """A process_exit that found no descriptor (the watcher's exit_unwritten): its records are counted lost, and
    what it would have said is kept; its ending says so (never a kill). Only a process of the record's run."""
    run = reg.record_run(r)
    p = reg.find(r["host"], {"pid": r["exited_pid"], "create_time": r.get("create_time")}) \
        if isinstance(r.get("exited_pid"), int) else None
    if p is None or p.run is not run:
        return
    p.exit_unwritten = {k: r[k] for k in ("how", "code") if k in r}
    count_dropped(p, r.get("dropped") if isinstance(r.get("dropped"), int) else p.dropped + 1)


def note_signal(reg: Registry, r: dict[str, Any]) -> None:
    """A signal about to go to another process (signal_sent); the same record with `error` marks that one as
    failed (the signal did not go)."""
    p = reg.writer(r)
    if p is None:
        return
    if r.get("error"):
        key = (r.get("how"), r.get("target"), r.get("signal"))
        sent = next((s for s in reversed(p.sent) if (s.get("how"), s.get("target"), s.get("signal")) == key
                     and not s.get("error")), None)
        if sent is not None:
            sent["error"] = r["error"]
        return
    p.sent.append(r)


def note_oom(reg: Registry, r: dict[str, Any]) -> None:
    """The watcher's count of its run's cgroup OOM kills went up: when, from what to what, since when."""
    run = reg.record_run(r)
    if isinstance(r.get("oom_kill"), int) and isinstance(r.get("before"), int):
        since = r.get("since")
        run.ooms.append((r["ts"], r["before"], r["oom_kill"], since if isinstance(since, (int, float)) else None,
                         r["host"]))


def note_limits(p: Process, entry: dict[str, Any]) -> None:
    """What the watcher read of a joining process's limits: its ulimit -u with its uid, and its memory cgroup."""
    if "nproc" in entry and "uid" in entry:
        p.nproc = (entry["nproc"], entry["uid"])
    p.memcg = entry.get("memcg", p.memcg)
    p.pidcg = entry.get("pidcg", p.pidcg)


def note_memcg(reg: Registry, r: dict[str, Any]) -> None:
    """A memory cgroup of the run's processes, read by the watcher as its first process joined (its limit, where one
    is set) and, with a limit, again at its end (`final`: the peak charge then)."""
    if isinstance(r.get("path"), str):
        reg.record_run(r).memcgs.setdefault((r["host"], r["path"]), []).append(r)


def note_pidcg(reg: Registry, r: dict[str, Any]) -> None:
    """A pids cgroup of the run's processes, read as its first process joined and again at the watcher's end."""
    if isinstance(r.get("path"), str):
        reg.record_run(r).pidcgs.setdefault((r["host"], r["path"]), []).append(r)


def note_orphan_fds(reg: Registry, r: dict[str, Any]) -> None:
    """What pool processes held once orphaned (watcher/fds.py): entries of a known shape only (`procs` is read
    as any JSON): their listening sockets, and the pipe their creator's parent read."""
    procs = r.get("procs")
    for e in procs if isinstance(procs, list) else ():
        if not isinstance(e, dict) or not isinstance(e.get("pid"), int) or not isinstance(
                e.get("create_time"), (int, float)):
            continue
        listen = [h for h in e.get("listen") or () if isinstance(h, dict) and isinstance(h.get("port"), int)
                  and isinstance(h.get("proto"), str) and isinstance(h.get("addr"), str)]
        read_by = e.get("read_by")
        entry = {"create_time": e["create_time"], "listen": listen, "ts": r["ts"],
                 "creator": e.get("creator") if isinstance(e.get("creator"), int) else None,
                 "read_by": None, "read_fds": []}
        if isinstance(read_by, dict) and isinstance(read_by.get("pid"), int) and isinstance(read_by.get("fds"), list):
            entry["read_by"], entry["read_fds"] = read_by["pid"], [x for x in read_by["fds"] if isinstance(x, int)]
        reg.record_run(r).orphan_fds[(r["host"], e["pid"])] = entry


# Visits that need only the Registry, outside the Builder (which is at its size).
def add_job(reg: Registry, r: dict[str, Any]) -> None:
    """A pool worker took a job, or ended the one it took (runtime/jobs.py): one span per job."""
    p = reg.writer(r)
    if p is None:
        return
    jobs = p.jobs_run
    if r.get("state") == "start":
        if jobs and jobs[-1].end is None:  # its end record was lost (a full disk): it ended by this next start
            jobs[-1].end = r["ts"]
        jobs.append(JobSpan(r))
    elif r.get("state") == "end" and jobs and jobs[-1].end is None and jobs[-1].work_id == r.get("work_id"):
        jobs[-1].end = r["ts"]  # a worker runs one job at a time: an end is its last start's


def note_spawned(reg: Registry, r: dict[str, Any]) -> None:
    """A worker of the writer's torch compile executor, named by the writer as concurrent.futures started it
    (worker_spawned): its pool's from its start (finish.executor_members), before the worker's own `role` record,
    which a worker killed while it imports never writes."""
    p, pid = reg.writer(r), r.get("worker_pid")
    if p is not None and isinstance(pid, int):
        p.spawned.append((pid, r["ts"]))


def note_test(reg: Registry, r: dict[str, Any]) -> None:
    """A pytest test began or ended in the writer (the pytest plugin)."""
    p = reg.writer(r)
    if p is not None:
        p.tests.append((r["ts"], r.get("nodeid") or "?", r.get("phase") or ""))


def add_import(reg: Registry, r: dict[str, Any]) -> None:
    """A watched import in the writer (note_import)."""
    p = reg.writer(r)
    if p is not None:
        note_import(p, r)


def note_role(reg: Registry, r: dict[str, Any]) -> None:
    """The writer took a new role."""
    p = reg.writer(r)
    if p is not None:
        p.role = r.get("role") or p.role


REGISTRY_VISITS: dict[str, Callable[[Registry, dict[str, Any]], None]] = {
    schema.EXIT_UNWRITTEN: note_unwritten, schema.JOB: add_job, vocab.OOM: note_oom, vocab.MEMCG: note_memcg,
    vocab.PIDCG: note_pidcg, vocab.ORPHAN_FDS: note_orphan_fds, vocab.SIGNAL_SENT: note_signal,
    vocab.WORKER_SPAWNED: note_spawned, vocab.TEST: note_test, vocab.IMPORT: add_import, vocab.ROLE: note_role}


def note_import(p: Process, r: dict[str, Any]) -> None:
    """A watched import: when it began and the memory then (the latest: an exec'd image imports it again)."""
    module, rss = r.get("module"), r.get("rss")
    if isinstance(module, str):
        p.imports[module] = (r["ts"], rss if isinstance(rss, int) else None)


def count_dropped(p: Process, said: Any) -> None:
    """A process's lost records: its tracer_error (`where` log) once the log took records again, then its
    process_exit, each the count so far; the run counts each process's largest once."""
    if isinstance(said, int) and said > p.dropped and p.run is not None:
        p.run.dropped += said - p.dropped
        p.dropped = said


def add_sample(p: Process, ts: float, entry: dict[str, Any]) -> None:
    """One watcher sample of p: its PSS and USS, and the threads and CPU so far read with them, where read."""
    p.mem.append((ts, entry["pss"], entry.get("uss") or 0))
    if entry.get("threads"):
        p.threads[ts] = entry["threads"]
    if isinstance(entry.get("cpu_s"), (int, float)):
        p.cpu[ts] = entry["cpu_s"]
