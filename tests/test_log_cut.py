"""A log cut mid-record (its disk full, EFBIG): the main's process_exit may be among the records lost with the cut,
so its missing exit is told as a lost record, never as a kill or os._exit (report.py mark_log_cut)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.fold.verdict import NO_WATCHER, WATCHER_START_LATE_S, Reader, this_host
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze

from .logs import T0, LogWriter, report, start, watcher
from .test_end_unseen import GONE_PID, killed_before_the_watcher

# What a full disk leaves: the first bytes of the next record, then nothing (no newline).
CUT = '{"v":1,"event":"process_exit","ts":%r,"pid":101,"ppid":100,"host":"h1","role":"child","se'


def _run(tmp_path: Path, cut: bool, waited: bool = False, ended: bool = True) -> dict[str, Any]:
    """A main with a child; the main's end seen by the watcher (ended) or not, no process_exit; `run` waited for
    status 3 (waited); the log's last line cut mid-record (cut)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    start(w, 1.0, 101, 100, "child")
    watcher(w, 1.2, "tree", count=2, ended=[], started=[{"pid": 100, "ppid": 1, "name": "python", "create_time": T0,
                                                         "rss": 5 << 20}])
    if ended:
        watcher(w, 3.0, "tree", count=1, started=[], ended=[{"pid": 100, "create_time": T0, "end": T0 + 2.9}])
    if waited:
        w.add(3.1, 50, 1, "run", "run_exit", root_pid=100, status=3, forwarded=[])
    path = w.write(tmp_path / "log.jsonl")
    if cut:
        with open(path, "a") as f:
            f.write("\n" + CUT % (T0 + 3.2))
    return analyze(read_logs([str(path)]), None, None, None)


def _told(rep: dict[str, Any]) -> str:
    return rep["answer"] + json.dumps(rep["findings"])


def test_a_cut_log_tells_the_main_s_missing_exit_as_lost_not_killed(tmp_path: Path) -> None:
    rep = _run(tmp_path, cut=True)
    assert rep["input"]["skipped"] == {"truncated last line": 1}
    (run,) = rep["runs"]
    assert run["records_lost"] == 1, run
    assert "os._exit" not in _told(rep) and "records of the run were lost" in _told(rep), rep["answer"]
    assert "The main process ended without a process_exit in the log, where records were lost." in rep["answer"]
    killed = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert "give the log's filesystem room" in killed["advice"], killed
    (tmp_path / "whole").mkdir()
    whole = _run(tmp_path / "whole", cut=False)  # the same log whole: the cut is the evidence
    assert whole["runs"][0]["records_lost"] == 0 and "os._exit" in _told(whole), whole["answer"]


def test_a_cut_log_under_run_is_no_os_exit(tmp_path: Path) -> None:
    """`run` saw the program exit 3 (it called sys.exit(3)); its process_exit was lost to the full disk."""
    rep = _run(tmp_path, cut=True, waited=True)
    root = next(f for f in rep["findings"] if f["kind"] == "root-os-exit")
    assert "without a process_exit in the log" in root["text"] and "exit handlers" not in root["text"], root
    (tmp_path / "whole").mkdir()
    whole = _run(tmp_path / "whole", cut=False, waited=True)
    root = next(f for f in whole["findings"] if f["kind"] == "root-os-exit")
    assert "without running its exit handlers (os._exit" in root["text"], root


def test_a_verdict_missing_from_a_cut_log_waits_for_room_not_for_time(tmp_path: Path) -> None:
    """A main gone before any watcher record, its log cut mid-record (a full disk): no watcher record is no proof that
    none ran (its start may be among the lost, and the watcher keeps a refused verdict until the log takes records),
    so past the wait for a watcher the verdict stays pending, said as the full log's and with its one fix; the same
    log whole: no verdict will come, no watcher ran."""
    late = Reader(T0 + 0.5 + WATCHER_START_LATE_S + 1, this_host())
    w = killed_before_the_watcher()
    cut = w.write(tmp_path / "log.jsonl")
    with open(cut, "a") as f:
        f.write("\n" + CUT.replace('"pid":101', f'"pid":{GONE_PID}') % (T0 + 0.6))
    rep = analyze(read_logs([str(cut)]), reader=late)
    (run,) = rep["runs"]
    assert run["verdict_pending"] and not run["no_verdict"] and run["records_lost"] == 1, run
    pending = next(f for f in rep["findings"] if f["kind"] == "verdict-pending")
    assert "Verdict not written yet: the log's disk was full" in pending["text"], pending
    assert pending["advice"].startswith("give the log's filesystem room"), pending
    assert "Verdict not written yet: the log's disk was full" in rep["answer"], rep["answer"]
    whole = report(killed_before_the_watcher(), tmp_path, reader=late)
    assert whole["runs"][0]["no_verdict"].startswith(NO_WATCHER), whole["runs"]
