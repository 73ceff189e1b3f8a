"""The run's cgroup's OOM kill count: the only evidence the report accepts for "killed by the OOM killer".

The watcher reads it at its start (watcher_start.oom_kill) and again every tick (one pread of the file it holds open),
and writes an `oom` record each time it rose, with the time of the read before (`since`): the kill happened
in (since, the record's ts], so a reader can tell whether it falls at a process's end or not (a kill of a
process outside the run that shares its cgroup happens at no end of the run's; docs/evidence.md). It reads
the cgroup the watcher itself is in, which is the run's unless something moved one of them: cgroup v2's
``memory.events`` (``oom_kill N``), else cgroup v1's ``memory.oom_control`` (``oom_kill N``, Linux 4.13+).
Where neither is readable the count is None and no OOM kill is ever named. Stdlib only; no privileges.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing is for the type checker only: the watcher starts without importing it
if TYPE_CHECKING:
    from typing import Any

CGROUP_ROOT = "/sys/fs/cgroup"
# Where each hierarchy's files live: v2 unified (plain, or the hybrid layout's "unified"), then v1 memory.
_V2_DIRS = ("", "unified")
_V1_DIR = "memory"


def _own_cgroups(proc: str) -> dict[str, str]:
    """controller ("" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    try:
        with open(f"{proc}/self/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for controller in parts[1].split(",") or [""]:
                        found.setdefault(controller, parts[2])
    except OSError:
        pass
    return found


def _count_in(path: str) -> int | None:
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
    except OSError:
        return None
    return None


def _count_of(data: bytes) -> int | None:
    """_count_in's answer from the file's bytes."""
    for line in data.splitlines():
        key, _, value = line.partition(b" ")
        if key == b"oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def candidates(root: str = CGROUP_ROOT, proc: str = "/proc") -> list[str]:
    """The files that may hold this process's cgroup's OOM kill count, the most specific first: the cgroup's
    own, then (inside a container, whose cgroup namespace shows its own cgroup as /) the mount's root."""
    groups = _own_cgroups(proc)
    paths = []
    v2 = groups.get("")
    for sub in _V2_DIRS:
        base = os.path.join(root, sub) if sub else root
        if v2 is not None:
            paths.append(os.path.join(base, v2.lstrip("/"), "memory.events"))
        paths.append(os.path.join(base, "memory.events"))
    v1 = groups.get("memory")
    if v1 is not None:
        paths.append(os.path.join(root, _V1_DIR, v1.lstrip("/"), "memory.oom_control"))
    paths.append(os.path.join(root, _V1_DIR, "memory.oom_control"))
    seen: list[str] = []
    for p in paths:
        if p not in seen:
            seen.append(p)
    return seen


class OomCount:
    """Reads the first readable candidate, found once; remembers the last count read and when."""

    def __init__(self, root: str = CGROUP_ROOT, proc: str = "/proc", clock: Any = time.time) -> None:
        self.path = next((p for p in candidates(root, proc) if _count_in(p) is not None), None)
        self._fd: int | None = None  # the path held open between reads (read())
        self.clock = clock
        self.last_at = clock()
        self.last = self.read()

    def read(self) -> int | None:
        """The count now: one pread of the file held open (an open and a text parse every tick was a
        tenth of an idle run's tick); the file is opened again after any failed read."""
        if self.path is None:
            return None
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            data = os.pread(self._fd, 4096, 0)
        except OSError:
            self.close()
            return None
        return _count_of(data)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def rose(self) -> tuple[int, int, float] | None:
        """(before, now, since) when the count rose since the last read, `since` being that read's time (the
        kills happened after it); None otherwise. A failed read keeps the last count and its time: the next
        rise then spans the gap, as it should."""
        at, now = self.clock(), self.read()
        if now is None:
            return None
        before, since = self.last, self.last_at
        self.last, self.last_at = now, at
        if before is not None and now > before:
            return before, now, since
        return None
