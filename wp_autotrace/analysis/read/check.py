"""One decoded record's fields checked in place against schema.FIELD_TYPES (records.py's parse_line calls it).

A field of the wrong type, a huge integer, NaN or Infinity is dropped and counted; an unknown field (a
newer writer's) is dropped; process_start's and exec's argv are masked again (common/redact.py).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from ...common import vocab
from ...common.env import REDACT_ENV
from ...common.redact import DEFAULT_PATTERNS, parse_patterns, redact_arg, redact_argv
from . import schema
from .schema import SCHEMA_VERSION

# Integers are range-checked to what a 64-bit field can hold, numbers to a
# magnitude no timestamp, duration or size reaches: arithmetic on them can
# then never overflow, and nothing but finite numbers reaches the output.
INT_LIMIT = 1 << 63
NUM_LIMIT = 1e15


def redact_cmd(cmd: str, patterns: tuple[str, ...] = DEFAULT_PATTERNS, env_secrets: tuple[str, ...] = ()) -> str:
    """A command line someone already joined with spaces (an old log's tree ``cmd``), masked as well as
    can be: the argument boundaries are lost, so this is for reading old logs only. Writers mask the
    argument list (redact_argv) and join it afterwards."""
    return redact_arg(cmd, patterns, env_secrets)  # the whole string (a header over words), then word by word


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


# A frame's str fields besides file (fastread.py types frames from the same table).
FRAME_STRS = ("func", "dist", "dist_version", "rel", "src")


def clean_frame(v: Any) -> dict[str, Any] | None:
    """A {file, line, func, ...} frame with checked fields, or None: its known fields in the line's order (unknown
    ones and a str field of another type dropped; line None where it is not a uint), line and func where it has none
    last (None, ""). Its order is the line's so that the fast path (fastread.py), which types frames in C and keeps
    the line's order, makes the same frame."""
    if type(v) is not dict or type(v.get("file")) is not str:
        return None
    line = v.get("line")
    if len(v) == 3 and type(line) is int and 0 <= line < INT_LIMIT and type(v.get("func")) is str:
        return v  # the common case, {file, line, func}: already clean, kept as is
    out: dict[str, Any] = {}
    for key, x in v.items():
        if key == "line":
            out[key] = x if _is_uint(x) else None
        elif key == "file" or (key in FRAME_STRS and type(x) is str):
            out[key] = x
    out.setdefault("line", None)
    out.setdefault("func", "")
    return out


# The entries of the watcher's process lists, as their cleaners keep them: `pid` first, then (uint fields, number
# fields, str fields) in this order, each where it has the right type; any other key is dropped. fastread.py
# decodes the same entries to the same dicts in C from this table.
ENTRY_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    schema.PROCS: (("ppid", "rss", "cmd_len", "pgid", "nproc", "uid", "nspid", "pidns", "start_ticks"),
                   ("create_time",),
                   # then `exec` (bool) if one
                   ("name", "cmd", "role", "via", "memcg", "pidcg", "cpucg", "sigign", "state")),
    schema.ENDED: (("status",), ("create_time", "end", "seen"), ()),
    schema.ZOMBIES: (("ppid", "status"), ("create_time", "since"), ()),
    schema.RSS: (("rss",), ("create_time",), ()),
    schema.MEMS: (("pss", "uss", "rss", "swap_pss", "threads"), ("create_time", "cpu_s"), ()),
    schema.DEVS: ((), ("create_time",), ()),  # then `paths`, required: its str items
}


def _clean_entry(v: Any, kind: str) -> Any:
    if type(v) is not dict or not _is_uint(v.get("pid")):
        return None
    uints, nums, strs = ENTRY_FIELDS[kind]
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
ARGV_EVENTS = (vocab.PROCESS_START, vocab.EXEC)  # the records that hold an argv list
_PATTERNS = parse_patterns(os.environ.get(REDACT_ENV, ""))


def _proc(v: Any) -> Any:
    out = _clean_entry(v, schema.PROCS)
    if out is not None and type(v.get("exec")) is bool:
        out["exec"] = v["exec"]
    if out is not None:
        mask_cmd(out)
    return out


def mask_cmd(entry: dict[str, Any]) -> None:
    """A process entry's `cmd` masked in place, where it has one: already joined, the best an old log allows."""
    if "cmd" in entry:
        entry["cmd"] = redact_cmd(entry["cmd"], _PATTERNS)


def _ended(v: Any) -> Any:
    return _clean_entry(v, schema.ENDED)


def _zombie(v: Any) -> Any:
    return _clean_entry(v, schema.ZOMBIES)


def _rss(v: Any) -> Any:
    return _clean_entry(v, schema.RSS)


def _mem(v: Any) -> Any:
    return _clean_entry(v, schema.MEMS)


def _devices(v: Any) -> Any:
    out = _clean_entry(v, schema.DEVS)
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
# schema type -> cleaner: the value to keep, or None to drop the field (fastread.py builds its typed
# decoders' range checks from the same table).
CHECKS: dict[str, Callable[[Any], Any]] = {
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
    schema.ZOMBIES: _list_of(_zombie),
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
            kept = CHECKS[kind](value)
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
