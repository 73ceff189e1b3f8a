"""The log writer: encoding, size cap, concurrent appends (no torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from wp_autotrace.runtime.held import hold
from wp_autotrace.runtime.jsonline import _dumps, encode, frame
from wp_autotrace.runtime.sink import MAX_RECORD_BYTES, Sink

from .conftest import read_log

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_encoder_matches_json(value: Any) -> None:
    """Property-based: the sink's JSON encoder matches json.dumps exactly."""
    assert _dumps(value) == json.dumps(value, separators=(",", ":"), default=repr).encode() + b"\n"


def test_encoder_unknown_objects_like_default_repr() -> None:
    """Unknown objects encode as their repr, as json.dumps(default=repr)."""
    value = {"a": (1, 2), "b": object}
    assert _dumps(value) == json.dumps(value, separators=(",", ":"), default=repr).encode() + b"\n"


def test_huge_record_is_shrunk_not_split() -> None:
    """A record over the cap is shrunk (innermost frames kept), never split."""
    record = {"v": 1, "event": "call", "ts": 1.0, "pid": 1, "argv": ["x" * 100_000],
              "stack": [{"file": "f" * 300, "line": i, "func": "g"} for i in range(500)]}
    line = encode(record)
    assert len(line) <= MAX_RECORD_BYTES and line.endswith(b"\n") and line.count(b"\n") == 1
    back = json.loads(line)
    assert back["event"] == "call" and back["argv"][0].endswith("[truncated]")
    assert back["stack"][-1]["line"] == 499  # the innermost frames are kept


WRITER = textwrap.dedent('''
    import sys, threading
    from wp_autotrace.runtime.sink import Sink
    sink = Sink(sys.argv[1], "h", "child")
    n, threads = int(sys.argv[2]), int(sys.argv[3])
    def work(t):
        for i in range(n // threads):
            sink.emit("call", target="m:f", call_id=i, thread=str(t), stack=[{"file": "x" * 150, "line": i}])
    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    [t.start() for t in ts]; [t.join() for t in ts]
''')


def test_concurrent_writers_never_tear(tmp_path: Path) -> None:
    """16 processes x 4 threads append 32,000 records: none torn, seq complete."""
    log = tmp_path / "c.jsonl"
    Sink(str(log), "h", "main")  # create it
    script = tmp_path / "w.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    env.pop("WP_AUTOTRACE", None)
    procs = [subprocess.Popen([sys.executable, str(script), str(log), "2000", "4"], env=env) for _ in range(16)]
    assert all(p.wait(120) == 0 for p in procs)
    recs = read_log(log)  # raises on any torn line
    assert len(recs) == 16 * 2000
    for pid in {r["pid"] for r in recs}:
        seqs = sorted(r["seq"] for r in recs if r["pid"] == pid)
        assert seqs == list(range(2000))


def _written(tmp_path: Path, name: str, write: Any) -> list[bytes]:
    """The framed records write(sink) appends, each as written (b"\\n{...}\\n")."""
    sink = Sink(str(tmp_path / name), "h\u00e9st", "main")
    write(sink)
    data = (tmp_path / name).read_bytes()
    return [b"\n" + line + b"\n" for line in data.split(b"\n") if line]


# Field names that are also Sink.emit's own parameter names ("self", "event") or header members:
# drawn on purpose, as often as any text, so a keyword clash fails every run, not one in five.
CLASHING_KEYS = ("event", "self", "v", "ts", "pid", "ppid", "host", "role", "seq")
field_names = st.sampled_from(CLASHING_KEYS) | st.text(max_size=6)


@example({"role": "x", "ts": 3}, "role")
@example({"event": "other", "self": 1}, "call")  # emit's own parameter names, as fields
@example({"s": "\u00e9" * 40_000}, "call")  # over the cap: shrunk
@given(st.dictionaries(field_names, json_values, max_size=5), st.text(max_size=8))
def test_emit_writes_what_encode_gives(tmp_path_factory: Any, fields: dict[str, Any], event: str) -> None:
    """Property-based: the header encoded once per event and identity, then the fields, gives the
    very bytes of frame(encode(record)) for the whole record (including fields that replace a
    header member, and records over the cap, which are shrunk)."""
    from wp_autotrace.runtime import sink as sink_mod

    tmp = tmp_path_factory.mktemp("emit")
    clock_ns = (1796136809250938437, 12_000_000_000, 100)
    stamps = iter(clock_ns * 4)
    real_clock = sink_mod._time_ns
    sink_mod._time_ns = lambda: next(stamps)
    try:
        got = _written(tmp, "a.jsonl", lambda s: [s.emit(event, **fields), s.emit("x"), s.emit(event, **fields)])
    finally:
        sink_mod._time_ns = real_clock
    pid, ppid = os.getpid(), os.getppid()
    want = []
    for seq, ((ev, flds), ns) in enumerate(zip(((event, fields), ("x", {}), (event, fields)), clock_ns)):
        record = {"v": 1, "event": ev, "ts": ns / 1e9, "pid": pid, "ppid": ppid, "host": "h\u00e9st",
                  "role": "main", "seq": seq}
        record.update(flds)
        want.append(frame(encode(record)))
        if b'"ts":%de-9,' % ns in got[seq]:  # the header written from the integer: the same seconds, exactly
            assert json.loads(got[seq])["ts"] == float(f"{ns}e-9")
            got[seq] = got[seq].replace(b'"ts":%de-9,' % ns, b'"ts":%s,' % repr(ns / 1e9).encode(), 1)
    assert got == want


def test_emit_encoded_and_role_change_match_encode(tmp_path: Path) -> None:
    """emit_encoded's body lands after the header; a role change re-encodes it; an oversized
    body falls back to the fields, shrunk like any record."""
    def write(sink: Sink) -> None:
        sink.emit_encoded("call", '"call_id":1,"x":"y"', lambda: {"call_id": 1, "x": "y"})
        sink.role = "compile_worker"
        sink.emit_encoded("return", "", dict)
        big = {"call_id": 2, "stack": [{"file": "f" * 300, "line": i} for i in range(500)]}
        sink.emit_encoded("call", json.dumps(big, separators=(",", ":"))[1:-1], lambda: big)
        sink.pid = 7  # any identity change re-encodes the header
        sink.emit("x")
        sink.ppid = 6
        sink.emit("x")
        sink.host = "other"
        sink.emit("x")

    records = [json.loads(line) for line in _written(tmp_path, "b.jsonl", write)]
    ppid = os.getppid()
    assert [(r["pid"], r["ppid"], r["host"]) for r in records[3:]] == [(7, ppid, "h\u00e9st"), (7, 6, "h\u00e9st"),
                                                                       (7, 6, "other")]
    records = records[:3]
    assert [r["role"] for r in records] == ["main", "compile_worker", "compile_worker"]
    assert records[0]["x"] == "y" and list(records[1]) == ["v", "event", "ts", "pid", "ppid", "host", "role", "seq"]
    assert len(json.dumps(records[2], separators=(",", ":"))) <= MAX_RECORD_BYTES
    assert records[2]["stack"][-1]["line"] == 499 and len(records[2]["stack"]) < 500


@pytest.mark.parametrize(("link", "pidns"), [("pid:[4026532999]", 4026532999), ("pid:[4026531836]", None),
                                             (None, None)], ids=["namespaced", "initial", "no-proc"])
def test_the_header_names_a_pid_namespace_other_than_the_initial_one(tmp_path: Path, monkeypatch: Any,
                                                                      link: Any, pidns: Any) -> None:
    """A writer outside the initial pid namespace names it in every record's header, after host (a small record,
    one whose field is named as a header member, one over the cap): the bytes frame(encode(record)) gives. In the
    initial namespace, or with no /proc, no member: a host's records are as before."""
    from wp_autotrace.runtime import sink as sink_mod

    def readlink(path: Any) -> str:
        if path != "/proc/self/ns/pid" or link is None:
            raise FileNotFoundError(path)
        return str(link)

    monkeypatch.setattr(sink_mod.os, "readlink", readlink)
    monkeypatch.setattr(sink_mod, "_time_ns", lambda: 1796136809250938437)
    fields: list[dict[str, Any]] = [{"a": 1}, {"ppid": 3}, {"s": "x" * 40_000}]
    got = _written(tmp_path, "ns.jsonl", lambda sink: [sink.emit("x", **f) for f in fields])
    header = {"v": 1, "event": "x", "ts": 1796136809.2509384, "pid": os.getpid(), "ppid": os.getppid(),
              "host": "h\u00e9st", **({} if pidns is None else {"pidns": pidns}), "role": "main"}
    want = [frame(encode({**header, "seq": seq, **f})) for seq, f in enumerate(fields)]
    assert [g.replace(b'"ts":1796136809250938437e-9,', b'"ts":1796136809.2509384,') for g in got] == want


def test_hypothesis_keeps_no_example_database() -> None:
    """The suite's Hypothesis profile (tests/conftest.py) writes and replays no example database,
    so no run's failure is replayed by a later run in the same checkout."""
    from hypothesis import settings

    assert settings().database is None
    assert settings.get_current_profile_name() == "no-database"


HOSTILE_NAME = "a\nwp-autotrace: forged line \x1b[31mred\x1b[0m \u202eevil\udcff"


def test_warning_line_escapes_what_a_path_holds(tmp_path: Path) -> None:
    """A log path holding a newline, ESC, U+202E (and an undecodable byte) prints one warning line,
    those characters escaped as Python writes them (issue #28 item 13)."""
    from .conftest import clean_env

    log = os.fsencode(str(tmp_path / "missing dir" / HOSTILE_NAME) + ".jsonl")
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    env_b = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    env_b[b"WP_AUTOTRACE_LOG"] = log
    proc = subprocess.run([sys.executable, "-c", "print('ran')"], env=env_b, capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == b"ran\n"
    err = proc.stderr
    assert err.count(b"\n") == 1 and err.startswith(b"wp-autotrace: cannot open the log "), err
    assert b"\x1b" not in err and "\u202e".encode() not in err and b"\xff" not in err
    assert rb"a\nwp-autotrace: forged line \x1b[31mred\x1b[0m \u202eevil\udcff.jsonl" in err


def test_one_line_leaves_printable_text_alone() -> None:
    """Printable text (any script, spaces, quotes, backslashes) is printed as it is."""
    from wp_autotrace.runtime.sink_rare import one_line

    text = "caf\u00e9 \u65e5\u672c 'q' \"d\" back\\slash /tmp/x y"
    assert one_line(text) is text
    assert one_line("tab\there\u2028") == "tab\\there\\u2028"


@given(st.integers(min_value=0, max_value=10**17))
@example(0)
@example(99)
@example(100)
@example(10**6)
@example(10**15 - 1)
@example(10**15)
@example(11_537_891_454_972_433)
def test_micros_json_is_the_repr_of_the_duration(us: int) -> None:
    """A return record's duration_s is written from the integer microseconds (reads.micros_json): the very
    text json.dumps gives for the float it records (us / 1_000_000, int by int: correctly rounded even past
    2**53, where us / 1e6 would round us first), on both sides of the exponent and precision bounds."""
    from wp_autotrace.runtime.reads import micros_json

    assert micros_json(us) == json.dumps(us / 1_000_000)


def test_micros_json_matches_repr_for_every_duration_below_a_second() -> None:
    """Exhaustively over the first second (and its exponent-form start), where almost every call falls."""
    from wp_autotrace.runtime.reads import micros_json

    assert all(micros_json(us) == repr(us / 1e6) for us in range(1_000_001))


def test_the_sinks_own_encoder_writes_what_json_writes() -> None:
    """sink._encode_json (the start-up's and the exit's: no _json loaded) gives json's C encoder's bytes for
    strings of every kind of character (escapes, controls, non-ASCII, lone and paired surrogates) and plain
    containers, and hands anything else to the C encoder."""
    import random

    from wp_autotrace.runtime import sink
    from wp_autotrace.runtime.jsonline import c_encoder

    enc = c_encoder()
    rng = random.Random(3)
    chars = [chr(i) for i in range(300)] + ["\u202e", "\udcff", "\U0001f600", "\uffff", "\U00010000"]
    for _ in range(5000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 6)))
        assert sink._encode_json(text) == enc(text), text
    odd_keys = {"é": 1, 'a"b': 2, "_x1": 3, "1a": 4, "": 5, "a\nb": 6, "ǅ": 7, "\U0001d400": 8, "a\\": 9}
    for value in ({"a": ["é", 1.5, None, True, -3, 10**30]}, float("nan"), b"x", {1: 2}, (1, "\n"), 1e-7, odd_keys):
        assert sink._encode_json(value) == enc(value), value


def test_thread_name_as_the_interpreter_finalizes(monkeypatch: Any) -> None:
    """A traced call from a __del__ late in finalization finds threading gone from sys.modules (3.13 took it out
    before the test's `late` target ran): the wrapper names the thread by its ident, and writes no
    "record call: KeyError: 'threading'" line to the host's stderr."""
    import sys
    import threading

    from wp_autotrace.runtime.reads import thread_name, thread_name_kept

    assert thread_name() == threading.current_thread().name
    monkeypatch.delitem(sys.modules, "threading")
    ident = f"Thread-{threading.get_ident()}"
    kept: dict[str, Any] = {}
    assert thread_name() == ident and thread_name_kept(kept) == ident and kept == {}


def test_the_hot_path_writer_writes_what_write_writes(tmp_path: Path, monkeypatch: Any) -> None:
    """plain.record_writer's put writes Sink._write's bytes, record for record: on a held, marked descriptor
    (its own fast path), with an oversized body, and after the program closed the log's number (both through
    _write, which opens the log again)."""
    from wp_autotrace.runtime import plain
    from wp_autotrace.runtime import sink as sink_module

    for module in (plain, sink_module):
        monkeypatch.setattr(module, "_time_ns", lambda: 1796470280467159796)
    big = {"call_id": 2, "stack": [{"file": "f" * 300, "line": i} for i in range(500)]}
    records = [('"call_id":1,"thread":"MainThread","x":"\\u00e9"', dict), ('"call_id":1,"duration_s":5e-06', dict),
               (json.dumps(big, separators=(",", ":"))[1:-1], lambda: big)]
    written = {}
    for how in ("_write", "put"):
        log = tmp_path / f"{how}.jsonl"
        sink = Sink(str(log), "h\u00e9st", "main")
        hold(sink)
        assert sink.held and (sink._mark is not None or not sys.platform.startswith("linux"))
        put = plain.record_writer(sink, "call")
        for closed in (False, True):
            if closed:
                os.close(sink.fd)  # as a program closing every descriptor it did not open does
            for body, fields in records:
                (put(body) or sink._write("call", body, fields, ())) if how == "put" else sink._write(
                    "call", body, fields, ())
        written[how] = log.read_bytes()
    assert written["put"] == written["_write"] and written["put"].count(b'"event":"call"') == 6


def test_every_set_of_what_the_fast_attribute_folds_recomputes_it() -> None:
    """Sink._fast folds _mark, active and _closer: every function of the package that sets one of them (but
    __init__, where no mark is held yet) calls set_fast after each such statement, or put would read a stale
    mark."""
    import ast

    package = Path(__file__).resolve().parent.parent / "wp_autotrace"
    missing, found = [], 0
    for path in package.rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name == "__init__":
                continue
            sets = []  # lines of statements that set one of the three on a sink: self's in sink.py, else a sink's
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                        isinstance(e, ast.Attribute) and e.attr in ("_mark", "active", "_closer")
                        and (ast.unparse(e.value).endswith("sink")
                             or (path.name == "sink.py" and ast.unparse(e.value) == "self"))
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                        for e in ast.walk(t)):
                    sets.append(node.lineno)
            if sets:
                found += 1
                calls = [c.lineno for c in ast.walk(fn)
                         if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "set_fast"]
                if any(all(call < line for call in calls) for line in sets):  # a set with no set_fast after it
                    missing.append(f"{path.name}:{fn.name}")
    assert found >= 6 and not missing


def test_the_hot_path_writer_sees_every_change_of_what_it_checks(tmp_path: Path) -> None:
    """put reads three of its checks as one attribute (Sink._fast, with sink.dropped beside it): each way the
    program's code changes one of them sends the next record where _write sends it. Drops set from outside
    (bootstrap's exit, the watcher) are said after the next record that lands; a log stopped, or closed to this
    thread by another's exit, takes nothing; a forked child's reset writes again."""
    import threading

    from wp_autotrace.runtime import plain

    log = tmp_path / "log.jsonl"
    sink = Sink(str(log), "h", "main")
    hold(sink)
    writer = plain.record_writer(sink, "call")

    def put(body: str) -> None:  # as the wrappers call it: where put declines, _write (with the fields)
        writer(body) or sink._write("call", body, dict, ())

    sink.say_drops = True
    put('"call_id":1')
    sink.dropped = 1  # as bootstrap's exit and the watcher set it back or forward
    put('"call_id":2')
    events = [(r["event"], r.get("call_id"), r.get("dropped")) for r in read_log(log)]
    assert events == [("call", 1, None), ("call", 2, None), ("tracer_error", None, 1)]
    closer = threading.Thread(target=sink.close_to_others, args=(0.0,))
    closer.start()
    closer.join()
    put('"call_id":3')  # the exit began in another thread: this one writes no more
    assert len(read_log(log)) == 3
    sink.reset_after_fork("main")  # a child of that process: its own writer again, drops its own
    put('"call_id":4')
    assert [r.get("call_id") for r in read_log(log)][-1] == 4 and sink._fast is not None
    sink.stop()
    put('"call_id":5')
    assert len(read_log(log)) == 4
