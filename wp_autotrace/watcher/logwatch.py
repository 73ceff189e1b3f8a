"""The log as the watcher sees it: reading what the run's processes append, and writing its own records.

LogWatch reads the records the watcher acts on (the run's process_start, the root's process_exit, and
for the live export its calls); WatcherSink is the sink that lets go of the log once the root has ended.

LogWatch's reader is minimal on purpose (json.loads and a type check of each field it acts on), not
analysis/read/records.py (parse_line): importing the reader doubles the watcher's start before its first sample and
parse_line re-redacts every process_start's argv, 7 times the cost per line (bench/watcher_parse.py).
"""

from __future__ import annotations

import errno
import os

from ..common.procfs import boot_time, clock_create_time, same_process
from ..common.vocab import AUTOTUNE_WORKER, COMPILE_WORKER, JOB_ERROR, QUACK_WORKER, WORKER_SPAWNED
from ..runtime.sink import Sink

# Pool roles a process can only say itself (its command line is multiprocessing's): a compile worker in its role
# record; an autotune subprocess a pool call spawned (AutotuneProcessPool) in its process_start.
SAID_ROLES = (AUTOTUNE_WORKER, QUACK_WORKER)

TYPE_CHECKING = False  # typing is for the type checker only: importing it would slow the watcher's start
if TYPE_CHECKING:
    from typing import Any

LOG_SCAN_BYTES = 1 << 20  # log bytes read per tick (process_start of the run, the root's process_exit)
MAX_PARTIAL = 1 << 16  # a line longer than any record: not one to keep
# A process saying it became a compile worker (torch's initializer ran in it): a fork or spawn pool's workers run
# the main's command line or multiprocessing's, so only their own record tells the sampler they are a pool's.
ROLE_MARK = b'"event":"role"'
# Its creator naming it as it started it (a fork/spawn compile pool's worker, still importing torch): the same role.
SPAWNED_MARK = b'"event":"worker_spawned"'
# A return record whose call raised a pool job's error (compact JSON, as the sink writes it).
JOB_ERROR_MARK = b'"error":"' + JOB_ERROR.encode()
MAX_JOB_ERRORS = 64  # job errors kept between two takes: only the first of a member's is acted on
# A role record whose process has not joined the watcher's tree within this long is dropped (bounded memory).
ROLE_KEEP_S = 60.0
# What the live export reads from the log besides process_start/exit (compact JSON, as the sink writes it).
EXPORT_MARKS = (b'"event":"call"', b'"event":"return"', b'"event":"blocked"')
# The root's own process_start ends just before the watcher's offset; a record is at most 32 KiB.
READ_BACK_BYTES = 33 * 1024


# What os.stat of the log's path says when the path names no file any more (NFS: removed on the server).
NAMES_NO_FILE = (errno.ENOENT, errno.ENOTDIR, errno.ESTALE)


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class WatcherSink(Sink):
    """The watcher's sink: once detached (as soon as the watcher has checked which file the log is),
    it holds no fd between two writes, so an epilog can unmount the job's filesystem at once.

    Detached is Sink's released mode (Sink.release, docs/contracts.md "The log's
    descriptor"): each write opens the path, checks it is the same file
    (sink.open_log's checks, then st_dev/st_ino), writes and closes; a path that
    no longer names the log drops the record, counted (and LogWatch.gone() ends
    the watcher).
    """

    def detach(self) -> None:
        self.release()


class LogWatch:
    """The log as the watcher reads it: still there? which pids did the run's
    processes announce (process_start)? did the root write its process_exit?"""

    def __init__(self, write_fd: int, path: str, host: str, run: str, root: int, offset: int,
                 root_ct: float = 0.0) -> None:
        self.write_fd = write_fd
        self.path = path
        self.identity = _identity(write_fd)
        self.detached = False  # no fd held between reads (detach, once the live export read back)
        self.host = host
        self.root = root
        self.root_ct = root_ct  # on this watcher's clock (main.py turns the root's ticks); 0.0: unknown
        # A process_start of the root's pid with another create_time: the root ended and its pid was taken;
        # a process_exit of that pid is then the new owner's, not the root's.
        self.root_reused = False
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
        # pid -> the parent its process_start named, of the records the last scan read: the creator of a process that
        # joins by claim already re-parented (its creator died within one look of the fork), for OrphanFds
        self.creators: dict[int, int] = {}
        # pid -> create_time on this watcher's clock: the root's live descendants at its exit (its process_exit's below)
        self.below: dict[int, float] = {}
        self.on_record: Any = None  # the live export's feed (export.LiveExport.record), when on
        # pid -> (when it said its pool role, the role): a compile worker's role record, an autotune worker's start
        self.roles: dict[int, tuple[float, str]] = {}
        # pid -> (create_time, role): the roles pool_roles gave live entries, until the process ends (keep_said):
        # a process the tree lists again after its exec gets a fresh entry, which keeps the role said of it
        self.given: dict[int, tuple[float, str]] = {}
        # pid -> ts of the process_exit records read since the watcher last took them (take_exits): the memory
        # sampler reads a pool process once more as it ends. Taken every tick, so bounded by one scan's records.
        self.exits: dict[int, float] = {}
        # pid -> ts of the first return record of it read whose call raised a pool job's error (JOB_ERROR), since
        # the last take_job_errors; looked for only while wanted (the watcher acts on a member's first one)
        self.job_errors: dict[int, float] = {}
        self.want_job_errors = True

    def gone(self) -> bool:
        """The log was removed (or its fd broke, or its path names another file once detached). Detached,
        only an error that says the path names no file (NAMES_NO_FILE) is an end: a soft NFS mount's EIO or
        timeout, met once in a days-long run, must not end the watcher and lose its verdict."""
        try:
            st = os.stat(self.path) if self.detached else os.fstat(self.write_fd)
        except OSError as exc:
            return not self.detached or exc.errno in NAMES_NO_FILE
        return st.st_nlink == 0 or (self.detached and (st.st_dev, st.st_ino) != self.identity)

    def detach(self) -> None:
        """From now on hold no fd between two reads: each scan opens the path (the same file, or none)."""
        if self.read_fd >= 0:
            os.close(self.read_fd)
        self.read_fd = -1
        self.detached = True

    def scan(self, limit: int = LOG_SCAN_BYTES) -> None:
        """Read what was appended since the last scan (at most limit bytes)."""
        self.creators.clear()  # the last tick's joins took theirs: bounded by one scan's records
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
                if b'"process_' in line or ROLE_MARK in line or SPAWNED_MARK in line or (
                        self.on_record is not None and any(m in line for m in EXPORT_MARKS)) or (
                        self.want_job_errors and JOB_ERROR_MARK in line):
                    self._read_record(line)

    def pool_roles(self, live: dict[int, dict[str, Any]], now: float) -> None:
        """Give the pool role to the live entries whose process said it took it (a role record or its process_start,
        written after it started: the same process, not one that reused its pid before), so the sampler reads their
        memory; forget what was applied, and what no live process claimed for ROLE_KEEP_S."""
        for pid, (ts, role) in list(self.roles.items()):
            entry = live.get(pid)
            if entry is not None and entry.get("create_time", ts) <= ts + 0.05:
                entry["role"] = role
                self.given[pid] = (entry.get("create_time", ts), role)
                del self.roles[pid]
            elif now - ts > ROLE_KEEP_S:
                del self.roles[pid]

    def keep_said(self, pid: int, entry: dict[str, Any]) -> None:
        """A process the tree lists again (its exec) keeps in its fresh entry the role said of it before (given:
        its creator's record named it between its fork and its exec), where its command line gives it none."""
        said = self.given.get(pid)
        if "role" not in entry and said is not None and said[0] == entry.get("create_time"):
            entry["role"] = said[1]

    def take_exits(self) -> dict[int, float]:
        """The process_exit records (pid -> ts) read since the last call: each handed over once."""
        exits, self.exits = self.exits, {}
        return exits

    def take_job_errors(self) -> dict[int, float]:
        """The pool job errors (pid -> the first one's ts) read since the last call: each handed over once."""
        errors, self.job_errors = self.job_errors, {}
        return errors

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
        if event == "process_start" and pid == self.root and self.root_ct and isinstance(rec.get("create_time"), float):
            self.root_reused = self.root_reused or not same_process(on_my_clock(rec), self.root_ct)
        if event == "role" and rec.get("role") == COMPILE_WORKER and isinstance(pid, int) \
                and isinstance(rec.get("ts"), float):
            self.roles[pid] = (rec["ts"], COMPILE_WORKER)
        elif event == WORKER_SPAWNED and isinstance(rec.get("worker_pid"), int) and isinstance(rec.get("ts"), float):
            self.roles.setdefault(rec["worker_pid"], (rec["ts"], COMPILE_WORKER))  # started before the record
        elif event == "process_start" and rec.get("run") == self.run and isinstance(pid, int):
            if rec.get("role") in SAID_ROLES and isinstance(rec.get("ts"), float):
                self.roles[pid] = (rec["ts"], rec["role"])
            if isinstance(rec.get("create_time"), float):
                self.claimed[pid] = on_my_clock(rec)
                if isinstance(rec.get("ppid"), int):
                    self.creators[pid] = rec["ppid"]
        elif event == "return" and isinstance(pid, int) and isinstance(rec.get("ts"), float) \
                and str(rec.get("error", "")).startswith(JOB_ERROR) and len(self.job_errors) < MAX_JOB_ERRORS:
            self.job_errors.setdefault(pid, rec["ts"])
        elif event == "process_exit" and isinstance(pid, int) and pid != self.root:
            if isinstance(rec.get("ts"), float):
                self.exits[pid] = rec["ts"]
        elif event == "process_exit" and pid == self.root and not self.root_reused:
            self.root_exited = True
            below = rec.get("below")
            for p in below if isinstance(below, list) else []:
                if isinstance(p, dict) and isinstance(p.get("pid"), int) and isinstance(p.get("create_time"), float):
                    self.below[p["pid"]] = on_my_clock(p)


def on_my_clock(rec: dict[str, Any]) -> float:
    """A create time another process wrote (a process_start's, an entry of the root's below list, the root's own
    handed to the watcher) on this watcher's clock, its start ticks turned as the tree turns every entry's
    (procfs.ProcClock: this process's one boot time and tick): a process that read the boot time across a
    wall-clock step (NTP, a VM resumed) from the watcher wrote its create times the step away from the watcher's
    entries of the same processes, which then matched nothing. Without start_ticks (an older tracer, no /proc):
    the create time as written."""
    ticks = rec.get("start_ticks")
    if type(ticks) is int and ticks >= 0:
        return clock_create_time(str(ticks).encode(), os.sysconf("SC_CLK_TCK"), boot_time())
    return float(rec["create_time"])
