"""logread.count_events: the one-fact reader `run` and `doctor` use, checked against the test's own
reading of a log a real traced interpreter wrote (json.loads per line), and against the spellings and
damage a byte scan gets wrong."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.read.logread import count_events

from .conftest import clean_env, read_log, run_python


def _traced_log(tmp_path: Path) -> list[dict[str, Any]]:
    """The records of a real `python -c pass` run traced, as this test reads them itself."""
    log = tmp_path / "real.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    result = run_python(["-c", "pass"], env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return read_log(log)


def test_counts_what_the_log_holds(tmp_path: Path) -> None:
    """Each kind of line alone in a log, then all together: (event=process_start, role=watcher) counts."""
    records = _traced_log(tmp_path)
    start = next(r for r in records if r["event"] == "process_start")
    expected = sum(1 for r in records if r["event"] == "process_start")
    assert expected == 1 and start["role"] != "watcher"
    assert count_events(str(tmp_path / "real.jsonl"), event="process_start") == expected
    watcher = dict(start, role="watcher")
    compact = json.dumps(watcher, separators=(",", ":"))
    cases = [
        (json.dumps(start, separators=(",", ":")), 1, 0),
        (json.dumps(watcher), 1, 1),  # `"role": "watcher"`: the other spelling a byte scan had to list
        (compact, 1, 1),
        ("torn-by-a-killed-writer" + compact, 1, 1),  # a torn fragment before a whole record: the record counts
        (compact[: len(compact) // 2], 0, 0),  # a record cut short
        (json.dumps({"v": 1, "event": "process_start", "role": "watcher"}), 0, 0),  # the words, not a record
        (json.dumps(dict(start, argv=["python", "watcher"])), 1, 0),  # "watcher" as a value, not the role
        (json.dumps(dict(watcher, event="exec", argv=["process_start"])), 0, 1),  # the event's name as a value
    ]
    for n, (line, starts, watchers) in enumerate(cases):
        log = tmp_path / f"case{n}.jsonl"
        log.write_text(f"\n{line}\n")
        assert (count_events(str(log), event="process_start"), count_events(str(log), role="watcher")) == (
            starts, watchers), line
    log = tmp_path / "all.jsonl"
    log.write_text("\n".join(line for line, _, _ in cases) + "\n")
    assert count_events(str(log), event="process_start") == sum(c[1] for c in cases)
    assert count_events(str(log), role="watcher") == sum(c[2] for c in cases)
    assert count_events(str(log), event="process_start", role="watcher") == 3


def test_unreadable_logs_count_nothing(tmp_path: Path) -> None:
    assert count_events(str(tmp_path / "missing.jsonl"), event="process_start") == 0
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # refused before reading: a FIFO with no writer must not hang the count
    assert count_events(str(fifo), event="process_start") == 0
