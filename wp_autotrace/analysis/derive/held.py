"""Which worker of a pool held which job, and when: the workers' own job records (runtime/jobs.py), per pool.

A worker writes a `job` record as it takes a job (its start) and as it ends it (fold: Process.jobs_run, one
JobSpan each). Definitions (one home; docs/evidence.md, "Who held a job"):

- held during [a, b]: a job whose start is at or before b and whose end is after a; one whose end was never
  written, while its worker lived after a.
- never ended: a job whose end was never written: the worker held it until the worker ended (how: its own
  ending's evidence) or until the log ended. Only such a start without its end says a worker "held" a job that
  never returned; where no worker of the pool wrote job records, who held it is unknown.
- a use: a run of the pool's jobs from its ready on (the jobs a worker took after it), no two of them further apart
  than IDLE_GAP_S (an idle gap ends a use): from its first job's start to its last one's until (job_until), its
  jobs counted, and `ran_s`, the seconds in it at least one worker held a job (ran_during over busy_spans).
  The ready probe (taken before ready) is no use's. What a use's seconds are beside its ran_s tells a slow
  compile (the jobs ran all along) from a slow way to and from the pool (they ran for little of it).
- pending as a wait began: AsyncCompile.wait's capture of each live pool's unanswered jobs (`pool_pending`:
  queued ones included, which no worker has taken yet), matched to the pool by its sidecar's pid or a worker's;
  concurrent.futures' exit join captures the same of the compile pools it joins.
- queued, never taken: a job the capture names (a fork/spawn pool's newest pending, by work id) that no worker
  of the pool took by the wait's end (no job record of that work id): the wait waited on it too, and no worker
  ever ran it. A SubprocPool's pending jobs are counted only (the main keeps no job of it but a Future).
- an exit join that waited on no job: concurrent.futures' exit join (in a main, its fork/spawn pools' workers;
  in a sidecar, its pool's) whose capture read each pool it joins with none pending, while every child it could
  join was a compile worker, some wrote job records and none held a job during the join: its seconds went to
  the workers' own exit (two spawned workers with torch loaded took 7.9 s at load 20), no job kept it.
- the moment a join's children had left their loops: where every child the exit join could join wrote its
  process_exit inside the join and none held a job then (job records; a capture, even an empty one, with none
  pending), the latest such record. What follows it is their interpreters' teardown, no job: an
  AutotuneProcessPool's one worker wrote it 0.3 s into a 29.8 s join at load 40 and ended 29.5 s later.
- the child a never-ended job ran: a child of the job's worker started during the job (its start at or after
  the job's, less the create time's rounding) and still alive as the job was last held (its end, as seen, no
  earlier than END_SEEN_S before the job's until), in no helper or pool role (a resource tracker, a forkserver
  outlive their starter by design): a compiler or linker the job ran (cc1plus at 100 % of a CPU, a spinning
  ptxas). The newest such child; none for a job whose end was written. No record shows the job waiting on it
  (the worker's stack is not read): it is told as started during the job and running at its end, no more.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...common.vocab import COMPILE_WORKER, HELPER_ROLES, POOL_ROLES
from ..fold.model import CREATE_ROUNDING_S, Call, JobSpan, Pool, Process
from .busy import busy_spans, job_until
from .gaps import IDLE_GAP_S
from .poolprocs import workers_of


class Held(NamedTuple):
    """One job a pool's worker held: the worker, the job, and until when it held it (the job's end; else the
    worker's end; else the log's), and whether its end was written."""

    worker: Process
    job: JobSpan
    until: float
    ended: bool


class Use(NamedTuple):
    """One use of a pool (the module docstring): its first job's start, its last one's until, its jobs, and the
    seconds in it at least one worker held a job."""

    start: float
    end: float
    jobs: int
    ran_s: float


def ran_during(spans: list[tuple[float, float]], a: float, b: float) -> float:
    """Seconds of [a, b] covered by spans (busy_spans: merged, so none is counted twice)."""
    return sum(max(0.0, min(y, b) - max(x, a)) for x, y in spans)


def uses(pool: Pool, ready_at: float | None, t_end: float) -> list[Use]:
    """The pool's uses from ready_at on (its workers' job records), earliest first; [] where it has no ready or
    none of its workers recorded a job after it."""
    if ready_at is None:
        return []
    jobs = sorted((j.start, job_until(w, j, t_end)) for w in workers_of(pool) for j in w.jobs_run
                  if j.start >= ready_at)
    runs: list[list[float]] = []  # [start, until, jobs]
    for a, b in jobs:
        if runs and a - runs[-1][1] < IDLE_GAP_S:
            runs[-1][1], runs[-1][2] = max(runs[-1][1], b), runs[-1][2] + 1
        else:
            runs.append([a, b, 1])
    spans = busy_spans(pool, t_end)
    return [Use(a, b, int(n), ran_during(spans, a, b)) for a, b, n in runs]


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


# The watcher sees each end up to a look late, the job's worker's and its child's alike (a group killed at once
# is seen ending in either order): a child seen ending this much before the job's until was alive at it.
END_SEEN_S = 1.0
# Children that outlive what started them by design, or serve a pool: a job that started one (a spawn-context
# Queue's resource tracker) may hang anywhere, so none is told as the job's own child process.
NOT_THE_JOBS = HELPER_ROLES | POOL_ROLES


def job_child(h: Held) -> Process | None:
    """The child h's worker started during h's job and that was still running as the job was last held (the
    module docstring); None for a job that ended or one whose worker shows no such child."""
    if h.ended:
        return None
    kids = [q for q in h.worker.children if q.start is not None and h.job.start - CREATE_ROUNDING_S <= q.start
            and (q.ended_at is None or q.ended_at >= h.until - END_SEEN_S) and q.role not in NOT_THE_JOBS]
    return max(kids, key=lambda q: q.start or 0.0, default=None)


def _pending_entry(call: Call, pool: Pool) -> dict[str, Any] | None:
    """The call's `pool_pending` entry for this pool (by its sidecar's pid, else a worker's), else None."""
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
            return e
    return None


def pending_as_called(call: Call, pool: Pool) -> int | None:
    """The pool's unanswered jobs as the call began (its `pool_pending` entry for this pool), else None."""
    e = _pending_entry(call, pool)
    return None if e is None else int(e["pending"])


def join_held_no_job(call: Call, proc: Process, end: float, t_end: float) -> bool:
    """Whether proc's exit join ([call.ts, end], returned) is shown to have waited on no job (the module
    docstring): a capture with every entry at 0 pending; the children it could join alive then (not
    multiprocessing's helpers) all compile workers, whose loop records their jobs (a program's own pool's
    workers write none: their jobs are unknown, so such a child keeps the join a possible hang); some job record
    among them, and none of their jobs held during the join."""
    entries = call.at_call.get("pool_pending")
    if not isinstance(entries, list) or not entries or any(
            not isinstance(e, dict) or e.get("pending") != 0 for e in entries):
        return False
    joined = [q for q in proc.children if q.role not in HELPER_ROLES and q.alive_during(call.ts, end)]
    if not joined or any(q.role != COMPILE_WORKER for q in joined) or not any(q.jobs_run for q in joined):
        return False
    return not held_by(joined, call.ts, end, t_end)


def join_left_at(call: Call, proc: Process, end: float, t_end: float) -> float | None:
    """When every child proc's exit join ([call.ts, end], returned) could join had left its loop (the module
    docstring): the latest process_exit among them, each written inside the join, with a capture of none pending
    (an empty one included: it found no compile pool) and none of them holding a job (job records) during the
    join; else None. The join's seconds after it went to their own teardown; the ones before it may have been a
    job's, whose length is the reader's to judge."""
    entries = call.at_call.get("pool_pending")
    if not isinstance(entries, list) or any(not isinstance(e, dict) or e.get("pending") != 0 for e in entries):
        return None
    joined = [q for q in proc.children if q.role not in HELPER_ROLES and q.alive_during(call.ts, end)]
    if not joined or any(not q.exited or q.end is None or not call.ts <= q.end <= end for q in joined):
        return None
    return None if held_by(joined, call.ts, end, t_end) else max(q.end for q in joined if q.end is not None)


class Queued(NamedTuple):
    """A job pending as a wait began that no worker of its pool took by the wait's end: its work id and names."""

    work_id: int
    fn: str | None
    arg: str | None


def never_taken(call: Call, pool: Pool, b: float) -> list[Queued]:
    """The jobs the call's capture names pending in this pool that no worker of it took by b (no job record of
    their work id starting at or before b), oldest first; [] where none is named or no worker recorded jobs
    (then whether one took it is unknown)."""
    e = _pending_entry(call, pool)
    named = e.get("jobs") if e is not None else None
    if not isinstance(named, list) or not recorded(pool):
        return []
    taken = {j.work_id for w in workers_of(pool) for j in w.jobs_run if j.start <= b}
    out = []
    for j in named:
        if isinstance(j, dict) and isinstance(j.get("work_id"), int) and j["work_id"] not in taken:
            fn, arg = j.get("fn"), j.get("arg")
            out.append(Queued(j["work_id"], fn if isinstance(fn, str) else None, arg if isinstance(arg, str) else None))
    return sorted(out, key=lambda q: q.work_id)


def job_name(j: JobSpan | Queued) -> str:
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
