"""pytest plugin, registered by the tracer in a traced session (no entry point: untraced, pytest never loads
it; target_patches.install_pytest_plugin): while tracing is on, a `test` record as each test begins and ends,
so the report can say which test made a pool and which later tests it outlived (docs/report.md, "How it reads").

Zero cost when tracing is off: this module imports only ``sys`` and defines no hook unless the tracer
already runs in this interpreter (the .pth started it before pytest loaded its plugins). Nothing else of
wp_autotrace is imported here.
"""

from __future__ import annotations

import sys


def _sink() -> object | None:
    """The running tracer's sink in this process, when tracing (not only the guard) is on; else None."""
    boot = sys.modules.get("wp_autotrace.runtime.bootstrap")
    runtime = getattr(boot, "_runtime", None)
    if runtime is None or not getattr(getattr(runtime, "settings", None), "trace", False):
        return None
    return getattr(runtime, "sink", None)


if _sink() is not None:

    def _emit(nodeid: str, phase: str) -> None:
        sink = _sink()  # looked up again: a forked child has its own, and exit clears it
        if sink is not None:
            sink.emit("test", nodeid=nodeid, phase=phase)  # type: ignore[attr-defined]

    def pytest_runtest_logstart(nodeid: str, location: object) -> None:
        _emit(nodeid, "start")

    def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
        _emit(nodeid, "end")
