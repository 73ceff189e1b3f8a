"""What an orphaned pool held (watcher/fds.py, findings/orphans.py): a crashed server's listening socket its forked
workers inherited (vllm#9737: the restart's bind() fails for a minute), and the pipe a harness reads to its end
(pytorch#87335: communicate() waits for them); the parent's wait told only where a record shows it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from wp_autotrace.common.procfs import ProcReader
from wp_autotrace.watcher.fds import OrphanFds, parse_net

from .logs import report, watcher

# A creator that binds a listening socket, forks a worker that inherits it (and its stdout), says both, and dies.
CREATOR = textwrap.dedent("""
    import os, socket, sys, time
    sock = socket.create_server(("127.0.0.1", 0))
    worker = os.fork()
    if worker == 0:
        time.sleep(60)
        os._exit(0)
    print(sock.getsockname()[1], worker, flush=True)
    os._exit(0)
""")


def _ct(pid: int) -> float:
    """pid's create_time as the watcher's tree reads it (its entries carry it)."""
    info = ProcReader().stat(pid)
    assert info is not None, pid
    return float(info["create_time"])


def _orphan(tmp_path: Path) -> tuple[int, int, int, int]:
    """(creator pid, worker pid, port, the pipe's read fd): the creator wrote to the test's pipe and ended."""
    r, w = os.pipe()
    script = tmp_path / "creator.py"
    script.write_text(CREATOR)
    creator = subprocess.Popen([sys.executable, str(script)], stdout=w, stdin=subprocess.DEVNULL)
    os.close(w)
    line = b""
    deadline = time.monotonic() + 60
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        line += os.read(r, 64)
    creator.wait(timeout=60)
    port, worker = (int(x) for x in line.split())
    return creator.pid, worker, port, r


def test_an_orphans_listening_socket_and_the_pipe_its_creators_parent_reads_are_read_once(tmp_path: Path) -> None:
    """A forked worker outlives its creator: the watcher's one look at it (its creator among the members ended
    since the last look) finds the listening socket it inherited, on the port psutil reads for it, and the pipe
    whose read end the creator's parent (this test) holds at its stdout; once per process; not in a tick where no
    member ended, nor for a process of no pool role."""
    creator, worker, port, r = _orphan(tmp_path)
    me = os.getpid()
    try:
        live = {worker: {"pid": worker, "create_time": _ct(worker), "role": "compile-worker", "ppid": creator},
                me: {"pid": me, "create_time": _ct(me), "role": "main", "ppid": 1}}
        fds = OrphanFds()
        for entry in ({"pid": creator, "ppid": me}, *live.values()):
            fds.joined(entry)
        assert fds.look(live) == []  # nothing ended: not read
        fds.ended(creator)
        assert fds.look({worker: dict(live[worker], role="child"), me: live[me]}) == []  # no pool role
        fds = OrphanFds()
        for entry in ({"pid": creator, "ppid": me}, *live.values()):
            fds.joined(entry)
        fds.ended(creator)
        live[worker]["ppid"] = 1  # re-read (re-parented) in the tick its creator's end was seen: as it joined
        (got,) = fds.look(live)
        theirs = {c.laddr.port for c in psutil.Process(worker).net_connections("inet") if c.status == "LISTEN"}
        assert theirs == {port}, theirs
        assert [(h["proto"], h["addr"], h["port"]) for h in got["listen"]] == [("tcp", "127.0.0.1", port)], got
        assert got["creator"] == creator and got["read_by"] == {"pid": me, "fds": [1]}, got
        fds.ended(12345)
        assert fds.look(live) == [] and fds.look(live, leftover=True) == []  # read once
    finally:
        os.kill(worker, signal.SIGKILL)
        os.close(r)


def test_what_a_reused_pid_holds_is_not_told_as_the_orphans(tmp_path: Path) -> None:
    """The tree's entry names a process by (pid, create time): its fds are read after the tree's look, and where
    the pid is another process's by the end of the read (the orphan ended and its pid was taken), what was read is
    that other process's: nothing is told of it. The creator's parent alike: its pipes read from a process that is no
    longer it are not its."""
    creator, worker, port, r = _orphan(tmp_path)
    me = os.getpid()
    try:
        live = {worker: {"pid": worker, "create_time": _ct(worker), "role": "compile-worker", "ppid": creator},
                me: {"pid": me, "create_time": _ct(me), "role": "main", "ppid": 1}}
        later = {worker: live[worker]["create_time"] + 5.0, me: live[me]["create_time"]}

        def stat(pid: int) -> dict[str, Any] | None:  # the pid taken by a process started 5 s after the orphan
            return {"pid": pid, "create_time": later[pid]} if pid in later else None  # the creator: reaped

        def look(fds: OrphanFds) -> list[dict[str, Any]]:
            for entry in ({"pid": creator, "ppid": me}, *live.values()):
                fds.joined(entry)
            fds.ended(creator)
            return fds.look(live)

        assert look(OrphanFds(stat=stat)) == []
        later[worker], later[me] = live[worker]["create_time"], live[me]["create_time"] + 5.0  # the parent's
        (got,) = look(OrphanFds(stat=stat))
        assert got["listen"][0]["port"] == port and "read_by" not in got, got
        (got,) = look(OrphanFds())  # the real stat: the same processes
        assert got["listen"][0]["port"] == port and got["read_by"] == {"pid": me, "fds": [1]}, got
    finally:
        os.kill(worker, signal.SIGKILL)
        os.close(r)


def test_an_orphan_whose_pool_role_comes_later_is_read_once_it_has_it(tmp_path: Path) -> None:
    """A forked worker's role record comes after its start: orphaned before it (its creator crashed at once), it
    is looked at again each tick (no /proc read) and read as it takes its pool role, its creator's parent kept."""
    creator, worker, port, r = _orphan(tmp_path)
    me = os.getpid()
    try:
        live = {worker: {"pid": worker, "create_time": _ct(worker), "ppid": creator},
                me: {"pid": me, "create_time": _ct(me), "role": "main", "ppid": 1}}
        fds = OrphanFds()
        for entry in ({"pid": creator, "ppid": me}, *live.values()):
            fds.joined(entry)
        fds.ended(creator)
        assert fds.look(live) == [] and fds.look(live) == [] and worker in fds.pending
        live[worker]["role"] = "compile-worker"
        (got,) = fds.look(live)
        assert got["listen"][0]["port"] == port and got["read_by"] == {"pid": me, "fds": [1]}, got
        assert not fds.pending and fds.look(live) == []
    finally:
        os.kill(worker, signal.SIGKILL)
        os.close(r)


class _Found(OrphanFds):
    """What a look decided to read (pid, creator, the creator's parent), as entries: no /proc read of fake pids."""

    def _read(self, found: list[tuple[int, dict[str, Any], Any, Any]], live: dict[int, Any]) -> list[dict[str, Any]]:
        return [{"pid": pid, "create_time": e["create_time"], "creator": c, "read_by": {"pid": p, "fds": [1]}}
                for pid, e, c, p in found]


@pytest.mark.parametrize("late", [False, True], ids=["same-look", "a-look-later"])
def test_a_worker_whose_creators_pid_an_ended_member_had_is_its_orphan_only_where_no_later_process_has_it(
        late: bool) -> None:
    """Member 150 (main 100's child) ended; worker 201 (made at 3.0) names 150 as its creator. Where pid 150 now
    names a live process made before 201 (at 2.5: the ended member's pid reused by 201's real creator), that
    process made it: no orphan of the member, and the member's parent's pipes are not matched against it. Where
    nothing lives at 150, or what does was made after 201, the member was its creator: its orphan, as before.
    `late`: the member's end was taken a look before the worker joined (re-parented: its ppid read as 1)."""
    for at_150, orphan in ((2.5, False), (None, True), (3.5, True)):
        procs = {} if at_150 is None else {150: {"pid": 150, "ppid": 1, "create_time": at_150}}
        fds = _Found(stat=procs.get)
        main = {"pid": 100, "ppid": 1, "create_time": 1.0, "role": "main"}
        for entry in (main, {"pid": 150, "ppid": 100, "create_time": 2.0}):
            fds.joined(entry)
        fds.ended(150)
        if late:
            assert fds.look({100: main}) == []
        worker = {"pid": 201, "ppid": 1 if late else 150, "create_time": 3.0, "role": "compile-worker"}
        fds.joined(worker, creator=150)
        got = fds.look({100: main, 201: worker})
        assert [(e["pid"], e["creator"], e["read_by"]["pid"]) for e in got] == ([(201, 150, 100)] if orphan else []), \
            (at_150, got)


def _start(pid: int, ppid: int, ct: float) -> bytes:
    """A forked process's process_start as the sink writes it: it names its creator (ppid) as it began."""
    return json.dumps({"v": 1, "event": "process_start", "ts": ct + 0.01, "pid": pid, "ppid": ppid, "host": "h",
                       "role": "child", "seq": 0, "run": "run1", "create_time": ct, "forked": True},
                      separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("late", [False, True], ids=["same-look", "a-look-later"])
def test_a_worker_that_joins_by_its_claim_already_reparented_is_its_creators_orphan(tmp_path: Path,
                                                                                     late: bool) -> None:
    """A fork worker whose creator died within one watcher look of the fork is first seen under pid 1: it joins by
    its process_start's claim, and that record's ppid names its creator. The watcher reads it as that creator's
    orphan (its creator's parent the one whose pipes it may hold), whether the creator's end is seen in the look the
    worker joins in or in the one before (its claim read a look late)."""
    from wp_autotrace.watcher.logwatch import LogWatch

    from .conftest import read_log
    from .test_sampler import FakeReader, make_watcher

    r = FakeReader()
    r.add(100, 1, 1.0)
    r.add(150, 100, 2.0)  # the child that makes the pool
    w, log = make_watcher(tmp_path, r)
    w.fds = _Found()
    w.tree.log = LogWatch(w.sink.fd, str(log), "h", "run1", 100, log.stat().st_size)
    w.tick()
    del r.procs[150]  # forked 201 and died: 201 re-parented to pid 1 before the watcher saw it
    r.add(201, 1, 3.0)
    if late:
        w.tick()  # the creator's end is seen; the worker's claim not yet read
    with open(log, "ab") as f:
        f.write(_start(201, 150, 3.0))
        f.write(b'{"v":1,"event":"role","ts":3.05,"pid":201,"ppid":150,"host":"h","role":"compile-worker","seq":1}\n')
    w.tick()  # it joins by claim (ppid 1 as read); its pool role is given after this look
    w.tick()
    assert [(t.get("via"), t["ppid"]) for x in read_log(log) if x["event"] == "tree" for t in x["started"]
            if t["pid"] == 201] == [("claim", 1)]
    held = [e for x in read_log(log) if x["event"] == "orphan_fds" for e in x["procs"]]
    assert [(e["pid"], e["creator"], e["read_by"]["pid"]) for e in held] == [(201, 150, 100)], held


def test_a_left_over_pool_process_is_read_in_the_verdict(tmp_path: Path) -> None:
    """A pool process in the leftover verdict, not read as an orphan, is read then (its socket; no parent's pipe:
    its creator is not among the ended)."""
    creator, worker, port, r = _orphan(tmp_path)
    try:
        live = {worker: {"pid": worker, "create_time": _ct(worker), "role": "compile-sidecar", "ppid": 1}}
        (got,) = OrphanFds().look(live, leftover=True)
        assert got["listen"][0]["port"] == port and "read_by" not in got and got["creator"] == 1, got
    finally:
        os.kill(worker, signal.SIGKILL)
        os.close(r)


# A creator that binds a listening socket and forks two workers: the first keeps the inherited one, the second
# closes it and listens on a socket of its own (a metrics server). All three stay.
SHARER = textwrap.dedent("""
    import os, socket, sys, time
    sock = socket.create_server(("127.0.0.1", 0))
    first = os.fork()
    if first == 0:
        time.sleep(60)
        os._exit(0)
    r, w = os.pipe()
    second = os.fork()
    if second == 0:
        sock.close()
        own = socket.create_server(("127.0.0.1", 0))
        os.write(w, b"%d\\n" % own.getsockname()[1])
        time.sleep(60)
        os._exit(0)
    own_port = int(os.read(r, 64))
    print(sock.getsockname()[1], own_port, first, second, flush=True)
    time.sleep(60)
""")


def test_a_live_creator_holding_the_socket_its_worker_holds_is_recorded(tmp_path: Path) -> None:
    """In the leftover verdict a pool's creator may still be alive: the socket a worker holds is marked
    `creator_holds` where the creator holds that very socket (its inode, as the test stats both fds itself), and
    not where the worker listens on one of its own."""
    script = tmp_path / "sharer.py"
    script.write_text(SHARER)
    creator = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert creator.stdout is not None
        port, own_port, first, second = (int(x) for x in creator.stdout.readline().split())
        live = {pid: {"pid": pid, "create_time": _ct(pid), "role": role, "ppid": ppid}
                for pid, role, ppid in ((creator.pid, "main", 1), (first, "compile-worker", creator.pid),
                                        (second, "compile-worker", creator.pid))}
        got = {e["pid"]: e for e in OrphanFds().look(live, leftover=True) if e["pid"] != creator.pid}
        (h1,), (h2,) = got[first]["listen"], got[second]["listen"]
        assert (h1["port"], h1.get("creator_holds")) == (port, True), got
        assert (h2["port"], h2.get("creator_holds")) == (own_port, None), got
        theirs = {os.stat(f"/proc/{creator.pid}/fd/{fd}").st_ino for fd in os.listdir(f"/proc/{creator.pid}/fd")}
        assert h1["inode"] == os.stat(f"/proc/{first}/fd/{h1['fds'][0]}").st_ino and h1["inode"] in theirs
        assert h2["inode"] not in theirs
    finally:
        for pid in (locals().get("first"), locals().get("second"), creator.pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        creator.wait(timeout=30)


def test_net_lines_give_listeners_and_bound_udp_only() -> None:
    """/proc/net/tcp6 and udp text: a LISTEN socket's address and port (host-order words), an established one
    not; a bound UDP socket with no remote, a connected one not."""
    head = b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    lo6 = b"00000000000000000000000001000000"
    tcp6 = head + (b"   0: " + lo6 + b":1F9B 00000000000000000000000000000000:0000 0A 00000000:00000000 "
                   b"00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n"
                   b"   1: " + lo6 + b":1F9B " + lo6 + b":D431 01 00000000:00000000 "
                   b"00:00000000 00000000  1000        0 4343 1 0000000000000000 100 0 0 10 0\n")
    assert parse_net(tcp6, "tcp", b"0A") == {4242: {"proto": "tcp", "addr": "::1", "port": 8091}}
    udp = head + (b"  10: 0100007F:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000 0 77 2 0\n"
                  b"  11: 0100007F:9C40 0100007F:0035 07 00000000:00000000 00:00000000 00000000  1000 0 78 2 0\n")
    assert parse_net(udp, "udp", b"07") == {77: {"proto": "udp", "addr": "127.0.0.1", "port": 5353}}


def orphaned_with(listen: bool, read_by: int | None, parent_end: float | None = None,
                  inodes: tuple[Any, Any] = (4242, 4242), creator_holds: bool = False) -> Any:
    """with_orphaned_fork_pool (child 150's 2 forked workers outlive it, 3.2 s -> 63.2 s; main 100 ends at 63.25 s)
    with the watcher's orphan_fds record at 3.2 s: each worker's listening socket of 127.0.0.1:8123 (listen; its
    inode per worker: one socket in both by default, None: an older record), the pipe main read (read_by: at their
    stdout and stderr); parent_end: main's end moved there."""
    from .test_model import with_orphaned_fork_pool

    w = with_orphaned_fork_pool()
    procs = []
    for pid, inode in zip((201, 202), inodes):
        e: dict[str, Any] = {"pid": pid, "create_time": 0.0, "creator": 150}
        if listen:
            e["listen"] = [{"proto": "tcp", "addr": "127.0.0.1", "port": 8123, "fds": [5],
                            **({"inode": inode} if inode is not None else {}),
                            **({"creator_holds": True} if creator_holds else {})}]
        if read_by is not None:
            e["read_by"] = {"pid": read_by, "fds": [1, 2]}
        procs.append(e)
    watcher(w, 3.21, "orphan_fds", procs=procs)
    if parent_end is not None:
        for rec in w.lines:
            if rec["pid"] == 100 and rec["event"] == "process_exit":
                rec["ts"] += parent_end - 63.25
    w.lines.sort(key=lambda x: x["ts"])
    return w


def _outlived(rep: dict[str, Any]) -> dict[str, Any]:
    return next(f for f in rep["findings"] if f["kind"] == "pool-outlived-creator")


def test_the_port_an_orphaned_pool_held_leads_the_answer(tmp_path: Path) -> None:
    """vllm#9737's shape: the workers held the crashed server's listening socket (127.0.0.1:8123) when the watcher
    read them, as the server's end was seen, and lived until 63.2 s, 60 s after it ended: the Answer leads with the
    port they held and how long they lived (no failed bind: no record holds
    one), under its cause; Fix first stays the start method."""
    rep = report(orphaned_with(listen=True, read_by=None), tmp_path)
    f = _outlived(rep)
    # one read, as the creator's end was seen: the socket is told as held then, the workers' end beside it (nothing
    # shows the socket still held after the read: a process may close an inherited fd)
    said = ("Child 150's compile pool (2 forked workers, no sidecar) held the listening socket of TCP port 8123 "
            "(127.0.0.1), their creator's (one socket in 2 of them), when read at 3.2 s, and lived on until "
            "63.2 s, 60.0 s after child 150 ended at 3.2 s")
    assert f["text"].startswith(said), f["text"]
    assert "could not bind" not in f["text"] and f["cost"]["port_read_at"] == pytest.approx(3.21, abs=0.01), f
    first = rep["answer"].split("\n- ")[0].replace("\n  ", " ")
    # the Answer's line: the same without why it was the creator's socket
    assert said.replace(", their creator's (one socket in 2 of them),", "") in first, rep["answer"]
    assert rep["answer"].split("Fix first: ", 1)[1].startswith('start the workers without fork: '
                                                               'worker_start_method="subprocess"'), rep["answer"]


@pytest.mark.parametrize("inodes, creator_holds, whose", [
    ((4242, 4343), False, ""), ((None, None), False, ""), ((4242, None), False, ""),
    ((4242, 4343), True, ", their creator's (child 150 held it too),")])
def test_a_listening_socket_is_told_as_the_creators_only_where_a_record_shows_it(
        tmp_path: Path, inodes: tuple[Any, Any], creator_holds: bool, whose: str) -> None:
    """Forked workers inherit their creator's listening socket, but a worker's own listener (a metrics server, a
    store) reads the same in /proc/PID/net: the socket is told as their creator's only where the record shows it,
    the one socket (inode) held by two of them, or the creator, alive then, holding it too. Else "a listening
    socket", and whose it was, no record shows (two sockets, or an older record with no inode)."""
    rep = report(orphaned_with(listen=True, read_by=None, inodes=inodes, creator_holds=creator_holds), tmp_path)
    text = _outlived(rep)["text"]
    held = f"held the listening socket of TCP port 8123 (127.0.0.1){whose} when read at 3.2 s" if whose else \
        "held a listening socket of TCP port 8123 (127.0.0.1) when read at 3.2 s"
    assert held in text, text
    unsure = "(whether theirs was their creator's or one of their own, no record shows)"
    assert (unsure in text) == (not whose), text


@pytest.mark.parametrize("read_by, parent_end, told", [(None, None, False), (100, None, True), (999, None, False),
                                                       (100, 75.9, False)])
def test_a_parent_is_said_to_have_waited_only_where_a_record_shows_it(
        tmp_path: Path, read_by: int | None, parent_end: float | None, told: bool) -> None:
    """The parent (main 100) ended after the orphans: told as having waited for them only where the watcher saw it
    hold the read end of their stdout and stderr and it ended within PARENT_WAIT_S after them (pytorch#87335's
    communicate()); not where no record shows a pipe, another process read it, or it ended 12.7 s later (a
    supervisor that went on to restart the server)."""
    rep = report(orphaned_with(listen=False, read_by=read_by, parent_end=parent_end), tmp_path)
    text = _outlived(rep)["text"]
    if told:
        assert "; main 100, its parent, read their stdout and stderr to the end and ended only then (" in text, text
        first = rep["answer"].split("\n- ")[0]  # the user's symptom (communicate() waited) leads the Answer
        assert "main 100, its parent, read their stdout and stderr to the end and ended only then" in first, first
    else:
        assert "its parent" not in text and "ended only then" not in text, text
        assert "outlived it by 60.0 s, until 63.2 s" in text, text


# A traced server: it binds a listening socket, starts a sidecar-like process (its command line is torch's compile
# sidecar's: the watcher's role for it) that inherits the socket, waits until the watcher has it as a member, and
# dies of SIGABRT, as port_held's server does. The root waits for the server, then says the port and exits.
SIDECAR = "import time\ntime.sleep(120)\n"
SERVER = textwrap.dedent("""
    import json, os, socket, subprocess, sys, time
    log, sidecar = os.environ["WP_AUTOTRACE_LOG"], sys.argv[1]
    sock = socket.create_server(("127.0.0.1", 0))
    p = subprocess.Popen([sys.executable, sidecar], pass_fds=(sock.fileno(),), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(sys.argv[2], "w") as f:
        f.write(f"{sock.getsockname()[1]} {p.pid}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and f'"pid":{p.pid},' not in open(log).read().split('"watcher_start"', 1)[-1]:
        time.sleep(0.05)
    os.abort()
""")
ROOT = textwrap.dedent("""
    import subprocess, sys
    subprocess.run([sys.executable, sys.argv[1], sys.argv[2], sys.argv[3]], stdin=subprocess.DEVNULL)
""")


def test_a_crashed_servers_port_its_orphaned_sidecar_holds_is_in_the_log(tmp_path: Path) -> None:
    """End to end, no torch: the server dies hard, its sidecar (a pool role) lives on holding the server's
    listening socket; the watcher's orphan_fds record names the sidecar and that port, as psutil reads it."""
    from .conftest import clean_env, read_log, wait_for_watcher, wait_until

    sidecar = tmp_path / "torch" / "_inductor" / "compile_worker" / "__main__.py"
    sidecar.parent.mkdir(parents=True)
    sidecar.write_text(SIDECAR)
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "root.py").write_text(ROOT)
    said, log = tmp_path / "said.txt", tmp_path / "run.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="2")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "root.py"), str(tmp_path / "server.py"), str(sidecar),
                             str(said)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    pid = None
    try:
        port, pid = (int(x) for x in wait_until(lambda: said.exists() and said.read_text(), 60,
                                                 what="the server's port").split())
        proc.wait(timeout=120)
        theirs = {c.laddr.port for c in psutil.Process(pid).net_connections("inet") if c.status == "LISTEN"}
        assert theirs == {port}, theirs
        recs = wait_for_watcher(log, 60, event="leftover")
        wait_until(lambda: any(r["event"] == "orphan_fds" for r in read_log(log, partial=True)), 30,
                   what="the orphan_fds record")
        held = [e for r in read_log(log, partial=True) if r["event"] == "orphan_fds" for e in r["procs"]]
        assert [(e["pid"], [h["port"] for h in e["listen"]]) for e in held] == [(pid, [port])], (held, recs[-3:])
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=30)


def test_an_orphans_pipes_are_its_own_where_its_creator_is_read_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a live creator's sockets are read (does it hold the orphan's socket?) and the creator's parent's pipe
    ends too, the orphan's pipes are still the orphan's: the pipe the parent reads is found in the orphan's fd
    table, at the orphan's fd number, never in the creator's."""
    from wp_autotrace.watcher import fds as F

    tables = {201: {1: "pipe:[900]", 5: "socket:[700]"}, 150: {7: "pipe:[901]", 9: "socket:[700]"}}
    monkeypatch.setattr(F, "fd_links", lambda pid, proc="/proc": tables.get(pid))
    monkeypatch.setattr(F, "listeners", lambda pid, proc="/proc": {700: {"port": 9000, "proto": "tcp", "addr": "x"}})
    monkeypatch.setattr(F, "read_end", lambda pid, fd, proc="/proc": False if (pid, fd) == (201, 1) else None)
    monkeypatch.setattr(F.OrphanFds, "_same", lambda self, pid, entry: True)
    monkeypatch.setattr(F.OrphanFds, "_read_ends", lambda self, pid: {900})
    live = {150: {"pid": 150, "create_time": 1.0}, 100: {"pid": 100, "create_time": 1.0}}
    (got,) = F.OrphanFds()._read([(201, {"pid": 201, "create_time": 2.0}, 150, 100)], live)
    assert got["read_by"] == {"pid": 100, "fds": [1]}, got
    assert got["listen"][0]["creator_holds"] is True, got


def test_what_a_pid_reused_during_the_reads_holds_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check that the pid is still the process's comes after every read of it (its fds, its sockets' table,
    its pipe ends' fdinfo): a pid reused during them gives nothing."""
    from wp_autotrace.watcher import fds as F

    reads: list[str] = []
    monkeypatch.setattr(F, "fd_links", lambda pid, proc="/proc": reads.append("fds") or {1: "pipe:[900]"})
    monkeypatch.setattr(F, "read_end", lambda pid, fd, proc="/proc": reads.append("fdinfo") or False)
    monkeypatch.setattr(F.OrphanFds, "_read_ends", lambda self, pid: {900})
    monkeypatch.setattr(F.OrphanFds, "_same", lambda self, pid, entry: pid != 201 or "fdinfo" not in reads)
    live = {100: {"pid": 100, "create_time": 1.0}}
    assert F.OrphanFds()._read([(201, {"pid": 201, "create_time": 2.0}, 150, 100)], live) == []


def test_a_socket_a_sidecar_and_its_workers_hold_is_not_told_as_their_creators(tmp_path: Path) -> None:
    """A SubprocPool's sidecar is exec'd by its creator with close_fds (none of the creator's sockets pass): one
    socket in the sidecar and the workers it forked is the sidecar's own, not "their creator's"."""
    from .logs import SP, T0, LogWriter, call, start

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=60.0)
    w.add(0.1, 150, 100, "child", "process_start", argv=["python", "main.py", "child"], python="3.11.7",
          forked=False, env={}, run="r1", root_pid=100)
    call(w, 3.0, 150, 100, "child", f"{SP}:SubprocPool.__init__", 1, 3.1, sidecar_pid=200)
    start(w, 3.02, 200, 150, "compile-sidecar")
    call(w, 3.05, 200, 150, "compile-sidecar", f"{SP}:SubprocMain.main", 1, None)
    for pid in (201, 202):
        w.add(3.08, pid, 200, "compile-worker", "process_start", argv=["python", "sidecar.py"], python="3.11.7",
              forked=True, env={}, run="r1", root_pid=100)
    watcher(w, 3.2, "tree", count=4, started=[], ended=[{"pid": 150, "end": T0 + 3.2}])

    def held(pid: int, creator: int) -> dict[str, Any]:
        return {"pid": pid, "create_time": 0.0, "creator": creator,
                "listen": [{"proto": "tcp", "addr": "127.0.0.1", "port": 9000, "fds": [7], "inode": 555}]}
    watcher(w, 3.21, "orphan_fds", procs=[held(200, 150)])
    for t in (4.0, 30.0, 60.0):
        watcher(w, t, "memory", procs=[{"pid": pid, "pss": 100 * 2**20, "uss": 2**20} for pid in (200, 201, 202)])
    watcher(w, 62.0, "orphan_fds", procs=[held(201, 200), held(202, 200)])
    watcher(w, 63.2, "tree", count=1, started=[], ended=[{"pid": p, "end": T0 + 63.2} for p in (200, 201, 202)])
    w.add(63.25, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 63.3, "leftover", how="root-exit", count=0, pids=[], procs=[])
    w.lines.sort(key=lambda r: r["ts"])
    (f,) = [f for f in report(w, tmp_path)["findings"] if f["kind"] == "pool-outlived-creator"]
    assert "held a listening socket of TCP port 9000 (127.0.0.1) when read at 3.2 s" in f["text"], f["text"]
    assert "their creator's" not in f["text"] and "whether theirs was their creator's" not in f["text"], f["text"]
