"""Findings about a process waiting on its own pool while it runs: the wait for a new pool to become ready.

The wait is read from the process's own traced call (AsyncCompile.wait_pool_ready: the ready future of the pool
it makes), its seconds from that call's record and its return; what else ran in the process then from the
watcher's thread readings of it; when the pool's sidecar appeared from that process's start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ..derive.pools import user_frame
from ..words.fmt import site
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Pool, Process

# A pool's sidecar imports torch and forks its workers before it is ready: seconds on an idle host, and on a
# loaded 2-core box up to about 20 s. A wait this long is more than that start.
READY_WAIT_S = 30.0
# A shorter wait is told where the waiting process's own part of the start was slow: from the call to its
# sidecar's start (SubprocPool.__init__ starting the sidecar: Python work in the waiting process, which threads
# of that process running Python slow down). Measured (bench/users): 0.2-1.0 s against the sidecar's own 3.8-14 s
# from its start to ready (a share of 0.04-0.07, idle or loaded box), but 2.2-22 s (a share of 0.39-0.59)
# where three other threads of the main ran Python. Both bars must hold: the share is what load does not move
# (a loaded box slows both parts), the seconds keep a quick start out.
OWN_PART_S = 1.0
OWN_SHARE = 0.25

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


def _own_part(c: Call, pool: Pool | None, end: float) -> float | None:
    """Seconds from the wait's call to its pool's sidecar's start, where that is at least OWN_PART_S and
    OWN_SHARE of the sidecar's own start (its start to the wait's end); else None."""
    side = pool.sidecar if pool is not None else None
    if side is None or side.start is None or not c.ts < side.start < end:
        return None
    own = side.start - c.ts
    return own if own >= OWN_PART_S and own >= OWN_SHARE * (end - side.start) else None


def ready_wait(v: View) -> Finding | None:
    """A process waited in AsyncCompile.wait_pool_ready for the pool it made to become ready, READY_WAIT_S or
    more, or less where its own part of the start was slow (_own_part): its seconds, its threads then (as ps
    counts them), and how long its sidecar took to appear. Its cost is the wait (hang_s) and, the waiting process
    standing still meanwhile, blocked_s: it ranks before memory held idle (findings/rank.py)."""
    def long(x: Call) -> bool:
        end = x.end if x.end is not None else v.t_end
        return end - x.ts >= READY_WAIT_S or _own_part(x, _made_in(v, x), end) is not None

    slow = [c for c in v.calls if c.tag == targets.WAIT_POOL_READY and not c.error and long(c)]
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
        busy = ", which its other threads slow where they run Python (the GIL)" if threads else ""
        appeared += (f"; that part of the start is the waiting process's own (SubprocPool.__init__ starting the "
                     f"sidecar){busy}, and the sidecar then took {end - side.start:.1f} s to be ready")
    ends = "until the log ended" if c.end is None else f"{v.rel(c.ts) or 0:.1f} s -> {v.rel(end) or 0:.1f} s"
    more = f" (+{len(slow) - 1} more such wait(s))" if len(slow) > 1 else ""
    text = (f"{p.role.capitalize()} {p.pid} waited {wait:.1f} s ({ends}) for its new compile pool to become ready"
            f"{threads}{appeared}; the wait is AsyncCompile.wait_pool_ready at {where}{more}.")
    waits = round(sum((x.end if x.end is not None else v.t_end) - x.ts for x in slow), 3)
    return Finding("pool-ready-wait", "problem", text, sorted({x.proc.pid for x in slow}),
                   [f"{x.proc.pid}: wait_pool_ready call at {v.rel(x.ts)} s, "
                    f"{'returned at ' + str(v.rel(x.end)) + ' s' if x.end is not None else 'no return'}"
                    for x in slow[:3]],
                   READY_WAIT_ADVICE, {"hang_s": waits, "blocked_s": waits})
