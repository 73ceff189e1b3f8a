"""The log's held descriptor number taken by the program in the instant the tracer places or marks it (another
thread's dup2 over a descriptor it finds): the program's file is never marked, held or written, and the
records go to the log (runtime/held.py checked_mark; docs/contracts.md, "The log's descriptor")."""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

import pytest

from wp_autotrace.runtime.held import hold
from wp_autotrace.runtime.sink import Sink

from .conftest import read_log


@pytest.mark.parametrize("where", ["hold", "reopen"])
def test_a_file_the_program_puts_at_the_number_being_marked_gets_no_mark_and_no_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Another thread of the program may dup2 a file of its own over the log's new high number in the instant
    between its placement and its mark (a thread that dup2()s over descriptors it finds: 4 of 65 such swaps under
    a traced loop took the mark): that file is never marked (its description keeps the program's I/O signal), never
    held, and takes no record; the sink stays released and its records go to the log (fails where the mark was set
    unchecked: the program's file then passed every check and took every later record)."""
    from wp_autotrace.runtime import held as held_module

    log, mine = tmp_path / "run.jsonl", tmp_path / "mine.txt"
    sink = Sink(str(log), "h", "main")
    if where == "reopen":
        hold(sink)
        if sink._mark is None:
            pytest.skip("no F_SETSIG mark here (not Linux)")
    else:
        sink.release()
    fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGIO)  # a file of the program's own asynchronous I/O
    taken: list[int] = []
    real = held_module.place_high

    def placed_then_taken(n: int) -> int:
        high = real(n)
        os.dup2(fd, high)  # the program's thread, in that instant
        taken.append(high)
        return high

    monkeypatch.setattr(held_module, "place_high", placed_then_taken)
    if where == "reopen":
        os.dup2(fd, sink.fd)  # the program's file at the held number: the next record's check reopens the log
        taken.append(sink.fd)
        sink.emit("lost")  # both of its reopen's numbers were taken too: this record is dropped, counted
        assert sink.dropped == 1 and len(taken) == 3
    else:
        hold(sink)
    monkeypatch.setattr(held_module, "place_high", real)
    assert sink.fd == -1 and sink._mark is None
    sink.emit("a")
    sink.emit("b")
    assert fcntl.fcntl(fd, fcntl.F_GETSIG) == signal.SIGIO
    assert mine.read_bytes() == b""
    assert [r["event"] for r in read_log(log)][-2:] == ["a", "b"]
    for n in {fd, *taken}:
        os.close(n)


def test_a_reopen_whose_new_number_the_program_took_once_opens_the_log_again(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The program's one dup2 over the reopened number before its mark costs no record: the path is opened once
    more, and that number is held and marked (fails where the first taken number ended the reopen)."""
    from wp_autotrace.runtime import held as held_module

    log, mine = tmp_path / "run.jsonl", tmp_path / "mine.txt"
    sink = Sink(str(log), "h", "main")
    hold(sink)
    if sink._mark is None:
        pytest.skip("no F_SETSIG mark here (not Linux)")
    fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    taken = [sink.fd]
    os.dup2(fd, sink.fd)
    real = held_module.place_high

    def placed_then_taken_once(n: int) -> int:
        high = real(n)
        if len(taken) == 1:
            os.dup2(fd, high)
            taken.append(high)
        return high

    monkeypatch.setattr(held_module, "place_high", placed_then_taken_once)
    sink.emit("a")
    assert sink.dropped == 0 and sink.held and sink.fd not in taken and sink._mark is not None
    sink.emit("b")
    assert mine.read_bytes() == b"" and fcntl.fcntl(fd, fcntl.F_GETSIG) == 0
    assert [r["event"] for r in read_log(log)] == ["a", "b"]
    for n in {fd, sink.fd, *taken}:
        os.close(n)
