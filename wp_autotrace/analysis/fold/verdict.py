"""The reader's judgement of a folded model: is a run still alive, will the watcher's verdict come.

fold.py folds the records alone, the same on any host at any time. What depends on where and when the
log is read (the reader's clock, its host name, this host's /proc for a watcher's pid) is decided here,
after the fold, from an explicit `Reader` (now, host): a test passes its own, a command passes
`here_and_now()`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from ...common import vocab
from ...common.procfs import ProcReader, boot_id, same_process
from .fold import build
from .model import Model, Run, Waited

# Without a watcher to say so, a run whose log's last record is this fresh may still be running.
RECENT_S = 120.0
# What is known of a run's end (report's `runs[].state`).
RUN_ENDED = "ended"  # its main process wrote process_exit
RUN_IN_PROGRESS = "in progress"  # no end seen, and this host's /proc (or a fresh log) says it is alive
RUN_KILLED = "killed"  # no process_exit, and the watcher saw the main process end (or root-killed)
RUN_END_UNSEEN = "end not seen"  # no process_exit and nothing says why (Run.now_how: what the reader saw)
# The watcher writes its verdict 0.2 s (common/vocab.py LEFTOVER_GRACE_S) after the main process's end, at a
# tick: within two sampling intervals. None this much later (plus those two intervals) will ever come:
# generous, for a loaded host's scheduling and the reader's clock against the log's.
VERDICT_LATE_S = 30.0
# The root starts its watcher at start-up, and the watcher's first record comes within milliseconds: none
# this long after the main process's end means no watcher ran (WP_AUTOTRACE_SAMPLE_INTERVAL=0, or it failed).
WATCHER_START_LATE_S = 10.0
# A watcher's pid whose live process started this long after its watcher_start is another process.
WATCHER_START_SLACK_S = 1.0
# A watcher_exit reason that is not plain from its name, in words.
WATCHER_EXIT_WORDS = {vocab.EXIT_PROC_ELSEWHERE: "it could not see the run, its /proc being another pid "
                                                 "namespace's; nothing of the run was sampled",
                      vocab.EXIT_SIGNALLED: "it was sent SIGTERM, SIGINT or SIGHUP (a job step's end sends every "
                                            "process of the step one) and left before the main process ended"}
# Why a verdict will never come (Run.no_verdict starts with one of these).
NO_WATCHER = "no watcher ran"
WATCHER_ENDED = "the watcher ended without a verdict"
# Why a verdict is not written yet where the log lost records as the main ended (verdict_held), and the one fix:
# the report's finding and cleanup's note say these same words.
VERDICT_HELD = ("Verdict not written yet: the log's disk was full or unwritable as the main process ended (records of "
                "the run were lost)")
VERDICT_HELD_FIX = "give the log's filesystem room"
# The guess from no watcher record at all, where no record says why: a log that lost records may have lost its.
NO_WATCHER_RECORD = (f"{NO_WATCHER} (no watcher record in the log: WP_AUTOTRACE_SAMPLE_INTERVAL=0, or it "
                     "could not start)")


class Reader(NamedTuple):
    """Where and when a log is read: the judgement's inputs besides the records."""

    now: float  # the reader's time (time.time())
    host: str  # the reader's host name (os.uname().nodename): only its watchers' pids can be asked


def this_host() -> str:
    return os.uname().nodename


def here_and_now() -> Reader:
    """This host, this moment."""
    return Reader(time.time(), this_host())


def judge(model: Model, reader: Reader) -> Model:
    """Each run's pending (or lost) verdict, as `reader` sees it; the model, judged in place."""
    starts: dict[int, float] = {}  # this host's pids and start times, read once (nested_pid)
    for run in model.runs.values():
        look_now(run, reader, starts)
        pending_verdict(run, reader)
        leftovers_now(run, reader, starts)
    return model


def leftovers_now(run: Run, reader: Reader, starts: dict[int, float]) -> None:
    """Marks each of the run's leftovers with no end in the log that this host shows gone now (its verdict entry's
    `gone_now`): a leftover that cleanup (which writes no record) or anyone else ended is not one to end again."""
    for p, entry in run.leftover.items():
        if p.end is None and p.host == reader.host and p.create_time is not None:
            alive, _ = main_alive(p.host, p.pid, p.create_time, reader, starts, log_clock(run, p.host))
            entry["gone_now"] = alive is False


def fold_and_judge(records: Iterable[dict[str, Any]], waited: Waited | None = None,
                   reader: Reader | None = None) -> Model:
    """fold.build, then judge(): the model a report (or cleanup) reads; reader None: here and now."""
    return judge(build(records, waited), reader or here_and_now())


def look_now(run: Run, reader: Reader, starts: dict[int, float] | None = None) -> None:
    """Is a run whose main process the log saw no end of alive now? Asked of this host, never guessed:
    its main's pid and create time; else its watchers' pids; else it cannot be known here (Run.alive_now)."""
    root = run.root
    if root is None or root.exited or root.gone is not None or run.leftover_seen or run.waited is not None:
        return
    alive, run.now_how = main_alive(root.host, root.pid, root.create_time, reader, starts, log_clock(run, root.host))
    if alive is not None:
        run.alive_now, run.root_gone = alive, not alive
        return
    here = reader.host
    if run.watcher_pids and all(h == here for h, _ in run.watcher_pids):
        gone = watchers_gone(run, here)
        pids = ", ".join(str(pid) for _, pid in sorted(run.watcher_pids))
        run.alive_now = not gone
        run.now_how += f"; its watcher (pid {pids}) is {'gone from' if gone else 'alive on'} this host"


def main_alive(host: str, pid: int, create_time: float | None, reader: Reader,
               starts: dict[int, float] | None = None, clock: float | None = None) -> tuple[bool | None, str]:
    """Whether the process (host, pid, create_time) is alive now, and what was seen, in words; None
    (and why) where this host cannot tell: another host's, no create time, /proc unreadable. clock: the boot
    time the log's create times were computed on (log_clock), where known."""
    if host != reader.host:
        return None, (f"the log was written on {host} and is read on {reader.host}: its processes cannot be "
                      "checked from here")
    if create_time is None:
        return None, f"the log has no start time for its pid {pid}: a reused pid cannot be told from it"
    if not ProcReader.available():
        return None, "this host has no /proc to check its pid"
    proc = ProcReader(strict=True, boot=clock)
    try:
        found = proc.stat(pid)
    except OSError as exc:
        return None, f"its pid {pid} cannot be read here ({exc.strerror or exc})"
    if found is not None and same_process(found["create_time"], create_time):
        return True, f"its pid {pid} is alive on this host, checked as the log was read"
    inner = nested_pid(pid, create_time, proc, {} if starts is None else starts)
    if inner is not None:
        return True, f"it is alive on this host as pid {inner} (its own pid namespace's pid {pid})"
    if pid == 1:  # this namespace's init outlives every reader here: the log's was another namespace's
        return None, "its pid 1 was its own pid namespace's, which cannot be seen from here"
    taken = " (another process has it now)" if found is not None else ""
    return False, f"its pid {pid} is gone from this host{taken}, checked as the log was read"


def nested_pid(pid: int, create_time: float, proc: ProcReader, starts: dict[int, float]) -> int | None:
    """This namespace's pid of a process that is `pid` in a pid namespace below this one and started at
    `create_time` (a container that shares this host's name): None if there is none. Every process's
    start time is read once per judgement (into `starts`, shared by its runs), and only for a main
    process whose pid here is gone or another's."""
    if not starts:
        for other in proc.pids():
            try:
                found = proc.stat(other)
            except OSError:
                continue
            if found is not None:
                starts[other] = found["create_time"]
    for other, started in starts.items():
        if not same_process(started, create_time):
            continue
        try:
            with open(f"/proc/{other}/status", "rb") as f:
                ns = next((line.split() for line in f if line.startswith(b"NSpid:")), [])
        except OSError:
            continue
        if len(ns) > 2 and ns[-1] == str(pid).encode():  # NSpid: this namespace's pid ... the innermost
            return other
    return None


def pending_verdict(run: Run, reader: Reader) -> None:
    """The main process ended and the watcher's verdict is not written: take what the last sample
    after that end (else the root's `below`) shows alive, and say whether the verdict is pending
    or will never come (run.no_verdict: no watcher ran, or it ended without one)."""
    root = run.root
    end = None if root is None else root.end if root.end is not None else root.gone
    if root is not None and end is None and run.root_gone:
        # The reader found its pid gone: it ended, after the log's last record, unseen: nothing was seen
        # after its end (no list to take), but whether a verdict may still come is known as for any end.
        run.no_verdict = (watcher_left(run) if run.watcher_exit
                          else verdict_lost(run, run.end or 0.0, reader))
        run.verdict_pending = not run.no_verdict
        return
    if root is None or end is None or run.leftover_seen:
        return
    if root.pid == 1 and run.no_watcher and not run.watcher_pids:
        # A pid namespace's init: its exit made the kernel kill every process in that namespace.
        run.no_verdict = (f"{NO_WATCHER}: the main process was pid 1 (its pid namespace's init), and its "
                          "exit ended every process in that namespace: nothing can be left behind")
        run.leftover, run.leftover_count, run.init_ended = {}, 0, True
        return
    if not (run.watcher_pids or run.below is not None):
        return
    # A watcher_exit without a leftover (log-gone, error, root-is-reaper): it left before its verdict.
    run.no_verdict = (watcher_left(run) if run.watcher_exit
                      else verdict_lost(run, end, reader))
    run.verdict_pending = not run.no_verdict
    if run.last_sample is not None and run.last_sample >= end:
        alive = [p for p in run.processes if p is not root and p.end is None and p.gone is None]
        run.provisional_from = "sample"
    elif run.below is not None:
        alive = [p for p in run.below if p.end is None and p.gone is None]
        run.provisional_from = "below"
    else:
        return  # nothing seen after the end yet: unknown, and said so
    run.leftover = {p: {"pid": p.pid, "rss": p.last_rss or None} for p in alive}
    unlisted = run.below_count - len(run.below) if run.provisional_from == "below" and run.below else 0
    run.leftover_count = len(alive) + max(unlisted, 0)


def watcher_left(run: Run) -> str:
    """Why no verdict will come from a watcher that left without one: its watcher_exit reason, in words."""
    why = WATCHER_EXIT_WORDS.get(run.watcher_exit)
    return f"{WATCHER_ENDED} (it left: {run.watcher_exit}{f': {why}' if why else ''})"


def verdict_lost(run: Run, end: float, reader: Reader) -> str:
    """Why no verdict will come for a run whose main process ended at `end`, or "" while one may.

    From the log first (a reader may be on another host, or read it a day later): no watcher_start
    long after the end, or no verdict long after it was due. From /proc only for a watcher on
    this host: its pid gone (or another process's) means it ended without writing one."""
    now = reader.now
    if not run.watcher_pids:
        if run.no_watcher:
            return f"{NO_WATCHER}: {run.no_watcher}"
        if run.waited is not None and run.waited.no_watcher:
            return f"{NO_WATCHER}: {run.waited.no_watcher}"
        if now - end > WATCHER_START_LATE_S:
            return NO_WATCHER_RECORD
        return ""
    here = reader.host
    if all(h == here for h, _ in run.watcher_pids):
        if not watchers_gone(run, here):
            return ""
        pids = ", ".join(str(pid) for _, pid in sorted(run.watcher_pids))
        # It writes to the log's path alone (watcher/main.py): a path that stopped naming the log (moved,
        # removed, its filesystem unmounted by an epilog) ends it without a word, as a kill does.
        return (f"{WATCHER_ENDED} (no leftover or watcher_exit record; its pid {pids} is gone: it was killed, "
                "or the log was moved, removed or its filesystem unmounted while it ran, and it leaves "
                "without a word when the log's path no longer names the log)")
    late = now - end - 2 * run.interval
    if late > VERDICT_LATE_S:
        return (f"{WATCHER_ENDED} (no leftover or watcher_exit record {now - end:.0f} s after the main "
                f"process's end; it is written within a second or two)")
    return ""


def verdict_held(run: Run) -> bool:
    """The log lost records as the run's main ended (its exit missing beside a log cut mid-record, Run.log_cut, set
    once the log's end is read, or a dropped count: a full disk) and holds no verdict: the watcher writes to that log
    too, and keeps a verdict the log refused until it takes records again (watcher/main.py catch_up)."""
    root = run.root
    return (root is not None and not root.exited and root.exec_into is None and not run.leftover_seen
            and bool(run.dropped or run.watcher_dropped or run.log_cut))


def held_not_absent(run: Run) -> None:
    """No watcher record in a log that lost records is no proof that none ran: its start may be among the lost, and
    its verdict may still come once the disk has room: pending (verdict_held words it), not 'no watcher ran'."""
    if run.no_verdict == NO_WATCHER_RECORD and verdict_held(run):
        run.verdict_pending, run.no_verdict = True, ""


def log_clock(run: Run, host: str) -> float | None:
    """The boot time the run's watcher on `host` computed its create times from, where it is of this boot
    (watcher_start's `boot`, `boot_id`): live start ticks read on it, not on the reader's own clock, are not
    moved by a wall-clock step since the run (docs/contracts.md, "Process identity"); None: not known."""
    clock = run.watcher_clock.get(host)
    return clock[0] if clock is not None and clock[1] == boot_id() else None


def watchers_gone(run: Run, here: str | None = None) -> bool:
    """Every watcher of the run ran on this host (`here`) and its pid is gone: nothing more will come from it."""
    here = here or this_host()
    return bool(run.watcher_pids) and all(
        host == here and not watcher_alive(pid, run.watcher_started.get((host, pid)), log_clock(run, host))
        for host, pid in run.watcher_pids)


def watcher_alive(pid: int, started: float | None, clock: float | None = None) -> bool:
    """Whether this host's process `pid` may still be the watcher that wrote watcher_start at `started`
    (clock: as main_alive's)."""
    try:
        found = ProcReader(boot=clock).stat(pid)
    except OSError:
        return True  # cannot tell: not evidence of its end
    if found is None:
        return False
    return started is None or found["create_time"] <= started + WATCHER_START_SLACK_S


def run_state(run: Run, now: float) -> str:
    """What is known of how a run ended (RUN_*): from its main process's records and the watcher's."""
    root = run.root
    if root is None or root.exited:
        return RUN_ENDED if root is not None else RUN_END_UNSEEN
    if root.exec_into is not None and (root.gone is not None or run.leftover_seen):
        return RUN_ENDED  # it exec'd into another program, whose end the watcher saw: not killed
    if run.waited is not None and run.waited.status >= 0:
        return RUN_ENDED  # `run` saw it exit with a code (os._exit: no exit handlers, no process_exit)
    if root.exit_unwritten is not None and (run.waited is None or run.waited.status >= 0):
        return RUN_ENDED  # it reached its exit record, which found no descriptor (its note, read by the watcher)
    if run.leftover_how == vocab.ROOT_KILLED or root.gone is not None:
        return RUN_KILLED
    if run.leftover_seen:
        return RUN_ENDED  # the watcher saw the main process end and checked what was left
    if run.alive_now is not None:  # this host's /proc, as the log was read (look_now)
        return RUN_IN_PROGRESS if run.alive_now else RUN_END_UNSEEN
    if run.final_seen:
        return RUN_END_UNSEEN
    # Nothing here can tell (another host's log): in progress only while its last record is recent (either
    # way: two hosts' clocks differ), never for ever: a log cut mid-run stays cut.
    age = now - (run.end or 0.0)
    if abs(age) <= RECENT_S:
        return RUN_IN_PROGRESS
    return RUN_END_UNSEEN
