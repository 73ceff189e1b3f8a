"""Processes of the run that ended and that their parent has not reaped: zombies (state Z).

A zombie holds no memory, but it holds its pid and shows in `ps` as ``<defunct>``; a container without
an init (pid 1 that never waits, pytorch#153593 "Can't kill compile_worker process") collects them. The
watcher notes, when it writes a process off (tree.Tree._end), whether it is a zombie: its parent then,
since when, and the wait status it holds for that parent (/proc/PID/stat field 52): the signal or exit
code it ended with, read, never reaped (the watcher is no one's parent). Then, once a tick, whether each
noted zombie is still there: one that is gone was reaped (``reaped``). docs/evidence.md.
"""

from __future__ import annotations

import time

from ..common.procfs import same_process

_monotonic = time.monotonic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Once nothing of the run is alive, the watcher still looks this long for its zombies' reaping: a parent
# that reaps at all does so at once (init, a shell, Popen.wait), so one still defunct then is not reaped.
REAP_WAIT_S = 0.5
MAX_HELD = 256  # zombies watched for their reaping (a bound; past it, new ones are noted but not followed)
CHECK_PER_TICK = 64  # zombies re-read per tick, the oldest first


class ZombieWatch:
    """What tree.Tree._end found defunct, and which of those their parents have reaped since."""

    def __init__(self, reader: Any) -> None:
        self.read = getattr(reader, "zombie", None)
        self.held: dict[int, float] = {}  # pid -> create_time, while defunct
        self.new: list[dict[str, Any]] = []  # zombies noted since the last take()
        self.reaped: list[dict[str, Any]] = []
        self.noted: dict[int, float] = {}  # pid -> when its zombie was noted (monotonic), while held

    def ended(self, pid: int, create_time: float, now: float) -> None:
        """A process of the run was written off: note it if it is a zombie (same process, not a reuse)."""
        if self.read is None:
            return
        z = self.read(pid)
        if z is None or not same_process(z["create_time"], create_time):
            return
        self.new.append({"pid": pid, "create_time": create_time, "ppid": z["ppid"], "since": now,
                         **({"status": z["status"]} if z.get("status") is not None else {})})
        if len(self.held) < MAX_HELD:
            self.held[pid] = create_time
            self.noted[pid] = _monotonic()

    def check(self, now: float) -> None:
        """Zombies gone since: reaped by their parent (or by init once their parent ended)."""
        if self.read is None or not self.held:
            return
        for pid in list(self.held)[:CHECK_PER_TICK]:
            ct = self.held[pid]
            z = self.read(pid)
            if z is None or not same_process(z["create_time"], ct):
                del self.held[pid]
                self.noted.pop(pid, None)
                self.reaped.append({"pid": pid, "create_time": ct, "end": now})
            else:
                self.held[pid] = self.held.pop(pid)  # to the back: the others are read first next tick

    def waiting(self, now: float) -> bool:
        """Whether a zombie noted less than REAP_WAIT_S ago is still held: the watcher stays for its reaping."""
        del now  # the watcher's clock may be a test's: the wait is measured on the real monotonic clock
        newest = max(self.noted.values(), default=None)
        return newest is not None and _monotonic() - newest < REAP_WAIT_S

    def take(self) -> dict[str, list[dict[str, Any]]]:
        """The tree record's `zombies` and `reaped` lists since the last call (absent when empty)."""
        out = {}
        if self.new:
            out["zombies"], self.new = self.new, []
        if self.reaped:
            out["reaped"], self.reaped = self.reaped, []
        return out
