"""An autotune pool's kills (fold/autotune.py folds the pool): each benchmark torch gave up on, from its records.

A kill is torch's TuningProcess.kill() that found its subprocess running (its call captured the pid and
`running`): called by get() when the benchmark's answer did not come within its timeout (the get call it is
inside: how long the autotuning process waited, from the get's start to the kill). Then:

- the killed subprocess: its end and how (derive/endings.py: "killed by SIGKILL" only with a status the log
  holds, the watcher's zombie record's);
- its replacement: the pool's next member started after the kill (torch starts one at the next put());
- the zombie it stayed: kill() never waits, so it stays defunct under its creator from its end until its
  creator reaps it (the watcher saw it reaped) or ends (pid 1 then takes it); while the creator lived on, a
  `ps` line marked <defunct>.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from ...common import targets
from .callers import user_frame

if TYPE_CHECKING:
    from ..fold.model import Call, Pool, Process

# TuningProcess.get: its label's tail (the wait a kill is inside).
GET_QUALNAME = targets.LABEL_SEP + "TuningProcess.get"


class Kill(NamedTuple):
    """One benchmark torch gave up on (see the module docstring); times absolute, None where not seen."""

    call: Call
    pid: int | None  # the subprocess killed (captured), else the member alive at the kill
    proc: Process | None
    waited_s: float | None  # from the get's start to the kill: the job's wait (get's timeout)
    caller: dict[str, Any] | None  # the user frame of the wait (else of the kill)
    replacement: Process | None
    zombie_from: float | None
    zombie_to: float | None  # reaped, or its creator's end; None while both were alive at the log's end
    zombie_under_creator: bool  # defunct under its (living) creator, as the watcher saw it


def _get_of(c: Call) -> Call | None:
    q = c.parent
    while q is not None:
        if q.tag == targets.AUTOTUNE_GET or q.target.endswith(GET_QUALNAME):
            return q
        q = q.parent
    return None


def kills(pool: Pool) -> list[Kill]:
    """The pool's kills, in time order."""
    out = []
    members = sorted(pool.members, key=lambda q: q.start or 0.0)
    for c in sorted(pool.kills, key=lambda c: c.ts):
        pid = c.at_call.get("autotune_pid")
        proc = next((q for q in members if q.pid == pid), None) if pid is not None else next(
            (q for q in reversed(members) if (q.start or 0.0) <= c.ts and q.alive_at(c.ts)), None)
        get = _get_of(c)
        waited = c.ts - get.ts if get is not None else None
        caller = user_frame((get or c).caller) or user_frame(c.caller)
        replacement = next((q for q in members if q is not proc and (q.start or 0.0) >= c.ts - 0.5), None)
        z = proc.zombie if proc is not None else None
        creator = pool.creator
        under = bool(z and z.get("ppid") == creator.pid)
        since = z.get("since") if z and isinstance(z.get("since"), (int, float)) else None
        reaped = z.get("reaped") if z and isinstance(z.get("reaped"), (int, float)) else None
        to = reaped if reaped is not None else creator.ended_at if under else None
        out.append(Kill(c, pid if pid is not None else proc.pid if proc is not None else None, proc, waited,
                        caller, replacement, since, to, under))
    return out
