"""The watcher's kept /proc descriptors (issue 32): each watched process's stat and children files stay open and
are read with pread, within the pidfd cap.

Checked against the kernel itself: a read through a kept descriptor is the file as it is now (a child forked,
an exec, a children list past one page, children reaped); once the process is reaped it reads as gone, never
as the file of a later process given the same pid (forced in a pid namespace of our own through ns_last_pid);
past the cap a process is read by path, and a pidfd still gets in by closing kept files; a read error other
than ESRCH/ENOENT is Unreadable, never an end.
"""

from __future__ import annotations

import ast
import errno
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.common import procfs
from wp_autotrace.common.pidfd import KEPT_PER_PROCESS, ExitWatch
from wp_autotrace.common.procfs import ProcReader, Unreadable

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open") or not ProcReader.available(),
                                reason="no pidfds or no /proc children files")

# More children than one 4 KiB page of "PID " entries holds (5- to 7-digit pids: 6 to 8 bytes each).
MANY_CHILDREN = 900
WAIT_S = 30  # the longest any condition below is waited for, on a loaded machine


def _emfile(*_: Any, **__: Any) -> int:
    raise OSError(errno.EMFILE, "Too many open files")


def _sleeps(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(n)]


def _reap(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(timeout=WAIT_S)


def _wait_for(check: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.01)


def _named(pid: int, name: str) -> bool:
    return bool(_wait_for(lambda: (ProcReader().stat(pid) or {}).get("name") == name))


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_kept_files_read_what_is_there_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through kept descriptors only (opening any file fails): a new child, then an exec, are seen; the
    process reaped reads as gone; its end closes its descriptors."""
    reader = ProcReader(strict=True)
    watch = reader.exit_watch()
    shell = subprocess.Popen(["sh", "-c", "read a; sleep 120 & echo $!; read b; exec sleep 121"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert shell.stdin is not None and shell.stdout is not None
    kids = [shell]
    strays: list[int] = []  # sh's own child: killed by pid
    try:
        assert _named(shell.pid, "sh")
        assert watch.add(shell.pid) and shell.pid in watch.kept
        fds = watch.kept[shell.pid]
        monkeypatch.setattr(procfs.os, "open", _emfile)  # from here on, a read by path would fail
        assert reader.children(shell.pid, 1) == []
        assert reader.stat(shell.pid)["name"] == "sh"  # type: ignore[index]
        shell.stdin.write(b"go\n")
        shell.stdin.flush()
        kid = int(shell.stdout.readline())
        strays.append(kid)
        assert reader.children(shell.pid, 1) == [kid]
        shell.stdin.write(b"go\n")
        shell.stdin.flush()
        assert _wait_for(lambda: (reader.stat(shell.pid) or {}).get("name") == "sleep")  # the exec, via pread
        assert reader.children(shell.pid, 1) == [kid]  # sleep inherited sh's child
        shell.kill()
        shell.wait(timeout=WAIT_S)
        assert reader.stat(shell.pid) is None  # reaped: ESRCH through the kept descriptor, an end
        assert reader.children(shell.pid, 1) == []  # (a children file reads nothing: the pidfd tells the end)
        monkeypatch.undo()
        watch.remove(shell.pid)
        assert shell.pid not in watch.kept
        for fd in fds:
            with pytest.raises(OSError) as closed:
                os.fstat(fd)
            assert closed.value.errno == errno.EBADF
    finally:
        monkeypatch.undo()
        for pid in strays:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        _reap(kids)
        watch.close()


def test_children_past_one_page_through_a_kept_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    """900 children (two pages of the children file) read whole through the kept descriptor, again and again,
    and after half of them are reaped, the half that is left, exactly."""
    reader = ProcReader(strict=True)
    watch = reader.exit_watch()
    kids = []
    try:
        assert watch.add(os.getpid()) and os.getpid() in watch.kept
        kids = _sleeps(MANY_CHILDREN)
        mine = {k.pid for k in kids}
        monkeypatch.setattr(procfs.os, "open", _emfile)
        for _ in range(3):
            listed = reader.children(os.getpid(), 1) or []
            assert mine <= set(listed) and len(listed) == len(set(listed))
        monkeypatch.undo()
        _reap(kids[::2])
        left = {k.pid for k in kids[1::2]}
        monkeypatch.setattr(procfs.os, "open", _emfile)
        assert set(reader.children(os.getpid(), 1) or []) & mine == left
    finally:
        monkeypatch.undo()
        _reap(kids)
        watch.close()


def test_a_read_error_through_a_kept_descriptor_is_no_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO (anything but ESRCH/ENOENT) on a pread of a live process: Unreadable, never None (an end)."""
    reader = ProcReader(strict=True)
    watch = reader.exit_watch()
    try:
        assert watch.add(os.getpid()) and os.getpid() in watch.kept

        def eio(*_: Any) -> bytes:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(procfs.os, "pread", eio)
        with pytest.raises(Unreadable):
            reader.stat(os.getpid())
        with pytest.raises(Unreadable):
            reader.children(os.getpid(), 1)
    finally:
        monkeypatch.undo()
        watch.close()


def test_kept_files_fit_the_cap_and_pidfds_come_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """cap 5: the first process gets its pidfd and two kept files, the second only its pidfd (no room for
    two more); the fourth gets its pidfd by closing the first's kept files. The watcher never holds more
    than the cap; a process without kept files is read by path (so opens failing make it Unreadable)."""
    cap = 5
    reader = ProcReader(strict=True)
    watch = ExitWatch(cap=cap)
    reader.kept = watch.kept
    kids = _sleeps(4)
    try:
        assert all(_named(k.pid, "sleep") for k in kids)
        before = _open_fds()
        pids = [k.pid for k in kids]
        assert watch.add(pids[0]) and list(watch.kept) == [pids[0]]
        assert watch.add(pids[1]) and list(watch.kept) == [pids[0]]
        assert watch.add(pids[2]) and _open_fds() - before == cap
        assert watch.add(pids[3]) and not watch.kept  # its pidfd, in place of the first's kept files
        assert all(p in watch for p in pids) and _open_fds() - before == len(pids) <= cap
        for pid in pids:
            assert reader.stat(pid)["name"] == "sleep"  # type: ignore[index]  # by path: open, read, close
        monkeypatch.setattr(procfs.os, "open", _emfile)
        with pytest.raises(Unreadable):
            reader.stat(pids[0])
        monkeypatch.undo()
        watch.remove(pids[3])
        watch.remove(pids[2])
        assert watch.add(pids[2]) and list(watch.kept) == [pids[2]]  # room again: 2 pidfds + 1 + 2 kept = cap
        assert _open_fds() - before == 3 + KEPT_PER_PROCESS == cap
    finally:
        monkeypatch.undo()
        _reap(kids)
        watch.close()


# Run as root of a user and pid namespace of its own: there ns_last_pid may be written, so the next process
# gets the pid just freed, as a busy host (or a wrapped pid counter) would hand it out.
REUSE = textwrap.dedent('''
    import os, subprocess, sys, time
    from wp_autotrace.common.procfs import ProcReader
    reader = ProcReader(strict=True)
    watch = reader.exit_watch()
    def named(pid, name):
        deadline = time.monotonic() + 30
        while (ProcReader().stat(pid) or {}).get("name") != name and time.monotonic() < deadline:
            time.sleep(0.01)
    first = subprocess.Popen(["sleep", "120"])
    named(first.pid, "sleep")
    assert watch.add(first.pid) and first.pid in watch.kept
    first.kill()
    first.wait()
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(first.pid - 1))
    later = subprocess.Popen(["sh", "-c", "sleep 120 & wait"])
    assert later.pid == first.pid, (later.pid, first.pid)
    named(later.pid, "sh")
    deadline = time.monotonic() + 30
    while not ProcReader().children(later.pid, 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    by_path = ProcReader().stat(later.pid), ProcReader().children(later.pid, 1)
    kept = reader.stat(first.pid), reader.children(first.pid, 1)
    print(repr((by_path[0]["name"], by_path[1], kept)))
    later.kill()  # its child dies with the namespace's init (this script) as it exits
''')


def test_a_kept_descriptor_never_reads_a_later_process_on_its_pid(tmp_path: Path) -> None:
    """The pid of a reaped watched process given to a new one (which has a child): by path its files are the
    new process's; through the kept descriptors, gone (stat) and no children, never the new one's."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-Urpf", "true"], capture_output=True,
                                         timeout=WAIT_S).returncode != 0:
        pytest.skip("no user and pid namespaces here")
    script = tmp_path / "reuse.py"
    script.write_text(REUSE)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    env.pop("WP_AUTOTRACE", None)
    out = subprocess.run([unshare, "-Urpf", "--mount-proc", sys.executable, str(script)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    name, kids, kept = ast.literal_eval(out.stdout)
    assert name == "sh" and len(kids) == 1  # by path: the later process, with its child
    assert kept == (None, [])  # through the kept descriptors: the first process, reaped


def test_the_tree_reads_members_through_kept_files_and_closes_them_at_their_end() -> None:
    """A Tree over this process's own children: each member gets kept files; one killed and reaped has its
    end written in the first sample after it, and its descriptors are closed then, the others' kept."""
    from wp_autotrace.watcher.tree import Tree

    kids = _sleeps(3)
    tree = Tree(os.getpid(), 0.0, 0.1)
    try:
        assert all(_named(k.pid, "sleep") for k in kids)
        tree.exclude = set()
        tree.sample(time.time())
        assert tree.exits is not None and tree.reader.kept is tree.exits.kept
        pids = [k.pid for k in kids]
        assert all(p in tree.live and p in tree.exits.kept for p in pids)
        fds = tree.exits.kept[pids[0]]
        kids[0].kill()
        kids[0].wait(timeout=WAIT_S)
        ended = _wait_for(lambda: [e for e in tree.sample(time.time())[1] if e["pid"] == pids[0]])
        assert ended and pids[0] not in tree.live and pids[0] not in tree.exits.kept
        for fd in fds:
            with pytest.raises(OSError) as closed:
                os.fstat(fd)
            assert closed.value.errno == errno.EBADF
        assert all(p in tree.exits.kept for p in pids[1:])
    finally:
        _reap(kids)
        if tree.exits is not None:
            tree.exits.close()


def test_a_process_already_exited_gets_no_kept_files() -> None:
    """Kept files are opened after the pidfd and kept only if its process has not exited by then (its pid
    could be another process's by the time they were opened): a zombie gets its pidfd, not kept files."""
    watch = ExitWatch(cap=64)
    zombie = subprocess.Popen(["true"])
    try:
        assert _wait_for(lambda: (ProcReader().zombie(zombie.pid) or {}).get("status") is not None)
        assert watch.add(zombie.pid) and zombie.pid in watch and zombie.pid not in watch.kept
        assert watch.ended() == [zombie.pid]
    finally:
        zombie.wait(timeout=WAIT_S)
        watch.close()
