"""cleanup's candidates and their proof: which processes a log says a run left behind, and whether
the live process with that pid is still the one the log saw, and ours to signal.

A pid in a log is only a name that the kernel hands out again: see the package's docstring (__init__.py) for the
whole argument; this module holds the reading of the model (find_candidates) and the checks made
just before a signal (Checker). Signalling, rounds and the exit status are the package's (__init__.py).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from ...analysis.fold.model import Model, Process, Run
from ...analysis.fold.verdict import VERDICT_HELD, VERDICT_HELD_FIX, verdict_held
from ...common.env import ENABLE_ENV, FALSE_WORDS, LOG_ENV, RUN_ENV
from ...common.procfs import SAME_START_S, ProcReader, boot_id, same_process
from ...common.vocab import WATCHER as WATCHER_ROLE

# Interpreter start to the .pth's process_start record: well under this even on a loaded host.
ROOT_START_WINDOW_S = 60.0


class Candidate(NamedTuple):
    """A process the log says the run left behind (or, born later, a descendant of one)."""

    run: str
    host: str
    pid: int
    create_time: float | None
    role: str
    cmd: str
    seen_at: float | None  # ts of the record that names it: it had started by then
    root_start: float | None  # the run's root's start: a process of the run started after it
    owner: int | None = None  # uid of the log that names it (None: not known)
    by_descent: bool = False  # found below a leftover (a /proc walk, a log's ppid), not in the run's own list


Key = tuple[str, int, "float | None"]  # (host, pid, create_time): one process, however many logs name it
Models = list[tuple[Model, "int | None"]]  # each log's model, with the uid that owns the log


def key_of(c: Candidate) -> Key:
    return (c.host, c.pid, c.create_time)


class RunRoot(NamedTuple):
    """A run's main process as its log shows it."""

    run: str
    host: str
    pid: int
    create_time: float | None
    written: float | None  # when its first record was written


class OtherRun(NamedTuple):
    """A process a log shows as another run's than the one cleanup was asked for."""

    run: str
    create_time: float | None  # None: the log has no start time for it (a launcher: started before `before`)
    what: str  # in words, after "run X's"
    before: float | None = None  # a launcher: the main process it started began then


def other_runs(models: Models, run_id: str | None) -> dict[tuple[str, int], list[OtherRun]]:
    """(host, pid) -> the runs other than run_id that a log shows the process in: each such run's processes (its
    own records, or its watcher's descent from its main) and the process that started its main (`wp-autotrace
    run`, a shell, a server: its launcher). One run's leftover can start another run (a server left running starts
    a job), and the first run's watcher, lingering for its leftover, lists the new run's processes as descendants:
    being below a leftover never makes a process the run's where a log says it is another run's. {} where every
    run is selected (run_id None)."""
    found: dict[tuple[str, int], list[OtherRun]] = {}
    if run_id is None:
        return found
    for model, _ in models:
        for run in model.runs.values():
            if run.id == run_id:
                continue
            for p in run.processes:
                what = "main process" if p is run.root else f"{p.role or 'child'} process"
                found.setdefault((p.host, p.pid), []).append(OtherRun(run.id, p.create_time, what))
            root = run.root
            if root is not None and root.ppid:
                parent = root.parent
                found.setdefault((root.host, root.ppid), []).append(OtherRun(
                    run.id, parent.create_time if parent is not None else None,
                    "launcher (the process that started its main process)", root.create_time or root.start))
    return found


def env_claim(reader: Any, pid: int, runs: set[str], logs: set[tuple[int, int]]) -> str:
    """Whose run a live process's environment says it is, in words, where that is none of runs ("" otherwise,
    or where it cannot be read: another user's, gone). A traced run's processes inherit its id (RUN_ENV) and its
    log (LOG_ENV); a new run's main (`wp-autotrace run`, or tracing started afresh) has tracing on, no run id yet,
    and its own log. logs: (st_dev, st_ino) of the logs cleanup reads; a relative log path is the process's
    cwd's."""
    raw = reader.environ(pid)
    env = dict(e.partition(b"=")[::2] for e in raw.split(b"\0") if b"=" in e)
    run = env.get(RUN_ENV.encode(), b"").decode(errors="replace")
    if run:
        return "" if run in runs else f"its environment names run {run}: not this run's"
    if _forked(reader, pid, raw):
        return ""  # its parent's own: judged as its parent's child, never as a new run's main
    log = env.get(LOG_ENV.encode(), b"")
    if env.get(ENABLE_ENV.encode(), b"").decode(errors="replace").strip().lower() in FALSE_WORDS or not log:
        return ""
    try:
        st = os.stat(os.path.join(os.readlink(f"/proc/{pid}/cwd").encode(), log))
    except OSError:
        st = None  # not written yet, or not reachable from here: not one of the logs read either way
    if st is not None and (st.st_dev, st.st_ino) in logs:
        return ""
    return f"its environment starts another run, traced into {log.decode(errors='replace')}: not this run's"


def _forked(reader: Any, pid: int, environ: bytes) -> bool:
    """Whether pid holds its parent's environment and command line as they are: forked, not exec'd since. Its
    /proc environ is the block its last exec got, so a fork child of a traced main shows the main's start
    environment, tracing on and no run id (the main adds it once started), with the main's log as the main's cwd
    names it: no new run's, whatever its own cwd makes of that log."""
    info = reader.stat(pid)
    parent = info["ppid"] if info is not None else 0
    return bool(parent) and environ == reader.environ(parent) and reader.cmdline(pid) == reader.cmdline(parent)


def _alive_in_model(run: Run) -> list[Process]:
    """What the log last showed alive: started, and no end or disappearance seen."""
    return [p for p in run.processes if p is not run.root and p.end is None and p.gone is None]


def pending_note(run: Run) -> str:
    """Why a run's list is not the watcher's verdict, in words; '' when the verdict is written."""
    if run.leftover_seen:
        return ""
    if run.no_verdict and run.root is not None and run.root.pid == 1:
        return (f"run {run.id or '?'}: its main process was pid 1 of its own pid namespace: the log's pids are "
                "that namespace's, not this one's, and its exit ended every process in it; nothing to clean up")
    if run.no_verdict:
        where = {"sample": "the last sample after its main process ended",
                 "below": "the main process's own list of its descendants at exit"}.get(run.provisional_from)
        return f"run {run.id or '?'}: no verdict will come ({run.no_verdict})" + (
            f"; using {where}" if where else "")
    if not run.verdict_pending:
        return ""
    where = {"sample": "the last sample after its main process ended",
             "below": "the main process's own list of its descendants at exit"}.get(
        run.provisional_from, "what the log last showed alive (no sample after the main process's end yet)")
    if verdict_held(run) and not run.provisional_from:  # where the report's verdict-pending finding says it
        return f"run {run.id or '?'}: {VERDICT_HELD}: {VERDICT_HELD_FIX}; using {where}"
    return f"verdict pending: the watcher has not written what run {run.id or '?'} left behind yet; using {where}"


def find_candidates(model: Model, run_id: str | None, owner: int | None = None) -> tuple[
        list[Candidate], list[RunRoot], list[str]]:
    """The proven members the selected run(s) left behind, each run's root, and notes (pending verdicts)."""
    found: list[Candidate] = []
    roots: list[RunRoot] = []
    notes: list[str] = []
    for run in model.runs.values():
        if run_id is not None and run.id != run_id:
            continue
        root = run.root
        if root is not None:
            roots.append(RunRoot(run.id, root.host, root.pid, root.create_time, root.start))
        note = pending_note(run)
        if note:
            notes.append(note)
        if run.possible:
            pids = ", ".join(str(e["pid"]) for e in run.possible.values())
            notes.append(f"run {run.id or '?'}: not signalled, only possibly the run's (they share only its "
                         f"process group or session): {pids}")
        known = run.leftover_seen or run.provisional_from or (run.no_verdict and root is not None and root.pid == 1)
        listed = run.leftover if known else None
        procs = list(listed) if listed is not None else _alive_in_model(run) if root is not None else []
        for p in procs:
            if p is root or p.role == WATCHER_ROLE or (p.host, p.pid) in run.watcher_pids:
                continue
            seen_at = (listed or {}).get(p, {}).get("seen_at", run.end)
            found.append(Candidate(run.id, p.host, p.pid, p.create_time, p.role or "child", p.cmd or p.name,
                                   seen_at, root.create_time if root is not None else None, owner))
    return found, roots, notes


class Checker:
    """Is this pid still the process the log saw, and ours to signal?"""

    def __init__(self) -> None:
        self.reader = ProcReader()
        self.host = os.uname().nodename
        # Never a run's process: init, this command and the processes it runs under.
        self.protected = {1, *ancestors(os.getpid(), self.reader)}
        self.log_clock = False  # live start times are read on the log's clock (on_the_logs_clock)

    def same(self, pid: int, create_time: float | None) -> dict[str, Any] | None:
        """The live process's stat if it is the one that started at create_time."""
        info = self.reader.stat(pid)
        return info if info is not None and same_process(info["create_time"], create_time) else None

    def may_be_root(self, root: RunRoot) -> bool:
        """Could the live pid be the run's root? Without a start time in the log: if it started in the
        window before the root wrote its first record (a later process with that pid started after)."""
        if root.host != self.host:
            return False
        if root.create_time is not None:
            return self.same(root.pid, root.create_time) is not None
        info = self.reader.stat(root.pid)
        if info is None or root.written is None:
            return False
        started = info["create_time"]
        return root.written - ROOT_START_WINDOW_S <= started <= root.written or same_process(started, root.written)

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
        if c.root_start is not None and c.create_time < c.root_start and not same_process(c.create_time,
                                                                                          c.root_start):
            return "it started before the run's main process, so the run did not start it"
        if c.seen_at is not None and c.create_time > c.seen_at and not same_process(c.create_time, c.seen_at):
            return "it started after the record that names it was written: the log cannot be right about it"
        if not same_process(info["create_time"], c.create_time):
            # without the log's clock a wall-clock step since the run reads the same way
            maybe = "" if self.log_clock else ", or the wall clock stepped since the run (NTP, a VM resumed)"
            return (f"pid reused{maybe}: the live process started at {info['create_time']:.2f}, "
                    f"the log's at {c.create_time:.2f}")
        return self.owner_refusal(c.pid, c.owner)

    @staticmethod
    def owner_refusal(pid: int, owner: int | None) -> str | None:
        """Yours, and its log's owner's (a log judges only its own user's processes); else why not."""
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            return "gone"
        if uid != os.geteuid():
            return f"owned by uid {uid}, not you"
        if owner is not None and uid != owner:
            return f"owned by uid {uid}, while the log that names it is uid {owner}'s"
        return None


def on_the_logs_clock(checker: Checker, models: Models) -> str:
    """Read live start times on the clock the log's create times were computed on, not cleanup's own; the
    words to say where the two differ, else "".

    A process is told by its stat start ticks (since boot, immune to wall-clock steps); a boot time turns them
    into seconds, and each process computes its own once (wall clock minus CLOCK_BOOTTIME). A step since the
    run (NTP's makestep, a VM resumed, `date -s`) moves cleanup's by the step, and every leftover would read
    as a reused pid. The watchers' watcher_start records give theirs (the clock of the verdict's entries) and
    their boot id: used where every one on this host is of this boot and they agree within SAME_START_S."""
    now_id = boot_id()
    clocks = [clock for model, _ in models for run in model.runs.values()
              for host, clock in run.watcher_clock.items() if host == checker.host]
    boots = [boot for boot, bid in clocks if bid == now_id]
    if not boots or len(boots) < len(clocks) or max(boots) - min(boots) > SAME_START_S:
        return ""
    checker.log_clock = True
    clock = checker.reader.clock
    moved = clock.boot - min(boots)
    if abs(moved) <= SAME_START_S:
        return ""
    clock.boot = min(boots)
    checker.reader.created.clear()
    return (f"cleanup: the wall clock moved {moved:+.2f} s since the run (a clock step: NTP, a VM resumed, "
            "`date -s`): its processes are told by their start ticks, on the log's clock")


def ancestors(pid: int, reader: Any, most: int = 4096) -> list[int]:
    """pid and every process above it, at most `most` in all (bounded: a ppid loop cannot hang)."""
    found: list[int] = []
    while pid > 0 and pid not in found and len(found) < most:
        found.append(pid)
        info = reader.stat(pid)
        pid = info["ppid"] if info else 0
    return found
