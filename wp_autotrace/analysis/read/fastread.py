"""The reader's fast path: the hot records decoded and type-checked in C by msgspec (optional).

A record whose every field is already what check.check_record would keep comes out of a typed
msgspec decode exactly as json.loads + check_record would leave it: the same keys in the same
order (JSON order, unknown fields dropped), the same values and types. Anything else (a field of
the wrong type or out of range, NaN, a duplicate event, invalid UTF-8, a torn line, an event
with a field that check_record rewrites) fails the typed decode, or is refused here, and the
caller takes the json path, which decides and counts as before. tests/test_fastread.py checks
both paths against each other on every log the tests make and on hostile lines.

Decoders are derived from schema.FIELD_TYPES, so a new event or field needs nothing here. Events
whose checks rewrite what they keep (argv and cmd masking, process lists rebuilt field by field,
free-form dicts cleaned deeply) are left to the json path: they are a few records of any log.

msgspec is loaded only when a log is read (never in a traced process: analysis/ is offline);
without it every line takes the json path (slower, the same result).
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Callable, Literal, Optional, TypedDict, Union

from . import schema
from .check import ARGV_EVENTS, CHECKS, INT_LIMIT, NUM_LIMIT

try:
    import msgspec
except ImportError:  # pragma: no cover - msgspec missing: the json path only
    msgspec = None  # type: ignore[assignment]

# check_record's "not a record" (no pid, ts) and its host default are the json path's to say: a record
# without one of these takes it. Required in the typed decode where typing has it (3.11+: one test in C
# as the record is decoded), else tested after it.
Required: Any = getattr(typing, "Required", None)
_IDENTITY = ("pid", "ts", "host")

# A record's decoder is picked by its first bytes, as the writer writes them: `{"v":1,"event":"`.
# A line that starts otherwise (other spacing, another key order) takes the json path.
_HEAD = b'{"v":%d,"event":"'
_EVENT_AT = len(_HEAD % 1)

# Kinds whose msgspec type accepts exactly what check_record keeps unchanged.
_PLAIN_KINDS = (schema.INT, schema.UINT, schema.NUM, schema.STR, schema.OPT_STR, schema.BOOL, schema.INTS,
                schema.STRS, schema.FRAME, schema.FRAMES)
# Kinds check_record rewrites whenever present (deep-cleaned copies): a record holding one takes the json path.
_REWRITTEN_KINDS = (schema.DICT, schema.ANY)

Decode = Callable[[bytes], Optional[dict[str, Any]]]
# What a fast decode may raise for a line it refuses (besides returning None): the json path decides it.
FAILED: tuple[type[BaseException], ...] = (
    (msgspec.ValidationError, msgspec.DecodeError, RecursionError) if msgspec is not None else ())


def _types() -> dict[str, Any]:
    meta = msgspec.Meta
    uint = Annotated[int, meta(ge=0, le=INT_LIMIT - 1)]
    limit = int(NUM_LIMIT)
    num = Union[Annotated[int, meta(ge=-limit, le=limit)], Annotated[float, meta(ge=-NUM_LIMIT, le=NUM_LIMIT)]]
    # A frame's values: each checked again by clean_frame (which also keeps its key order).
    frame = dict[str, Union[str, uint]]
    return {
        schema.INT: Annotated[int, meta(ge=-INT_LIMIT, le=INT_LIMIT - 1)],
        schema.UINT: uint,
        schema.NUM: num,
        schema.STR: str,
        schema.OPT_STR: Optional[str],
        schema.BOOL: bool,
        schema.INTS: list[uint],
        schema.STRS: list[str],
        schema.FRAME: Optional[frame],
        schema.FRAMES: list[frame],
        schema.DICT: Any,
        schema.ANY: Any,
        # check_record's own rules for the record's identity: v in 1..SCHEMA_VERSION, ts >= 0.
        "v": Annotated[int, meta(ge=1, le=schema.SCHEMA_VERSION)],
        "ts": Union[Annotated[int, meta(ge=0, le=limit)], Annotated[float, meta(ge=0, le=NUM_LIMIT)]],
    }


def _decoder(event: str, fields: dict[str, str], types: dict[str, Any]) -> Decode:
    """The fast decode of one event's records: the record, or None or one of FAILED raised for the json path to
    decide. An event with nothing to test after the decode gets msgspec's decode itself: no Python frame per
    record (most records of a long log are such: a worker's job records)."""
    annotations = {key: types[kind] for key, kind in fields.items()}
    annotations.update(v=types["v"], ts=types["ts"], event=Literal[event])  # type: ignore[valid-type]
    tested = Required is None  # the identity keys tested after the decode
    if not tested:
        annotations.update((key, Required[annotations[key]]) for key in _IDENTITY)
    typed = TypedDict(f"Fast_{event}", annotations, total=False)  # type: ignore[misc]
    decode = msgspec.json.Decoder(typed).decode
    failed = FAILED
    rewritten = tuple(key for key, kind in fields.items() if kind in _REWRITTEN_KINDS)
    # Frames decode as plain dicts (every key kept, as json.loads keeps them): check_record's own
    # cleaner then gives what it gives on the json path (the same dict, or a rebuilt one in its order).
    frames = tuple((key, kind == schema.FRAMES, CHECKS[kind]) for key, kind in fields.items()
                   if kind in (schema.FRAME, schema.FRAMES))
    if not (tested or rewritten or frames):
        return decode  # type: ignore[return-value]

    def fast(raw: bytes) -> dict[str, Any] | None:
        try:
            r: dict[str, Any] = decode(raw)  # type: ignore[assignment]
        except failed:
            return None
        if tested and ("pid" not in r or "ts" not in r or "host" not in r):
            return None
        for key in rewritten:
            if key in r:
                return None
        for key, many, clean in frames:
            v = r.get(key)
            if v is None:
                continue
            # The common frame, {file, line, func} (msgspec has checked that each value is a str or an
            # integer in range), is what clean_frame keeps as it is: checked here, without its calls.
            for f in v if many else (v,):
                if len(f) != 3 or type(f.get("file")) is not str or type(f.get("line")) is not int \
                        or type(f.get("func")) is not str:
                    break
            else:
                continue
            kept = clean(v)
            if kept is not v:
                if kept is None:
                    return None  # dropped and counted: the json path does both
                r[key] = kept
        return r

    return fast


def decoders() -> dict[bytes, Decode]:
    """First bytes of a line (up to the event name) -> its fast decode; empty without msgspec."""
    if msgspec is None:
        return {}
    types = _types()
    out: dict[bytes, Decode] = {}
    for event, fields in schema.FIELD_TYPES.items():
        if event in ARGV_EVENTS or any(kind not in _PLAIN_KINDS + _REWRITTEN_KINDS for kind in fields.values()):
            continue
        fast = _decoder(event, fields, types)
        for version in range(1, min(schema.SCHEMA_VERSION, 9) + 1):  # one digit: _EVENT_AT holds
            out[(_HEAD % version) + event.encode()] = fast
    return out


def take(fast: Decode, raw: bytes) -> dict[str, Any] | None:
    """A fast decode's record, or None where it refuses the line (raised or not)."""
    try:
        return fast(raw)
    except FAILED:
        return None


def head(raw: bytes) -> bytes:
    """The line's first bytes up to its event name's closing quote (what decoders() is keyed by)."""
    return raw[:raw.find(b'"', _EVENT_AT)]
