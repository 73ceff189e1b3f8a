"""The pids a process in a pid namespace recorded, read as the pids of the rows they name.

A traced process in its own pid namespace records other processes by their pids there: its pool's sidecar
(pool-create's sidecar_pid, the pending entries a call captured), the workers a sidecar started (worker_pids), the
workers its executor named (worker_spawned). Once pidns.py gives the namespace's processes their host pids, such a
pid read on the host names another process, or none: a namespace's sidecar 2 is not the host's pid 2. Here each
is the pid of the process it named in its namespace: a traced process of that namespace and pid (merged or not: it
shows the pid its row has), else the host process the watcher saw with that namespace and pid; where neither, it
is not known (dropped, or None for a pool's sidecar), never the host process of that number.

Only processes filed under a namespace (merged or not) are read here: a host's log is untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .identities import Registry
    from .model import Process


def space(reg: Registry, p: Process) -> str | None:
    """The namespaced host p's records were filed under (identities.namespaced_host), None where its host's own."""
    return reg.space_of.get(p) or (p.host if p.host in reg.real_host else None)


def named(reg: Registry, p: Process, pid: int) -> list[Process]:
    """The processes (oldest first) that pid, recorded by p, may name: p's host's of that pid where p is its
    host's; else its namespace's (the traced ones of that pid, else the host's the watcher saw as it)."""
    ns = space(reg, p)
    if ns is None:
        return reg.all_by_pid.get((p.host, pid), [])
    found = reg.all_by_pid.get((ns, pid))
    if found:
        return found
    host_pid = reg.hosted.get((ns, pid))
    return reg.all_by_pid.get((reg.real_host[ns], host_pid), []) if host_pid is not None else []


def workers_on_host(reg: Registry) -> None:
    """A namespaced sidecar's worker_pids and an executor's spawned workers: the pids of the processes they name
    (the latest of each pid), dropped where none is known. Before the pools' members are found (finish_pools)."""
    for p in reg.model.processes:
        if (p.worker_pids or p.spawned) and space(reg, p) is not None:
            p.worker_pids = {q.pid for pid in p.worker_pids for q in named(reg, p, pid)[-1:]}
            p.spawned = [(q.pid, ts) for pid, ts in p.spawned for q in named(reg, p, pid)[-1:]]


def sidecars_on_host(reg: Registry) -> None:
    """A namespaced creator's pools, once their sidecars are found (finish_pools looks them up by named): each
    pool's sidecar_pid is its sidecar's (the host's where merged), None where the creator took its host pid and no
    sidecar was found; the creator's records that name it (pool-create's return, its calls' pending entries) alike,
    so the readers that match them find the pool."""
    moved: dict[Process, dict[int, int | None]] = {}
    for pool in reg.model.pools:
        old, creator = pool.sidecar_pid, pool.creator
        if space(reg, creator) is None:
            continue
        moved.setdefault(creator, {})
        if old is None:
            continue
        new = pool.sidecar.pid if pool.sidecar is not None else None if creator in reg.space_of else old
        moved[creator][old] = new
        pool.sidecar_pid = new
        if creator.pool_by_sidecar.pop(old, None) is pool and new is not None:
            creator.pool_by_sidecar[new] = pool
    for creator, pids in moved.items():
        for c in creator.calls.values():
            if c.ret.get("sidecar_pid") in pids:
                c.ret["sidecar_pid"] = pids[c.ret["sidecar_pid"]]
            entries = c.at_call.get("pool_pending")
            for e in entries if isinstance(entries, list) else ():
                if isinstance(e, dict):
                    _pending_on_host(reg, creator, e, pids)


def _pending_on_host(reg: Registry, creator: Process, e: dict[str, Any], pids: dict[int, int | None]) -> None:
    """A call's captured pending entry (a SubprocPool's sidecar_pid, an executor's worker_pids) read on the host."""
    if e.get("sidecar_pid") in pids:
        e["sidecar_pid"] = pids[e["sidecar_pid"]]
    workers = e.get("worker_pids")
    if isinstance(workers, list):
        e["worker_pids"] = [q.pid for pid in workers if isinstance(pid, int) for q in named(reg, creator, pid)[-1:]]
