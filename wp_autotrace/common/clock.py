"""The one process clock: a process's create time from /proc/PID/stat, and the identity rule.

Every traced process reads its own create time at start-up (process_start), so
this leaf is kept apart from procfs.py's readers, which only the watcher, the
root's exit and the offline tools need: a traced start-up loads this module, not
those (docs/scale.md, "Traced call and start-up"). procfs.py re-exports every name here.
"""

import os
import time

# /proc/PID/stat (man proc(5)): (1) pid, (2) comm in parentheses (it may hold
# spaces and ")", so fields are counted from the last ")"), then (3) state,
# (4) ppid, (5) pgrp, (6) session, ... (20) num_threads, ... (22) starttime in
# clock ticks since boot, (23) vsize, (24) rss in pages. Indexes below count from field 3.
STAT_STATE, STAT_PPID, STAT_PGRP, STAT_SESSION, STAT_THREADS, STAT_STARTTIME, STAT_RSS = 0, 1, 2, 3, 17, 19, 21
# (52) exit_code (Linux 3.5+): the wait status a zombie holds for its parent (signal in the low 7 bits, else
# the exit code in bits 8-15). Readable by the process's owner; the kernel shows 0 to others, so it is
# evidence only when read by the same user (the watcher runs as the run's user).
STAT_EXIT_CODE = 49
# (48) arg_start (Linux 3.5+): where the kernel put the command line in the process's memory, set by an exec
# only (a fork's copy keeps its parent's). The one exec sign a python that execs python shows: its comm stays
# the same. Shown to the process's owner (0 to others: no sign then, as before).
STAT_ARG_START = 45
# A stat line is well under this (52 fields; comm at most 64 bytes).
STAT_BYTES = 4096

# The one identity rule: two create times closer than this name one process
# (same host and pid). Every side computes round(boot + starttime / CLK_TCK, 2)
# from the same kernel numbers; boot (boot_time()) is computed once per process
# from two clocks, microseconds apart between processes, so one process's values
# may differ by one 0.01 rounding step; 1.5 ticks at the usual USER_HZ=100 absorbs that and keeps apart two
# processes that got one pid 20 ms apart. A pid reused within 15 ms of the
# first start cannot be told apart by any tool.
SAME_START_S = 0.015


def same_process(create_time: "float | None", other: "float | None") -> bool:
    """Whether two create times of one (host, pid) name the same process; never when one is unknown."""
    return create_time is not None and other is not None and abs(create_time - other) <= SAME_START_S


def split_stat(data: bytes) -> "tuple[str, list[bytes]] | None":
    """A /proc/PID/stat line as (comm, fields from (3) on); None if malformed."""
    head, sep, tail = data.rpartition(b")")
    fields = tail.split()
    if not sep or len(fields) <= STAT_RSS:
        return None
    return head.partition(b"(")[2].decode(errors="replace"), fields


_boot_time: "float | None" = None


def boot_time() -> float:
    """The boot time on the wall clock, exact to microseconds: computed once per process.

    /proc/PID/stat's starttime counts ticks of CLOCK_BOOTTIME (suspend included,
    proc(5)); /proc/stat's btime is that boot time cut to an integer second (up
    to 1 s early), which put every start up to 1 s before the records' clock.
    Where CLOCK_BOOTTIME is missing, btime.
    """
    global _boot_time
    if _boot_time is None:
        try:
            _boot_time = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        except (AttributeError, OSError):
            _boot_time = _btime()
    return _boot_time


def _btime() -> float:
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    return 0.0


class ProcClock:
    """Turns a stat starttime into a create time: Unix seconds on the records' clock, 2 decimals.

    Every process of a run (process_start), the watcher (tree entries), the
    root's exit (below) and cleanup use this one clock and rounding, so
    (host, pid, create_time) names one process; compare two with same_process().
    """

    def __init__(self) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")
        self.boot = boot_time()

    def create_time(self, starttime: bytes) -> float:
        return round(self.boot + int(starttime) / self.tick, 2)


def own_create_time() -> "float | None":
    """This process's create time from /proc/self/stat; None where there is no /proc."""
    try:
        fd = os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC)  # a third of open()'s cost (procfs._read)
        try:
            data = os.read(fd, STAT_BYTES)
        finally:
            os.close(fd)
        parsed = split_stat(data)
        return None if parsed is None else ProcClock().create_time(parsed[1][STAT_STARTTIME])
    except (OSError, ValueError):
        return None
