"""What joins cleanup's tree after a round: the children the logs name, and the newborns waited for.

The logs name a traced process's children by its own process_start (its ppid,
its start): logged_successors finds those of a process a log claims or of a
target, read again after each round.

A member's SIGTERM handler may fork and exit at once: the child is re-parented
to init (or a subreaper) before any /proc walk can see it as the member's, and
the only proof that it is the run's is the process_start it writes itself (its
ppid, its start) the moment it is forked. On a loaded host that record can land
after cleanup has read the logs again, and cleanup then said "0 still alive"
with the successor running.

So a round notes the kernel's last pid while every member is stopped (before
SIGTERM: a stopped process cannot fork), and after the round looks at the pids
handed out since: a live one that shares a member's process group and session
(what a fork inherits) and is not yet known is waited for, until the re-read
logs name it (then it is a candidate like any other, checked by admit), it
ends, or NEWBORN_WAIT_S passes. The group is only a reason to wait, never
proof: a newborn the logs never name is said and left alone.

Bounded: at most MAX_NEWBORNS pids are looked at (past that, or after the pid
counter wrapped, nothing is waited for), and the wait ends by cleanup's budget.

A member that ends on its own between its admission and its SIGSTOP leaves its
children to init before any walk lists them. Nothing in /proc ties such an
orphan to the run any more, so it is never signalled; but the final count
would claim more than cleanup saw if it said "0 still alive" without a look:
strays() finds the live processes of a member's process group and session that
were adopted out of it (their parent is not in it) and started after the
first member, and cleanup says them as not proven the run's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...analysis.fold.model import Process, Run
from ...common.vocab import WATCHER as WATCHER_ROLE
from .candidates import Candidate
from .sweep import MAX_TREE, Sweep

# A traced child writes its process_start within moments of its fork; the bound leaves room for a host whose
# runnable processes outnumber its cores many times. Waited only while such a newborn lives, unnamed.
NEWBORN_WAIT_S = 5.0
NEWBORN_POLL_S = 0.2  # each poll reads the logs again: not as often as cleanup's own waits
MAX_NEWBORNS = 256  # pids looked at after a round: a busy host's churn is not walked


def groups_of(targets: dict[int, tuple[Any, dict[str, Any]]]) -> set[tuple[int, int]]:
    """The (process group, session) pairs of the targets, as read when each was admitted."""
    return {info["groups"] for _, info in targets.values() if info.get("groups") is not None}


def newborns(reader: Any, since: int | None, groups: set[tuple[int, int]],
             known: Any) -> list[dict[str, Any]]:
    """Live processes given a pid after `since` (the kernel's last pid, read while the members were
    stopped) that share a member's process group and session and that known(pid, create_time) does not
    know; [] when the pid counter cannot be read, wrapped, or moved by more than MAX_NEWBORNS."""
    now = reader.last_pid()
    if since is None or now is None or not since < now <= since + MAX_NEWBORNS:
        return []
    found = []
    for pid in range(since + 1, now + 1):
        info = reader.stat(pid)  # /proc/TID/stat of a member's new thread reads too: _is_thread skips it
        if (info is not None and info["groups"] in groups and not known(pid, info["create_time"])
                and not _is_thread(pid)):
            found.append(info)
    return found


def _is_thread(pid: int) -> bool:
    """Is pid a thread of another process (its Tgid differs)? False where status cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Tgid:"):
                    return int(line.split()[1]) != pid
    except (OSError, ValueError, IndexError):
        pass
    return False


def selected_runs(sweep: Sweep) -> list[tuple[Run, int | None]]:
    """The selected runs of the logs, read again where a reader was given, each with its log's owner."""
    if sweep.reload is not None:
        sweep.models = sweep.reload() or sweep.models  # a log gone meanwhile: keep what was read
    return [(run, owner) for model, owner in sweep.models for run in model.runs.values()
            if sweep.run_id is None or run.id == sweep.run_id]


def members_named(run: Run) -> list[Process]:
    """The processes the log says are the run's, apart from its root and its watchers."""
    return [p for p in run.processes if p is not run.root and p.role != WATCHER_ROLE
            and (p.host, p.pid) not in run.watcher_pids and p.create_time is not None]


def logged_successors(sweep: Sweep, reread: bool = True) -> list[Candidate]:
    """Processes the logs (read again unless reread is False) name as descendants of a process a log
    claims for the run or of a target, not claimed themselves yet; each is then known. A traced child
    writes its own process_start (its ppid, its start) the moment it is forked, so a successor that a
    member's SIGTERM handler forks (re-parented to init as soon as the member exits, out of reach of
    any /proc walk) is found here; admit then checks it like any candidate (pid, start, owner)."""
    found: list[Candidate] = []
    runs = selected_runs(sweep) if reread else [(run, owner) for model, owner in sweep.models
                                            for run in model.runs.values()
                                            if sweep.run_id is None or run.id == sweep.run_id]
    grew = True
    while grew:  # a chain of successors: each pass adds the children of the last one's finds
        grew = False
        for run, owner in runs:
            for p in members_named(run):
                parent = p.parent
                if (parent is None or sweep.is_known(p.host, p.pid, p.create_time)
                        or not sweep.is_known(p.host, parent.pid, parent.create_time)):
                    continue
                root = run.root.create_time if run.root is not None else None
                c = Candidate(run.id, p.host, p.pid, p.create_time, p.role or "child", p.cmd or p.name,
                              None, root, owner, by_descent=True)
                sweep.know(c)
                found.append(c)
                grew = True
    return found


def await_newborns(sweep: Sweep, poll: Callable[[], None]) -> list[dict[str, Any]]:
    """Processes born during the last round in a member's process group and session: wait (bounded) until
    poll (which reads the logs again and admits what they name) has made each known, or it ended; the stats
    of those still alive and unnamed when the wait ends (said by the caller, never signalled)."""
    if not sweep.targets:
        return []
    host = next(iter(sweep.targets.values()))[0].host
    deadline = min(time.monotonic() + NEWBORN_WAIT_S, sweep.deadline)

    def known(pid: int, start: float) -> bool:
        return bool(sweep.is_known(host, pid, start))

    waiting = newborns(sweep.checker.reader, sweep.since, groups_of(sweep.targets), known)
    while waiting and time.monotonic() < deadline:
        time.sleep(NEWBORN_POLL_S)
        poll()
        waiting = [info for info in waiting if not known(info["pid"], info["create_time"])
                   and sweep.checker.same(info["pid"], info["create_time"]) is not None]
    return waiting


def strays(sweep: Sweep, said: set[int]) -> list[dict[str, Any]]:
    """Live processes of a target's process group and session, started after the first target, adopted out of
    it (the parent is gone, or not in that group: init or a subreaper took it), not known and not protected:
    what a member that ended before it was stopped may have left. Said by the caller, never signalled; the
    newborns already said (sweep.unproven) and the pids in said are left out. One look at every pid (at most
    MAX_TREE)."""
    groups = groups_of(sweep.targets)
    starts = [c.create_time for c, _ in sweep.targets.values() if c.create_time is not None]
    if not groups or not starts:
        return []
    reader, first, host = sweep.checker.reader, min(starts), next(iter(sweep.targets.values()))[0].host
    found = []
    for pid in sorted(reader.pids())[:MAX_TREE]:
        if pid in sweep.checker.protected or pid in sweep.unproven or pid in said:
            continue
        info = reader.stat(pid)
        if (info is None or info["groups"] not in groups or info["create_time"] < first
                or sweep.is_known(host, pid, info["create_time"])):
            continue
        parent = reader.stat(info["ppid"])
        if parent is None or parent["groups"] != info["groups"]:
            found.append(info)
    return found
