"""End a run's leftover processes safely: ``wp-autotrace cleanup LOG``.

A pid in a log is only a name that the kernel hands out again. So every
candidate is checked, just before it is signalled, to still be the process
the log saw: same pid, same start time (``/proc/<pid>/stat`` starttime +
btime, the value the tracer records), owned by the current user. Where the
kernel has pidfds the process is pinned first and signalled through the
pidfd, so it cannot be swapped for another between the check and the kill.
Children go before parents; SIGTERM, a grace period, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, NamedTuple

from ..analysis.fmt import escape
from ..common.procfs import ProcReader
from ..common.vocab import WATCHER as WATCHER_ROLE

# Exit statuses (their meanings: cli/main.py EXIT_STATUSES).
CLEAN = 0  # every candidate ended or was already gone
REFUSED = 1  # some candidate was refused (pid reused, other owner/host) or survived SIGKILL
STILL_RUNNING = 3  # a selected run's main process is alive: nothing signalled

DEFAULT_GRACE_S = 5.0
# Interpreter start to the .pth's process_start record: well under this even on a loaded host.
ROOT_START_WINDOW_S = 60.0
POLL_S = 0.05
KILL_WAIT_S = 2.0  # after SIGKILL the kernel needs only a moment; bounded anyway
# The tracer rounds start times to 2 decimals; one clock tick is 10 ms at the
# usual USER_HZ=100. Both sides compute round(btime + ticks / hz, 2) from the
# same kernel numbers, so a live process matches exactly; the tolerance only
# absorbs float rounding (1.5 ticks). A pid reused within 15 ms of the
# original's start cannot be told apart by any tool; a wall clock stepped
# since the run shifts btime and makes cleanup refuse, the safe side.
TICKS_TOLERANCE = 1.5


class Candidate(NamedTuple):
    """A process the log says the run left behind."""

    run: str
    host: str
    pid: int
    create_time: float | None
    role: str
    cmd: str
    seen_at: float | None  # ts of the record that names it: it had started by then
    root_start: float | None  # the run's root's start: a process of the run started after it


def leftover_procs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The processes a ``leftover`` record names, in the root's (``pids`` +
    ``procs``) or the watcher's shape (``how``, ``count``, chunked ``procs``)."""
    procs = [p for p in record.get("procs") or [] if isinstance(p, dict) and isinstance(p.get("pid"), int)]
    named = {p["pid"] for p in procs}
    # A pid listed without its details: kept, but it has no start time to check.
    procs += [{"pid": pid} for pid in record.get("pids") or [] if isinstance(pid, int) and pid not in named]
    return procs


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _runs(records: list[dict[str, Any]]) -> tuple[dict[tuple[str, int], str], dict[str, tuple[str, int]]]:
    """(host, pid) -> run id, and run id -> (host, root pid), from process_start records."""
    run_of: dict[tuple[str, int], str] = {}
    roots: dict[str, tuple[str, int]] = {}
    for r in records:
        if r["event"] == "process_start" and isinstance(r.get("run"), str):
            run_of[(r["host"], r["pid"])] = r["run"]
            if r.get("root_pid") == r["pid"]:
                roots[r["run"]] = (r["host"], r["pid"])
    return run_of, roots


def _seen_alive(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Processes a run's records show alive at the end: started and never seen to end."""
    alive: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        host, event = r["host"], r["event"]
        if event == "process_start":
            alive[(host, r["pid"])] = {"pid": r["pid"], "create_time": r.get("create_time"), "role": r.get("role"),
                                       "cmd": " ".join(str(a) for a in r.get("argv") or [])}
        elif event == "process_exit":
            alive.pop((host, r["pid"]), None)
        elif event == "tree" and "started" not in r and isinstance(r.get("procs"), list):
            # The root's own sampler: each tree record is the whole live set.
            now = {(host, p["pid"]): p for p in r["procs"] if isinstance(p, dict) and isinstance(p.get("pid"), int)}
            alive = {k: {**alive.get(k, {}), **p} for k, p in now.items()}
        elif event == "tree":
            for p in r.get("started") or []:
                if isinstance(p, dict) and isinstance(p.get("pid"), int):
                    alive[(host, p["pid"])] = {**alive.get((host, p["pid"]), {}), **p}
            for p in r.get("ended") or []:
                if isinstance(p, dict):
                    alive.pop((host, p.get("pid")), None)  # type: ignore[arg-type]
    return alive


def _root_start(records: list[dict[str, Any]], root: tuple[str, int]) -> float | None:
    """The root's start time: its process_start's create_time, else the sampler's tree entry."""
    for r in records:
        if (r["host"], r["pid"]) == root and r["event"] == "process_start" and _num(r.get("create_time")):
            return _num(r["create_time"])
    return _tree_start(records, root)


def _tree_start(records: list[dict[str, Any]], root: tuple[str, int]) -> float | None:
    for r in records:
        for p in (r.get("procs") or r.get("started") or []) if r["event"] == "tree" else []:
            if isinstance(p, dict) and (r["host"], p.get("pid")) == root and _num(p.get("create_time")):
                return _num(p["create_time"])
    return None


def find_candidates(records: list[dict[str, Any]], run: str | None) -> tuple[list[Candidate], dict[str, Any]]:
    """The leftovers of the selected run(s), and each run's root (host, pid, create_time)."""
    run_of, roots = _runs(records)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        rid = r.get("run") if r["event"] != "process_start" else None
        rid = rid if isinstance(rid, str) else run_of.get((r["host"], r["pid"]), "")
        if run is None or rid == run:
            by_run.setdefault(rid, []).append(r)
    found: dict[tuple[str, str, int, Any], Candidate] = {}
    root_info: dict[str, Any] = {}
    for rid, recs in by_run.items():
        leftovers = [r for r in recs if r["event"] == "leftover"]
        procs: list[tuple[str, dict[str, Any], float | None]] = [
            (r["host"], p, _num(r.get("ts"))) for r in leftovers for p in leftover_procs(r)]
        if not leftovers:  # the root was killed before it could write one
            last = max((_num(r.get("ts")) or 0.0 for r in recs), default=None)
            procs = [(host, p, last) for (host, _), p in _seen_alive(recs).items()]
        root = roots.get(rid)
        root_start = None
        if root:
            written = next((float(r["ts"]) for r in recs if r["event"] == "process_start"
                            and (r["host"], r["pid"]) == root), None)
            root_start = _root_start(recs, root)
            root_info[rid] = (root[0], root[1], root_start, written)
        for host, p, seen_at in procs:
            if (root and (host, p["pid"]) == root) or p.get("role") == WATCHER_ROLE:
                continue
            ct = _num(p.get("create_time"))
            found[(rid, host, p["pid"], ct)] = Candidate(rid, host, p["pid"], ct, str(p.get("role") or "child"),
                                                        str(p.get("cmd") or p.get("name") or ""), seen_at,
                                                        root_start)
    return list(found.values()), root_info


class Checker:
    """Is this pid still the process the log saw, and ours to signal?"""

    def __init__(self, log_owners: frozenset[int] = frozenset()) -> None:
        self.reader = ProcReader()
        self.host = os.uname().nodename
        self.tolerance = TICKS_TOLERANCE / self.reader.tick
        # Never a run's process: init, this command and the processes it runs under.
        self.protected = {1, *_ancestors(os.getpid(), self.reader)}
        # As root, whose processes the run's may be: the log's owner's (a run writes its own log).
        self.log_owners = log_owners

    def same(self, pid: int, create_time: float | None) -> dict[str, Any] | None:
        """The live process's stat if it is the one that started at create_time."""
        info = self.reader.stat(pid)
        if info is None or create_time is None or abs(info["create_time"] - create_time) > self.tolerance:
            return None
        return info

    def may_be_root(self, pid: int, create_time: float | None, written: float | None) -> bool:
        """Could the live pid be the run's root? Without a start time in the log: if it started in the
        window before the root wrote its process_start (a later process with that pid started after)."""
        if create_time is not None:
            return self.same(pid, create_time) is not None
        info = self.reader.stat(pid)
        return (info is not None and written is not None
                and written - ROOT_START_WINDOW_S <= info["create_time"] <= written + self.tolerance)

    def refusal(self, c: Candidate) -> str | None:
        """Why c must not be signalled ('gone' if it no longer exists), or None."""
        if c.host != self.host:
            return f"on host {c.host}, not this one (run cleanup there)"
        info = self.reader.stat(c.pid)
        if info is None:
            return "gone"
        if c.pid in self.protected:
            return "init, this command or one of its parents: never a run's process"
        if c.create_time is None:
            return "the log has no start time for it, so it cannot be told from a reused pid"
        if c.root_start is not None and c.create_time < c.root_start - self.tolerance:
            return "it started before the run's main process, so the run did not start it"
        if c.seen_at is not None and c.create_time > c.seen_at + self.tolerance:
            return "it started after the record that names it was written: the log cannot be right about it"
        if abs(info["create_time"] - c.create_time) > self.tolerance:
            return (f"pid reused: the live process started at {info['create_time']:.2f}, "
                    f"the log's at {c.create_time:.2f}")
        try:
            uid = os.stat(f"/proc/{c.pid}").st_uid
        except OSError:
            return "gone"
        if uid != os.geteuid():
            return f"owned by uid {uid}, not you"
        if uid == 0 and self.log_owners and uid not in self.log_owners:
            return f"owned by root, while the run's log is uid {min(self.log_owners)}'s"
        return None


def _ancestors(pid: int, reader: Any) -> list[int]:
    """pid and every process above it (bounded: a ppid loop cannot hang)."""
    found: list[int] = []
    while pid > 0 and pid not in found and len(found) < 4096:
        found.append(pid)
        info = reader.stat(pid)
        pid = info["ppid"] if info else 0
    return found


def _pin(pid: int) -> int | None:
    """A pidfd for pid (signals through it cannot reach a later process with the same pid)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _signal(pid: int, pidfd: int | None, sig: int) -> bool:
    """Send sig; False if the process is gone."""
    try:
        if pidfd is not None and hasattr(signal, "pidfd_send_signal"):
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _children_first(targets: list[tuple[Candidate, dict[str, Any]]]) -> list[tuple[Candidate, dict[str, Any]]]:
    """Deepest first, by the live parent links among the targets."""
    parent = {c.pid: info["ppid"] for c, info in targets}

    def depth(pid: int) -> int:
        d, seen = 0, {pid}
        while parent.get(pid) in parent and parent[pid] not in seen:
            pid = parent[pid]
            seen.add(pid)
            d += 1
        return d

    return sorted(targets, key=lambda t: (-depth(t[0].pid), t[0].pid))


def _wait_gone(checker: Checker, targets: list[tuple[Candidate, Any]], seconds: float) -> list[tuple[Candidate, Any]]:
    """Wait up to seconds for the targets to end; the ones still alive."""
    deadline = time.monotonic() + seconds
    left = targets
    while True:
        left = [t for t in left if checker.same(t[0].pid, t[0].create_time)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL_S)


def _label(c: Candidate) -> str:
    return f"{c.pid} {c.role}"


def _escaping(say: Any) -> Any:
    """say, with every line passed through fmt.escape (controls, bidi and invisible characters)."""
    return lambda text: say(escape(text))


def cleanup(records: list[dict[str, Any]], run: str | None, dry_run: bool, grace: float,
            say: Any = print, log_owners: frozenset[int] = frozenset()) -> int:
    """Verify and end the selected run's leftovers; the exit status. log_owners: uids owning the logs."""
    say = _escaping(say)  # a command line, role or run id from the log reaches the terminal escaped
    candidates, roots = find_candidates(records, run)
    checker = Checker(log_owners)
    for rid, (host, pid, ct, written) in roots.items():
        if host == checker.host and checker.may_be_root(pid, ct, written):
            say(f"run {rid} is still running (main process {pid} is alive): nothing signalled; "
                "stop it first, or wait for it to end")
            return STILL_RUNNING
    if not candidates:
        say("nothing to clean up: the log names no leftover process" + (f" for run {run}" if run else ""))
        return CLEAN
    for rid in sorted({c.run for c in candidates}):
        n = sum(c.run == rid for c in candidates)
        say(f"run {rid or '?'}: {n} process(es) left behind according to the log")
    status = CLEAN
    targets: list[tuple[Candidate, dict[str, Any]]] = []
    pins: dict[int, int | None] = {}
    for c in candidates:
        pidfd = None if dry_run else _pin(c.pid)  # pin first, then check: the check holds for the pidfd
        why = checker.refusal(c)
        info = checker.same(c.pid, c.create_time) if why is None else None
        if why is None and info is not None:
            targets.append((c, info))
            pins[c.pid] = pidfd
            continue
        if pidfd is not None:
            os.close(pidfd)
        if why in (None, "gone"):
            say(f"already gone: {_label(c)}")
        else:
            say(f"refused: {_label(c)}: {why}")
            status = REFUSED
    try:
        status = max(status, _end(checker, _children_first(targets), pins, dry_run, grace, say))
    finally:
        for fd in pins.values():
            if fd is not None:
                os.close(fd)
    return status


def _end(checker: Checker, targets: list[tuple[Candidate, dict[str, Any]]], pins: dict[int, int | None],
         dry_run: bool, grace: float, say: Any) -> int:
    """SIGTERM in order, wait up to grace, SIGKILL what is left; the exit status."""
    for c, info in targets:
        if dry_run:
            say(f"would end: {_label(c)}, rss {info['rss'] / 2**20:.0f} MB: {c.cmd[:120]}")
        elif not _signal(c.pid, pins.get(c.pid), signal.SIGTERM):
            say(f"already gone: {_label(c)}")
    if dry_run or not targets:
        return CLEAN
    left = _wait_gone(checker, targets, grace)
    for c, _ in targets:
        if all(c is not t[0] for t in left):
            say(f"ended: {_label(c)} (SIGTERM)")
    for c, _ in left:
        _signal(c.pid, pins.get(c.pid), signal.SIGKILL)
    survivors = _wait_gone(checker, left, KILL_WAIT_S)
    for c, _ in left:
        if all(c is not t[0] for t in survivors):
            say(f"ended: {_label(c)} (SIGKILL after {grace:g} s)")
    for c, _ in survivors:
        say(f"still alive after SIGKILL: {_label(c)} (uninterruptible? check /proc/{c.pid}/status)")
    return REFUSED if survivors else CLEAN
