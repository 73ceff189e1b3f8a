"""Reading logs back: tolerant of truncation, garbage and newer writers.

A log is appended to by processes that may be killed at any moment, so the
reader takes every line it can and counts the rest; it never raises on
content.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .sink import SCHEMA_VERSION

KNOWN_EVENTS = frozenset({
    "process_start", "process_exit", "call", "return", "blocked", "import", "config",
    "role", "tree", "leftover", "tracer_error",
})


class LogData(NamedTuple):
    """The usable records of one or more logs, and what was skipped."""

    records: list[dict[str, Any]]
    skipped: dict[str, int]  # reason -> count
    files: list[str]


class NoUsableLog(Exception):
    """Nothing usable: a missing or unreadable file, or no valid record."""


def _valid(record: Any) -> str | None:
    """Why a decoded line is not a record we can use, or None if it is."""
    if not isinstance(record, dict):
        return "not a record"
    v = record.get("v")
    if not isinstance(v, int) or isinstance(v, bool):
        return "not a record"
    if v > SCHEMA_VERSION:
        return f"newer schema (v{v})"
    if not isinstance(record.get("pid"), int) or not isinstance(record.get("ts"), (int, float)):
        return "not a record"
    if not isinstance(record.get("event"), str):
        return "not a record"
    if record["event"] not in KNOWN_EVENTS:
        return "unknown event"
    if not isinstance(record.get("host", ""), str):
        return "not a record"
    return None


def read_logs(paths: list[str]) -> LogData:
    """Read every usable record from the given files, in time order."""
    records: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    problems: list[str] = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                reason = "truncated last line" if i == len(lines) - 1 and not data.endswith(b"\n") else "not JSON"
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            why = _valid(record)
            if why:
                skipped[why] = skipped.get(why, 0) + 1
                continue
            record.setdefault("host", "")
            records.append(record)
    if not records:
        detail = "; ".join(problems) or "no valid wp-autotrace records in " + ", ".join(paths)
        raise NoUsableLog(detail)
    # Processes write independently; order by time, then per-process sequence.
    records.sort(key=lambda r: (r["ts"], r.get("seq", 0) if isinstance(r.get("seq"), int) else 0))
    return LogData(records, skipped, paths)


def skipped_line(skipped: dict[str, int]) -> str:
    """One line summarising what was skipped, or '' if nothing was."""
    if not skipped:
        return ""
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
    return f"skipped {sum(skipped.values())} line(s): {parts}"
