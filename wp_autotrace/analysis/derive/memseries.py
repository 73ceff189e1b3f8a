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
to W apart (Point.apart): every peak is the largest point whose readings one moment holds (mempeak.py chooses
it among these sums, and says what makes it a floor).

One process's own readings over a span (span_samples, held_at, held_after) are here too: the figure of what a
pool held idle where no moment of the span read it whole, and a leftover's.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Collection, Iterator
from functools import partial
from operator import itemgetter, lt
from typing import NamedTuple

from ...common.vocab import MEMORY_STALE_S
from ..fold.model import Process

# A sample this old still counts at a moment: the watcher's sampling period.
STALE_S = MEMORY_STALE_S
# at_moments' moments (mempeak.peak's) swept one by one up to this many (each costs a pass over the readings to
# pick its own: an hour of 99 processes, 0.01 s each against 0.6 s for a sweep of all); more, one sweep of all.
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


def at_moments(procs: list[Process], a: float | None, b: float | None, moments: Collection[float]) -> list[Point]:
    """procs' points at these moments (in [a, b]), every reading counting STALE_S (mempeak.peak's candidates at the
    moments parts of procs peaked at). A point there sums only
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


def held(p: Process) -> list[tuple[float, int]]:
    """p's own (ts, PSS) samples while it lived."""
    return [(ts, pss) for ts, pss, _ in lived_mem(p)] if p.mem else []


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
