"""Facts read from /proc: one parser per file, the readers, the identity rule; the clock and own argv are env.py's.

Stdlib only, import-cheap: the watcher, cleanup, watch and the root's exit
read every process through here, so a process is named the same way
everywhere: (host, pid, create_time), the create time from ``ProcClock``
(env.py's clock_create_time; a traced start-up loads only that leaf), two create times one process by
``same_process``.
"""

from __future__ import annotations

import errno
import os

from .env import (
    STAT_PGRP as STAT_PGRP,
)
from .env import (
    STAT_PPID as STAT_PPID,
)
from .env import (
    STAT_RSS as STAT_RSS,
)
from .env import (
    STAT_SESSION as STAT_SESSION,
)
from .env import (
    STAT_STARTTIME as STAT_STARTTIME,
)
from .env import (
    STAT_STATE as STAT_STATE,
)
from .env import (
    STAT_THREADS as STAT_THREADS,
)
from .env import (
    boot_time as boot_time,
)
from .env import (
    clock_create_time as clock_create_time,
)
from .env import (
    own_start,
)
from .env import (
    split_stat as split_stat,
)
from .redact import env_secrets

TYPE_CHECKING = False  # imported by a traced root at start (runtime/root.py): no typing there
if TYPE_CHECKING:
    from typing import Any


# (52) exit_code (Linux 3.5+): the wait status a zombie holds for its parent (signal in the low 7 bits, else
# the exit code in bits 8-15). Readable by the process's owner; the kernel shows 0 to others, so it is
# evidence only when read by the same user (the watcher runs as the run's user). Counted from field 3, as
# env.py's STAT_* indexes.
STAT_EXIT_CODE = 49
# (48) arg_start (Linux 3.5+): where the kernel put the command line in the process's memory, set by an exec
# only (a fork's copy keeps its parent's). The one exec sign a python that execs python shows: its comm stays
# the same. Shown to the process's owner (0 to others: no sign then, as before).
STAT_ARG_START = 45

# The one identity rule: two create times closer than this name one process
# (same host and pid). Every side computes round(boot + starttime / CLK_TCK, 2)
# from the same kernel numbers; boot (boot_time()) is computed once per process
# from two clocks, microseconds apart between processes, so one process's values
# may differ by one 0.01 rounding step; 1.5 ticks at the usual USER_HZ=100 absorbs that and keeps apart two
# processes that got one pid 20 ms apart. A pid reused within 15 ms of the
# first start cannot be told apart by any tool.
SAME_START_S = 0.015


def same_process(create_time: float | None, other: float | None) -> bool:
    """Whether two create times of one (host, pid) name the same process; never when one is unknown."""
    return create_time is not None and other is not None and abs(create_time - other) <= SAME_START_S


def own_create_time() -> float | None:
    """This process's create time from /proc/self/stat (env.own_start, which a traced start calls itself); None
    where there is no /proc."""
    return own_start()[0]


def boot_id() -> str:
    """This boot's id (/proc/sys/kernel/random/boot_id; "" where unreadable): pids and start ticks are of one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            return f.read(64).decode("ascii", "replace").strip()
    except OSError:
        return ""


class ProcClock:
    """Turns a stat starttime into a create time (env.py's clock_create_time), this process's boot time and
    tick read once: the watcher and cleanup read many processes' stat lines with one clock."""

    def __init__(self) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.boot = boot_time()

    def create_time(self, starttime: bytes) -> float:
        return clock_create_time(starttime, self.tick, self.boot)


DEAD_STATES = (b"Z", b"X")  # zombie or dead: exited, only not yet reaped
ZOMBIE = b"Z"
# A thread that cannot fork now: stopped by a signal (T), by a tracer (t), or exiting (Z, X).
STOPPED_STATES = (b"T", b"t", *DEAD_STATES)
CMDLINE_BYTES = 65536  # a command line read per process (the tree record keeps far less)
# A child's environment read per process, for its secret values only (environ_secrets, below):
# bounded so a huge environment costs one read; a secret past it is not searched for.
ENVIRON_BYTES = 128 * 1024
# A children file holds "PID " per child (at most 8 bytes): 1 MiB is ~130,000 children of one thread.
CHILDREN_BYTES = 1 << 20
# seq_file files (children, stat) hand out at most one page per read(): a children file of 1,500
# pids took two reads. _read reads to the end, but a read that came back shorter than this (a page,
# 4 KiB at least, less room for one more record) already reached it: seq_file fills its page-sized
# buffer with whole records and stops early only at the end (fs/seq_file.c seq_read_iter), and
# cmdline/environ return all that was asked in one read. Saves the EOF read on almost every read.
SHORT_READ = 4096 - 64
# A children file at least this long (~128 children) is kept with its parsed pids (ProcReader._pids_in),
# for at most PARSED_MAX processes: parsing a thousand pids cost more than the rest of the root's read.
PARSED_MIN_BYTES = 1024
PARSED_MAX = 256
READ_CHUNK = 65536  # bytes asked per read(): a bound on each buffer, whatever the file's maximum
# Errors that mean the process (or thread) is gone. Any other error of a /proc read (EMFILE,
# ENFILE, ENOMEM, EACCES...) says nothing about the process: it must never be read as an end.
GONE_ERRNOS = (errno.ENOENT, errno.ESRCH)

class Unreadable(OSError):
    """A live process's /proc file could not be read (EMFILE, ENFILE, ENOMEM, EACCES...): not an end."""

    def transient(self) -> bool:
        """Out of fds or memory: worth trying again next tick (EACCES/EPERM would fail again)."""
        return self.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.EINTR)


def _read(path: str, size: int = 4096, pid: int = 0, strict: bool = False) -> bytes | None:
    """A /proc file's content up to size bytes (read to its end: see SHORT_READ), or None if the process is gone.

    os.open: a third of open()'s cost. strict: an error other than ENOENT/ESRCH raises Unreadable
    unless pid names no process (kill(pid, 0): ESRCH, no fd needed); not strict: None, as gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        _failed(exc, path, pid, strict)
        return None
    try:
        data = os.read(fd, min(size, READ_CHUNK))
        if len(data) < SHORT_READ or len(data) >= size:  # almost every read: the whole file at once
            return data
        chunks = [data]
        left = size - len(data)
        while left > 0:
            data = os.read(fd, min(left, READ_CHUNK))
            chunks.append(data)
            left -= len(data)
            if len(data) < SHORT_READ:
                break
        return b"".join(chunks)
    except OSError as exc:
        _failed(exc, path, pid, strict)
        return None
    finally:
        os.close(fd)


def read_small(path: str, size: int = 4096) -> bytes | None:
    """A small /proc or /sys file's content up to size bytes (a process's limits or cgroup, a cgroup's limit);
    None where it could not be read (gone, absent, not ours to read): never raises."""
    return _read(path, size)


def _pread(fd: int, path: str, size: int, pid: int, strict: bool) -> bytes | None:
    """_read through a kept descriptor (pidfd.ExitWatch.kept): pread from offset 0, to the end as _read does.
    path: the file's path under /proc/PID (its name in an error: formatted only then).

    A seq_file (stat, children) read at offset 0 starts again from its first record: each call reads
    the file as it is now, never what an earlier read left in the buffer. ESRCH once its process is
    reaped: gone, as a failed open of the path would say."""
    try:
        data = os.pread(fd, min(size, READ_CHUNK), 0)
        if len(data) < SHORT_READ or len(data) >= size:
            return data
        chunks = [data]
        got = len(data)
        while got < size:
            data = os.pread(fd, min(size - got, READ_CHUNK), got)
            chunks.append(data)
            got += len(data)
            if len(data) < SHORT_READ:
                break
        return b"".join(chunks)
    except OSError as exc:
        _failed(exc, f"/proc/{pid}/{path}", pid, strict)
        return None


def _failed(exc: OSError, path: str, pid: int, strict: bool) -> None:
    """Returns (the read is "gone") for ENOENT/ESRCH, or when not strict; else raises Unreadable
    unless no process has pid."""
    if not strict or exc.errno in GONE_ERRNOS:
        return
    if pid > 0:
        try:
            os.kill(pid, 0)  # signal 0: only asks whether the pid exists
        except ProcessLookupError:
            return
        except OSError:
            pass  # EPERM: it exists
    raise Unreadable(exc.errno, f"{path}: {exc.strerror}")


# Start times whose create_time ProcReader.stat keeps (one a live process; past this it starts over).
MAX_CREATED = 65536


class ProcReader:
    """pids, stat and command lines straight from /proc.

    strict (the watcher): stat() and children() raise Unreadable when a live process's file
    cannot be read (the watcher's fd table full: EMFILE), where a lenient reader says None
    (gone) as before; argv() and environ() stay best-effort (empty) either way.
    """

    def __init__(self, strict: bool = False, boot: float | None = None) -> None:
        self.strict = strict
        self.clock = ProcClock()
        if boot is not None:  # start ticks read on another clock's boot time (a log's: verdict.log_clock)
            self.clock.boot = boot
        self.tick = self.clock.tick  # clock ticks per second (cleanup's start-time tolerance)
        self.page = os.sysconf("SC_PAGE_SIZE")
        # pid -> (stat, children) descriptors kept open by the watcher's ExitWatch (exit_watch()): read
        # with pread; other processes' files are opened by path.
        self.kept: dict[int, tuple[int, int]] = {}
        self.created: dict[bytes, float] = {}  # stat's start time (clock ticks since boot) -> create_time
        self.parsed: dict[int, tuple[bytes, list[int]]] = {}  # pid -> its last long children file, parsed

    @staticmethod
    def available() -> bool:
        """/proc with children files (CONFIG_PROC_CHILDREN): what children() reads."""
        pid = os.getpid()
        return os.path.exists(f"/proc/{pid}/task/{pid}/children")

    @staticmethod
    def last_pid() -> int | None:
        """The pid the kernel handed out last in this pid namespace (/proc/loadavg's last field; threads
        count too), or None where it cannot be read: a new process since a read has a pid after it. 0 is None:
        no kernel's namespace holding a process has handed out no pid, and a sandbox's /proc that prints a
        constant 0 there (gVisor's) would stop every listing the watcher skips while it stands still."""
        data = _read("/proc/loadavg", 256)
        try:
            return int(data.rsplit(None, 1)[1]) or None if data else None
        except (IndexError, ValueError):
            return None

    @staticmethod
    def pids() -> set[int]:
        return set(map(int, filter(str.isdigit, os.listdir("/proc"))))  # in C: the host may hold thousands

    def stat(self, pid: int) -> dict[str, Any] | None:
        """ppid, name, create_time, start_ticks (the kernel's start, which a wall-clock step leaves alone), rss,
        threads, groups and image (arg_start: a new value after each exec, 0 where the kernel does not show it) of
        a live process; None if gone or a zombie."""
        kept = self.kept.get(pid)
        data = _read(f"/proc/{pid}/stat", pid=pid, strict=self.strict) if kept is None else \
            _pread(kept[0], "stat", 4096, pid, self.strict)
        parsed = None if data is None else split_stat(data)
        if parsed is None or parsed[1][STAT_STATE] in DEAD_STATES:
            return None
        name, fields = parsed
        started = fields[STAT_STARTTIME]
        if (create_time := self.created.get(started)) is None:  # a process's is read at every look: kept
            if len(self.created) >= MAX_CREATED:
                self.created.clear()
            create_time = self.created[started] = self.clock.create_time(started)
        return {"pid": pid, "ppid": int(fields[STAT_PPID]), "name": name, "create_time": create_time,
                "start_ticks": int(started), "rss": int(fields[STAT_RSS]) * self.page,
                "threads": int(fields[STAT_THREADS]), "groups": (int(fields[STAT_PGRP]), int(fields[STAT_SESSION])),
                "image": int(fields[STAT_ARG_START]) if len(fields) > STAT_ARG_START else 0,
                "state": fields[STAT_STATE].decode(errors="replace")}

    @staticmethod
    def stopped(pid: int) -> bool:
        """Has pid stopped forking: every thread stopped (T: a group stop, t: a tracer's) or exiting (Z, X),
        or the process gone? False while one runs, or where a thread's state cannot be read (not known)."""
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError as exc:
            return exc.errno in GONE_ERRNOS
        for tid in tids:
            try:
                data = _read(f"/proc/{pid}/task/{tid}/stat", pid=pid, strict=True)  # None: that thread is gone
            except Unreadable:
                return False  # out of fds, say: its state is not known
            parsed = None if data is None else split_stat(data, STAT_RSS + 1)
            if data is not None and (parsed is None or parsed[1][STAT_STATE] not in STOPPED_STATES):
                return False
        return True

    def zombie(self, pid: int) -> dict[str, Any] | None:
        """A defunct process's {ppid, create_time, status}: it has ended and its parent has not reaped it
        (waited for it); None if pid is not a zombie (alive, gone, unreadable). Read only, never reaped."""
        try:
            data = _read(f"/proc/{pid}/stat", pid=pid, strict=False)
        except Unreadable:
            return None
        parsed = None if data is None else split_stat(data)
        if parsed is None or parsed[1][STAT_STATE] != ZOMBIE:
            return None
        fields = parsed[1]
        status = int(fields[STAT_EXIT_CODE]) if len(fields) > STAT_EXIT_CODE else None
        return {"pid": pid, "ppid": int(fields[STAT_PPID]),
                "create_time": self.clock.create_time(fields[STAT_STARTTIME]), "status": status}

    def children(self, pid: int, threads: int = 0) -> list[int] | None:
        """Children of every thread of pid (any thread may fork); None if pid is gone."""
        if threads == 1:  # most processes of a run: one read, no directory listing
            kept = self.kept.get(pid)
            data = _read(f"/proc/{pid}/task/{pid}/children", CHILDREN_BYTES, pid, self.strict) if kept is None \
                else _pread(kept[1], f"task/{pid}/children", CHILDREN_BYTES, pid, self.strict)
            return None if data is None else self._pids_in(pid, data)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError as exc:
            _failed(exc, f"/proc/{pid}/task", pid, self.strict)
            return None
        found: list[int] = []
        for tid in tids:
            data = _read(f"/proc/{pid}/task/{tid}/children", CHILDREN_BYTES, pid, self.strict)
            found.extend(int(c) for c in (data or b"").split())
        return found

    def _pids_in(self, pid: int, data: bytes) -> list[int]:
        """A children file's pids; a long one the same as last time gives the same list (not to be changed)
        without parsing it again: the run's root with a thousand children is read every tick."""
        if len(data) < PARSED_MIN_BYTES:
            return list(map(int, data.split()))
        last = self.parsed.get(pid)
        if last is not None and last[0] == data:
            return last[1]
        if len(self.parsed) >= PARSED_MAX:
            self.parsed.clear()  # bounded; the content, not the pid, is what a hit is checked against
        kids = self.parsed[pid] = data, list(map(int, data.split()))
        return kids[1]

    @staticmethod
    def argv(pid: int) -> list[str]:
        """The process's arguments, as a list (each NUL-terminated in /proc)."""
        data = _read(f"/proc/{pid}/cmdline", CMDLINE_BYTES) or b""
        args = data.decode(errors="replace").split("\0")
        return args[:-1] if args[-1:] == [""] else args

    def cmdline(self, pid: int) -> str:
        return " ".join(self.argv(pid)).strip()

    @staticmethod
    def environ(pid: int) -> bytes:
        """The first ENVIRON_BYTES of a process's environment, if it is this user's; else b""."""
        try:
            if os.stat(f"/proc/{pid}").st_uid != os.geteuid():
                return b""
        except OSError:
            return b""
        return _read(f"/proc/{pid}/environ", ENVIRON_BYTES) or b""


    def exit_watch(self) -> Any:
        """A pidfd.ExitWatch where the kernel and Python have pidfds (Linux 5.3+, Python 3.9+), else None;
        this reader then preads the files it keeps open (its ``kept``).

        Imported here, not at the top: this module is on every traced root's start-up path."""
        from .pidfd import ExitWatch

        watch = ExitWatch.make()
        if watch is not None:
            self.kept = watch.kept
        return watch


class PsutilReader:
    """The same accessors through psutil, where there is no /proc."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil

    def pids(self) -> set[int]:
        return set(self.psutil.pids())

    @staticmethod
    def zombie(pid: int) -> dict[str, Any] | None:
        """Without /proc no wait status can be read: a zombie is never claimed (docs/evidence.md)."""
        return None

    def stat(self, pid: int) -> dict[str, Any] | None:
        ps = self.psutil
        try:
            p = ps.Process(pid)
            with p.oneshot():
                if p.status() == ps.STATUS_ZOMBIE:
                    return None
                return {"pid": pid, "ppid": p.ppid(), "name": p.name(),
                        "create_time": round(p.create_time(), 2), "rss": p.memory_info().rss,
                        "threads": p.num_threads(), "groups": (os.getpgid(pid), os.getsid(pid))}
        except (ps.NoSuchProcess, ps.AccessDenied, ps.ZombieProcess, OSError):
            return None

    def children(self, pid: int, threads: int = 0) -> list[int] | None:
        ps = self.psutil
        try:
            return [c.pid for c in ps.Process(pid).children()]
        except ps.NoSuchProcess:
            return None
        except (ps.AccessDenied, OSError):
            return []

    def argv(self, pid: int) -> list[str]:
        ps = self.psutil
        try:
            return list(ps.Process(pid).cmdline())
        except (ps.NoSuchProcess, ps.AccessDenied, ps.ZombieProcess, OSError):
            return []

    def cmdline(self, pid: int) -> str:
        return " ".join(self.argv(pid))

    def environ(self, pid: int) -> bytes:
        """The process's environment as /proc would give it (psutil reads only this user's)."""
        ps = self.psutil
        try:
            env = ps.Process(pid).environ()
        except (ps.NoSuchProcess, ps.AccessDenied, ps.ZombieProcess, OSError):
            return b""
        return "".join(f"{k}={v}\0" for k, v in env.items()).encode()[:ENVIRON_BYTES]


def descendants(pid: int, keep: int, walk: int) -> tuple[list[dict[str, Any]], int]:
    """pid's live (non-zombie) descendants, breadth first, read from /proc children files.

    Returns at most keep entries ``{pid, ppid, create_time, start_ticks, name}`` and how many
    were found (at most walk processes are visited: a bounded cost at exit).
    Empty where /proc has no children files. start_ticks: a reader whose boot time differs from this
    process's by a wall-clock step puts the entry on its own clock by them (watcher/logwatch.py, on_my_clock).
    """
    if not ProcReader.available():
        return [], 0
    reader = ProcReader()
    found: list[dict[str, Any]] = []
    count = 0
    queue = [(pid, 0)]  # breadth first: a list walked by index
    seen = {pid}
    i = 0
    while i < len(queue) and count < walk:
        parent, threads = queue[i]
        i += 1
        for kid in reader.children(parent, threads) or []:
            info = None if kid in seen else reader.stat(kid)
            if info is None:
                continue
            seen.add(kid)
            count += 1
            if len(found) < keep:
                found.append({k: info[k] for k in ("pid", "ppid", "create_time", "start_ticks", "name")})
            queue.append((kid, info["threads"]))
    return found, count


def make_reader(strict: bool = False) -> Any:
    """The cheapest reader this platform has (strict: see ProcReader)."""
    return ProcReader(strict) if ProcReader.available() else PsutilReader()


def environ_secrets(data: bytes, patterns: tuple[str, ...]) -> tuple[str, ...]:
    """env_secrets of a /proc/PID/environ content (NUL-separated NAME=value; a cut last entry dropped)."""
    entries = data.split(b"\0")
    if not data.endswith(b"\0"):
        entries.pop()  # cut by the read's bound (or empty): not a whole entry
    environ = {}
    for entry in entries:
        name, eq, value = entry.decode(errors="replace").partition("=")
        if eq:
            environ[name] = value
    return env_secrets(environ, patterns)
