"""The watcher's process-tree sampling: readers, identity, deltas, chunking (no torch).

These read the raw watcher records (`tree`, `leftover`), never the report.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.common.procfs import ProcReader, PsutilReader, own_create_time
from wp_autotrace.runtime.sink import MAX_RECORD_BYTES, Sink
from wp_autotrace.watcher.logwatch import LogWatch
from wp_autotrace.watcher.main import PART_BYTES, Watcher, pack

from .clock import boot_now, started
from .conftest import clean_env, events, read_log, run_python, wait_for_watcher, wait_until

# tree_lists(key, pid, name=None): wait until a watcher `tree` record lists pid in its `key` list, under that
# name if one is given (bounded: 120 s, then the test's own checks say what is missing). The program waits for
# what the watcher saw, not for a guessed time.
TREE_LISTS = '''
def tree_lists(key, pid, name=None):
    import json, os, time
    deadline = time.monotonic() + 120  # a niced watcher on a loaded box: wait for the event, bounded by time
    while time.monotonic() < deadline:
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            lines = [line for line in f if b'"tree"' in line]
        for line in lines:
            try:
                if any(e["pid"] == pid and name in (None, e.get("name"))
                       for e in json.loads(line).get(key, [])):
                    return
            except ValueError:
                continue  # a line being written
        time.sleep(0.02)
'''
ORPHANER = TREE_LISTS + textwrap.dedent('''
    import subprocess, sys
    # A child that starts a grandchild (not Python) and exits once the watcher has seen the grandchild under
    # it: the grandchild is re-parented, as sidecar chains are. It leaves the session, so the test
    # harness's kill of the session does not end it before the watcher looks. "Seen" is seen as sleep: a
    # first look between fork and exec lists it under the child's name, and the exec, seen only after the
    # child's exit on a loaded box, is listed again with the new parent.
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1] +
                              "import subprocess as s; p = s.Popen(['sleep', '30'], stdout=s.DEVNULL,"
                              " stderr=s.DEVNULL, start_new_session=True); tree_lists('started', p.pid, 'sleep')"])
    child.wait()
    tree_lists("ended", child.pid)  # the watcher has sampled the tree without the child: the orphan stays
    print("main done")
''')


def test_orphan_is_tracked_and_left_over(tmp_path: Path, log: Path) -> None:
    """A re-parented grandchild stays in the run and is in the root-exit leftover, with its new parent."""
    script = tmp_path / "orphaner.py"
    script.write_text(ORPHANER)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0.02",
                    WP_AUTOTRACE_LINGER="0")
    res = run_python([str(script), TREE_LISTS], env, timeout=300)
    assert res.returncode == 0 and res.stdout == "main done\n", res.stderr
    recs = wait_for_watcher(log)
    root, child = (r["pid"] for r in events(recs, "process_start"))
    # its first listing as sleep, the one the child waited for: the watcher lists it again where a later look
    # shows more (a first look inside its exec read its name but no command line yet), by then re-parented
    sleepers = [p for tree in events(recs, "tree") for p in tree["started"] if p["name"] == "sleep"]
    assert len({p["pid"] for p in sleepers}) == 1 and sleepers[0]["ppid"] == child, sleepers
    left = [r for r in events(recs, "leftover") if r["how"] == "root-exit"]
    assert [r["pids"] for r in left] == [[sleepers[0]["pid"]]]
    assert left[0]["procs"][0]["ppid"] not in {child, root}, left  # re-parented, still seen
    os.kill(sleepers[0]["pid"], signal.SIGKILL)  # it left the session: the harness would not kill it


@pytest.mark.parametrize("reader_cls", [ProcReader, PsutilReader])
def test_readers_read_a_childs_ppid_name_groups_and_start(reader_cls: type) -> None:
    """Both readers read a child's ppid, name, groups and start time right (the start: on the test's own clock).

    The test's clock is tests/clock.py's, read anew, never psutil's create time: psutil 5.x keeps the boot time it
    first read, so after a wall-clock step its create times are off by the step."""
    child = subprocess.Popen(["sleep", "10"])
    try:
        reader = reader_cls()
        info = reader.stat(child.pid)
        assert info is not None
        assert info["ppid"] == os.getpid() and info["name"] == "sleep"
        assert abs(info["create_time"] - (started(child.pid) or 0.0)) < 1.5
        assert info["groups"] == (os.getpgid(0), os.getsid(0))
        assert child.pid in reader.pids() and os.getpid() in reader.pids()
        # /proc may show an empty command line for a moment right after exec.
        assert wait_until(lambda: reader.cmdline(child.pid), 5, interval=0.01, what="sleep's command line") \
            == "sleep 10"
        assert reader.stat(2**22 + 12345) is None
    finally:
        child.kill()
        child.wait()
    assert reader.stat(child.pid) is None  # reaped: gone


def test_own_create_time_is_the_readers() -> None:
    """process_start's create_time and the watcher's tree entry for the same process are equal."""
    assert own_create_time() == ProcReader().stat(os.getpid())["create_time"]  # type: ignore[index]


class FakeReader:
    """A process table the test edits: pid -> stat."""

    def __init__(self) -> None:
        self.procs: dict[int, dict[str, Any]] = {}

    def add(self, pid: int, ppid: int, ct: float, name: str = "p") -> None:
        self.procs[pid] = {"pid": pid, "ppid": ppid, "name": name, "create_time": ct, "rss": 1, "threads": 1,
                           "groups": (1, 1)}

    def pids(self) -> set[int]:
        return set(self.procs)

    def stat(self, pid: int) -> dict[str, Any] | None:
        info = self.procs.get(pid)
        return dict(info) if info else None

    def children(self, pid: int, threads: int) -> list[int] | None:
        if pid not in self.procs:
            return None
        return [c for c, info in self.procs.items() if info["ppid"] == pid]

    def argv(self, pid: int) -> list[str]:
        return [self.procs[pid]["name"], "a" * 300] if pid in self.procs else []

    def environ(self, pid: int) -> bytes:
        return b""


def make_watcher(tmp_path: Path, reader: FakeReader, root: int = 100) -> tuple[Watcher, Path]:
    log = tmp_path / "w.jsonl"
    watcher = Watcher(Sink(str(log), "h", "watcher"), "run1", root, 1.0, 0.1, 60, reader=reader)
    watcher.tree.exclude = set()  # the fake pids may be this test's own
    watcher.tree.stat_every = 1  # every tick re-reads every stat: pid reuse is seen at once
    return watcher, log


def deltas(log: Path) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    trees = events(read_log(log), "tree")
    return ([(p["pid"], p["create_time"]) for t in trees for p in t["started"]],
            [(p["pid"], p["create_time"]) for t in trees for p in t["ended"]])


def test_reused_pid_is_a_new_process_and_state_is_bounded(tmp_path: Path) -> None:
    """A pid reused between samples: the old one ends, the new one starts (with its subtree); ended ones are
    forgotten; a stranger (not under the root) never joins."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    r.add(500, 1, 1.5)  # not the run's
    w, log = make_watcher(tmp_path, r)
    w.tick()
    r.add(101, 100, 9.0)  # 101 ended and the pid was reused by a new child of the root
    r.add(102, 101, 9.5)  # ... which has a child of its own
    w.tick()
    assert deltas(log) == ([(100, 1.0), (101, 2.0), (101, 9.0), (102, 9.5)], [(101, 2.0)])
    del r.procs[102]
    del r.procs[101]
    w.tick()
    assert set(w.tree.live) == {100} and w.tick() is None and set(w.tree.live) == {100}
    assert deltas(log)[1] == [(101, 2.0), (101, 9.0), (102, 9.5)]
    trees = events(read_log(log), "tree")
    assert [t["count"] for t in trees] == [2, 3, 1] and all(t["run"] == "run1" and t["root_pid"] == 100 for t in trees)


def test_end_is_the_first_sample_without_it(tmp_path: Path) -> None:
    """The end written for a process is the time of the first sample where it was gone."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    w, log = make_watcher(tmp_path, r)
    w.tick()
    del r.procs[101]
    before = time.time()
    w.tick()
    (ended,) = [e for t in events(read_log(log), "tree") for e in t["ended"]]
    assert before <= ended["end"] <= time.time()


def test_an_exiting_process_is_not_listed_again(tmp_path: Path) -> None:
    """A process that is exiting (SIGKILLed, its memory released, not yet a zombie) shows arg_start 0 and an
    empty command line: that is no exec, so it keeps its entry (command line, role) until it ends; an exec (a
    new arg_start) is still listed again. (Before, every dying process was listed again with no command line
    and no role: a compile worker read then was a nameless leftover.)"""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    r.procs[101]["image"] = 5000
    argv = {101: ["python", "torch/_inductor/compile_worker/__main__.py"]}
    r.argv = lambda pid: argv.get(pid, ["p"]) if pid in r.procs else []  # type: ignore[method-assign]
    w, log = make_watcher(tmp_path, r)
    w.tick()
    (side,) = [e for t in events(read_log(log), "tree") for e in t["started"] if e["pid"] == 101]
    assert side["role"] == "compile-sidecar"
    r.procs[101]["image"], argv[101] = 0, []  # exiting: the kernel shows neither its image nor its argv
    w.tick()
    assert deltas(log)[0] == [(100, 1.0), (101, 2.0)] and w.tree.live[101]["role"] == "compile-sidecar"
    r.procs[101]["image"], argv[101] = 7000, ["python", "other.py"]  # an exec of the same name
    w.tick()
    assert deltas(log)[0] == [(100, 1.0), (101, 2.0), (101, 2.0)] and w.tree.live[101]["cmd"] == "python other.py"


def test_a_process_listed_again_says_whether_it_execd_or_renamed_itself(tmp_path: Path) -> None:
    """A process that renames itself (prctl PR_SET_NAME, setproctitle) keeps its image: listed again with its
    new name, `exec` false (the fold keeps its peak RSS); an exec (a new arg_start) is listed with `exec` true.
    Where its image was never read the watcher cannot tell, and says nothing."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0, name="python")
    r.add(102, 100, 3.0, name="python")
    r.procs[101]["image"] = 5000
    w, log = make_watcher(tmp_path, r)
    w.tick()
    r.procs[101]["name"] = r.procs[102]["name"] = "gunicorn"  # a rename: same image
    w.tick()
    r.procs[101]["image"], r.procs[101]["name"] = 7000, "gcc"  # an exec
    w.tick()
    # an exec into a setuid or file-capability program (ping, sudo) leaves the process non-dumpable: the kernel
    # shows its arg_start as 0 to the watcher, so whether the image changed is unknown, never "renamed"
    r.procs[101]["image"], r.procs[101]["name"] = 0, "ping"
    w.tick()
    listed = [(e["pid"], e.get("exec")) for t in events(read_log(log), "tree") for e in t["started"]
              if e["pid"] in (101, 102)]
    assert listed == [(101, None), (102, None), (101, False), (102, None), (101, True), (101, None)], listed


def test_a_worker_named_before_its_exec_keeps_its_role_after_it(tmp_path: Path) -> None:
    """A spawn pool's worker first listed between its fork and its exec (no command line yet), given the
    compile-worker role by its creator's worker_spawned record, is listed again once it exec'd: the new entry keeps
    that role, so the sampler reads it while it imports. (Before, the role went with the old entry, the record was
    used up, and the worker went unread until it ended: seen in a loaded run, a worker killed 60 s later unread.)
    A later process that took the pid is not given it."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    r.procs[101]["image"] = 5000
    argv: dict[int, list[str]] = {101: []}  # forked, its exec in progress: no command line yet
    r.argv = lambda pid: argv.get(pid, ["p"]) if pid in r.procs else []  # type: ignore[method-assign]
    w, log = make_watcher(tmp_path, r)
    w.tree.log = LogWatch(w.sink.fd, str(log), "h", "run1", 100, 0)
    with open(log, "ab") as f:  # the creator's record, as concurrent.futures started it
        f.write(b'{"v":1,"event":"worker_spawned","pid":100,"host":"h","role":"main","ts":2.05,"seq":9,'
                b'"worker_pid":101}\n')
    w.tick()
    assert w.tree.live[101]["role"] == "compile-worker"
    r.procs[101]["image"] = 7000  # the exec
    argv[101] = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork"]
    w.tick()
    listed = [e for t in events(read_log(log), "tree") for e in t["started"] if e["pid"] == 101]
    # the first listing was written before the record was read that tick; the second carries the role
    assert [e.get("role") for e in listed] == [None, "compile-worker"], listed
    assert w.tree.live[101]["role"] == "compile-worker" and "--multiprocessing-fork" in w.tree.live[101]["cmd"]
    r.add(101, 100, 9.0)  # it ended and a new child took the pid
    w.tick()
    assert "role" not in w.tree.live[101] and 101 not in w.tree.log.given


def test_big_sets_are_split_never_cut(tmp_path: Path) -> None:
    """3,000 processes with 300-char command lines: tree and leftover records split in parts, none lost."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    for pid in range(1000, 4000):
        r.add(pid, 100, 3.0)
    w, log = make_watcher(tmp_path, r)
    w.tick()
    del r.procs[100]
    w.tick()
    w.leftover("root-killed")
    recs = read_log(log)
    trees = events(recs, "tree")
    first = trees[:trees[0]["parts"]]  # the first sample: started (and rss, a heartbeat), in parts
    assert len(first) > 1 and [t["part"] for t in first] == list(range(1, len(first) + 1))
    assert sorted(p["pid"] for t in first for p in t["started"]) == [100, *range(1000, 4000)]
    left = events(recs, "leftover")
    assert len(left) > 1 and all(r["count"] == 3000 and r["how"] == "root-killed" for r in left)
    assert sorted(p for r in left for p in r["pids"]) == list(range(1000, 4000))
    with open(log, "rb") as f:
        assert all(len(line) <= MAX_RECORD_BYTES and b'"truncated"' not in line for line in f)


def test_pack_keeps_every_item_under_the_budget() -> None:
    """pack(): every item in exactly one part, each part's JSON within the budget."""
    items = [{"pid": i, "cmd": "c" * (i % 700)} for i in range(500)]
    parts = pack({"started": items, "ended": items[:10]})
    assert [x for p in parts for x in p["started"]] == items and sum(len(p["ended"]) for p in parts) == 10
    assert all(len(json.dumps(p, separators=(",", ":"))) <= PART_BYTES + 100 for p in parts)


def test_group_or_session_is_no_evidence(tmp_path: Path) -> None:
    """Processes that only share the root's group or session (slurmstepd's tasks, a pager under `set -m`)
    never join the run: each is listed once in a tree record's `possible`; children and claims join, with `via`."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.procs[100]["groups"] = (100, 100)
    w, log = make_watcher(tmp_path, r)
    w.tree.scan_every = 1
    w.tick()
    r.add(201, 50, 2.0)  # another task, put in the root's group by its launcher (pid 50)
    r.procs[201]["groups"] = (100, 7)
    r.add(202, 50, 2.0)  # a pager in the root's session
    r.procs[202]["groups"] = (9, 100)
    r.add(101, 100, 2.0)  # the root's own child
    r.add(301, 1, 2.0)  # an orphan whose process_start claims the run
    w.tree.log = LogWatch(-1, "", "h", "run1", 100, 0)
    w.tree.log.claimed[301] = 2.0
    w.tick()
    w.tick()
    del r.procs[100]
    w.tick()
    w.leftover("root-exit")
    recs = read_log(log)
    started = {p["pid"]: p["via"] for t in events(recs, "tree") for p in t["started"]}
    assert started == {100: "root", 101: "child", 301: "claim"}
    possible = [(p["pid"], p["via"]) for t in events(recs, "tree") for p in t.get("possible", [])]
    assert sorted(possible) == [(201, "group"), (202, "session")]
    assert {e["pid"] for t in events(recs, "tree") for e in t["ended"]} == {100}
    (left,) = events(recs, "leftover")
    assert sorted(left["pids"]) == [101, 301]


def test_one_clock_boot_time_to_the_microsecond() -> None:
    """ProcClock's boot time is the wall clock minus CLOCK_BOOTTIME (not btime's integer second), and one
    tolerance (same_process) names a process across our readers."""
    from wp_autotrace.common.procfs import SAME_START_S, ProcClock, same_process

    assert abs(ProcClock().boot - boot_now()) < 0.005
    assert same_process(1.0, 1.01) and not same_process(1.0, 1.0 + 2 * SAME_START_S)


def test_a_boot_time_read_across_a_preemption_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process preempted between its wall-clock and boot-clock reads (the wall clock jumps 40 ms inside the
    bracket) still computes the boot time another process does, within one SAME_START_S: the tight read wins."""
    from wp_autotrace.common import env
    from wp_autotrace.common.procfs import SAME_START_S

    truth = 1_000_000.0
    walls = iter([truth + 10.0, truth + 10.04, truth + 10.05, truth + 10.0501])  # 1st bracket preempted
    ups = iter([10.0, 10.0502])
    monkeypatch.setattr(env.time, "time", lambda: next(walls))
    monkeypatch.setattr(env.time, "clock_gettime", lambda _clock: next(ups))
    assert abs(env._bracketed_boot() - truth) < SAME_START_S / 10


def test_rss_heartbeats_only_on_a_move_or_keepalive(tmp_path: Path) -> None:
    """Idle processes write no rss between keep-alives; a move of >= 10% or >= 16 MiB is written at the
    next heartbeat; a keep-alive writes every live process's rss; the records stay plain tree records."""
    from wp_autotrace.watcher.main import RSS_MOVE_BYTES

    r = FakeReader()
    r.add(100, 1, 1.0)
    for pid in range(101, 151):
        r.add(pid, 100, 2.0)
        r.procs[pid]["rss"] = 100 << 20
    r.procs[150]["rss"] = 1 << 30
    w, log = make_watcher(tmp_path, r)
    w.tick()  # the first sample: everyone started, with rss (a keep-alive)

    def heartbeat() -> list[tuple[int, int]]:
        before = len(events(read_log(log), "tree"))
        w._last_heartbeat = 0.0  # a heartbeat is due
        w.tick()
        new = events(read_log(log), "tree")[before:]
        return [(e["pid"], e["rss"]) for t in new for e in t.get("rss") or ()]

    assert len(events(read_log(log), "tree")[0]["rss"]) == 51
    assert heartbeat() == []  # nothing moved: no record at all
    r.procs[101]["rss"] = 105 << 20  # 5%: not worth a line
    r.procs[102]["rss"] = 111 << 20  # 11%
    r.procs[150]["rss"] = (1 << 30) + RSS_MOVE_BYTES  # 1.6%, but 16 MiB
    assert heartbeat() == [(102, 111 << 20), (150, (1 << 30) + RSS_MOVE_BYTES)]
    assert heartbeat() == []  # measured from the value written, not re-sent
    w._last_keepalive = 0.0  # a keep-alive is due: everyone's, moved or not
    every = heartbeat()
    assert len(every) == 51 and (101, 105 << 20) in every


def test_verdict_follows_the_roots_exit_within_the_grace(tmp_path: Path) -> None:
    """Once the root's process_exit is in the log the watcher samples fast: the leftover is written within
    LEFTOVER_GRACE_S (and a few fast ticks) of the root's end, not an interval or a zombie's restat later."""
    from wp_autotrace.watcher.main import FAST_TICK_S, LEFTOVER_GRACE_S

    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    w, log = make_watcher(tmp_path, r)
    w.tree.stat_every = 5  # as in a real run: the root must not wait for its turn
    w.tree.interval = 0.5  # a slow sampler: the verdict must not wait for it
    w.linger = 1.0
    w.tree.log = LogWatch(w.sink.fd, str(log), "h", "run1", 100, 0)
    t = [0.0]
    marks: dict[str, float] = {}

    def sleep(d: float) -> None:
        t[0] += d
        if t[0] >= 1.0 and "exit" not in marks:
            marks["exit"] = t[0]
            with open(log, "ab") as f:
                f.write(b'\n{"v":1,"event":"process_exit","pid":100,"host":"h","ts":1.0,"seq":1}\n')
            # a zombie its parent has not reaped: no stat, but a children file (empty) still
            r.stat = lambda pid: None if pid == 100 else FakeReader.stat(r, pid)  # type: ignore[method-assign]

    real_leftover = w.leftover

    def leftover(how: str) -> None:
        marks.setdefault(how, t[0])
        real_leftover(how)

    w.leftover = leftover  # type: ignore[method-assign]
    assert w.run_loop(clock=lambda: t[0], sleep=sleep) == "linger-end"
    assert marks["root-exit"] - marks["exit"] <= LEFTOVER_GRACE_S + 2 * FAST_TICK_S + 1e-9, marks


class FakeExits:
    """An ExitWatch over a FakeReader: a watched pid has ended once it left the table."""

    def __init__(self, reader: FakeReader) -> None:
        self.reader = reader
        self.pids: set[int] = set()

    def add(self, pid: int) -> bool:
        self.pids.add(pid)
        return True

    def __contains__(self, pid: int) -> bool:
        return pid in self.pids

    def remove(self, pid: int) -> None:
        self.pids.discard(pid)

    def status(self, pid: int) -> int | None:
        return None  # no wait status kept (a kernel before 6.15)

    def ended(self) -> list[int]:
        return [p for p in self.pids if p not in self.reader.procs]


def _settled_watcher(tmp_path: Path, r: FakeReader) -> tuple[Watcher, Path, list[int]]:
    """A root (100) with 20 idle children (101-120) on reader r, watched with pidfds until every back-off has
    settled (3 x MAX_BACKOFF ticks): (the watcher, its log, the pids whose children file is read from now on)."""
    from wp_autotrace.watcher.tree import MAX_BACKOFF

    reads: list[int] = []
    plain_children = r.children
    r.children = lambda pid, threads: (reads.append(pid), plain_children(pid, threads))[1]  # type: ignore[method-assign]
    r.add(100, 1, 1.0)
    for pid in range(101, 121):
        r.add(pid, 100, 2.0)
    w, log = make_watcher(tmp_path, r)
    w.tree.stat_every = 5
    w.tree.exits = FakeExits(r)  # type: ignore[assignment]
    for _ in range(3 * MAX_BACKOFF):
        w.tick()
    reads.clear()
    return w, log, reads


def test_idle_processes_are_looked_at_less_and_ends_stay_prompt(tmp_path: Path) -> None:
    """With pidfds, an idle process's children file is read ever more seldom (up to MAX_BACKOFF ticks), the
    root's every tick; an end is written in the tick it happened, backed off or not; a new child is found
    within the back-off and makes its parent looked at every tick again."""
    from wp_autotrace.watcher.tree import MAX_BACKOFF

    r = FakeReader()
    w, log, reads = _settled_watcher(tmp_path, r)
    for _ in range(MAX_BACKOFF):
        w.tick()
    assert reads.count(100) == MAX_BACKOFF  # the root: every tick
    assert all(reads.count(pid) == 1 for pid in range(101, 121)), sorted(reads)  # the others: once in 16
    del r.procs[105]
    before = time.time()
    w.tick()
    (ended,) = [e for t in events(read_log(log), "tree") for e in t["ended"]]
    assert ended["pid"] == 105 and ended["end"] >= before  # this very tick
    r.add(500, 110, 3.0)  # a child of an idle process
    for _ in range(MAX_BACKOFF):
        w.tick()
        if 500 in w.tree.live:
            break
    assert 500 in w.tree.live  # within MAX_BACKOFF ticks
    reads.clear()
    w.tick()
    w.tick()
    assert reads.count(110) >= 1 and w.tree.backoff[110] <= 2  # looked at again soon after its change


def test_an_end_says_the_last_sample_that_saw_the_process_alive(tmp_path: Path) -> None:
    """With pidfds (polled every tick), an ended process's entry carries `seen`: the sample before its end, the
    last that saw it alive, an idle (backed-off) one's too; a report bounds an OOM kill by it. Without pidfds a
    backed-off process's last look is not the last tick: no `seen` (control)."""
    r = FakeReader()
    w, log, _ = _settled_watcher(tmp_path, r)
    before = time.time()
    w.tick()
    after = time.time()
    del r.procs[105]
    w.tick()
    (ended,) = [e for t in events(read_log(log), "tree") for e in t["ended"]]
    assert ended["pid"] == 105 and before <= ended["seen"] <= after <= ended["end"], (before, after, ended)
    plain = FakeReader()
    plain.add(100, 1, 1.0)
    plain.add(101, 100, 2.0)
    (tmp_path / "plain").mkdir()
    w, log = make_watcher(tmp_path / "plain", plain)
    w.tick()
    del plain.procs[101]
    w.tick()
    (ended,) = [e for t in events(read_log(log), "tree") for e in t["ended"]]
    assert ended["pid"] == 101 and "seen" not in ended


class ProbingReader(FakeReader):
    """FakeReader with the kernel's last pid (ProcReader.last_pid): the highest pid handed out."""

    def last_pid(self) -> int:
        return max(self.procs)


def test_the_root_with_idle_children_is_stat_every_tick_and_its_children_read_when_due(tmp_path: Path) -> None:
    """Where the probe reads the kernel's last pid, the root's children file backs off as any member's (its
    thousand idle children were listed every tick, most of the watcher's CPU); its stat is still read every
    tick, a new child of the root joins in the tick after it appeared, and the root's end in its tick."""
    from wp_autotrace.watcher.tree import MAX_BACKOFF

    r = ProbingReader()
    stats: list[int] = []
    plain_stat = r.stat
    r.stat = lambda pid: (stats.append(pid), plain_stat(pid))[1]  # type: ignore[method-assign]
    w, log, reads = _settled_watcher(tmp_path, r)
    stats.clear()
    for _ in range(MAX_BACKOFF):
        w.tick()
    assert reads.count(100) <= 1, reads.count(100)  # the root's children: once in MAX_BACKOFF ticks at most
    assert stats.count(100) == MAX_BACKOFF  # its stat: every tick
    r.add(600, 100, 3.0)  # a new child of the root: the probe names its parent
    w.tick()
    assert 600 in w.tree.live
    del r.procs[100]
    before = time.time()
    w.tick()
    ends = [e for t in events(read_log(log), "tree") for e in t["ended"] if e["pid"] == 100]
    assert len(ends) == 1 and ends[0]["end"] >= before and w.tree.root_end is not None


def test_a_claimed_process_gone_before_any_sample_gets_its_end(tmp_path: Path) -> None:
    """A pool worker that wrote its process_start and ended between two samples: the watcher writes its end
    (the sample that found it gone), once; a claimed process alive joins instead."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(302, 1, 3.0)
    w, log = make_watcher(tmp_path, r)
    w.tree.log = LogWatch(-1, "", "h", "run1", 100, 0)
    w.tick()
    w.tree.log.claimed.update({301: 2.0, 302: 3.0})
    w.tick()
    w.tree.log.claimed[301] = 2.0  # read again (a log scan that lagged): no second end
    w.tick()
    trees = events(read_log(log), "tree")
    assert [(e["pid"], e["create_time"]) for t in trees for e in t["ended"]] == [(301, 2.0)]
    assert [(p["pid"], p["via"]) for t in trees for p in t["started"]] == [(100, "root"), (302, "claim")]


def test_a_full_disk_does_not_end_the_watch_and_the_loss_is_counted(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The log refuses writes (ENOSPC) from before the root's exit until 2 s: the watcher keeps sampling
    (it once returned log-unwritable on the first dropped record), writes the verdict once space is
    back, says how many records were lost, and its watcher_exit carries the count."""
    import errno

    from wp_autotrace.runtime import sink as sink_mod

    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    w, log = make_watcher(tmp_path, r)
    w.tree.interval, w.linger = 0.5, 30.0
    w.tree.log = LogWatch(w.sink.fd, str(log), "h", "run1", 100, 0)
    w.tick()
    full = [True]
    real_write = sink_mod.os_write

    def write(fd: int, data: bytes) -> int:
        if full[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(sink_mod, "os_write", write)
    t = [0.0]

    def sleep(d: float) -> None:
        t[0] += d
        if t[0] >= 1.0 and 100 in r.procs:
            with open(log, "ab") as f:  # the root's own record, written before the disk filled up
                f.write(b'\n{"v":1,"event":"process_exit","pid":100,"host":"h","ts":1.0,"seq":1}\n')
            del r.procs[100]
        if t[0] >= 2.0:
            full[0] = False
        if t[0] >= 3.0:
            r.procs.pop(101, None)

    reason = w.run_loop(clock=lambda: t[0], sleep=sleep)
    w.finish(reason)
    assert reason == "run-ended"
    recs = read_log(log)
    (verdict,) = events(recs, "leftover")
    assert [p["pid"] for p in verdict["procs"]] == [101]
    (said,) = [e for e in events(recs, "tracer_error") if e.get("dropped")]
    (end,) = events(recs, "watcher_exit")
    assert said["dropped"] >= 1 and end["dropped"] == said["dropped"], (said, end)
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    found = {f["kind"]: f for f in analyze(read_logs([str(log)]))["findings"]}
    assert "kept sampling" in found["records-lost"]["text"], found
    assert "tracer-errors" not in found  # the count is its own finding, not a tracer fault


def test_a_descendant_on_the_roots_pid_is_not_the_root(tmp_path: Path) -> None:
    """Issue 28 item 2, the sampler's part: the root ends and, before the next sample, its child forks a process
    that takes the root's pid. That process joins as the child's (no `main` role), the root's end is seen
    (root_end: the verdict follows), and nothing backs the new process off as if it were the root."""
    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    w, log = make_watcher(tmp_path, r)
    w.tick()
    del r.procs[100]
    r.procs[101]["ppid"] = 1
    r.add(100, 101, 5.0)  # the pid again, a new process: a grandchild of the root
    w.tick()
    started = [p for t in events(read_log(log), "tree") for p in t["started"] if p["pid"] == 100]
    assert [(p["create_time"], p.get("role"), p["via"]) for p in started] == [(1.0, "main", "root"),
                                                                              (5.0, None, "child")]
    assert w.tree.root_end is not None and not w.tree.is_root(100)
    w.leftover("root-killed")
    (verdict,) = events(read_log(log), "leftover")
    assert sorted((p["pid"], p["create_time"]) for p in verdict["procs"]) == [(100, 5.0), (101, 2.0)]


def test_the_root_pids_process_exit_after_its_reuse_is_not_the_roots(tmp_path: Path) -> None:
    """The log's side of the same: once a process_start shows the root's pid with another create_time, a
    process_exit of that pid is the new owner's, and does not say the root ran its exit code."""
    log = tmp_path / "l.jsonl"
    log.write_bytes(b'\n{"v":1,"event":"process_start","pid":100,"host":"h","ts":2.0,"seq":0,"run":"run1",'
                    b'"create_time":5.0}\n'
                    b'\n{"v":1,"event":"process_exit","pid":100,"host":"h","ts":3.0,"seq":1}\n')
    fd = os.open(log, os.O_RDONLY)
    try:
        watch = LogWatch(fd, str(log), "h", "run1", 100, 0, root_ct=1.0)
        watch.scan()
        assert watch.claimed == {100: 5.0} and not watch.root_exited
        unknown = LogWatch(fd, str(log), "h", "run1", 100, 0)  # no create_time for the root: the pid decides
        unknown.scan()
        assert unknown.root_exited
    finally:
        os.close(fd)


@pytest.mark.parametrize(("err", "gone"), [(errno.EIO, False), (errno.ETIMEDOUT, False), (errno.EACCES, False),
                                           (errno.ENOENT, True), (errno.ESTALE, True)])
def test_a_detached_watcher_ends_only_when_the_log_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           err: int, gone: bool) -> None:
    """Detached, the watcher looks the log up by path every tick, for the whole run. An error that says
    nothing of the file (a soft NFS mount's EIO or timeout, a directory's permissions changed for a moment)
    is not the log's end: the watcher samples on, and its verdict is written; only a path that names no file
    any more (ENOENT, NFS's ESTALE) or another file ends it."""
    log = tmp_path / "l.jsonl"
    log.write_bytes(b"")
    fd = os.open(log, os.O_RDONLY)
    try:
        watch = LogWatch(fd, str(log), "h", "run1", 100, 0)
        watch.detach()
        assert not watch.gone()
        real = os.stat

        def failing(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
            if str(path) == str(log):
                raise OSError(err, os.strerror(err))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", failing)
        assert watch.gone() is gone
        monkeypatch.undo()
        assert not watch.gone()
        log.unlink()
        assert watch.gone()
    finally:
        os.close(fd)


# A sidecar its parent forked and the watcher listed before the exec (a python that execs python: the same
# name), then a worker it forks; it waits for a memory record holding both, bounded (the test says what lacks).
SAME_NAME_SIDECAR = '''
import json, os, sys, time
def seen(test):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            recs = [json.loads(x) for x in f.read().split(b"\\n") if x.endswith(b"}")]
        if any(test(r) for r in recs):
            return
        time.sleep(0.05)
me = os.getpid()
seen(lambda r: r["event"] == "tree" and any(e["pid"] == me and e.get("role") for e in r["started"]))
worker = os.fork()
if worker == 0:
    time.sleep(120)
    os._exit(0)
seen(lambda r: r["event"] == "memory" and {me, worker} <= {e["pid"] for e in r["procs"]})
os.kill(worker, 9)
os.waitpid(worker, 0)
'''
SAME_NAME_MAIN = TREE_LISTS + '''
import os, sys
child = os.fork()
if child == 0:
    tree_lists("started", os.getpid())  # listed before the exec: the main's command line, no role
    fake = os.path.join(os.path.dirname(__file__), "fake", "_inductor", "compile_worker", "__main__.py")
    os.execv(sys.executable, [sys.executable, fake])  # (not in the main's argv: that would make it a sidecar)
os.waitpid(child, 0)
print("main done")
'''


def test_an_exec_that_keeps_the_name_is_seen_and_the_pool_read_whole(tmp_path: Path, log: Path) -> None:
    """A sidecar first listed between its fork and its exec of the same interpreter (its comm unchanged) is
    listed again after the exec, with its role: its forked worker is a compile worker of its pool, and one
    memory record reads the sidecar, the worker and their creator together. (Before, the exec went unseen: the
    sidecar kept the main's command line and no role, each worker was taken for a sidecar of a pool of its
    own and the main was never read; under load the pool's PSS counter came out as its workers alone.)"""
    fake = tmp_path / "fake" / "_inductor" / "compile_worker" / "__main__.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(SAME_NAME_SIDECAR)
    script = tmp_path / "main.py"
    script.write_text(SAME_NAME_MAIN)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="0")
    res = run_python([str(script)], env, timeout=300)
    assert res.returncode == 0 and res.stdout == "main done\n", res.stderr
    recs = wait_for_watcher(log)
    main = events(recs, "process_start")[0]["pid"]
    listed = [e for tree in events(recs, "tree") for e in tree["started"]]
    (side,) = {e["pid"] for e in listed if e["ppid"] == main}
    roles = [(e.get("role"), str(fake) in e["cmd"]) for e in listed if e["pid"] == side]
    # before the exec (no role, the main's command line), then after it; a look in the exec itself may list it once
    # more before (its command line read mid-exec: seen once in CI, 3.9 beside the full suite)
    assert roles[0] == (None, False) and roles[-1] == ("compile-sidecar", True), roles
    assert set(roles[:-1]) == {(None, False)} and len(roles) <= 3, roles
    (worker,) = {e["pid"] for e in listed if e["ppid"] == side}
    assert {e.get("role") for e in listed if e["pid"] == worker} == {"compile-worker"}
    read = [{e["pid"] for e in r["procs"]} for r in events(recs, "memory")]
    assert any({side, worker, main} <= pids for pids in read), read


def test_proc_is_listed_again_only_after_a_pid_was_handed_out(tmp_path: Path) -> None:
    """The periodic /proc listing (a look for processes of the root's group or session) is skipped while the
    kernel's last pid stands still: no process can have appeared. Once one is handed out, the next periodic
    listing is made and finds it."""

    class Counting(FakeReader):
        def __init__(self) -> None:
            super().__init__()
            self.last, self.listings = 101, 0

        def last_pid(self) -> int:
            return self.last

        def pids(self) -> set[int]:
            self.listings += 1
            return super().pids()

    r = Counting()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    w, log = make_watcher(tmp_path, r)
    every = w.tree.scan_every
    for _ in range(3 * every):
        w.tick()
    assert r.listings == 1  # the first sample's only
    r.add(102, 1, 3.0)  # not a child of the run, but in the root's group: a "possible"
    r.procs[102]["groups"] = (100, 100)
    r.last = 102
    for _ in range(every):
        w.tick()
    assert r.listings == 2
    possible = [p["pid"] for t in events(read_log(log), "tree") for p in t.get("possible") or ()]
    assert possible == [102]


def test_a_last_pid_that_reads_0_is_unknown_so_proc_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The periodic listing is skipped while the last pid stands still. A sandbox's /proc/loadavg that prints a
    constant 0 as the last pid (gVisor's) would keep it still forever, and no process the listing alone finds
    (a child whose parent ended before its look) would join: 0 is no kernel's answer, so it reads as unknown,
    and an unknown last pid lists /proc every tick."""
    from wp_autotrace.common import procfs

    lines = {"gvisor": b"0.00 0.00 0.00 0/0 0\n", "linux": b"0.52 0.58 0.59 2/912 48213\n"}
    for kind, line in lines.items():
        monkeypatch.setattr(procfs, "_read", lambda *a, line=line, **k: line)
        assert procfs.ProcReader.last_pid() == (None if kind == "gvisor" else 48213)


def test_proc_is_listed_at_its_backstop_while_the_last_pid_stands_still(tmp_path: Path) -> None:
    """A last pid that stands still while processes appear (a virtualized /proc/loadavg lagging the kernel's
    cursor) delays the periodic listing to its backstop, never for good: a process of the root's group that only
    a listing finds joins the possible within LISTING_BACKSTOP listing periods."""
    from wp_autotrace.watcher.tree import LISTING_BACKSTOP

    class Still(FakeReader):
        def last_pid(self) -> int:
            return 101

    r = Still()
    r.add(100, 1, 1.0)
    r.add(101, 100, 2.0)
    w, log = make_watcher(tmp_path, r)
    w.tick()
    r.add(102, 1, 3.0)  # not a child of the run, but in the root's group; the last pid did not move
    r.procs[102]["groups"] = (100, 100)
    for _ in range(w.tree.scan_every * LISTING_BACKSTOP):
        w.tick()
    possible = [p["pid"] for t in events(read_log(log), "tree") for p in t.get("possible") or ()]
    assert possible == [102]
