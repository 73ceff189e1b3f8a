"""Swallowed errors in pool-serving processes, recorded as ``error`` events.

torch's compile sidecar catches every exception of its ``main()`` and logs it
(``log.exception("Uncaught exception in compile_worker subprocess")``) to a
stderr that nobody reads, then exits. In pool-serving roles only
(targets.GUARDED_ROLES) this module records those log records, and what
reaches ``sys.excepthook`` / ``threading.excepthook``, as ``error`` records.

What the host prints never changes: on torch's loggers we add a
``logging.Filter`` that always lets the record through, not a handler (a
handler would silence logging's last-resort stderr output), and the
excepthooks call the hooks they replace.
"""

from __future__ import annotations

import sys

from ..common.vocab import GUARDED_ROLES

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

    from .sink import Sink

# torch's loggers in pool-serving processes. Sidecars and the autotune and
# quack workers run their entry module as a script (`python .../__main__.py`,
# `-m ...`), where torch's `logging.getLogger(__name__)` is "__main__".
LOGGERS = (
    "__main__",
    "torch._inductor.compile_worker.__main__",
    "torch._inductor.compile_worker.subproc_pool",
    "torch._inductor.compile_worker.tracked_process_pool",
    "torch._inductor.compile_worker.utils",
    "torch._inductor.compile_worker.watchdog",
    "torch._inductor.__autotune_main__",
    "torch._vendor.quack._compile_worker",
)
# Record only what torch reports as a failure: an error, or anything logged with an exception.
MIN_LEVEL = 40  # logging.ERROR, without importing logging for the number
# Innermost frames kept per error (CONTRACTS item 3).
MAX_FRAMES = 8
# A pool process that fails every job would otherwise flood the log.
MAX_ERRORS = 50

_installed = False
_filter: Any = None
_previous_excepthook: Any = None
_previous_threading_hook: Any = None
_sink: Any = None
_written = 0


def watch_role(sink: Sink) -> None:
    """Install the error capture once, if this process's role serves a pool; never raises."""
    global _installed, _sink
    if _installed or not sink.path or sink.role not in GUARDED_ROLES:
        return
    _installed = True
    _sink = sink
    try:
        register_capture()
    except Exception as exc:
        sink.error("error capture", exc)


def register_capture() -> None:
    """Add the filter to torch's pool loggers and chain both excepthooks."""
    global _filter, _previous_excepthook, _previous_threading_hook
    # Pool processes load logging and threading with torch anyway.
    import logging
    import threading

    class _Recorder(logging.Filter):
        """Records failures logged on the logger; lets every record through."""

        def filter(self, record: logging.LogRecord) -> bool:
            if record.levelno >= MIN_LEVEL or record.exc_info:
                try:
                    # getMessage runs the host's %-formatting: its faults are logging's to report, not ours.
                    message = record.getMessage()
                except Exception:
                    message = str(record.msg)
                exc = record.exc_info[1] if record.exc_info else None
                site = {"file": record.pathname, "line": record.lineno, "func": record.funcName}
                _record("logging", exc, logger=record.name, level=record.levelname, message=message, site=site)
            return True

    _filter = _Recorder()
    for name in LOGGERS:
        logging.getLogger(name).addFilter(_filter)
    _previous_excepthook = sys.excepthook
    sys.excepthook = _excepthook
    _previous_threading_hook = threading.excepthook
    threading.excepthook = _threading_excepthook


def unregister_capture() -> None:
    """Undo register_capture (the hooks only where they are still ours)."""
    global _filter, _previous_excepthook, _previous_threading_hook, _installed
    if _filter is not None:
        import logging

        for name in LOGGERS:
            logging.getLogger(name).removeFilter(_filter)
        _filter = None
    if _previous_excepthook is not None and sys.excepthook is _excepthook:
        sys.excepthook = _previous_excepthook
    _previous_excepthook = None
    if _previous_threading_hook is not None:
        import threading

        if threading.excepthook is _threading_excepthook:
            threading.excepthook = _previous_threading_hook
        _previous_threading_hook = None
    _installed = False


def _excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
    _record("excepthook", exc)
    (_previous_excepthook or sys.__excepthook__)(exc_type, exc, tb)


def _threading_excepthook(args: Any) -> None:
    _record("threading.excepthook", args.exc_value)
    if _previous_threading_hook is not None:
        _previous_threading_hook(args)


def _record(source: str, exc: BaseException | None, logger: str | None = None, level: str = "ERROR",
            message: str = "", site: dict[str, Any] | None = None) -> None:
    """Write one error record; a fault here is reported once and swallowed."""
    global _written
    sink = _sink
    if sink is None or _written >= MAX_ERRORS:
        return
    _written += 1
    try:
        fields = describe(exc)
        if exc is None:
            # An error logged without an exception: where it was logged is all there is.
            fields.update(message=message, frames=[site] if site else [], origin=site)
        elif logger is not None:
            fields["log_message"] = message  # torch's own words, e.g. "Uncaught exception in ..."
        sink.emit("error", source=source, logger=logger, level=level, **fields)
    except Exception as err:
        sink.error("record error", err)


def describe(exc: BaseException | None) -> dict[str, Any]:
    """exc_type, message, the innermost frames (innermost last) and the origin frame."""
    if exc is None:
        return {"exc_type": None, "message": "", "frames": [], "origin": None}
    frames: list[dict[str, Any]] = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append({"file": code.co_filename, "line": tb.tb_lineno, "func": code.co_name})
        if len(frames) > MAX_FRAMES:
            del frames[0]
        tb = tb.tb_next
    return {
        "exc_type": type(exc).__name__,
        "message": str(exc),
        "frames": frames,
        "origin": frames[-1] if frames else None,
    }
