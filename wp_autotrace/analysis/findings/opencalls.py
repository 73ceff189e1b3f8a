"""Findings about calls left open: traced calls entered and never left in processes whose end was seen, where each
was called from, and where a process was when last seen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ..derive.callers import user_frame
from ..fold.model import last_seen, signal_name
from ..words.fmt import TEXT_PIDS, site
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Process


def _unreturned(v: View) -> list[Call]:
    """Calls entered and never left, in processes whose end was seen (a live loop is not stuck)."""
    return [c for c in v.calls if c.end is None and not c.blocked and c.tag not in _SERVING_LOOPS
            and c.proc.end is not None]


# Calls that run for a process's whole life: one still open when it ended is how it ends.
# concurrent.futures' exit join still open is told as a hang at exit (exit-hang), not again here.
_SERVING_LOOPS = (targets.SIDECAR_MAIN, targets.DATALOADER_LOOP, targets.EXIT_JOIN)


def last_seen_text(v: View, p: Process) -> str:
    """Where a process was when last seen: its last record (not process_exit). A call's target is its label; a
    signal_sent's is the pid it signalled (a process that kills itself: its last record)."""
    last = last_seen(p)
    if last is None:
        return "no record"
    event, ts, target, sig = last
    if event == "signal_sent":
        what = f"signal_sent {signal_name(sig) if isinstance(sig, int) else '?'} to pid {target}"
    else:
        what = event + (f" {targets.short_label(target)}" if isinstance(target, str) and target else "")
    return f"last record {what} at {ts - v.t0:.1f} s"


def call_site(c: Call) -> str:
    """Where a call came from for people: its user frame; for a pool call made from no user frame
    (torch's atexit, python -c's <string>), the user line that made the process's pool."""
    own = user_frame(c.caller)
    if own is not None or not c.proc.pools:
        return site(c.caller)
    made = c.proc.pools[-1].call
    return f"torch at exit, for the pool made at {site(user_frame(made.caller) or made.caller)}"


def _open_call_text(v: View, c: Call) -> str:
    took = max(0.0, (c.proc.end or v.t_end) - c.ts)
    how = c.proc.exit_how or "ended"
    return (f"{targets.short_label(c.target)} in {c.proc.role} {c.proc.pid}, open {took:.1f} s until the process "
            f"ended ({how}), called from {call_site(c)}; {last_seen_text(v, c.proc)}")


def _open_seconds(v: View, c: Call) -> float:
    """How long a call stayed open: to its process's end, else the log's (a hang: evidence.md's hang_s)."""
    end = c.proc.end if c.proc.end is not None else v.t_end
    return max(0.0, end - c.ts)


def calls_never_returned(v: View) -> Finding | None:
    open_calls = _unreturned(v)
    if not open_calls:
        return None
    names: dict[str, int] = {}
    for c in open_calls:
        names[targets.short_label(c.target)] = names.get(targets.short_label(c.target), 0) + 1
    more = "" if len(names) == 1 else " (" + ", ".join(f"{n} {name}" for name, n in sorted(names.items())) + ")"
    return Finding(
        "call-never-returned", "warning",
        f"{len(open_calls)} traced call(s) never returned{more}, e.g. {_open_call_text(v, open_calls[0])}.",
        sorted({x.proc.pid for x in open_calls}),
        [_open_call_text(v, x) for x in open_calls[:TEXT_PIDS]],
        "a process that exited cleanly left the call running in another thread; one killed (or ended by "
        "os._exit) died inside it: see how each ended, and look for what it was waiting on",
        {"hang_s": round(sum(_open_seconds(v, x) for x in open_calls), 3),
         "pool_wait_pids": sorted({x.proc.pid for x in open_calls} - {x.proc.pid for x in open_calls
                                                                      if x.tag not in POOL_WAITS})})


# Calls whose open end is a wait on a compile pool (starting it, or stopping it at exit): a pool's creator killed
# inside one waited on its pool, and where that pool nests the wait is the nesting's (words/causes.py).
POOL_WAITS = frozenset((targets.WARM_POOL, targets.MAYBE_WARM_POOL, targets.PROCESS_POOL, targets.WAIT_POOL_READY,
                        targets.EXIT_SHUTDOWN, targets.EXIT_JOIN, targets.POOL_CREATE, targets.POOL_SHUTDOWN,
                        targets.EXECUTOR_SHUTDOWN, targets.SIDECAR_SHUTDOWN, targets.SIDECAR_POOL_SHUTDOWN))
