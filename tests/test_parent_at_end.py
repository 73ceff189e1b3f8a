"""A parent found after the last record (fold/finish.py) is the process of the child's ppid that had started by
the child's start, never a later owner of that pid: looked up at the log's end, the latest process of the pid
is whoever took it last."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wp_autotrace.analysis.fold.fold import build
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.cli.main import main

from .logs import T0, LogWriter, start, watcher


def _entry(pid: int, ppid: int, at: float, name: str) -> dict[str, object]:
    return {"pid": pid, "ppid": ppid, "name": name, "cmd": name, "create_time": T0 + at, "rss": 10 << 20}


def test_a_parent_read_after_its_child_is_not_a_later_owner_of_its_pid(tmp_path: Path) -> None:
    """A traced child (pid 400) of an untraced launcher (pid 300, started at 0.5) writes its process_start before
    the watcher lists its launcher; the launcher ends, and pid 300 is taken at 5 by an unrelated process. The
    child's parent is the launcher (it was the later owner: started 4 s after the child)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main", create_time=T0)
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    start(w, 1.0, 400, 300, "child", create_time=T0 + 1.0)
    watcher(w, 1.1, "tree", count=3, started=[_entry(300, 100, 0.5, "launcher"), _entry(400, 300, 1.0, "python")],
            ended=[])
    watcher(w, 2.0, "tree", count=2, started=[], ended=[{"pid": 300, "create_time": T0 + 0.5, "end": T0 + 2.0}])
    watcher(w, 5.1, "tree", count=3, started=[_entry(300, 100, 5.0, "other")], ended=[])
    w.add(6, 400, 1, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(7, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    model = build(read_logs([str(w.write(tmp_path / "log.jsonl"))]).records)
    child = next(p for p in model.processes if p.pid == 400)
    assert child.parent is not None and child.parent.name == "launcher", child.parent and child.parent.name
    other = next(p for p in model.processes if p.name == "other")
    assert child not in other.children


def test_a_shuffled_launch_is_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    """One torchrun launch's log with its lines shuffled (fixtures/odd/shuffled_launch.jsonl), read as the command
    reads it (a stream, reordered within its window): records of sidecar 3100 and of its worker 3102 read before
    their process_start leave processes known only from records, with no create time. A first record is no start:
    a parent looked up at the log's end is never such a process where one with a create time had started by
    then, and the report holds one run, not a phantom one (run "?", "end not seen") of the record-only ones."""
    log = Path(__file__).parent / "fixtures" / "odd" / "shuffled_launch.jsonl"
    assert main(["report", "--json", str(log)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rep["runs"]] == ["r1"], [r["id"] for r in rep["runs"]]
