"""One log file's lines to checked records: the one way every reader takes (logread's LogStream, read_logs,
Tail, count_events). A file is opened only when it is a regular file (never a FIFO, a device or a directory);
read in bounded batches of lines, a line over MAX_LINE_BYTES skipped and counted; each line decoded on the fast
path (fastread.py, msgspec) where it is a writer's line of a hot event, else on the json path (strict JSON, a
torn fragment's record recovered), and every field checked against the schema (check.py).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator
from typing import Any, Callable

from .check import check_record

# The writer caps a record at 32 KiB; a line 32 times that is not one of ours,
# and is skipped rather than held in memory.
MAX_LINE_BYTES = 1 << 20
# How a record from a torn line is found: the writer's records all start so.
RECORD_HEAD = b'{"v":'
# Where the event name starts in a line as the writer writes it: `{"v":1,"event":"call",...`.
_EVENT_AT = len(b'{"v":1,"event":"')

# Strict JSON: NaN/Infinity literals decode as null (then fail their type check).
_DECODER = json.JSONDecoder(parse_constant=lambda _name: None)
# The decoder's own scanner (the C one where it loads; typeshed does not declare the attribute): (value, end).
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


# A checked record: a dict, or on a typed reader's stream (checked_records' typed) a typed record of one of
# fastread.TYPED_FIELDS' events (its fields as attributes, None where the line has none; get and [] as a dict's).
Record = Any

# What _decode returns for a line that is not JSON (None is valid JSON).
_MISSING = object()


def _decode(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
        # A line as the writer writes it (a value from its first character to its end or its newline) is
        # scanned at once: JSONDecoder.decode's two whitespace matches are what it adds to that, and
        # anything else (leading or other trailing whitespace, extra data, no value) takes decode() itself,
        # which decides and raises as it always did.
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:
            return _DECODER.decode(text)
        if end == len(text) or (end == len(text) - 1 and text[end] == "\n"):
            return value
        return _DECODER.decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _MISSING




def open_regular(path: str) -> Any:
    """Open a log for reading; refuse FIFOs, devices and directories before reading (OSError)."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it has no effect on files.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
            raise OSError(f"is {kind}, not a log file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# The fast path (fastread.py, msgspec): line head -> typed decode; loaded at the first line read.
_fast: dict[bytes, Callable[[bytes], dict[str, Any] | None]] | None = None
_failed: tuple[type[BaseException], ...] = ()  # what a fast decode raises for a line it refuses (fastread.FAILED)
# The table a typed reader takes (checked_records(typed=True)): _fast with the typed decodes of fastread.TYPED_FIELDS'
# events in place of their dict decodes, which take a line the typed decode refuses.
_typed: dict[bytes, Callable[[bytes], Any]] = {}


def use_fast(on: bool = True) -> None:
    """Take the fast path where msgspec is installed (the default), or only the json path (off):
    the same records either way (tests/test_fastread.py; bench/report_big.py times both)."""
    global _fast, _failed, _typed
    if not on:
        _fast, _typed = {}, {}
        return
    import signal

    # Signals wait until the decoders are built: msgspec's Decoder() calls back into Python to read the
    # types, and a signal handler that raises there (Ctrl-C's KeyboardInterrupt, run's own) crashes the
    # process with SIGSEGV instead of raising. They arrive, and raise, right after.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        from .fastread import FAILED, decoders, typed_decoders

        _fast, _failed = decoders(), FAILED
        _typed = {**_fast, **typed_decoders()}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def parse_line(raw: bytes, skip: Callable[[str], None], fixed: dict[str, int]) -> dict[str, Any] | None:
    """One checked record from one non-blank line, or None; skip(reason) hears why a line was passed over.

    A torn fragment followed by a whole record (a killed writer's) yields the record.
    """
    if _fast is None:
        use_fast()
    assert _fast is not None
    fast = _fast.get(raw[:raw.find(b'"', _EVENT_AT)])
    # Non-ASCII lines are checked as UTF-8 as a whole (msgspec skips an unknown field unchecked).
    if fast is not None and (raw.isascii() or _utf8(raw)):
        try:
            record = fast(raw)
        except _failed:
            record = None
        if record is not None:
            return record
    return _parse_json(raw, skip, fixed)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _parse_json(raw: bytes, skip: Callable[[str], None], fixed: dict[str, int]) -> dict[str, Any] | None:
    """parse_line on the json path: decode, recover a torn record, check every field."""
    record = _decode(raw)
    if type(record) is not dict:
        cut = raw.rfind(RECORD_HEAD)
        recovered = _decode(raw[cut:]) if cut > 0 else _MISSING
        if type(recovered) is dict:
            skip("torn fragment")
            record = recovered
        elif record is _MISSING:
            skip("not JSON" if raw.endswith(b"\n") else "truncated last line")
            return None
        else:
            skip("not a record")
            return None
    why = check_record(record, fixed)
    if why:
        skip(why)
        return None
    return record  # type: ignore[no-any-return]


def counter(skipped: dict[str, int]) -> Callable[[str], None]:
    """skip(reason) for a reader that counts what it passes over, in skipped."""
    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1
    return skip


def checked_records(batches: Iterable[tuple[list[bytes], bool]], skip: Callable[[str], None],
                    fixed: dict[str, int], typed: bool = False) -> Iterator[Record]:
    """The one way from a log's lines to its checked records, in file order: every reader's (the stream,
    read_logs, the live Tail, count_events). batches are line_batches' (lines without their newlines, ended
    False for an unfinished last line). A writer's line of a hot event is decoded and checked in C
    (fastread.py); any other line, or one the fast path refuses, goes through parse_line's json path
    (torn fragments recovered, every field checked); blank lines (the writer's framing) are passed over.
    typed: the fold's hot events may come as typed records (fastread.typed_decoders), the rest as dicts."""
    if _fast is None:
        use_fast()
    table = _typed if typed else _fast
    fast_for, dict_for, at, failed = table.get, _fast.get, _EVENT_AT, _failed  # type: ignore[union-attr]
    for lines, ended in batches:
        for raw in lines:
            fast = fast_for(raw[:raw.find(b'"', at)])
            tried = fast is not None and raw.isascii()
            record = None
            if tried:
                try:
                    record = fast(raw)  # type: ignore[misc]
                except failed:
                    if typed:  # a typed decode's refusal: the dict decode decides, as for an untyped reader
                        again = dict_for(raw[:raw.find(b'"', at)])
                        if again is not fast and again is not None:
                            try:
                                record = again(raw)
                            except failed:
                                pass
            if record is None:
                if not raw.strip():
                    continue  # the writer separates records by blank lines
                raw = raw + b"\n" if ended else raw
                record = (_parse_json if tried else parse_line)(raw, skip, fixed)
                if record is None:
                    continue
            yield record


# Bytes read at a time by the streaming reader: at most MAX_LINE_BYTES, so that a line
# between two newlines of one read is within the limit (only a batch's first line, which
# continues the previous read, can be longer); small enough that a batch's lines are still
# in the CPU's cache when they are parsed and folded.
READ_BYTES = 1 << 16


def line_batches(f: Any, skipped: dict[str, int]) -> Any:
    """The file's lines, in lists, without their newlines: (lines, ended), ended False only for an
    unfinished last line. Lines over MAX_LINE_BYTES (newline included) are skipped and counted; memory
    stays within two reads."""
    partial = b""
    dropping = False  # inside a line already counted as too long: drop up to its newline
    while True:
        data = f.read(READ_BYTES)
        if not data:
            break
        if dropping:
            nl = data.find(b"\n")
            if nl < 0:
                continue
            data, dropping = data[nl + 1:], False
        lines = (partial + data if partial else data).split(b"\n")
        partial = lines.pop()
        if lines and len(lines[0]) >= MAX_LINE_BYTES:
            skipped["line over 1 MiB"] = skipped.get("line over 1 MiB", 0) + 1
            del lines[0]
        if len(partial) > MAX_LINE_BYTES:
            skipped["line over 1 MiB"] = skipped.get("line over 1 MiB", 0) + 1
            partial, dropping = b"", True
        yield lines, True
    if partial:
        yield [partial], False
