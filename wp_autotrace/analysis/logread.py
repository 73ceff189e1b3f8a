"""Reading logs back: streamed, bounded, and never crashed by what a log holds.

A log is appended to by processes that may be killed at any moment, and may
be cut, hand-edited or crafted. The reader takes every record it can and
counts the rest: each file is streamed line by line (never read whole), a
line over MAX_LINE_BYTES is skipped, every field is type- and range-checked
against schema.FIELD_TYPES (a field of the wrong type, a huge integer, NaN or
Infinity is dropped and counted), and anything but a regular file (a FIFO,
/dev/zero, a directory) is refused before a byte is read.

Secrets are masked again as records are read (process_start's argv, the
tree and leftover entries' cmd; common/redact.py, the default patterns and
WP_AUTOTRACE_REDACT's): a log from a writer that masked less (schema v1 as
written before issue 24) leaks nothing into a report, a chart or a span.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import stat
from collections import deque
from typing import Any, Callable, NamedTuple

from ..common import vocab as V
from ..common.env import REDACT_ENV
from ..common.redact import parse_patterns, redact_argv, redact_cmd
from . import schema
from .schema import SCHEMA_VERSION

KNOWN_EVENTS = schema.KNOWN_EVENTS

# The writer caps a record at 32 KiB; a line 32 times that is not one of ours,
# and is skipped rather than held in memory.
MAX_LINE_BYTES = 1 << 20
# Integers are range-checked to what a 64-bit field can hold, numbers to a
# magnitude no timestamp, duration or size reaches: arithmetic on them can
# then never overflow, and nothing but finite numbers reaches the output.
INT_LIMIT = 1 << 63
NUM_LIMIT = 1e15
# How a record from a torn line is found: the writer's records all start so.
RECORD_START = b'{"v":'

# Strict JSON: NaN/Infinity literals decode as null (then fail their type check).
_DECODER = json.JSONDecoder(parse_constant=lambda _name: None)


class LogData(NamedTuple):
    """The usable records of one or more logs, and what was skipped or unreadable."""

    records: list[dict[str, Any]]
    skipped: dict[str, int]  # reason -> lines
    files: list[str]
    problems: list[str] = []  # "path: why" for each input that could not be read
    fixed: dict[str, int] = {}  # reason -> fields dropped from otherwise good records
    notes: list[str] = []  # inputs read once although given twice, records found in several files

    @property
    def record_count(self) -> int:
        """How many usable records there are."""
        return len(self.records)


class NoUsableLog(Exception):
    """Nothing usable: missing or unreadable files, or no valid record."""


def _is_uint(v: Any) -> bool:
    return type(v) is int and 0 <= v < INT_LIMIT


def _is_num(v: Any) -> bool:
    # NaN fails every comparison and Infinity the range: finite comes with the range check.
    return (type(v) is float or type(v) is int) and -NUM_LIMIT <= v <= NUM_LIMIT


def clean_value(v: Any, depth: int = 0) -> Any:
    """Any JSON value with non-finite or out-of-range numbers made null (for free-form fields)."""
    t = type(v)
    if t is str or t is bool or v is None:
        return v
    if t is int:
        return v if -INT_LIMIT <= v < INT_LIMIT else None
    if t is float:
        return v if math.isfinite(v) else None
    if depth > 32:  # nothing of ours nests this deep
        return None
    if t is list:
        return [clean_value(x, depth + 1) for x in v]
    if t is dict:
        return {k: clean_value(x, depth + 1) for k, x in v.items()}
    return None


_FRAME_STRS = ("func", "dist", "dist_version", "rel", "src")


def clean_frame(v: Any) -> dict[str, Any] | None:
    """A {file, line, func, ...} frame with checked fields, or None."""
    if type(v) is not dict or type(v.get("file")) is not str:
        return None
    line = v.get("line")
    if len(v) == 3 and type(line) is int and 0 <= line < INT_LIMIT and type(v.get("func")) is str:
        return v  # the common case, {file, line, func}: already clean, kept as is
    out: dict[str, Any] = {"file": v["file"], "line": line if _is_uint(line) else None}
    for key in _FRAME_STRS:
        if type(v.get(key)) is str:
            out[key] = v[key]
    out.setdefault("func", "")
    return out


def _clean_entry(v: Any, nums: tuple[str, ...], uints: tuple[str, ...], strs: tuple[str, ...]) -> Any:
    if type(v) is not dict or not _is_uint(v.get("pid")):
        return None
    out = {"pid": v["pid"]}
    for key in uints:
        if _is_uint(v.get(key)):
            out[key] = v[key]
    for key in nums:
        if _is_num(v.get(key)):
            out[key] = v[key]
    for key in strs:
        if type(v.get(key)) is str:
            out[key] = v[key]
    return out


def _list_of(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def clean(v: Any) -> Any:
        if type(v) is not list:
            return None
        for x in v:
            if check(x) is not x:
                break
        else:
            return v  # every item already clean: kept as is
        items = [check(x) for x in v]
        return [x for x in items if x is not None]
    return clean


# Name patterns masked on reading: the defaults plus the reader's WP_AUTOTRACE_REDACT.
ARGV_EVENTS = (V.PROCESS_START, V.EXEC)  # the records that hold an argv list
_PATTERNS = parse_patterns(os.environ.get(REDACT_ENV, ""))


def _proc(v: Any) -> Any:
    out = _clean_entry(v, ("create_time",), ("ppid", "rss", "cmd_len"), ("name", "cmd", "role", "via"))
    if out is not None and "cmd" in out:
        out["cmd"] = redact_cmd(out["cmd"], _PATTERNS)  # already joined: the best an old log allows
    return out


def _ended(v: Any) -> Any:
    return _clean_entry(v, ("create_time", "end"), (), ())


def _rss(v: Any) -> Any:
    return _clean_entry(v, ("create_time",), ("rss",), ())


def _mem(v: Any) -> Any:
    return _clean_entry(v, ("create_time",), ("pss", "uss", "rss", "swap_pss"), ())


def _devices(v: Any) -> Any:
    out = _clean_entry(v, ("create_time",), (), ())
    paths = v.get("paths") if out is not None else None
    if out is None or type(paths) is not list:
        return None
    out["paths"] = [x for x in paths if type(x) is str]
    return out


def _times(v: Any) -> Any:
    """label -> [first, last]: pairs of finite numbers only."""
    if type(v) is not dict:
        return None
    return {k: list(x) for k, x in v.items() if type(k) is str and type(x) is list and len(x) == 2
            and all(_is_num(t) for t in x)}


def _keep_if(ok: Callable[[Any], bool]) -> Callable[[Any], Any]:
    return lambda v: v if ok(v) else None


_MISSING = object()
WRONG_FIELD = "field of the wrong type or out of range"
# schema type -> cleaner: the value to keep, or None to drop the field.
_CHECKS: dict[str, Callable[[Any], Any]] = {
    schema.INT: _keep_if(lambda v: type(v) is int and -INT_LIMIT <= v < INT_LIMIT),
    schema.UINT: _keep_if(_is_uint),
    schema.NUM: _keep_if(_is_num),
    schema.STR: _keep_if(lambda v: type(v) is str),
    schema.OPT_STR: lambda v: v if type(v) is str else _MISSING if v is None else None,
    schema.BOOL: _keep_if(lambda v: type(v) is bool),
    schema.DICT: lambda v: clean_value(v) if type(v) is dict else None,
    schema.ANY: lambda v: _MISSING if v is None else clean_value(v),
    schema.INTS: _list_of(_keep_if(_is_uint)),
    schema.STRS: _list_of(_keep_if(lambda v: type(v) is str)),
    schema.FRAME: lambda v: _MISSING if v is None else clean_frame(v),
    schema.FRAMES: _list_of(clean_frame),
    schema.PROCS: _list_of(_proc),
    schema.ENDED: _list_of(_ended),
    schema.RSS: _list_of(_rss),
    schema.MEMS: _list_of(_mem),
    schema.DEVS: _list_of(_devices),
    schema.TIMES: _times,
}


def check_record(record: Any, fixed: dict[str, int]) -> str | None:
    """Why a decoded line is not a usable record, or None once its fields are checked in place.

    Fields of the wrong type are dropped (counted in fixed); unknown fields
    (a newer writer's) are dropped too: nothing reads them.
    """
    if type(record) is not dict:
        return "not a record"
    v = record.get("v")
    if type(v) is not int or not 1 <= v < INT_LIMIT:
        return "not a record"
    if v > SCHEMA_VERSION:
        return f"newer schema (v{v})"
    event = record.get("event")
    if type(event) is not str:
        return "not a record"
    types = schema.FIELD_TYPES.get(event)
    if types is None:
        return "unknown event"
    if not _is_uint(record.get("pid")) or not _is_num(record.get("ts")) or record["ts"] < 0:
        return "not a record"
    bad = 0
    for key, value in list(record.items()):
        kind = types.get(key)
        # The common kinds inline (this loop runs for every field of every record).
        if kind is schema.STR:
            if type(value) is str:
                continue
        elif kind is schema.UINT:
            if type(value) is int and 0 <= value < INT_LIMIT:
                continue
        elif kind is schema.NUM:
            if (type(value) is float or type(value) is int) and -NUM_LIMIT <= value <= NUM_LIMIT:
                continue
        elif kind is None:
            del record[key]  # a newer writer's field: nothing reads it
            continue
        else:
            kept = _CHECKS[kind](value)
            if kept is _MISSING:
                record[key] = None
                continue
            if kept is not None:
                if kept is not value:
                    record[key] = kept
                continue
        del record[key]
        bad += 1
    if bad:
        fixed[WRONG_FIELD] = fixed.get(WRONG_FIELD, 0) + bad
    if event in ARGV_EVENTS and "argv" in record:
        record["argv"] = redact_argv(record["argv"], _PATTERNS)
    if type(record.get("host")) is not str:
        record["host"] = ""
    return None


def _decode(raw: bytes) -> Any:
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _MISSING


def _lines(f: Any, skipped: dict[str, int]) -> Any:
    """The file's lines, each at most MAX_LINE_BYTES; longer ones are skipped and counted."""
    while True:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES:
            while line and not line.endswith(b"\n"):  # drop the rest of the line, bounded reads
                line = f.readline(MAX_LINE_BYTES)
            skipped["line over 1 MiB"] = skipped.get("line over 1 MiB", 0) + 1
            continue
        yield line


def _open_regular(path: str) -> Any:
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


def parse_line(raw: bytes, skip: Callable[[str], None], fixed: dict[str, int]) -> dict[str, Any] | None:
    """One checked record from one non-blank line, or None; skip(reason) hears why a line was passed over.

    A torn fragment followed by a whole record (a killed writer's) yields the record.
    """
    record = _decode(raw)
    if type(record) is not dict:
        cut = raw.rfind(RECORD_START)
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


def _read_file(f: Any, records: list[dict[str, Any]], skipped: dict[str, int], fixed: dict[str, int]) -> None:
    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for raw in _lines(f, skipped):
        if not raw.strip():
            continue  # the writer separates records by blank lines
        record = parse_line(raw, skip, fixed)
        if record is not None:
            records.append(record)


def read_logs(paths: list[str]) -> LogData:
    """Read every usable record from the given files, in time order.

    Raises NoUsableLog when nothing usable is found; an unreadable file among
    others is named in LogData.problems.
    """
    records: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    fixed: dict[str, int] = {}
    problems: list[str] = []
    notes: list[str] = []
    for path in distinct_files(paths, notes):
        try:
            with _open_regular(path) as f:
                _read_file(f, records, skipped, fixed)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
    if not records:
        detail = "; ".join(problems) or "no valid wp-autotrace records in " + ", ".join(paths)
        raise NoUsableLog(detail)
    # Processes write independently; order by time, then per-process sequence.
    records.sort(key=_order)
    if len(paths) > 1:
        once = Once()
        records = [r for r in records if once.first(r)]
        notes.extend(once.notes())
    return LogData(records, skipped, list(paths), problems, fixed, notes)


# -- the same record in several inputs ---------------------------------------------------------

def distinct_files(paths: list[str], notes: list[str]) -> list[str]:
    """The paths with a file named twice (the same st_dev/st_ino: a repeated argument, a hard or
    symbolic link) kept once; notes hears which were dropped. A path that cannot be stat'ed is kept
    (opening it names the problem)."""
    seen: dict[tuple[int, int], str] = {}
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(path)
            continue
        first = seen.get((st.st_dev, st.st_ino))
        if first is None:
            seen[(st.st_dev, st.st_ino)] = path
            out.append(path)
        else:
            notes.append(f"{path}: the same file as {first}, read once")
    return out


# How many recent record identities are remembered to find a record that another input (a copy
# of a log, a backup beside it) holds too. A record and its copy have the same (ts, seq) and so
# come out of a time-ordered merge next to each other; only a record late by over the reorder
# window can come out further apart, and the streaming reader holds at most REORDER_MAX per file.
# Memory stays bounded whatever the number of records: ONCE_RECENT_PER_HELD held records' worth.
ONCE_RECENT_PER_HELD = 4


class Once:
    """Passes each record once: a record is identified by (host, pid, seq, ts, event), which no two
    records of different processes share (a writer's seq is per process, and ts, to the
    microsecond, tells a reused pid's process apart, also in another pid namespace)."""

    def __init__(self, recent: int | None = None) -> None:
        self.seen: set[tuple[Any, ...]] = set()
        self.order: deque[tuple[Any, ...]] = deque()
        self.recent = ONCE_RECENT_PER_HELD * REORDER_MAX if recent is None else recent
        self.repeated = 0

    def first(self, record: dict[str, Any]) -> bool:
        """Whether this record has not been passed before (then it is remembered)."""
        key = (record["host"], record["pid"], record.get("seq"), record["ts"], record["event"])
        if key in self.seen:
            self.repeated += 1
            return False
        self.seen.add(key)
        self.order.append(key)
        if len(self.order) > self.recent:
            self.seen.discard(self.order.popleft())
        return True

    def notes(self) -> list[str]:
        """What a report says about repeated records (none: nothing)."""
        if not self.repeated:
            return []
        return [f"{self.repeated} record(s) found in more than one input (a copy of a log?) read once"]


def _order(r: dict[str, Any]) -> tuple[float, int]:
    return (r["ts"], r.get("seq", 0))


# -- streaming --------------------------------------------------------------------------

# Within one file, records of different writers interleave in the order their os.write
# calls landed, which can differ from time order by the moment between a writer taking
# its timestamp and writing (each writer's own records are in order). A record is held
# back until the file has shown one this much later (or the buffer is full), then
# released in (ts, seq) order: a log read this way comes out exactly as sorted, unless a
# writer stalled longer than this between the two (then its record comes that late; the
# count is LogStream.late).
REORDER_WINDOW_S = 5.0
# Records held back per file at most: memory bounded whatever the rate of writing.
REORDER_MAX = 10_000


class LogStream:
    """The usable records of one or more logs, read in one streaming pass, in time order.

    Iterating (``records`` or the object itself) reads the files again from the start;
    skipped, fixed, problems, record_count and late are those of the latest complete pass. No
    list of all records is ever made: memory is bounded by REORDER_MAX records per file.
    A pass that finds no usable record raises NoUsableLog at its end.
    """

    def __init__(self, paths: list[str]) -> None:
        self.files = list(paths)
        self.skipped: dict[str, int] = {}
        self.fixed: dict[str, int] = {}
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.record_count = 0
        self.late = 0  # records released after a later one (out of order by over REORDER_WINDOW_S)

    @property
    def records(self) -> Any:
        return iter(self)

    def __iter__(self) -> Any:
        self.skipped, self.fixed, self.problems, self.record_count, self.late = {}, {}, [], 0, 0
        notes: list[str] = []
        self.notes = notes
        streams = [self._file(path) for path in distinct_files(self.files, notes)]
        once = Once() if len(streams) > 1 else None
        last = -math.inf
        count = late = 0
        try:
            for record in streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_order):
                if once is not None and not once.first(record):
                    continue
                ts = record["ts"]
                if ts < last:
                    late += 1
                else:
                    last = ts
                count += 1
                yield record
        finally:
            self.record_count, self.late = count, late
            if once is not None:
                notes.extend(once.notes())
        if not count:
            detail = "; ".join(self.problems) or "no valid wp-autotrace records in " + ", ".join(self.files)
            raise NoUsableLog(detail)

    def _file(self, path: str) -> Any:
        """One file's records in (ts, seq) order, through the reorder buffer."""
        skipped, fixed = self.skipped, self.fixed

        def skip(reason: str) -> None:
            skipped[reason] = skipped.get(reason, 0) + 1

        try:
            f = _open_regular(path)
        except OSError as exc:
            self.problems.append(f"{path}: {exc.strerror or exc}")
            return
        # Held records in (ts, seq) order: appended while the file is in order (the common
        # case), inserted in place otherwise; released from the front.
        held: deque[tuple[float, int, dict[str, Any]]] = deque()
        newest = -math.inf  # the latest ts held (the tail's)
        window, most = REORDER_WINDOW_S, max(REORDER_MAX, 1)
        try:
            with f:
                for raw in _lines(f, skipped):
                    if not raw.strip():
                        continue
                    record = parse_line(raw, skip, fixed)
                    if record is None:
                        continue
                    ts = record["ts"]
                    item = (ts, record.get("seq", 0), record)
                    if not held or ts > newest or item[:2] >= held[-1][:2]:
                        held.append(item)
                        newest = ts
                    else:
                        _insert(held, item)
                    horizon = newest - window
                    while held[0][0] < horizon or len(held) > most:
                        yield held.popleft()[2]
        except OSError as exc:
            self.problems.append(f"{path}: {exc.strerror or exc}")
        while held:
            yield held.popleft()[2]


def _insert(held: deque[tuple[float, int, dict[str, Any]]], item: tuple[float, int, dict[str, Any]]) -> None:
    """Put an out-of-order record in place: after every held one with a key not above its own."""
    key = item[:2]
    i = len(held)
    while i and held[i - 1][:2] > key:  # a late record is late by a few places: walk back
        i -= 1
    held.insert(i, item)


def stream_logs(paths: list[str]) -> LogStream:
    """The records of the given files as a LogStream (see there); nothing is read until it is iterated."""
    return LogStream(paths)


def skipped_line(skipped: dict[str, int]) -> str:
    """One line summarising what was skipped, or '' if nothing was."""
    if not skipped:
        return ""
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
    return f"skipped {sum(skipped.values())} line(s): {parts}"


# A live reader takes at most this much per read, so one read of a huge log never freezes it; it
# says it is `behind` until it has caught up, and a caller decides nothing final until then.
TAIL_READ_BYTES = 8 * 2**20


class Tail:
    """New complete records of a growing log, from where the last read stopped (a partial last line
    waits for its end). The file stays open: a log renamed while read is still read to its end, and
    `moved()` says that its path no longer names it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = _open_regular(path)
        self.offset = 0
        self.partial = b""
        self.behind = True  # not yet read to the end
        self.fixed: dict[str, int] = {}

    def read(self, limit: int = TAIL_READ_BYTES) -> list[dict[str, Any]]:
        """The records completed since the last read (blank lines and torn fragments skipped)."""
        size = os.fstat(self.file.fileno()).st_size
        if size < self.offset:  # truncated: start over
            self.offset, self.partial = 0, b""
        self.file.seek(self.offset)
        data = self.file.read(min(limit, max(size - self.offset, 0)))
        self.offset += len(data)
        self.behind = self.offset < size
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()  # b"" after a newline; else a line still being written
        if len(self.partial) > MAX_LINE_BYTES:
            self.partial = b""  # not one of ours: skipped, as the whole-file reader does
        found = (parse_line(line, _ignore, self.fixed) for line in lines if line.strip())
        return [r for r in found if r is not None]

    def moved(self) -> bool:
        """Whether the path no longer names the file being read (moved, removed or replaced)."""
        try:
            st, mine = os.stat(self.path), os.fstat(self.file.fileno())
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino)

    def close(self) -> None:
        self.file.close()


def _ignore(reason: str) -> None:
    """A live reader does not count what it passes over (report does)."""
