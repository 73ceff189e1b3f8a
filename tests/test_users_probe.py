"""bench/users/probe.py, the independent reading the users' cases are scored against: a tick in which a process of
the program ended is no moment at once. PSS moves to the co-sharers a process leaves, so a survivor read after its
neighbours exited holds pages their readings, taken just before, counted too (a group SIGTERM read mid-tick: 283.8
MiB against the 254.0 the pool held). The probe leaves such ticks out of its at-once peaks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import psutil
import pytest

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "bench" / "users"))
import probe as P  # noqa: E402

MIB = 2**20


def _tick(t: float, by_pid: dict[int, int], pools: dict[int, list[int]], torn: bool | None) -> dict[str, Any]:
    tk: dict[str, Any] = {"t": t, "total_pss": sum(by_pid.values()), "pss_by_pid": dict(by_pid),
                          "pools": {sid: {"pss": sum(by_pid.get(p, 0) for p in members), "cpu": 0.0,
                                          "n": len(members)} for sid, members in pools.items()}}
    if torn is not None:
        tk["torn"] = torn
    return tk


@pytest.mark.parametrize("saved_before", [False, True])
def test_a_tick_a_process_died_in_is_left_out_of_the_at_once_peaks(saved_before: bool) -> None:
    """stuck_kernel's pool at its group SIGTERM: sidecar 10 and worker 11 read just before they exited, worker 12
    just after, holding their shared pages alone (74 -> 106 MiB); the child 13 already gone. saved_before: ticks
    written before a tick knew it was torn are judged by the pid missing since the tick before."""
    pool = {10: [10, 11, 12]}
    steady = {1: 240 * MIB, 10: 104 * MIB, 11: 74 * MIB, 12: 74 * MIB, 13: 8 * MIB}
    torn_tick = {1: 240 * MIB, 10: 104 * MIB, 11: 74 * MIB, 12: 106 * MIB}
    ticks = [_tick(0.0, steady, pool, None if saved_before else False),
             _tick(0.3, steady, pool, None if saved_before else False),
             _tick(0.6, torn_tick, pool, None if saved_before else True)]
    peaks = P.peaks_at_once(ticks)
    assert peaks["peak_pools_pss_mib_at_once"] == 252.0  # not 284
    assert peaks["peak_total_pss_mib_at_once"] == 500.0  # the steady ticks' 240 + 252 + 8
    assert peaks["torn_ticks"] == 1
    pr = P.Probe.__new__(P.Probe)
    pr.ticks = ticks
    assert [p["peak_pss_mib"] for p in P.pool_summary(pr)] == [252.0]


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_tick_whose_reads_straddle_an_exit_is_torn() -> None:
    """Live: a shell and two children; in one tick the first child is read, then killed (and reaped by its shell)
    before the second is read. That tick read the first alive, so only a look after all the reads can tell that
    it is no moment at once; the tick before it, with no death, is one."""
    root = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = [root.pid]
    try:
        proc = psutil.Process(root.pid)
        deadline = time.monotonic() + 30
        while len(proc.children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        kids = sorted(proc.children(), key=lambda c: c.pid)
        assert len(kids) == 2
        started += [c.pid for c in kids]
        probe = P.Probe(proc, via_run=False)
        probe.sample()
        order = [t.pid for t in probe.tracked.values()]
        victim, after = [pid for pid in order if pid != root.pid][:2]
        real, reads = P.smaps_pss, []

        def read_then_kill(pid: int) -> int | None:
            reads.append(pid)
            if pid == after:  # the victim was read already: it exits before this one's read
                os.kill(victim, signal.SIGKILL)
                gone = time.monotonic() + 20
                while time.monotonic() < gone and _running(victim):
                    time.sleep(0.01)
            return real(pid)

        P.smaps_pss = read_then_kill
        try:
            probe.sample()
        finally:
            P.smaps_pss = real
        assert reads.index(victim) < reads.index(after)
        assert [tk["torn"] for tk in probe.ticks] == [False, True]
        assert P.at_once(probe.ticks) == probe.ticks[:1]
    finally:
        for pid in reversed(started):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        root.wait(timeout=30)
