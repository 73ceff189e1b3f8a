"""The jobs a pool lost (sent to, or in flight in, a pool whose sidecar had died) or had cut off (in flight when a
live pool was asked to stop), read from the pool's ending (poolends.py): a count only where a record shows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common import targets as T
from .ending import SEEN_LATE_S, SHUTDOWN_COMPLETED, SHUTDOWN_FOUND_DEAD, SHUTDOWN_NEVER_RETURNED, SIDECAR_ENDED
from .held import held_during

if TYPE_CHECKING:
    from ..fold.model import Pool
    from .endings import Endings

# torch 2.13's SubprocMain._shutdown stops the workers at once (_shutdown_pool, new in 2.13); before, the
# sidecar let running jobs finish and its owner waited in process.wait(300) (pytorch#162199).
CUTS_OFF_FROM = (2, 13)
OLD_WAIT_S = 300
_SUBMIT_LABEL = next(t.label for t in T.TARGETS if t.tag == T.POOL_SUBMIT)


def pool_jobs(endings: Endings, pool: Pool) -> dict[str, Any]:
    """Jobs lost and cut off, with the line that sent the last one and what that means on this torch."""
    ending = endings.of_pool(pool)
    req = pool.shutdown_call
    pending = len(req.at_call.get("pending_jobs") or []) if req is not None and "pending_jobs" in req.at_call \
        else None
    side_end = ending.at
    lost = cut = None
    after_death = pool.last_job is not None and side_end is not None and pool.last_job > side_end + SEEN_LATE_S
    if ending.kind in (SHUTDOWN_FOUND_DEAD, SIDECAR_ENDED):
        lost = max(pending or 0, 1 if after_death else 0)
    elif ending.kind in (SHUTDOWN_COMPLETED, SHUTDOWN_NEVER_RETURNED) and (
            pool.sidecar is None or pool.sidecar.served):
        # A sidecar that never reached its serving loop ran no job of the user's: its pending job is the
        # pool's own warm-up, and sidecar-never-served tells why (the bundled example's nested pools).
        cut = pending
        if cut and endings.torch is not None and endings.torch >= CUTS_OFF_FROM and req is not None:
            # 2.13's sidecar stops its workers at once, but a job its worker ended after the request (its end
            # record says so) was not cut off: an executor the sidecar had quiesced before is gone from it, so its
            # stop ends no worker, and the job runs to its end while the shutdown waits (slow-exit-wait; the
            # sidecar's own exit join, exit-hang). Nor was one its creator's record shows quiesced under it whose
            # worker lived past the request (a job that never ends: the worker ran it until something else ended
            # it). Jobs never ended in a live executor are the ones cut off.
            quiesced = [q.ts for q in pool.quiesce_calls if q.ts <= req.ts]
            cut = max(0, cut - len([h for h in held_during(pool, req.ts, req.ts, req.ts)
                                    if h.until > req.ts and (h.ended or any(h.job.start <= q for q in quiesced))]))
    line = pool.creator.count_callers.get(_SUBMIT_LABEL) if after_death else None
    # Which way they were lost is told apart: sent after the sidecar's end (a submit later than it), or
    # only still pending at the shutdown that found the pool dead (sent before it died, never answered).
    return {"jobs_lost": lost, "jobs_cut_off": cut, "lost_line": line, "lost_after_end": bool(after_death),
            "cut_off_means": cut_off_means(endings.torch) if cut else None}


def cut_off_means(torch: tuple[int, int] | None) -> str:
    if torch and torch >= CUTS_OFF_FROM:
        return "on torch 2.13 and later the sidecar stops its workers at once: the jobs are cut off"
    return (f"before torch 2.13 (pytorch#162199) the sidecar lets them run, and the shutdown waits in "
            f"process.wait({OLD_WAIT_S}): up to five minutes at exit")
