"""What the watcher reads of the run's cgroups (watcher/cgroups.py), on made cgroup trees and a made log: when it
reads a pids limit's count of refusals again, and which limits apply to a cgroup at all."""

from __future__ import annotations

import json
from pathlib import Path

from wp_autotrace.watcher.cgroups import MEMORY_KIND, PIDS_KIND, Cgroups
from wp_autotrace.watcher.logwatch import LogWatch

from .conftest import read_log
from .test_sampler import FakeReader, make_watcher


def _put(root: Path, rel: str, name: str, text: str) -> None:
    (root / rel).mkdir(parents=True, exist_ok=True)
    (root / rel / name).write_text(text + "\n")


def _error_return(pid: int, ts: float, error: str) -> bytes:
    """A return record as the sink writes it (compact JSON) whose call raised `error`."""
    return json.dumps({"v": 1, "event": "return", "ts": ts, "pid": pid, "host": "h", "role": "main", "seq": 5,
                       "call_id": 3, "duration_s": 0.1, "error": error}, separators=(",", ":")).encode() + b"\n"


def test_a_pids_limits_count_is_read_again_as_the_watcher_reads_a_members_job_error(tmp_path: Path) -> None:
    """The failure's cause can only be in a count of refusals read by the time the failure is seen: as the watcher
    reads a run member's return record whose call raised a pool job's error (SubprocException), it reads every pids
    limit's pids.events again and writes it (`after`: that record's ts), once per run. Not for another process's
    error (not a member), nor for an error that is no job's; the count at the watcher's end (`final`) stays."""
    cg = tmp_path / "cg"
    _put(cg, "pids/box", "pids.max", "24")
    _put(cg, "pids/box", "pids.events", "max 0")
    r = FakeReader()
    r.add(100, 1, 1.0)
    w, log = make_watcher(tmp_path, r)
    pids = Cgroups(PIDS_KIND, str(cg))
    w.cgroups = (Cgroups(MEMORY_KIND, str(cg)), pids)
    assert (pids.join({"pid": 100}, b"12:pids:/box\n") or {}).get("refused") == 0
    w.tree.log = LogWatch(w.sink.fd, str(log), "h", "run1", 100, log.stat().st_size)
    w.tick()
    _put(cg, "pids/box", "pids.events", "max 3")
    with open(log, "ab") as f:
        f.write(_error_return(555, 2.0, "SubprocException: An exception occurred in a subprocess: x"))  # not ours
        f.write(_error_return(100, 2.05, "ValueError: bad"))  # no pool job's
    w.tick()
    assert not [x for x in read_log(log) if x["event"] == "pidcg"]
    with open(log, "ab") as f:
        f.write(_error_return(100, 2.1, "SubprocException: An exception occurred in a subprocess:\n\nName=k0"))
    w.tick()
    _put(cg, "pids/box", "pids.events", "max 7")
    with open(log, "ab") as f:  # a second failure: the first one's read stands
        f.write(_error_return(100, 2.3, "SubprocException: An exception occurred in a subprocess:\n\nName=k1"))
    w.tick()
    w.finish("run-ended")
    recs = [(x.get("after"), x.get("final"), x["refused"]) for x in read_log(log) if x["event"] == "pidcg"]
    assert recs == [(2.1, None, 3), (None, True, 7)], recs
