"""A wait on a pool's job that never returned, and the worker that held the job: from the workers' own job
records (derive/held.py), never guessed. Where no worker of the pool recorded its jobs, who held it is unknown,
and said so.

The words here are shared by every hang finding that waits on a pool's job: the fork pool's (findings/pools.py
fork_pool_hang), the exit join's (exit_join_hang), and this module's own `pool-job-hang`, for any other pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ..derive.held import Held, held_by, held_during, job_name, never_taken, pending_as_called, recorded
from ..derive.pools import WAIT_TAGS, start_method, waits_on_no_job, workers_of
from ..fold.model import EXECUTOR
from ..words.fmt import error_words, site
from .base import Finding
from .rank import HANG_S

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Pool, Process

# How many held jobs a sentence names (the rest counted).
NAMED = 2

# A wait the user interrupted shows the job still running then, not that it would never have ended (a first
# compile's jobs take seconds): the advice says so before it says how to look.
INTERRUPTED_JOB_ADVICE = ("the log shows worker {pid}'s job still running when the wait was interrupted, not that it "
                          "would never have ended; if it hangs again, ")
JOB_HANG_ADVICE = ("see what worker {pid} is doing while it hangs (`py-spy dump --pid {pid}` prints its stack; "
                   "/proc/{pid}/wchan says where it sleeps); run the same compile without the pool to get the hung "
                   "job's traceback in the main process: compile_threads=1 (TORCHINDUCTOR_COMPILE_THREADS=1)")


def wait_end(v: View, c: Call) -> float:
    """When a wait stopped waiting: its return (or the error that interrupted it), else its process's end, else
    the log's."""
    p = c.proc
    return c.end if c.end is not None else p.ended_at if p.ended_at is not None else v.t_end


def wait_how(v: View, c: Call) -> str:
    """How a wait that hung ended, with its seconds: interrupted by an error, never returned."""
    waited = wait_end(v, c) - c.ts
    if c.error:
        return f"was interrupted by {error_words(c.error)} after {waited:.1f} s"
    if c.proc.ended_at is not None:
        return f"never returned ({waited:.1f} s, until the process ended)"
    return f"had not returned after {waited:.1f} s (the end of the log)"


def hung_jobs(v: View, pool: Pool, a: float, b: float) -> list[Held]:
    """The jobs the pool's workers held while a wait hung ([a, b]) and had not ended by its end: those whose end
    was never written (held until the worker ended, or the log did), or came at or after b."""
    return [h for h in held_during(pool, a, b, v.t_end) if not h.ended or h.until >= b]


def joined_pool_words(v: View, p: Process, a: float, b: float, c: Call | None = None) -> tuple[str, str]:
    """Which pool concurrent.futures' exit join of p ([a, b]) waited on, and who held its job: (" of the pool ...",
    " sentence."), or ("", "") where p made no pool. The join waits on the executors made in p: its fork/spawn
    compile pools (a SubprocPool's executor is its sidecar's) and the program's own, whose workers' job records
    say which held the job; c: the join's call, whose capture counts (and names) the pool's pending jobs."""
    pools = [pool for pool in p.pools if pool.call.ts <= a and pool.kind == EXECUTOR]
    own = own_pool_hung_jobs(v, p, a, b)
    if own and not any(hung_jobs(v, pool, a, b) for pool in pools):
        return " of a process pool the program made itself (not a compile pool)", f" {own_held_words(v, own)}."
    if not pools:
        return "", ""
    return f" of the pool made at {site(pools[-1].call.caller)}", f" {held_words(v, pools[-1], a, b, c)}."


def own_pool_hung_jobs(v: View, p: Process, a: float, b: float) -> list[Held]:
    """hung_jobs of the process pools p made itself that are not compile pools (a program's own
    ProcessPoolExecutor: its workers, p's children in no compile pool, record their jobs too)."""
    pooled = {q for pool in v.pools for q in (*workers_of(pool), *pool.members)}
    mine = [q for q in p.children if q not in pooled and q.jobs_run]
    return [h for h in held_by(mine, a, b, v.t_end) if not h.ended or h.until >= b]


def own_held_words(v: View, held: list[Held]) -> str:
    """Held jobs of a program's own process pool (own_pool_hung_jobs), as held_words says a compile pool's."""
    said = []
    for h in held[:NAMED]:
        end = (f"until the worker ended at {v.rel(h.until) or 0:.1f} s" if h.worker.ended_at is not None
               else "to the end of the log")
        said.append(f"worker {h.worker.pid} ran {job_name(h.job)} from {v.rel(h.job.start) or 0:.1f} s and "
                    + (f"ended it at {v.rel(h.until) or 0:.1f} s" if h.ended else
                       f"never ended it ({h.until - h.job.start:.1f} s, {end})"))
    more = f" (+{len(held) - NAMED} more)" if len(held) > NAMED else ""
    return ("; ".join(said) + more)[:1].upper() + ("; ".join(said) + more)[1:]


def held_words(v: View, pool: Pool, a: float, b: float, c: Call | None = None) -> str:
    """Who held the pool's jobs while a wait hung ([a, b]) and had not ended them by b, its workers counted as ps
    lists them then, with the pool's pending jobs as the wait c began where it was captured: a sentence, no
    final stop."""
    pending = pending_as_called(c, pool) if c is not None else None
    began = "the exit join began" if c is not None and c.tag == targets.EXIT_JOIN else "the wait began"
    queued = f"; {pending} job(s) were pending in this pool as {began}" if pending is not None else ""
    behind = never_taken(c, pool, b) if c is not None else []
    if behind:
        names = ", ".join(job_name(q) for q in behind[:NAMED])
        more = f" (+{len(behind) - NAMED} more)" if len(behind) > NAMED else ""
        queued += f"; no worker took {len(behind)} of them before it ended (queued): {names}{more}"
    if not recorded(pool):
        return f"Which worker held its job is not known: no worker of the pool recorded its jobs{queued}"
    held = hung_jobs(v, pool, a, b)
    alive = [w for w in workers_of(pool) if w.alive_during(a, b)]
    if not held:
        return f"None of its {len(alive)} workers held an unfinished job then (a job still queued){queued}"
    said = []
    for h in held[:NAMED]:
        ran = f"worker {h.worker.pid} ran {job_name(h.job)} from {v.rel(h.job.start) or 0:.1f} s"
        if h.ended:
            said.append(f"{ran} and ended it at {v.rel(h.until) or 0:.1f} s ({h.until - h.job.start:.1f} s)")
        elif h.worker.ended_at is not None:
            said.append(f"{ran} and never ended it ({h.until - h.job.start:.1f} s, until the worker ended at "
                        f"{v.rel(h.until) or 0:.1f} s)")
        else:
            said.append(f"{ran} and never ended it ({h.until - h.job.start:.1f} s, to the end of the log)")
    more = f" (+{len(held) - NAMED} more)" if len(held) > NAMED else ""
    busy = len({h.worker.index for h in held})
    return (f"{busy} of its {len(alive)} workers held a job then: " + "; ".join(said) + more + queued)


def held_short(v: View, pool: Pool, a: float, b: float) -> str:
    """The first job held while a wait hung, for the Answer: "worker W held its job (F) from T s and never ended
    it"; "which worker held it is not known" without job records; "" where none was held."""
    if not recorded(pool):
        return "which worker held its job is not known"
    held = hung_jobs(v, pool, a, b)
    if not held:
        return ""
    h = held[0]
    done = f"ended it at {v.rel(h.until) or 0:.1f} s" if h.ended else "never ended it"
    return f"worker {h.worker.pid} held its job ({job_name(h.job)}) from {v.rel(h.job.start) or 0:.1f} s and {done}"


def _fork_hang_pool(pool: Pool) -> bool:
    """A fork pool made beside other threads: fork_pool_hang tells its hangs, with the cause."""
    threads = pool.call.at_call.get("threads")
    return start_method(pool) == "fork" and isinstance(threads, int) and threads >= 2


def pool_job_hang(v: View) -> Finding | None:
    """A process's wait on its pool (AsyncCompile.wait, wait_pool_ready) that never returned or was interrupted
    after HANG_S or more, while a worker of that pool held a job (its start without an end, or one open then):
    which worker, since when, what it was. A fork pool made beside threads is fork_pool_hang's."""
    for pool in v.pools:
        if _fork_hang_pool(pool) or not recorded(pool):
            continue
        creator, made = pool.creator, pool.call.ts
        waits = [c for c in creator.calls.values() if c.tag in WAIT_TAGS and (c.end is None or c.error)
                 and wait_end(v, c) >= made and not waits_on_no_job(c, pool) and wait_end(v, c) - c.ts >= HANG_S]
        for c in waits:
            at = wait_end(v, c)
            held = hung_jobs(v, pool, c.ts, at)
            if not held:
                continue
            of = f"sidecar {pool.sidecar_pid}" if pool.sidecar_pid is not None else f"made at {site(pool.call.caller)}"
            return Finding(
                "pool-job-hang", "problem",
                f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its compile pool ({of}) "
                f"{wait_how(v, c)}. {held_words(v, pool, c.ts, at, c)}.",
                [creator.pid, *(h.worker.pid for h in held)],
                [f"job record: worker {h.worker.pid} took work {h.job.work_id} at {v.rel(h.job.start)} s, "
                 + (f"ended at {v.rel(h.until)} s" if h.ended else "no end") for h in held[:3]],
                ((INTERRUPTED_JOB_ADVICE if c.error else "") + JOB_HANG_ADVICE).format(pid=held[0].worker.pid),
                {"hang_s": round(at - c.ts, 3)},
                f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its compile pool "
                f"{wait_how(v, c)}: {held_short(v, pool, c.ts, at)}.")
    return None
