"""Swallowed errors in pool-serving processes, recorded as ``error`` events.

torch's compile sidecar catches every exception of its ``main()`` and logs it
(``log.exception("Uncaught exception in compile_worker subprocess")``) to a
stderr that nobody reads, then exits. In pool-serving roles only
(targets.GUARDED_ROLES) this module records those log records, and what
reaches ``sys.excepthook`` / ``threading.excepthook``, as ``error`` records.

What the host prints never changes: the hooks (target_patches.install_error_capture)
are a ``logging.Filter`` on torch's loggers that always lets the record
through, and excepthooks that call the hooks they replace. This module
decides what is recorded.
"""

from __future__ import annotations

from ..common.core import ERROR, GUARDED_ROLES
from .target_patches import install_error_capture

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
# Innermost frames kept per error (docs/contracts.md, "Error frames").
MAX_FRAMES = 8
# A pool process that fails every job would otherwise flood the log.
MAX_ERRORS = 50

_installed = False
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
        install_error_capture(LOGGERS, _on_log, _record)
    except Exception as exc:
        sink.error("error capture", exc)


def _on_log(record: Any) -> None:
    """A record on one of torch's pool loggers: write it if it reports a failure."""
    if record.levelno >= MIN_LEVEL or record.exc_info:
        try:
            # getMessage runs the host's %-formatting: its faults are logging's to report, not ours.
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        exc = record.exc_info[1] if record.exc_info else None
        site = {"file": record.pathname, "line": record.lineno, "func": record.funcName}
        _record("logging", exc, logger=record.name, level=record.levelname, message=message, site=site)


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
        sink.emit(ERROR, source=source, logger=logger, level=level, **fields)
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
