"""A record as one JSON line within the log's size cap: json's C encoder, and an oversized record shrunk.

Not on a traced start-up's path: the sink writes its own records with its exact pure-Python encoder
(sink._encode_json); this module is loaded by the recorder (whose records are many: the C encoder),
for a value of another type, and for a record over MAX_RECORD_BYTES or with a field named as a
header's. The bytes are those json.dumps(record, separators=(",", ":"), default=repr) gives.
"""

from ..common.core import HEADER_KEYS, MAX_RECORD_BYTES, RECORD_START

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

MAX_STRING = 2048  # a string's length in a shrunk record, at first


def _shrink(value: "Any", chars: int, items: int, tail: bool = False) -> "Any":
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


def _make_json_encoder() -> "Any":
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


_c_encoders: "list[Any]" = []  # json's C encoder, once made (_make_json_encoder)


def c_encoder() -> "Any":
    """json's C encoder (_make_json_encoder), made on first use: the recorder binds it; a traced process
    that records no call never loads _json (a shared library: a tenth of a millisecond)."""
    if not _c_encoders:
        _c_encoders.append(_make_json_encoder())
    return _c_encoders[0]


def _dumps(value: "Any") -> bytes:
    return str(c_encoder()(value)).encode() + b"\n"


def frame(line: bytes) -> bytes:
    """The bytes written for one encoded record: RECORD_START, then the line."""
    return RECORD_START + line


def encode(record: "dict[str, Any]") -> bytes:
    """Encode one record as a single ASCII JSON line within MAX_RECORD_BYTES."""
    line = _dumps(record)
    # Shrink in steps, so small fields (run, root_pid, forked, ...) always survive.
    chars, items = MAX_STRING, 32
    while len(line) > MAX_RECORD_BYTES and chars >= 16:
        line = _dumps(_shrink(record, chars, items))
        chars, items = chars // 4, max(items // 2, 4)
    if len(line) <= MAX_RECORD_BYTES:
        return line
    base = HEADER_KEYS
    keep: dict[str, Any] = {k: record[k] for k in base if k in record}
    keep["truncated"] = len(line)
    return _dumps(keep)
