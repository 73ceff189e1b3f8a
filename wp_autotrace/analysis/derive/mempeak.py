"""The peak of memory at once and what the report tells of its series (docs/evidence.md, "Memory at once").

memseries.py makes the sums (a set of processes' PSS at each moment the watcher read them); this module chooses
among them. `peak`: the most held at one moment, a point whose readings one sweep took (else the points with every
reading counting STALE_S), never under a part's own peak; what makes that figure a floor beyond its moment
(never_read, split_moment: docs/evidence.md, "At least"); what processes left behind held at one moment
(left_at_once); and a run's series bounded for the page, each line told by its peak (run_series, thin).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from ...common.vocab import HELPER_ROLES, POOL_ROLES
from ..fold.model import Process
from .memseries import STALE_S, Point, at_moments, at_once, lived_mem

# The roles the watcher reads (watcher/memory.py: pool processes and their helpers): one never read is a miss.
READ_ROLES = POOL_ROLES | HELPER_ROLES
# The report's memory series (run_series), bounded whatever the run's length and pool count: at most
# MEMORY_LINES series a run, each thinned to MEMORY_POINTS equal time buckets (at most 2 x MEMORY_POINTS + 1
# points: a bucket's first and largest, and the last point). MEMORY_POINTS is the page's chart width in pixels
# (present/html.py): a finer series draws nothing more. Four lines are what a reader tells apart (dashes, greys).
MEMORY_LINES = 4
MEMORY_POINTS = 830


def peak_at_once(procs: list[Process], a: float | None = None, b: float | None = None,
                 moments: Collection[float] = ()) -> tuple[int | None, int, int, float | None]:
    """The most PSS procs held together at one moment: `peak` of their at_once (its samples in [a, b] when
    given; the first such moment on a tie), moments the times its parts peaked at (`peak`). Returns (peak bytes,
    processes read at that moment, processes alive then, t); (None, 0, 0, None) unsampled."""
    best = peak(at_once(procs, a, b), procs, a, b, moments)
    return (None, 0, 0, None) if best is None else (best.pss, best.read, best.alive, best.ts)


def peak(points: list[Point], procs: list[Process], a: float | None = None, b: float | None = None,
         moments: Collection[float] = (), parts: Sequence[tuple[list[Process], list[Point]]] = ()) -> Point | None:
    """The most procs held at one moment (points: their at_once, in [a, b] when given): the largest of the
    points whose readings were all taken within STALE_S of it (apart: the sampler's own period, one sweep's
    moment), the first on a tie, where one of those read every process alive. A reading counts for the pace
    the watcher kept (fold/pace.py), up to 13.5 s at a 9 s pace, so a point of the line between two sweeps may
    sum one process's reading of now with another's of 13 s ago: the line and its MiB·s hold them, but a burst
    read in two sweeps is no peak that existed together (principle 6). Where no moment was read whole (pools
    swept in turn seconds apart: then only the first point may be that fresh, and a 400 MiB reading was told
    as a 100 MiB peak), the largest point of at_once with every reading counting STALE_S: still one moment's
    sum, a process with no reading that fresh unread (read < alive: "N of M read").

    moments: the times at which parts of procs (each pool's processes, of a run's or an attempt's pools)
    peaked by this rule. The whole's point at each, every reading counting STALE_S, is a candidate too: a
    part's peak sums readings within STALE_S of its moment, which that point sums as well, beside whatever of
    the rest was read that fresh (the rest's older readings unread, "N of M read"). So the whole's peak is
    never under a part's, as what a set of processes held is never under what a subset of them held, though
    the whole's own one-moment points may all miss the moment a part peaked at (the other pools then read
    more than STALE_S before: 246.4 MiB told for three ranks' pools beside one pool's own 246.7 MiB). A part's
    lone reading that its own peak passed over (a whole sweep beats it) is no candidate: only its peak's moment
    is.

    The peak is a floor beyond its own moment (Point.never, Point.split; docs/evidence.md, "At least") where
    a process the watcher reads was alive in [a, b] and never read there (never_read: a worker that lived 0.3 s
    between two looks held memory no figure counts), or where parts given (each pool's processes and its own
    series: the pools of a run, an attempt, a summed line) were alive together at a moment their own passes on
    either side of it sum to more than the peak (split_moment: a pool made as another idles overlaps it for 1-3 s,
    while a pass comes every 6 s on a loaded box)."""
    at_one = [pt for pt in points if pt.apart <= STALE_S]
    if not any(pt.read >= pt.alive for pt in at_one):
        at_one = at_once(procs, a, b, window=STALE_S) if points else []
    elif moments:
        at_one = sorted(at_one + at_moments(procs, a, b, moments), key=lambda pt: pt.ts)  # the first on a tie
    best = max(at_one, key=lambda pt: pt.pss, default=None)
    if best is None:
        return None
    split = split_moment(parts, best.pss) if len(parts) > 1 else None
    return best._replace(never=never_read(procs, a, b, best.ts), split=split[0] if split else 0,
                         split_at=split[1] if split else None)


def never_read(procs: list[Process], a: float | None = None, b: float | None = None,
               besides: float | None = None) -> int:
    """How many of procs the watcher reads (a pool process or its helper: watcher/memory.py's roles) were alive in
    [a, b] (their whole life where not given) with no reading of their life (lived_mem) taken there: what they
    held counts in no figure. A compiler or linker a worker runs is not read by design (short lived, not the
    pool's memory), so it is not counted here. besides: a figure's own moment, whose unread processes alive then
    its point counts already (Point.read < Point.alive): those are left out here."""
    lo, hi = -math.inf if a is None else a, math.inf if b is None else b
    return sum(1 for p in procs if p.role in READ_ROLES and p.alive_during(lo, hi)
               and (besides is None or not p.alive_at(besides)) and not any(lo <= m[0] <= hi for m in lived_mem(p)))


# A split moment (split_moment) is told only past this share of the peak: two passes of idle pools differ by a
# page here and there, so each pool's larger neighbour summed over pools passes the peak by a fraction of a
# percent; a pool that grew (or one made) while another was whole passes it by a pool's worth (5-99 %).
SPLIT_MARGIN = 0.02


def split_moment(parts: Sequence[tuple[list[Process], list[Point]]], told: int) -> tuple[int, float] | None:
    """(the parts alive then, the moment) where parts alive together, each at the larger of its own one-moment
    points on either side of that moment (its one moment read before and after; its first before it, its last
    after it, while it lived), sum to more than told by SPLIT_MARGIN: the largest such moment. None where none
    does. Each part is one pool, whose own series reads its shared pages at one moment (a sidecar and the workers
    it forked); pools share none, so their figures add across passes. It is no figure (readings of different
    moments): only evidence that the peak, the one moment read, may be under what was held.

    A moment counts only where the parts alive then were not read by the same passes on both sides of it: parts
    read together before and after (one growing as the other shrinks between two whole passes) hold at most what
    one pool alone may hold between its passes, which is never told as a floor either. A process whose end no
    record shows lives until its run's last record (the most a record shows of it): an earlier run killed with
    its watcher is not "alive together" with a later one's pools."""
    events: list[tuple[float, int, int, tuple[float, float]]] = []  # (time, part, its bracket, the bracket's passes)
    for k, (procs, points) in enumerate(parts):
        starts = [p.start for p in procs if p.start is not None]
        ends = [p.ended_at if p.ended_at is not None or p.run is None else p.run.end for p in procs]
        life_a = min(starts) if len(starts) == len(procs) and starts else -math.inf
        life_b = max(e for e in ends if e is not None) if ends and None not in ends else math.inf
        one = [pt for pt in points if pt.apart <= STALE_S and life_a <= pt.ts < life_b]
        if not one:
            continue
        events.append((life_a, k, one[0].pss, (-math.inf, one[0].ts)))  # before its first reading: that reading's
        events += [(x.ts, k, max(x.pss, y.pss), (x.ts, y.ts)) for x, y in zip(one, one[1:])]
        events += [(one[-1].ts, k, one[-1].pss, (one[-1].ts, math.inf)), (life_b, k, 0, (life_b, life_b))]
    events.sort(key=lambda e: e[0])  # stable: a part's own events keep their order
    held: dict[int, tuple[int, tuple[float, float]]] = {}
    total = 0
    best: tuple[float, float | None, int] = (told * (1 + SPLIT_MARGIN), None, 0)
    for i, (t, k, value, passes) in enumerate(events):
        total += value - held.get(k, (0, passes))[0]
        held[k] = (value, passes)
        # the sum from t on, once every event at t is in (a pool ending as another begins never held both)
        if (i + 1 == len(events) or events[i + 1][0] > t) and total > best[0] and math.isfinite(t):
            alive = [w for v, w in held.values() if v > 0]
            if len(set(alive)) > 1:
                best = (total, t, len(alive))
    return (best[2], best[1]) if best[1] is not None else None


def left_at_once(procs: list[Process], after: float | None) -> Point | None:
    """What processes left behind held together, as one at_once point of theirs (the same readings and
    staleness as every peak, so the leftovers' figure is never a sum of readings from different moments):
    the point that read the most of them, one after `after` (the main process's end) before one before it,
    the latest on a tie. Its samples include those taken after a process's own process_exit (lived=False):
    a leftover holds what it holds until it is gone. One moment as `peak` reads it: a point whose readings were
    all taken within STALE_S of it, else a sweep with that window (a reading counting for a loaded watcher's
    13.5 s summed three sidecars' readings of different sweeps to 689 MiB beside the pools' 505 MiB peak). None
    when none of them was read."""
    points = [pt for pt in at_once(procs, lived=False) if pt.apart <= STALE_S] \
        or at_once(procs, lived=False, window=STALE_S)
    return max(points, default=None, key=lambda pt: (pt.read, after is not None and pt.ts >= after, pt.ts))


def thin(points: list[Point], buckets: int) -> list[Point]:
    """At most about 2 x buckets points for a drawing: in each equal time bucket, its first point and its
    largest (so no peak is lost); every point when there are few."""
    if len(points) <= 2 * buckets or buckets < 1:
        return points
    lo, hi = points[0].ts, points[-1].ts
    width = (hi - lo) / buckets or 1.0
    chosen: dict[int, list[Point]] = {}
    for pt in points:
        b = min(int((pt.ts - lo) / width), buckets - 1)
        got = chosen.setdefault(b, [pt, pt])
        if pt.pss > got[1].pss:
            got[1] = pt
    out = sorted({x for pair in chosen.values() for x in pair})
    return out if out[-1] == points[-1] else [*out, points[-1]]


def run_series(pools: list[list[Process]], series: list[list[Point]], peaks: list[Point | None]
               ) -> list[tuple[list[int], list[Point], Point]]:
    """A run's memory at once as the report holds it: (indices into pools, thinned points, its peak: `peak` of
    the whole series, so the page tells the report's figure) per series, pools being each pool's processes (a
    pool's never include a pool made inside it), series each one's at_once and peaks each one's `peak` of it
    (PoolStory.series, PoolStory.peak: taken once, a pool never read whole costs a sweep for it). Every sampled
    pool's own series when there are at most MEMORY_LINES; else the MEMORY_LINES - 1 largest by peak each (in
    that order) and one series of the others' processes summed at once (at_once over them all; its peak never
    under one of theirs). Unsampled pools have no series."""
    read = [(i, points, best) for i, (points, best) in enumerate(zip(series, peaks))
            if best is not None]
    if len(read) <= MEMORY_LINES:
        return [([i], thin(points, MEMORY_POINTS), best) for i, points, best in read]
    read.sort(key=lambda x: -x[2].pss)
    top, rest = read[:MEMORY_LINES - 1], read[MEMORY_LINES - 1:]
    others = [q for i, _, _ in rest for q in pools[i]]
    summed = at_once(others)
    out = [([i], thin(points, MEMORY_POINTS), best) for i, points, best in top]
    best = peak(summed, others, moments=[pt.ts for _, _, pt in rest],  # never under one of theirs
                parts=[(pools[i], series[i]) for i, _, _ in rest])
    return out + ([([i for i, _, _ in rest], thin(summed, MEMORY_POINTS), best)] if best is not None else [])
