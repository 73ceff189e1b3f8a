"""What an orphaned pool held, as the watcher read it once its creator ended (orphan_fds records, watcher/fds.py):
the listening sockets (ports) its processes held, and whether its creator's parent read a pipe they wrote to.

pools.pool_outlived_creator tells these; docs/evidence.md says what each needs: a port only from a `listen` entry
(never a failed bind, which no record holds), a parent's wait only from a `read_by` entry naming it with its end
within PARENT_WAIT_S after the pool's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common.procfs import same_process

if TYPE_CHECKING:
    from ..derive.pools import PoolStory
    from ..derive.view import View
    from ..fold.model import Process

# A parent that read its child's pipes to their end (communicate()) returns as the last writer ends and exits
# soon after: an end within this long after the pool's (ticks apart, a loaded host) is that wait's; one later is
# not told as a wait (it went on to other work, or waited for something else).
PARENT_WAIT_S = 2.0
STREAMS = {1: "stdout", 2: "stderr"}


def held_fds(v: View, procs: list[Process]) -> dict[Process, dict[str, Any]]:
    """Each of procs's orphan_fds entry, where the watcher wrote one (same process: its create time)."""
    out = {}
    for p in procs:
        for run in v.runs:
            e = run.orphan_fds.get((p.host, p.pid))
            if e is not None and (p.create_time is None or same_process(e["create_time"], p.create_time)):
                out[p] = e
                break
    return out


def ports_held(v: View, st: PoolStory) -> tuple[str, float, str] | None:
    """("TCP port 18473 (127.0.0.1)", read: when the watcher read it, whose) of the listening sockets the pool's
    processes held once orphaned; None where no record shows one. One read per process (its orphan_fds entry):
    nothing shows the socket still held after it (a process may close an inherited fd), so the read's time is what
    is told. `whose`: why they were their creator's, where the record shows it for every port told (one socket,
    its inode, held by two or more processes the creator itself started: inherited from it as it forked them; or
    the creator, alive then, held it too); "" where not (a worker's own listener, a metrics server, reads the
    same; a socket in a sidecar and the workers it forked is the sidecar's: exec'd with close_fds, it took none
    of its creator's)."""
    fds = held_fds(v, st.procs)
    ports: dict[tuple[str, int], set[str]] = {}
    holders: dict[int, set[int]] = {}  # socket inode -> the pool's processes the creator started that held it
    reads = []
    for p, e in fds.items():
        for h in e["listen"]:
            ports.setdefault((h["proto"], h["port"]), set()).add(h["addr"])
            if isinstance(h.get("inode"), int) and p.parent is st.pool.creator:
                holders.setdefault(h["inode"], set()).add(p.pid)
        if e["listen"]:
            reads.append(e["ts"])
    if not ports:
        return None
    names = [f"{proto.upper()} port {port} ({', '.join(sorted(addrs))})"
             for (proto, port), addrs in sorted(ports.items())]
    more = f" (+{len(names) - 2} more)" if len(names) > 2 else ""
    listens = [h for e in fds.values() for h in e["listen"]]
    creator = st.pool.creator
    held_too = all(any(h.get("creator_holds") is True for h in listens if (h["proto"], h["port"]) == key)
                   for key in ports)
    shared = {key: max((len(holders.get(h.get("inode"), ())) for h in listens if (h["proto"], h["port"]) == key),
                       default=0) for key in ports}
    whose = f"{creator.role} {creator.pid} held it too" if held_too else \
        f"one socket in {min(shared.values())} of them" \
        if min(shared.values()) > 1 else ""
    return " and ".join(names[:2]) + more, min(reads), whose


def parent_wait(v: View, st: PoolStory, parent: Process | None, end: float) -> str:
    """"; main 100, its parent, read their stdout to its end and ended only then (0.1 s after them)" where the
    watcher saw the parent hold the read end of a pipe the orphans wrote to and the parent ended within
    PARENT_WAIT_S after them; else "": a parent that merely ended later is not said to have waited."""
    p_end = parent.ended_at if parent is not None else None
    if parent is None or p_end is None or not end - 1.0 <= p_end <= end + PARENT_WAIT_S:
        return ""
    fds = sorted({fd for e in held_fds(v, st.procs).values() if e["read_by"] == parent.pid for fd in e["read_fds"]})
    if not fds:
        return ""
    pipes = " and ".join(STREAMS.get(fd, f"fd {fd}") for fd in fds[:3])
    gap = f"{abs(p_end - end):.1f} s {'after' if p_end >= end else 'before'} them"
    return f"; {parent.role} {parent.pid}, its parent, read their {pipes} to the end and ended only then ({gap})"
