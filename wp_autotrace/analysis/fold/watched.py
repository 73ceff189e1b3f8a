"""The watcher's records folded into the model: its start and exit, each tree sample (who joined, who ended,
zombies and their reaping, resident sizes), the memory samples of pool processes, the leftover verdict, the
cgroups' OOM kills and limits, what orphaned pool processes held, and `run`'s record of the status it waited
for. Each visit reads and writes the model through the fold's Registry (identities.py), as the Builder's own
visits of the processes' records do.
"""

from __future__ import annotations

from typing import Any, Callable

from ...common import vocab
from .identities import Registry
from .model import Process


def note_watcher_start(reg: Registry, r: dict[str, Any]) -> None:
    """A watcher started on a host of the run: when, the OOM kill count then, its sampling interval."""
    run = reg.record_run(r)
    run.watcher_started[(r["host"], r["pid"])] = r["ts"]
    if isinstance(r.get("oom_kill"), int):
        run.oom_start = r["oom_kill"]
    if isinstance(r.get("interval"), (int, float)):
        run.interval = max(run.interval, float(r["interval"]))
    if isinstance(r.get("boot"), (int, float)) and r.get("boot_id"):
        run.watcher_clock[r["host"]] = (float(r["boot"]), r["boot_id"])
        if type(r.get("tick")) is int and r["tick"] > 0:
            reg.clock_read(run, r["host"], float(r["boot"]), r["tick"])


def note_watcher_exit(reg: Registry, r: dict[str, Any]) -> None:
    """The watcher stopped: why, and the records it could not write."""
    run = reg.record_run(r)
    run.watcher_exit = r.get("reason") or vocab.EXIT_ERROR
    if isinstance(r.get("dropped"), int):
        run.watcher_dropped = max(run.watcher_dropped, r["dropped"])


def note_watcher_signal(reg: Registry, r: dict[str, Any]) -> None:
    """The watcher was sent a signal (a job step's end, a checkpoint request): which, by whom, and when."""
    reg.record_run(r).watcher_signals.append(r)


def add_tree(reg: Registry, r: dict[str, Any]) -> None:
    """A tree sample: who joined the run (or only shares its group), who ended, zombies, resident sizes."""
    run = reg.record_run(r)
    host, ts = r["host"], r["ts"]
    run.last_sample = ts
    for entry in r.get("started") or ():
        if (host, entry["pid"]) not in run.watcher_pids:
            p = reg.subject(host, entry, ts, run)
            p.via = entry.get("via") or p.via
            p.pgid = entry.get("pgid", p.pgid)
            note_limits(p, entry)
            run.possible.pop((host, p.pid, p.create_time), None)
    for entry in r.get("possible") or ():
        ct = entry.get("create_time")
        key = (host, entry["pid"], round(ct, 2) if ct is not None else None)
        if key[2] is None or key not in reg.by_start:
            run.possible[key] = entry
    for entry in r.get("ended") or ():
        gone = reg.find(host, entry)
        if gone is not None and gone.gone is None:
            gone.gone = entry.get("end", ts)
            gone.seen = entry.get("seen")
            gone.wait_status = entry.get("status")  # read through its pidfd, its parent having reaped it
    tree_zombies(reg, host, r)
    for entry in r.get("rss") or ():
        seen = reg.find(host, entry)
        if seen is not None:
            reg.note_rss(seen, entry.get("rss"))
    if r.get("count") is not None:
        run.tree_counts.append((ts, r["count"]))
    run.final_seen = run.final_seen or bool(r.get("final"))


def note_run_exit(reg: Registry, r: dict[str, Any]) -> None:
    """`wp-autotrace run`'s record of the status it waited for: its main process's (by root pid, at finish)."""
    reg.run_exits.append(r)


def add_memory(reg: Registry, r: dict[str, Any]) -> None:
    """The watcher's PSS/USS samples of pool processes, and the device files they hold."""
    run = reg.record_run(r)
    host, ts = r["host"], r["ts"]
    for entry in r.get("procs") or ():
        p = reg.find(host, entry)
        if p is not None and entry.get("pss") is not None:
            add_sample(p, ts, entry)
    for entry in r.get("devices") or ():
        p = reg.find(host, entry)
        if p is not None:
            p.devices = sorted(set(p.devices) | set(entry.get("paths") or ()))
    del run


def add_leftover(reg: Registry, r: dict[str, Any]) -> None:
    """The watcher's verdict: the processes the run left running after its main process, and how it ended."""
    run = reg.record_run(r)
    run.leftover_seen = True
    run.leftover_how = r.get("how") or run.leftover_how or vocab.ROOT_EXIT
    host = r["host"]
    listed = {e["pid"] for e in r.get("procs") or ()}
    for entry in r.get("procs") or ():
        run.leftover[reg.subject(host, entry, r["ts"], run)] = dict(entry, seen_at=r["ts"])
    for pid in r.get("pids") or ():
        if pid not in listed:
            run.leftover[reg.subject(host, {"pid": pid}, r["ts"], run)] = {"pid": pid, "seen_at": r["ts"]}
    count = r.get("count")
    run.leftover_count = max(run.leftover_count, count if count is not None else len(run.leftover))


def tree_zombies(reg: Registry, host: str, r: dict[str, Any]) -> None:
    """Members the watcher wrote off while defunct (their parent, since when, their wait status), and
    their reaping (docs/evidence.md): found through the registry, as any watcher record's subjects."""
    for entry in r.get("zombies") or ():
        p = reg.find(host, entry)
        if p is not None:
            p.zombie = dict(entry)
    for entry in r.get("reaped") or ():
        p = reg.find(host, entry)
        if p is not None and p.zombie is not None:
            p.zombie["reaped"] = entry.get("end", r["ts"])


def note_oom(reg: Registry, r: dict[str, Any]) -> None:
    """The watcher's count of its run's cgroup OOM kills went up: when, from what to what, since when."""
    run = reg.record_run(r)
    if isinstance(r.get("oom_kill"), int) and isinstance(r.get("before"), int):
        since = r.get("since")
        run.ooms.append((r["ts"], r["before"], r["oom_kill"], since if isinstance(since, (int, float)) else None,
                         r["host"]))


def note_root_change(reg: Registry, r: dict[str, Any]) -> None:
    """The watcher saw the run's main change its user or its root directory: its records after it were refused."""
    run = reg.record_run(r)
    if isinstance(r.get("uid"), int) or isinstance(r.get("root"), str):
        run.root_changes.append(r)


def note_limits(p: Process, entry: dict[str, Any]) -> None:
    """What the watcher read of a joining process's limits: its ulimit -u with its uid, and its memory cgroup."""
    if "nproc" in entry and "uid" in entry:
        p.nproc = (entry["nproc"], entry["uid"])
    p.sigign = entry.get("sigign") or p.sigign
    p.memcg = entry.get("memcg", p.memcg)
    p.pidcg = entry.get("pidcg", p.pidcg)
    p.cpucg = entry.get("cpucg", p.cpucg)


def note_memcg(reg: Registry, r: dict[str, Any]) -> None:
    """A memory cgroup of the run's processes, read by the watcher as its first process joined (its limit, where one
    is set) and, with a limit, again at its end (`final`: the peak charge then)."""
    if isinstance(r.get("path"), str):
        reg.record_run(r).memcgs.setdefault((r["host"], r["path"]), []).append(r)


def note_pidcg(reg: Registry, r: dict[str, Any]) -> None:
    """A pids cgroup of the run's processes, read as its first process joined and again at the watcher's end."""
    if isinstance(r.get("path"), str):
        reg.record_run(r).pidcgs.setdefault((r["host"], r["path"]), []).append(r)


def note_cpucg(reg: Registry, r: dict[str, Any]) -> None:
    """A cpu cgroup of the run's processes: its quota and throttling as its first process joined, and at the end."""
    if isinstance(r.get("path"), str):
        reg.record_run(r).cpucgs.setdefault((r["host"], r["path"]), []).append(r)


def note_orphan_fds(reg: Registry, r: dict[str, Any]) -> None:
    """What pool processes held once orphaned (watcher/fds.py): entries of a known shape only (`procs` is read
    as any JSON): their listening sockets, and the pipe their creator's parent read."""
    procs = r.get("procs")
    for e in procs if isinstance(procs, list) else ():
        if not isinstance(e, dict) or not isinstance(e.get("pid"), int) or not isinstance(
                e.get("create_time"), (int, float)):
            continue
        listen = [h for h in e.get("listen") or () if isinstance(h, dict) and isinstance(h.get("port"), int)
                  and isinstance(h.get("proto"), str) and isinstance(h.get("addr"), str)]
        read_by = e.get("read_by")
        entry = {"create_time": e["create_time"], "listen": listen, "ts": r["ts"],
                 "creator": e.get("creator") if isinstance(e.get("creator"), int) else None,
                 "read_by": None, "read_fds": []}
        if isinstance(read_by, dict) and isinstance(read_by.get("pid"), int) and isinstance(read_by.get("fds"), list):
            entry["read_by"], entry["read_fds"] = read_by["pid"], [x for x in read_by["fds"] if isinstance(x, int)]
        reg.record_run(r).orphan_fds[(r["host"], e["pid"])] = entry


def add_sample(p: Process, ts: float, entry: dict[str, Any]) -> None:
    """One watcher sample of p: its PSS and USS, and the threads and CPU so far read with them, where read."""
    p.mem.append((ts, entry["pss"], entry.get("uss") or 0))
    if entry.get("threads"):
        p.threads[ts] = entry["threads"]
    if isinstance(entry.get("cpu_s"), (int, float)):
        p.cpu[ts] = entry["cpu_s"]


# The watcher's events and their visits (fold.py's REGISTRY_VISITS takes them in).
VISITS: dict[str, Callable[[Registry, dict[str, Any]], None]] = {
    vocab.WATCHER_START: note_watcher_start, vocab.WATCHER_EXIT: note_watcher_exit,
    vocab.WATCHER_SIGNAL: note_watcher_signal, vocab.TREE: add_tree,
    vocab.RUN_EXIT: note_run_exit, vocab.MEMORY: add_memory, vocab.LEFTOVER: add_leftover, vocab.OOM: note_oom,
    vocab.MEMCG: note_memcg, vocab.PIDCG: note_pidcg, vocab.CPUCG: note_cpucg, vocab.ORPHAN_FDS: note_orphan_fds,
    vocab.ROOT_CHANGE: note_root_change}
