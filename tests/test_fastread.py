"""The reader's fast path (analysis/read/fastread.py, msgspec) against its json path: the same records, byte for byte.

Every line is read both ways: the records (keys, their order, values and types, compared through
json.dumps), the skipped lines by reason, the dropped fields and the late count must be equal, and
so must the report's text and JSON. The fast path must really be taken for the writer's hot lines
(else these tests would compare the json path with itself).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wp_autotrace.analysis.read import fastread, logread, records, schema
from wp_autotrace.analysis.read.logread import MAX_LINE_BYTES, stream_logs
from wp_autotrace.cli.main import main

from . import test_report_text as shapes
from .logs import LogWriter, seed_log

pytest.importorskip("msgspec")

FAST_EVENTS = sorted({head.rsplit(b'"', 1)[1].decode() for head in fastread.decoders()})


@pytest.fixture(autouse=True)
def _fast_again() -> Iterator[None]:
    yield
    logread.use_fast()


def compact(w: LogWriter) -> str:
    """The log as the runtime writes it (compact JSON: the fast path's shape)."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in w.lines)


def read_both(path: Path) -> list[tuple[Any, ...]]:
    out = []
    for fast in (True, False):
        logread.use_fast(fast)
        stream = stream_logs([str(path)])
        try:
            records = [json.dumps(r) for r in stream]
        except logread.NoUsableLog:
            records = ["no usable log"]
        out.append((records, stream.skipped, stream.fixed, stream.late, stream.record_count))
    return out


def lines_both(raw: bytes) -> list[tuple[Any, ...]]:
    """parse_line with the fast path, and the json path alone, on one line."""
    out = []
    for parse in (records.parse_line, records._parse_json):
        logread.use_fast()
        skipped: dict[str, int] = {}
        fixed: dict[str, int] = {}
        record = parse(raw, lambda why, skipped=skipped: skipped.__setitem__(why, skipped.get(why, 0) + 1), fixed)
        out.append((json.dumps(record), skipped, fixed))
    return out


def fast_taken(text: str) -> int:
    """How many lines the typed decoders themselves accept."""
    table = fastread.decoders()
    taken = 0
    for line in text.encode().splitlines():
        fast = table.get(fastread.head(line))
        taken += fast is not None and fastread.take(fast, line) is not None
    return taken


def _scalar(x: Any) -> bool:
    return x is None or type(x) in (str, bool, int, float)


def _flat(x: Any) -> bool:
    return type(x) is dict and all(_scalar(y) for y in x.values())


def _shallow(kind: str | None, x: Any) -> bool:
    """Whether a free-form field is as shallow as the fast path takes (a flat object; a list of plain values and
    flat objects), deeper ones going to the json path."""
    if kind == schema.DICT:
        return _flat(x)
    if kind == schema.ANY:
        return _scalar(x) or _flat(x) or type(x) is list and all(_scalar(y) or _flat(y) for y in x)
    return True


def plain(r: dict[str, Any]) -> bool:
    """Whether a record is one the fast path takes: a fast event whose free-form fields are shallow."""
    types = schema.FIELD_TYPES.get(r["event"], {})
    return r["event"] in FAST_EVENTS and all(_shallow(types.get(k), x) for k, x in r.items())


LOGS = {
    "seed": seed_log,
    "labelled": shapes.labelled_run,
    "example_shape": shapes.example_shape,
    "unreturned": shapes.with_unreturned,
    "plugin_frame": lambda: shapes.nested_with_frame(
        {"file": "/site/torch_npu/_inductor/__init__.py", "line": 18, "func": "<module>", "dist": "torch_npu",
         "dist_version": "2.8.0.post5", "rel": "torch_npu/_inductor/__init__.py"}),
}


@pytest.mark.parametrize("name", sorted(LOGS))
def test_logs_read_alike_and_report_alike(name: str, tmp_path: Path) -> None:
    """The test suite's logs, compact and spaced: the same records, skips, fixes; the same report text and JSON."""
    w = LOGS[name]()
    text = compact(w)
    assert fast_taken(text) == sum(plain(r) for r in w.lines) > 0
    for body in (text, "".join(json.dumps(r) + "\n" for r in w.lines)):
        path = tmp_path / "log.jsonl"
        path.write_text(body)
        fast, slow = read_both(path)
        assert fast == slow
        for args in (["report", "--json"], ["report"], ["report", "--verbose"]):
            outs = []
            for on in (True, False):
                logread.use_fast(on)
                buf = io.StringIO()
                with redirect_stdout(buf):
                    code = main([*args, str(path)])
                outs.append((code, buf.getvalue()))
            assert outs[0] == outs[1]


CALL = {"v": 1, "event": "call", "ts": 1_800_000_001.5, "pid": 7, "ppid": 1, "host": "h", "role": "main", "seq": 3,
        "target": "m:f", "tag": "user", "call_id": 2, "thread": "T",
        "stack": [{"file": "/a.py", "line": 3, "func": "g"}], "caller": {"file": "/a.py", "line": 3, "func": "g"}}
RETURN = {"v": 1, "event": "return", "ts": 1_800_000_002, "pid": 7, "ppid": 1, "host": "h", "role": "main", "seq": 4,
          "call_id": 2, "duration_s": 0.5, "worker_pids": [8, 9], "sidecar_pid": 8}

TREE = {"v": 1, "event": "tree", "ts": 1_800_000_003.5, "pid": 6, "ppid": 1, "host": "h", "role": "watcher",
        "seq": 5, "run": "r1", "count": 3}


def dumps(r: dict[str, Any]) -> str:
    return json.dumps(r, separators=(",", ":"))


HOSTILE_LINES = [
    # frames: extra known keys, unknown keys, another key order, missing func/line, wrong types
    dumps({**CALL, "caller": {"file": "/a", "line": 1, "func": "f", "dist": "d", "rel": "r", "zz": 1}}),
    dumps({**CALL, "caller": {"zz": 1, "line": 1, "file": "/a", "func": "f"}}),
    dumps({**CALL, "caller": {"line": 1, "file": "/a", "func": "f"}}),
    dumps({**CALL, "caller": {"file": "/a", "line": 1}}),
    # three keys, not the three: the frame's check tests its keys before reading them
    dumps({**CALL, "caller": {"file": "/a", "line": 1, "zz": "f"}}),
    dumps({**CALL, "stack": [{"zz": "/a", "line": 1, "func": "f"}]}),
    dumps({**CALL, "caller": {"file": "/a", "line": -1, "func": "f"}}),
    dumps({**CALL, "caller": {"file": 5, "line": 1, "func": "f"}}),
    dumps({**CALL, "caller": None}),
    dumps({**CALL, "stack": [{"file": "/a", "line": 1, "func": "f"}, {"line": 2}, {"file": "/b", "line": 2,
                                                                                "func": "g", "src": "x"}]}),
    dumps({**CALL, "stack": [{"file": "/a", "line": True, "func": "f"}]}),
    # frames typed in C: known keys out of clean_frame's order (with and without unknown ones), unknown values of
    # any shape, a duplicate key, a known key of the wrong type, a float line
    dumps({**CALL, "caller": {"file": "/a", "line": 1, "func": "f", "rel": "r", "dist": "d"}}),
    dumps({**CALL, "caller": {"file": "/a", "func": "f", "line": 1}}),
    dumps({**CALL, "caller": {"file": "/a", "func": "f", "line": 1, "zz": 2}}),
    dumps({**CALL, "caller": {"line": 1, "file": "/a", "func": "f", "dist": "d"}}),
    dumps({**CALL, "caller": {"file": "/a", "line": 1, "func": "f", "dist": "d", "dist_version": "1", "rel": "r"}}),
    dumps({**CALL, "caller": {"file": "/a", "line": 1, "func": "f", "zz": {"a": [1, {"b": None}]}}}),
    dumps({**CALL, "caller": {"file": "/a", "line": 1, "func": "f", "dist": 5}}),
    dumps({**CALL, "caller": {"file": "/a", "line": 1.0, "func": "f"}}),
    dumps({**CALL, "caller": {"file": "/a", "line": 1, "func": "f", "src": None}}),
    dumps(CALL)[:-1][:-1] + ',"file":"/b"}}',
    dumps({**CALL, "stack": [{"file": "/a", "line": 1, "func": "f", "src": "s"},
                             {"file": "/b", "func": "g", "line": 2}]}),
    dumps({**CALL, "stack": [{"file": "/a", "line": 1, "func": "f", "dist": "d", "zz": 1}, {"file": "/b", "line": 2,
                                                                                          "func": "g"}]}),
    dumps({**CALL, "stack": [{"file": "/a", "line": 1, "func": "f"}, 5]}),
    dumps({**CALL, "caller": {"file": "/a\ud800", "line": 1, "func": "f\udcff"}}),
    dumps({**CALL, "stack": [{"file": "/a", "line": 1, "func": "f", "zz": "\ud800"}]}),
    dumps({**CALL, "env": {"A": 1e308, "B": 10 ** 30}}),
    dumps({**CALL, "parent_call": None}),
    # numbers: floats for ints, ints for floats, bounds, -0, exponents, huge
    dumps({**RETURN, "call_id": 2.0}),
    dumps({**RETURN, "duration_s": 3}),
    dumps({**RETURN, "duration_s": -0.0, "ts": 0}),
    dumps({**RETURN, "ts": -1}),
    dumps({**RETURN, "call_id": 2 ** 63}),
    dumps({**RETURN, "call_id": 2 ** 63 - 1}),
    dumps({**RETURN, "duration_s": 1e15}),
    dumps({**RETURN, "duration_s": 1.0000001e15}),
    dumps({**RETURN, "ts": 10 ** 15 + 1}),
    dumps(RETURN).replace('"duration_s":0.5', '"duration_s":5E-1'),
    dumps(RETURN).replace('"duration_s":0.5', '"duration_s":1e400'),
    dumps(RETURN).replace('"duration_s":0.5', '"duration_s":NaN'),
    dumps(RETURN).replace('"duration_s":0.5', '"duration_s":-Infinity'),
    dumps(RETURN).replace('"duration_s":0.5', '"duration_s":1800000000.123456789123'),
    dumps({**RETURN, "zz": 10 ** 40}),
    dumps(RETURN)[:-1] + ',"zz":1e400}',
    # identity fields: missing, wrong, newer schema, duplicate keys
    dumps({k: v for k, v in RETURN.items() if k != "host"}),
    dumps({k: v for k, v in RETURN.items() if k != "pid"}),
    dumps({**RETURN, "host": 5}),
    dumps({**RETURN, "v": 2}),
    dumps({**RETURN, "v": 0}),
    dumps({**RETURN, "worker_pids": [1, -1, "x"]}),
    dumps({**RETURN, "error": None}),
    dumps(RETURN)[:-1] + ',"event":"call"}',
    dumps(RETURN)[:-1] + ',"seq":9,"seq":10}',
    dumps(RETURN)[:-1] + ',"v":1}',
    # strings and bytes: escapes, surrogates, control characters, invalid UTF-8 in a dropped field
    dumps({**RETURN, "error": "a\u00e9\u2603\U0001f600\x00"}),
    dumps({**RETURN, "error": "\ud800"}),
    dumps(RETURN)[:-1] + ',"zz":"\\ud800x"}',
    dumps(RETURN)[:-1] + ',"zz":"\\ud83d\\ude00"}',
    dumps(RETURN)[:-1] + ',"zz":[[[[[[[[[[1]]]]]]]]]]}',
    dumps(RETURN)[:-1] + ',"zz":' + "[" * 900 + "]" * 900 + "}",
    dumps({**RETURN, "role": "compile-worker"}) + "\r",
    dumps(RETURN) + "   ",
    "   " + dumps(RETURN),
    dumps(RETURN)[:-1] + ",}",
    dumps(RETURN)[:40],
    "torn" + dumps(RETURN)[:30] + dumps(RETURN),
    dumps({"v": 1, "event": "role", "ts": 5, "pid": 7, "host": "h", "role": "compile-worker"}),
    # the watcher's process lists: entries in another key order, unknown, wrong, null, duplicate and missing
    # fields, a cmd to mask, exec as a bool or not, device paths of other types; free-form fields nested
    dumps({**TREE, "started": [{"cmd": "python --password=hunter2 x.py", "rss": 5, "pid": 8, "zz": 1, "exec": True,
                                "create_time": 1.5, "via": "child"}, {"pid": 9, "exec": 1, "name": "n"}]}),
    dumps({**TREE, "rss": [{"pid": 8, "rss": -1}]}),
    dumps({**TREE, "rss": [{"pid": 8, "rss": 2 ** 63}]}),
    dumps({**TREE, "rss": [{"pid": 8, "create_time": None}]}),
    dumps({**TREE, "rss": [{"rss": 5}]}),
    dumps({**TREE, "rss": [5, {"pid": 8}]}),
    dumps({**TREE, "rss": None}),
    dumps({**TREE, "rss": {"pid": 8}}),
    dumps({**TREE, "rss": [{"pid": 8, "rss": 1.0}]}),
    dumps({**TREE, "ended": [{"pid": 8, "end": 10 ** 15 + 1}, {"pid": True}]}),
    dumps({**TREE, "zombies": [{"pid": 8, "status": 9, "since": 3, "ppid": 1, "create_time": 2}]}),
    dumps({**TREE, "ended": [{"pid": 8, "end": 3}]})[:-1][:-2] + ',"end":4,"pid":9}]}',
    dumps(TREE)[:-1] + ',"ended":[{"pid":8,"end":1e400}]}',
    dumps({**TREE, "event": "memory", "procs": [{"pid": 8, "pss": 5, "threads": 2, "cpu_s": 1}],
           "devices": [{"pid": 8, "paths": ["/dev/nvidia0", 3]}]}),
    dumps({**TREE, "event": "memory", "devices": [{"pid": 8, "paths": ["/dev/nvidia0"]}, {"pid": 9}]}),
    dumps({**TREE, "event": "memory", "devices": [{"pid": 8, "paths": None}]}),
    dumps({**TREE, "event": "leftover", "procs": [{"pid": 8, "cmd": "x --token=abc"}], "pids": [8]}),
    dumps({**CALL, "env": {"A": "1", "B": None, "C": True, "D": 1.5, "E": -2}}),
    dumps({**CALL, "env": {"A": {"B": 1}}}),
    dumps({**CALL, "env": {"A": [1]}}),
    dumps({**CALL, "env": None}),
    dumps({**CALL, "env": []}),
    dumps({**CALL, "pool_pending": [{"sidecar_pid": 1, "pending": 0}, 3, None, "x"]}),
    dumps({**CALL, "pool_pending": [{"sidecar_pid": {"a": 1}}]}),
    dumps({**CALL, "pool_pending": [[1]]}),
    dumps({**CALL, "pool_pending": {"a": [1]}}),
    dumps({**CALL, "pool_pending": None}),
    dumps({**CALL, "pool_pending": 10 ** 30}),
    dumps(CALL)[:-1] + ',"pool_pending":[{"a":1e400}]}',
    dumps(CALL)[:-1] + ',"env":{"A":"1","A":"2","B":"3"}}',
    dumps({"v": 1, "event": "nope", "ts": 5, "pid": 7, "host": "h"}),
    "[1, 2]",
    "null",
]
BYTE_LINES = [
    dumps(RETURN)[:-1].encode() + b',"zz":"\xff\xfe"}',
    dumps(RETURN)[:-1].encode() + b',"zz":"\xed\xa0\x80"}',
    dumps(RETURN)[:-1].encode() + b',"zz":"\xc3\xa9"}',
    dumps({**RETURN, "error": "x"})[:-1].replace('"x"', '"\xc3\xa9"').encode("latin-1") + b"}",
]


@pytest.mark.parametrize("raw", [line.encode() for line in HOSTILE_LINES] + BYTE_LINES)
@pytest.mark.parametrize("newline", [b"\n", b""])
def test_hostile_lines_alike(raw: bytes, newline: bytes) -> None:
    """Each hostile line alone: the same record (or none), the same skip reason, the same dropped fields."""
    fast, slow = lines_both(raw + newline)
    assert fast == slow


def test_hostile_lines_in_one_log_alike(tmp_path: Path) -> None:
    """All of them in one log among good lines, blank lines, an over-long line and a cut last line."""
    good = compact(seed_log()).encode().splitlines()
    body = b"\n".join(good[:5] + [b""] + [x.encode() for x in HOSTILE_LINES] + BYTE_LINES + good[5:])
    body += b"\n" + b"x" * (MAX_LINE_BYTES + 10) + b"\n\n" + good[-1][:25]
    path = tmp_path / "log.jsonl"
    path.write_bytes(body)
    fast, slow = read_both(path)
    assert fast == slow
    assert fast[1]["line over 1 MiB"] == 1 and fast[1]["truncated last line"] == 1


def _readline_lines(f: Any, skipped: dict[str, int]) -> Any:
    """The file's lines read with readline, the reference the batch reader is held to: each line at most
    MAX_LINE_BYTES with its newline; a longer one is dropped (bounded reads) and counted."""
    while True:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES:
            while line and not line.endswith(b"\n"):
                line = f.readline(MAX_LINE_BYTES)
            skipped["line over 1 MiB"] = skipped.get("line over 1 MiB", 0) + 1
            continue
        yield line


@pytest.mark.parametrize("size", [MAX_LINE_BYTES - 2, MAX_LINE_BYTES - 1, MAX_LINE_BYTES, MAX_LINE_BYTES + 1,
                                  2 * MAX_LINE_BYTES + 5])
@pytest.mark.parametrize("last", [False, True])
def test_line_limit_alike_at_every_edge(size: int, last: bool, tmp_path: Path) -> None:
    """A line of about MAX_LINE_BYTES (newline included or not), in the middle or cut last: counted as a
    readline reading counts it (the batch reader splits reads of MAX_LINE_BYTES, so every offset of the
    edge is tried)."""
    good = dumps(RETURN).encode()
    for pad in (0, 1, len(good) + 1):
        long_line = b'{"v":1,"pad":"' + b"x" * (size - 16) + b'"}'
        assert len(long_line) == size
        body = b"\n".join([good] * pad) + (b"\n" if pad else b"") + long_line + (b"" if last else b"\n" + good + b"\n")
        path = tmp_path / "log.jsonl"
        path.write_bytes(body)
        got = read_both(path)[0]
        skipped: dict[str, int] = {}
        expected_count = 0
        with open(path, "rb") as f:
            for raw in _readline_lines(f, skipped):
                expected_count += bool(raw.strip())
        assert got[1].get("line over 1 MiB", 0) == skipped.get("line over 1 MiB", 0)
        assert got[4] + sum(got[1].values()) - skipped.get("line over 1 MiB", 0) == expected_count


hostile_number = st.one_of(st.integers(-2, 2 ** 64), st.floats(allow_nan=True), st.none(), st.booleans(),
                           st.text(max_size=2))
hostile_value = st.one_of(
    # process list entries (check.ENTRY_FIELDS' keys and others) and nested free-form values
    st.lists(st.dictionaries(st.sampled_from(["pid", "rss", "create_time", "end", "pss", "cmd", "exec", "paths",
                                              "ppid", "status", "name", "zz"]),
                             st.one_of(hostile_number, st.lists(st.one_of(st.text(max_size=2), st.integers()),
                                                                max_size=2)), max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=2), st.one_of(hostile_number, st.lists(hostile_number, max_size=2),
                                                   st.dictionaries(st.text(max_size=1), hostile_number, max_size=2)),
                    max_size=3),
    st.integers(), st.integers(min_value=2 ** 62, max_value=2 ** 64), st.floats(allow_nan=True), st.text(max_size=4),
    st.none(), st.booleans(), st.lists(st.one_of(st.integers(-2, 2 ** 64), st.text(max_size=2)), max_size=3),
    st.dictionaries(st.sampled_from(["file", "line", "func", "dist", "zz"]),
                    st.one_of(st.integers(-1, 5), st.text(max_size=2), st.none()), max_size=4),
    st.lists(st.dictionaries(st.sampled_from(["file", "line", "func", "src", "zz"]),
                             st.one_of(st.integers(-1, 5), st.text(max_size=2)), max_size=4), max_size=3),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=st.sampled_from(FAST_EVENTS or ["call"]), values=st.dictionaries(
    st.sampled_from(sorted({name for e in FAST_EVENTS for name in schema.FIELD_TYPES[e]} | {"zz"})),
    hostile_value, max_size=6))
def test_any_field_any_value_alike(event: str, values: dict[str, Any]) -> None:
    """Property: a fast event's record with any fields of any values reads the same both ways."""
    base = dict(CALL if event in ("call", "blocked") else TREE if "list[proc]" in schema.FIELD_TYPES[event].values()
                or event in ("tree", "memory") else RETURN, event=event)
    line = json.dumps({**base, **values}, separators=(",", ":")).encode()
    fast, slow = lines_both(line + b"\n")
    assert fast == slow


def test_without_msgspec_every_line_takes_the_json_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No msgspec: no fast decoders, and the report is the same."""
    path = tmp_path / "log.jsonl"
    path.write_text(compact(seed_log()))
    monkeypatch.setattr(fastread, "msgspec", None)
    assert fastread.decoders() == {}
    logread.use_fast()
    fast, slow = read_both(path)
    assert fast == slow and fast[4] > 0


def test_reorder_far_back_is_the_sorted_order(tmp_path: Path) -> None:
    """Records late by many places (one ts, seqs written backwards, shuffled within the window): the stream
    is the stable sort by (ts, seq)."""
    import random

    rnd = random.Random(5)
    records = [{**RETURN, "ts": 1_800_000_000 + (i // 40) * 0.001, "seq": 1000 - i, "call_id": i} for i in range(400)]
    records += [{**RETURN, "ts": 1_800_000_001 + rnd.random(), "seq": i, "call_id": 1000 + i} for i in range(400)]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(dumps(r) + "\n" for r in records))
    for fast in (True, False):
        logread.use_fast(fast)
        got = [r["call_id"] for r in stream_logs([str(path)])]
        assert got == [r["call_id"] for r in sorted(records, key=lambda r: (r["ts"], r["seq"]))]


SIGNALLED_WHILE_BUILDING = '''
import signal, sys
from wp_autotrace.analysis.read import logread, records
class Hit(BaseException):
    pass
def hit(sig, frame):
    raise Hit
signal.signal(signal.SIGALRM, hit)
hits = 0
for i in range(400):
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.0001 * (i % 50 + 1))
        logread.use_fast()
        signal.setitimer(signal.ITIMER_REAL, 0)
    except Hit:
        hits += 1
    try:
        signal.setitimer(signal.ITIMER_REAL, 0)
    except Hit:
        hits += 1
print(hits, len(records._fast or {}) > 0)
'''


def test_a_signal_while_the_decoders_are_built_raises_instead_of_crashing() -> None:
    """Ctrl-C while `run` waits for its verdict, or while `report` starts, lands when it lands: where it
    landed while msgspec built a decoder (Decoder() reads the types through Python, and the handler's
    KeyboardInterrupt was raised inside), the process died of SIGSEGV ("Fatal Python error"). The handler
    raises here at random moments (SIGALRM every 0.1-5 ms) while the decoders are built, 400 times: the
    exception comes out as an exception, and the decoders are whole."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", SIGNALLED_WHILE_BUILDING], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    hits, built = done.stdout.split()
    assert int(hits) > 0 and built == "True", done.stdout  # the handler did raise, often
