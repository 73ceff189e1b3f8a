"""No verb without its evidence (docs/evidence.md, issue #30): over every finding and Answer the report can
write (each finding kind's scenario in tests/test_model.py, plus the endings' own), a claim of how something
ended is said only where the report's own endings (from the log's records) back it:

- "shut it down" only when a pool's ending is `shutdown-completed` (its request returned, its sidecar ended
  after it);
- "killed by SIGNAME" only when some process's ending names that signal, with evidence;
- "OOM killer" as a cause only with an `oom-kill` ending (never "look for an OOM kill" as a guess);
- never "crash".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .logs import PLUGIN, SP, T0, LogWriter, call, report, start, watcher
from .test_model import SCENARIOS, clean_run

SHUT = re.compile(r"\bshut (it|them) down\b")
KILLED_BY = re.compile(r"\bkilled by (SIG[A-Z0-9]+)")
OOM_CLAIM = re.compile(r"by the OOM killer|OOM killer ended|look for an OOM kill|an OOM kill\b")
CRASH = re.compile(r"\bcrash", re.I)


def _texts(rep: dict[str, Any]) -> list[str]:
    return [rep["answer"], *(f["text"] for f in rep["findings"]), *(f["advice"] for f in rep["findings"])]


def check_rule(rep: dict[str, Any]) -> list[str]:
    """Every claim in the report's words that its endings do not back."""
    pools = [p["ending"]["kind"] for p in rep["pools"]]
    signals = {p["ending"]["signal"] for p in rep["processes"] if p["ending"]["evidence"] and p["ending"]["signal"]}
    signals |= {f"SIG{r['ended_by'][3:]}" for r in rep["runs"] if r.get("ended_by")}
    ooms = [p for p in rep["processes"] if p["ending"]["kind"] == "oom-kill"]
    bad = []
    for text in _texts(rep):
        if SHUT.search(text) and "shutdown-completed" not in pools:
            bad.append(f"'shut it down' with no completed shutdown: {text[:160]}")
        for sig in KILLED_BY.findall(text):
            if sig not in signals:
                bad.append(f"'killed by {sig}' with no evidence of it: {text[:160]}")
        if OOM_CLAIM.search(text) and not ooms:
            bad.append(f"an OOM kill said with no oom record: {text[:160]}")
        if CRASH.search(text):
            bad.append(f"'crash' is never evidence: {text[:160]}")
    for p in rep["processes"]:
        e = p["ending"]
        if e["kind"] not in ("unknown", "running") and not e["evidence"]:
            bad.append(f"process {p['pid']} ending {e['kind']} without evidence")
    for p in rep["pools"]:
        e = p["ending"]
        if e["kind"] not in ("unknown", "running") and not e["evidence"]:
            bad.append(f"pool of {p['sidecar_pid']} ending {e['kind']} without evidence")
    return bad


def group_signalled() -> LogWriter:
    """A pool whose sidecar and worker ended together by SIGTERM (their zombie statuses) while main lived;
    torch's atexit then found it dead: the words say the signal and 'found it already dead', not 'shut it
    down', and no OOM."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    watcher(w, 1.6, "tree", count=3, ended=[], started=[
        {"pid": 100, "ppid": 1, "name": "python", "cmd": "main", "create_time": T0, "rss": 5, "pgid": 100},
        {"pid": 200, "ppid": 100, "name": "python", "cmd": "sidecar", "create_time": T0 + 1.2, "rss": 5,
         "pgid": 100, "role": "compile-sidecar"},
        {"pid": 201, "ppid": 200, "name": "python", "cmd": "sidecar", "create_time": T0 + 1.3, "rss": 5,
         "pgid": 100, "role": "compile-worker"}])
    watcher(w, 2.0, "tree", count=1, started=[], ended=[{"pid": 200, "create_time": T0 + 1.2, "end": T0 + 2.0},
                                                         {"pid": 201, "create_time": T0 + 1.3, "end": T0 + 2.0}],
            zombies=[{"pid": 200, "create_time": T0 + 1.2, "ppid": 100, "since": T0 + 2.0, "status": 15}])
    w.add(3, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=2, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN, pending_jobs=[], pool_running=True)
    w.add(3.1, 100, 1, "main", "return", call_id=2, duration_s=0.1, sidecar_pid=200, sidecar_returncode=-15)
    w.add(4, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


ALL = {**SCENARIOS, "group-signalled": group_signalled, "clean": clean_run}


@pytest.mark.parametrize("name", sorted(ALL))
def test_no_verb_without_its_evidence(name: str, tmp_path: Path) -> None:
    rep = report(ALL[name](), tmp_path)
    assert not check_rule(rep)


def test_the_rule_fails_on_a_claim_without_evidence(tmp_path: Path) -> None:
    """The check itself: a report that says 'shut it down' or 'killed by SIGTERM' without the evidence fails."""
    rep = report(clean_run(), tmp_path)
    rep["pools"][0]["ending"]["kind"] = "shutdown-found-dead"
    rep["answer"] += " torch's atexit shut it down; the sidecar was killed by SIGTERM; look for an OOM kill."
    assert len(check_rule(rep)) == 3


def test_a_group_signal_is_said_with_its_evidence(tmp_path: Path) -> None:
    rep = report(group_signalled(), tmp_path)
    side = next(p for p in rep["processes"] if p["pid"] == 200)
    assert side["ending"]["kind"] == "signal" and side["ending"]["signal"] == "SIGTERM" and side["ending"]["group"]
    (pool,) = rep["pools"]
    assert pool["ending"]["kind"] == "shutdown-found-dead"
    assert "shut it down" not in rep["answer"] and "killed by SIGTERM" in rep["answer"]
    died = next(f for f in rep["findings"] if f["kind"] == "pool-died")
    # main 100 leads group 100: the fix is a stop to it alone, never "its own session" (it has one)
    assert "process group" in died["text"] and "KillMode=mixed" in died["advice"], died
    assert "own session" not in died["advice"], died["advice"]


def test_a_sidecar_the_watcher_saw_gone_just_before_the_request_was_found_dead(tmp_path: Path) -> None:
    """The watcher missed the SIGKILLed sidecar 40 ms before torch's atexit asked the pool to stop (on a loaded
    host: test_reliability_fork's killed sidecar): the watcher's end comes after the real one, so the pool was
    dead before the request, however close. It is found dead (pool-died), never 'shut down'."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    watcher(w, 1.6, "tree", count=2, ended=[], started=[
        {"pid": 100, "ppid": 1, "name": "python", "cmd": "main", "create_time": T0, "rss": 5},
        {"pid": 200, "ppid": 100, "name": "python", "cmd": "sidecar", "create_time": T0 + 1.2, "rss": 5,
         "role": "compile-sidecar"}])
    watcher(w, 2.96, "tree", count=1, started=[], ended=[{"pid": 200, "create_time": T0 + 1.2, "end": T0 + 2.96}])
    w.add(3, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=2, thread="MainThread",
          stack=[PLUGIN], caller=PLUGIN, pending_jobs=[], pool_running=True)
    w.add(3.01, 100, 1, "main", "return", call_id=2, duration_s=0.01, sidecar_pid=200)
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    (pool,) = rep["pools"]
    assert pool["ending"]["kind"] == "shutdown-found-dead", pool["ending"]
    assert any(f["kind"] == "pool-died" for f in rep["findings"]) and not check_rule(rep)
