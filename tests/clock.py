"""The test's own clock: a live process's create time read by the test itself, at the moment it asks.

A create time is the boot time on the wall clock plus the kernel's start ticks (/proc/PID/stat starttime). The
wall clock can step (NTP's makestep, a VM resumed, `date -s`), and then the boot time moves by the step while the
ticks do not. The project computes its boot time once per process (env.boot_time), so a pytest process that
read it before a step keeps the old clock for the rest of the suite, while every program a test starts later
reads the new one: each comparison of the two was off by the step (21 tests failed in one CI run, a 20 s step).
So the readings here are taken anew on every call, from the kernel's numbers by this file's own code (never the
project's procfs or env, whose figures they check), and conftest gives each test a fresh project clock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# Field 22 of /proc/PID/stat (starttime), counted after the ')' that ends the command name: state is field 3.
STARTTIME = 22 - 3
BOOT_READS = 5


def boot_now() -> float:
    """This boot's start on the wall clock now: the wall clock minus CLOCK_BOOTTIME, the tightest of a few
    bracketed reads (a read preempted between the two clocks is off by the preemption, tens of ms when loaded)."""
    best_span, best = float("inf"), 0.0
    for _ in range(BOOT_READS):
        t1 = time.time()
        up = time.clock_gettime(time.CLOCK_BOOTTIME)
        t2 = time.time()
        if t2 - t1 < best_span:
            best_span, best = t2 - t1, (t1 + t2) / 2 - up
    return best


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def start_ticks(pid: int) -> int | None:
    """The kernel's start of live pid in clock ticks since boot (what a clock step leaves alone); None once it
    has ended (gone, or a zombie not yet reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
    except OSError:
        return None
    return None if fields[0] in (b"Z", b"X") else int(fields[STARTTIME])


def started(pid: int) -> float | None:
    """Live pid's create time on the wall clock as it is now, as the records write it (2 decimals); None once it
    has ended."""
    ticks = start_ticks(pid)
    return None if ticks is None else round(boot_now() + ticks / os.sysconf("SC_CLK_TCK"), 2)


def alive(pid: int, create_time: float, within: float = 0.015) -> bool:
    """Whether pid is still the process that started at create_time (on the clock as it is now)."""
    now = started(pid)
    return now is not None and abs(now - create_time) < within
