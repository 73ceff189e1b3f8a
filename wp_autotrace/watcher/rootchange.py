"""The run's main process changing its user or its root directory, seen from outside (root_change records).

A traced main started as root (a container's default user) that drops privileges in-process (setuid, setresuid)
or chroots can no longer open the log by its path: the log is private to the user that started the run (0600),
and a chroot leaves the path naming nothing. A main that records no calls holds no descriptor of the log between
its records (docs/contracts.md, "The log's descriptor"), so each later record of it, its process_exit included,
is refused, and no record of its own can say why. The watcher, started before any of the program's code ran,
has the main's first user and root as its own (it inherited them), and reads the main's again at each sample:
a change is written once, with the sample time it was last seen unchanged, so the report tells a missing
process_exit after it as unknown, not as a kill or an os._exit (findings/mainend.py).

Read per sample, the main only: its status file (the file-system uid, the one open() is checked with) and its
root link. A change in the last sample interval before the main ends may go unseen (a zombie's status still
reads, its root link does not; a reaped main reads nothing): then no record says it.
"""

from __future__ import annotations

import os

from ..common.procfs import read_small
from .limits import LIMITS_BYTES, UID


def fs_uid(status: bytes | None) -> int | None:
    """The file-system uid (the 4th of the "Uid:" line: real, effective, saved, fs) of a /proc/PID/status;
    None where it is missing or unreadable."""
    line = next((x for x in (status or b"").split(b"\n") if x.startswith(UID)), None)
    try:
        return int(line.split()[4]) if line is not None else None
    except (IndexError, ValueError):
        return None


def root_dir(pid: int | str, proc: str = "/proc") -> str | None:
    """Where a process's root directory is (its /proc/PID/root link); None where it cannot be read (a zombie,
    another user's process to a watcher without the right to trace it)."""
    try:
        return os.readlink(f"{proc}/{pid}/root")
    except OSError:
        return None


class RootChange:
    """The main's user and root directory as last seen; check() gives the fields of a root_change record for each
    that changed since. Starts from the watcher's own, which it inherited from the main at its spawn."""

    def __init__(self, root: int, proc: str = "/proc") -> None:
        self.root, self.proc = root, proc
        self.uid = fs_uid(read_small(f"{proc}/self/status", LIMITS_BYTES))
        self.dir = root_dir("self", proc)
        self.seen: float | None = None  # the last sample time both were as held here

    def check(self, now: float) -> list[dict[str, object]]:
        """The changes since the last check (each a root_change record's fields); [] where none or unreadable."""
        changes: list[dict[str, object]] = []
        since = {"since": round(self.seen, 3)} if self.seen is not None else {}
        uid = fs_uid(read_small(f"{self.proc}/{self.root}/status", LIMITS_BYTES))
        if uid is not None and self.uid is not None and uid != self.uid:
            changes.append({"uid": uid, "was_uid": self.uid, **since})
            self.uid = uid
        where = root_dir(self.root, self.proc)
        if where is not None and self.dir is not None and where != self.dir:
            changes.append({"root": where, "was_root": self.dir, **since})
            self.dir = where
        if uid is not None:
            self.seen = now
        return changes
