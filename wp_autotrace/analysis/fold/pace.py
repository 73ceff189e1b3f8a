"""The pace the watcher kept near each memory reading of a run: how long that reading counts (memseries, at a
moment and in every MiB·s alike; docs/evidence.md, "Memory over time").

A reading counts for MEMORY_KEPT_K x the longer of two periods, MEMORY_STALE_S at least: the run's kept period
(the median gap between two consecutive readings of one process, over all the run's processes) and the local
pace (the median of the MEMORY_PACE_N sweep periods of the run nearest the gap the reading opens, to the
process's next reading; to the reading itself for a process's last). A sweep period is a gap between two
consecutive readings of one process, MEMORY_EVERY_S or more (a shorter one is a re-read at a join, an end or a
growth, not the periodic sweep); for the local pace each distinct gap once (a pool's processes are read in one
tick: their gaps are one sweep's), half of them before the gap and half after (counted by sweeps, so a faster
phase beside it, more sweeps in the same seconds, does not outvote a slower one), the gap itself left out.

Why local: the watcher's pace follows the load and the pools' sizes (its reads come from a CPU budget,
watcher/memory.py), so it changes within a run (a notebook's kernel read every 2.7 s, then every 5-7 s while its
pool was bigger): the run's median alone left each gap of the slower phase partly unread and its MiB·s 10-13 %
under the probe. Why never under the run's period: the first gap after a phase ends (a pool's workers went, the
budget still paying for the bigger sweeps) is 2-4x the sweeps after it, and a short pool's few gaps sit beside
faster ones; by the local pace alone they went unread (12 plain figures over 5 % under the probe on the saved
logs, against 4). Why the neighbours and not the gap itself: a stall (the watcher stopped, or every process at
once waited 20-32 s) is far beyond both, so it stays unread instead of setting its own pace, and a process read
only a few times across a stall borrows the run's pace rather than stretching its own readings over it."""

from __future__ import annotations

import bisect
import statistics

from ...common import vocab
from .model import Process


class Pace:
    """The sweep periods of one run's readings, and each reading's window (`windows`)."""

    def __init__(self, processes: list[Process]) -> None:
        self._procs = processes
        gaps: set[tuple[float, float]] = set()
        every: list[float] = []  # per process, as the run's kept period counts them
        for p in processes:
            ts = sorted({m[0] for m in p.mem})
            mine = [(a, b) for a, b in zip(ts, ts[1:]) if b - a >= vocab.MEMORY_EVERY_S]
            gaps.update(mine)
            every += (b - a for a, b in mine)
        # the run's kept period: the median over all its processes' gaps (a stall is far beyond it)
        self.kept = float(statistics.median(every)) if every else 0.0
        ordered = sorted(((a + b) / 2, b - a, a, b) for a, b in gaps)
        self._mids = [g[0] for g in ordered]
        self._gaps = ordered
        self._cache: dict[int, dict[float, float]] = {}
        self._by_gap: dict[tuple[float, float | None], float] = {}
        # the run's own window (runs[].memory_stale_s, the page's hold): a reading counts at least this long
        self.run_window = max(vocab.MEMORY_STALE_S, vocab.MEMORY_KEPT_K * self.kept)

    def window(self, a: float, b: float | None) -> float:
        """How long a reading taken at a counts when the same process's next reading came at b (None: none
        came): MEMORY_KEPT_K x the longer of the run's kept period and the local pace (the median of the
        MEMORY_PACE_N sweep periods nearest [a, b] in midpoint order, half before it and half after, the gap
        [a, b] itself left out), MEMORY_STALE_S at least (where the run has no sweep period)."""
        mid = a if b is None else (a + b) / 2
        at = bisect.bisect_left(self._mids, mid)
        before = [g[1] for g in self._gaps[max(0, at - vocab.MEMORY_PACE_N):at] if (g[2], g[3]) != (a, b)]
        after = [g[1] for g in self._gaps[at:at + vocab.MEMORY_PACE_N + 1] if (g[2], g[3]) != (a, b)]
        # half from each side (the rest from the other where one runs short): counted by sweeps, not by seconds,
        # so a faster phase beside the gap (more sweeps in the same seconds) does not outvote a slower one
        half = vocab.MEMORY_PACE_N // 2
        take_b = min(len(before), max(half, vocab.MEMORY_PACE_N - len(after)))
        near = before[len(before) - take_b:] + after[:vocab.MEMORY_PACE_N - take_b]
        local = float(statistics.median(near)) if near else 0.0
        return max(vocab.MEMORY_STALE_S, vocab.MEMORY_KEPT_K * max(self.kept, local))

    def windows(self, p: Process) -> dict[float, float]:
        """p's reading time -> how long that reading counts (window: from the gap to p's next reading)."""
        got = self._cache.get(p.index)
        if got is None:
            ts = sorted({m[0] for m in p.mem})
            # a pool's processes are read in one tick: one window per distinct gap, not per process
            got = {a: self._by_gap[(a, b)] if (a, b) in self._by_gap else self._by_gap.setdefault(
                (a, b), self.window(a, b)) for a, b in zip(ts, [*ts[1:], None])}
            self._cache[p.index] = got
        return got
