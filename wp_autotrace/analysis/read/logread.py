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
written by older releases) leaks nothing into a report, a chart or a span.

The lines of one file become checked records in records.py; this module reads the inputs: which files, in
what order, each record once, streamed or live.
"""

from __future__ import annotations

import heapq
import math
import os
from collections import deque
from typing import Any, NamedTuple

from . import schema
from .records import MAX_LINE_BYTES, checked_records, counter, line_batches, open_regular
from .records import use_fast as use_fast  # the fast path's switch, where its callers (tools, bench) find it

KNOWN_EVENTS = schema.KNOWN_EVENTS


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
            with open_regular(path) as f:
                records.extend(checked_records(line_batches(f, skipped), counter(skipped), fixed))
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
    A pass that finds no usable record raises NoUsableLog at its end. typed: the fold's hot events may come as
    typed records (fastread.TYPED_FIELDS: read as attributes; get and [] as a dict's), the rest as dicts.
    """

    def __init__(self, paths: list[str], typed: bool = False) -> None:
        self.files = list(paths)
        self.typed = typed
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
        paths = distinct_files(self.files, notes)
        if len(paths) == 1:
            # one file (nearly every report): its reorder buffer releases the pass's records itself, counted and
            # checked for order as they leave it, with no generator between it and the reader
            return self._file(paths[0], whole=True)
        return self._merged(paths, notes)

    def _merged(self, paths: list[str], notes: list[str]) -> Any:
        """The records of several files (each through its reorder buffer), merged in (ts, seq) order, each once."""
        once = Once()
        typed = self.typed
        records = heapq.merge(*[self._file(path) for path in paths], key=_order)
        last = -math.inf
        count = late = 0
        try:
            for record in records:
                if not once.first(record):
                    continue
                ts = record["ts"] if type(record) is dict or not typed else record.ts
                if ts < last:
                    late += 1
                else:
                    last = ts
                count += 1
                yield record
        finally:
            self.record_count, self.late = count, late
            notes.extend(once.notes())
        self._end_pass(count)

    def _end_pass(self, count: int) -> None:
        """A pass that found no usable record says why (NoUsableLog)."""
        if not count:
            detail = "; ".join(self.problems) or "no valid wp-autotrace records in " + ", ".join(self.files)
            raise NoUsableLog(detail)

    def _file(self, path: str, whole: bool = False) -> Any:
        """One file's records in (ts, seq) order, through the reorder buffer. whole: the pass's only file, whose
        releases are the pass's (record_count and late set as they leave, NoUsableLog at the end)."""
        skipped, fixed, typed = self.skipped, self.fixed, self.typed
        try:
            f = open_regular(path)
        except OSError as exc:
            self.problems.append(f"{path}: {exc.strerror or exc}")
            if whole:
                self._end_pass(0)
            return
        # Held records by (ts, seq, arrival): the least comes out first, ties in the order the file has
        # them. Those that arrive in order (nearly all) are appended to `run`, O(1); the rest go to a heap,
        # O(log held) a record, also after the wall clock steps back (NTP, a resumed VM): every record
        # after the step is then the least, which a sorted list pays for with a walk past every held one
        # (a 14 MB log took 61 s instead of 1 s). The least of the two fronts is the least held.
        run: deque[tuple[float, int, int, dict[str, Any]]] = deque()
        held: list[tuple[float, int, int, dict[str, Any]]] = []
        run_ts, run_seq = -math.inf, 0  # the key of run's last record
        newest = -math.inf  # the latest ts seen (never released before the window closes on it)
        window, most = REORDER_WINDOW_S, max(REORDER_MAX, 1)
        arrival = 0
        # The latest ts released, and how many records were released after a later one: the pass's own
        # (whole) or unused (the merge of several files counts its own order).
        last, late = -math.inf, 0
        push, take = heapq.heappush, run.popleft
        try:
            try:
                with f:
                    for record in checked_records(line_batches(f, skipped), counter(skipped), fixed, typed):
                        if type(record) is dict or not typed:  # (an untyped stream's records are all mappings)
                            ts = record["ts"]
                            seq = record.get("seq", 0)
                        else:  # a typed record: its seq None where the line has none
                            ts = record.ts
                            seq = record.seq or 0
                        arrival += 1
                        if ts > run_ts or (ts == run_ts and seq >= run_seq) or not run:
                            run.append((ts, seq, arrival, record))
                            run_ts, run_seq = ts, seq
                        else:
                            push(held, (ts, seq, arrival, record))
                        if ts > newest:
                            newest = ts
                        horizon = newest - window
                        if not held:
                            # the count first: a log written faster than the window releases one this way a record
                            while len(run) > most or run[0][0] < horizon:
                                out = take()
                                if out[0] < last:
                                    late += 1
                                else:
                                    last = out[0]
                                yield out[3]
                        elif held[0][0] < horizon or run[0][0] < horizon or len(run) + len(held) > most:
                            # nearly every record of a log with a few late ones comes while one is held: the
                            # release is entered only when something is due
                            for out in _release(run, held, horizon, most):
                                if out[0] < last:
                                    late += 1
                                else:
                                    last = out[0]
                                yield out[3]
            except OSError as exc:
                self.problems.append(f"{path}: {exc.strerror or exc}")
            for out in _release(run, held, math.inf, 0):
                if out[0] < last:
                    late += 1
                else:
                    last = out[0]
                yield out[3]
        finally:
            if whole:  # what was released (all, or what a reader that stopped early took)
                self.record_count, self.late = arrival - len(run) - len(held), late
        if whole:
            self._end_pass(arrival)


def _release(run: deque[tuple[float, int, int, dict[str, Any]]], held: list[tuple[float, int, int, dict[str, Any]]],
             horizon: float, most: int) -> Any:
    """Pass on, least first, the held records older than horizon, and any over `most` held: (ts, seq, arrival,
    record) each."""
    while run or held:
        from_heap = bool(held) and (not run or held[0] < run[0])
        first = held[0] if from_heap else run[0]
        if not (first[0] < horizon or len(run) + len(held) > most):
            return
        yield heapq.heappop(held) if from_heap else run.popleft()




def stream_logs(paths: list[str], typed: bool = False) -> LogStream:
    """The records of the given files as a LogStream (see there); nothing is read until it is iterated."""
    return LogStream(paths, typed)


# A live reader takes at most this much per read, so one read of a huge log never freezes it; it
# says it is `behind` until it has caught up, and a caller decides nothing final until then.
TAIL_READ_BYTES = 8 * 2**20


class Tail:
    """New complete records of a growing log, from where the last read stopped (a partial last line
    waits for its end). The file stays open: a log renamed while read is still read to its end, and
    `moved()` says that its path no longer names it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = open_regular(path)
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
        return list(checked_records([(lines, True)], _ignore, self.fixed))

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


def count_events(path: str, event: str | None = None, role: str | None = None) -> int:
    """How many valid records of one log have this event and this role (None: any); 0 if it cannot be read.

    For `run` and `doctor`, which need one fact, not a model. Each candidate line goes through parse_line,
    so they see what the report sees (schema checks, torn fragments recovered, one spelling whatever the
    JSON spacing); a byte prefilter on the quoted value keeps the scan cheap on a long log: the writer
    never escapes these plain ASCII values, and a line that escapes them is not one of ours to count.
    """
    wanted = [b'"' + value.encode() + b'"' for value in (event, role) if value is not None]
    fixed: dict[str, int] = {}
    skipped: dict[str, int] = {}
    try:
        with open_regular(path) as f:
            batches = (([line for line in lines if all(w in line for w in wanted)], ended)
                       for lines, ended in line_batches(f, skipped))
            return sum(1 for record in checked_records(batches, _ignore, fixed)
                       if (event is None or record.get("event") == event)
                       and (role is None or record.get("role") == role))
    except OSError:
        return 0
