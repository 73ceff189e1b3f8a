"""Which worker of a pool held which job, and when: the workers' own job records (runtime/jobs.py), per pool.

A worker writes a `job` record as it takes a job (its start) and as it ends it (fold: Process.jobs_run, one
JobSpan each). Definitions (one home; docs/evidence.md, "Who held a job"):

- held during [a, b]: a job whose start is at or before b and whose end is after a; one whose end was never
  written, while its worker lived after a.
- never ended: a job whose end was never written: the worker held it until the worker ended (how: its own
  ending's evidence) or until the log ended. Only such a start without its end says a worker "held" a job that
  never returned; where no worker of the pool wrote job records, who held it is unknown.
- pending as a wait began: AsyncCompile.wait's capture of each live pool's unanswered jobs (`pool_pending`:
  queued ones included, which no worker has taken yet), matched to the pool by its sidecar's pid or a worker's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..fold.model import Call, JobSpan, Pool, Process
from .pools import job_until, workers_of


class Held(NamedTuple):
    """One job a pool's worker held: the worker, the job, and until when it held it (the job's end; else the
    worker's end; else the log's), and whether its end was written."""

    worker: Process
    job: JobSpan
    until: float
    ended: bool


def recorded(pool: Pool) -> bool:
    """Whether any worker of the pool wrote job records (else who held a job is unknown)."""
    return any(w.jobs_run for w in workers_of(pool))


def held_during(pool: Pool, a: float, b: float, t_end: float) -> list[Held]:
    """The jobs the pool's workers held at some moment of [a, b], earliest start first."""
    return held_by(workers_of(pool), a, b, t_end)


def held_by(workers: list[Process], a: float, b: float, t_end: float) -> list[Held]:
    """The jobs these workers held at some moment of [a, b], earliest start first."""
    out = []
    for w in workers:
        for j in w.jobs_run:
            if j.start <= b:
                h = _held(w, j, t_end)
                if h.until > a:
                    out.append(h)
    return sorted(out, key=lambda h: h.job.start)


def _held(w: Process, j: JobSpan, t_end: float) -> Held:
    return Held(w, j, job_until(w, j, t_end), j.end is not None)


def pending_as_called(call: Call, pool: Pool) -> int | None:
    """The pool's unanswered jobs as the call began (its `pool_pending` entry for this pool), else None."""
    entries = call.at_call.get("pool_pending")
    if not isinstance(entries, list):
        return None
    pids = {w.pid for w in workers_of(pool)}
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("pending"), int):
            continue
        side = e.get("sidecar_pid")
        workers = e.get("worker_pids")
        if (pool.sidecar_pid is not None and side == pool.sidecar_pid) or (
                side is None and isinstance(workers, list) and pids & set(workers)):
            return int(e["pending"])
    return None


def job_name(j: JobSpan) -> str:
    """A job for people: its function's name (module:qualname as recorded), with its first name argument."""
    fn = j.fn or "a job whose function is not known"
    return f"{fn}({j.arg})" if j.arg else fn



def unended(pool: Pool, t_end: float, rel: Any) -> list[dict[str, Any]] | None:
    """The report's `unended_jobs`: each job a worker of the pool took and never wrote the end of (it held it
    until it ended, or the log did), earliest first; None where no worker of the pool recorded its jobs."""
    if not recorded(pool):
        return None
    out = [_held(w, j, t_end) for w in workers_of(pool) for j in w.jobs_run if j.end is None]
    return [{"worker_pid": h.worker.pid, "fn": h.job.fn, "arg": h.job.arg, "since": rel(h.job.start),
             "until": rel(h.until), "held_s": round(h.until - h.job.start, 3),
             "worker_ended": h.worker.ended_at is not None} for h in sorted(out, key=lambda h: h.job.start)]
