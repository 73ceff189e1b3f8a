"""A process's `ulimit -u` (RLIMIT_NPROC), uid and ignored ending signals, read by the watcher as the process joins
the run.

The kernel counts every thread of every process of a uid against RLIMIT_NPROC's soft value: a fork or a thread
start past it fails with EAGAIN ("Resource temporarily unavailable", "can't start new thread"). The watcher reads
both from /proc (one parser per file, here), so the traced process pays nothing at its start; kept out of
common/procfs.py, which every traced root imports at its start (bench/instructions.py counted its growth). The
limits of its cgroups are cgroups.py's.

The same status read gives the signals among those that end a job (a terminal's Ctrl-C SIGINT, a hang-up, a
launcher's SIGTERM) the process ignores (its SigIgn mask): an ignored signal is inherited through fork and kept
through exec, so a program a compile worker starts ignores SIGINT as torch's workers do, and a Ctrl-C to the job's
process group leaves it running.
"""

from __future__ import annotations

import os

from ..common.procfs import read_small

LIMITS_BYTES = 4096  # /proc/PID/limits is about 1.3 KB, /proc/PID/status about 1.5 KB
MAX_PROCESSES = b"Max processes"
UID = b"Uid:"
SIG_IGN = b"SigIgn:"
NSPID = b"NSpid:"
# The signals that end a job from outside it, by number, as tree entries name them (`sigign`).
ENDING_SIGNALS = ((1, "HUP"), (2, "INT"), (3, "QUIT"), (15, "TERM"))


def read_facts(pid: int, proc: str = "/proc") -> dict[str, int | str]:
    """A live process's tree-entry facts from its limits and status files: `nproc` and `uid` (parse_nproc),
    `sigign` (parse_sigign), `nspid` (parse_nspid) and, with it, `pidns` (read_pidns), each only where read and
    set; {} where the files could not be read."""
    status = read_small(f"{proc}/{pid}/status", LIMITS_BYTES)
    facts: dict[str, int | str] = {}
    nproc = parse_nproc(read_small(f"{proc}/{pid}/limits", LIMITS_BYTES), status)
    if nproc is not None:
        facts["nproc"], facts["uid"] = nproc
    ignored = parse_sigign(status)
    if ignored:
        facts["sigign"] = ignored
    inner = parse_nspid(status)
    if inner is not None:
        facts["nspid"] = inner
        ns = read_pidns(pid, proc)
        if ns is not None:
            facts["pidns"] = ns
    return facts


def read_pidns(pid: int, proc: str = "/proc") -> int | None:
    """The pid namespace a process lives in: the inode its /proc/PID/ns/pid link names (`pid:[N]`); None where
    unreadable (gone, not ours). A traced process writes the same number in its records' `pidns` (its sink, as it
    makes their header): the one fact that says which host process wrote the records of a namespace's pid 1, where
    several namespaces each have one (analysis/fold/pidns.py)."""
    try:
        link = os.readlink(f"{proc}/{pid}/ns/pid")
        return int(link[link.index("[") + 1:-1])
    except (OSError, ValueError):
        return None


def parse_nspid(status: bytes | None) -> int | None:
    """A process's pid in its own pid namespace where that is not this /proc's (`unshare -p`, bwrap, nsjail): the
    last of a /proc/PID/status's "NSpid:" pids (this namespace's first); None where it has one pid, or no such
    line. Its own records carry that pid: the report merges the two (analysis/fold/pidns.py)."""
    line = next((x for x in (status or b"").split(b"\n") if x.startswith(NSPID)), None)
    pids = line.split()[1:] if line is not None else []
    try:
        return int(pids[-1]) if len(pids) > 1 else None
    except ValueError:
        return None


def parse_sigign(status: bytes | None) -> str | None:
    """The ENDING_SIGNALS a /proc/PID/status's "SigIgn:" mask (hex, bit N-1 for signal N) ignores, comma-joined
    ("INT"); None where none is, or the line is missing or unreadable."""
    line = next((x for x in (status or b"").split(b"\n") if x.startswith(SIG_IGN)), None)
    try:
        mask = int(line.split()[1], 16) if line is not None else 0
    except (IndexError, ValueError):
        return None
    return ",".join(name for number, name in ENDING_SIGNALS if mask >> (number - 1) & 1) or None


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

