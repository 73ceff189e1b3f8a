"""logread's reorder window: O(n log n) also after the wall clock steps back, and its output record for
record the same as the sorted-list window it replaced (issue 28 item 4).

The cost is counted, not timed: every comparison of two timestamps is counted through a float subclass,
so the test is deterministic on a loaded machine.
"""

from __future__ import annotations

import json
import math
import random
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.read import logread, records
from wp_autotrace.analysis.read.logread import LogStream

from .logs import T0

HOUR_S = 3600.0


class CountedTs(float):
    """A timestamp that counts every comparison made with it (what any reorder window costs)."""

    compared = 0

    def _count(self) -> None:
        CountedTs.compared += 1

    def __lt__(self, other: object) -> bool:
        self._count()
        return float.__lt__(self, other)  # type: ignore[operator]

    def __le__(self, other: object) -> bool:
        self._count()
        return float.__le__(self, other)  # type: ignore[operator]

    def __gt__(self, other: object) -> bool:
        self._count()
        return float.__gt__(self, other)  # type: ignore[operator]

    def __ge__(self, other: object) -> bool:
        self._count()
        return float.__ge__(self, other)  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        self._count()
        return float.__eq__(self, other)

    __hash__ = float.__hash__


def _record(ts: float, pid: int, seq: int) -> dict[str, Any]:
    return {"v": 1, "event": "config", "ts": ts, "pid": pid, "ppid": 1, "host": "h1", "role": "main",
            "seq": seq, "settings": {}}


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def stepped_back_log(path: Path, before: int, after: int) -> Path:
    """`before` records within the reorder window, then the wall clock steps back an hour, then `after`."""
    records = [_record(T0 + i * 4.0 / before, 100, i) for i in range(before)]
    records += [_record(T0 - HOUR_S + i * 0.001, 100, before + i) for i in range(after)]
    return _write(path, records)


def _count_comparisons(monkeypatch: pytest.MonkeyPatch, path: Path) -> tuple[int, int]:
    parse = records.parse_line

    def counted(raw: bytes, skip: Any, fixed: dict[str, int]) -> dict[str, Any] | None:
        record = parse(raw, skip, fixed)
        if record is not None:
            record["ts"] = CountedTs(record["ts"])
        return record

    monkeypatch.setattr(records, "parse_line", counted)
    CountedTs.compared = 0
    n = sum(1 for _ in LogStream([str(path)]))
    return n, CountedTs.compared


def test_clock_step_back_costs_n_log_n_comparisons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """4,000 records held in the window, then 4,000 after the clock stepped back an hour: each later
    record costs O(log held) comparisons (a sorted list walked past every held record: ~16 million)."""
    n, compared = _count_comparisons(monkeypatch, stepped_back_log(tmp_path / "step.jsonl", 4000, 4000))
    assert n == 8000
    bound = 8 * n * math.ceil(math.log2(n))  # generous: a heap needs about 2 log2(held) a record
    assert compared < bound, f"{compared} comparisons for {n} records (bound {bound})"


def _sorted_list_window(records: list[dict[str, Any]], window: float, most: int) -> list[dict[str, Any]]:
    """The window as it was before (a sorted deque, late records walked into place): the reference."""
    held: deque[tuple[float, int, dict[str, Any]]] = deque()
    newest = -math.inf
    out = []
    for record in records:
        ts = record["ts"]
        item = (ts, record.get("seq", 0), record)
        if not held or ts > newest or item[:2] >= held[-1][:2]:
            held.append(item)
            newest = ts
        else:
            i = len(held)
            while i and held[i - 1][:2] > item[:2]:
                i -= 1
            held.insert(i, item)
        while held[0][0] < newest - window or len(held) > most:
            out.append(held.popleft()[2])
    out += [item[2] for item in held]
    return out


@pytest.mark.parametrize("most", [1, 7, 50, logread.REORDER_MAX])
def test_output_is_the_sorted_list_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, most: int) -> None:
    """Interleaved writers a little out of order, equal timestamps and seqs, steps of the clock back and
    forward, a full buffer: the heap releases the very records, in the very order, the sorted list did."""
    rng = random.Random(28_4)
    records = []
    clock = T0
    for i in range(3000):
        if i % 700 == 699:
            clock += rng.choice((-HOUR_S, -3.0, 20.0))
        clock += rng.choice((0.0, 0.001, 0.01, 0.2))
        ts = round(clock - rng.choice((0.0, 0.0, 0.05, 2.0, 6.0)), 3)  # a writer late by its stall
        records.append(_record(ts, 100 + i % 5, rng.choice((i, 0, 1))))
    path = _write(tmp_path / "mixed.jsonl", records)
    monkeypatch.setattr(logread, "REORDER_MAX", most)
    got = [json.dumps(r, sort_keys=True) for r in LogStream([str(path)])]
    read = [json.dumps(r, sort_keys=True) for r in _sorted_list_window(records, logread.REORDER_WINDOW_S, most)]
    assert got == read
