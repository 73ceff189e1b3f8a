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

from typing import Any, Callable, NamedTuple

from ...common import targets, vocab
from ..fold.autotune import jobs_unbounded
from ..fold.model import Call, Pool, Process
from ..words.fmt import IDLE_AFTER_WORDS, MIB, pool_name
from .busy import WAIT_TAGS, busy_spans, creator_busy_until
from .callers import requester
from .counts import counts_at
from .ending import UNSEEN, Ending
from .gaps import IdleGap, idle_gaps
from .mempeak import peak, peak_at_once
from .memseries import Memory, Point, held_at, span_samples
from .poolprocs import outlived_creator, pool_end, pool_processes, start_method, workers_of


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


class PoolStory:
    """One pool's lifecycle, derived once (see the module docstring for each term)."""

    def __init__(self, pool: Pool, t_end: float, index: PoolIndex, ending: Ending | None = None) -> None:
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
            self.busy_until = creator_busy_until(pool, t_end, index.waits.get(id(pool.creator)),
                                                 self.ready_at, start)
        self.shutdown_by, self.shutdown_frame = requester(pool.shutdown_call) if pool.shutdown_call else ("", None)
        # A pool no record shows alive at the end of the log (alive.py) ends its idle span where it was last seen.
        seen = ending.last_seen if ending is not None and ending.kind == UNSEEN else None
        unseen = ending is not None and ending.kind == UNSEEN
        ends = [t for t in (pool.shutdown_at, side_end, seen) if t is not None]
        self.alive_at_end = not unseen and (side_end is None if side is not None else bool(pool.members)
                                            and side_end is None)
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

    @property
    def name(self) -> str:
        """The pool's name for people (words/fmt.py pool_name): 'sidecar 200', a fork pool's workers, ..."""
        return pool_name({"kind": self.pool.kind, "start_method": start_method(self.pool),
                          "sidecar_pid": self.pool.sidecar_pid, "worker_pids": [q.pid for q in self.workers]})

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
            "peak_never_read": best.never if best is not None else None,  # a floor beyond its moment too
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


def stories(pools: list[Pool], t_end: float, every: list[Pool],
            ending_of: Callable[[Pool], Ending] | None = None) -> dict[int, PoolStory]:
    """id(pool) -> its story; `every`: all the model's pools (a pool of a run not chosen still has its own
    processes); ending_of: each pool's ending (Endings.of_pool), where one no record shows alive at the end is
    told only until it was last seen."""
    index = pool_index(every)
    return {id(pool): PoolStory(pool, t_end, index, ending_of(pool) if ending_of is not None else None)
            for pool in pools}
