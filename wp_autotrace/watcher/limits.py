"""A process's `ulimit -u` (RLIMIT_NPROC), uid and memory cgroup, read by the watcher as the process joins the run.

The kernel counts every thread of every process of a uid against RLIMIT_NPROC's soft value: a fork or a thread
start past it fails with EAGAIN ("Resource temporarily unavailable", "can't start new thread"). The watcher reads
both from /proc (one parser per file, here), so the traced process pays nothing at its start; kept out of
common/procfs.py, which every traced root imports at its start (bench/instructions.py counted its growth). The
memory limit its cgroup is held to is read once per cgroup (MemoryCgroups, below).
"""

from __future__ import annotations

import os

LIMITS_BYTES = 4096  # /proc/PID/limits is about 1.3 KB, /proc/PID/status about 1.5 KB
MAX_PROCESSES = b"Max processes"
UID = b"Uid:"


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, LIMITS_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_nproc(pid: int, proc: str = "/proc") -> tuple[int, int] | None:
    """(RLIMIT_NPROC's soft value, the real uid) of a live process; None where the limit is unlimited or a file
    could not be read (gone, or another user's status hidden)."""
    return parse_nproc(_read(f"{proc}/{pid}/limits"), _read(f"{proc}/{pid}/status"))


def parse_nproc(limits: bytes | None, status: bytes | None) -> tuple[int, int] | None:
    """The "Max processes" soft value of a /proc/PID/limits and the first (real) uid of a /proc/PID/status's
    "Uid:" line; None where either is missing or the limit reads "unlimited"."""
    if not limits or not status:
        return None
    try:
        line = next(x for x in limits.split(b"\n") if x.startswith(MAX_PROCESSES))
        uid = next(x for x in status.split(b"\n") if x.startswith(UID)).split()[1]
        soft = line[len(MAX_PROCESSES):].split()[0]
        return None if soft == b"unlimited" else (int(soft), int(uid))
    except (StopIteration, IndexError, ValueError):
        return None


# A process's memory cgroup and the least memory limit over it. The kernel charges a cgroup for every page its
# processes use (page cache too); its OOM killer ends one of them when a charge would pass the least limit set on
# that cgroup or on one above it (what slurmstepd and docker set): v2's memory.max ("max": none), v1's
# memory.limit_in_bytes (none reads as PAGE_COUNTER_MAX pages, 9223372036854771712 on 4 KiB pages). Read once per
# cgroup, as the first of the run's processes in it joins: no cost per tick, none to the traced process.
CGROUP_ROOT = "/sys/fs/cgroup"
V1_LIMIT, V2_LIMIT = "memory.limit_in_bytes", "memory.max"
NO_LIMIT_FROM = 1 << 60  # v1's "none" and anything near it: no host has an exbibyte
MAX_DEPTH = 32  # cgroup levels walked up at most (slurm's is 4: /slurm/uid_U/job_J/step_S)
MAX_CGROUPS = 64  # distinct cgroups read per run: a run whose processes each have their own stops being read there


def parse_memcg(data: bytes | None) -> tuple[int, str] | None:
    """(1, path) from a /proc/PID/cgroup's v1 memory line, else (2, path) from its v2 line ("0::path"); None
    where it has neither or the path lies outside the reader's cgroup namespace ("/.." first)."""
    found = None
    for line in (data or b"").split(b"\n"):
        parts = line.split(b":", 2)
        if len(parts) != 3 or not parts[2].startswith(b"/") or parts[2].startswith(b"/.."):
            continue
        path = parts[2].decode(errors="replace")
        if b"memory" in parts[1].split(b","):
            return 1, path
        if parts[0] == b"0" and not parts[1]:
            found = (2, path)
    return found


def _limit_in(data: bytes | None) -> tuple[bool, int | None]:
    """(read, limit) of a memory.max or memory.limit_in_bytes: its bytes, or None for "max" or v1's none."""
    text = (data or b"").strip()
    if text == b"max":
        return True, None
    if not text.isdigit():
        return False, None
    return True, int(text) if int(text) < NO_LIMIT_FROM else None


def memory_limit(version: int, path: str, root: str = CGROUP_ROOT) -> dict[str, object] | None:
    """A memcg record's fields for a memory cgroup: `version`, `path`, `file` (the limit's file name), `limit`
    (the least limit set on it or above, bytes; absent where none is) and `limit_path` (the cgroup that sets it,
    where that is one above). None where no limit file of it or above could be read (no memory controller
    mounted there: the limit is unknown)."""
    name = V1_LIMIT if version == 1 else V2_LIMIT
    bases = (os.path.join(root, "memory"),) if version == 1 else (root, os.path.join(root, "unified"))
    for base in bases:
        read, least, at, here = False, None, "", path
        for _ in range(MAX_DEPTH):
            ok, limit = _limit_in(_read(os.path.join(base, here.lstrip("/"), name)))
            read = read or ok
            if limit is not None and (least is None or limit < least):
                least, at = limit, here
            if here == "/":
                break
            here = os.path.dirname(here.rstrip("/")) or "/"
        if read:
            out: dict[str, object] = {"version": version, "path": path, "file": name}
            if least is not None:
                out["limit"] = least
                if at != path:
                    out["limit_path"] = at
            return out
    return None


class MemoryCgroups:
    """The memory cgroups of the run's processes: each process's path, read as it joins, and each cgroup's limit,
    read the first time one of them is in it."""

    def __init__(self, proc: str = "/proc", root: str = CGROUP_ROOT) -> None:
        self.proc, self.root = proc, root
        self.seen: set[tuple[int, str]] = set()

    def join(self, entry: dict[str, object]) -> dict[str, object] | None:
        """Sets a joining process's tree entry's `memcg` (its memory cgroup's path) where readable; returns the
        memcg record's fields where its cgroup is new (memory_limit), else None."""
        found = parse_memcg(_read(f"{self.proc}/{entry['pid']}/cgroup"))
        if found is None:
            return None
        entry["memcg"] = found[1]
        if found in self.seen or len(self.seen) >= MAX_CGROUPS:
            return None
        self.seen.add(found)
        return memory_limit(found[0], found[1], self.root)
