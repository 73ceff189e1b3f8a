"""The suite's one wait helper (conftest.wait_until): what it returns, how it fails, how far past its bound.

No test here measures a duration: each counts the predicate's calls, which the helper fixes by construction.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from .conftest import WaitTimeout, read_log, wait_for_watcher, wait_until


def test_returns_the_predicates_truthy_value() -> None:
    """The value itself comes back (a pid, a record list), not True; the predicate is not asked again."""
    calls = itertools.count(1)
    answers = {1: None, 2: [], 3: [42]}
    assert wait_until(lambda: answers[next(calls)], 5, interval=0.001) == [42]
    assert next(calls) == 4


def test_fails_naming_what_it_waited_for_and_the_last_value() -> None:
    """A wait that runs out is a test failure (an AssertionError) that says what never came."""
    with pytest.raises(WaitTimeout, match=r"waited 0\.01 s for the sidecar's process_start; last saw \[\]"):
        wait_until(lambda: [], 0.01, interval=0.001, what="the sidecar's process_start")
    assert issubclass(WaitTimeout, AssertionError)
    with pytest.raises(WaitTimeout, match=r"for 2 processes still alive; last saw 0"):
        wait_until(lambda: 0, 0, what=lambda: "2 processes still alive")  # a function: asked at the failure


def test_the_predicate_is_asked_once_more_at_the_deadline() -> None:
    """An interval longer than the timeout still gets a last ask at the deadline, and no more: a wait
    overruns its bound by one call of the predicate at most, never by an interval."""
    calls: list[int] = []

    def never() -> bool:
        calls.append(1)
        return False

    with pytest.raises(WaitTimeout):
        wait_until(never, 0.05, interval=60)
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(WaitTimeout):
        wait_until(never, 0, interval=60)  # no time at all: asked once
    assert len(calls) == 1


def test_wait_for_watcher_fails_when_the_record_never_comes(tmp_path: Path) -> None:
    """A log without the awaited record fails the wait, naming the record and the log."""
    log = tmp_path / "run.jsonl"
    log.write_text('{"v": 1, "event": "process_start", "pid": 1}\n')
    with pytest.raises(WaitTimeout, match="'watcher_exit' record in .*run.jsonl"):
        wait_for_watcher(log, 0.05)
    log.write_text(log.read_text() + '\n{"v": 1, "event": "watcher_exit", "pid": 2}\n')
    assert [r["event"] for r in wait_for_watcher(log, 0.05)] == ["process_start", "watcher_exit"]


def test_read_log_partial_skips_what_is_being_written(tmp_path: Path) -> None:
    """partial=True: no file is no records, and a torn last line is skipped; the strict read fails on it."""
    log = tmp_path / "run.jsonl"
    assert read_log(log, partial=True) == []
    log.write_bytes(b'\n{"event": "a"}\n\n{"event": "b", "pi')
    assert read_log(log, partial=True) == [{"event": "a"}]
    with pytest.raises(ValueError):
        read_log(log)
