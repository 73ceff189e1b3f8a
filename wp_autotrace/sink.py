"""The shared JSON-lines log: one os.write per record on an O_APPEND fd.

Every process of a run appends to the same file. O_APPEND makes each write
land at the end as a unit, so records from dozens of processes never tear or
interleave, and no lock is needed (nothing to deadlock a forked child). The
pid, ppid and sequence counter are reset in a forked child by
``Sink.reset_after_fork``.
"""

from __future__ import annotations

import itertools
import os
import stat
import sys
import time

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1
# Records are kept well below the size a local filesystem appends atomically
# (70 KB lines were seen intact here); bigger ones are shrunk, never split.
MAX_RECORD_BYTES = 32 * 1024
MAX_STRING = 2048

_warned: set[str] = set()

# Bound once: a user may trace these very functions (WP_AUTOTRACE_TARGETS=os:getpid),
# and the tracer must not call itself through them.
_write = os.write
_getpid = os.getpid
_getppid = os.getppid
_now = time.time


def warn(message: str, key: str | None = None) -> None:
    """Print one ``wp-autotrace: ...`` line on stderr, at most once per key."""
    key = key or message
    if key in _warned:
        return
    _warned.add(key)
    try:
        _write(2, f"wp-autotrace: {message}\n".encode("utf-8", "backslashreplace"))
    except OSError:
        pass


def open_log(path: str) -> int:
    """Open (or create, mode 0600) the log for appending, never via a symlink."""
    # O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader
    # (it has no effect on regular files).
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    try:
        # A FIFO or device at the log path would block or swallow records.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        if fd < 3:
            # stdio was closed: the program's own writes to fd 1/2 must not land in the log.
            import fcntl

            low, fd = fd, fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            os.close(low)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _shrink(value: Any, chars: int, items: int, tail: bool = False) -> Any:
    """Truncate strings to chars and lists/dicts to items, so a record fits the cap.

    Lists keep their head, except stacks, which keep their innermost (last) frames.
    """
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars] + "...[truncated]"
    if isinstance(value, list):
        return [_shrink(v, chars, items) for v in (value[-items:] if tail else value[:items])]
    if isinstance(value, dict):
        return {k: _shrink(v, chars, items, k == "stack") for k, v in list(value.items())[:64]}
    return value


def _make_json_encoder() -> Any:
    """Compact ASCII JSON, as json.dumps(v, separators=(",", ":"), default=repr) gives.

    json's own C encoder, made once: importing the json package (re, enum, ...)
    would cost every traced interpreter milliseconds at start-up, and
    json.dumps with options builds a new encoder on every call.
    """
    try:
        from _json import encode_basestring_ascii, make_encoder

        encoder = make_encoder(None, repr, encode_basestring_ascii, None, ":", ",", False, False, True)
        return lambda value: "".join(encoder(value, 0))
    except (ImportError, TypeError):  # not CPython, or its signature changed
        import json

        return json.JSONEncoder(separators=(",", ":"), default=repr).encode


_encode_json = _make_json_encoder()


def _dumps(value: Any) -> bytes:
    return str(_encode_json(value)).encode() + b"\n"


def encode(record: dict[str, Any]) -> bytes:
    """Encode one record as a single ASCII JSON line within MAX_RECORD_BYTES."""
    line = _dumps(record)
    # Shrink in steps, so small fields (run, root_pid, forked, ...) always survive.
    chars, items = MAX_STRING, 32
    while len(line) > MAX_RECORD_BYTES and chars >= 16:
        line = _dumps(_shrink(record, chars, items))
        chars, items = chars // 4, max(items // 2, 4)
    if len(line) <= MAX_RECORD_BYTES:
        return line
    base = ("v", "event", "ts", "pid", "ppid", "host", "role", "seq")
    keep: dict[str, Any] = {k: record[k] for k in base if k in record}
    keep["truncated"] = len(line)
    return _dumps(keep)


class Sink:
    """Appends records for this process to the run's log."""

    def __init__(self, path: str | None, host: str, role: str) -> None:
        self.path = path
        self.fd = open_log(path) if path else -1
        self.host = host
        self.role = role
        self.pid = _getpid()
        self.ppid = _getppid()
        self.dropped = 0
        self._seq = itertools.count()

    def reset_after_fork(self, role: str) -> None:
        """Give a forked child its own identity; the shared fd stays valid."""
        self.ppid = self.pid
        self.pid = _getpid()
        self.role = role
        self.dropped = 0
        self._seq = itertools.count()

    def emit(self, event: str, **fields: Any) -> None:
        """Write one record; never raises. A failed write drops the record."""
        if self.fd < 0:
            return
        try:
            record = {
                "v": SCHEMA_VERSION,
                "event": event,
                "ts": _now(),
                "pid": self.pid,
                "ppid": self.ppid,
                "host": self.host,
                "role": self.role,
                "seq": next(self._seq),
            }
            record.update(fields)
            line = encode(record)
            written = _write(self.fd, line)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
        except Exception as exc:
            self.dropped += 1
            warn(f"cannot write the log {self.path}: {exc}; records are being dropped", "write")

    def error(self, where: str, exc: BaseException) -> None:
        """Report a tracer fault: once on stderr, and as a tracer_error record.

        Torch sends sidecar output to /dev/null, so the record is the only
        trace of a fault inside a compile sidecar or worker.
        """
        warn(f"{where}: {type(exc).__name__}: {exc}", where)
        self.emit("tracer_error", where=where, error=f"{type(exc).__name__}: {exc}")


def thread_name() -> str:
    """Name of the calling thread (threading is loaded by then: a target module ran)."""
    return str(sys.modules["threading"].current_thread().name)
