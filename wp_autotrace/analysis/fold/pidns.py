"""A traced process in another pid namespace, seen under two pids: made one process at the log's end.

A Python child started in a new pid namespace (`unshare -p`, bwrap, nsjail, a container runtime) writes its
records with its pid there (1, 2, ...; ppid 0 for the namespace's first), while the watcher samples it by the pid
the host sees, and reads its namespace pid beside it (a tree entry's `nspid`: the last of /proc/PID/status NSpid).
Unmerged, one process was two rows (the host pid "untraced", the namespace pid traced, parentless at the top) and
counted twice. Identity here is the host's (host, pid, create_time): the traced process found under the
namespace pid with the same create time takes the host pid, the host parent and what the watcher saw of it, and
the watcher's process is dropped. Without a watcher entry (no watcher, or gone before a sample) nothing says
which host process it was: it stays as its records name it.

The join needs proof. Namespaces started within one clock tick each have a pid 1 of one create time: (host, nspid,
create_time) names them all (tests/fixtures/odd/pidns_twins_one_grain.jsonl: three of four in one 10 ms grain). A
traced process's records carry its namespace (`pidns`, identities.in_namespace files them under namespaced_host), and
the watcher reads the namespace of each process it sees with an nspid (the entry's `pidns`): the twin is looked up in
that namespace, so each host process finds its own. Where the watcher's entry has no namespace (unreadable; a log
older than the field) nothing but the start time joins them, and that is no proof: a namespace the watcher never
saw (a process that lived less than a tick, another run's) may have started its pid of that number in that grain,
and an older log's records of both are one process to the fold. Such rows are never merged: each stays a row, the
traced one saying which host processes it may be (unproven).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from .identities import namespaced_host

if TYPE_CHECKING:
    from .identities import Registry
    from .model import Process

# What only a process's identity or its own records say: never taken from the watcher's copy.
_OWN = frozenset({"host", "pid", "index", "run", "ppid", "parent", "children", "traced", "create_time"})
_UNSET: tuple[Any, ...] = (None, "", 0, False)
# Its end as the watcher saw it by host pid: an entry under the namespace pid (a claim the watcher looked up on the
# host, where that pid is another process) said nothing of it.
_HOST_VIEW = ("gone", "seen", "zombie")


def merge_namespaced(reg: Registry) -> None:
    """Each watcher-seen process with a namespace pid whose traced twin (same host, that pid, same create time)
    is in the log: merged into the twin, everywhere the fold holds a process. Before parents are linked."""
    twins: dict[Process, Process] = {}
    for seen, (inner, ns) in reg.ns_pids.items():
        if ns is None:
            continue  # its namespace not read: the start time alone is no proof (unproven says "may be")
        host = seen.host if reg.home_ns.get(seen.host) == ns else namespaced_host(seen.host, ns)
        twin = reg.by_start.get((host, inner, seen.create_time)) if seen.create_time is not None else None
        if twin is not None and twin is not seen and twin.traced and not seen.traced and twin.pid == inner:
            twins[seen] = twin
    # Namespaces that each started a pid of that number within one clock grain (a launcher's sandboxes started at
    # once): their records are one process to the fold and nothing says which host process wrote which. None of
    # them is merged: each host process stays a row of its own, never dropped into another's twin.
    claims = Counter(twins.values())
    twins = {seen: twin for seen, twin in twins.items() if claims[twin] == 1}
    reg.hosted = _hosted(reg)
    if twins:
        _merge(reg, twins)
    unproven(reg, set(twins) | set(twins.values()))


def _hosted(reg: Registry) -> dict[tuple[str, int], int | None]:
    """(namespaced host, pid there) -> the host pid the watcher saw with that namespace and namespace pid (its entry's
    pidns and nspid); None where two host pids had them (not known)."""
    hosted: dict[tuple[str, int], int | None] = {}
    for seen, (inner, ns) in reg.ns_pids.items():
        if ns is not None and reg.home_ns.get(seen.host) != ns:
            key = (namespaced_host(seen.host, ns), inner)
            hosted[key] = seen.pid if hosted.get(key, seen.pid) == seen.pid else None  # two: not known
    return hosted


def _merge(reg: Registry, twins: dict[Process, Process]) -> None:
    """Each twin takes its watcher-seen process's place (merge_namespaced)."""
    _sent_on_host(reg, twins)
    for seen, twin in twins.items():
        reg.space_of[twin] = twin.host  # the namespace its records' pids are pids of
        _take(twin, seen)
    m = reg.model
    m.processes = [p for p in m.processes if p not in twins]
    for i, p in enumerate(m.processes):
        p.index = i  # creation order kept; indices name positions in the report's lists
        if p.parent in twins:
            p.parent = twins[p.parent]
    for run in m.runs.values():
        run.processes = [p for p in run.processes if p not in twins]
        run.leftover = {twins.get(p, p): e for p, e in run.leftover.items()}
        run.ended_soon = {twins.get(p, p): e for p, e in run.ended_soon.items()}
        if run.below is not None:
            run.below = [twins.get(p, p) for p in run.below]
    for pair, p in list(reg.current.items()):
        if p in twins:
            reg.current[pair] = twins[p]
    for key, p in list(reg.by_start.items()):
        if p in twins:
            reg.by_start[key] = twins[p]
    for pair, ps in reg.all_by_pid.items():
        reg.all_by_pid[pair] = [twins.get(p, p) for p in ps]


def unproven(reg: Registry, merged: set[Process]) -> None:
    """The rows nothing joined that may be one process (Process.one_of): a host process the watcher saw in a pid
    namespace whose namespace it could not read (another user's process, a watcher without the right), none of
    merged, and the traced processes not merged of that namespace pid and create time, under any of its host's
    namespaces (or the host itself: an older log's twin two host processes claimed). Its records may be any of
    theirs: it is "traced: not known", and counting them all counts some process twice (doubled)."""
    spaces: dict[str, list[str]] = {}
    for inner_host, host in reg.real_host.items():
        spaces.setdefault(host, []).append(inner_host)
    groups: dict[tuple[str, int, float], list[Process]] = {}
    for seen, (inner, ns) in reg.ns_pids.items():
        if ns is not None or seen.traced or seen in merged or seen.create_time is None:
            continue
        key = (seen.host, inner, seen.create_time)
        if key not in groups:
            found = (reg.by_start.get((host, inner, key[2])) for host in (seen.host, *spaces.get(seen.host, ())))
            groups[key] = [t for t in found if t is not None and t.traced and t.pid == inner and t not in merged]
        if groups[key]:
            groups[key].append(seen)
    for group in groups.values():
        for p in group:
            p.one_of = group


def doubled(procs: list[Process]) -> int:
    """How many of procs count a process a second time (Process.one_of): in each group, as many as the smaller
    side, the traced rows or the host rows, holds (each traced row may be one of the host rows, and no more)."""
    among, n = {id(p) for p in procs}, 0
    for group in {id(p.one_of): p.one_of for p in procs if p.one_of}.values():
        traced = sum(1 for p in group if p.traced and id(p) in among)
        n += min(traced, sum(1 for p in group if not p.traced and id(p) in among))
    return n


def _sent_on_host(reg: Registry, twins: dict[Process, Process]) -> None:
    """The signals a namespaced process sent name their targets by its namespace's pids (kill(2) from the
    namespace's pid 1): once the merge gives its processes their host pids, each target is the host pid the
    watcher saw with that namespace and pid (its entry's pidns and nspid). A sender that takes a host pid and whose
    target no entry names (or two did) keeps no target (not known: never the host process that has the number);
    one left under its namespace keeps it (its namespace's)."""
    hosted = reg.hosted
    spaces, merged = {host for host, _ in hosted}, set(twins.values())
    for p in reg.model.processes:
        if p.host not in spaces or not p.sent:
            continue
        for r in p.sent:
            target = r.get("target")
            if type(target) is not int or target in (0, -1):  # its own group, every process: no pid named
                continue
            pid = hosted.get((p.host, abs(target)))
            if pid is not None:
                r["target"] = pid if target > 0 else -pid  # a group by its leader's pid (killpg, kill(-pgid))
            elif p in merged:
                r["target"] = None


def _take(twin: Process, seen: Process) -> None:
    """twin becomes the host's process: its pid and parent, and what the watcher saw of it where its own records
    said nothing (its end, memory, command, cgroups...)."""
    twin.host, twin.pid, twin.ppid, twin.parent = seen.host, seen.pid, seen.ppid, seen.parent
    for name in type(twin).__slots__:
        if name in _OWN:
            continue
        mine, theirs = getattr(twin, name), getattr(seen, name)
        if (mine in _UNSET or mine == [] or mine == {}) and theirs not in _UNSET and theirs != [] and theirs != {}:
            setattr(twin, name, theirs)
    twin.peak_rss = max(twin.peak_rss, seen.peak_rss)
    for name in _HOST_VIEW:  # the host's reading wins: one under the namespace pid may be another host process's
        if getattr(seen, name) is not None:
            setattr(twin, name, getattr(seen, name))
    if twin.run is None and seen.run is not None:
        twin.run = seen.run
        seen.run.processes.append(twin)
