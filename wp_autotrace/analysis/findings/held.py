"""A wait on a pool's job that never returned, and the worker that held the job: from the workers' own job
records (derive/held.py), never guessed. Where no worker of the pool recorded its jobs, who held it is unknown,
and said so.

The words here are shared by every hang finding that waits on a pool's job: the fork pool's (findings/pools.py
fork_pool_hang), the exit join's (this module's exit_join_hang), and this module's own `pool-job-hang`, for any
other pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ...common.vocab import JOB_ERROR, SIDECAR_ROLES
from ..derive.busy import WAIT_TAGS, waits_on_no_job
from ..derive.callers import BY_TIMER, BY_USER, requester
from ..derive.ending import EXEC, EXIT, OOM_AMONG, OOM_KILL, OS_EXIT, SIGNAL, WITH_GROUP
from ..derive.held import (
    Held,
    held_by,
    held_during,
    job_child,
    job_name,
    join_held_no_job,
    join_left_at,
    never_taken,
    pending_as_called,
    recorded,
)
from ..derive.labels import process_label
from ..derive.poolprocs import start_method, workers_of
from ..fold.model import EXECUTOR
from ..words.fmt import TEXT_PIDS, error_words, site
from .base import Finding
from .leftovers import orphan_advice, orphaned_by_pools
from .rank import HANG_S, STUCK_JOB_S

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Pool, Process

# How many held jobs a sentence names (the rest counted).
NAMED = 2

# A wait interrupted on a job that had not run STUCK_JOB_S: a setting makes torch itself tell a stuck job, with
# the kernel's name, before the user has to guess.
INTERRUPTED_JOB_ADVICE = ("nothing to fix from this log; if a compile seems stuck again, set "
                          "TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=300 (torch then raises, naming the kernel whose "
                          "job did not finish) and ")
# torch's own error where a wait's job outlived compile_worker_wait_timeout: torch's verdict of a stuck job.
TORCH_TIMEOUT_MARK = "did not complete within"
JOB_HANG_ADVICE = ("see what worker {pid} is doing while it hangs (`py-spy dump --pid {pid}` prints its stack; "
                   "/proc/{pid}/wchan says where it sleeps); run the same compile without the pool to get the hung "
                   "job's traceback in the main process: compile_threads=1 (TORCHINDUCTOR_COMPILE_THREADS=1)")
# Where the held job ran a child still running at its end (job_child: a compiler, a linker), that child is looked
# at beside the worker: no record says the worker waited on it, its stack (py-spy) shows whether it did.
CHILD_HANG_ADVICE = ("see what worker {worker} is doing while it hangs (`py-spy dump --pid {worker}` prints its "
                     "stack: a wait in subprocess waits on its child) and what its child {pid} ({label}), started "
                     "during the job and still running at its end, is doing (top shows its CPU; /proc/{pid}/wchan "
                     "says where it sleeps); run the same compile without the pool to get the hung job's traceback "
                     "in the main process: compile_threads=1 (TORCHINDUCTOR_COMPILE_THREADS=1)")


def hang_advice(h: Held) -> str:
    """What to look at for a held job that never ended: its worker, and the child it started that ran to its end."""
    q = job_child(h)
    if q is None:
        return JOB_HANG_ADVICE.format(pid=h.worker.pid)
    return CHILD_HANG_ADVICE.format(worker=h.worker.pid, pid=q.pid, label=process_label(q))


def child_words(v: View, h: Held) -> str:
    """", while its child 301 (cc1plus), started at 3.1 s, ran until 408.4 s" for a held job's job_child; ""
    without one."""
    q = job_child(h)
    if q is None:
        return ""
    until = f"until {v.rel(q.ended_at) or 0:.1f} s" if q.ended_at is not None else "to the end of the log"
    return f", while its child {q.pid} ({process_label(q)}), started at {v.rel(q.start) or 0:.1f} s, ran {until}"


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


# Endings a record shows (a status, the kernel's log, its own exit): told as how a process that lived on ended;
# without one, no exit of its own is all the log says.
SHOWN_ENDINGS = (EXIT, OS_EXIT, EXEC, SIGNAL, OOM_KILL, OOM_AMONG, WITH_GROUP)


def lived_on(v: View, c: Call, end: float) -> tuple[str, str]:
    """(the finding's words, the Answer's) for a wait an error interrupted (a Ctrl-C's KeyboardInterrupt) whose
    process lived on HANG_S or more after it, to its end as seen (the watcher's, after its teardown): how long,
    and how it then ended where a record shows it (its own exit with its code, a status's signal, the kernel's
    OOM log: endings.py's words, SHOWN_ENDINGS); with no exit of its own and no such record, concurrent.futures'
    exit join kept it where its traced call shows it began (exit-hang tells that wait), else no record says what
    did. A process a Ctrl-C ended (its wait status SIGINT: the
    interrupt went uncaught, its exit handlers ran meanwhile: its process_exit shows it) did not live on: said in
    the finding only; nor one whose exit handlers (the exit join, torch's shutdown) began within HANG_S of the
    interrupt (it was exiting when it ended). ("", "") otherwise."""
    p = c.proc
    if not c.error or p.ended_at is None or p.ended_at - end < HANG_S:
        return "", ""
    ran = p.ended_at - end
    ending = v.endings.of(p)
    if ending.signal == "SIGINT" and p.exited:  # a Ctrl-C ended it (its KeyboardInterrupt uncaught) as its exit ran
        return f"; the process ended on a Ctrl-C (SIGINT) {ran:.1f} s later, after its exit handlers ran", ""
    exiting = min((x.ts for x in p.calls.values() if x.tag in (targets.EXIT_JOIN, targets.EXIT_SHUTDOWN)
                   and x.ts >= end), default=None)
    if exiting is not None and exiting - end < HANG_S and (p.exited or ending.kind in SHOWN_ENDINGS):
        # its exit handlers began at once: the interrupt went uncaught and the process was exiting, not living on
        return (f"; its exit began then ({v.rel(exiting) or 0:.1f} s) and it ended {ran:.1f} s later, "
                f"{ending.words}"), ""
    if not p.exited and ending.kind not in SHOWN_ENDINGS:
        # what kept it is told only where its record is: the exit join's traced call (exit-hang tells that wait)
        join = min((x.ts for x in p.calls.values() if x.tag == targets.EXIT_JOIN and x.ts >= end), default=None)
        why = (f"concurrent.futures' exit handler waited for the pool's jobs from {v.rel(join) or 0:.1f} s"
               if join is not None else "no record says what kept it")
        return (f"; the process did not end then: it ran {ran:.1f} s more, with no exit of its own ({why})",
                "; the process did not end then")
    how = ending.words
    return (f"; the process did not end then: it ran {ran:.1f} s more, then {how}",
            f"; the process lived on {ran:.1f} s after it, then {how}")


def hung_jobs(v: View, pool: Pool, a: float, b: float) -> list[Held]:
    """The jobs the pool's workers held while a wait hung ([a, b]) and had not ended by its end: those whose end
    was never written (held until the worker ended, or the log did), or came at or after b."""
    return [h for h in held_during(pool, a, b, v.t_end) if not h.ended or h.until >= b]


def joined_pool_words(v: View, p: Process, a: float, b: float, c: Call | None = None) -> tuple[str, str]:
    """Which pool concurrent.futures' exit join of p ([a, b]) waited on, and who held its job: (" of the pool ...",
    " sentence."), or ("", "") where p made no pool and serves none. The join waits on the executors made in p:
    its fork/spawn compile pools, the program's own, and, in a sidecar, the executor of the SubprocPool it serves
    (its workers); their workers' job records say which held the job; c: the join's call, whose capture counts
    (and names) the pool's pending jobs."""
    pools = [pool for pool in p.pools if pool.call.ts <= a and pool.kind == EXECUTOR]
    own = own_pool_hung_jobs(v, p, a, b)
    if own and not any(hung_jobs(v, pool, a, b) for pool in pools):
        return " of a process pool the program made itself (not a compile pool)", f" {own_held_words(v, own)}."
    served = served_pool(v, p, a)
    if not pools and served is not None:
        made = f"made by {served.creator.role} {served.creator.pid} at {site(served.call.caller)}"
        return f" of the compile pool it serves, {made},", f" {held_words(v, served, a, b, c)}."
    if not pools:
        return "", ""
    return f" of the pool made at {site(pools[-1].call.caller)}", f" {held_words(v, pools[-1], a, b, c)}."


def served_pool(v: View, p: Process, a: float) -> Pool | None:
    """The SubprocPool a sidecar p serves, where p made no fork/spawn pool of its own by a: the executor its exit
    join waits on is that pool's (its workers)."""
    if any(pool.call.ts <= a and pool.kind == EXECUTOR for pool in p.pools):
        return None
    return next((pool for pool in v.pools if pool.sidecar is p), None)


def exit_join_advice(v: View, p: Process, a: float, b: float, default: str) -> str:
    """A sidecar's exit join waits on a job of the pool it serves, whose workers the program cannot end there: the
    held job's advice (what its worker is doing; the compile without the pool, for the job's traceback); else
    default."""
    served = served_pool(v, p, a)
    held = hung_jobs(v, served, a, b) if served is not None else []
    return hang_advice(held[0]) if held else default


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
    at_exit = c is not None and c.tag == targets.EXIT_JOIN
    began = "the exit join began" if at_exit else "the wait began"
    # an exit join whose capture did not read this pool (an older log): its pending jobs are unknown, and said so
    queued = (f"; {pending} job(s) were pending in this pool as {began}" if pending is not None else
              f"; how many jobs were pending in this pool as {began} is not known" if at_exit else "")
    behind = never_taken(c, pool, b) if c is not None else []
    if behind:
        names = ", ".join(job_name(q) for q in behind[:NAMED])
        more = f" (+{len(behind) - NAMED} more)" if len(behind) > NAMED else ""
        queued += f"; no worker took {len(behind)} of them before it ended (queued): {names}{more}"
    if not recorded(pool):
        return f"Which worker held its job is not known: no worker of the pool recorded its jobs{queued}"
    held = hung_jobs(v, pool, a, b) or waited_for(v, pool, a, b, c)
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
                        f"{v.rel(h.until) or 0:.1f} s){child_words(v, h)}")
        else:
            said.append(f"{ran} and never ended it ({h.until - h.job.start:.1f} s, to the end of the log)"
                        f"{child_words(v, h)}")
    more = f" (+{len(held) - NAMED} more)" if len(held) > NAMED else ""
    busy = len({h.worker.index for h in held})
    return (f"{busy} of its {len(alive)} workers held a job then: " + "; ".join(said) + more + queued)


def waited_for(v: View, pool: Pool, a: float, b: float, c: Call | None) -> list[Held]:
    """The jobs a wait that returned ([a, b], c: it raised nothing) waited on: those held as it began, which its
    workers ended while it waited (an exit join returns as the last job ends and its worker exits: the job's end
    comes just before b, so hung_jobs, whose jobs outlast the wait, has none). [] for a wait that did not return."""
    if c is None or c.end is None or c.error:
        return []
    return [h for h in held_during(pool, a, a, v.t_end) if h.ended and a < h.until <= b]


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
    return (f"worker {h.worker.pid} held its job ({job_name(h.job)}) from {v.rel(h.job.start) or 0:.1f} s and {done}"
            f"{child_words(v, h)}")


def _fork_hang_pool(pool: Pool) -> bool:
    """A fork pool made beside other threads: fork_pool_hang tells its hangs, with the cause."""
    threads = pool.call.at_call.get("threads")
    return start_method(pool) == "fork" and isinstance(threads, int) and threads >= 2


def _stuck_waits(v: View) -> list[tuple[Pool, Call, float, list[Held]]]:
    """Each wait of a pool's creator on it (AsyncCompile.wait, wait_pool_ready) that never returned or was
    interrupted after HANG_S or more while a worker of that pool held a job (its start without an end, or one open
    then): the pool, the wait, when it stopped waiting, the held jobs. A fork pool made beside threads is
    fork_pool_hang's; a pool whose workers recorded no jobs has none to tell. A wait that raised a job's own error
    (JOB_ERROR) was answered by the pool, neither interrupted nor hung: compile-failed tells it."""
    out = []
    for pool in v.pools:
        if _fork_hang_pool(pool) or not recorded(pool):
            continue
        creator, made = pool.creator, pool.call.ts
        for c in creator.calls.values():
            if c.tag in WAIT_TAGS and (c.end is None or c.error) and wait_end(v, c) >= made \
                    and not (c.error or "").startswith(JOB_ERROR) \
                    and not waits_on_no_job(c, pool) and wait_end(v, c) - c.ts >= HANG_S:
                held = hung_jobs(v, pool, c.ts, wait_end(v, c))
                if held:
                    out.append((pool, c, wait_end(v, c), held))
    return out


def is_hang(c: Call, held: list[Held]) -> bool:
    """Whether a stuck wait is a hang by the log's evidence: it never returned (the process ended in it, or the
    log did), torch itself raised on the job's time (compile_worker_wait_timeout), or a job it waited on was held
    STUCK_JOB_S or more (to its end, else its worker's or the log's). A wait interrupted sooner shows a job still
    running, not one that would never have ended."""
    if not c.error or TORCH_TIMEOUT_MARK in c.error:
        return True
    return max(h.until - h.job.start for h in held) >= STUCK_JOB_S


def _pool_of(pool: Pool) -> str:
    return f"sidecar {pool.sidecar_pid}" if pool.sidecar_pid is not None else f"made at {site(pool.call.caller)}"


def pool_job_hang(v: View) -> Finding | None:
    """A process's wait on its pool that hung (_stuck_waits, is_hang) while a worker of that pool held a job: which
    worker, since when, what it was."""
    for pool, c, at, held in _stuck_waits(v):
        if not is_hang(c, held):
            continue
        creator = pool.creator
        return Finding(
            "pool-job-hang", "problem",
            f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its compile pool ({_pool_of(pool)}) "
            f"{wait_how(v, c)}{lived_on(v, c, at)[0]}. {held_words(v, pool, c.ts, at, c)}.",
            [creator.pid, *(h.worker.pid for h in held)],
            _job_evidence(v, held),
            hang_advice(held[0]), {"hang_s": round(at - c.ts, 3)},
            f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its compile pool "
            f"{wait_how(v, c)}{lived_on(v, c, at)[1]}: {held_short(v, pool, c.ts, at)}.")
    return None


def _job_evidence(v: View, held: list[Held]) -> list[str]:
    """The job records behind a held job (the first three workers'): who took which work when, and its end."""
    return [f"job record: worker {h.worker.pid} took work {h.job.work_id} at {v.rel(h.job.start)} s, "
            + (f"ended at {v.rel(h.until)} s" if h.ended else "no end") for h in held[:3]]


def pool_wait_interrupted(v: View) -> Finding | None:
    """A wait on a pool the user interrupted (an error, not torch's timeout) while a worker held a job that had
    run less than STUCK_JOB_S (is_hang false): the job still running then, which worker, and what the log says
    came of it (it ended after the interrupt, or was held until its worker ended). A warning: no record shows a hang.
    Its cost is the seconds waited (`waited_s`), never `hang_s`: it does not rank as a hang."""
    for pool, c, at, held in _stuck_waits(v):
        if is_hang(c, held):
            continue
        creator, h = pool.creator, held[0]
        job = f"worker {h.worker.pid}'s job"
        if h.ended:
            then = (f"{job} ended at {v.rel(h.until) or 0:.1f} s, {h.until - at:.1f} s after it: it was running, "
                    "not hung")
        else:
            until = (f"until the worker ended at {v.rel(h.until) or 0:.1f} s" if h.worker.ended_at is not None
                     else "to the end of the log")
            then = (f"{job} had run {at - h.job.start:.1f} s then, {h.until - h.job.start:.1f} s in all ({until}), "
                    f"under the {STUCK_JOB_S:.0f} s torch's own CI allows a compile job before calling it stuck "
                    "(TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT there)")
        short = (f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its compile pool "
                 f"{wait_how(v, c)}{lived_on(v, c, at)[1]} while worker {h.worker.pid} ran its job "
                 f"({job_name(h.job)}) from "
                 f"{v.rel(h.job.start) or 0:.1f} s: nothing in the log shows a hang ("
                 + (f"the job ended {h.until - at:.1f} s later)." if h.ended else
                    f"the job had run {at - h.job.start:.1f} s; torch's own CI calls a compile job stuck "
                    f"at {STUCK_JOB_S:.0f} s)."))
        # the job's program (a compiler) that outlived the main, re-parented as the pool ended: the interrupt left it
        # running, and ending it is the fix (runs.py tells it among the leftovers, under this finding)
        orphans = orphaned_by_pools([q for q in v.leftover_procs if q is job_child(h)])
        return Finding(
            "pool-wait-interrupted", "warning",
            f"{creator.role} {creator.pid}'s {targets.short_label(c.target)}() on its compile pool ({_pool_of(pool)}) "
            f"{wait_how(v, c)}{lived_on(v, c, at)[0]}; nothing in the log shows a hang: {then}. "
            f"{held_words(v, pool, c.ts, at, c)}.",
            [creator.pid, *(x.worker.pid for x in held), *(q.pid for q in orphans)],
            _job_evidence(v, held),
            orphan_advice(orphans) if orphans else (INTERRUPTED_JOB_ADVICE + JOB_HANG_ADVICE).format(
                pid=h.worker.pid), {"waited_s": round(at - c.ts, 3)},
            short)
    return None


# torch's exit-time shutdown waited on a sidecar whose own exit waited for a job still running in a pool it had
# quiesced: a wait for the job, which no earlier shutdown call shortens.
RAN_ON_ADVICE = ("a job still running in the pool at exit keeps it: torch 2.13 stops a live pool's workers at once, "
                 "but not those of a pool quiesced while its job ran (the sidecar's own exit waits for that job); "
                 "wait for the pool's jobs (their futures) before the program exits, or find why the job runs that "
                 "long")
# The same, where the creator's record shows torch's quiesce timer quiesced the pool while the job ran (a compile
# longer than the timer, whose wait gave up: a CI's compile wait timeout): waiting longer is not the fix, the
# quiesce is. With quiesce off, torch's exit terminates the pool's workers, a running job's included (its sidecar's
# _shutdown_pool(terminate_workers=True)); a quiesced executor was only asked to stop, and is waited for.
TIMER_RAN_ON_ADVICE = ("torch's exit stops a live pool's workers at once, but a pool its quiesce timer quiesced while "
                       "a job ran is waited for until that job ends: set TORCHINDUCTOR_QUIESCE_ASYNC_COMPILE_POOL=0 "
                       "(the exit then stops the worker with its job; idle workers stay until exit), or raise "
                       "quiesce_async_compile_time{now} above your longest compile, in code before the pool is made")
# The program quiesced it itself while the job ran: a quiesce after the pool's jobs have ended waits on none.
USER_RAN_ON_ADVICE = ("quiesce the pool only once its jobs have ended (after the compile's wait returns): torch's "
                      "exit stops a live pool's workers at once, but waits for a job a quiesced pool still runs")


def quiesced_under(v: View, side: Process, h: Held) -> Call | None:
    """The creator's quiesce of the pool side serves made while h's job ran (its SubprocPool.quiesce call between
    the job's start and its end): why the sidecar's exit waited for that job. None where no record shows one."""
    pool = served_pool(v, side, h.job.start)
    return next((q for q in (pool.quiesce_calls if pool is not None else ()) if h.job.start <= q.ts <= h.until),
                None)


def ran_on_advice(v: View, side: Process, h: Held) -> str:
    """The advice for a sidecar's exit that waited for a job that ran on: the quiesce's, by who quiesced the pool
    under the job (the timer: turn it off or lengthen it; the program: quiesce after the jobs); else the job's."""
    q = quiesced_under(v, side, h)
    if q is None:
        return RAN_ON_ADVICE
    if requester(q)[0] == BY_TIMER:
        pool = served_pool(v, side, h.job.start)
        after = pool.call.ret.get("quiesce_after_s") if pool is not None else None
        return TIMER_RAN_ON_ADVICE.format(now=f" ({after:g} s for this pool)" if isinstance(after, (int, float))
                                          else "")
    return USER_RAN_ON_ADVICE


def sidecar_job(v: View, side: Process, a: float, b: float, j: Call | None) -> Held | None:
    """The first job a sidecar's exit join ([a, b], j: its call) waited on that a worker's record shows: one of the
    pool it serves held as the join began and still held as it ended (hung_jobs), else ended while it waited
    (waited_for); None where it waited on no such job (its workers' own exit)."""
    pool = served_pool(v, side, a)
    held = (hung_jobs(v, pool, a, b) or waited_for(v, pool, a, b, j)) if pool is not None else []
    return held[0] if held else None


def job_waited_words(v: View, side: Process, waited: float, h: Held) -> str:
    """"sidecar S's own exit waited N s for a job still running in its pool (worker W ran F from T s and ended it
    at T2 s)": the one wording of a sidecar's exit join on a job, told by the main's wait on it and by its own."""
    done = f"ended it at {v.rel(h.until) or 0:.1f} s" if h.ended else "never ended it"
    q = quiesced_under(v, side, h)
    under = (f", a pool {_quiescer(q)} had quiesced at {v.rel(q.ts) or 0:.1f} s while the job ran" if q is not None
             else "")
    return (f"sidecar {side.pid}'s own exit waited {waited:.1f} s for a job still running in its pool (worker "
            f"{h.worker.pid} ran {job_name(h.job)} from {v.rel(h.job.start) or 0:.1f} s and {done}){under}")


def _quiescer(q: Call) -> str:
    """Who quiesced a pool, as a sentence names them: "torch's quiesce timer", "your code at FILE:LINE (FUNC)"."""
    by, frame = requester(q)
    if by == BY_TIMER:
        return "torch's quiesce timer"
    return f"your code at {site(frame)}" if by == BY_USER and frame is not None else by


def sidecar_exit_join(v: View, c: Call) -> tuple[str, int | None, str]:
    """Where torch's exit-time shutdown (c) waited on a sidecar of c's process whose own exit join (concurrent.futures'
    _python_exit) waited HANG_S or more inside that wait on a job a worker's record shows it held: (": its sidecar
    S's own exit waited N s for a job still running in its pool (worker W ran F from T s and ended it at T2 s)",
    S, the advice for it); ("", None, "") where none did. That join's exit-hang is the cause the main's wait follows
    from (words/causes)."""
    end = c.end if c.end is not None else v.t_end
    for j in v.tagged(targets.EXIT_JOIN):
        side = j.proc
        if side.role not in SIDECAR_ROLES or side.parent is not c.proc \
                or not c.ts <= j.ts <= end:
            continue
        b = j.end if j.end is not None else side.ended_at if side.ended_at is not None else v.t_end
        h = sidecar_job(v, side, j.ts, b, j) if b - j.ts >= HANG_S else None
        if h is not None:
            return f": its {job_waited_words(v, side, b - j.ts, h)}", side.pid, ran_on_advice(v, side, h)
    return "", None, ""


EXIT_JOIN_ADVICE = ("find why the pool's job never ends (a fork pool's lock, a job that waits on its parent); a "
                    "process that must exit anyway ends its pool's workers first (they are its own children) or "
                    "shuts the pool down before exit, where a job that hangs can be cancelled")


def exit_join_hang(v: View) -> Finding | None:
    """concurrent.futures' exit handler (_python_exit: threading's exit hook, run before atexit's handlers, torch's
    shutdown included) joins every process pool's workers, waiting for their jobs: one that never returned (the
    process was killed inside it) or took HANG_S or more is a hang at exit, told with its seconds; not one that
    returned and is shown to have waited on no job (derive/held.join_held_no_job: its workers' own exit), nor
    one whose children had all left their loops, holding no job, within HANG_S of its start (join_left_at: the
    rest was their teardown)."""
    hung = [c for c in v.tagged(targets.EXIT_JOIN) if (c.end is None or c.end - c.ts >= HANG_S)
            and (c.end is not None or c.proc.ended_at is not None) and not (c.end is not None and (
                join_held_no_job(c, c.proc, c.end, v.t_end)
                or ((left := join_left_at(c, c.proc, c.end, v.t_end)) is not None and left - c.ts < HANG_S)))]
    if not hung:
        return None
    c = hung[0]
    p = c.proc
    end = c.end if c.end is not None else p.ended_at
    b = end if end is not None else v.t_end
    waited = round(b - c.ts, 3)
    of, held = joined_pool_words(v, p, c.ts, b, c)
    how = "" if c.end is not None else ", until it ended inside it"
    # a sidecar's join on a job a worker's record shows: told for the Answer by that job (the cause of the main's
    # exit wait on it, told under it), and a job that ran on and ended is waited for, not hung
    job = sidecar_job(v, p, c.ts, b, c) if p.role in SIDECAR_ROLES else None
    # a job that ran on is waited for, and one a quiesce left running is the quiesce's to fix, ended or not
    ran_on = job is not None and (job.ended or quiesced_under(v, p, job) is not None)
    advice = ran_on_advice(v, p, job) if job is not None and ran_on else exit_join_advice(v, p, c.ts, b,
                                                                                          EXIT_JOIN_ADVICE)
    return Finding(
        "exit-hang", "problem",
        f"At exit {p.role} {p.pid} waited {waited:.1f} s in concurrent.futures' join of its process pool's "
        f"workers{how}: a job{of} had not ended (the join began at {v.rel(c.ts):.1f} s"
        + ("; the process wrote no exit of its own" if c.end is None else "") + f").{held}",
        # the worker whose job it waited on too, where that job never ended: that job's hang (pool-job-hang) is then
        # its cause (words/causes); a job that ran on and ended was no hang, and the exit's wait on it leads
        sorted({x.proc.pid for x in hung} | ({job.worker.pid} if job is not None and not job.ended else set())),
        [f"_python_exit call at {v.rel(x.ts):.1f} s" for x in hung[:TEXT_PIDS]],
        advice, {"exit_wait_s": waited, "hang_s": waited},
        f"S{job_waited_words(v, p, waited, job)[1:]}." if job is not None else "")
