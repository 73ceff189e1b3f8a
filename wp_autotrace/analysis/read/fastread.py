"""The reader's fast path: the hot records decoded and type-checked in C by msgspec (optional).

A record whose every field is already what check.check_record would keep comes out of a typed
msgspec decode exactly as json.loads + check_record would leave it: the same keys in the same
order (JSON order, unknown fields dropped), the same values and types. Anything else (a field of
the wrong type or out of range, NaN, a duplicate event, invalid UTF-8, a torn line, an event
with a field that check_record rewrites) fails the typed decode, or is refused here, and the
caller takes the json path, which decides and counts as before. tests/test_fastread.py checks
both paths against each other on every log the tests make and on hostile lines.

Decoders are derived from schema.FIELD_TYPES, so a new event or field needs nothing here. The
watcher's process lists decode to Structs of the fields their cleaners keep, in the cleaners' order
(check.ENTRY_FIELDS), then to the same dicts; free-form fields only as shallow as the writer's. Events
whose checks rewrite what they keep (argv masking, process_exit's count times) are left to the json
path: they are a few records of any log.

Typed records (typed_decoders, 3.11+): the fold's hot events (a call, a return, a pool worker's job) decoded to
a Struct of the fields such a record has in nearly every log (TYPED_FIELDS), read as attributes: a third of the
decode and of the fold's reads of a dict. Each field is what the dict record would hold for it, None where the
line has none (dict.get's answer); a line with any other field (a call's rare fields, a return's captured ones,
a field unknown here) fails that decode and is decoded to the dict as before. Only a reader that asks for them
(logread.stream_logs(typed=True), the fold's) gets them.

msgspec is loaded only when a log is read (never in a traced process: analysis/ is offline);
without it every line takes the json path (slower, the same result).
"""

from __future__ import annotations

import sys
import typing
from typing import Annotated, Any, Callable, Literal, Optional, TypedDict, Union

from ...common import vocab
from . import schema
from .check import ARGV_EVENTS, ENTRY_FIELDS, FRAME_STRS, INT_LIMIT, NUM_LIMIT, mask_cmd

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

# Kinds whose msgspec type accepts exactly what check_record keeps unchanged. DICT and ANY, which check_record
# deep-cleans (clean_value: a copy with out-of-range numbers made null), only as shallow as the writer's are (a
# flat object; a list of plain values and flat objects): clean_value copies those as they are, and anything
# deeper, or a number it would make null, fails the typed decode.
_PLAIN_KINDS = (schema.INT, schema.UINT, schema.NUM, schema.STR, schema.OPT_STR, schema.BOOL, schema.INTS,
                schema.STRS, schema.FRAME, schema.FRAMES, schema.DICT, schema.ANY)
# The watcher's process lists (check.ENTRY_FIELDS): each entry decoded to a Struct whose fields are the kept ones
# in the cleaner's order, unset where absent, then to the dict the cleaner makes (msgspec.to_builtins leaves unset
# fields out). An entry the cleaner would change (a field of the wrong type, no pid) fails the typed decode.
_ENTRY_KINDS = tuple(ENTRY_FIELDS)

Decode = Callable[[bytes], Optional[dict[str, Any]]]
# What a fast decode may raise for a line it refuses (besides returning None): the json path decides it.
FAILED: tuple[type[BaseException], ...] = (
    (msgspec.ValidationError, msgspec.DecodeError, RecursionError) if msgspec is not None else ())


def _types() -> dict[str, Any]:
    meta = msgspec.Meta
    uint = Annotated[int, meta(ge=0, le=INT_LIMIT - 1)]
    limit = int(NUM_LIMIT)
    num = Union[Annotated[int, meta(ge=-limit, le=limit)], Annotated[float, meta(ge=-NUM_LIMIT, le=NUM_LIMIT)]]
    # A frame: file, line and func required (where typing has Required: else tested after the decode), its other
    # str fields where it has them, each of its type, unknown keys dropped, in the line's order: what clean_frame
    # makes of it (a frame with a field of another type fails the decode and takes the json path).
    need: Callable[[Any], Any] = (lambda kind: kind) if Required is None else (lambda kind: Required[kind])
    frame_fields = {"file": need(str), "line": need(uint), "func": need(str), **dict.fromkeys(FRAME_STRS[1:], str)}
    frame = TypedDict("Frame", frame_fields, total=False)  # type: ignore[misc]
    # What clean_value keeps as it is: a str, a bool, an integer in 64 bits, a finite float (and null).
    kept = Union[str, bool, Annotated[int, meta(ge=-INT_LIMIT, le=INT_LIMIT - 1)],
                 Annotated[float, meta(ge=-sys.float_info.max, le=sys.float_info.max)]]
    flat = dict[str, Optional[kept]]
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
        schema.DICT: flat,
        schema.ANY: Optional[Union[kept, list[Optional[Union[kept, flat]]], flat]],
        # check_record's own rules for the record's identity: v in 1..SCHEMA_VERSION, ts >= 0.
        "v": Annotated[int, meta(ge=1, le=schema.SCHEMA_VERSION)],
        "ts": Union[Annotated[int, meta(ge=0, le=limit)], Annotated[float, meta(ge=0, le=NUM_LIMIT)]],
        **{kind: list[_entry(kind, uint, num)] for kind in _ENTRY_KINDS},  # type: ignore[misc]
    }


def _entry(kind: str, uint: Any, num: Any) -> Any:
    """The Struct of one entry of a process list of this kind (_ENTRY_KINDS)."""
    unset, absent = msgspec.UnsetType, msgspec.UNSET
    uints, nums, strs = ENTRY_FIELDS[kind]
    fields: list[Any] = [("pid", uint)]
    fields += [(key, Union[uint, unset], absent) for key in uints]
    fields += [(key, Union[num, unset], absent) for key in nums]
    fields += [(key, Union[str, unset], absent) for key in strs]
    if kind == schema.PROCS:
        fields.append(("exec", Union[bool, unset], absent))
    elif kind == schema.DEVS:
        fields.append(("paths", Union[list[str], unset], absent))  # required: an entry without takes the json path
    return msgspec.defstruct("Entry_" + "".join(c for c in kind if c.isalpha()), fields)


def _entries(kind: str) -> Callable[[list[Any]], Optional[list[dict[str, Any]]]]:
    """A decoded process list of this kind to the cleaner's dicts, or None for the json path to decide."""
    to_builtins = msgspec.to_builtins

    def entries(items: list[Any]) -> list[dict[str, Any]] | None:
        out: list[dict[str, Any]] = to_builtins(items)
        if kind == schema.PROCS:
            for entry in out:
                mask_cmd(entry)
        elif kind == schema.DEVS and any("paths" not in entry for entry in out):
            return None
        return out
    return entries


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
    # Frames decode typed, as clean_frame keeps them (_types); without Required, their file, line and func are
    # tested after the decode.
    frames = tuple((key, kind == schema.FRAMES) for key, kind in fields.items()
                   if tested and kind in (schema.FRAME, schema.FRAMES))
    lists = tuple((key, _entries(kind)) for key, kind in fields.items() if kind in _ENTRY_KINDS)
    if not (tested or frames or lists):
        return decode  # type: ignore[return-value]

    def fast(raw: bytes) -> dict[str, Any] | None:
        try:
            r: dict[str, Any] = decode(raw)  # type: ignore[assignment]
        except failed:
            return None
        if tested and ("pid" not in r or "ts" not in r or "host" not in r):
            return None
        for key, many in frames:
            v = r.get(key)
            if v is not None and not all("file" in f and "line" in f and "func" in f for f in (v if many else (v,))):
                return None
        for key, entries in lists:
            items = r.get(key)
            if items is not None:
                made = entries(items)
                if made is None:
                    return None
                r[key] = made
        return r

    return fast


def decoders() -> dict[bytes, Decode]:
    """First bytes of a line (up to the event name) -> its fast decode; empty without msgspec."""
    if msgspec is None:
        return {}
    types = _types()
    out: dict[bytes, Decode] = {}
    for event, fields in schema.FIELD_TYPES.items():
        if event in ARGV_EVENTS or any(kind not in _PLAIN_KINDS + _ENTRY_KINDS
                                       for kind in fields.values()):
            continue
        fast = _decoder(event, fields, types)
        for version in range(1, min(schema.SCHEMA_VERSION, 9) + 1):  # one digit: _EVENT_AT holds
            out[(_HEAD % version) + event.encode()] = fast
    return out


# The events decoded to typed records, and the only fields such a record may have (else it is a dict): what the fold
# reads of them by name alone. Never a call's fields that make its Call rich (fold/calls.py _RARE_FIELDS, read by
# their presence) nor a return's captured fields (fold.py _RETURN_OWN's complement: its items are kept in the
# line's order). `pidns` (a container's writer puts it in every record) is one: the fold sets such a record's host
# to its namespace's (identities.Registry.in_namespace), a typed record's attribute as a dict's item.
# tests/test_typedread.py holds the fold's sets to these.
TYPED_FIELDS: dict[str, tuple[str, ...]] = {
    vocab.CALL: (*vocab.HEADER_KEYS, "truncated", "target", "tag", "call_id", "thread", "stack", "caller",
                 "parent_call"),
    vocab.RETURN: (*vocab.HEADER_KEYS, "call_id", "duration_s", "error"),
    vocab.JOB: tuple(schema.FIELD_TYPES[vocab.JOB]),
}
# A typed record's fields a line must have: check_record's identity (its json path says why one lacks it).
_TYPED_REQUIRED = ("v", "event", "ts", "pid", "host")
# What the fold reads of every record (identities.Registry.writer): None on a typed record whose event has no such
# field, as dict.get has it, read as an attribute all the same.
_READ_OF_EVERY = ("truncated", "target", "signal")


def _get(self: Any, key: str, default: Any = None) -> Any:
    """dict.get for the readers that take a record of either kind: a field the line has not (None) or this
    event has not gives default (a caller written as null, the one nullable typed field, gives default too)."""
    value = getattr(self, key, None)
    return default if value is None else value


def _item(self: Any, key: str) -> Any:
    """record[key] for the readers that take a record of either kind: KeyError where the line has no such field."""
    value = getattr(self, key, None)
    if value is None:
        raise KeyError(key)
    return value


def typed_decoders() -> dict[bytes, Decode]:
    """First bytes of a line -> the typed decode of TYPED_FIELDS' events (a Struct, or one of FAILED raised: then the
    dict decoders() has for the same head decides); empty without msgspec, or before 3.11 (a frame's required
    fields are tested after a dict's decode there: typing has no Required)."""
    if msgspec is None or Required is None:
        return {}
    types = _types()
    out: dict[bytes, Decode] = {}
    for event, keys in TYPED_FIELDS.items():
        kinds = schema.FIELD_TYPES[event]
        fields: list[Any] = [("v", types["v"]), ("event", Literal[event]), ("ts", types["ts"]),  # type: ignore[valid-type]
                             ("pid", types[kinds["pid"]]), ("host", types[kinds["host"]])]
        fields += [(key, types[kinds[key]], None) for key in keys if key not in _TYPED_REQUIRED]
        record = msgspec.defstruct(f"Typed_{event}", fields, gc=False, forbid_unknown_fields=True,
                                   namespace={"get": _get, "__getitem__": _item,
                                              **{key: None for key in _READ_OF_EVERY if key not in keys}})
        decode = msgspec.json.Decoder(record).decode
        for version in range(1, min(schema.SCHEMA_VERSION, 9) + 1):
            out[(_HEAD % version) + event.encode()] = decode  # type: ignore[assignment]
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
