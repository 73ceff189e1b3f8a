"""When a pool was busy: its workers' job spans merged (busy_spans), or, where no worker wrote job records
(older logs), inferred from its creator's side (its last submit, its ready, its shutdown with jobs pending,
its creator's waits on its jobs). Definitions: derive/pools.py's docstring ("busy spans").
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter, is_, itemgetter

from ...common import targets
from ..fold.model import Call, JobSpan, Pool, Process
from .poolprocs import pool_end, workers_of

# The creator's calls that wait on a pool's jobs: AsyncCompile.wait (its kernels' futures), wait_pool_ready.
WAIT_TAGS = (targets.ASYNC_WAIT, targets.WAIT_POOL_READY)
# A job's (start, end), end None where it never ended (JobSpan); the end of such a pair.
_START_END, _END = attrgetter("start", "end"), itemgetter(1)


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
    else until the log's end (held_until)."""
    return j.end if j.end is not None else held_until(w, t_end)


def held_until(w: Process, t_end: float) -> float:
    """Until when worker w held a job whose end it never wrote: until it ended, else until the log's end."""
    end = w.ended_at
    return end if end is not None else t_end


def busy_spans(pool: Pool, t_end: float) -> list[tuple[float, float]]:
    """The union of the pool's workers' job spans (each job from its start to job_until), merged, earliest
    first: when at least one worker of the pool held a job. The ready probe (the pool's first job) is one of
    them: it ends before the pool is ready. [] where no worker of the pool wrote a job record."""
    # A long run's pools hold most of a log's jobs (465K in a realistic 1M-record log): each worker's (start, end)
    # pairs are made in C, and only a worker with a job it never ended has them made again with job_until's end
    # (its held_until taken once); then merged with the open span in locals.
    spans: list[tuple[float, float]] = []
    for w in workers_of(pool):
        got = list(map(_START_END, w.jobs_run))
        if any(map(is_, map(_END, got), repeat(None))):
            until = held_until(w, t_end)
            got = [(x, until if y is None else y) for x, y in got]
        spans += got
    return merged(spans)


def merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(start, end) spans, sorted in place, merged where they overlap or touch: earliest first, none twice."""
    spans.sort()
    out: list[tuple[float, float]] = []
    if not spans:
        return out
    a, b = spans[0]
    for x, y in spans:
        if x <= b:
            if y > b:  # max(b, y): b stays on a tie, as max keeps its first
                b = y
        else:
            out.append((a, b))
            a, b = x, y
    out.append((a, b))
    return out


def creator_busy_until(pool: Pool, t_end: float, waits: list[Call] | None, ready_at: float | None,
                       start: float) -> float:
    """Until when a pool whose workers wrote no job records (older logs) was busy, inferred from its creator's
    side: its last counted submit, else when it was ready, else start (its serving loop's, else its making);
    never past its sidecar's end; until its shutdown where jobs were pending as it was asked; until its creator's
    last wait on its jobs returned (waited_until). waits: its creator's WAIT_TAGS calls (pool_index's), None
    for all its calls."""
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
    waited = waited_until(pool, t_end, list(pool.creator.calls.values()) if waits is None else waits)
    return busy if waited is None else max(busy, waited)  # its creator waited on its jobs until then: not idle
