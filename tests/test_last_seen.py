"""Where each process was when last seen (Process.last, read through model.last_seen): its last record's event,
time, target and signal, whatever that record was, checked against the log's own last record per process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wp_autotrace.analysis.fold.fold import build
from wp_autotrace.analysis.fold.model import last_seen
from wp_autotrace.analysis.read.logread import stream_logs

from .logs import T0, LogWriter

AC = "torch._inductor.async_compile:AsyncCompile"


def _log() -> LogWriter:
    """One process per kind of last record: a call left open, a call's return, a refused call, a return of no known
    call, a call without a target, a second return of one call, a signal sent; and a process_exit after a call."""
    w = LogWriter()
    for i, pid in enumerate(range(100, 109)):
        w.add(i * 0.01, pid, 1, "main", "process_start", argv=["train.py"], forked=False, run="r1", root_pid=100)
    w.add(1, 100, 1, "main", "call", target=f"{AC}.wait_pool_ready", call_id=1, thread="MainThread")
    w.add(1, 101, 1, "main", "call", target=f"{AC}.wait_pool_ready", call_id=1, thread="MainThread")
    w.add(1.5, 101, 1, "main", "return", call_id=1, duration_s=0.5)
    w.add(1, 102, 1, "main", "call", target=f"{AC}.warm_pool", call_id=1, thread="MainThread")
    w.add(1.2, 102, 1, "main", "blocked", target=f"{AC}.wakeup", call_id=2, thread="MainThread", action="refused")
    w.add(1, 103, 1, "main", "call", target=f"{AC}.wait_pool_ready", call_id=1, thread="MainThread")
    w.add(1.3, 103, 1, "main", "return", call_id=7, duration_s=0.1)
    w.add(1, 104, 1, "main", "call", call_id=1, thread="MainThread")
    w.add(1, 105, 1, "main", "call", target=f"{AC}.wait_pool_ready", call_id=1, thread="MainThread")
    w.add(1.1, 105, 1, "main", "return", call_id=1, duration_s=0.1)
    w.add(1.2, 105, 1, "main", "return", call_id=1, duration_s=0.2)
    w.add(1, 106, 1, "main", "call", target=f"{AC}.wait_pool_ready", call_id=1, thread="MainThread")
    w.add(1.4, 106, 1, "main", "signal_sent", target=107, signal=15, how="kill")
    w.add(1, 107, 1, "main", "call", target=f"{AC}.wait_pool_ready", call_id=1, thread="MainThread")
    w.add(2, 107, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_last_seen_is_the_last_record_of_each_process(tmp_path: Path) -> None:
    w = _log()
    model = build(stream_logs([str(w.write(tmp_path / "last.jsonl"))]).records)
    # The log's own reading: each pid's last record that is not its process_exit.
    want: dict[int, tuple[Any, ...]] = {}
    for r in w.lines:
        if r["event"] != "process_exit":
            want[r["pid"]] = (r["event"], r["ts"], r.get("target"), r.get("signal"))
    got = {p.pid: last_seen(p) for p in model.processes}
    assert got == want
    assert got[104] == ("call", T0 + 1, None, None)  # no target: not the "?" its Call is labelled with
    assert got[103][0] == "return" and got[105][:2] == ("return", T0 + 1.2)
    assert got[108] == ("process_start", T0 + 0.08, None, None)
