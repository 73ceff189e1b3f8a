"""A pytest plugin: the suite as it runs after a wall-clock step. `pytest -p tests.stepped_clock tests/...`

A step (NTP's makestep, a VM resumed, `date -s`) after this pytest process read its boot time leaves the project's
per-process boot time (env.boot_time) STEP_S behind the one every program started later computes. This plugin
puts the pytest process there at its start, without touching the machine's clock (no one else's programs move):
each program a test starts reads the kernel's clock as it is, as after a real step. WP_AUTOTRACE_TEST_STEP_S
sets the step (20 s by default: the step one CI run met, which failed 21 tests).

psutil 5.x (pyproject allows it) keeps the boot time it first read, as the project did: its create times in this
process are then the step off too. psutil 7 reads it anew each time, so the plugin pins it where 5.x would have it:
a test whose own clock leans on psutil's create times fails here whichever psutil is installed.
"""

from __future__ import annotations

import os

import pytest

STEP_ENV = "WP_AUTOTRACE_TEST_STEP_S"


def _step_s() -> float:
    return float(os.environ.get(STEP_ENV, "20"))


def pytest_configure(config: pytest.Config) -> None:
    from wp_autotrace.common import env

    env._boot_time = env.boot_time() - _step_s()
    _pin_psutil_boot_time(_step_s())


def _pin_psutil_boot_time(step: float) -> None:
    """psutil's boot time (create_time adds it to a process's start ticks) where 5.x keeps it after the step: its
    module's boot_time() and, under 5.x, the BOOT_TIME it caches. Linux only (elsewhere psutil reads no boot time
    for a create time)."""
    try:
        from psutil import _pslinux
    except ImportError:
        return
    stale = _pslinux.boot_time() - step
    _pslinux.boot_time = lambda: stale
    if hasattr(_pslinux, "BOOT_TIME"):
        _pslinux.BOOT_TIME = stale


def pytest_report_header(config: pytest.Config) -> str:
    """Said at the top of the run, so a run that meant to step and did not is seen."""
    return (f"stepped clock: this process's boot time set {_step_s():g} s behind the kernel's clock at its start "
            "(the project's and psutil's)")
