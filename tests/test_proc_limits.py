"""The watcher under an fd limit, and /proc files past one page (review 2 #7, #10).

A full fd table makes every /proc open fail with EMFILE: that says nothing about the
process, so it must never be read as its end; pidfds stay under a cap that leaves fds
for everything else. A children file of more than ~780 pids spans two reads.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.common import procfs
from wp_autotrace.common.pidfd import FD_RESERVE_MIN, ExitWatch, pidfd_cap
from wp_autotrace.common.procfs import ProcReader, Unreadable, descendants

from .conftest import clean_env, events, wait_for_watcher, wait_until
from .procs import kill_run

# More children than one 4 KiB page of "PID " entries holds (5- to 7-digit pids: 6 to 8 bytes each).
MANY_CHILDREN = 900


def _emfile(*_: Any, **__: Any) -> int:
    raise OSError(errno.EMFILE, "Too many open files")


def test_emfile_is_not_an_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A strict reader raises Unreadable for a live process it cannot read; None only when it is gone."""
    dead = subprocess.Popen(["true"])
    dead.wait(timeout=30)
    monkeypatch.setattr(procfs.os, "open", _emfile)
    strict = ProcReader(strict=True)
    with pytest.raises(Unreadable) as caught:
        strict.stat(os.getpid())
    assert caught.value.transient()
    with pytest.raises(Unreadable):
        strict.children(os.getpid(), 1)
    assert strict.stat(dead.pid) is None  # no process has that pid: gone, whatever the read said
    assert ProcReader().stat(os.getpid()) is None  # lenient (cleanup, watch): as before
    assert strict.argv(os.getpid()) == []  # best-effort reads stay best-effort


def test_pidfds_capped_below_the_fd_limit() -> None:
    """pidfds leave a quarter of the limit (at least FD_RESERVE_MIN) free; past the cap add() says no."""
    assert pidfd_cap(1024) == 768 and pidfd_cap(128) == 128 - FD_RESERVE_MIN and pidfd_cap(32) == 0
    if not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfds")
    watch = ExitWatch(cap=1)
    try:
        assert watch.add(os.getpid()) and not watch.add(os.getppid())
    finally:
        watch.close()
    code = ("import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200));"
            "from wp_autotrace.common.pidfd import ExitWatch; print(ExitWatch.make().cap)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert int(out.stdout) == pidfd_cap(200)


def test_children_file_past_one_page_read_whole() -> None:
    """A process with 900 children: children() and descendants() name all of them (one read gave ~780)."""
    kids = []
    try:
        for _ in range(MANY_CHILDREN):
            kids.append(subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL))
        mine = {k.pid for k in kids}
        listed = set(ProcReader().children(os.getpid(), 1) or [])
        assert mine <= listed
        _, count = descendants(os.getpid(), 10, 10000)
        assert count >= MANY_CHILDREN
    finally:
        for k in kids:
            k.kill()
        for k in kids:
            k.wait(timeout=30)


# Below the fd limit the run gets: a watcher whose pidfds filled it could open no /proc file.
LOW_NOFILE = 128
CHILDREN_PAST_LIMIT = 150


def _low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_NOFILE, LOW_NOFILE))


def test_more_processes_than_fds_no_forged_end(tmp_path: Path) -> None:
    """Hard fd limit 128 and 150 live children: the live root is not ended, nothing started twice,
    no leftover before the root's own exit (it once forged 1,100 leftovers of a live root)."""
    script = tmp_path / "root.py"
    script.write_text(textwrap.dedent(f'''
        import subprocess, sys, time
        kids = [subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for _ in range({CHILDREN_PAST_LIMIT})]
        time.sleep(3)  # a few dozen ticks with the table as full as it gets
        print(sum(k.poll() is None for k in kids), flush=True)
        for k in kids:
            k.kill()
        for k in kids:
            k.wait()
    '''))
    log = tmp_path / "run.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    try:
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                             timeout=120, preexec_fn=_low_nofile)
        assert out.stdout == f"{CHILDREN_PAST_LIMIT}\n", out.stderr
        recs = wait_for_watcher(log, 60)
        root = next(r for r in recs if r["event"] == "process_start")["pid"]
        exit_ts = next(r["ts"] for r in recs if r["event"] == "process_exit" and r["pid"] == root)
        ends = [e["end"] for t in events(recs, "tree") for e in t["ended"] if e["pid"] == root]
        assert ends and min(ends) >= exit_ts - 0.05, (ends, exit_ts)
        assert all(r["ts"] >= exit_ts for r in events(recs, "leftover"))
        assert _written_once(recs)
        assert not [r for r in recs if r["event"] == "tracer_error" and r.get("where") == "watcher"]
    finally:
        kill_run(log)


def _written_once(recs: list[dict[str, Any]]) -> bool:
    """Each process started once: again only because it exec'd (a new name or command line), never as it was."""
    entries = [(e["pid"], e["create_time"], e["name"], e["cmd"]) for t in events(recs, "tree") for e in t["started"]]
    return len(entries) == len(set(entries))


# Past MAX_BACKOFF's reach (1 + 2 + 4 + 8 ticks, then 16 apart: 1.6 s at 0.1 s): the child is fully backed off.
IDLE_S = 3
HELPER_S = 0.3  # the helper shell's life: three intervals, well under the back-off's 1.6 s


def test_child_of_an_idle_process_seen_within_an_interval(tmp_path: Path) -> None:
    """A traced child idles past its back-off, then twice runs a 0.3 s shell that leaves a `sleep` daemon
    behind: each shell and each daemon is in the tree and the daemons in the leftover (review 2 #6: with
    children read 1.6 s apart they were never seen, "left behind: none")."""
    helper = f"sleep 60 </dev/null >/dev/null 2>&1 & echo $!; sleep {HELPER_S}"
    child = (f"import subprocess, time\n"
             f"for _ in range(2):\n"
             f"    time.sleep({IDLE_S})\n"
             f"    print(subprocess.run(['sh', '-c', {helper!r}], capture_output=True, text=True).stdout.strip(),"
             f" flush=True)\n")
    script = tmp_path / "root.py"
    script.write_text(f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}])\n")
    log = tmp_path / "run.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    try:
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
        daemons = {int(p) for p in out.stdout.split()}
        assert len(daemons) == 2, out.stderr
        recs = wait_for_watcher(log, 30, event="leftover")
        started = {e["pid"]: e for t in events(recs, "tree") for e in t["started"]}
        shells = [e for e in started.values() if e["name"] == "sh"]
        assert daemons <= set(started) and len(shells) == 2, sorted((e["name"], e["cmd"]) for e in started.values())
        left = {p["pid"] for r in events(recs, "leftover") for p in r["procs"]}
        assert daemons <= left
    finally:
        kill_run(log)


class _ProbeReader:
    """pids 1..: stat only (probe_new reads nothing else), and a settable last pid."""

    def __init__(self) -> None:
        self.ppid: dict[int, int] = {}
        self.last = 1000
        self.read: list[int] = []

    def last_pid(self) -> int:
        return self.last

    def stat(self, pid: int) -> dict[str, Any] | None:
        self.read.append(pid)
        if pid == 1002:
            raise Unreadable(errno.EMFILE, "full")
        return {"ppid": self.ppid[pid]} if pid in self.ppid else None


def test_probe_reads_new_pids_only_and_lists_past_its_bound(tmp_path: Path) -> None:
    """Nothing new: no stat read; a few new pids: each read, their member parents named (an unreadable one
    skipped); past PROBE_MAX or a wrapped counter: a listing instead of reads."""
    from wp_autotrace.runtime.sink import Sink
    from wp_autotrace.watcher.main import Watcher
    from wp_autotrace.watcher.tree import PROBE_MAX

    reader = _ProbeReader()
    watcher = Watcher(Sink(str(tmp_path / "w.jsonl"), "h", "watcher"), "run1", 10, 1.0, 0.1, 60, reader=reader)
    watcher.tree.live = {10: {}, 20: {}}
    watcher.tree.samples = 1
    assert watcher.tree.probe_new() == (set(), False) and watcher.tree.probe_new() == (set(), False) and not reader.read
    reader.ppid = {1001: 20, 1003: 99, 1004: 10}
    reader.last = 1004
    assert watcher.tree.probe_new() == ({10, 20}, False) and reader.read == [1001, 1002, 1003, 1004]
    reader.last += PROBE_MAX + 1
    assert watcher.tree.probe_new() == (set(), True)
    reader.last = 300  # wrapped at pid_max
    assert watcher.tree.probe_new() == (set(), True) and len(reader.read) == 4


def test_the_tree_entry_carries_each_members_process_limit_and_uid() -> None:
    """Each member's tree entry has its ulimit -u (RLIMIT_NPROC soft) and real uid, read by the watcher from
    /proc; checked against the kernel's own answer (resource.prlimit on that pid) and os.getuid()."""
    from wp_autotrace.watcher.tree import Tree

    limited = subprocess.Popen(["prlimit", "--nproc=37:4000", "sleep", "60"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    plain = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    tree = Tree(os.getpid(), 0.0, 0.1)
    try:
        tree.exclude = set()

        def limited_now() -> bool:  # prlimit sets the limit, then execs sleep: read once sleep runs
            return resource.prlimit(limited.pid, resource.RLIMIT_NPROC)[0] == 37 and \
                ProcReader().cmdline(limited.pid).startswith("sleep")

        wait_until(limited_now, 20, what="prlimit's exec of sleep")
        started = {e["pid"]: e for e in tree.sample(time.time())[0]}
        assert (started[limited.pid]["nproc"], started[limited.pid]["uid"]) == (37, os.getuid())
        soft = resource.prlimit(plain.pid, resource.RLIMIT_NPROC)[0]
        if soft == resource.RLIM_INFINITY:
            assert "nproc" not in started[plain.pid]
        else:
            assert started[plain.pid]["nproc"] == soft
    finally:
        for p in (limited, plain):
            p.kill()
            p.wait(timeout=20)
        if tree.exits is not None:
            tree.exits.close()
