"""Which ends of a run's processes the OOM killer may have made: the cgroup's count against the watcher's ends.

The cgroup counts kills, not whom (docs/evidence.md, `oom-kill`, `oom-among`, `oom-in-cgroup`). An `oom` record
says the count rose in (since, ts] in its host's cgroup; a rise is a process's only where it falls at that
process's end on that host (_at_end), and the process's records leave room for it (no exit code, no signal but
SIGKILL: the caller's `possible`).
Rises at no end are kills the log cannot name (a process outside the run sharing its cgroup).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..fold.model import Process, Run

# (kills, the processes they may be, the rises in words), per process id
Groups = dict[int, tuple[int, list["Process"], str]]
# (since, by, kills) of each rise at no end
Unnamed = list[tuple["float | None", float, int]]


def _at_end(rec: tuple[float, int, int, float | None, str], end: float, bar: float) -> bool:
    """Whether an `oom` record's rise (the count rose in (since, ts]) falls at a process end the watcher saw at
    `end`: the kill came before the end was seen (since < end), and the record was read no earlier than `bar`
    (_bar). A record without `since` (an older watcher read the count only at ends, so the rise may be long
    before) never names a process."""
    ts, _, _, since, _ = rec
    return since is not None and since < end and ts >= bar


# How long an OOM-killed process may take to be seen gone after the count rose: the kernel kills by SIGKILL, and a
# process killed while it holds hundreds of MiB is a zombie only once its memory is torn down (a real batch step's
# 600 MiB main, at load 20: seen ended 0.30 s after the watcher read the rise, past a tick and a moment; a 250 MiB
# child at load 17, ticks 0.1 s apart: still alive in two samples after the read, 0.25 s after it).
DYING_S = 1.0


def _bar(q: Process, end: float, slack: float, sigkilled: bool) -> float:
    """The earliest read of a rise that may be q's end. Where the watcher wrote the last sample that saw q alive
    (`seen`): DYING_S before it (killed by the read, alive at `seen`: a victim dies within DYING_S). Older logs,
    and a watcher with no pidfd, have no `seen`: a tick and a moment before the end (`slack`: a victim seen gone
    at once), or DYING_S before it where q's own status says SIGKILL (`sigkilled`: seen defunct with it)."""
    if q.seen is not None:
        return q.seen - DYING_S
    return end - max(slack, DYING_S) if sigkilled else end - slack


def group_ooms(run: Run, procs: list[Process], possible: Callable[[Process], bool], slack: float,
               sigkilled: Callable[[Process], bool] = lambda q: False) -> tuple[Groups, Unnamed]:
    """id(process) -> (kills, the processes they may be, the rises in words), for each process of the run
    that ended unexplained (no process_exit, no exec, and `possible`) where an `oom` record's rise falls at
    that end (_at_end, from _bar: DYING_S before the last sample that saw it alive, else a tick and a moment
    `slack`). Records and ends linked that way make one group (the kernel kills one worker after another; their
    pool terminates the rest): its kills are all its records' rises, so a group names no more processes as sure
    than it counts. A process whose own status says SIGKILL (`sigkilled`: seen defunct with it) is at the rise
    within DYING_S of its end too. Also the rises at no end (since, by, kills)."""
    ends = [(e, q) for q in procs if q.run is run and not q.exited and q.exec_into is None
            and (e := q.ended_at) is not None and possible(q)]
    parent = list(range(len(run.ooms)))  # one group per connected set of records and ends (union-find)

    def top(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_hit: list[tuple[Process, int]] = []
    for e, q in ends:
        # A cgroup's count is its host's: a run on several hosts has a watcher, and a count, on each.
        bar = _bar(q, e, slack, sigkilled(q))
        hits = [i for i, rec in enumerate(run.ooms) if rec[4] == q.host and _at_end(rec, e, bar)]
        for i in hits[1:]:
            parent[top(i)] = top(hits[0])
        if hits:
            first_hit.append((q, hits[0]))
    by_group: dict[int, list[Process]] = {}
    for q, i in first_hit:
        by_group.setdefault(top(i), []).append(q)
    out: Groups = {}
    unnamed: Unnamed = []
    for g in sorted({top(i) for i in range(len(run.ooms))}):
        rises = [rec for i, rec in enumerate(run.ooms) if top(i) == g]
        kills = sum(max(1, now - before) for _, before, now, _, _ in rises)
        cands = by_group.get(g, [])
        if not cands:
            unnamed.extend((since, ts, max(1, now - before)) for ts, before, now, since, _ in rises)
            continue
        words = ", ".join(f"{before} -> {now}" for _, before, now, _, _ in rises)
        for q in cands:
            out[id(q)] = (kills, cands, words)
    return out, unnamed
