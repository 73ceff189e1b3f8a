"""The log writer: encoding, size cap, concurrent appends (no torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from wp_autotrace.runtime.sink import MAX_RECORD_BYTES, Sink, _dumps, encode

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
