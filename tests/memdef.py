"""Memory at once by its definition (memseries' docstring read literally, one pass over every process per
moment): the reference the swept sums (memseries.at_once, Memory) and every MiB·s the report gives are checked
against."""

from __future__ import annotations

from typing import Any

from wp_autotrace.analysis.derive.memseries import stale_s


def end_by_definition(p: Any) -> float | None:
    ends = [x for x in (p.gone, p.end) if x is not None]
    return max(ends) if ends else None


def lived_by_definition(p: Any) -> list[Any]:
    """No sample after the process's own exit record once a page sharer had begun to end (its own exit record,
    or the watcher's end, whichever came first); unless it has no other."""
    def began_to_end(q: Any) -> float | None:
        signs = [x for x in (q.end if q.exited else None, end_by_definition(q)) if x is not None]
        return min(signs) if signs else None

    sharers = list(p.children) + ([p.parent] + [q for q in p.parent.children if q is not p]
                                  if p.forked and p.parent is not None else [])
    kept = [m for m in p.mem if not (p.exited and p.end is not None and m[0] > p.end and any(
        (e := began_to_end(q)) is not None and e <= m[0] for q in sharers))]
    return kept or p.mem


def sum_by_definition(procs: list[Any], t: float, latest: dict[int, Any], fresh_s: Any) -> Any:
    """memseries' docstring read literally at moment t, from each process's latest reading (`latest`) that
    fresh_s(process, its reading's time, t) accepts: (PSS summed, read, alive)."""
    end = end_by_definition
    alive = [i for i, p in enumerate(procs) if (p.start is None or p.start <= t)
             and (end(p) is None or end(p) > t) or latest.get(i, (None,))[0] == t]
    fresh = [i for i in alive if i in latest and fresh_s(procs[i], latest[i][0], t)]
    by_span = {i for i in fresh if (procs[i].start is None or procs[i].start <= t)
               and (end(procs[i]) is None or end(procs[i]) > t)}
    # out: a process read before a forked child of its, counted by its span, started (a pre-fork reading),
    fresh = [i for i in fresh if not any(
        q.forked and q.parent is procs[i] and q.start is not None and q.start > latest[i][0]
        for j, q in enumerate(procs) if j in by_span) and not (  # nor one read before its own exit record
        procs[i].exited and procs[i].end is not None and latest[i][0] < procs[i].end <= t)]
    # the oldest reading summed, as seconds before t (0 where all were taken at t): memseries.Point.apart
    apart = max((t - latest[i][0] for i in fresh), default=0.0)
    return sum(latest[i][1] for i in fresh), len(fresh), len(alive), apart


def at_once_by_definition(procs: list[Any], a: float | None = None, b: float | None = None) -> list[Any]:
    """memseries' docstring read literally, one pass over every process per moment: at each sample time (of
    the samples in [a, b]), the processes alive (started, not yet ended: the later of the watcher's end and
    the exit record's, docs/evidence.md; or read then) and read within the run's window (stale_s), summed."""
    from wp_autotrace.analysis.derive.memseries import Point

    samples = sorted((ts, i, pss) for i, p in enumerate(procs) for ts, pss, _ in lived_by_definition(p)
                     if (a is None or ts >= a) and (b is None or ts <= b))
    out, latest = [], {}
    for t in sorted({s[0] for s in samples}):
        latest.update({i: (ts, pss) for ts, i, pss in samples if ts == t})
        pss, read, alive, apart = sum_by_definition(procs, t, latest, lambda p, ts, t: ts + stale_s(p, ts) >= t)
        if read:
            out.append(Point(t, pss, read, alive, apart))
    return out


def integral_by_definition(procs: list[Any], a: float, b: float) -> tuple[float, float]:
    """Memory at once as a function of time, integrated over [a, b] by its definition: between any two moments
    where it can change (a reading, its window after one, a start, an end, an exit record), its value at the
    middle (no reading there: one counts while younger than its window, stale_s); and the seconds some process alive was
    not read."""
    samples = sorted((ts, i, pss) for i, p in enumerate(procs) for ts, pss, _ in lived_by_definition(p))
    edges = {a, b, *(s[0] for s in samples), *(s[0] + stale_s(procs[s[1]], s[0]) for s in samples)}
    edges |= {x for p in procs for x in (p.start, end_by_definition(p), p.end) if x is not None}
    cut = sorted(x for x in edges if a <= x <= b)
    total = unread = 0.0
    for lo, hi in zip(cut, cut[1:]):
        mid = (lo + hi) / 2
        latest = {}
        for ts, i, pss in samples:
            if ts <= mid:
                latest[i] = (ts, pss)
        pss, read, alive, _ = sum_by_definition(procs, mid, latest, lambda p, ts, t: ts + stale_s(p, ts) > t)
        total += pss * (hi - lo)
        unread += (hi - lo) if read < alive else 0.0
    return total, unread
