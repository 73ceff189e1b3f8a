"""Memory at once: what a set of processes (a pool's, or every pool's) held together at each moment the
watcher read them. The one sum the report's figures, the HTML page and the Perfetto counters all take
(docs/evidence.md, "Memory at once").

At each time t the watcher wrote a `memory` record holding one of the processes, the sum over those alive
at t (Process.alive_at: started, and not yet ended by Process.ended_at, the one end rule) of each one's
latest PSS sample taken in [t - W, t], W that sample's window (stale_s). A process alive at t with no sample
that fresh is left out of that point, and the point says so (read < alive): nothing is estimated. A process
read at t counts at t whatever its span says (the reading proves it was there). A sample taken after the process's own
process_exit is used only while none of the processes it shares pages with had begun to end (lived_mem): the
watcher reads a pool process once more as it writes its process_exit (its last size, often its peak), but a
sidecar read after its forked workers went holds their once-shared pages alone.

STALE_S is the sampler's own period (common/vocab.py MEMORY_STALE_S: each pool process at most every
MEMORY_EVERY_S, looked at every MEMORY_LOOK_S; the watcher samples by the same constants), so a pool the
sampler keeps up with is read whole at every point. A loaded host stretches that period (the sampler's CPU
budget), so W is 1.5 x the pace the watcher kept near that reading, STALE_S at least (fold/pace.py): a pool
swept every 9 s is read whole; where the watcher went far beyond the pace around it (it stopped or stalled) the
points say "N of M read" instead of summing stale figures. A point between two sweeps may so sum readings up
to W apart (Point.apart): every peak is the largest point whose readings one moment holds (`peak`).

One process's own readings over a span (span_samples, held_at, held_after) are here too: the figure of what a
pool held idle where no moment of the span read it whole, and a leftover's.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Collection, Iterator, Sequence
from functools import partial
from operator import itemgetter, lt
from typing import NamedTuple

from ...common.vocab import HELPER_ROLES, MEMORY_STALE_S, POOL_ROLES
from ..fold.model import Process

# A sample this old still counts at a moment: the watcher's sampling period.
STALE_S = MEMORY_STALE_S
# The roles the watcher reads (watcher/memory.py: pool processes and their helpers): one never read is a miss.
READ_ROLES = POOL_ROLES | HELPER_ROLES
# The report's memory series (run_series), bounded whatever the run's length and pool count: at most
# MEMORY_LINES series a run, each thinned to MEMORY_POINTS equal time buckets (at most 2 x MEMORY_POINTS + 1
# points: a bucket's first and largest, and the last point). MEMORY_POINTS is the page's chart width in pixels
# (present/html.py): a finer series draws nothing more. Four lines are what a reader tells apart (dashes, greys).
MEMORY_LINES = 4
MEMORY_POINTS = 830
# `peak`'s moments swept one by one up to this many (each costs a pass over the readings to pick its own: an
# hour of 99 processes, 0.01 s each against 0.6 s for a sweep of all); more, one sweep of all.
MOMENTS_APART = 16


class Point(NamedTuple):
    """One moment of a pool's memory: absolute time, bytes held together, processes read / alive, and how long
    before ts the oldest reading it sums was taken (0 where one sweep read all it sums; `peak`). A peak (`peak`)
    also says what makes it a floor beyond its own moment (docs/evidence.md, "At least"): `never`, the processes
    of its stretch the watcher reads (pool processes and their helpers) that were alive there and never read
    there; `split`, the parts (pools) alive together at `split_at` whose own passes on either side of it sum to
    more than pss (no one pass read them together then)."""

    ts: float
    pss: int
    read: int
    alive: int
    apart: float = 0.0
    never: int = 0
    split: int = 0
    split_at: float | None = None

    @property
    def at_least(self) -> bool:
        """Whether the figure is a floor: a process alive at its moment unread, or beyond it (never, split)."""
        return self.read < self.alive or self.never > 0 or self.split > 0


def lived_mem(p: Process) -> list[tuple[float, int, int]]:
    """p's memory samples taken while it lived; one taken after its own process_exit only while none of the
    processes it shares pages with (its children; a forked process's parent and siblings too) had begun to end
    (their own process_exit, or the watcher's end): a sidecar read after its workers had gone holds their
    once-shared pages alone, 3.3x its idle PSS (docs/evidence.md, "Memory at once"). The watcher's read at a
    pool process's process_exit (watcher/memory.py) is then what it held as it ended: an exec'd process that
    forked nothing (an autotune subprocess) always. All of them when it has no other."""
    end = p.end if p.exited else None
    # in C (operator.lt over the readings' times): every sweep asks this of each of its processes
    if end is None or not any(map(partial(lt, end), map(itemgetter(0), p.mem))):
        return p.mem
    sharers = list(p.children)
    if p.forked and p.parent is not None:
        sharers += [p.parent, *(q for q in p.parent.children if q is not p)]
    went = (min(e for e in (q.end if q.exited else None, q.ended_at) if e is not None) for q in sharers
            if q.ended_at is not None)
    gone = min(went, default=None)
    lived = [m for m in p.mem if m[0] <= end or gone is None or m[0] < gone]
    return lived or p.mem


class _Sum:
    """at_once's running state: who is alive by its span, read within its window (`both`), and whose reading
    predates the fork of a child counted beside it (`early`: left out of the point, as unread)."""

    def __init__(self, procs: list[Process]) -> None:
        self.latest: dict[int, tuple[float, int]] = {}
        self.both: set[int] = set()  # alive by its span and read within its window
        self.total = 0  # PSS of `both`
        at = {id(p): i for i, p in enumerate(procs)}
        # a forked child's index -> its parent's (both in procs), and the child's start: the fork
        self.parent = {i: at[id(p.parent)] for i, p in enumerate(procs)
                       if p.forked and p.parent is not None and id(p.parent) in at and p.start is not None}
        self.fork: dict[int, float] = {i: start for i in self.parent if (start := procs[i].start) is not None}
        self.kids: dict[int, list[int]] = {}
        for kid, parent in self.parent.items():
            self.kids.setdefault(parent, []).append(kid)
        self.newer: dict[int, int] = {}  # parent -> its counted children forked after its latest reading
        # i -> its process_exit's time, once the sweep has passed it: a reading before it is of a process that
        # has begun to end since (its pages are going, its sharers' PSS rising)
        self.exit = {i: p.end for i, p in enumerate(procs) if p.exited and p.end is not None}
        self.exited: set[int] = set()
        self.early: set[int] = set()
        self.early_total = 0
        # (reading time, i) of the readings a point sums, lazily cleared: the oldest is the point's `apart`
        self.oldest: list[tuple[float, int]] = []

    def exits(self, i: int) -> None:
        """The sweep passed i's process_exit."""
        self.exited.add(i)
        self._settle(i)

    def _settle(self, i: int) -> None:
        """i out of the point while a child forked after i's latest reading is counted (a pre-fork reading
        holds the pages its children share since: summed with theirs, they count twice), and once i wrote its
        process_exit after its latest reading (it is ending: its pages go, a sharer read since holds them)."""
        want = i in self.both and (self.newer.get(i, 0) > 0 or (
            i in self.exited and self.latest[i][0] < self.exit[i]))
        if want and i not in self.early:
            self.early.add(i)
            self.early_total += self.latest[i][1]
        elif not want and i in self.early:
            self.early.discard(i)
            self.early_total -= self.latest[i][1]
            heapq.heappush(self.oldest, (self.latest[i][0], i))

    def set_both(self, i: int, want: bool) -> None:
        """i in or out of `both` (alive by its span and read within its window), with what follows from it: its
        parent's count of newer children (a child forked after the parent's latest reading) and both one's
        `early`. Called once per reading and per change of span or window: the sweep's inner step, so its
        helpers are written out here (a method call each cost a third of the sweep)."""
        both = self.both
        if want == (i in both):
            return
        latest = self.latest
        ts, pss = latest[i]
        if want:
            both.add(i)
            self.total += pss
            heapq.heappush(self.oldest, (ts, i))
        else:
            if i in self.early:
                self.early.discard(i)
                self.early_total -= pss
            both.discard(i)
            self.total -= pss
        parent = self.parent.get(i)
        if parent is not None and parent in latest and self.fork[i] > latest[parent][0]:
            self.newer[parent] = self.newer.get(parent, 0) + (1 if want else -1)
            self._settle(parent)
        if want:  # out of both, i is out of early already
            self._settle(i)

    def read(self, i: int, t: float, pss: int) -> None:
        """A new reading of i: out with its old figure, in with the new one (set_both, by the caller)."""
        self.set_both(i, False)
        self.latest[i] = (t, pss)
        kids = self.kids.get(i)
        fork = self.fork
        self.newer[i] = sum(1 for k in kids if k in self.both and fork[k] > t) if kids else 0

    def point(self, t: float, spanned: int, extra: list[int]) -> Point:
        heap = self.oldest
        while heap and (heap[0][1] not in self.both or heap[0][1] in self.early
                        or self.latest[heap[0][1]][0] != heap[0][0]):
            heapq.heappop(heap)  # no longer summed (a newer reading, left the window, out as early)
        return Point(t, self.total - self.early_total + sum(self.latest[i][1] for i in extra),
                     len(self.both) - len(self.early) + len(extra), spanned + len(extra),
                     t - heap[0][0] if heap else 0.0)


Sample = tuple[float, int, int]  # (reading time, index in procs, PSS): what a sweep reads, in this order


def _samples(procs: list[Process], a: float | None, b: float | None, lived: bool) -> list[Sample]:
    """procs' readings taken in [a, b] (lived: lived_mem's), in time order."""
    mems = [(i, lived_mem(p) if lived else p.mem) for i, p in enumerate(procs) if p.mem]
    if a is None and b is None:
        samples = [(ts, i, pss) for i, mem in mems for ts, pss, _ in mem]
    else:  # a window (peak's moments: a few seconds of a long run): only its readings made into samples
        lo, hi = -math.inf if a is None else a, math.inf if b is None else b
        samples = [(ts, i, pss) for i, mem in mems for ts, pss, _ in mem if lo <= ts <= hi]
    samples.sort()
    return samples


def _sweep(procs: list[Process], a: float | None, b: float | None, lived: bool, steps: bool = False,
           window: float | None = None, samples: list[Sample] | None = None
           ) -> Iterator[tuple[float, _Sum, int, list[int] | None]]:
    """at_once's sweep: at each sample time with something read, (t, the running state, processes alive by
    their span, those read at t though their span says they were not alive). The state changes as the sweep
    goes on: read it before the next step. steps=True also stops at every moment the sum can change between
    two sample times (a process's start or end, its process_exit, a reading turning its window old) and yields
    (t, state, alive, None) there, and after each point, once the readings their window old at t have left: the
    state from t until the next yield (Memory's steps). window: how long every reading counts (`peak`'s
    one-moment sums), instead of each one's own (stale_s). samples: _samples(procs, a, b, lived), where the caller
    has them already."""
    if samples is None:
        samples = _samples(procs, a, b, lived)
    # each process's reading windows, looked up once a sweep (stale_s's rule), not once a reading
    wins = [_windows(p) if p.mem and window is None else None for p in procs]
    spans = [(p.start, p.ended_at) for p in procs]
    enters = sorted((s, i) for i, (s, _) in enumerate(spans) if s is not None)
    leaves = sorted((e, i) for i, (_, e) in enumerate(spans) if e is not None)
    in_span = [s is None for s, _ in spans]
    left = [False] * len(procs)
    state = _Sum(procs)
    exits = sorted((end, i) for i, end in state.exit.items())
    until: dict[int, float] = {}  # i -> when its latest reading turns its window old
    recent: list[tuple[float, int]] = []  # heap of (when the reading turns stale, i): who may still be fresh
    spanned = sum(in_span)  # alive by its span

    def sync(i: int, after: bool = False) -> None:
        # at a point a reading exactly its window old still counts; from that moment on (after) it does not
        # (the same figure as the heap's key, so a reading popped as stale is never found fresh by rounding)
        fresh = i in until and (until[i] > t if after else until[i] >= t)
        state.set_both(i, in_span[i] and not left[i] and fresh)

    k = e = g = x = 0
    never = math.inf
    while True:
        t = samples[k][0] if k < len(samples) else never
        if steps:  # the next moment anything changes, not only the next reading
            t = min(t, enters[e][0] if e < len(enters) else never, leaves[g][0] if g < len(leaves) else never,
                    exits[x][0] if x < len(exits) else never, recent[0][0] if recent else never)
        if t == never:
            return
        read_now = []
        while k < len(samples) and samples[k][0] == t:
            i = samples[k][1]
            state.read(i, t, samples[k][2])
            until[i] = t + (window if window is not None else STALE_S if (w := wins[i]) is None else w.get(t, STALE_S))
            heapq.heappush(recent, (until[i], i))
            read_now.append(i)
            k += 1
        while e < len(enters) and enters[e][0] <= t:
            i = enters[e][1]
            spanned += not in_span[i] and not left[i]
            in_span[i] = True
            sync(i)
            e += 1
        while g < len(leaves) and leaves[g][0] <= t:
            i = leaves[g][1]
            spanned -= in_span[i] and not left[i]
            left[i] = True
            sync(i)
            g += 1
        while x < len(exits) and exits[x][0] <= t:
            state.exits(exits[x][1])
            x += 1
        while recent and recent[0][0] < t:
            sync(heapq.heappop(recent)[1])
        now = set(read_now)
        for i in now:
            state.set_both(i, in_span[i] and not left[i] and until[i] >= t)  # sync(i), written out: once a reading
        extra = [i for i in now if i not in state.both]  # read at t, though its span says it was not alive
        if read_now and (state.both or extra):
            yield t, state, spanned, extra
        if steps:
            while recent and recent[0][0] <= t:
                sync(heapq.heappop(recent)[1], after=True)
            yield t, state, spanned, None


def stale_s(p: Process, ts: float) -> float:
    """How long p's reading taken at ts counts, at a point and in an integral alike: its window (fold/pace.py:
    1.5 x the pace the watcher kept near it, STALE_S at least); STALE_S outside a run."""
    windows = _windows(p)
    return windows.get(ts, STALE_S) if windows is not None else STALE_S


def _windows(p: Process) -> dict[float, float] | None:
    """p's reading time -> how long that reading counts (fold/pace.py); None outside a run (STALE_S each)."""
    pace = p.run.pace if p.run is not None else None
    return pace.windows(p) if pace is not None else None


class Memory:
    """A set of processes' memory at once from one sweep over their readings: `points`, the sums at each
    sample time (at_once's, the series every peak and the page's line are taken from), and `steps`, the same
    sum as a function of time (each step holds from its ts until the next: a reading counts from when it was
    taken until a newer one, the process's end, or its window (stale_s) later, whichever comes first; the rules of the
    module docstring at every moment, not only at a sample). integral() is that function's integral, so any
    MiB·s the report gives (a pool idle, orphaned) is the area under the same series whose largest point is
    its memory at once, and a stretch no reading covers adds nothing (it is told as unread, never carried)."""

    def __init__(self, procs: list[Process]) -> None:
        self.points: list[Point] = []
        # before any event: nothing read, those with no start alive
        self.steps: list[Point] = [Point(-math.inf, 0, 0, sum(p.start is None for p in procs))]
        for t, state, spanned, extra in _sweep(procs, None, None, True, steps=True):
            if extra is not None:
                self.points.append(state.point(t, spanned, extra))
                continue
            step = state.point(t, spanned, [])
            if step[1:4] != self.steps[-1][1:4]:
                self.steps.append(step)
        self._times = [s.ts for s in self.steps]

    def integral(self, a: float, b: float) -> Held:
        """The sum's integral over [a, b] (byte-seconds), and the seconds of [a, b] in which a process alive
        (by its span) had no reading counted: there the integral holds less than was held, by an unknown
        amount."""
        i = bisect.bisect_right(self._times, a) - 1
        total = unread = 0.0
        t = a
        while t < b:
            step = self.steps[i]
            hi = min(b, self._times[i + 1]) if i + 1 < len(self._times) else b
            total += step.pss * (hi - t)
            unread += (hi - t) if step.read < step.alive else 0.0
            t, i = hi, i + 1
        return Held(total, unread)


class Held(NamedTuple):
    """Memory over a stretch: byte-seconds, and the seconds of it some process alive was not read."""

    byte_s: float
    unread_s: float


def at_once(procs: list[Process], a: float | None = None, b: float | None = None, lived: bool = True,
            window: float | None = None) -> list[Point]:
    """The simultaneous PSS sum of procs at each of their sample times (module docstring), from the samples
    taken in [a, b] only when a window is given (a sample before it is never carried into it); [] unsampled.
    lived=False also takes the samples a process's own process_exit outlived: what a process left behind
    still held then (held_after), until the watcher saw it end. Readings of processes that share pages are
    summed only where no fork or end came between them: a process whose latest reading was taken before a
    child it forked (in procs, counted at that moment) started, or before its own process_exit that the
    moment follows, is left out of the point, as unread (a pre-fork reading holds the pages the child shares
    since; a process read before it began to end held pages a sharer read since holds alone: a sidecar read
    after its workers' exit, summed with their earlier readings, counted those pages twice, 290 against 260
    MiB; docs/users.md D29 saw 11.5 % over the probe under pytest-xdist).

    Swept in time order, each set kept as it changes (alive by its span, read within its window), so a
    point costs what changed since the last one, not a pass over the pool: a pool of 99 processes read
    for an hour (143,000 points) took 10 s a pool, the page and the export paying it for every pool.
    window: every reading counts that long instead of its own window (`peak`)."""
    return [state.point(t, spanned, extra) for t, state, spanned, extra in _sweep(procs, a, b, lived, False, window)
            if extra is not None]


def counted_at(procs: list[Process], t: float) -> dict[int, tuple[float, int]]:
    """The readings memory at once counts at moment t (its latest point at or before t): index in procs ->
    (sample time, PSS). What a figure at t is the sum of, for anything told beside it (derive/counts.py)."""
    counted: dict[int, tuple[float, int]] = {}
    for _, state, _, extra in _sweep(procs, None, t, True):
        counted = {i: state.latest[i] for i in (*state.both, *(extra or ())) if i not in state.early}
    return counted


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
        at_one = sorted(at_one + _at_moments(procs, a, b, moments), key=lambda pt: pt.ts)  # the first on a tie
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


def _at_moments(procs: list[Process], a: float | None, b: float | None, moments: Collection[float]) -> list[Point]:
    """procs' points at these moments (in [a, b]), every reading counting STALE_S. A point there sums only
    readings of the STALE_S before it, so a few moments each sweep that stretch alone (a pass over the readings
    to pick them, no sweep of the run); many, one sweep of all (a run of thousands of pools stays linear)."""
    when = sorted({t for t in moments if (a is None or t >= a) and (b is None or t <= b)})
    if len(when) > MOMENTS_APART:
        return [pt for pt in at_once(procs, a, b, window=STALE_S) if pt.ts in set(when)]
    # from 2 x STALE_S before: a reading exactly STALE_S old still counts (its window's end, ts + STALE_S, is
    # compared with t), never lost to rounding t - STALE_S; an older one counts at t in neither way. Each moment's
    # readings a slice of all of them, made once (made for each, they cost more than its sweep).
    every = _samples(procs, None, None, True)
    times = [x[0] for x in every]
    out = []
    for t in when:
        lo = t - 2 * STALE_S if a is None else max(a, t - 2 * STALE_S)
        mine = every[bisect.bisect_left(times, lo):bisect.bisect_right(times, t)]
        out += [state.point(at, spanned, extra) for at, state, spanned, extra
                in _sweep(procs, lo, t, True, False, STALE_S, mine) if extra is not None and at == t]
    return out


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


def held(p: Process) -> list[tuple[float, int]]:
    """p's own (ts, PSS) samples while it lived."""
    return [(ts, pss) for ts, pss, _ in lived_mem(p)] if p.mem else []


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


def span_samples(p: Process, a: float, b: float) -> list[tuple[float, int]]:
    """p's (ts, pss) samples taken inside [a, b]; when none is, its first taken after a (the nearest
    after the span's start); [] when it has none after a. A sample before a is never used: a sidecar's
    first sample comes right after exec, before it imported anything (2 MiB of a 240 MiB process), and
    a worker's right after fork."""
    mem = lived_mem(p)
    inside = [(ts, pss) for ts, pss, _ in mem if a <= ts <= b]
    if inside:
        return inside
    after = next(((ts, pss) for ts, pss, _ in mem if ts >= a), None)
    return [after] if after is not None else []


def held_at(p: Process, a: float, b: float) -> int | None:
    """p's PSS over the span [a, b]: its first sample of the span (span_samples); None unsampled there."""
    samples = span_samples(p, a, b)
    return samples[0][1] if samples else None


def held_after(p: Process, ts: float) -> int | None:
    """A leftover's figure: its latest PSS sample taken after ts (the main process's end), its own
    process_exit notwithstanding: a leftover still holds what it holds (an orphaned sidecar whose workers
    ended holds their once-shared pages alone: docs/evidence.md, "Memory at once"), until the watcher sees it end."""
    return next((pss for t, pss, _ in reversed(p.mem) if t >= ts), None)
