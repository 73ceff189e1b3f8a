"""A launcher's restarts of its ranks, counted as its user counts them: ranks, each started once per attempt.

torchrun's elastic agent starts every rank of the worker group with ``TORCHELASTIC_RESTART_COUNT`` set (0 the
first time; after a rank fails it stops the others, a SIGTERM to each one's process group, and starts them all
again with the count one higher, up to --max-restarts). Each rank's process is new each time, so each rank
makes its compile pool again: the pools' creators of two attempts are the same ranks, not more of them.

Evidence: each process's ``process_start`` rank dict (``common/env.RANK_ENV``, read at its start; a rank's
descendants inherit its environment). Attempts are told only where every pool's creator carries a restart
count and their counts differ: without it (a log of an older tracer, another launcher) nothing is guessed
from pids or times. Per attempt: its pools, their processes, their memory at once (``View.pools_at_once``
over that attempt's pool processes alone: one sum at one moment), when its ranks started and ended, the
ending of the first of its ranks to end (the failure the restart followed: its ``Ending`` words, never one a
launcher's own signal gave), how long each of the next attempt's pools took to become ready, when its ranks'
compiles were done, and how many of the attempt's pool processes were still alive as the next began.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common import targets
from ...common.env import ELASTIC_RESTART_COUNT
from .labels import process_label, rank_value

if TYPE_CHECKING:
    from ..fold.model import Pool, Process
    from .view import View


def attempt_of(p: Process) -> int | None:
    """The attempt p's launcher started it in (its TORCHELASTIC_RESTART_COUNT), or None where not recorded."""
    value = p.rank.get(ELASTIC_RESTART_COUNT) if isinstance(p.rank, dict) else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _heads(v: View, n: int) -> list[Process]:
    """The rank processes the launcher started for attempt n: one with that restart count whose parent has none
    (the agent itself carries none; under Slurm it may carry a rank of its own, SLURM_PROCID)."""
    return [p for p in v.procs if rank_value(p.rank) is not None and attempt_of(p) == n
            and (p.parent is None or attempt_of(p.parent) is None)]


def launchers(v: View) -> set[int]:
    """The indexes of the processes that started ranks with a restart count and carry none themselves: torchrun's
    elastic agents (a rank of their own only where a launcher above gave them one, srun's SLURM_PROCID)."""
    return {p.parent.index for p in v.procs if p.parent is not None and rank_value(p.rank) is not None
            and attempt_of(p) is not None and attempt_of(p.parent) is None}


def _first_end(v: View, heads: list[Process]) -> dict[str, Any] | None:
    """The first of an attempt's ranks to end by something other than its launcher's signal (the failure the
    launcher answered by stopping the rest): its rank, pid, when, and its ending's words."""
    ended = sorted((p for p in heads if p.ended_at is not None), key=lambda p: (p.ended_at, p.pid))
    for p in ended:
        e = v.endings.of(p)
        if e.sender is not None and p.parent is not None and e.sender.index == p.parent.index:
            continue
        return {"rank": v.rank_of.get(p.index), "pid": p.pid, "at": v.rel(p.ended_at), "words": e.words}
    return None


def _compiled_by(creators: list[Process]) -> float | None:
    """When the last of these processes' compiles returned (dynamo's frame compile, targets.COMPILE)."""
    ends = [c.end for p in creators for c in p.calls.values() if c.tag == targets.COMPILE and c.end is not None]
    return max(ends) if ends else None


def _attempt(v: View, n: int, pools: list[Pool], next_start: float | None) -> dict[str, Any]:
    """One attempt's pools and ranks (module docstring)."""
    procs = v.pool_procs(pools)
    best = v.pools_at_once(pools)
    heads = _heads(v, n)
    starts = [p.start for p in heads if p.start is not None]
    ends = [p.ended_at for p in heads]
    creators = list({pool.creator.index: pool.creator for pool in pools}.values())
    ready = [round(s.ready_at - pool.call.ts, 1) for pool in pools
             if (s := v.story(pool)).ready_at is not None and s.ready_at >= pool.call.ts]
    compiled = _compiled_by(creators)
    return {
        "attempt": n, "ranks": len({v.rank_of.get(c.index) for c in creators}), "pools": len(pools),
        "sidecars": sum(1 for pool in pools if pool.sidecar is not None),
        "workers": len({w.index for pool in pools for w in v.story(pool).workers}), "processes": len(procs),
        **v.at_once_keys(best),
        "started_at": v.rel(min(starts)) if starts else None,
        "ended_at": v.rel(max(e for e in ends if e is not None)) if ends and None not in ends else None,
        "ready_s": ready if len(ready) == len(pools) else None,
        "compiled_at": v.rel(compiled),
        "failed": _first_end(v, heads),
        # its pool processes still alive as the next attempt's first rank started (None: no next attempt)
        "left_alive": (sum(1 for q in procs if q.alive_at(next_start)) if next_start is not None else None),
    }


def _restarts(v: View) -> int:
    """How many times the launcher restarted its ranks, as far as the log shows: the highest restart count any
    rank process carries (an attempt whose ranks made no pool still counts)."""
    return max((n for p in v.procs if rank_value(p.rank) is not None and (n := attempt_of(p)) is not None),
               default=0)


def _one_launcher(v: View) -> bool:
    """Whether on each host one launcher started every rank that carries a restart count: two torchrun runs
    one after the other (each counting from 0) are two launchers, whose count-0 ranks are no one attempt."""
    launchers: dict[str, set[int | None]] = {}
    for p in v.procs:
        if rank_value(p.rank) is not None and attempt_of(p) is not None and (
                p.parent is None or attempt_of(p.parent) is None):
            launchers.setdefault(p.host, set()).add(p.parent.index if p.parent is not None else None)
    return all(len(parents) == 1 for parents in launchers.values())


def restart_story(v: View, creators: list[Process]) -> dict[str, Any] | None:
    """The ranks' restarts as the pools saw them: {launcher (its label: torchrun), restarts, ranks (distinct rank
    labels among the creators), attempts: per attempt in order (module docstring)}; None unless every creator
    carries a restart count and they are not all one attempt's, one launcher per host started the ranks, and
    the counts' first starts come in their order (each attempt's "after": the failure of the attempt before it)."""
    found = {c.index: attempt_of(c) for c in creators}
    counts = sorted({n for n in found.values() if n is not None})
    if None in found.values() or len(counts) < 2 or not _one_launcher(v):
        return None
    heads = {n: _heads(v, n) for n in counts}
    # one process per rank and count: torchrun restarts its ranks for a new node (elastic membership) with the
    # same count, so a count that started a rank twice is two attempts the count cannot tell apart
    if any(len(hs) != len({(p.host, rank_value(p.rank)) for p in hs}) for hs in heads.values()):
        return None
    firsts = {n: min((p.start for p in heads[n] if p.start is not None), default=None) for n in counts}
    known = [f for n in counts if (f := firsts[n]) is not None]
    if known != sorted(known) or len(set(known)) < len(known):  # counts out of time order: no restart story
        return None
    out = []
    for i, n in enumerate(counts):
        pools = [pool for pool in v.pools if found.get(pool.creator.index) == n]
        out.append(_attempt(v, n, pools, firsts[counts[i + 1]] if i + 1 < len(counts) else None))
        # the failure this attempt's start followed: the attempt just before it, whether or not it made a pool
        out[-1]["after"] = _first_end(v, _heads(v, n - 1)) if n > 0 else None
    parents = {p.parent.index: p.parent for n in counts for p in heads[n] if p.parent is not None}
    launcher = process_label(next(iter(parents.values()))) if len(parents) == 1 else None
    return {"launcher": launcher, "restarts": _restarts(v),
            "ranks": len({v.rank_of.get(c.index) for c in creators}), "attempts": out}
