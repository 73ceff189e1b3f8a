"""Findings about the waits that shutting pools down costs at exit: the main process's in
shutdown_compile_workers (torch's at exit, or its own call), and a child's shutting its own pool down as it
exits (whoever joins it waits). shutdown_path names torch's stop call as the run's torch has it, for every
advice that says to call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ...common.vocab import GUARDED_ROLES
from ..derive.callers import user_frame
from ..derive.endings import torch_release
from ..derive.labels import label_for
from ..words.fmt import TEXT_PIDS, error_words, site
from .base import Finding
from .held import sidecar_exit_join

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Process

# The main process waiting longer than this at exit is worth a finding.
SLOW_EXIT_WAIT_S = 5.0


# A child process spending this long shutting its pool down at exit delays whoever joins it
# (pytorch#115366 measured ~1 s per spawn child). Not lower: torch 2.13's own shutdown of a ready
# sidecar takes 0.47-0.52 s untraced, so a bar at 0.5 s flickered on a pool that was stopped normally.
CHILD_EXIT_WAIT_S = 1.0


def slow_exit_wait(v: View) -> Finding | None:
    """The main process waited over SLOW_EXIT_WAIT_S in shutdown_compile_workers: torch's own call at exit (no
    user frame called it) leads; where the only slow call is one the user's code made, it is told as theirs,
    at its line, never as a wait "at exit" whose fix is the call they made."""
    slow = [c for c in v.tagged(targets.EXIT_SHUTDOWN) if c.proc.role == "main"
            and ((c.end is not None and c.end - c.ts > SLOW_EXIT_WAIT_S) or c.error)]
    if not slow:
        return None
    torchs = [c for c in slow if user_frame(c.caller) is None or c.at_exit]
    c = (torchs or slow)[0]
    waits = [(x.end if x.end is not None else v.t_end) - x.ts for x in slow]
    wait = (c.end if c.end is not None else v.t_end) - c.ts
    how = f", interrupted by {error_words(c.error)}" if c.error else ""
    nested = ("torch waits for every pool it started, nested sidecars included: stop the nested pools (see "
              "nested-pools), or quiesce/shut the pool down before exit") if v.max_depth > 1 else ""
    waited_on, starting = None, ""
    if torchs:
        joined, waited_on, ran_on = sidecar_exit_join(v, c)
        starting = "" if joined else still_starting(v, c)
        text = f"The main process waited {wait:.1f} s in shutdown_compile_workers at exit{how}{joined or starting}."
        advice = nested or ran_on if waited_on is not None else nested or (STARTING_ADVICE if starting else
            f"torch waits at exit for every pool it started: call {shutdown_path(v, c.proc)}() after your last "
            "compile, where a slow pool shutdown costs you least")
    else:
        text = (f"The main process waited {wait:.1f} s in its own call of shutdown_compile_workers() at "
                f"{site(c.caller)}{how}: the call waits until each sidecar has ended its workers and itself.")
        advice = nested or OWN_SHUTDOWN_ADVICE
    return Finding(
        "slow-exit-wait", "problem" if torchs else "warning", text, sorted({x.proc.pid for x in slow}), [],
        advice, {"exit_wait_s": round(sum(waits), 3), "hang_s": round(sum(waits), 3),
                 # the sidecar whose own exit join it waited on (its exit-hang: the cause, words/causes.py)
                 **({"waited_on": [waited_on]} if waited_on is not None else {}),
                 # the sidecar whose start it waited for: the Answer tells the wait under that pool (words/answer)
                 **({"waited_for_start": True} if torchs and starting else {})})


def still_starting(v: View, c: Call) -> str:
    """Where torch's exit wait (c) began before a sidecar of c's process served (its pool's story stopped first:
    its serving or ready came after the stop was asked, within the wait), ": its sidecar S was still starting
    (ready at T s)": the wait was that start, not a slow stop; "" where no record shows it."""
    end = c.end if c.end is not None else v.t_end
    for pool in c.proc.pools:
        st = v.stories.get(id(pool))
        if st is not None and pool.sidecar_pid is not None and st.stopped_first and c.ts <= st.busy_until <= end:
            return f": its sidecar {pool.sidecar_pid} was still starting (ready at {v.rel(st.busy_until) or 0:.1f} s)"
    return ""


# The exit waited on a sidecar still starting: any shutdown waits for that start, so calling it sooner saves
# nothing; what saves the wait is a pool the run does not make, or one made long enough before the exit to be ready.
STARTING_ADVICE = ("the pool was stopped before its sidecar served, so the exit waited for that sidecar's start: "
                   "make no pool where nothing compiles in it (compile_threads=1 / TORCHINDUCTOR_COMPILE_THREADS=1), "
                   "or make it early enough to be ready before the exit")


# The user's own shutdown_compile_workers() was slow: the call is already what torch would do at exit; its
# seconds are the sidecar ending its workers and then itself, which no argument of the call shortens.
OWN_SHUTDOWN_ADVICE = ("nothing in the call shortens it: it waits for each sidecar to end its workers and itself "
                       "(slower on a busy host); to have no pool to stop, compile without one: compile_threads=1 / "
                       "TORCHINDUCTOR_COMPILE_THREADS=1")


def shutdown_path(v: View, p: Process) -> str:
    """torch's shutdown_compile_workers as this run's torch names it: from a traced call of it, else from
    where it lives by release (docs/torch-coverage.md: codecache in 2.3, async_compile from 2.4). 2.1-2.2 have
    none: their one pool is AsyncCompile.process_pool()'s (lru-cached), stopped by its own shutdown()."""
    seen = next((c.target for c in v.tagged(targets.EXIT_SHUTDOWN)), None)
    if seen:
        module, name = targets.split_label(seen)
        return f"{module}.{name}"
    major_minor = torch_release(v.config_of(p)[1])
    if major_minor in ((2, 1), (2, 2)):
        return "torch._inductor.codecache.AsyncCompile.process_pool().shutdown"
    module = "torch._inductor.codecache" if major_minor == (2, 3) else "torch._inductor.async_compile"
    return f"{module}.shutdown_compile_workers"


# The executor class torch's fork/spawn pool is (2.8+): its ProcessPoolExecutor.shutdown is the pool's.
TORCH_EXECUTOR = "TrackedProcessPoolExecutor"


def _exit_shutdowns(v: View) -> list[Call]:
    """Pool shutdowns at a non-main process's own exit that took CHILD_EXIT_WAIT_S or more: torch's atexit
    shutdown_compile_workers, or (a multiprocessing child, whose atexit never runs) the finalizer torch
    registers with each pool calling SubprocPool.shutdown, or a fork/spawn pool's ProcessPoolExecutor.shutdown.
    Either way no user frame asked for it (a forked child's stack keeps the frame it was forked at: multiprocessing's
    exit handler, Call.at_exit, is no user's request)."""
    shutdowns = (targets.EXIT_SHUTDOWN, targets.POOL_SHUTDOWN, targets.EXECUTOR_SHUTDOWN)
    return [c for c in v.tagged(*shutdowns) if (c.parent is None or c.parent.tag not in shutdowns)
            and (c.tag != targets.EXECUTOR_SHUTDOWN or c.at_call.get("executor_class") == TORCH_EXECUTOR)
            and c.proc.role not in ("main", *GUARDED_ROLES) and c.thread in ("MainThread", "")
            and (user_frame(c.caller) is None or c.at_exit) and c.proc.pools and _took(v, c) >= CHILD_EXIT_WAIT_S]


def _took(v: View, c: Call) -> float:
    return max(0.0, (c.end if c.end is not None else c.proc.end if c.proc.end is not None else v.t_end) - c.ts)


def child_exit_wait(v: View) -> Finding | None:
    """A child spends seconds shutting its own pool down at exit: whoever joins it waits (pytorch#115366)."""
    slow = sorted(_exit_shutdowns(v), key=lambda x: -_took(v, x))  # the longest wait leads
    if not slow:
        return None
    c = slow[0]
    p = c.proc
    made = p.pools[-1].call
    how = "spawned" if not p.forked else "forked"
    still = "" if c.end is not None else ", and it never returned"
    label = label_for(p.argv) if p.argv else ""
    # multiprocessing's parent joins its child; another parent (an execnet gateway's) waits in its own way
    waits = "its parent's join() waits that long" if p.forked or label.startswith("multiprocessing") else \
        "whatever waits for it to end (its parent) waits that long"
    named = f" ({label})" if label and not label.startswith("multiprocessing") else ""
    return Finding(
        "child-exit-wait", "warning",
        f"{how.capitalize()} child {p.pid}{named} spent {_took(v, c):.1f} s in {targets.short_label(c.target)} at its "
        f"exit{still}, shutting down the pool it made at {site(user_frame(made.caller) or made.caller)}: {waits}"
        + (f" (+{len(slow) - 1} more child(ren))" if len(slow) > 1 else "") + ".",
        sorted({x.proc.pid for x in slow}), [f"{x.proc.pid}: {_took(v, x):.2f} s" for x in slow[:TEXT_PIDS]],
        f"call {shutdown_path(v, p)}() at the end of the child's work, so its exit does not hang on torch's "
        "exit-time shutdown (atexit, or the multiprocessing finalizer in a multiprocessing child); or compile in "
        "the parent, so the child makes no pool (pytorch#115366)",
        {"processes": len(slow), "exit_wait_s": round(sum(_took(v, x) for x in slow), 3),
         "hang_s": round(sum(_took(v, x) for x in slow), 3)})
