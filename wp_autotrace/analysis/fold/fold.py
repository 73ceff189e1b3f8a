"""The fold: log records, in time order, into a Model (model.py). One ``visit_<event>`` per event.

Builder holds a Registry (identities.py: which process and run a record is about) and ends with
finish.py (what comes after the last record). It folds the traced processes' own records; the watcher's are
folded by watched.py, through the same Registry. A pure function of the records: what depends on when and where the
log is read is verdict.py's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from functools import partial
from typing import Any, Callable

from ...common import targets, vocab
from ...common.vocab import SPAWNED_ARG
from ..read import schema
from ..read.records import Record
from . import autotune, watched
from .calls import STOP_CALLS, new_call, plain_call
from .finish import POOL_COUNTS, credit_pool, finish
from .identities import Registry
from .model import EXECUTOR, LIVE_EXPORT, SUBPROC, Call, JobSpan, Model, Pool, Process, Run, Waited, seen

# A return record's fields that are not what the call returned: kept on the Call elsewhere or not at all.
_RETURN_OWN = frozenset((*vocab.HEADER_KEYS, "call_id", "duration_s", "error"))
# The calls fold/autotune.py folds into autotune pools.
AUTOTUNE_TAGS = frozenset((targets.AUTOTUNE_POOL, targets.AUTOTUNE_START, targets.AUTOTUNE_STOP,
                           targets.AUTOTUNE_KILL, targets.QUACK_PRECOMPILE, targets.QUACK_SHUTDOWN))
_NO_RETURN_FIELDS: dict[str, Any] = {}  # shared by every call that captured nothing; never changed
_new = object.__new__
# The tags whose call (visit_call) or return (visit_return) folds more than the Call: one set test for the rest.
_CALL_TAGS = frozenset((targets.POOL_CREATE, targets.TRACKED_POOL, *AUTOTUNE_TAGS))
_CALL, _RETURN, _JOB, _WATCHER = vocab.CALL, vocab.RETURN, vocab.JOB, vocab.WATCHER
_RETURN_TAGS = frozenset((targets.SIDECAR_POOL_START, targets.WAIT_POOL_READY, targets.SIDECAR_SHUTDOWN, *POOL_COUNTS))


def _argv_text(argv: Any) -> str:
    return " ".join(argv) if isinstance(argv, list) else ""


def _env_changed(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A config record's env_changed entries that name their variable (env_watch's changes before it loaded); a
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
        # a typed record's fold where its writer did only what it does for every record (fold() decides)
        self._plain: dict[str, Callable[[Process, Any], None]] = {
            _CALL: self._plain_call, _RETURN: self._plain_return, _JOB: self._plain_job}

    def fold(self, records: Iterable[Record]) -> Model:
        """Every record, then finish(): the whole log's model."""
        reg = self.reg
        handlers, in_namespace, plain = self._handlers, reg.in_namespace, self._plain
        current, watchers = reg.current, reg.watchers
        # The cyclic collector off while folding: records are freed by reference counting, what the
        # model keeps lives to the end, and each collection would walk every object kept so far
        # (~20% of a 1M-record report's CPU, growing with the log).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for r in records:
                if type(r) is not dict:  # a typed record (read/fastread.py): the same values as attributes
                    if r.pidns is not None:  # a container's writer's: every record of its log
                        r.host = in_namespace(r.host, r.pidns)
                    # Registry.writer(r) where all it does is what it does for every record (widen the run's span
                    # to r), then r's plain fold (_PLAIN), with no second read of its fields. Else (a new process or
                    # a watcher's, a role r first names, a process after its exec record, one of no run, a cut
                    # record) r's visit, whose writer does all it does.
                    role, ts = r.role, r.ts
                    key = (r.host, r.pid)  # made once for both lookups
                    p = current.get(key)
                    if (p is None or role == _WATCHER or (role and not p.role) or p.exec_into is not None
                            or p.run is None or r.truncated is not None or key in watchers):
                        handlers[r.event](r)
                        continue
                    run = p.run
                    if run.start is None or ts < run.start:  # run.seen(ts), as the writer has it
                        run.start = ts
                    if run.end is None or ts > run.end:
                        run.end = ts
                    plain[r.event](p, r)
                    continue
                if "pidns" in r:  # written only outside the initial pid namespace: a few records of most logs
                    r["host"] = in_namespace(r["host"], r["pidns"])
                handlers[r["event"]](r)
        finally:
            if collecting:
                gc.enable()
        self.finish()
        return self.reg.model

    def feed(self, r: dict[str, Any]) -> Process | None:  # a live reader's dicts (Tail): never typed
        """Fold one record (in time order); the process that wrote it (None for the watcher's).

        Between feeds the model answers what the records so far say (processes, runs, calls); the
        links finish() adds (children, pool sidecars, roots, ends from `gone`) come once, at the end.
        """
        if "pidns" in r:
            r["host"] = self.reg.in_namespace(r["host"], r["pidns"])
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
        self.reg.home_ns.setdefault(host, None)  # its first traced process's (in_namespace set it where it has one)
        run = self.reg.run(r.get("run") or "")
        # the watcher's entry of it, if read first, by its start ticks on the watcher's clock (identities.py)
        at = self.reg.on_watcher_clock(host, run, r.get("start_ticks"))
        p = self.reg.by_start.get((host, pid, at)) if at is not None else None
        if p is None and ct is not None:
            p = self.reg.by_start.get((host, pid, round(ct, 2)))
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
        self.reg.file_ticks(p, run, r.get("start_ticks"))
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
        p.exit_error = r["error"] if isinstance(r.get("error"), str) else p.exit_error
        if "uid_tasks" in r and "uid" in r:
            p.refused = {k: r[k] for k in ("error", "uid", "uid_tasks", "nproc") if k in r}
        count_dropped(p, r.get("dropped"))
        if p.run is not None and "below" in r and p.role == vocab.MAIN:
            self.root_below(p.run, r)

    def root_below(self, run: Run, r: dict[str, Any]) -> None:
        """The root's live descendants at its exit: members by descent, seen before the watcher's verdict."""
        host = r["host"]
        run.below = [self.reg.subject(host, self.reg.entry_on_watcher_clock(host, run, e), r["ts"], run)
                     for e in r.get("below") or ()]
        for q in run.below:
            q.via = q.via or "child"
        count = r.get("below_count")
        run.below_count = count if count is not None else len(run.below)

    def visit_exec(self, r: dict[str, Any]) -> None:
        """A process about to exec: it becomes `executable` unless a later record of it says the exec failed."""
        p = self.reg.writer(r)
        if p is not None:
            p.exec_into = r

    def visit_call(self, r: Record, blocked: bool = False) -> None:
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

    def _plain_call(self, p: Process, r: Any) -> None:
        """A typed call record (read/fastread.py) of a plain writer (fold() decides) folded in one step where its
        Call is plain (plain_call): what visit_call does with it, with no second read of its fields (the fold's
        most frequent record). Any call visit_call treats otherwise (a process that exec'd or was spawned, a stop
        request, no target or tag, a tag it folds further) goes to visit_call. tests/test_typedread.py: the same
        Calls and report as the dicts', which never come here."""
        target, tag = r.target, r.tag
        if (not target or target == "?" or not tag or tag in _CALL_TAGS or target.endswith(STOP_CALLS) or p.execs
                or SPAWNED_ARG in p.argv):
            self.visit_call(r)
            return
        reg = self.reg
        c = plain_call(p, r, target, tag, reg.shared, reg.share)
        call_id = c.call_id
        p.last, p.last_return = c, False
        if call_id is not None:
            p.calls[call_id] = c
        model = reg.model
        model.calls.append(c)
        tagged = model.tagged.get(c.tag)
        if tagged is None:
            tagged = model.tagged[c.tag] = []
        tagged.append(c)

    def visit_blocked(self, r: dict[str, Any]) -> None:
        self.visit_call(r, blocked=True)

    def _plain_return(self, p: Process, r: Any) -> None:
        """A typed return record of a plain writer (fold() decides) that ends a call: what visit_return does with it
        (a typed return holds no captured field; its tag's folding is fold_end's, as visit_return's). A return of
        no call or of one ended already goes to visit_return."""
        c = p.calls.get(r.call_id)
        if c is None or c.end is not None:
            self.visit_return(r)
            return
        p.last, p.last_return = c, True
        c.end, c.error, c.ret = r.ts, r.error, _NO_RETURN_FIELDS
        if c.tag in _RETURN_TAGS:
            fold_end(p, c, r)

    def _plain_job(self, p: Process, r: Any) -> None:
        """A typed job record of a plain writer (fold() decides): its last record, then its job spans, as add_job
        folds it."""
        ts = r.ts
        p.last = (r.event, ts, r.target, r.signal)  # model.seen(r), as the writer has it
        job_span(self.reg, p, r.state, ts, r.work_id, r.fn, r.arg)

    def visit_return(self, r: Record) -> None:
        p = self.reg.writer(r)
        if p is None:
            return
        typed = type(r) is not dict  # a typed return (read/fastread.py) has _RETURN_OWN's fields alone
        c = p.calls.get(r.call_id if typed else r.get("call_id", -1))  # (its None: no call's key, as -1)
        if c is None or c.end is not None:
            p.last = seen(r)
            return
        p.last, p.last_return = c, True
        if typed:
            c.end, c.error, c.ret = r.ts, r.error, _NO_RETURN_FIELDS
        else:
            c.end, c.error = r["ts"], r.get("error")
            # What the return captured (sidecar_pid, worker_pids, ...); not the record itself, which a
            # long run has hundreds of thousands of.
            c.ret = (_NO_RETURN_FIELDS if _RETURN_OWN.issuperset(r)
                     else {k: v for k, v in r.items() if k not in _RETURN_OWN})
        if c.pool is not None:
            sidecar = r.get("sidecar_pid")
            if sidecar is not None:
                c.pool.sidecar_pid = sidecar
                p.pool_by_sidecar[sidecar] = c.pool
        if c.tag in _RETURN_TAGS:  # a tag whose end folds more than the Call's (few returns of most logs)
            fold_end(p, c, r)

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


def fold_end(p: Process, c: Call, r: Record) -> None:
    """What a return of a call of one of _RETURN_TAGS folds beyond the Call's end (c ended by r)."""
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


def build(records: Iterable[Record], waited: Waited | None = None) -> Model:
    """Fold checked records (logread) in time order into a Model; waited: what `run` saw of its program."""
    return Builder(waited).fold(records)


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


# Visits of the processes' own records that need only the Registry.
def add_job(reg: Registry, r: Record) -> None:
    """A pool worker took a job, or ended the one it took (runtime/jobs.py): one span per job."""
    p = reg.writer(r)
    if p is None:
        return
    if type(r) is dict:
        get = r.get
        job_span(reg, p, get("state"), r["ts"], get("work_id"), get("fn"), get("arg"))
    else:  # a typed record (read/fastread.py): the same values as attributes
        job_span(reg, p, r.state, r.ts, r.work_id, r.fn, r.arg)


def job_span(reg: Registry, p: Process, state: Any, ts: float, work_id: Any, fn: Any, arg: Any) -> None:
    """A job record's values (state, ts, work_id, fn, arg) into p's job spans."""
    jobs = p.jobs_run
    last = jobs[-1] if jobs else None
    if state == "start":
        if last is not None and last.end is None:  # its end record was lost (a full disk): it ended by this start
            last.end = ts
        # One string per job function and kernel name, as for a call's target: a long run's jobs repeat a few
        # functions, and every rank compiles the same kernels; the spans are kept to the end.
        shared = reg.shared
        if fn is not None:
            fn = shared.setdefault(fn, fn)
        if arg is not None:
            arg = shared.setdefault(arg, arg)
        span: JobSpan = _new(JobSpan)  # no __init__: half of a long run's records start a job
        span.work_id, span.fn, span.arg, span.start, span.end = work_id, fn, arg, ts, None
        jobs.append(span)
    elif state == "end" and last is not None and last.end is None and last.work_id == work_id:
        last.end = ts  # a worker runs one job at a time: an end is its last start's


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
    schema.EXIT_UNWRITTEN: note_unwritten, schema.JOB: add_job, vocab.SIGNAL_SENT: note_signal,
    vocab.WORKER_SPAWNED: note_spawned, vocab.TEST: note_test, vocab.IMPORT: add_import, vocab.ROLE: note_role,
    **watched.VISITS}


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


