"""Traced pythons in pid namespaces the watcher could not read (another user's processes, a watcher without the
right to read /proc/PID/ns/pid): their records are filed under "HOST (pid namespace N)", and nothing proves which
host process wrote them, so nothing is merged. The report then says so, never the false alternatives: the host
pythons are "traced: not known" (not "untraced": their records may be the namespace rows'), each process is
counted once, and the namespaces are no hosts of their own.

The log is tests/fixtures/odd/pidns_three_in_one_grain.jsonl (a real run: four `unshare -pf python` children at
once, three of their pythons in one 10 ms grain) with the watcher's readings of each process's namespace removed
from its tree entries. The truth is the watcher's own entries, read here: the host pids it saw, each one's
namespace pid and create time."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .conftest import report_json

UNREAD = Path(__file__).resolve().parent / "fixtures" / "odd" / "pidns_unread_namespaces.jsonl"


def _entries() -> tuple[str, dict[int, dict]]:
    lines = [json.loads(x) for x in UNREAD.read_text().splitlines() if x.strip()]
    seen = {e["pid"]: e for r in lines if r["event"] == "tree" for e in r.get("started", ())}
    assert not any("pidns" in e for e in seen.values())  # the unknown case: no namespace was read
    return lines[0]["host"], seen


def test_host_pythons_in_unread_namespaces_are_traced_not_known_and_counted_once() -> None:
    host, seen = _entries()
    inner = {pid: e for pid, e in seen.items() if e.get("nspid") == 1}
    assert len(seen) == 9 and len(inner) == 4  # the main, four unshares, four pythons
    rep = report_json(UNREAD)
    assert rep["processes_started"] == len(seen), rep["processes_started"]
    assert rep["costs"]["processes"] == len(seen) and [r["processes"] for r in rep["runs"]] == [len(seen)]
    assert [r["hosts"] for r in rep["runs"]] == [[host]], [r["hosts"] for r in rep["runs"]]
    rows = rep["processes"]
    for pid in inner:
        row = next(p for p in rows if p["pid"] == pid and p["host"] == host)
        assert row["traced"] is None, row
    # each namespace row names the host pythons of its create time (the watcher's entries), and no other
    ns_rows = [p for p in rows if p["host"] != host]
    assert len(ns_rows) == 4 and all(p["traced"] and p["pid"] == 1 for p in ns_rows), ns_rows
    for row in ns_rows:
        same = sorted(pid for pid, e in inner.items() if e["create_time"] == row["create_time"])
        assert row["host_pids"] == same, (row["host_pids"], same)


def test_a_pool_in_an_unread_namespace_is_not_told_untraced(tmp_path: Path) -> None:
    """tests/fixtures/odd/pidns_pool.jsonl (a pool made in a namespace: its creator, sidecar and two workers are
    the namespace's pids 1, 2, 5, 7) without the watcher's namespace readings: its pool is the namespace rows'
    recorded pool, and the same processes seen by host pid are "traced: not known", never a second pool that
    "ran untraced" (the Answer said so)."""
    pool_log = UNREAD.parent / "pidns_pool.jsonl"
    log = tmp_path / "pool.jsonl"
    log.write_text("".join(re.sub(r',"pidns":\d+', "", x) if '"event":"tree"' in x else x
                           for x in pool_log.read_text().splitlines(keepends=True)))
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    seen = {e["pid"]: e for r in lines if r["event"] == "tree" for e in r.get("started", ())}
    inner = {pid for pid, e in seen.items() if "nspid" in e}
    assert len(seen) == 6 and len(inner) == 4 and not any("pidns" in e for e in seen.values())
    rep = report_json(log)
    assert rep["untraced_pools"] == [] and len(rep["pools"]) == 1, rep["untraced_pools"]
    assert "untraced" not in " ".join(rep["answer"].split()), rep["answer"]
    assert {p["pid"] for p in rep["processes"] if p["traced"] is None} == inner
    assert rep["processes_started"] == len(seen)


def test_the_text_says_not_known_where_it_said_untraced() -> None:
    _, seen = _entries()
    import contextlib
    import io

    from wp_autotrace.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", "--verbose", str(UNREAD)]) == 0
    text = out.getvalue()
    pythons = [pid for pid, e in seen.items() if e.get("nspid") == 1]
    for pid in pythons:
        line = next(x for x in text.splitlines() if f" {pid} " in x and "json.dump" in x)
        assert "(traced: not known)" in line and "untraced" not in line, line
    assert "processes seen 9, exited 9," in text and "pid namespace" not in text.split("== Findings")[0], text
