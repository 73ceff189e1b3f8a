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

import pytest

from .conftest import report_json, wait_for_watcher
from .logs import T0, LogWriter, report, start, watcher

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


def test_exports_say_which_rows_no_reading_joined_to_the_host(tmp_path: Path) -> None:
    """A real `unshare -p -f` child (tests/test_pidns_child.py's SIGNALLED: the namespace's pid 1 starts pid 2 and
    SIGTERMs it), its log as written (the watcher read the namespace) and without the watcher's readings of it.
    Read, the Chrome tracks and OTLP resources are the host pids the program read with psutil (the test's truth);
    unread, the namespace's rows are shown by their namespace pids as if they were the host's ("child 1": the
    host's pid 1 is init); each now says its pid is its namespace's and which host pid it may be."""
    from wp_autotrace.analysis.export.chrome import to_chrome_trace
    from wp_autotrace.analysis.export.otlp import MAY_BE_ATTR, NAMESPACE_ATTR, to_otlp
    from wp_autotrace.analysis.read.logread import read_logs

    from .test_pidns_child import SIGNALLED, pytestmark, run_traced

    if pytestmark.args[0]:
        pytest.skip(pytestmark.kwargs["reason"])
    done, log = run_traced(tmp_path, SIGNALLED)
    assert done.returncode == 0 and done.stdout.endswith("rc 15\n"), done.stdout + done.stderr
    hosts = json.loads(done.stdout.splitlines()[0])  # the namespace's pid 1 and 2, by host pid (psutil)
    records = wait_for_watcher(log)
    # pid 2, SIGTERMed once sampled, may end before its tracer wrote a record: only those that wrote have rows
    wrote = sorted({r["pid"] for r in records if r["event"] == "process_start" and "pidns" in r})
    assert wrote[:1] == [1], wrote  # the sender
    unread = tmp_path / "unread.jsonl"
    unread.write_text("".join(re.sub(r',"pidns":\d+', "", x) if '"event":"tree"' in x else x
                              for x in log.read_text().splitlines(keepends=True)))

    def tracks(path: Path) -> dict[int, str]:
        names: dict[int, str] = {}
        for e in to_chrome_trace(read_logs([str(path)]))["traceEvents"]:
            if e.get("name") == "process_name":
                names[e["pid"]] = e["args"]["name"]  # the last one a track gets is its name
        return names

    def resources(path: Path) -> list[dict[str, str]]:
        return [{a["key"]: next(iter(a["value"].values())) for a in rs["resource"]["attributes"]}
                for rs in to_otlp(read_logs([str(path)]))["resourceSpans"]]

    read_names = sorted(tracks(log).values())
    assert [f"child {hosts[n - 1]}" for n in wrote] == [n for n in read_names if n.startswith("child")], read_names
    assert not any(NAMESPACE_ATTR in r for r in resources(log)), resources(log)
    names = tracks(unread)
    for nspid in wrote:
        said = f"child {nspid} (its pid namespace's; may be host pid {hosts[nspid - 1]}, not proven)"
        assert names[nspid] == said, names
    spaced = {int(r["process.pid"]): r for r in resources(unread) if NAMESPACE_ATTR in r}
    assert sorted(spaced) == wrote, resources(unread)
    assert [spaced[n][MAY_BE_ATTR] for n in wrote] == [str(hosts[n - 1]) for n in wrote], spaced


NS = 4026532999  # a pid namespace other than the host's first


def _namespace_kills(target: int, victim_exits: bool) -> LogWriter:
    """main 100 (the host's first namespace) starts `unshare -p -f python` (host 300, its namespace's pid 1, which
    no reading joined: the watcher's entry names no namespace), whose child is its namespace's pid `target`; pid 1
    SIGKILLs `target` there (a victim that wrote its exit record first: killed in its teardown). The main also
    left an untraced host process 400 running, which ends 0.5 s after the main's end."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    w.add(0.2, 1, 0, "child", "process_start", pidns=NS, argv=["python", "ns.py"], python="3.11.7", forked=False,
          env={}, run="r1", root_pid=100)
    w.add(0.3, target, 1, "child", "process_start", pidns=NS, argv=["python", "victim.py"], python="3.11.7",
          forked=False, env={}, run="r1", root_pid=100)
    seen = {"pid": 300, "ppid": 100, "name": "python", "cmd": "python ns.py", "create_time": T0 + 0.2,
            "rss": 5 << 20, "nspid": 1}
    other = {"pid": 400, "ppid": 100, "name": "sleep", "cmd": "sleep 60", "create_time": T0 + 0.4, "rss": 1 << 20}
    watcher(w, 0.5, "tree", count=3, ended=[], started=[{"pid": 100, "ppid": 1, "name": "python", "cmd": "main",
                                                         "create_time": T0, "rss": 5 << 20}, seen, other])
    if victim_exits:
        w.add(1.0, target, 1, "child", "process_exit", pidns=NS, how="exit", code=0, counts={}, dropped=0)
    w.add(1.02, 1, 0, "child", "signal_sent", pidns=NS, how="kill", target=target, signal=9,
          frames=[{"file": "/home/u/ns.py", "line": 7, "func": "<module>"}])
    w.add(1.5, 1, 0, "child", "process_exit", pidns=NS, how="exit", code=0, counts={}, dropped=0)
    w.add(2.0, 100, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0, below=[], below_count=0)
    watcher(w, 2.1, "tree", count=1, started=[], ended=[{"pid": 300, "create_time": T0 + 0.2, "end": T0 + 1.6}])
    watcher(w, 2.4, "leftover", how="root-exit", count=1, pids=[400], procs=[other])
    watcher(w, 2.5, "tree", count=0, started=[], ended=[{"pid": 400, "create_time": T0 + 0.4, "end": T0 + 2.5}])
    watcher(w, 2.6, "watcher_exit", reason="run-ended", samples=5)
    return w


def test_a_signal_sent_in_an_unjoined_namespace_names_its_pids_as_the_namespaces(tmp_path: Path) -> None:
    """The sender's pid 1 is its namespace's, not the host's init: the words say so, and the target pid too."""
    rep = report(_namespace_kills(2, True), tmp_path)
    row = next(p for p in rep["processes"] if p["host"] != "h1" and p["pid"] == 2)
    words, evidence = row["ending"]["words"], " ".join(row["ending"]["evidence"])
    assert "sent by child 1 (pid 1 in its pid namespace, not known on the host) (os.kill" in words, words
    assert "to pid 2 of its pid namespace at" in evidence, evidence


def test_a_namespace_pid_signalled_is_no_host_process_of_that_number(tmp_path: Path) -> None:
    """The namespace's pid 1 SIGKILLs its pid 400; the host's 400 (the main's leftover, untraced) ends 0.5 s after
    the main. Read as the host's, that signal made 400 one that ended with the main, not left running."""
    rep = report(_namespace_kills(400, False), tmp_path)
    assert rep["leftover_pids"] == [400], rep["leftover_pids"]


def test_a_namespace_row_with_no_end_is_not_told_it_had_no_watcher(tmp_path: Path) -> None:
    """The namespace's pid 400 wrote no exit: its end is unseen. Its run's watcher wrote on its host throughout, but
    no entry of it is known to be this process; the words said "no watcher record of its run on its host"."""
    rep = report(_namespace_kills(400, False), tmp_path)
    row = next(p for p in rep["processes"] if p["host"] != "h1" and p["pid"] == 400)
    words = row["ending"]["words"]
    assert row["ending"]["kind"] == "end-unseen" and "no watcher record of its run" not in words, row["ending"]
    assert "no watcher entry is known to be it (its pid is its pid namespace's" in words, words
