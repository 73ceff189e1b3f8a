"""A process's `ulimit -u` (RLIMIT_NPROC) and uid, read by the watcher as the process joins the run.

The kernel counts every thread of every process of a uid against RLIMIT_NPROC's soft value: a fork or a thread
start past it fails with EAGAIN ("Resource temporarily unavailable", "can't start new thread"). The watcher reads
both from /proc (one parser per file, here), so the traced process pays nothing at its start; kept out of
common/procfs.py, which every traced root imports at its start (bench/instructions.py counted its growth). The
limits of its cgroups are cgroups.py's.
"""

from __future__ import annotations

from ..common.procfs import read_small

LIMITS_BYTES = 4096  # /proc/PID/limits is about 1.3 KB, /proc/PID/status about 1.5 KB
MAX_PROCESSES = b"Max processes"
UID = b"Uid:"


def read_nproc(pid: int, proc: str = "/proc") -> tuple[int, int] | None:
    """(RLIMIT_NPROC's soft value, the real uid) of a live process; None where the limit is unlimited or a file
    could not be read (gone, or another user's status hidden)."""
    return parse_nproc(read_small(f"{proc}/{pid}/limits", LIMITS_BYTES),
                       read_small(f"{proc}/{pid}/status", LIMITS_BYTES))


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

