"""The root's process-tree sampler, and the leftover check at root exit.

Walking ``children(recursive=True)`` of the root loses every process that
outlives its parent (it is re-parented), which is exactly the orphaned
sidecar chain this tool exists to show. So the sampler keeps every process
of the run it has ever seen and keeps walking from those still alive, each
checked by pid and start time against pid reuse.

On Linux it reads /proc/<pid>/task/*/children, which costs in proportion to
the run's own processes; psutil's walk scans all of /proc, which grows with
the host (see BENCHMARKS.md). Elsewhere it falls back to psutil.
"""

from __future__ import annotations

import os
import threading
import time

from .sink import Sink
from .targets import ARGV_ROLES

TYPE_CHECKING = False  # typing costs the root milliseconds at start-up
if TYPE_CHECKING:
    from typing import Any

HEARTBEAT_S = 2.0  # a tree record at least this often, with fresh rss
FULL_S = 2.0  # re-read every process's stat (rss, pid reuse) this often
LEFTOVER_GRACE_S = 0.3
CMD_CHARS = 300


def _read(path: str, size: int = 4096) -> bytes | None:
    """A small /proc file's content, or None if the process is gone.

    os.open/os.read rather than open(): a third of the cost, and the sampler
    reads several files per process ten times a second.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


class ProcReader:
    """Reads pid, ppid, start time and rss straight from /proc."""

    def __init__(self) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.boot = 0.0
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime"):
                    self.boot = float(line.split()[1])

    @staticmethod
    def available() -> bool:
        pid = os.getpid()
        return os.path.exists(f"/proc/{pid}/task/{pid}/children")

    def stat(self, pid: int) -> dict[str, Any] | None:
        """ppid, name, create_time, rss, threads of a live process; None if gone or a zombie."""
        data = _read(f"/proc/{pid}/stat")
        if data is None:
            return None
        head, _, tail = data.rpartition(b")")
        fields = tail.split()
        if len(fields) < 22 or fields[0] in (b"Z", b"X"):
            return None
        return {
            "pid": pid,
            "ppid": int(fields[1]),
            "name": head.partition(b"(")[2].decode(errors="replace"),
            "create_time": round(self.boot + int(fields[19]) / self.tick, 2),
            "rss": int(fields[21]) * self.page,
            "threads": int(fields[17]),
        }

    def children(self, pid: int, threads: int = 0) -> list[int] | None:
        """Children of every thread of pid (any thread may fork); None if pid is gone."""
        if threads == 1:  # the common case for pool processes: no directory listing
            data = _read(f"/proc/{pid}/task/{pid}/children", 65536)
            return None if data is None else [int(c) for c in data.split()]
        found: list[int] = []
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return None
        for tid in tids:
            data = _read(f"/proc/{pid}/task/{tid}/children", 65536)
            if data:
                found.extend(int(c) for c in data.split())
        return found

    @staticmethod
    def cmdline(pid: int) -> str:
        data = _read(f"/proc/{pid}/cmdline") or b""
        return data.replace(b"\0", b" ").decode(errors="replace").strip()


class PsutilReader:
    """The same accessors through psutil, where /proc has no children files."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil

    def stat(self, pid: int) -> dict[str, Any] | None:
        ps = self.psutil
        try:
            p = ps.Process(pid)
            with p.oneshot():
                if p.status() == ps.STATUS_ZOMBIE:
                    return None
                return {"pid": pid, "ppid": p.ppid(), "name": p.name(),
                        "create_time": round(p.create_time(), 2), "rss": p.memory_info().rss,
                        "threads": p.num_threads()}
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

    def cmdline(self, pid: int) -> str:
        ps = self.psutil
        try:
            return " ".join(ps.Process(pid).cmdline())
        except (ps.NoSuchProcess, ps.AccessDenied, ps.ZombieProcess, OSError):
            return ""


def make_reader() -> Any:
    """The cheapest reader this platform has."""
    return ProcReader() if ProcReader.available() else PsutilReader()


def role_from_cmd(cmd: str) -> str | None:
    """The role a command line shows (a compile sidecar, say), if any."""
    for suffix, role in ARGV_ROLES:
        if suffix in cmd.replace(os.sep, "/"):
            return role
    return None


class Sampler:
    """Daemon thread in the root: a ``tree`` record whenever the run's set of
    processes changes, plus a sparse heartbeat with fresh rss."""

    def __init__(self, sink: Sink, interval: float, reader: Any = None) -> None:
        self.sink = sink
        self.interval = interval
        self.root = os.getpid()
        self.reader = reader or make_reader()
        self.known: dict[int, float] = {}  # every process of the run seen: pid -> create_time
        self.cmds: dict[tuple[int, float, str], str] = {}
        self._watch: set[int] = set()  # the run's processes alive at the last sample
        self._info: dict[int, dict[str, Any]] = {}  # their stat, from when last read
        self._last_full = 0.0
        self.samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wp-autotrace-sampler", daemon=True)
        self._last: frozenset[int] = frozenset()
        self._last_emit = 0.0

    def start(self) -> None:
        self._thread.start()

    def sample(self, full: bool = False) -> dict[int, dict[str, Any]]:
        """The run's live processes: the root's descendants and every process
        seen before that is still the same process.

        Between full samples a known process costs one read of its children
        file(s); its stat (rss, start time against pid reuse) is read when it
        is new and on full samples.
        """
        with self._lock:
            alive: dict[int, dict[str, Any]] = {}
            frontier = [self.root, *self._watch]
            while frontier:
                pid = frontier.pop()
                if pid in alive:
                    continue
                info = None if full else self._info.get(pid)
                if info is None:
                    info = self._describe(pid, alive)
                    if info is None:
                        continue
                kids = self.reader.children(pid, info["threads"])
                if kids is None:
                    continue  # exited since
                alive[pid] = info
                frontier.extend(kids)
            self._watch = set(alive)
            self._info = alive
            self.samples += 1
            return alive

    def _describe(self, pid: int, alive: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
        """A process's stat, command line and role; None if gone or not the process seen before."""
        info: dict[str, Any] | None = self.reader.stat(pid)
        if info is None or (pid in self.known and abs(self.known[pid] - info["create_time"]) > 1):
            return None
        self.known.setdefault(pid, info["create_time"])
        # The name is in the key because exec changes it (a child seen between
        # fork and exec); nothing is cached while empty, as /proc can show no
        # command line for a moment around exec.
        key = (pid, self.known[pid], info["name"])
        if not self.cmds.get(key):
            self.cmds[key] = self.reader.cmdline(pid)[:CMD_CHARS]
        info["cmd"] = self.cmds[key]
        role = "main" if pid == self.root else role_from_cmd(info["cmd"])
        parent = alive.get(info["ppid"])
        if role == "compile-sidecar" and parent and parent["cmd"] == info["cmd"]:
            role = "compile-worker"  # forked by the sidecar: same command line
        if role:
            info["role"] = role
        return info

    def record(self, final: bool = False) -> dict[int, dict[str, Any]]:
        """Sample once and write a tree record if something changed (or is due)."""
        now = time.monotonic()
        full = final or now - self._last_full >= FULL_S
        procs = self.sample(full)
        if full:
            self._last_full = now
        pids = frozenset(procs)
        if final or pids != self._last or now - self._last_emit >= HEARTBEAT_S:
            self.sink.emit("tree", count=len(procs), procs=sorted(procs.values(), key=lambda p: p["pid"]),
                           changed=pids != self._last, final=final)
            self._last = pids
            self._last_emit = now
        return procs

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.record()
            except Exception as exc:
                self.sink.error("sampler", exc)
                return
            self._stop.wait(self.interval)

    def stop_and_report_leftovers(self) -> None:
        """At root exit: final tree, then the run's processes still alive.

        Processes that are just exiting get a short grace, and only when
        something is still alive; nothing waits otherwise.
        """
        self._stop.set()
        self._thread.join(timeout=self.interval + 0.5)
        procs = self.record(final=True)
        deadline = time.monotonic() + LEFTOVER_GRACE_S
        left = {pid: p for pid, p in procs.items() if pid != self.root}
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            again = self.sample(full=True)
            left = {pid: p for pid, p in left.items() if pid in again}
        self.sink.emit("leftover", pids=sorted(left), procs=sorted(left.values(), key=lambda p: p["pid"]),
                       samples=self.samples)
