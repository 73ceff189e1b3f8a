"""A pool counted as its user counts it: the processes `ps` lists, each one's threads, and its creator's own
memory beside the pool's, all at one moment.

The moment is the one the pool's memory figure comes from (its held figure's peak inside the idle span, else
its peak at once): the watcher read the pool's processes in one sweep then, each sample carrying the process's
threads (/proc/PID/stat num_threads, read with its smaps_rollup), and it read the pool's creator in the same
sweep (watcher/memory.py). Each process counts by the reading memory at once counts it by at that moment
(memseries.counted_at: its latest at most its run's window old, memseries.stale_s, unless a fork or an exit
record came after it).
A process the sweep did not read counts in no figure: the counts say how many
were read of how many were alive (docs/evidence.md, "Counted as ps counts").
"""

from __future__ import annotations

from typing import Any

from ..fold.model import Process
from .memseries import counted_at, lived_mem, stale_s


def sample_near(p: Process, t: float) -> tuple[float, int] | None:
    """(ts, pss) of p's latest sample in [t - its window, t] (memseries.stale_s): the rule memory at once counts
    a process by (memseries.at_once), so the counts and the figure they stand beside take the same readings;
    None if none."""
    near = [(ts, pss) for ts, pss, _ in (lived_mem(p) if p.mem else ()) if t <= ts + stale_s(p, ts) and ts <= t]
    return max(near) if near else None


def counts_at(procs: list[Process], creator: Process | None, t: float | None) -> dict[str, Any] | None:
    """At moment t: {at: t, processes (the pool's alive then, as ps lists them), pids (theirs), read (those
    read), creator_alive (the creator is a ps line then, read or not),
    threads (pid -> threads, those read), pool_pss_bytes, creator_pid, creator_role, creator_pss_bytes,
    creator_threads}; None without a moment or a read process."""
    if t is None:
        return None
    # A reading before its start (a start read late) still shows it alive; one before its end never does.
    alive = [p for p in procs if (p.alive_at(t) or sample_near(p, t) is not None)
             and ((e := p.ended_at) is None or e > t)]
    # the readings memory at once counts then (memseries.counted_at): a reading from before a fork or an exit
    # record is not counted beside readings after it, in the figure or in these counts
    counted = {id(procs[i]): s for i, s in counted_at(procs, t).items()}
    read = {p.pid: (s, p) for p in alive if (s := counted.get(id(p))) is not None}
    if not read:
        return None
    threads = {pid: p.threads[s[0]] for pid, (s, p) in read.items() if s[0] in p.threads}
    # the creator's own memory only while it is a ps line: a reading from before its end is of no one then
    own = (sample_near(creator, t) if creator is not None and ((e := creator.ended_at) is None or e > t)
           else None)
    return {"at": t, "processes": len(alive), "pids": sorted(p.pid for p in alive), "read": len(read),
            "threads": threads, "creator_alive": creator is not None and creator.alive_at(t),
            "pool_pss_bytes": sum(s[1] for s, _ in read.values()),
            "creator_pid": creator.pid if creator is not None else None,
            "creator_role": creator.role if creator is not None else None,
            "creator_pss_bytes": own[1] if own is not None else None,
            "creator_threads": creator.threads.get(own[0]) if own is not None and creator is not None else None}
