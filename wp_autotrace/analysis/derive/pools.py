"""Each compile pool's story: who made it where, when it was ready, its jobs, its idle span,
who asked it to stop, its workers, and the real memory it held.

Derived from the model (model.Pool, its creator's calls and counts, its sidecar's
process and the watcher's PSS samples); findings/pools.py and report.py read it.

Definitions (one home; the report's JSON keys carry these names):

- pool processes: the sidecar and its descendants (the compile workers it forks).
- busy spans: the union of its workers' job spans (each worker's `job` records, from a job's start to its end;
  one never ended, to its worker's end), the ready probe included. busy until: the end of the last of them, or
  when it was ready if later. Only where no worker wrote job records (older logs), from its creator's side: its
  last job (its creator's last counted submit), else when it was ready, else when it was made; until its
  creator's last wait on its jobs returned (waited_until); until its shutdown with jobs pending.
- idle span: from busy-until to the first of: the shutdown request, the sidecar's
  end, the run's last record. A quiesce inside the span stops the workers; the
  sidecar holds its own memory until the span ends.
- real memory: the watcher's PSS samples (watcher/memory.py). PSS splits shared
  pages among the processes sharing them, so a pool's memory is the sum of its
  processes' PSS at one moment (memseries: memory at once); RSS is never summed.
  held = the most at one moment inside the idle span, from the samples taken inside
  it (a sample from before is stale: a sidecar's first comes right after exec,
  before its imports). idle_mib_s (and each gap's, and the orphaned span's) = the
  pool's memory at once integrated over the span, in MiB x seconds (memseries.Memory:
  the one sweep that makes its series and peak), so a reading counts its run's window at most (stale_s)
  and a process unread then adds nothing (idle_unread_s, idle_total_unread_s: for how long). A process
  alive in the span with no sample in it counts in neither: span_processes /
  span_sampled say how many were covered, and the text says "N of M" when not all.
- idle CPU: the CPU seconds (utime + stime) the pool's processes used in the idle span, from the watcher's
  samples inside it (each process's last less its first); said with the part of the span those samples cover.
- who asked for the shutdown: user code (a user frame called SubprocPool.shutdown
  or shutdown_compile_workers), torch's atexit (shutdown_compile_workers with no
  user frame), the pool's reader thread (its sidecar closed the pipe first), or
  torch's multiprocessing finalizer at exit.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...common import targets, vocab
from ..fold.autotune import jobs_unbounded
from ..fold.model import EXECUTOR, SOURCELESS_FILES, Call, JobSpan, Pool, Process
from ..words.fmt import IDLE_AFTER_WORDS, MIB
from .counts import counts_at
from .gaps import IdleGap, idle_gaps
from .memseries import Memory, Point, lived_mem, peak, peak_at_once

# torch's names for the threads that call into a pool on their own (its quiesce Timer, its pipe reader).
QUIESCE_TIMER_THREAD = "subproc_worker_timer"
READER_THREAD = "InductorSubproc"
MAIN_THREAD = "MainThread"  # threading's name for the interpreter's main thread, where atexit runs
# Who asked a pool to stop (the story's `shutdown_by`).
BY_USER = "user code"
BY_ATEXIT = "torch's atexit (shutdown_compile_workers)"
BY_READER = "the pool's reader thread (its sidecar had closed the pipe)"
BY_FINALIZER = "torch's multiprocessing finalizer at exit"
BY_POOL_ATEXIT = "torch's atexit (the pool's own shutdown, registered as the pool was made)"
BY_TIMER = "the quiesce timer"


# Where a sidecar logs one job's failure (torch's done-callback for each job, SubprocMain._submit_inner): the job
# raised, or its worker ended abruptly (BrokenProcessPool, after which the sidecar makes new workers). The sidecar
# goes on serving: such an error is not its main() raising.
JOB_ERROR_FRAME = ("compile_worker/subproc_pool.py", "callback")


def own_errors(p: Process) -> list[dict[str, Any]]:
    """The process's error records that are its own failure, not one job's failure its sidecar logged."""
    path, func = JOB_ERROR_FRAME
    return [e for e in p.errors if not any(isinstance(f, dict) and f.get("func") == func
                                           and str(f.get("file", "")).endswith(path) for f in e.get("frames") or ())]


def broken_jobs(side: Process) -> list[dict[str, Any]]:
    """The sidecar's job errors (torch's job callback logged them, not its main()) that say a worker ended
    abruptly: BrokenProcessPool, before anything asked the sidecar to stop (torch 2.13's shutdown ends the
    workers at once: the jobs it cuts off are jobs-cut-off's, no worker lost)."""
    own = {id(e) for e in own_errors(side)}
    stop = side.served_at
    return [e for e in side.errors if id(e) not in own and e.get("exc_type") == "BrokenProcessPool"
            and (stop is None or e["ts"] < stop)]


def _stdlib_names() -> frozenset[str]:
    """The standard library's top-level module names: sys.stdlib_module_names (3.10+); on 3.9, which has no
    such set, the modules in this interpreter's standard library folders and its built-in ones, less the
    test package (3.10's set leaves it out). The same log then gets the same advice on every supported
    Python, as far as their standard libraries agree."""
    import sys

    names: frozenset[str] | None = getattr(sys, "stdlib_module_names", None)
    if names is None:
        import pkgutil
        import sysconfig

        folders = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
        folders |= {f"{f}/lib-dynload" for f in folders}
        names = frozenset(m.name for m in pkgutil.iter_modules(sorted(folders))) - {"test"}
        names |= frozenset(sys.builtin_module_names)
    return names


def shadowing(file: str) -> tuple[str, str] | None:
    """(name, folder) where the module file `file` is named like a standard library module but is not the
    standard library's (a stale backport in site-packages, a folder put on sys.path); None otherwise. folder is
    where the name is found (a package's parent folder)."""
    if not file.endswith(".py"):
        return None
    folder, _, base = file.rpartition("/")
    name = folder.rpartition("/")[2] if base == "__init__.py" else base[:-3]
    where = folder.rpartition("/")[0] if base == "__init__.py" else folder
    in_stdlib = "/lib/python" in file and not any(x in file.split("/") for x in ("site-packages", "dist-packages"))
    return None if in_stdlib or name not in _stdlib_names() else (name, where)


def user_frame(frame: dict[str, Any] | None) -> dict[str, Any] | None:
    """frame if it is user code with a file (not python -c's <string>), else None."""
    return frame if frame and frame.get("file") not in SOURCELESS_FILES else None


def requester(c: Call) -> tuple[str, dict[str, Any] | None]:
    """Who made a shutdown (or quiesce) call, and the user's frame when it was user code."""
    if c.thread == QUIESCE_TIMER_THREAD:
        return BY_TIMER, None
    if c.at_exit:  # its caller is the frame the process was forked at: nobody's request
        return BY_FINALIZER, None
    own = user_frame(c.caller)
    if own is not None and c.parent is None:
        return BY_USER, own
    parent = c.parent
    if parent is not None and parent.tag == targets.EXIT_SHUTDOWN:
        frame = user_frame(parent.caller)
        return (BY_USER, frame) if frame is not None else (BY_ATEXIT, None)
    if own is not None:
        return BY_USER, own
    if c.thread == READER_THREAD:
        return BY_READER, None
    if c.by_interpreter and parent is None and c.thread == MAIN_THREAD:  # atexit ran pool.shutdown itself
        return BY_POOL_ATEXIT, None
    return BY_FINALIZER, None


def fx_subprocess(pool: Pool) -> bool:
    """Is the pool the FX-subprocess compile pool (TORCHINDUCTOR_FX_COMPILE_MODE=subprocess, torch 2.7+): a
    SubprocPool(1, kind=SPAWN) made inside _SubprocessFxCompile.process_pool, or whose sidecar has that role?
    torch's shutdown_compile_workers() never stops it (it is outside _pool_set): atexit does."""
    parent = pool.call.parent
    return bool((parent is not None and parent.tag == targets.FX_POOL)
                or (pool.sidecar is not None and pool.sidecar.role == vocab.FX_COMPILE_SIDECAR))


# The creator's calls that wait on a pool's jobs: AsyncCompile.wait (its kernels' futures), wait_pool_ready.
WAIT_TAGS = (targets.ASYNC_WAIT, targets.WAIT_POOL_READY)


class PoolIndex(NamedTuple):
    """What each pool's story looks up across the model, indexed once for all the stories (8,000 pools of one
    creator, each scanning that creator's 8,000 calls and walking the chain of sidecars below its own, took
    minutes): who heads which pool (id(process) -> pool: each pool's sidecar, or a fork/spawn pool's workers),
    and each creator's calls that wait on pool jobs (id(creator) -> its WAIT_TAGS calls)."""

    heads: dict[int, Pool]
    waits: dict[int, list[Call]]


def pool_index(pools: list[Pool]) -> PoolIndex:
    """The index of pools (all the model's: a pool of a run not chosen still has its own processes)."""
    heads = {id(q): pool for pool in pools for q in ([pool.sidecar] if pool.sidecar is not None else pool.members)}
    creators = {id(pool.creator): pool.creator for pool in pools}
    return PoolIndex(heads, {k: [c for c in p.calls.values() if c.tag in WAIT_TAGS] for k, p in creators.items()})


def pool_processes(pool: Pool, heads: dict[int, Pool]) -> list[Process]:
    """The sidecar and its descendants (iteratively: the tree can be deep); a fork/spawn pool's: its workers
    and theirs. Not another pool's (a nested pool's sidecar, members and theirs: `heads`, pool_index's of every
    pool): each process counts in one pool only, so adding the pools' rows never counts a process twice, and
    all pools' walks together visit each process once (8,000 pools each a child of the one before: linear)."""
    side = pool.sidecar
    if side is None and not pool.members:
        return []
    found: list[Process] = []
    stack, seen = [side] if side is not None else list(pool.members), set()
    while stack:
        p = stack.pop()
        if p.index in seen:
            continue
        seen.add(p.index)
        found.append(p)
        stack.extend(q for q in p.children if heads.get(id(q), pool) is pool)
    return found


def workers_of(pool: Pool) -> list[Process]:
    """The compile workers of the pool's sidecar (Process.compile_workers); a fork/spawn pool's own workers."""
    side = pool.sidecar
    return list(pool.members) if side is None else side.compile_workers()


WORKERS_ARG = "--workers="  # the sidecar's argument: the workers its pool starts (SubprocPool's nprocs)


def pool_size(pool: Pool) -> int | None:
    """The workers the pool was made for (compile_threads as torch read it then): a sidecar's --workers=N, a
    fork/spawn pool's max_workers as captured; None when the log does not say."""
    if pool.sidecar is not None:
        arg = next((a for a in pool.sidecar.argv if a.startswith(WORKERS_ARG)), "")
        return int(arg[len(WORKERS_ARG):]) if arg[len(WORKERS_ARG):].isdigit() else None
    n = pool.call.ret.get("max_workers")
    return n if isinstance(n, int) else None


def pool_end(pool: Pool) -> float | None:
    """When the pool's processes were gone: its sidecar's end; a fork/spawn pool's, its last worker's (None
    while one was not seen to end, or it had none)."""
    if pool.sidecar is not None or not pool.members:
        return pool.sidecar.ended_at if pool.sidecar is not None else None
    ends = [q.ended_at for q in pool.members]
    return None if any(e is None for e in ends) else max(e for e in ends if e is not None)


def waits_on_no_job(call: Call, pool: Pool) -> bool:
    """A wait that kept no pool busy: an AsyncCompile.wait begun with no job pending in any live compile pool (its
    captured pool_jobs is 0: it waited on work done in the process itself, on CPU the C++ compiled in the
    caller), or a wait_pool_ready begun once the pool was ready (torch keeps the done ready future until the
    pool is shut down: the call sends no job; each test of a suite calls it again). An AsyncCompile.wait without
    the capture (an older log, a torch keeping no pool set) is not known to be one."""
    if call.tag == targets.WAIT_POOL_READY:
        return pool.ready_at is not None and call.ts >= pool.ready_at
    return call.tag == targets.ASYNC_WAIT and call.at_call.get("pool_jobs") == 0


def waited_until(pool: Pool, t_end: float, calls: list[Call]) -> float | None:
    """Until when the pool's creator waited on its jobs (a wait call begun after the pool's making, or the one that
    made it, and before the pool stopped: a later wait is on another pool, or on none; not one that
    waits_on_no_job): the last such wait's return; where one never returned, or was interrupted (its job never
    came back), the pool's end, else the log's; never past the pool's stop; None without such a call. calls: the
    creator's (its WAIT_TAGS ones will do: pool_index)."""
    made = pool.call.ts
    stops = [t for t in (pool.shutdown_at, pool_end(pool)) if t is not None]
    stop = min(stops) if stops else None
    waits = [c for c in calls if c.tag in WAIT_TAGS and (c.end is None or c.end >= made)
             and (stop is None or c.ts < stop) and not waits_on_no_job(c, pool)]
    if not waits:
        return None
    if any(c.end is None or c.error for c in waits):
        end = pool_end(pool)
        until = end if end is not None else t_end
    else:
        until = max(c.end for c in waits if c.end is not None)
    return until if stop is None else min(until, stop)


def job_until(w: Process, j: JobSpan, t_end: float) -> float:
    """Until when worker w held job j: the job's end; one whose end was never written, until the worker ended,
    else until the log's end."""
    if j.end is not None:
        return j.end
    end = w.ended_at
    return end if end is not None else t_end


def busy_spans(pool: Pool, t_end: float) -> list[tuple[float, float]]:
    """The union of the pool's workers' job spans (each job from its start to job_until), merged, earliest
    first: when at least one worker of the pool held a job. The ready probe (the pool's first job) is one of
    them: it ends before the pool is ready. [] where no worker of the pool wrote a job record."""
    spans = sorted((j.start, job_until(w, j, t_end)) for w in workers_of(pool) for j in w.jobs_run)
    out: list[tuple[float, float]] = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def creator_busy_until(pool: Pool, t_end: float, index: PoolIndex, ready_at: float | None, start: float) -> float:
    """Until when a pool whose workers wrote no job records (older logs) was busy, inferred from its creator's
    side: its last counted submit, else when it was ready, else start (its serving loop's, else its making);
    never past its sidecar's end; until its shutdown where jobs were pending as it was asked; until its creator's
    last wait on its jobs returned (waited_until)."""
    side_end = pool_end(pool)
    busy = max((t for t in (pool.last_job, ready_at) if t is not None), default=start)
    if side_end is not None and busy > side_end:
        busy = side_end  # jobs sent after its sidecar ended were lost, not served
    req = pool.shutdown_call
    if req is not None and req.at_call.get("pending_jobs"):
        # jobs still pending when the shutdown was asked (torch's own list, captured by the call record):
        # the pool was working on them until then, or until its sidecar died with them (lost): not idle
        stops = [t for t in (pool.shutdown_at, side_end) if t is not None]
        busy = max(busy, min(stops)) if stops else busy
    waits = index.waits.get(id(pool.creator))
    waited = waited_until(pool, t_end, list(pool.creator.calls.values()) if waits is None else waits)
    return busy if waited is None else max(busy, waited)  # its creator waited on its jobs until then: not idle


# A pool whose processes lived this long after its creator ended outlived it (orphans: nobody can use or stop
# them; whoever waits on what they inherited waits too). Far from what a normal end takes: a creator's exit
# stops its pool before it ends, and a SubprocPool's sidecar sees its creator's pipe close at once.
OUTLIVED_S = 5.0


def outlived_creator(pool: Pool) -> tuple[float, float] | None:
    """(the creator's end, the pool's end) when the pool's processes were seen to end OUTLIVED_S or more after
    its creator ended; None otherwise (a pool still running at the end of the log is a leftover's story)."""
    made_end, end = pool.creator.ended_at, pool_end(pool)
    if made_end is None or end is None or end - made_end < OUTLIVED_S:
        return None
    return made_end, end


def start_method(pool: Pool) -> str:
    """How a pool's workers were started, from the workers themselves: 'fork' (each forked from its creator),
    'spawn' (each a fresh interpreter its creator started), '' when not known (none seen, or a SubprocPool:
    its sidecar is started with subprocess and forks its workers)."""
    if pool.kind != EXECUTOR or not pool.members:
        return ""
    forked = {q.forked for q in pool.members if q.traced}
    return "fork" if forked == {True} else "spawn" if forked == {False} else ""


def span_samples(p: Process, a: float, b: float) -> list[tuple[float, int]]:
    """p's (ts, pss) samples taken inside [a, b]; when none is, its first taken after a (the nearest
    after the span's start); [] when it has none after a. A sample before a is never used: a sidecar's
    first sample comes right after exec, before it imported anything (2 MiB of a 240 MiB process), and
    a worker's right after fork."""
    mem = lived_mem(p)
    inside = [(ts, pss) for ts, pss, _ in mem if a <= ts <= b]
    if inside:
        return inside
    after = next(((ts, pss) for ts, pss, _ in mem if ts >= a), None)
    return [after] if after is not None else []


def held_at(p: Process, a: float, b: float) -> int | None:
    """p's PSS over the span [a, b]: its first sample of the span (span_samples); None unsampled there."""
    samples = span_samples(p, a, b)
    return samples[0][1] if samples else None


def held_after(p: Process, ts: float) -> int | None:
    """A leftover's figure: its latest PSS sample taken after ts (the main process's end), its own
    process_exit notwithstanding: a leftover still holds what it holds (an orphaned sidecar whose workers
    ended holds their once-shared pages alone: docs/evidence.md, "Memory at once"), until the watcher sees it end."""
    return next((pss for t, pss, _ in reversed(p.mem) if t >= ts), None)


class PoolStory:
    """One pool's lifecycle, derived once (see the module docstring for each term)."""

    def __init__(self, pool: Pool, t_end: float, index: PoolIndex) -> None:
        self.pool = pool
        side = pool.sidecar
        self.procs = pool_processes(pool, index.heads)
        self.workers = workers_of(pool)
        self.ready_at = pool.ready_at if pool.ready_at is not None else (
            side.pool_starts[0] if side is not None and side.pool_starts else
            # a member torch's initializer never ran in (a spawned child that died as it started) made it no ready
            min((q.start for q in pool.members if q.start is not None and q.role != vocab.CHILD), default=None))
        serving = min((c.ts for c in side.calls.values() if c.tag == targets.SIDECAR_MAIN), default=None) \
            if side is not None else None
        made = pool.call.end if pool.call.end is not None else pool.call.ts
        side_end = pool_end(pool)
        stopped = pool.shutdown_at is not None or side_end is not None
        # A traced sidecar that never reached its serving loop (no SubprocMain.main call) in a pool that never
        # became ready, and whose life is over: jobs sent to it waited for nothing; it was never busy, nor idle
        # after a job (the page draws it apart; sidecar-never-served says why).
        self.never_served = bool(side is not None and side.traced and serving is None and self.ready_at is None
                                 and stopped)
        # Never ready, no job, its sidecar never serving (it raised, or not traced): never served, so not idle.
        self.served = not self.never_served and any(t is not None for t in (pool.last_job, self.ready_at, serving))
        # The workers' own job records, where they wrote them: busy exactly while one of them held a job.
        self.busy_spans = [] if self.never_served else busy_spans(pool, t_end)
        start = serving if serving is not None else made
        if self.never_served:
            self.busy_until = made
        elif self.busy_spans:
            self.busy_until = max(start if self.ready_at is None else self.ready_at, self.busy_spans[-1][1])
        else:  # an older log (no worker wrote job records): inferred from its creator's side
            self.busy_until = creator_busy_until(pool, t_end, index, self.ready_at, start)
        self.shutdown_by, self.shutdown_frame = requester(pool.shutdown_call) if pool.shutdown_call else ("", None)
        ends = [t for t in (pool.shutdown_at, side_end) if t is not None]
        self.alive_at_end = side_end is None if side is not None else bool(pool.members) and side_end is None
        # A pool that outlived its creator was idle only while its creator lived: after that it was an orphan
        # (findings' pool-outlived-creator tells that span, with what it held), not an idle pool to shut down.
        self.orphaned = outlived_creator(pool)
        if self.orphaned is not None:
            ends.append(self.orphaned[0])
            self.busy_until = min(self.busy_until, self.orphaned[0])
        self.idle_to = min(ends) if ends else t_end
        self.idle_known = not jobs_unbounded(pool)  # handed jobs no record bounds: its idle is not known, none told
        self.idle_s = max(0.0, self.idle_to - self.busy_until) if self.procs and self.served and self.idle_known \
            else 0.0
        # Still busy when the pool stopped (its sidecar died, or its shutdown was asked, while a worker held a job):
        # no idle span after its last job at all, and none to tell as "idle 0 s (X -> Y)" running backwards.
        self.busy_past_stop = bool(self.busy_spans) and self.busy_spans[-1][1] > self.idle_to
        # Stopped before its busy time began, by the inferred path (its sidecar began serving, or its ready came,
        # after its shutdown was asked: a pool made and shut down at once): no idle span, and nothing held.
        self.stopped_first = not self.busy_past_stop and self.served and self.busy_until > self.idle_to
        self.quiesced = [(c.ts, requester(c)[0]) for c in pool.quiesce_calls]
        self.sampled = [p for p in self.procs if p.mem]
        # Its memory at once over its whole life, one sweep: the report's series and its peak, and every MiB·s
        # below (its integral over the stretch), so a MiB·s is the area under the line whose top is the peak.
        self.memory = Memory(self.procs)
        self.series: list[Point] = self.memory.points
        self.peak: Point | None = peak(self.series, self.procs)  # its largest point one moment read
        a, b = self.busy_until, self.idle_to
        # The pool's processes during the idle span, and those of them the watcher read then: the held
        # figure and the MiB·s cover only those read (the text says "N of M" when some were not).
        self.in_span = [p for p in self.procs if p.alive_during(a, b)]
        self.span_sampled = [p for p in self.in_span if p.mem and span_samples(p, a, b)]  # mem: the cheap test
        self.held_bytes, self.held_read, inside_at = self._held(a, b)
        if self.idle_s <= 0 and self.served:
            self.held_bytes = None  # no idle span: nothing was held idle (its peak says what it held)
        self.idle_mib_s, self.idle_unread_s = self._over(a, b) if self.idle_s > 0 else (None, 0.0)
        self.orphan_mib_s, self.orphan_held, orphan_at, self.orphan_read = self._orphan_memory()
        self.counts = self._counts(orphan_at, inside_at)
        self.after_quiesce = self._after_quiesce(side)
        self.devices = sorted({d for p in self.procs for d in p.devices})
        self.idle_cpu = self._idle_cpu() if self.idle_s > 0 else None
        gaps = idle_gaps(self.busy_spans, self.ready_at, self.busy_until, None if pool.ready_at else pool.first_job) \
            if self.served and self.idle_known else []
        self.gaps = [IdleGap(ga, gb, first, *self._over(ga, gb)) for ga, gb, first in gaps]
        self.idle_total_s = self.idle_s + sum(g.end - g.start for g in self.gaps)
        self.idle_total_mib_s, self.idle_total_unread_s = self._idle_totals()

    @property
    def idle_after(self) -> str:
        """What the idle span follows: its last job where it ran one, else its ready, else its sidecar's serving."""
        if self.pool.last_job is not None or self.busy_spans and self.busy_until > (self.ready_at or 0.0):
            return "job"
        return "ready" if self.ready_at is not None else "serving"

    @property
    def idle_after_words(self) -> str:
        return IDLE_AFTER_WORDS[self.idle_after]  # for people: 'its last job', 'it was ready', ...

    def _counts(self, orphan_at: float | None, inside_at: float | None) -> dict[str, Any] | None:
        """The pool counted as ps counts, at the moment of the figure the text gives: a pool that outlived its
        creator is told by what it held once orphaned (its idle span ends at its creator's end, often under a
        second in, read then in part while the creator still shared its pages: 74 of the 216 MiB 2 forked
        workers held for the 60 s after); else the held one, else the peak."""
        told_at = orphan_at if self.orphan_held is not None else inside_at if self.held_bytes is not None else \
            self.peak.ts if self.peak is not None else None
        return counts_at(self.procs, self.pool.creator, told_at)

    def _idle_totals(self) -> tuple[float | None, float]:
        """Over the idle span and its gaps: MiB·s (None where none was read), and the seconds the MiB·s could
        not cover (a process alive with no reading counted)."""
        mibs = [m for m in [self.idle_mib_s, *(g.mib_s for g in self.gaps)] if m is not None]
        unread = self.idle_unread_s + sum(g.unread_s for g in self.gaps)
        return (round(sum(mibs), 1) if mibs else None), round(unread, 3)

    def _held(self, a: float, b: float) -> tuple[int | None, tuple[int, int], float | None]:
        """What it held while idle over [a, b]: the most at one moment inside the span (a sidecar's first sample,
        right after exec, is a few MiB of what it holds once imported), else each one's first sample after; the
        processes that figure sums and those alive then (its moment's: a moment may read fewer than span_sampled,
        one process read only after the span counting there, not at the moment; else the span's: every text of
        the figure says "N of M" from this one pair); and that moment (None without one)."""
        # over every process alive in the span: one never read in it adds nothing to a sum, but counts as alive
        inside, n_read, n_alive, at = peak_at_once(self.in_span, a, b)
        if inside is not None:
            return inside, (n_read, n_alive), at
        held = [x for x in (held_at(p, a, b) for p in self.span_sampled) if x is not None]
        return (sum(held) if held else None), (len(self.span_sampled), len(self.in_span)), None

    def _over(self, a: float, b: float) -> tuple[float | None, float]:
        """MiB·s the pool's processes held together over [a, b]: its memory at once integrated there
        (memseries.Memory), None where no reading counts in it; and the seconds of [a, b] in which a process of
        the pool, alive, had no reading counted (the MiB·s is a floor by as much as they held then)."""
        held = self.memory.integral(a, b)
        return (round(held.byte_s / MIB, 1) if held.byte_s > 0 else None), round(held.unread_s, 3)

    def _idle_cpu(self) -> tuple[float, float, float] | None:
        """(CPU seconds the pool's processes used, from, to) over the part of the idle span the watcher's samples
        cover: each process's utime + stime at its last sample in the span less at its first (a process read
        once there adds nothing it can tell). None where no process was read twice in the span."""
        a, b = self.busy_until, self.idle_to
        used, lo, hi = 0.0, None, None
        for p in self.in_span:
            times = [t for t in p.cpu if a <= t <= b]
            if len(times) < 2:
                continue
            first, last = min(times), max(times)
            used += p.cpu[last] - p.cpu[first]
            lo, hi = first if lo is None else min(lo, first), last if hi is None else max(hi, last)
        return (round(used, 2), lo, hi) if lo is not None and hi is not None and hi > lo else None

    def _orphan_memory(self) -> tuple[float | None, int | None, float | None, tuple[int, int] | None]:
        """What the pool's processes held after their creator ended: (MiB·s over that span, the most at one
        moment in it, that moment, (processes read, alive) then); all None when it did not outlive its creator
        or nothing was read then."""
        if self.orphaned is None:
            return None, None, None, None
        a, b = self.orphaned
        read = [p for p in self.procs if p.alive_during(a, b) and p.mem and span_samples(p, a, b)]
        if not read:
            return None, None, None, None
        held, n_read, n_alive, at = peak_at_once(read, a, b)
        return (self._over(a, b)[0], held, at,
                (n_read, n_alive) if held is not None else None)

    def _after_quiesce(self, side: Process | None) -> tuple[float, int] | None:
        """(ts, pss) of the sidecar's last reading after the idle span's first quiesce: what the pool still
        held once its workers stopped (a quiesce keeps the sidecar; forked workers share its pages, so its
        PSS rises as they end: the last reading, not the first)."""
        quiesced = [ts for ts, _ in self.quiesced if self.busy_until <= ts <= self.idle_to]
        if side is None or not quiesced:
            return None
        after = [(ts, pss) for ts, pss in span_samples(side, quiesced[0], self.idle_to) if ts >= quiesced[0]]
        return after[-1] if after else None

    def as_dict(self, rel: Any) -> dict[str, Any]:
        """The JSON keys report.py adds to each pool (times relative to the run's first record)."""
        pool, best = self.pool, self.peak
        return {
            "ready_at": rel(self.ready_at), "jobs": pool.jobs, "first_job": rel(pool.first_job),
            "last_job": rel(pool.last_job), "busy_until": rel(self.busy_until), "idle_to": rel(self.idle_to),
            "idle_s": round(self.idle_s, 3), "idle_known": self.idle_known, "idle_after": self.idle_after,
            "idle_total_s": round(self.idle_total_s, 3),
            "idle_total_mib_s": self.idle_total_mib_s, "idle_unread_s": self.idle_unread_s,
            "idle_total_unread_s": self.idle_total_unread_s,
            "idle_gaps": [{"from_s": rel(g.start), "to_s": rel(g.end), "s": round(g.end - g.start, 3),
                           "first": g.first, "mib_s": g.mib_s, "unread_s": g.unread_s} for g in self.gaps],
            "alive_at_end": self.alive_at_end, "never_served": self.never_served, "busy_past_stop": self.busy_past_stop,
            "stopped_first": self.stopped_first,
            "quiesced": [{"at": rel(ts), "by": by} for ts, by in self.quiesced],
            "shutdown_at": rel(pool.shutdown_at), "shutdown_by": self.shutdown_by or None,
            "shutdown_caller": self.shutdown_frame, "shutdown_calls": pool.shutdown_calls,
            "shutdown_outcome": _outcome(pool.shutdown_call),
            "workers": [{"pid": q.pid, "start": rel(q.start), "end": rel(q.ended_at)} for q in self.workers],
            "held_pss_bytes": self.held_bytes, "idle_mib_s": self.idle_mib_s,
            # its peak, and the processes that point read of those alive then (fewer: a floor, "N of M read")
            "peak_pss_bytes": best.pss if best is not None else None,
            "peak_read": best.read if best is not None else None,
            "peak_processes": best.alive if best is not None else None,
            "span_processes": len(self.in_span), "span_sampled": len(self.span_sampled),
            "held_read": self.held_read[0] if self.held_bytes is not None else None,
            "held_processes": self.held_read[1] if self.held_bytes is not None else None,
            "device_files": self.devices, "counts": self._counts_dict(rel),
            "idle_cpu": ({"cpu_s": self.idle_cpu[0], "from": rel(self.idle_cpu[1]), "to": rel(self.idle_cpu[2])}
                         if self.idle_cpu else None),
            "outlived_creator": ({"creator_end": rel(self.orphaned[0]), "end": rel(self.orphaned[1]),
                                  "s": round(self.orphaned[1] - self.orphaned[0], 3), "mib_s": self.orphan_mib_s,
                                  "held_pss_bytes": self.orphan_held,
                                  "read": self.orphan_read[0] if self.orphan_read else None,
                                  "processes": self.orphan_read[1] if self.orphan_read else None}
                                 if self.orphaned else None),
            "after_quiesce": ({"at": rel(self.after_quiesce[0]), "sidecar_pss_bytes": self.after_quiesce[1]}
                              if self.after_quiesce else None),
        }


    def _counts_dict(self, rel: Any) -> dict[str, Any] | None:
        """The counts as report.py gives them: their moment relative, thread counts keyed by pid as text."""
        if self.counts is None:
            return None
        return dict(self.counts, at=rel(self.counts["at"]),
                    threads={str(k): v for k, v in self.counts["threads"].items()})


def _outcome(call: Call | None) -> str | None:
    """How the shutdown request ended: 'returned', 'raised TYPE' (interrupted), 'never returned'."""
    if call is None:
        return None
    if call.error:
        return f"raised {call.error}"
    return "returned" if call.end is not None else "never returned"


def stories(pools: list[Pool], t_end: float, every: list[Pool]) -> dict[int, PoolStory]:
    """id(pool) -> its story; `every`: all the model's pools (a pool of a run not chosen still has its own
    processes)."""
    index = pool_index(every)
    return {id(pool): PoolStory(pool, t_end, index) for pool in pools}
