"""How each pool ended, from its sidecar's ending and the stop call asked of it, or (a fork/spawn or autotune pool,
without a sidecar) from its workers' endings (docs/evidence.md): shut down, found dead, never returned, ended by
its creator, ended at its creator's exit, broke, left running. The process endings it reads: endings.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets as T
from ...common import vocab as V
from ..fold.model import AUTOTUNE, QUACK, signal_name
from ..words.fmt import error_words, plural
from .alive import unseen_evidence, unseen_words
from .callers import requester
from .ending import (
    BROKE,
    ENDED_AT_EXIT,
    ENDED_BY_CREATOR,
    GROUP_SLACK_S,
    LEFT_RUNNING,
    OOM_KILL,
    RUNNING,
    SEEN_LATE_S,
    SHUTDOWN_COMPLETED,
    SHUTDOWN_FOUND_DEAD,
    SHUTDOWN_NEVER_RETURNED,
    SIDECAR_ENDED,
    SIGNAL,
    UNKNOWN,
    UNSEEN,
    WORKERS_ENDED,
    Ending,
    EndingsOf,
    ancestors,
    proved_ended_before,
)

if TYPE_CHECKING:
    from ..fold.model import Call, Pool, Process

# concurrent.futures joins an executor's workers at interpreter exit (threading's exit hooks, before atexit):
# workers ending this close before their creator's own end ended with its exit.
AT_EXIT_S = 2.0
# concurrent.futures' word that a worker ended abruptly (it then fails every pending job and ends the other workers).
BROKEN_POOL = "BrokenProcessPool"
# A worker's end is seen by the watcher's next tick after the executor noticed it (the job's error): ends this
# long after that error still belong to it.
WORKER_END_SLACK_S = 1.0


def _unseen_sidecar(endings: EndingsOf, req: Call | None) -> Ending:
    """The ending of a pool whose sidecar no look of the watcher saw (one that died as it started, within a tick):
    what torch's own process.wait() of it gave as its shutdown returned (`sidecar_returncode`) where that is a
    failure (a signal, or a non-zero code: a sidecar asked to stop exits 0), else not known."""
    rc = req.ret.get("sidecar_returncode") if req is not None and req.end is not None else None
    if req is None or not isinstance(rc, int) or rc == 0:
        return Ending(UNKNOWN, "how it ended is not known (its sidecar was not seen)", None, [])
    by = requester(req)[0]
    status = f"was killed by {signal_name(-rc)}" if rc < 0 else f"exited (code {rc})"
    return Ending(SHUTDOWN_FOUND_DEAD, f"its sidecar {status}, never seen alive by the watcher (it ended before "
                  f"its first look); {by} asked it to stop later and found it already dead", None,
                  [f"SubprocPool.shutdown at {endings.rel(req.ts)}: torch's process.wait() of its sidecar gave {rc}"],
                  signal_name(-rc) if rc < 0 else None, code=rc if rc > 0 else None, by=by)


def pool_ending(endings: EndingsOf, pool: Pool) -> Ending:
    """A pool's ending: its sidecar's, read against its stop call; a fork/spawn or autotune pool's, from its
    workers'."""
    side = pool.sidecar
    req = pool.shutdown_call
    if side is None and pool.members and pool.kind in (AUTOTUNE, QUACK):
        return _autotune_ending(endings, pool)
    if side is None and pool.members:
        return _executor_ending(endings, pool)
    if side is None:
        return _unseen_sidecar(endings, req)
    side_end = endings.of(side)
    end = side_end.at
    by = requester(req)[0] if req is not None else None
    if end is None:
        asked = ""
        if req is not None:  # asked, and still running: never "shut it down"
            how = (f"interrupted: {req.error}" if req.error else "the request never returned" if req.end is None
                   else "it kept running" if endings.seen(side).proven else "the request returned")
            asked = f"{by} asked it to shut down ({how}); "
        return _alive(endings, [side], asked, "left running after the main process", by)
    side_words = _as_subject(side_end)
    if req is not None and (proved_ended_before(side, req.ts) or req.at_call.get("pool_running") is False
                            or _zombie_before(side, req.ts)):
        return Ending(SHUTDOWN_FOUND_DEAD, f"its sidecar {side_words}; {by} asked it to stop later and found "
                      "it already dead", end,
                      [f"SubprocPool.shutdown asked at {endings.rel(req.ts)}",
                       f"its sidecar's end at {endings.rel(end)}", *side_end.evidence],
                      side_end.signal, by=by, group=side_end.group)
    left = side.run is not None and side in side.run.leftover
    if req is not None and (req.end is None or req.error or left or side_end.kind in (SIGNAL, OOM_KILL)):
        # Asked, but the request did not end it: it never returned, was interrupted, or the sidecar
        # outlived the main process / ended by a signal afterwards (never "shut it down").
        how = ("the request never returned" if req.end is None else
               f"the request was interrupted by {error_words(req.error)}" if req.error else "the request returned")
        after = ("; left running after the main process, then its sidecar " + side_words if left else
                 f"; its sidecar {side_words}")
        return Ending(SHUTDOWN_NEVER_RETURNED, f"{by} asked it to stop ({how}){after}", end,
                      [f"SubprocPool.shutdown asked at {endings.rel(req.ts)}: {how}",
                       *(["the watcher's leftover record"] if left else []), *side_end.evidence], side_end.signal,
                      by=by)
    if req is not None:
        return Ending(SHUTDOWN_COMPLETED, f"{by} shut it down", end,
                      [f"SubprocPool.shutdown asked at {endings.rel(req.ts)} and returned",
                       f"its sidecar ended at {endings.rel(end)}"], by=by)
    if (own := _by_creator(endings, pool, [side_end], end)) is not None:
        return own
    return Ending(SIDECAR_ENDED, f"its sidecar {side_words}", end,
                  [f"its sidecar's end at {endings.rel(end)}, no shutdown asked before", *side_end.evidence],
                  side_end.signal, group=side_end.group)

def _executor_ending(endings: EndingsOf, pool: Pool) -> Ending:
    """A fork/spawn pool's ending, from its workers' (it has no sidecar and no traced shutdown call):
    left running, ended as its creator exited (concurrent.futures' exit handler), or ended before."""
    ends = [(endings.of(q), q) for q in pool.members]
    alive = [q for e, q in ends if e.at is None]
    run = pool.creator.run
    if alive:
        return _alive(endings, alive, "", f"{plural(len(alive), 'worker')} left running after the main process")
    if (broke := _broke(endings, pool)) is not None:
        return broke
    end = max(e.at for e, _ in ends if e.at is not None)
    creator = pool.creator
    if (own := _by_creator(endings, pool, [e for e, _ in ends], end)) is not None:
        return own
    c_end = creator.ended_at
    evidence = [f"its last worker's end at {endings.rel(end)}"]
    if c_end is not None and creator.exited and creator.end is not None and not _ended_before_exit(pool) \
            and creator.end - AT_EXIT_S <= end <= c_end + GROUP_SLACK_S:
        return Ending(ENDED_AT_EXIT, f"its workers ended as {creator.role} {creator.pid} exited "
                      "(concurrent.futures stops an executor's workers at exit)", end,
                      [*evidence, f"{creator.role} {creator.pid}'s process_exit at {endings.rel(creator.end)}"],
                      by=f"{creator.role} {creator.pid}'s exit")
    last = max(ends, key=lambda x: x[0].at or 0.0)[0]
    after = run.ended_soon_by(pool.members) if run is not None and creator is run.root else None
    soon = "" if after is None else f" {after:.1f} s after {creator.role} {creator.pid}"
    return Ending(WORKERS_ENDED, f"its workers ended{soon} (the last {_as_subject(last)})", end,
                  [*evidence, *last.evidence], last.signal, group=last.group)


def _autotune_ending(endings: EndingsOf, pool: Pool) -> Ending:
    """An autotune pool's ending, from its last subprocess's and its stop call (TuningProcess.shutdown,
    TuningProcessPool.shutdown: they send the subprocess its stop and wait for it)."""
    last = max(pool.members, key=lambda q: q.start or 0.0)
    end = endings.of(last)
    req = pool.shutdown_call
    by = requester(req)[0] if req is not None else None
    if end.at is None:
        return _alive(endings, [last], "", "its autotune subprocess was left running after the main process", by)
    join = _joined_at_exit(pool, req.ts if req is not None else None)
    if join is not None:
        return Ending(ENDED_AT_EXIT, f"its subprocess ended as {pool.creator.role} {pool.creator.pid} exited "
                      "(concurrent.futures stops an executor's workers at exit, before torch's atexit)", end.at,
                      [f"its subprocesses' process_exit inside {pool.creator.role} {pool.creator.pid}'s exit join "
                       f"({endings.rel(join[0])} -> {endings.rel(join[1])}), which returned"],
                      by=f"{pool.creator.role} {pool.creator.pid}'s exit")
    if req is not None and req.end is not None and not req.error and not proved_ended_before(last, req.ts):
        return Ending(SHUTDOWN_COMPLETED, f"{by} shut it down", end.at,
                      [f"{T.short_label(req.target)} asked at {endings.rel(req.ts)} and returned",
                       f"its last subprocess ended at {endings.rel(end.at)}"], by=by)
    return Ending(WORKERS_ENDED, f"its last autotune subprocess {_as_subject(end)}", end.at,
                  [f"its last subprocess's end at {endings.rel(end.at)}", *end.evidence], end.signal)


def _alive(endings: EndingsOf, alive: list[Process], asked: str, left_words: str, by: str | None = None) -> Ending:
    """The ending of a pool whose processes `alive` were not seen to end (asked: its stop request's words):
    left running after the main process (the watcher's leftover record names one of them) or still running at
    the end of the log, each only where a record shows one of them alive then (alive.py); else when they were
    last seen, the verdict's words kept (it was true when written)."""
    run = alive[0].run
    left = run is not None and any(q in run.leftover for q in alive)
    seen = max((endings.seen(q) for q in alive), key=lambda s: (s.proven, s.last or 0.0))
    evidence = ["the watcher's leftover record"] if left else []
    if not seen.proven:
        evidence += unseen_evidence(seen, endings.rel)
        then = f"{left_words} (the watcher's verdict); " if left else ""
        return Ending(UNSEEN, f"{asked}{then}{unseen_words(seen, endings.rel)}", None, evidence, by=by,
                      last_seen=seen.last)
    if left:
        return Ending(LEFT_RUNNING, f"{asked}{left_words}", None, evidence, by=by)
    return Ending(RUNNING, f"{asked}still running at the end of the log", None, [], by=by)


def _broke(endings: EndingsOf, pool: Pool) -> Ending | None:
    """A fork/spawn pool that broke: its creator's first traced call that got BrokenProcessPool, and the workers
    that had started by then and ended by WORKER_END_SLACK_S after it, each with its own ending (a worker that
    never wrote its role record ended before torch's initializer ran in it: while it still imported). Which of
    them ended first is not told: concurrent.futures ends the rest once one has."""
    creator = pool.creator
    c = min((c for c in creator.calls.values() if c.end is not None and c.end >= pool.call.ts
             and (c.error or "").startswith(BROKEN_POOL)), key=lambda c: c.end or 0.0, default=None)
    if c is None or c.end is None:
        return None
    at = c.end
    lost = [q for q in pool.members if (q.start is None or q.start <= at)
            and (e := q.ended_at) is not None and e <= at + WORKER_END_SLACK_S]
    if not lost:
        return None
    who = "; ".join(f"worker {q.pid} {_as_subject(endings.of(q))}" + (
        "" if q.role == V.COMPILE_WORKER else " while it still imported (torch's initializer never ran in it)")
        for q in lost)
    c = c.outermost()
    end = max(q.ended_at or at for q in lost)
    return Ending(BROKE, f"it broke: {who}; {creator.role} {creator.pid}'s {T.short_label(c.target)}() got "
                  f"{BROKEN_POOL} at {endings.rel(at)} (concurrent.futures' word for a worker that ended abruptly)",
                  end,
                  [f"{BROKEN_POOL} returned to {T.short_label(c.target)}() at {endings.rel(at)}",
                   *(f"worker {q.pid}'s end at {endings.rel(q.ended_at)}" for q in lost)],
                  endings.of(lost[0]).signal if len(lost) == 1 else None)


def _by_creator(endings: EndingsOf, pool: Pool, ends: list[Ending], end: float | None) -> Ending | None:
    """The pool's ending where a signal its creator (or one of the creator's parents) sent ended its sidecar (ends:
    the sidecar's ending) or, a fork/spawn pool, every one of its workers (ends: theirs, one sender): the program
    ended its own pool (a Jupyter kernel's shutdown SIGTERMs its children; a process that kills its hung workers
    before it exits, so concurrent.futures' exit join does not wait on their jobs), however close to its exit."""
    owner, first = ends[0].sender, ends[0]
    if owner is None or any(e.sender is not owner for e in ends) or not (
            owner is pool.creator or owner in ancestors(pool.creator)):
        return None
    call = f" ({first.words.split('(', 1)[1]}" if "(" in first.words else ""
    creator, it = f"{pool.creator.role} {pool.creator.pid}", "it" if pool.sidecar is not None else "its workers"
    who = f"{owner.role} {owner.pid}" + (f" ended {it} itself" if owner is pool.creator else
                                         f", the parent of its creator {creator}, ended {it}")
    sent = f"{first.signal} to its sidecar" if pool.sidecar is not None else " and ".join(
        sorted({e.signal for e in ends if e.signal}))
    evidence = ([f"its sidecar's end at {endings.rel(end)}, no shutdown asked before", *first.evidence]
                if pool.sidecar is not None else [e.evidence[0] for e in ends if e.evidence][:3])
    return Ending(ENDED_BY_CREATOR, f"{who}, sending {sent}{call}", end, evidence, first.signal,
                  by=f"{owner.role} {owner.pid}", group=first.group, sender=owner)


def _ended_before_exit(pool: Pool) -> bool:
    """Did every worker of the pool write its own exit before its creator's exit handler began (a spawned child
    that died as it started)? Then they ended on their own, however close to that exit the watcher saw them go.
    Without a traced exit handler (older logs) nothing says so: False."""
    began = min((c.ts for c in pool.creator.calls.values() if c.tag == T.EXIT_JOIN), default=None)
    return began is not None and all(q.exited and q.end is not None and q.end < began for q in pool.members)


def _joined_at_exit(pool: Pool, asked: float | None) -> tuple[float, float] | None:
    """The creator's exit join (concurrent.futures' _python_exit, before any atexit handler) that ended the
    pool's subprocesses: one that returned before the pool's stop call (if any), inside which every member wrote
    its process_exit. Its return proves them ended (the executor's manager joins its workers first): an
    AutotuneProcessPool's worker, whose own atexit _shutdown then finds nothing to stop. (start, end) or None."""
    for c in pool.creator.calls.values():
        if c.tag == T.EXIT_JOIN and c.end is not None and (asked is None or c.end <= asked) and all(
                q.exited and q.end is not None and c.ts <= q.end <= c.end for q in pool.members):
            return c.ts, c.end
    return None


def _as_subject(e: Ending) -> str:
    """A process ending's words after "its sidecar": "was killed by SIGTERM", "exited (code 0)"."""
    return f"was {e.words}" if e.kind in (SIGNAL, OOM_KILL) and not e.words.startswith("ended") else e.words


def _zombie_before(p: Process, ts: float) -> bool:
    z = p.zombie
    return z is not None and z.get("since") is not None and z["since"] < ts - SEEN_LATE_S
