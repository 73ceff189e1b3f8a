"""The run's watcher: a separate small process that samples the run's process tree.

The root starts it (runtime/spawn.py says how) so that no host process ever
holds a tracer thread or a child it could wait for: it is an orphan in its
own session, niced, with stdio on /dev/null, and holds no fd of the log between its reads and writes.

Membership is by descent, never by process group or session: a process is
the run's when it is the root, when it was seen as a child of a member
(whichever thread forked it; a re-parented orphan stays a member once seen),
or when its own process_start in the log claims the run. slurmstepd puts
every local task of a step in task 0's group, and `set -m` puts a pager in
the pipeline's group: such processes share the root's group or session but
are not the run's. A /proc scan every SCAN_S still finds them; they are
written once each in a tree record's ``possible`` list (``via`` group or
session), never in ``started``, ``ended`` or ``leftover``. The watcher
writes ``watcher_start`` after its first sample: every process alive under
the root then is a member. A process is (pid, create_time): a
reused pid is a new process. It writes ``tree`` deltas (started / ended,
end = the first sample where the process was gone or a zombie) and forgets a
process once its end is written; ``leftover`` when the root ends (root-exit
if the root wrote its process_exit, root-killed otherwise) and, if some are
still alive after WP_AUTOTRACE_LINGER seconds, ``linger-end``. It exits when
the run is empty, at the end of the linger, or at once when the log is gone.
Lists that do not fit one record are split over several (``part``/``parts``).
With ``WP_AUTOTRACE_EXPORT=otlp`` it also streams the run's spans while the
job runs (export.py): the records it reads from the log feed it, a thread of
its own sends, and sampling never waits for the receiver.
"""

from __future__ import annotations

import json
import os
import stat
import time

from ..common import vocab as V
from ..common.procfs import ProcReader, boot_id
from ..common.vocab import LEFTOVER_GRACE_S  # processes the root's exit is just ending get this long to go
from ..runtime.sink import Sink
from ..runtime.spawn import from_argv
from .cgroups import CPU_KIND, MEMORY_KIND, PIDS_KIND, Cgroups, cgroup_file, cgroup_mounts
from .fds import OrphanFds
from .logwatch import LogWatch, WatcherSink, on_my_clock
from .memory import make_sampler
from .oom import OomCount
from .rootchange import RootChange
from .signals import Signals
from .tree import Tree

# typing is for the type checker only: importing it would only slow the watcher's start. (The root never
# imports this module: runtime/spawn.py runs it in a fresh `python -I -S`.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

# rss heartbeats (tree records' `rss` list): a process's rss is written when it moved by a
# meaningful amount since the value last written for it (looked for every V.HEARTBEAT_S), and every
# live process's at least every V.KEEPALIVE_S. An idle run then writes ~nothing between keep-alives
# (500 idle processes: ~30 KB a minute rather than ~760 KB); peak/last rss read from the log are
# within RSS_MOVE_FRACTION or RSS_MOVE_BYTES of the truth, and exact for a process at its end
# (leftover entries carry their own rss).
RSS_MOVE_FRACTION = 0.10
RSS_MOVE_BYTES = 16 << 20
# From the root's process_exit (read in the log) to the leftover record, the watcher
# samples this often: the verdict is written ~LEFTOVER_GRACE_S after the root's end
# rather than up to an interval (and STAT_EVERY intervals for a zombie root) later.
FAST_TICK_S = 0.01
# Each record's lists are packed to this many bytes of JSON, well under the
# sink's 32 KiB cap, so the sink never has to shorten (and cut) a list.
PART_BYTES = 24 * 1024


def pack(lists: dict[str, list[dict[str, Any]]], budget: int = PART_BYTES) -> list[dict[str, list[Any]]]:
    """Split named lists into parts of at most budget bytes of JSON each; never drops an item."""
    import json

    parts: list[dict[str, list[Any]]] = [{k: [] for k in lists}]
    size = 0
    for key, items in lists.items():
        for item in items:
            n = len(json.dumps(item, separators=(",", ":"), default=repr)) + 1
            if size and size + n > budget:
                parts.append({k: [] for k in lists})
                size = 0
            parts[-1][key].append(item)
            size += n
    return parts


class Watcher:
    """Writes one run's tree / leftover records from what its Tree (tree.py: membership and sampling) sees,
    the pool memory and OOM count beside it, and the verdict; the Tree tells it each end (on_end)."""

    def __init__(self, sink: Sink, run: str, root: int, root_ct: float, interval: float, linger: float,
                 reader: Any = None, log: LogWatch | None = None, redact: str = "", export: Any = None,
                 signals: Signals | None = None) -> None:
        self.tree = Tree(root, root_ct, interval, reader, log, redact, on_end=self._forget)
        self.sink = sink
        self.signals = signals  # those a job's end sends the watcher (signals.py); None: their default action
        self.export = export  # export.LiveExport, when the run streams its spans
        self.run = run
        self.linger = linger
        self.leftover_written = False
        self.unwritten_verdict: dict[str, Any] | None = None  # a leftover the log refused: written again
        self.drops_said = 0  # the sink's dropped count as last written to the log
        self._last_heartbeat = 0.0
        self.memory = make_sampler()  # pool processes' PSS/USS and device files (memory.py)
        self.oom: OomCount | None = OomCount()  # the cgroup's OOM kill count (oom.py)
        if self.oom.path is None:
            self.oom = None
        self._last_keepalive = 0.0
        self.written_rss: dict[int, int] = {}  # pid -> the rss last written for the live process
        # each joining process's memory, pids and cpu cgroups, and each cgroup's limit once (not through psutil:
        # without /proc none is claimed); an OOM kill is told beside it, a failed compile with the pids limit's
        # refusals, a pool larger than a CPU quota with its throttling
        mounts = cgroup_mounts() if isinstance(self.tree.reader, ProcReader) else {}  # one mountinfo read for all
        self.cgroups = tuple(Cgroups(kind, mounts=mounts) for kind in (MEMORY_KIND, PIDS_KIND, CPU_KIND)) \
            if isinstance(self.tree.reader, ProcReader) else ()
        # what a pool process held once its creator ended (a listening socket, a pipe its creator's parent reads)
        self.fds = OrphanFds(stat=self.tree.reader.stat) if isinstance(self.tree.reader, ProcReader) else None
        # the main's user and root directory: a change is why its later records are refused (rootchange.py)
        self.changes = RootChange(root) if isinstance(self.tree.reader, ProcReader) else None

    def emit(self, event: str, **fields: Any) -> None:
        self.sink.emit(event, run=self.run, root_pid=self.tree.root, **fields)

    def emit_parts(self, event: str, lists: dict[str, list[dict[str, Any]]], **fields: Any) -> None:
        """One record, or several (part i of parts) when the lists do not fit one."""
        parts = pack(lists)
        for i, part in enumerate(parts, 1):
            extra: dict[str, Any] = {"part": i, "parts": len(parts)} if len(parts) > 1 else {}
            if event == V.LEFTOVER:
                extra["pids"] = [p["pid"] for p in part["procs"]]
            self.emit(event, **fields, **part, **extra)

    def _forget(self, pid: int) -> None:
        """The tree wrote pid off: its last written rss goes with it, and the role said of it."""
        self.written_rss.pop(pid, None)
        if self.fds is not None:
            self.fds.ended(pid)
        if self.tree.log is not None:
            self.tree.log.given.pop(pid, None)

    def tick(self) -> None:
        """Sample, write what changed, and notice the root's end."""
        now = time.time()
        if self.tree.log is not None:
            self.tree.log.scan()
        self.write(now, *self.tree.sample(now))

    def begin(self) -> None:
        """The first sample, then watcher_start, then what the sample found: once watcher_start is in
        the log, every process then alive under the root is a member (a test may kill the root then)."""
        now = time.time()
        if self.tree.log is not None:
            self.tree.log.scan()
        first = self.tree.sample(now)
        oom = {"oom_kill": self.oom.last} if self.oom is not None and self.oom.last is not None else {}
        self.emit(V.WATCHER_START, interval=self.tree.interval, linger=self.linger, **oom, **_clock(self.tree.reader))
        self.write(now, *first)

    def write(self, now: float, started: list[dict[str, Any]], ended: list[dict[str, Any]]) -> None:
        """The tree record for one sample (if anything changed, or a heartbeat is due)."""
        lists: dict[str, list[dict[str, Any]]] = {"started": started, "ended": ended}
        if self.changes is not None and self.tree.is_root(self.tree.root):  # alive: its pid is still its own
            for change in self.changes.check(now):
                self.emit(V.ROOT_CHANGE, **change)
        if self.tree.log is not None:  # one listed again after its exec keeps the role said of it before
            for entry in started:
                self.tree.log.keep_said(entry["pid"], entry)
        self.tree.zombies.check(now)
        lists.update(self.tree.zombies.take())
        if self.tree.possible:
            lists["possible"], self.tree.possible = self.tree.possible, []
        for entry in started:
            self.written_rss[entry["pid"]] = entry["rss"]
            if self.fds is not None:  # a claim's creator: the parent its process_start named (it may be gone)
                log, claim = self.tree.log, entry.get("via") == V.VIA_CLAIM
                self.fds.joined(entry, log.creators.get(entry["pid"]) if log is not None and claim else None)
            data = cgroup_file(entry["pid"]) if self.cgroups else None  # one read for all controllers
            for cgroups in self.cgroups:
                if (limit := cgroups.join(entry, data)) is not None:
                    self.emit(cgroups.kind[1], **limit)
        rss = self._heartbeat(now)
        if rss:
            lists["rss"] = rss
        if started or ended or rss or len(lists) > 2:
            self.emit_parts(V.TREE, lists, count=len(self.tree.live), final=False)
        for entry in ended:
            if (note := exit_unwritten(self.sink.path, entry)) is not None:
                self.emit(V.EXIT_UNWRITTEN, **note)
        if self.fds is not None and (held := self.fds.look(self.tree.live)):
            self.emit_parts(V.ORPHAN_FDS, {"procs": held})
        if self.oom is not None and (rose := self.oom.rose()) is not None:
            # every tick, ends or not: the only evidence of an OOM kill, and its time (evidence.md)
            self.emit(V.OOM, before=rose[0], oom_kill=rose[1], since=round(rose[2], 3))
        if self.tree.log is not None and self.tree.log.roles:
            self.tree.log.pool_roles(self.tree.live, now)
        tree = self.tree
        if tree.log is not None and tree.log.want_job_errors and (errors := tree.log.take_job_errors()):
            self._job_failed(errors, ended)
        ending = tree.log.take_exits() if tree.log is not None else None
        memory = self.memory.tick(now, tree.live, tree.root_end is not None or tree.root not in tree.live,
                                  ending) if self.memory is not None else None
        if memory:
            self.emit_parts(V.MEMORY, memory)
        if self.export is not None:
            self.export.tick(ended, now)
        if self.tree.root_end is None and not self.tree.is_root(self.tree.root):
            self.tree.root_end = now

    def _job_failed(self, errors: dict[int, float], ended: list[dict[str, Any]]) -> None:
        """A member's pool job error was just read (its return record): the pids limits' refusal counts are read
        again now, once per run (`after`: that record's ts). A refusal counted by then may be the failure's cause;
        the count at the watcher's end may also hold refusals long after it (findings/compile.py)."""
        members = [pid for pid in errors if pid in self.tree.live or any(e["pid"] == pid for e in ended)]
        if not members or self.tree.log is None:
            return
        self.tree.log.want_job_errors = False
        for cgroups in self.cgroups:
            if cgroups.kind == PIDS_KIND:
                for fields in cgroups.again(after=min(errors[pid] for pid in members)):
                    self.emit(cgroups.kind[1], **fields)

    def _heartbeat(self, now: float) -> list[dict[str, Any]]:
        """The rss entries due now: every live process's at a keep-alive, else those that moved."""
        if now - self._last_heartbeat < V.HEARTBEAT_S:
            return []
        self._last_heartbeat = now
        everyone = now - self._last_keepalive >= V.KEEPALIVE_S
        if everyone:
            self._last_keepalive = now
        due = []
        written, live = self.written_rss, self.tree.live
        # Between keep-alives only the entries whose stat was read since the last heartbeat can have moved
        # (an entry's rss changes at a read, tree._restat; a new entry's is written as it starts): a thousand
        # idle processes are not visited each time.
        restated, self.tree.restated = self.tree.restated, set()
        for p in live.values() if everyone else map(live.__getitem__, filter(restated.__contains__, live)):
            rss, before = p["rss"], written.get(p["pid"])
            if everyone or before is None or _moved(before, rss):
                written[p["pid"]] = rss
                due.append({"pid": p["pid"], "create_time": p["create_time"], "rss": rss})
        return due

    def leftover(self, how: str) -> None:
        """The run's processes alive now (the root is gone); kept until the log takes it. Each one's parent
        and rss are read again first: a backed-off process's last stat may predate its re-parenting (the
        verdict named a dead child as the parent of the orphan it left)."""
        stopped = {}  # a stopped one is no running one: its state, for the verdict's entry only (not the tree's)
        for pid, entry in self.tree.live.items():
            info = self.tree.reader.stat(pid)
            if info is not None and info["create_time"] == entry["create_time"]:
                entry["rss"], entry["ppid"] = info["rss"], info["ppid"]
                self.tree.restated.add(pid)  # its rss read: the next heartbeat weighs it
                if info.get("state") in V.STOPPED:
                    stopped[pid] = info["state"]
        if self.fds is not None and (held := self.fds.look(self.tree.live, leftover=True)):
            self.emit_parts(V.ORPHAN_FDS, {"procs": held})
        procs = sorted((dict(p, state=stopped[p["pid"]]) if p["pid"] in stopped else p
                        for p in self.tree.live.values()), key=lambda p: p["pid"])
        self.unwritten_verdict = {"procs": procs, "how": how}
        self._write_verdict()

    def _write_verdict(self, retry: bool = False) -> None:
        verdict = self.unwritten_verdict
        if verdict is not None and self._landed(lambda: self.emit_parts(
                V.LEFTOVER, {"procs": verdict["procs"]}, how=verdict["how"], count=len(verdict["procs"])), retry):
            self.unwritten_verdict = None

    def _landed(self, write: Callable[[], None], retry: bool) -> bool:
        """Write; True if the log took it all. A retry that fails again loses nothing new: not counted."""
        before = self.sink.dropped
        write()
        if self.sink.dropped == before:
            return True
        if retry:
            self.sink.dropped = before
        return False

    def catch_up(self) -> None:
        """After records the log refused (a full disk): once it takes records again, the verdict again,
        then how many were lost. The watcher keeps sampling meanwhile: a transient ENOSPC does not
        end the run's observation (it once returned log-unwritable on the first dropped record)."""
        if self.sink.dropped == self.drops_said:
            return
        self._write_verdict(retry=True)
        lost = self.sink.dropped
        if self.unwritten_verdict is None and self._landed(lambda: self.emit(
                V.TRACER_ERROR, where=V.WATCHER, dropped=lost,
                error=f"{lost} record(s) could not be written (the log's disk full or unwritable); kept sampling"),
                retry=True):
            self.drops_said = lost

    def root_exited(self) -> bool:
        """Did the root run its exit code (process_exit in the log)?"""
        if self.tree.log is None:
            return False
        self.tree.log.scan(limit=1 << 62)  # all of it: the record was written before the root ended
        return self.tree.log.root_exited

    def run_loop(self, clock: Any = time.monotonic, sleep: Any = None) -> str:
        """Tick until the run is over; the reason it stopped. Sleeps in the signals' wait where it has them."""
        sleep = sleep or (self.signals.sleep if self.signals is not None else time.sleep)
        next_tick = clock()
        root_gone_at = None
        while True:
            self.say_signals()
            if os.getppid() == self.tree.root:
                # The root adopted us (a child subreaper): leave at once, so a host
                # that waits for all its children is not kept waiting by a watcher.
                return V.EXIT_ROOT_IS_REAPER
            if self.tree.log is not None and self.tree.log.gone():
                return V.EXIT_LOG_GONE
            self.catch_up()
            self.tick()
            now = clock()
            if self.tree.root_end is not None and root_gone_at is None:
                root_gone_at = now
            if root_gone_at is not None:
                if not self.leftover_written and now - root_gone_at >= min(LEFTOVER_GRACE_S, self.linger):
                    exited = self.root_exited()  # the whole log read: the root's below too
                    if self.tree.log is not None and (self.tree.log.below or self.tree.log.claimed):
                        self.tick()  # they join before the verdict
                    self.leftover(V.ROOT_EXIT if exited else V.ROOT_KILLED)
                    self.leftover_written = True
                if self.leftover_written and not self.tree.live and self.unwritten_verdict is None \
                        and not self.tree.zombies.waiting(now):
                    return V.EXIT_RUN_ENDED
                if now - root_gone_at >= self.linger and self.leftover_written:
                    self.leftover(V.LINGER_END)
                    return V.EXIT_LINGER_END if self.unwritten_verdict is None else V.EXIT_LOG_UNWRITABLE
            if self._signalled_out(now, root_gone_at is not None):
                return V.EXIT_SIGNALLED
            step = FAST_TICK_S if self._verdict_due() else self.tree.interval
            next_tick = min(next_tick + self.tree.interval, clock() + step)
            sleep(max(0.0, next_tick - clock()))
            next_tick = max(next_tick, clock() - self.tree.interval)  # never catch up in a burst

    def say_signals(self) -> None:
        """The signals taken since the last call, each a watcher_signal record (written before anything else:
        SIGKILL may follow)."""
        if self.signals is not None:
            for said in self.signals.take():
                self.emit(V.WATCHER_SIGNAL, **said)

    def _signalled_out(self, now: float, root_gone: bool) -> bool:
        """Whether an ending signal's bound is reached (signals.py: its time, or a second signal). Then what
        can be said is written first: the verdict if the root is gone (or, written already, what is still
        alive, as at the linger's end); with the root alive there is none, and the run goes on unwatched."""
        by = self.signals.leave_by(self.linger) if self.signals is not None else None
        if by is None or (now < by and not (self.signals is not None and self.signals.stop_now)):
            return False
        if root_gone and not self.leftover_written:
            self.leftover(V.ROOT_EXIT if self.root_exited() else V.ROOT_KILLED)
            self.leftover_written = True
        elif root_gone and self.tree.live:
            self.leftover(V.LINGER_END)
        return True

    def _verdict_due(self) -> bool:
        """The root wrote its process_exit (or is gone: killed), and the leftover is not written yet:
        sample fast."""
        if self.leftover_written:
            return False
        return self.tree.root_end is not None or (self.tree.log is not None and self.tree.log.root_exited)

    def finish(self, reason: str) -> None:
        """The final tree record and watcher_exit."""
        if reason not in (V.EXIT_LOG_GONE, V.EXIT_LOG_UNWRITABLE, V.EXIT_PROC_ELSEWHERE):
            for cgroups in self.cgroups:  # the pids limits' refusals since, the memory limits' peaks, CPU throttling
                for fields in cgroups.again():
                    self.emit(cgroups.kind[1], **fields)
            self.emit(V.TREE, count=len(self.tree.live), started=[], ended=[], final=True)
        counts: dict[str, int] = {}
        if self.export is not None:
            unsent = self.export.close()
            if unsent is not None:
                self.emit(V.TRACER_ERROR, **unsent)
            counts = {"exported": self.export.sender.sent, "unsent": self.export.sender.unsent}
        cpu = os.times()
        if self.signals is not None:  # one taken since the last tick, then the first ending one and the count
            self.signals.poll()
            self.say_signals()
            counts.update(self.signals.exit_fields())
        if self.sink.dropped:
            counts["dropped"] = self.sink.dropped
        self.emit(V.WATCHER_EXIT, reason=reason, samples=self.tree.samples, cpu_s=round(cpu[0] + cpu[1], 3), **counts)


def exit_unwritten(log: str | None, entry: dict[str, Any]) -> dict[str, Any] | None:
    """An ended process's note that its process_exit could not be written (sink_rare.leave_exit_note), as the fields
    of an exit_unwritten record; the note is removed. Only this user's symlink made during that process's life
    (a stale note of an earlier process with the pid is not its). One lstat per end: ENOENT as a rule."""
    path = f"{log}{V.EXIT_NOTE}{entry['pid']}"
    try:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
            return None
        note = os.readlink(path)
        os.unlink(path)
    except OSError:
        return None
    ct = entry.get("create_time")
    if ct is not None and st.st_mtime < ct - 1.0:
        return None
    try:
        said = json.loads(note)
    except ValueError:
        said = None
    said = said if isinstance(said, dict) else {}
    fields = {k: said[k] for k in ("how", "code", "dropped") if k in said}
    return {"exited_pid": entry["pid"], "create_time": ct, "noted": round(st.st_mtime, 3), **fields}


def _clock(reader: Any) -> dict[str, Any]:
    """The clock its create times are on: the boot time it computed them from (wall clock minus CLOCK_BOOTTIME,
    once), the clock ticks per second of stat's start times, and this boot's id. A reader after a wall-clock step
    (cleanup) compares live processes' start ticks on this clock, not its own (docs/verdict.md, "One clock"), and
    the fold turns a process_start's start_ticks into this clock's create time; none without /proc."""
    clock = getattr(reader, "clock", None)
    booted = boot_id() if clock is not None else ""
    return {"boot": clock.boot, "boot_id": booted, "tick": clock.tick} if clock is not None and booted \
        else {}


def _moved(before: int, now: int) -> bool:
    """Whether rss moved enough since the value written to be worth a heartbeat entry."""
    change = abs(now - before)
    return change >= RSS_MOVE_BYTES or change >= before * RSS_MOVE_FRACTION


def main(args: list[str]) -> None:
    """The watcher: ``wp-autotrace-watch`` and runtime/spawn.py's WATCHER_ARGS (spawn.to_argv wrote them)."""
    # First, before any thread (the live export's): the signals a job's end sends every process of its step
    signals = Signals()
    a = from_argv(args)
    run, log, root, redact = a["run"], a["log"], a["root_pid"], a["redact"]
    inherited = int(a["log_fd"])  # the root's own fd: proof of which file the log is
    _settle(inherited)
    host = os.uname().nodename
    try:
        sink = WatcherSink(log, host, V.WATCHER, create=False)  # never creates the log: only the root may
        same = os.path.samestat(os.fstat(sink.fd), os.fstat(inherited))
    except OSError:
        return
    os.close(inherited)
    # The root's create time on this process's clock, as the tree computes its entry of the root: the root read
    # its boot time before this process did, and a wall-clock step between the two made the root another process.
    root_ct = on_my_clock({"create_time": float(a["root_ct"]), "start_ticks": int(a["root_ticks"])})
    logwatch = LogWatch(sink.fd, log, host, run, int(root), int(a["offset"]), root_ct)
    if not same or logwatch.gone():
        return
    export, why_not = _live_export(run, host, a["export"], logwatch)
    # From here on nothing of the log's filesystem is held between two reads or writes (each opens the path,
    # checks it is the same file, and closes it): an epilog can unmount the job's filesystem as soon as the
    # job's main process has ended, while the watcher still samples or lingers for a leftover. A path that no
    # longer names the log (moved, removed, unmounted) ends the watcher: its verdict is lost, and a reader
    # of the log says so (analysis/fold/verdict.py, verdict_lost).
    logwatch.detach()
    sink.detach()
    watcher = Watcher(sink, run, int(root), root_ct, float(a["interval"]), float(a["linger"]),
                      log=logwatch, redact=redact, export=export, signals=signals)
    if not proc_is_ours():
        watcher.finish(V.EXIT_PROC_ELSEWHERE)  # no sample, no verdict: the report says none will come
        return
    try:
        watcher.begin()
        if why_not:
            watcher.emit(V.TRACER_ERROR, where="live-export", error=why_not)
        reason = watcher.run_loop()
    except Exception as exc:
        sink.emit(V.TRACER_ERROR, where="watcher", error=f"{type(exc).__name__}: {exc}", run=run,
                  root_pid=int(root))
        reason = V.EXIT_ERROR
    watcher.finish(reason)


def proc_is_ours() -> bool:
    """Whether /proc shows this pid namespace: /proc/self names this process by the pid it has here.

    Under `unshare -p` without --mount-proc it is the outer namespace's /proc: every pid the run knows
    (the root's, its process_start records') names another process there, or none, and a sample would
    find nothing of the run: a verdict of "nothing left" while its processes live on."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return True  # no /proc to be wrong about: the reader copes (psutil) or fails on its own


def _settle(log_fd: int) -> None:
    """Let go of the job's files before anything else: no cwd on its filesystems (an epilog unmounts them;
    the intermediate already started us in /), and no fd but stdio and the log's. The root's posix_spawn
    closed the others, except those at or above its soft RLIMIT_NOFILE (runtime/spawn.py): a lock file's fd
    held by a lingering watcher would keep the lock past the job."""
    try:
        os.chdir("/")
    except OSError:
        pass
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return  # no /proc: nothing to find them by (and the root could close every fd it saw)
    for fd in fds:
        if fd > 2 and fd != log_fd:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own fd, closed already


def _live_export(run: str, host: str, word: str, logwatch: LogWatch) -> tuple[Any, str]:
    """The live export, fed by the log from the root's process_start on; (None, why) when off or refused."""
    if not word:
        return None, ""
    from . import export

    live, why_not = export.start(run, host, word)
    if live is not None:
        logwatch.on_record = live.record
        logwatch.read_back()
    return live, why_not
