"""The run's watcher: a separate small process that samples the run's process tree.

The root starts it (runtime/spawn.py says how) so that no host process ever
holds a tracer thread or a child it could wait for: it is an orphan in its
own session, niced, with stdio on /dev/null and only the log's fd.

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

import os
import time

from ..common import vocab as V
from ..common.cmdline import role_from_cmd
from ..common.procfs import Unreadable, make_reader, same_process
from ..common.redact import env_secrets, environ_secrets, parse_patterns, redact_argv
from ..runtime.sink import Sink
from .memory import make_sampler

TYPE_CHECKING = False  # the root imports this module at start-up: no typing there
if TYPE_CHECKING:
    from typing import Any, Callable

# rss heartbeats (tree records' `rss` list): a process's rss is written when it moved by a
# meaningful amount since the value last written for it (looked for every HEARTBEAT_S), and every
# live process's at least every KEEPALIVE_S. An idle run then writes ~nothing between keep-alives
# (500 idle processes: ~30 KB a minute rather than ~760 KB); peak/last rss read from the log are
# within RSS_MOVE_FRACTION or RSS_MOVE_BYTES of the truth, and exact for a process at its end
# (leftover entries carry their own rss).
HEARTBEAT_S = 2.0
KEEPALIVE_S = 60.0
RSS_MOVE_FRACTION = 0.10
RSS_MOVE_BYTES = 16 << 20
STAT_EVERY = 5  # ticks between two stat reads of one process (zombie, reuse, exec, rss, threads)
# Cost grows with what changes: a process whose children file showed nothing new is looked at
# (children, and stat when due) twice as late as the time before, up to MAX_BACKOFF ticks (1.6 s
# at the default interval), pool processes up to POOL_BACKOFF; any new child resets it to every
# tick. Only processes with a pidfd (ExitWatch) back off, so ends stay within one interval, and a
# new child of a backed-off process is still seen within one interval: each tick the pids the
# kernel handed out since the last (probe_new) are read, and a member that is the parent of one
# is looked at that tick, whatever its back-off.
MAX_BACKOFF = 16
# New pids read one by one per tick at most; past this many since the last tick (a host forking
# fast, or the pid counter wrapped) one listing of /proc is cheaper, and is done instead.
PROBE_MAX = 64
POOL_BACKOFF = 2
# A backed-off process's stat (rss, exec, threads) is read at most this often in ticks (2 s at the
# default interval: the rss heartbeat's own period); a busy one's every STAT_EVERY.
IDLE_STAT_EVERY = 20
# A process that joined the run less than this many ticks ago is looked at, stat included, every
# tick: a fork is often followed at once by an exec (sh, then its command), and by children.
YOUNG_TICKS = 10
BUSY_ROLES = frozenset((V.MAIN, *V.SIDECAR_ROLES, V.COMPILE_WORKER))
SCAN_S = 2.0  # seconds between /proc scans for processes of the root's group or session ("possible")
LEFTOVER_GRACE_S = 0.2  # processes the root's exit is just ending get this long to go
# From the root's process_exit (read in the log) to the leftover record, the watcher
# samples this often: the verdict is written ~LEFTOVER_GRACE_S after the root's end
# rather than up to an interval (and STAT_EVERY intervals for a zombie root) later.
FAST_TICK_S = 0.01
CMD_CHARS = 1000  # command line kept per process; `cmd_len` says when it was cut
# Each record's lists are packed to this many bytes of JSON, well under the
# sink's 32 KiB cap, so the sink never has to shorten (and cut) a list.
PART_BYTES = 24 * 1024
LOG_SCAN_BYTES = 1 << 20  # log bytes read per tick (process_start of the run, the root's process_exit)
MAX_PARTIAL = 1 << 16  # a line longer than any record: not one to keep
ENTRY_KEYS = ("pid", "ppid", "name", "create_time", "rss")  # a tree entry's fields from stat
MAX_POSSIBLE = 10000  # (pid, create_time) pairs remembered as already written "possible"
# What the live export reads from the log besides process_start/exit (compact JSON, as the sink writes it).
EXPORT_MARKS = (b'"event":"call"', b'"event":"return"', b'"event":"blocked"')
# The root's own process_start ends just before the watcher's offset; a record is at most 32 KiB.
READ_BACK_BYTES = 33 * 1024
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


# -- the watcher's side -----------------------------------------------------------------

def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class WatcherSink(Sink):
    """The watcher's sink: once detached (the root has ended), it holds no fd between two
    writes, so an epilog can unmount the job's filesystem while the watcher lingers.

    Each write then opens the path, checks it is the same file (sink.open_log's
    checks, then st_dev/st_ino), writes and closes; a path that no longer names
    the log drops the record (and LogWatch.gone() ends the watcher).
    """

    detached = False

    def detach(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = -1
        self.detached = True

    def _write(self, event: str, body: str | None, fields: Any) -> None:
        if not self.detached:
            super()._write(event, body, fields)
            return
        try:
            self._reopen()
        except OSError:
            self.dropped += 1
            return
        try:
            super()._write(event, body, fields)
        finally:
            os.close(self.fd)
            self.fd = -1


class LogWatch:
    """The log as the watcher reads it: still there? which pids did the run's
    processes announce (process_start)? did the root write its process_exit?"""

    def __init__(self, write_fd: int, path: str, host: str, run: str, root: int, offset: int) -> None:
        self.write_fd = write_fd
        self.path = path
        self.identity = _identity(write_fd)
        self.detached = False  # after the root's end: no fd held between reads (detach)
        self.host = host
        self.root = root
        self.run = run
        self.read_fd = -1
        # The inherited (write-only) fd reopened for reading: the same file even if
        # the path was renamed since; the path itself where /proc has no fd links.
        for source in (f"/proc/self/fd/{write_fd}", path):
            try:
                fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            a, b = os.fstat(fd), os.fstat(write_fd)
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                self.read_fd = fd
                break
            os.close(fd)
        self.offset = offset
        self.partial = b""
        self.root_exited = False
        self.claimed: dict[int, float] = {}  # pid -> create_time, from process_start records of this run
        # pid -> create_time: the root's live descendants at its exit (its process_exit's below)
        self.below: dict[int, float] = {}
        self.on_record: Any = None  # the live export's feed (export.LiveExport.record), when on

    def gone(self) -> bool:
        """The log was removed (or its fd broke, or its path names another file once detached)."""
        try:
            st = os.stat(self.path) if self.detached else os.fstat(self.write_fd)
        except OSError:
            return True
        return st.st_nlink == 0 or (self.detached and (st.st_dev, st.st_ino) != self.identity)

    def detach(self) -> None:
        """From now on hold no fd between two reads: each scan opens the path (the same file, or none)."""
        if self.read_fd >= 0:
            os.close(self.read_fd)
        self.read_fd = -1
        self.detached = True

    def scan(self, limit: int = LOG_SCAN_BYTES) -> None:
        """Read what was appended since the last scan (at most limit bytes)."""
        if not self.detached:
            self._scan(self.read_fd, limit)
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        try:
            if _identity(fd) == self.identity:
                self._scan(fd, limit)
        finally:
            os.close(fd)

    def _scan(self, fd: int, limit: int) -> None:
        if fd < 0:
            return
        size = os.fstat(fd).st_size
        while self.offset < size and limit > 0:
            data = os.pread(fd, min(size - self.offset, limit), self.offset)
            if not data:
                break
            self.offset += len(data)
            limit -= len(data)
            lines = (self.partial + data).split(b"\n")
            self.partial = lines.pop()
            if len(self.partial) > MAX_PARTIAL:
                self.partial = b""
            for line in lines:
                if b'"process_' in line or (self.on_record is not None and any(m in line for m in EXPORT_MARKS)):
                    self._read_record(line)

    def read_back(self) -> None:
        """The records just before the offset (the root's process_start), for the live export."""
        if self.read_fd < 0 or self.on_record is None:
            return
        start = max(0, self.offset - READ_BACK_BYTES)
        lines = os.pread(self.read_fd, self.offset - start, start).split(b"\n")
        for line in lines[1 if start else 0:]:
            if b'"process_start' in line:
                self._read_record(line)

    def _read_record(self, line: bytes) -> None:
        """Note a process_start of this run, or the root's process_exit; feed the live export."""
        import json

        try:
            rec = json.loads(line[line.find(b"{"):])
        except ValueError:
            return
        if not isinstance(rec, dict) or rec.get("host") != self.host:
            return
        if self.on_record is not None:
            self.on_record(rec)
        event, pid = rec.get("event"), rec.get("pid")
        if event == "process_start" and rec.get("run") == self.run and isinstance(pid, int):
            if isinstance(rec.get("create_time"), float):
                self.claimed[pid] = rec["create_time"]
        elif event == "process_exit" and pid == self.root:
            self.root_exited = True
            below = rec.get("below")
            for p in below if isinstance(below, list) else []:
                if isinstance(p, dict) and isinstance(p.get("pid"), int) and isinstance(p.get("create_time"), float):
                    self.below[p["pid"]] = p["create_time"]


class Watcher:
    """Samples one run's process tree and writes its tree / leftover records."""

    def __init__(self, sink: Sink, run: str, root: int, root_ct: float, interval: float, linger: float,
                 reader: Any = None, log: LogWatch | None = None, redact: str = "", export: Any = None) -> None:
        self.sink = sink
        self.export = export  # export.LiveExport, when the run streams its spans
        self.run = run
        self.root = root
        self.root_ct = root_ct
        self.interval = interval
        self.linger = linger
        # Strict: a /proc read that fails for a reason other than "gone" (EMFILE...) raises Unreadable,
        # and the process is left as it was this tick: never an end read from a failed read.
        self.reader = reader or make_reader(strict=True)
        self.unread: set[int] = set()  # candidates whose stat could not be read: tried again next tick
        self.log = log
        # Command lines are masked as process_start's argv is (redact.py); secret values from the
        # environment, which the watcher inherits from the root.
        self.patterns = parse_patterns(redact)
        self.secrets = env_secrets(os.environ, self.patterns)
        # Never part of the run: this process, and the intermediate that started it.
        self.exclude = {os.getpid()} | ({os.getppid()} if os.getppid() != root else set())
        self.live: dict[int, dict[str, Any]] = {}  # the run's processes alive at the last sample
        self.threads: dict[int, int] = {}  # their thread counts, from their last stat
        self.listed: set[int] = set()  # every pid /proc listed at the last scan
        self.possible: list[dict[str, Any]] = []  # found since the last tree record: shares group/session only
        self.possible_seen: set[tuple[int, float]] = set()  # (pid, create_time) already written as possible
        self.ended_keys: set[tuple[int, float]] = set()  # (pid, create_time) whose end is written (bounded)
        self.scan_every = max(1, round(SCAN_S / interval))
        self.stat_every = STAT_EVERY
        self.scanned_after_root = False
        self.samples = 0
        self.root_end: float | None = None
        self.leftover_written = False
        self.unwritten_verdict: dict[str, Any] | None = None  # a leftover the log refused: written again
        self.drops_said = 0  # the sink's dropped count as last written to the log
        self._last_heartbeat = 0.0
        self.memory = make_sampler()  # pool processes' PSS/USS and device files (memory.py)
        self._last_keepalive = 0.0
        self.written_rss: dict[int, int] = {}  # pid -> the rss last written for the live process
        # Back-off (see sample()): ends come from pidfds, where the reader has them.
        exit_watch = getattr(self.reader, "exit_watch", None)
        self.exits = exit_watch() if exit_watch is not None else None
        self.backoff: dict[int, int] = {}  # pid -> ticks between two looks at it now
        self.next_look: dict[int, int] = {}  # pid -> the sample that looks at it next
        self.stat_at: dict[int, int] = {}  # pid -> the sample that last read its stat
        self.joined: dict[int, int] = {}  # pid -> the sample it joined the run in (young ones: stat as busy)
        self.last_pid: int | None = None  # the kernel's last pid at the last probe (probe_new)

    def emit(self, event: str, **fields: Any) -> None:
        self.sink.emit(event, run=self.run, root_pid=self.root, **fields)

    def emit_parts(self, event: str, lists: dict[str, list[dict[str, Any]]], **fields: Any) -> None:
        """One record, or several (part i of parts) when the lists do not fit one."""
        parts = pack(lists)
        for i, part in enumerate(parts, 1):
            extra: dict[str, Any] = {"part": i, "parts": len(parts)} if len(parts) > 1 else {}
            if event == "leftover":
                extra["pids"] = [p["pid"] for p in part["procs"]]
            self.emit(event, **fields, **part, **extra)

    def _entry(self, info: dict[str, Any], via: str) -> dict[str, Any]:
        """A tree entry for a process joining the run: its stat, command line, role and why it is the run's."""
        pid = info["pid"]
        # Masked argument by argument, then joined; with the secrets of its own environment too
        # (a variable only this child was given).
        secrets = self.secrets + environ_secrets(self.reader.environ(pid), self.patterns)
        cmd = " ".join(redact_argv(self.reader.argv(pid), self.patterns, secrets)).strip()
        entry = {k: info[k] for k in ENTRY_KEYS}
        entry["cmd"] = cmd[:CMD_CHARS]
        if len(cmd) > CMD_CHARS:
            entry["cmd_len"] = len(cmd)
        role = V.MAIN if info["pid"] == self.root else role_from_cmd(cmd)
        parent = self.live.get(info["ppid"])
        if role == V.COMPILE_SIDECAR and parent and parent.get("cmd") == entry["cmd"]:
            role = V.COMPILE_WORKER  # forked by the sidecar: same command line
        if role:
            entry["role"] = role
        entry["via"] = via
        return entry

    def _via(self, info: dict[str, Any], members: Any) -> str | None:
        """Why this process (not yet in the run) is one of the run's, or None: it is the root,
        its parent is a member, or the log has its process_start for this run. Nothing else."""
        pid, ct = info["pid"], info["create_time"]
        if pid == self.root and (not self.root_ct or same_process(ct, self.root_ct)):
            return V.VIA_ROOT
        if info["ppid"] in members:
            return V.VIA_CHILD
        if self.log is None:
            return None
        if pid in self.log.claimed and same_process(self.log.claimed[pid], ct):
            return V.VIA_CLAIM
        if pid in self.log.below and same_process(self.log.below[pid], ct):
            return V.VIA_CHILD  # the root saw it below itself as it exited: descent, seen by the root
        return None

    def _possibly(self, info: dict[str, Any]) -> str | None:
        """group or session when this non-member shares the root's (and is younger): not evidence."""
        if info["create_time"] < self.root_ct:
            return None
        pgrp, sid = info["groups"]
        return V.VIA_GROUP if pgrp == self.root else V.VIA_SESSION if sid == self.root else None

    def sample(self, now: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """One look at the run: (started, ended) since the last one.

        Ends first: with pidfds (pidfd.ExitWatch) one epoll call names every
        process that exited since the last tick, however seldom its files are
        read, so an end is written within one interval. A known process then
        costs one read of its children file (of every thread's, when it has
        several) when it is due: every tick while it changes, else twice as
        late each time nothing new showed, up to MAX_BACKOFF ticks (the root
        every tick, pool processes up to POOL_BACKOFF; no back-off at all
        without a pidfd). Its stat (zombie, pid reused, exec'd, rss, threads)
        is re-read every STAT_EVERY ticks while busy, IDLE_STAT_EVERY when
        backed off; a young process (YOUNG_TICKS) is looked at, stat included,
        every tick: an exec right after fork is seen at once. A backed-off
        process that forked since the last tick is looked at this tick
        (probe_new reads the pids handed out since), so a child living one
        interval is seen however idle its parent was.
        Once the root has ended nothing backs off: the verdict is near. Orphans whose parent ended
        between two ticks are found by their process_start in the log only. A scan of /proc every
        SCAN_S (a listing costs in proportion to the whole host, so not every
        tick) finds new processes of the root's group or session: those that
        are not proven members go to ``self.possible`` (written once each).
        """
        started: list[dict[str, Any]] = []
        ended: list[dict[str, Any]] = []
        candidates: set[int] = set()
        exits = self.exits
        if exits is not None:
            for pid in exits.ended():
                if pid in self.live:
                    self._end(pid, now, ended)
        parents, scan = self.probe_new()
        for pid in list(self.live):
            self._look_at(pid, pid in parents, now, started, ended, candidates)
        self._gather(candidates, scan)
        strangers = self._adopt(candidates - self.exclude - set(self.live), started)
        self._note_possible(strangers)
        if self.samples == 0 and self.root not in self.live and self.root_ct:
            # Gone before the first sample (it exec'd a program that ended, or was killed): its end is
            # still this sample's, so a reader has one for the root.
            ended.append({"pid": self.root, "create_time": self.root_ct, "end": now})
        if self.log is not None:
            self._claims_already_gone(now, ended)
            self.log.claimed.clear()
            self.log.below.clear()
        self.samples += 1
        return started, ended

    def _look_at(self, pid: int, forked: bool, now: float, started: list[dict[str, Any]],
                 ended: list[dict[str, Any]], candidates: set[int]) -> None:
        """One member's look this tick, when it is due (see sample): its stat when due, its children."""
        samples = self.samples
        if self.root_end is None and self.next_look.get(pid, 0) > samples and not forked:
            return  # backed off: its end still comes from its pidfd this tick
        # the root every tick: a zombie root (its parent has not reaped it yet) still has children files
        since = samples - self.stat_at.get(pid, -IDLE_STAT_EVERY)
        young = samples - self.joined.get(pid, -YOUNG_TICKS) < YOUNG_TICKS
        busy = self.backoff.get(pid, 1) <= POOL_BACKOFF
        # forked: its stat too, for its thread count (a new thread's child is in that thread's file)
        restat = pid == self.root or young or forked or since >= IDLE_STAT_EVERY or (
            since >= self.stat_every and busy)
        try:
            if restat and not self._restat(pid, now, started, ended, candidates):
                return
            kids = self.reader.children(pid, self.threads[pid])
        except Unreadable:
            return  # unchanged this tick (and looked at again next tick)
        if kids is None:
            self._end(pid, now, ended)
        else:
            candidates.update(kids)
            self._schedule(pid, not self.live.keys() >= set(kids))

    def _gather(self, candidates: set[int], scan: bool) -> None:
        """Add the pids that may join besides members' children: the root at first, the log's claims and
        the root's below list, a /proc listing's new pids when one is due, reads retried from last tick."""
        if self.samples == 0:
            candidates.add(self.root)
        if self.log is not None:
            candidates.update(self.log.claimed)
            candidates.update(self.log.below)
        if scan or self.samples % self.scan_every == 0 or (self.root_end is not None and not self.scanned_after_root):
            self.scanned_after_root = self.root_end is not None
            try:
                listed = self.reader.pids()
            except OSError:  # EMFILE...: no listing this time; the next scan diffs against the last one
                listed = self.listed
            candidates.update(listed - self.listed)
            self.listed = listed
        candidates.update(self.unread)
        self.unread.clear()

    def probe_new(self) -> tuple[set[int], bool]:
        """(members that are the parent of a pid handed out since the last tick, whether to list /proc now).

        One read of the kernel's last pid (ProcReader.last_pid) when nothing started anywhere; else
        the stat of each new pid (a thread's too: its ppid is its process's parent, so at worst a
        parent is looked at needlessly; joining stays by children files and listings, which name
        processes only). Past PROBE_MAX new pids, or with the counter wrapped, a listing of /proc
        this tick instead. Without last_pid (psutil) nothing: the back-off's bound applies.
        """
        read_last = getattr(self.reader, "last_pid", None)
        last = read_last() if read_last is not None else None
        before, self.last_pid = self.last_pid, last
        if last is None or before is None or last == before:
            return set(), read_last is not None and last is None and self.samples > 0
        if not 0 < last - before <= PROBE_MAX:
            return set(), True
        parents = set()
        for pid in range(before + 1, last + 1):
            try:
                info = self.reader.stat(pid)
            except Unreadable:
                continue
            if info is not None and info["ppid"] in self.live:
                parents.add(info["ppid"])
        return parents, False

    def _schedule(self, pid: int, changed: bool) -> None:
        """When to look at pid again: next tick after a change, else twice as late as last time.

        Only a process whose end its pidfd tells is backed off (the root never, pool processes
        to POOL_BACKOFF ticks, others to MAX_BACKOFF): its end is still seen within one
        interval; a child it forks is seen within one interval too (probe_new names its parent).
        """
        if self.exits is None or pid not in self.exits or pid == self.root or self.root_end is not None:
            self.backoff.pop(pid, None)  # once the root ended, every process every tick: the verdict is near
            self.next_look.pop(pid, None)
            return
        cap = POOL_BACKOFF if self.live[pid].get("role") in BUSY_ROLES else MAX_BACKOFF
        young = self.samples - self.joined.get(pid, -YOUNG_TICKS) < YOUNG_TICKS
        ticks = 1 if changed or young else min(self.backoff.get(pid, 1) * 2, cap)
        self.backoff[pid] = ticks
        self.next_look[pid] = self.samples + ticks

    def _restat(self, pid: int, now: float, started: list[dict[str, Any]], ended: list[dict[str, Any]],
                candidates: set[int]) -> bool:
        """Re-read a known process's stat; False if it ended (a reused pid becomes a candidate)."""
        old = self.live[pid]
        self.stat_at[pid] = self.samples
        info = self.reader.stat(pid)
        if info is None or info["create_time"] != old["create_time"]:
            self._end(pid, now, ended)
            if info is not None:
                candidates.add(pid)
            return False
        old["rss"], old["ppid"] = info["rss"], info["ppid"]  # the parent now: re-parented?
        self.threads[pid] = info["threads"]
        if info["name"] != old["name"] or not old["cmd"]:  # exec'd (or /proc showed no cmd yet)
            again = self._entry(info, old["via"])
            if (again["name"], again["cmd"]) != (old["name"], old["cmd"]):
                self.live[pid] = again
                started.append(again)
        return True

    def _claims_already_gone(self, now: float, ended: list[dict[str, Any]]) -> None:
        """A process whose process_start claims the run but that was gone before any sample saw it
        (a pool worker living a few milliseconds): its end is this sample's, so no process of the run
        is left without an end. Once per (pid, create_time)."""
        assert self.log is not None
        for pid, ct in self.log.claimed.items():
            key = (pid, ct)
            if pid in self.live or key in self.ended_keys:
                continue
            if len(self.ended_keys) >= MAX_POSSIBLE:
                self.ended_keys.clear()  # bounded memory; at worst an end is written twice
            self.ended_keys.add(key)
            ended.append({"pid": pid, "create_time": ct, "end": now})

    def _end(self, pid: int, now: float, ended: list[dict[str, Any]]) -> None:
        """Write off a process: its end is now, the first sample where it was gone."""
        old = self.live.pop(pid)
        self.threads.pop(pid, None)
        self.written_rss.pop(pid, None)
        self.backoff.pop(pid, None)
        self.next_look.pop(pid, None)
        self.stat_at.pop(pid, None)
        self.joined.pop(pid, None)
        if self.exits is not None:
            self.exits.remove(pid)
        ended.append({"pid": pid, "create_time": old["create_time"], "end": now})
        if len(self.ended_keys) >= MAX_POSSIBLE:
            self.ended_keys.clear()
        self.ended_keys.add((pid, old["create_time"]))

    def _adopt(self, candidates: set[int], started: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Candidates that belong join the run, then their own children, down the tree.

        Returns the stat of the candidates that did not join (strangers)."""
        strangers: dict[int, dict[str, Any]] = {}
        while candidates:
            fresh = {}
            for pid in candidates.difference(self.live):
                try:
                    info = self.reader.stat(pid)
                except Unreadable as exc:
                    if exc.transient():
                        self.unread.add(pid)
                    continue
                if info is not None:
                    fresh[pid] = info
            candidates = set()
            grew = True
            while grew:  # parents first, whatever the order the pids came in
                grew = False
                for pid, info in list(fresh.items()):
                    via = self._via(info, self.live)
                    if via is not None:
                        self.live[pid] = entry = self._entry(info, via)
                        self.threads[pid] = info["threads"]
                        self.stat_at[pid] = self.joined[pid] = self.samples
                        if self.exits is not None:
                            # Opened just after its stat was read: a pid is not reused within that moment
                            # (pids are handed out in turn through pid_max), so the pidfd is this process's.
                            self.exits.add(pid)
                        started.append(entry)
                        del fresh[pid]
                        grew = True
                        try:
                            kids = self.reader.children(pid, info["threads"]) or []
                        except Unreadable:
                            kids = []  # young: its children are read again next tick
                        candidates.update(k for k in kids if k not in self.live and k not in self.exclude)
            strangers.update(fresh)
        return [info for pid, info in strangers.items() if pid not in self.live]

    def _note_possible(self, strangers: list[dict[str, Any]]) -> None:
        """Strangers sharing the root's group or session: listed once each as possible, never members."""
        for info in strangers:
            key = (info["pid"], info["create_time"])
            via = self._possibly(info)
            if via is None or key in self.possible_seen:
                continue
            if len(self.possible_seen) >= MAX_POSSIBLE:
                self.possible_seen.clear()  # bounded memory; at worst one is listed twice
            self.possible_seen.add(key)
            entry = self._entry(info, via)
            entry.pop("role", None)  # not the run's: no run role
            self.possible.append(entry)

    def tick(self) -> None:
        """Sample, write what changed, and notice the root's end."""
        now = time.time()
        if self.log is not None:
            self.log.scan()
        self.write(now, *self.sample(now))

    def begin(self) -> None:
        """The first sample, then watcher_start, then what the sample found: once watcher_start is in
        the log, every process then alive under the root is a member (a test may kill the root then)."""
        now = time.time()
        if self.log is not None:
            self.log.scan()
        first = self.sample(now)
        self.emit("watcher_start", interval=self.interval, linger=self.linger)
        self.write(now, *first)

    def write(self, now: float, started: list[dict[str, Any]], ended: list[dict[str, Any]]) -> None:
        """The tree record for one sample (if anything changed, or a heartbeat is due)."""
        lists: dict[str, list[dict[str, Any]]] = {"started": started, "ended": ended}
        if self.possible:
            lists["possible"], self.possible = self.possible, []
        for entry in started:
            self.written_rss[entry["pid"]] = entry["rss"]
        rss = self._heartbeat(now)
        if rss:
            lists["rss"] = rss
        if started or ended or rss or "possible" in lists:
            self.emit_parts("tree", lists, count=len(self.live), final=False)
        memory = self.memory.tick(now, self.live) if self.memory is not None else None
        if memory:
            self.emit_parts("memory", memory)
        if self.export is not None:
            self.export.tick(ended, now)
        if self.root_end is None and self.root not in self.live:
            self.root_end = now

    def _heartbeat(self, now: float) -> list[dict[str, Any]]:
        """The rss entries due now: every live process's at a keep-alive, else those that moved."""
        if now - self._last_heartbeat < HEARTBEAT_S:
            return []
        self._last_heartbeat = now
        everyone = now - self._last_keepalive >= KEEPALIVE_S
        if everyone:
            self._last_keepalive = now
        due = []
        written = self.written_rss
        for p in self.live.values():
            rss, before = p["rss"], written.get(p["pid"])
            if everyone or before is None or _moved(before, rss):
                written[p["pid"]] = rss
                due.append({"pid": p["pid"], "create_time": p["create_time"], "rss": rss})
        return due

    def leftover(self, how: str) -> None:
        """The run's processes alive now (the root is gone); kept until the log takes it."""
        procs = sorted(self.live.values(), key=lambda p: p["pid"])
        self.unwritten_verdict = {"procs": procs, "how": how}
        self._write_verdict()

    def _write_verdict(self, retry: bool = False) -> None:
        verdict = self.unwritten_verdict
        if verdict is not None and self._landed(lambda: self.emit_parts(
                "leftover", {"procs": verdict["procs"]}, how=verdict["how"], count=len(verdict["procs"])), retry):
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
                "tracer_error", where=V.WATCHER, dropped=lost,
                error=f"{lost} record(s) could not be written (the log's disk full or unwritable); kept sampling"),
                retry=True):
            self.drops_said = lost

    def root_exited(self) -> bool:
        """Did the root run its exit code (process_exit in the log)?"""
        if self.log is None:
            return False
        self.log.scan(limit=1 << 62)  # all of it: the record was written before the root ended
        return self.log.root_exited

    def run_loop(self, clock: Any = time.monotonic, sleep: Any = time.sleep) -> str:
        """Tick until the run is over; the reason it stopped."""
        next_tick = clock()
        root_gone_at = None
        while True:
            if os.getppid() == self.root:
                # The root adopted us (a child subreaper): leave at once, so a host
                # that waits for all its children is not kept waiting by a watcher.
                return V.EXIT_ROOT_IS_REAPER
            if self.log is not None and self.log.gone():
                return V.EXIT_LOG_GONE
            self.catch_up()
            self.tick()
            now = clock()
            if self.root_end is not None and root_gone_at is None:
                root_gone_at = now
                self._detach()
            if root_gone_at is not None:
                if not self.leftover_written and now - root_gone_at >= min(LEFTOVER_GRACE_S, self.linger):
                    exited = self.root_exited()  # the whole log read: the root's below too
                    if self.log is not None and (self.log.below or self.log.claimed):
                        self.tick()  # they join before the verdict
                    self.leftover(V.ROOT_EXIT if exited else V.ROOT_KILLED)
                    self.leftover_written = True
                if self.leftover_written and not self.live and self.unwritten_verdict is None:
                    return V.EXIT_RUN_ENDED
                if now - root_gone_at >= self.linger and self.leftover_written:
                    self.leftover(V.LINGER_END)
                    return V.EXIT_LINGER_END if self.unwritten_verdict is None else V.EXIT_LOG_UNWRITABLE
            step = FAST_TICK_S if self._verdict_due() else self.interval
            next_tick = min(next_tick + self.interval, clock() + step)
            sleep(max(0.0, next_tick - clock()))
            next_tick = max(next_tick, clock() - self.interval)  # never catch up in a burst

    def _detach(self) -> None:
        """The root has ended: from now on the log is open only while it is read or written."""
        if self.log is not None:
            self.log.scan(limit=1 << 62)  # what the held fd can still read
            self.log.detach()
        if isinstance(self.sink, WatcherSink) and self.log is not None:
            self.sink.detach()

    def _verdict_due(self) -> bool:
        """The root wrote its process_exit (or is gone: killed), and the leftover is not written yet:
        sample fast."""
        if self.leftover_written:
            return False
        return self.root_end is not None or (self.log is not None and self.log.root_exited)

    def finish(self, reason: str) -> None:
        """The final tree record and watcher_exit."""
        if reason not in (V.EXIT_LOG_GONE, V.EXIT_LOG_UNWRITABLE):
            self.emit("tree", count=len(self.live), started=[], ended=[], final=True)
        counts: dict[str, int] = {}
        if self.export is not None:
            unsent = self.export.close()
            if unsent is not None:
                self.emit("tracer_error", **unsent)
            counts = {"exported": self.export.sender.sent, "unsent": self.export.sender.unsent}
        cpu = os.times()
        if self.sink.dropped:
            counts["dropped"] = self.sink.dropped
        self.emit("watcher_exit", reason=reason, samples=self.samples, cpu_s=round(cpu[0] + cpu[1], 3), **counts)


def _moved(before: int, now: int) -> bool:
    """Whether rss moved enough since the value written to be worth a heartbeat entry."""
    change = abs(now - before)
    return change >= RSS_MOVE_BYTES or change >= before * RSS_MOVE_FRACTION


def main(args: list[str]) -> None:
    """The watcher: ``wp-autotrace-watch RUN PKG_DIR LOG_FD LOG OFFSET ROOT_PID ROOT_CT INTERVAL LINGER REDACT
    EXPORT`` (EXPORT: WP_AUTOTRACE_EXPORT's word, or empty)."""
    _, run, _pkg, fd, log, offset, root, root_ct, interval, linger, redact = args[:11]
    export_word = args[11] if len(args) > 11 else ""
    host = os.uname().nodename
    inherited = int(fd)  # the root's own fd: proof of which file the log is
    try:
        sink = WatcherSink(log, host, V.WATCHER, create=False)  # never creates the log: only the root may
        same = os.path.samestat(os.fstat(sink.fd), os.fstat(inherited))
    except OSError:
        return
    os.close(inherited)
    try:
        os.chdir("/")  # no cwd on the job's filesystems (an epilog unmounts them)
    except OSError:
        pass
    logwatch = LogWatch(sink.fd, log, host, run, int(root), int(offset))
    if not same or logwatch.gone():
        return
    export, why_not = _live_export(run, host, export_word, logwatch)
    watcher = Watcher(sink, run, int(root), float(root_ct), float(interval), float(linger), log=logwatch,
                      redact=redact, export=export)
    try:
        watcher.begin()
        if why_not:
            watcher.emit("tracer_error", where="live-export", error=why_not)
        reason = watcher.run_loop()
    except Exception as exc:
        sink.emit("tracer_error", where="watcher", error=f"{type(exc).__name__}: {exc}", run=run,
                  root_pid=int(root))
        reason = V.EXIT_ERROR
    watcher.finish(reason)


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
