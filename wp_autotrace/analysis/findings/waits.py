"""Findings about a process waiting on its own compiles while it runs: the wait for a new pool to become ready, and
a forked process's wait on the compile thread pool its parent made before the fork.

The wait is read from the process's own traced call (AsyncCompile.wait_pool_ready: the ready future of the pool
it makes), its seconds from that call's record and its return; what else ran in the process then from the
watcher's thread readings of it; when the pool's sidecar appeared from that process's start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ...common.vocab import COMPILE_WORKER, SIDECAR_ROLES
from ..derive.busy import busy_spans, waits_on_no_job
from ..derive.callers import user_frame
from ..derive.held import ran_during, recorded, uses
from ..derive.poolprocs import workers_of
from ..words.fmt import pid_text, site
from .base import Finding
from .rank import HANG_S

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Pool, Process

# A pool's sidecar imports torch and forks its workers before it is ready: seconds on an idle host, and on a
# loaded 2-core box 40 s and more (three ranks starting theirs at once beside another job: 39.5 s from the
# sidecar's start to ready). No length of wait alone tells a slow program from a slow box, so a wait is told
# where the waiting process's own part of the start was slow: from the call to its sidecar's start
# (SubprocPool.__init__ starting the sidecar: Python work in the waiting process, which threads of that process
# running Python slow down). Measured (bench/users): 0.2-1.0 s against the sidecar's own 3.8-14 s from its start
# to ready (a share of 0.04-0.07, idle or loaded box; the three ranks above: 3.7 s against 39.5 s, 0.09), but
# 2.2-22 s (a share of 0.39-0.59) where three other threads of the main ran Python (a 59 s wait: 22 s against
# 37 s). Both bars must hold: the share is what load moves least (a loaded box slows both parts), the seconds
# keep a quick start out. Least, not nothing: at load 20 the same three threads' wait read 7.6 s against the
# sidecar's 39 s (0.20; 0.28-0.72 on other runs), while every idle-thread wait of 42 saved live logs read
# 0.00-0.08 (loads 9-24): the bar sits between, 1.5x from each, and THREADS_CPU below still asks that the threads ran.
OWN_PART_S = 1.0
OWN_SHARE = 0.12

# A slow own part alone does not show threads slowed it (a loaded box slows it too: three idle test-runner
# threads under pytest-xdist, a 1.3-2.1 s own part). The threads are told only where the watcher read them
# running: the waiting process's CPU seconds over its wait, from its sidecar's start on (the waiting thread stands
# blocked in the wait then, so what it used is its other threads'; the watcher reads a creator only once its pool
# has a sidecar, so no reading falls inside the own part of a first pool). Measured (bench/users, its saved logs):
# 0.000 of a core in every one of 22 waits with idle threads (idle and loaded box, load 9-39), 0.16-0.58 where three
# threads ran Python (0.58 on a quiet box, 0.47 and 0.22 loaded, 0.16 at the heaviest load). Again over 57 saved logs
# of two full runs (load 9-36): 0.000-0.001 in all 45 idle-thread waits read, and the threads that ran Python read
# 0.097 at load 36 (2 cores: a runnable thread got about 0.06 of a core then) with an own part of 20.7 s, ten times
# the idle waits' 0.2-2.7 s beside it, while a bar of 0.1 kept that 59 s wait out of the report. The bar sits three
# times under that lowest reading and thirty times over the idle ones.
THREADS_CPU = 0.03

# The first use of the pool after the ready wait (derive/held.py `uses`: its jobs, from the first one's start to the
# last one's end, or the waiting process's AsyncCompile.wait calls on them where it made such calls) is told where
# it took RESULTS_S or more, with the seconds its workers held a job in it: measured on the saved bench/users logs,
# the 30 results of collector_threads (three threads running Python in the waiting process) took 2.2 s loaded
# (9.7 s on the first run; 0.1 s with no threads running) while the workers ran jobs for 0.005 s of it (a share
# of 0.002); where the jobs themselves were slow (a job that sleeps, a hung job, a dying worker's: jupyter_kernel,
# sidecar_killed, worker_oom) they ran for 0.89-1.0 of it. SLOW_JOBS_SHARE sits far from both: at or above it
# the time was the jobs' own (slow compiles), under it the way to and from the pool.
RESULTS_S = 1.0
SLOW_JOBS_SHARE = 0.5

# What the user can do when the first compile waited long for its pool: have the pool ready before the threads
# that compete with it start, or need none.
READY_WAIT_ADVICE = ("start the pool before the program's own threads start: call "
                     "torch._inductor.async_compile.AsyncCompile.warm_pool() (or run a first compile) at startup, "
                     "or pause the busy threads around the first compile; or compile without a pool: "
                     "compile_threads=1 / TORCHINDUCTOR_COMPILE_THREADS=1")


def _threads_then(p: Process, t: float) -> tuple[float, int] | None:
    """The watcher's first reading of p's threads at or after t (its count then), else its last before."""
    after = sorted((ts, n) for ts, n in p.threads.items() if ts >= t)
    before = sorted((ts, n) for ts, n in p.threads.items() if ts < t)
    return after[0] if after else (before[-1] if before else None)


def _made_in(v: View, c: Call) -> Pool | None:
    """The pool its process made inside call c (wait_pool_ready makes the pool when there is none)."""
    end = c.end if c.end is not None else v.t_end
    return next((pool for pool in c.proc.pools if c.ts <= pool.call.ts <= end), None)


def _threads_ran(p: Process, a: float, b: float) -> float | None:
    """The share of a core p used from a to b (its CPU seconds at its last watcher reading in the span less at its
    first, over the seconds between them); None where it was not read twice there."""
    times = [t for t in p.cpu if a <= t <= b]
    if len(times) < 2 or max(times) <= min(times):
        return None
    return (p.cpu[max(times)] - p.cpu[min(times)]) / (max(times) - min(times))


def _own_part(c: Call, pool: Pool | None, end: float) -> float | None:
    """Seconds from the wait's call to its pool's sidecar's start, where that is at least OWN_PART_S and
    OWN_SHARE of the sidecar's own start (its start to the wait's end), and the waiting process's other threads
    were read running (_threads_ran over the wait from the sidecar's start: at least THREADS_CPU of a core);
    else None (also where its CPU then was not read: no evidence, nothing said). The sidecar's start is its
    fork's create_time: without it (an older writer) its start is its own process_start record, written after
    its interpreter's start-up, which a loaded box slows: the "own part" would count that too, so nothing is said."""
    side = pool.sidecar if pool is not None else None
    if side is None or side.start is None or side.create_time is None or not c.ts < side.start < end:
        return None
    own = side.start - c.ts
    if own < OWN_PART_S or own < OWN_SHARE * (end - side.start):
        return None
    ran = _threads_ran(c.proc, side.start, end)
    return own if ran is not None and ran >= THREADS_CPU else None


def _probe_taken(v: View, c: Call, pool: Pool | None, end: float) -> str:
    """When a worker took the pool's ready probe (its first job after the call: the workers' job records), or that
    none had by the wait's end; "" where the pool's workers recorded no jobs (not known)."""
    if pool is None or not recorded(pool):
        return ""
    jobs = sorted((j.start, w.pid) for w in workers_of(pool) for j in w.jobs_run if c.ts <= j.start <= end)
    if not jobs:
        return "; no worker of it had taken a job (its ready probe) by then"
    t, pid = jobs[0]
    return f"; worker {pid} took its ready probe (the pool's first job) at {v.rel(t) or 0:.1f} s, {t - c.ts:.1f} s in"


def _results_words(v: View, c: Call, pool: Pool | None) -> tuple[str, str]:
    """The pool's first use after the ready wait c, where it took RESULTS_S or more: its seconds (the waiting
    process's AsyncCompile.wait calls on its jobs, from the first one's call to the last one's return, where it
    made such calls; else the jobs' own stretch) and the seconds its workers held a job in them (the union of
    their job spans), with what the share says; and its short form for the Answer. ("", "") where the job
    records tell no such use."""
    use = next((u for u in uses(pool, v.story(pool).ready_at, v.t_end) if u.start >= c.ts), None) \
        if pool is not None else None
    if pool is None or use is None:
        return "", ""
    waits = [x for x in c.proc.calls.values() if x.tag == targets.ASYNC_WAIT and not waits_on_no_job(x, pool)
             and x.ts <= use.end and (x.end is None or x.end >= use.start)]
    a, b = use.start, use.end
    if waits:
        a, b = min(x.ts for x in waits), max(x.end if x.end is not None else v.t_end for x in waits)
    if b - a < RESULTS_S:
        return "", ""
    ran = ran_during(busy_spans(pool, v.t_end), a, b)
    jobs = f"{use.jobs} job{'s' if use.jobs > 1 else ''}"
    what = (f"it waited {b - a:.1f} s in AsyncCompile.wait on its pool's {jobs}" if waits
            else f"its pool's {jobs} took {b - a:.1f} s")
    ran_text = f"{ran:.2f} s" if ran >= 0.1 else f"{ran * 1000:.0f} ms"
    span = f"{v.rel(a) or 0:.1f} s -> {v.rel(b) or 0:.1f} s"
    ran_words = f"its workers running jobs for {ran_text} of it"
    why = ("the jobs' own run time: slow compiles, not the pool" if ran >= SLOW_JOBS_SHARE * (b - a) else
           "the rest went outside the jobs, on the way to and from the pool (sending each job and its result "
           "through the sidecar, and the waiting process's own Python)")
    return (f"; then {what} ({span}{'' if waits else ', the first job start to the last job end'}), {ran_words} "
            f"(the union of their job records): {why}", f"; then {what} ({span}), {ran_words}")


def ready_wait(v: View) -> Finding | None:
    """A process waited in AsyncCompile.wait_pool_ready for the pool it made to become ready, and its own part of
    the start was slow (_own_part; a long wait that is the sidecar's own start is a slow box, not the program's):
    its seconds, its threads then (as ps counts them), and how long its sidecar took to appear. Its cost is the
    wait (hang_s) and, the waiting process standing still meanwhile, blocked_s: it ranks before memory held idle
    (findings/rank.py)."""
    def long(x: Call) -> bool:
        return _own_part(x, _made_in(v, x), x.end if x.end is not None else v.t_end) is not None

    # A process that made no pool has none to have made inside the wait (_made_in): nothing to look for (a long
    # log's waits are mostly such: each would walk the process's pools for nothing, or cost a call to say so).
    slow = [c for c in v.tagged(targets.WAIT_POOL_READY) if not c.error and c.proc.pools and long(c)]
    if not slow:
        return None
    c = slow[0]
    p = c.proc
    end = c.end if c.end is not None else v.t_end
    wait = end - c.ts
    pool = _made_in(v, c)
    where = site(user_frame(pool.call.caller) or pool.call.caller) if pool is not None else site(c.caller)
    read = _threads_then(p, c.ts)
    threads = (f" while it ran {read[1]} threads (ps count at {v.rel(read[0]) or 0:.1f} s)"
               if read is not None and read[1] > 1 else "")
    side = pool.sidecar if pool is not None else None
    appeared = (f", its sidecar {side.pid} starting only {side.start - c.ts:.1f} s after the call"
                if side is not None and side.start is not None and side.start > c.ts else "")
    own = _own_part(c, pool, end)
    if own is not None and side is not None and side.start is not None:
        ran = _threads_ran(p, side.start, end) or 0.0
        appeared += (f"; that part of the start is the waiting process's own (SubprocPool.__init__ starting the "
                     f"sidecar), which its other threads slow where they run Python (the GIL), and they ran: it "
                     f"used {ran:.2f} of a core while its waiting thread stood in the wait (the watcher's CPU "
                     f"readings of it); the sidecar then took {end - side.start:.1f} s to be ready")
    results, results_short = _results_words(v, c, pool)
    ends = "until the log ended" if c.end is None else f"{v.rel(c.ts) or 0:.1f} s -> {v.rel(end) or 0:.1f} s"
    more = f" (+{len(slow) - 1} more such wait(s))" if len(slow) > 1 else ""
    text = (f"{p.role.capitalize()} {p.pid} waited {wait:.1f} s ({ends}) for its new compile pool to become ready"
            f"{threads}{appeared}{_probe_taken(v, c, pool, end)}; the wait is AsyncCompile.wait_pool_ready at "
            f"{where}{more}{results}.")
    waits = round(sum((x.end if x.end is not None else v.t_end) - x.ts for x in slow), 3)
    return Finding("pool-ready-wait", "problem", text, sorted({x.proc.pid for x in slow}),
                   [f"{x.proc.pid}: wait_pool_ready call at {v.rel(x.ts)} s, "
                    f"{'returned at ' + str(v.rel(x.end)) + ' s' if x.end is not None else 'no return'}"
                    for x in slow[:3]],
                   READY_WAIT_ADVICE, {"hang_s": waits, "blocked_s": waits},
                   # where the results are told, the Answer tells them too: what the user timed after the start
                   f"{p.role.capitalize()} {p.pid} waited {wait:.1f} s ({ends}) for its new compile pool to become "
                   f"ready{threads}{results_short}." if results_short else "")


# What the user can do when processes forked after their parent compiled wait for ever on compiles: compile
# threads make torch's compile thread pool in the parent, which a fork does not bring along.
FORKED_AFTER_COMPILE_ADVICE = ("set TORCHINDUCTOR_COMPILE_THREADS=1 in the environment that starts the program (no "
                               "compile thread pool is made, and the forked processes compile in-process); or "
                               "compile only in the forked processes, not before the fork; or start them with spawn "
                               "(a fresh interpreter)")


def _threads_at_fork(v: View, parent: Process, t: float) -> object:
    """compile_threads as parent last compiled with async compile before t (its latest AsyncCompile.wait that
    returned by t: the setting that wait captured, else parent's config as torch loaded it; a setting changed in
    code after the import is seen only by the wait); None where no such wait returned by t."""
    waits = [c for c in parent.calls.values() if c.tag == targets.ASYNC_WAIT and c.end is not None and c.end <= t]
    if not waits:
        return None
    captured = max(waits, key=lambda c: c.ts).at_call.get("compile_threads")
    return captured if isinstance(captured, int) else v.config_of(parent)[0].get("compile_threads")


def _ended_words(words: str) -> str:
    """'ended (how is not known)' / 'ended: killed by SIGKILL, sent by ...': a process's ending in the words the
    Process tree uses, after 'until it'."""
    return words if words.startswith("ended") else f"ended: {words}"


def forked_compile_hang(v: View) -> Finding | None:
    """Processes forked (not exec'd) from a parent that had compiled with compile threads (compile_threads > 1 in its
    config: torch's AsyncCompile.pool(), a thread pool cached in the parent), whose own AsyncCompile.wait never
    returned or was interrupted after HANG_S: in the child that pool has no threads (a fork copies only the
    forking thread), so futures sent to it never run. Each such child's wait, the parent, and the fork's time."""
    hung = []
    for c in v.tagged(targets.ASYNC_WAIT):
        p, parent = c.proc, c.proc.parent
        if (c.end is not None and not c.error) or not p.forked or parent is None:
            continue
        threads = _threads_at_fork(v, parent, p.start) if p.start is not None else None
        if (not isinstance(threads, int) or threads <= 1 or p.role in SIDECAR_ROLES or p.role == COMPILE_WORKER):
            continue
        end = c.end if c.end is not None else p.ended_at if p.ended_at is not None else v.t_end
        if end - c.ts >= HANG_S:
            hung.append((c, end - c.ts))
    if not hung:
        return None
    c, waited = hung[0]
    p, parent = c.proc, c.proc.parent
    assert parent is not None and p.start is not None
    how = (f"was interrupted by {c.error} after {waited:.1f} s" if c.error else
           f"never returned ({waited:.1f} s, until it {_ended_words(v.endings.of(p).words)})"
           if c.proc.ended_at is not None else f"never returned ({waited:.1f} s, until the log ended)")
    more = f" ({len(hung) - 1} more forked process(es) alike: pids {pid_text(x.proc.pid for x, _ in hung[1:])})" \
        if len(hung) > 1 else ""
    text = (f"{p.role.capitalize()} {p.pid}, forked (not exec'd) from {parent.role} {parent.pid} at "
            f"{v.rel(p.start) or 0:.1f} s after {parent.role} {parent.pid} had compiled with compile threads, waited "
            f"in AsyncCompile.wait (its compile called at {site(c.outermost().caller)}), which {how}{more}: the "
            "compile thread pool torch keeps in the parent has no threads in a forked process, so its compiles never "
            "run.")
    total = round(sum(w for _, w in hung), 3)
    who = f"{p.role.capitalize()} {p.pid}" + (f" and {len(hung) - 1} more" if len(hung) > 1 else "")
    # what the records show: the wait never returned before its process ended, or before the log did
    stuck = (f"never returned ({waited:.1f} s, until it ended)" if p.ended_at is not None else
             f"had not returned after {waited:.1f} s (the end of the log)")
    short = (f"{who}, forked from {parent.role} {parent.pid} after it had compiled with compile threads, waited in "
             f"AsyncCompile.wait, which {stuck}: the compile thread pool torch keeps in the parent has no threads "
             "in a forked process.")
    return Finding("forked-compile-hang", "problem", text, sorted({x.proc.pid for x, _ in hung}),
                   [f"{x.proc.pid}: forked at {v.rel(x.proc.start)} s, AsyncCompile.wait from {v.rel(x.ts)} s"
                    for x, _ in hung[:3]], FORKED_AFTER_COMPILE_ADVICE, {"hang_s": total, "blocked_s": total},
                   short if not c.error else "")
