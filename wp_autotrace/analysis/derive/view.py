"""The selected runs of a model, and what the findings and the report's tables share."""

from __future__ import annotations

from typing import Any

from ...common import targets
from ...common.vocab import COMPILE_WORKER, HELPER_ROLES, SIDECAR_ROLES
from ..fold.model import Call, Model, Pool, Process, Run, calls_of
from ..fold.verdict import RUN_ENDED, run_state
from .endings import Endings
from .labels import rank_value
from .mempeak import left_at_once, peak
from .memseries import Point, at_once, held_after, lived_mem
from .pools import PoolStory, stories

# multiprocessing's resource tracker and forkserver outlive their starter by design.
BENIGN_LEFTOVER_ROLES = HELPER_ROLES


class View:
    """The selected runs of a model, and what the findings and tables share."""

    def __init__(self, model: Model, runs: list[Run], now: float) -> None:
        self.model = model
        self.runs = runs
        chosen = {id(r) for r in runs}
        self.procs: list[Process] = [p for p in model.processes if p.run is not None and id(p.run) in chosen]
        keep = {id(p) for p in self.procs}
        # Every call's process is one of the model's (the fold makes them together): with every process chosen,
        # every call is, and the filter's walk of a long log's calls is a copy.
        every = len(self.procs) == len(model.processes)
        self.calls: list[Call] = list(model.calls) if every else [c for c in model.calls if id(c.proc) in keep]
        # The chosen calls by tag (Model.tagged), each in self.calls' order: read through tagged().
        self._tagged: dict[str, list[Call]] = model.tagged if every else {
            tag: kept for tag, calls in model.tagged.items() if (kept := [c for c in calls if id(c.proc) in keep])}
        self.pools: list[Pool] = [pool for pool in model.pools if id(pool.creator) in keep]
        self.blocked: list[Call] = [c for r in runs for c in r.blocked]
        starts = [r.start for r in runs if r.start is not None]
        ends = [r.end for r in runs if r.end is not None]
        self.t0 = min(starts) if starts else model.t0
        self.t_end = max(ends) if ends else self.t0
        # the log's last record, every run's (a run not chosen still writes after a killed one's): "at the end of
        # the log" is then (derive/alive.py)
        self.log_end = max(model.t_end, self.t_end)
        self.warm_calls = _top_warm_calls(self.tagged(targets.WARM_POOL))
        self.max_depth = max((p.depth for p in self.procs), default=0)
        self.leftover_procs = [p for r in runs for p in r.leftover if p.role not in BENIGN_LEFTOVER_ROLES]
        self.leftover_count, self.left_total, self.left_unlisted = _left_counts(runs, len(self.leftover_procs))
        self.leftover_rss = sum(p.last_rss for r in runs for p in r.leftover
                                if p.role not in BENIGN_LEFTOVER_ROLES)
        # Real memory left: each leftover's figure (held_bytes), but none for a forked compile worker
        # without a PSS sample (its RSS counts the pages it shares with its sidecar again).
        left = [(r, p) for r in runs for p in r.leftover if p.role not in BENIGN_LEFTOVER_ROLES]
        # A leftover's figure is what it held after the main process ended (docs/evidence.md): its first
        # PSS sample after that end (the watcher re-reads every pool then), else its latest figure.
        left_ends = {id(r): r.root.ended_at if r.root is not None else None for r, _ in left}
        self.left_held = {p.index: after for r, p in left
                          if (end := left_ends[id(r)]) is not None and (after := held_after(p, end)) is not None}
        # ... a lower bound where that reading was taken while a pool mate still shared its pages and that mate
        # ended before it: its PSS rose then, unread (a loaded host's niced watcher missed the moment)
        gone_sharers = {p.index: _gone_sharers(p, left_ends[id(r)]) for r, p in left if p.index in self.left_held}
        self.left_at_least = {i for i, sharers in gone_sharers.items() if sharers}
        # the sum of the leftovers' figures is a lower bound only where a sharer that ended is not in it (where
        # it is, the sum was what they held together at that reading, and it only shrank as they ended)
        listed = {p.index for _, p in left}
        self._sharer_left_out = any(q.index not in listed for sharers in gone_sharers.values() for q in sharers)
        pss = [self.left_held.get(p.index) or (p.mem[-1][1] if p.mem else None) for _, p in left]
        self.leftover_pss = sum(x for x in pss if x is not None) if any(x is not None for x in pss) else None
        # Their real memory together: one at_once point of the pool processes among them (left_at_once: the
        # same readings and staleness as the pools' peak, never latest figures of different moments summed; a
        # pool process never read for PSS counts as not read), plus the RSS figure of each other leftover.
        main_ends = [e for e in left_ends.values() if e is not None]
        pooled = [p for _, p in left if _pooled(p)]
        in_pool = {p.index for p in pooled}
        self.left_point = left_at_once([p for p in pooled if p.mem], min(main_ends, default=None))
        self.left_sampled = len(pooled)
        # Where none was read for PSS, each one's figure (RSS from the watcher's leftover record: one moment's).
        self.leftover_real = sum(self.real_left(p) for _, p in left) if self.left_point is None else \
            self.left_point.pss + sum(self.real_left(p) for _, p in left if not p.mem and p.index not in in_pool)
        self.states = {r.id: run_state(r, now) for r in runs}  # now: the reader's time
        self.multi_host = len({h for r in runs for h in r.hosts}) > 1
        self.rank_of = _inherited_ranks(self.procs, self.multi_host)
        self.launchers = {p.index for p in self.procs if p.traced and not rank_value(p.rank)
                          and any(rank_value(q.rank) for q in p.children)}
        root = next((r.root for r in runs if r.root is not None), None)
        self.endings = Endings(self.procs, self.pools, self.config_of(root)[1] if root is not None else "", self.t0,
                               self.log_end)
        self.stories: dict[int, PoolStory] = stories(self.pools, self.t_end, model.pools, self.endings.of_pool)
        # each pool's creator's next pool (its making), and the pools one creator made at one line: read per pool
        # by facts.reachable_until / called_from, built once here (a run can hold thousands of pools)
        self.next_made: dict[int, float] = {}
        self.same_line: dict[tuple[int, Any, Any], list[Pool]] = {}
        for pool in self.pools:
            caller = pool.call.caller
            if caller:
                self.same_line.setdefault((pool.creator.index, caller.get("file"), caller.get("line")), []).append(pool)
        for p in self.procs:
            made = sorted(p.pools, key=lambda x: x.call.ts)
            self.next_made.update((id(a), b.call.ts) for a, b in zip(made, made[1:]))
        self.exit_wait_s = _exit_wait(self)

    def tagged(self, *tags: str) -> list[Call]:
        """The chosen calls of these tags, in their order (self.calls'); never to be changed (the model's own)."""
        return calls_of(self.calls, self._tagged, tags)

    def real_left(self, p: Process) -> int:
        """A leftover's real memory (held), but none for a forked compile worker without a PSS sample (its
        RSS counts the pages it shares with its sidecar again). Summed over leftovers it is one moment's:
        the watcher re-reads every pool process right after the main process ends."""
        return 0 if _forked_worker(p) and not p.mem else self.held(p)

    @property
    def left_sum_at_least(self) -> bool:
        """Whether leftover_real is a lower bound: a reading taken while a sharer not in the sum still shared its
        pages, or a leftover holding memory the sum leaves out: a pool process its point did not read (started
        after it, or missed by that sweep), or one with no reading at all (counted 0)."""
        if self._sharer_left_out:
            return True
        if self.left_point is not None:
            return self.left_point.read < self.left_sampled
        return any(not self.real_left(p) for p in self.leftover_procs)

    def left_figure(self, figure: int | None) -> int | None:
        """A sum over the leftovers (their count, their memory) as the report gives it: None where no run's
        leftovers are listed and some run's are not known (Run.left_known): a sum over none is no figure then."""
        return None if left_unknown(self.leftover_procs, self.runs) else figure

    def left_by_rss(self) -> int:
        """How many leftovers' figures in leftover_real are their RSS (no sweep read their own share): said so."""
        return sum(1 for p in self.leftover_procs if not p.mem and self.real_left(p)
                   and (self.left_point is None or not _pooled(p)))

    def held(self, p: Process) -> int:
        """p's one memory figure: a leftover's after the main process ended, else held_bytes."""
        return self.left_held.get(p.index) or held_bytes(p)

    def rel(self, ts: float | None) -> float | None:
        return round(ts - self.t0, 3) if ts is not None else None

    def story(self, pool: Pool) -> PoolStory:
        return self.stories[id(pool)]

    def pool_procs(self, pools: list[Pool]) -> list[Process]:
        """These pools' processes, each once (poolprocs.pool_processes gives a process to one pool only, a nested
        pool's to itself: counted under both, the bundled example's 15 nested pools summed to 24 GiB at once
        where its 15 sidecars held 3.1 GiB)."""
        return list({q.index: q for pool in pools for q in self.story(pool).procs}.values())

    def pools_at_once(self, pools: list[Pool]) -> Point | None:
        """The most these pools' processes held together at one moment (mempeak.peak of their at_once), never
        under one pool's own peak: each pool's peak moment is one of its candidates; each pool a part, so the
        figure says where the pools' own passes on either side of a moment sum to more (Point.split)."""
        procs = self.pool_procs(pools)
        mine = [self.story(pool) for pool in pools]
        return peak(at_once(procs), procs, moments=[s.peak.ts for s in mine if s.peak is not None],
                    parts=[(s.procs, s.series) for s in mine])

    def at_once_keys(self, best: Point | None) -> dict[str, Any]:
        """The report's keys for pools' memory at once (pools_across, each attempt): the figure, whether its moment
        read every process alive then, and what makes it a floor beyond that moment (memseries.Point: processes
        never read; pools whose passes on either side of a moment sum to more)."""
        return {"at_once_bytes": best.pss if best is not None else None,
                "at_once_all_read": best is not None and best.read == best.alive,
                "at_once_never_read": best.never if best is not None else 0,
                "at_once_split": ({"pools": best.split, "at": self.rel(best.split_at)}
                                  if best is not None and best.split else None)}

    def config_of(self, p: Process) -> tuple[dict[str, Any], str, list[str]]:
        """The inductor settings, torch version and pool knobs p's torch has (its own config record,
        else its run's first)."""
        configs = p.run.configs if p.run is not None else []
        mine = next((c for c in configs if c[0] is p), configs[0] if configs else None)
        if mine is None:
            return {}, "", []
        return mine[1], mine[2], mine[0].knobs or next((c[0].knobs for c in configs if c[0].knobs), [])


def _left_counts(runs: list[Run], listed: int) -> tuple[int, int | None, int]:
    """(the leftovers found, of the runs whose count is known: what the findings tell; the report's figure, None
    where a run's is not known, its sum would pass a floor off as the count; of those found, how many no list of
    the log's names: a verdict's list cut at its cap), `listed` the leftovers listed."""
    counts = [left_count(r) for r in runs]
    found = sum(n for n in counts if n is not None)
    return found, None if None in counts else found, max(found - listed, 0)


def left_unknown(left: list[Process], runs: list[Run]) -> bool:
    """Whether a sum over leftovers (their count, their memory) is no figure: none listed (`left`) and some run's
    not known (Run.left_known): the whole report's (View.left_figure), a node's or a rank's (report.py)."""
    return not left and not all(r.left_known for r in runs)


def left_count(r: Run) -> int | None:
    """How many processes the run left running after its main process, as a user counts them: the verdict's
    count (its list may be cut), less the helpers any Python program leaves a moment (a resource tracker); None
    where it is not known (Run.left_known)."""
    if not r.left_known:
        return None
    listed = sum(1 for p in r.leftover if p.role not in BENIGN_LEFTOVER_ROLES)
    return max(r.leftover_count - (len(r.leftover) - listed), listed)


def _inherited_ranks(procs: list[Process], multi_host: bool) -> dict[int, str]:
    """Each process's rank label ('rank 3', 'rank h1:3' across hosts): its own, else its nearest ancestor's."""
    found: dict[int, str] = {}
    for p in procs:
        chain: list[Process] = []
        q: Process | None = p
        label = None
        while q is not None and q.index not in found and len(chain) <= len(procs):
            value = rank_value(q.rank)
            if value is not None:
                label = f"rank {q.host}:{value}" if multi_host else f"rank {value}"
                break
            chain.append(q)
            q = q.parent
        label = label or (found.get(q.index) if q is not None else None) or ""
        if q is not None and q.index not in found:
            found[q.index] = label
        for x in chain:
            found[x.index] = label
    return {i: label for i, label in found.items() if label}


def _exit_wait(v: View) -> float | None:
    """How long the main processes waited in torch's exit handler (shutdown_compile_workers); with no call of it,
    0 s is a figure only where every main's exit is known (RUN_ENDED): a main killed, or whose end the log does
    not show, may never have reached its exit (None: not known)."""
    waits = [_open_for(v, c) for c in v.tagged(targets.EXIT_SHUTDOWN) if c.proc.role == "main"]
    return sum(waits) if waits or all(s == RUN_ENDED for s in v.states.values()) else None


def _open_for(v: View, c: Call) -> float:
    """How long a call was open: to its return, else to its process's end, else to the log's end."""
    end = c.end if c.end is not None else c.proc.end if c.proc.end is not None else v.t_end
    return max(0.0, end - c.ts)


def _pool_mates(p: Process) -> list[Process]:
    """The processes p shares pages with as a pool's: a sidecar's workers; a worker's sidecar and siblings."""
    if p.role in SIDECAR_ROLES:
        return [q for q in p.children if q.role == COMPILE_WORKER]
    if p.role == COMPILE_WORKER and p.parent is not None and p.parent.role in SIDECAR_ROLES:
        return [p.parent, *(q for q in p.parent.children if q is not p and q.role == COMPILE_WORKER)]
    return []


def _gone_sharers(p: Process, after: float | None) -> list[Process]:
    """The pool mates that lived when p's figure after `after` (held_after: its latest sample then) was read
    and ended before p did (or before the log's end): with any, the figure is a lower bound of what p held
    alone once they had gone."""
    read = next((t for t, _, _ in reversed(p.mem) if after is not None and t >= after), None)
    if read is None:
        return []
    own_end = p.ended_at
    return [q for q in _pool_mates(p) if q.alive_at(read)
            and (q_end := q.ended_at) is not None and (own_end is None or q_end < own_end)]


def _forked_worker(p: Process) -> bool:
    return p.role == COMPILE_WORKER and (p.forked or (p.parent is not None and p.parent.role in SIDECAR_ROLES))


def held_bytes(p: Process) -> int:
    """A process's memory figure, the one every line of a report shows for it (finding, tree, rank,
    `run`'s summary): its latest PSS sample where the watcher took one, else its latest RSS sample (a
    leftover record's, when that came last). The latest sample is the exec'd program's: a fork sampled
    before its exec (a Python child about to become `sleep`) never lends it its RSS. No PSS sample taken
    after the process wrote its process_exit (memseries.lived_mem)."""
    return lived_mem(p)[-1][1] if p.mem else p.last_rss


def _pooled(p: Process) -> bool:
    """A leftover counted in the leftovers' at-once point (View.left_point) where it was read, and as not read
    where it was not: a pool process, or one read for PSS."""
    return bool(p.mem) or p.role in SIDECAR_ROLES or p.role == COMPILE_WORKER


def held_kind(p: Process) -> str:
    """What held_bytes measured: 'pss' or 'rss'."""
    return "pss" if p.mem else "rss"


def _top_warm_calls(calls: list[Call]) -> list[Call]:
    """Of warm_pool calls, those not inside another warm_pool call (an override calling super())."""
    return [c for c in calls if not c.blocked and (c.parent is None or c.parent.tag != targets.WARM_POOL)]
