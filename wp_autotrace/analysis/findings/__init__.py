"""Findings as a registry: each one a small function over the analysed run.

A finding function takes the View (view.View: the selected runs' model
plus what is derived from it) and returns a Finding or None. FINDINGS,
here, is the one registry: it lists them in the order they are shown. The
findings themselves live by theme: runs.py (how a run stands, the verdict),
mainend.py (how its main process ended), leftovers.py (what it left running),
opencalls.py (calls never returned),
pools.py (compile pools), threads.py (a process's threads: pools made at once, a
compile after the main thread returned), compile.py (kernels whose compile job failed in the pool),
quota.py (a pool larger than its CPU quota),
waits.py (a wait for a new pool to be ready),
endings.py (how pools ended, from evidence: docs/evidence.md), signals.py (what the
signals the run's processes sent did), stepend.py (the signals the watcher was sent),
host.py (the tracer itself); base.py holds what
they share. One finding per kind, aggregated (counts and the first few
pids), never one line per process; the full pid lists are in ``pids`` (--json).

Advice is concrete where the log allows: a caller in a device plugin release
that plugins.py knows gets that release's known behaviour and fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .autotune import autotune_killed
from .base import Finding
from .compile import compile_failed
from .endings import jobs_cut_off, jobs_lost, oom_killed, oom_unnamed, pool_died, worker_lost, zombies
from .exitwaits import child_exit_wait, slow_exit_wait
from .held import exit_join_hang, pool_job_hang, pool_wait_interrupted
from .host import data_cut, export_failed, guard_idle, guard_refused, tracer_trouble
from .idle import idle_pools
from .leftovers import leftovers
from .mainend import root_killed, root_os_exit
from .opencalls import calls_never_returned
from .pools import (
    NESTED_ADVICE,
    fork_pool_hang,
    nested_pools,
    pool_device_files,
    pool_outlived_creator,
    spawn_main_reimport,
    wakeup_no_pool,
    warm_pool_bypass,
)
from .quota import cpu_quota_pool
from .runs import no_verdict, records_lost, run_in_progress, verdict_pending
from .settings import setting_overridden, setting_too_late
from .sidecars import sidecars_never_served
from .signals import interrupted_job
from .stepend import watcher_signalled
from .threads import compile_after_exit, pools_made_at_once
from .waits import forked_compile_hang, ready_wait

if TYPE_CHECKING:
    from ..derive.view import View

__all__ = ["FINDINGS", "NESTED_ADVICE", "Finding", "find_all"]


FINDINGS: tuple[Callable[[View], Finding | None], ...] = (
    root_killed,
    root_os_exit,
    no_verdict,
    records_lost,
    run_in_progress,
    watcher_signalled,
    fork_pool_hang,
    pool_job_hang,
    pool_wait_interrupted,
    interrupted_job,
    exit_join_hang,
    compile_failed,
    pool_outlived_creator,
    autotune_killed,
    spawn_main_reimport,
    compile_after_exit,
    pools_made_at_once,
    idle_pools,
    child_exit_wait,
    pool_device_files,
    setting_overridden,
    setting_too_late,
    nested_pools,
    warm_pool_bypass,
    verdict_pending,
    leftovers,
    oom_killed,
    oom_unnamed,
    pool_died,
    worker_lost,
    jobs_lost,
    jobs_cut_off,
    zombies,
    sidecars_never_served,
    slow_exit_wait,
    ready_wait,
    cpu_quota_pool,
    forked_compile_hang,
    calls_never_returned,
    wakeup_no_pool,
    guard_refused,
    guard_idle,
    tracer_trouble,
    export_failed,
    data_cut,
)


def find_all(view: View) -> list[Finding]:
    """Every finding that applies, in FINDINGS order."""
    return [f for f in (check(view) for check in FINDINGS) if f is not None]
