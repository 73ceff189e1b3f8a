"""A refused task start (EAGAIN) as the refused process saw it: what its error says, and its uid's tasks then.

The kernel counts every task (process and thread) of a real uid on the host against RLIMIT_NPROC's soft value
(`ulimit -u`; root outside a user namespace is exempt): a fork or a thread start past it fails with EAGAIN
("Resource temporarily unavailable", Python's "can't start new thread"). No kernel file counts those refusals,
and the tasks that met the limit are often a linker's threads, gone a few milliseconds later: a watcher's sweep
a tenth of a second apart never sees them. The one moment that still holds them is the refused process's own
failure: its threads started before the refusal are alive until it exits. So a traced process that ends by an
uncaught exception saying EAGAIN counts its uid's tasks in /proc as it exits (process_exit's `uid_tasks`, with
`uid` and its own `nproc`); nothing is read on any other path, and this module is loaded only then (never at a
traced start).

The count is a floor of the kernel's: tasks in another pid namespace are not in this /proc, and tasks ended between
the refusal and the exit are gone from it. Stdlib only.
"""

from __future__ import annotations

import os

from .procfs import read_small

# What a refused fork or thread start says (errno 11, EAGAIN): RLIMIT_NPROC's refusal, among others (memory for a
# thread's stack, a cgroup's pids.max). The findings read the same marks in a job's error.
EAGAIN_MARKS = ("Resource temporarily unavailable", "[Errno 11]", "can't start new thread", "EAGAIN")
STATUS_BYTES = 4096  # /proc/PID/status is about 1.5 KB
# At most this many /proc entries are read (a node's whole process table is rarely past a few thousand): the
# count is then a floor, as it is anyway.
MAX_ENTRIES = 20000


def says_eagain(text: str) -> bool:
    """Whether an error's text says a fork or a thread start was refused (EAGAIN)."""
    return any(mark in text for mark in EAGAIN_MARKS)


def _uid_and_threads(status: bytes) -> tuple[int, int] | None:
    """(real uid, threads) of a /proc/PID/status; None where either line is missing or unreadable."""
    uid = threads = None
    for line in status.split(b"\n"):
        if line.startswith(b"Uid:"):
            uid = line.split()[1]
        elif line.startswith(b"Threads:"):
            threads = line.split()[1]
    try:
        return (int(uid), int(threads)) if uid is not None and threads is not None else None
    except ValueError:
        return None


def uid_tasks(uid: int, proc: str = "/proc") -> int:
    """The tasks (threads of every process) of real uid `uid` that this /proc shows now (a floor: module
    docstring); a process gone between the listing and its read is not counted."""
    count = 0
    try:
        names = os.listdir(proc)
    except OSError:
        return 0
    for name in names[:MAX_ENTRIES]:
        if not name.isdigit():  # self, thread-self and the kernel's files: a process only once, by its pid
            continue
        status = read_small(f"{proc}/{name}/status", STATUS_BYTES)
        read = _uid_and_threads(status) if status else None
        if read is not None and read[0] == uid:
            count += read[1]
    return count


def refused_fields(error: str, proc: str = "/proc") -> dict[str, int]:
    """process_exit's fields beside an error that says EAGAIN: `uid` (this process's real uid), `uid_tasks`
    (its tasks now, uid_tasks) and `nproc` (its own RLIMIT_NPROC soft value, absent where unlimited); none where
    the error says nothing of a refusal. Never raises."""
    if not says_eagain(error):
        return {}
    try:
        import resource  # only on this path: a traced start never loads it

        uid = os.getuid()
        fields = {"uid": uid, "uid_tasks": uid_tasks(uid, proc)}
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if soft != resource.RLIM_INFINITY:
            fields["nproc"] = soft
        return fields
    except Exception:
        return {}
