"""wp-autotrace cleanup: ends a run's real leftovers, spares reused pids, --dry-run signals nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.cli.cleanup.candidates import Candidate, Checker
from wp_autotrace.cli.cleanup.sweep import Sweep, children_first
from wp_autotrace.common.procfs import ProcReader

from .clock import alive, started
from .conftest import clean_env, events, read_log, run_python, wait_for_watcher, wait_until

HOST = os.uname().nodename
SLEEPER = "import time; time.sleep(120)"
RUN = "feedc0ffee00"
WATCHER_PID = 4_000_000  # above any pid_max: never a live process


# /proc/PID/stat's flags bit for a task on its way out (PF_EXITING, include/linux/sched.h).
PF_EXITING = 0x4


def assert_never_signalled(proc: subprocess.Popen[bytes]) -> None:
    """proc is alive and no signal is on its way to it, read from the kernel once cleanup has exited.

    Every kill() cleanup made returned before it exited, and the kernel queues a signal on its target inside
    kill() itself: a signal cleanup sent is here either still pending (SigPnd/ShdPnd), or taken, and then the
    process is exiting (PF_EXITING) or gone. So no sleep is needed to give a signal time to land; this
    replaced `time.sleep(0.2); assert proc.poll() is None`, which a loaded box could outrun.
    """
    assert proc.poll() is None, proc.returncode
    assert_no_signal_on_its_way(proc.pid)


def assert_no_signal_on_its_way(pid: int) -> None:
    """assert_never_signalled's kernel reading, for a live process this test did not start itself."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    flags = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[6])
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    assert not pending and not flags & PF_EXITING, (status["State"], hex(pending), hex(flags))


def _alive(pid: int, create_time: float) -> bool:
    """Whether pid is still the process that started at create_time, by the test's own reading now."""
    return alive(pid, create_time)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A long-lived untraced process this test owns (its parent: reaped here)."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], env=clean_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def _record(event: str, pid: int, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "event": event, "ts": time.time(), "pid": pid, "ppid": 1, "host": HOST, "role": "main",
            "seq": 0, **fields}


def _watcher(event: str, root: int, **fields: Any) -> dict[str, Any]:
    return {**_record(event, WATCHER_PID, run=RUN, root_pid=root, **fields), "role": "watcher", "ppid": root}


def _log(path: Path, root: int, procs: list[dict[str, Any]]) -> Path:
    """A run whose (dead) root left procs behind: the watcher's verdict lists them."""
    records = [_record("process_start", root, run=RUN, root_pid=root, forked=False, argv=["python"]),
               _record("process_exit", root, how="exit"),
               _watcher("leftover", root, how="root-exit", count=len(procs), pids=[p["pid"] for p in procs],
                        procs=procs)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    proc.wait()
    return proc.pid


def _cleanup(*args: str) -> Any:
    return run_python(["-m", "wp_autotrace", "cleanup", *args], clean_env(), timeout=60)


def leave_a_child(log: Path) -> int:
    """A traced run (its log at log) that leaves a sleeping child behind in a session of its own: the child's pid
    (the caller ends it)."""
    code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], "
            "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True); "
            "print(p.pid)")
    root = subprocess.run([sys.executable, "-c", code], env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                          capture_output=True, text=True, timeout=60)
    return int(root.stdout)


def test_real_leftover_is_ended(tmp_path: Path) -> None:
    """A traced run leaves a child behind; cleanup verifies it against the log and ends it."""
    log = tmp_path / "run.jsonl"
    pid = leave_a_child(log)
    try:
        (left,) = events(wait_for_watcher(log, 20, event="leftover"), "leftover")  # the watcher writes it
        assert pid in left["pids"]
        create_time = next(p["create_time"] for p in left["procs"] if p["pid"] == pid)
        assert _alive(pid, create_time)
        res = _cleanup(str(log), "--grace", "5")
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"ended: {pid} child" in res.stdout
        wait_until(lambda: not _alive(pid, create_time), 10, what=f"the ended leftover {pid} to be gone")
        res = _cleanup(str(log))  # again: nothing left to do
        assert res.returncode == 0 and f"already gone: {pid}" in res.stdout
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_pid_with_another_start_time_is_spared(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The log's start time differs from the live process's by one second: refused, never signalled."""
    began = started(sleeper.pid)
    assert began is not None
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid, "create_time": began - 1,
                                                       "role": "compile-sidecar", "cmd": "python"}])
    res = _cleanup(str(log), "--grace", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"refused: {sleeper.pid} compile-sidecar" in res.stdout and "pid reused" in res.stdout
    assert_never_signalled(sleeper)


def test_dry_run_changes_nothing(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """--dry-run names what it would end and signals nothing; without it the same log ends the process."""
    began = started(sleeper.pid)
    assert began is not None
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid, "create_time": began,
                                                       "role": "compile-sidecar", "cmd": "python -c sleep"}])
    res = _cleanup(str(log), "--dry-run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"would end: {sleeper.pid} compile-sidecar" in res.stdout
    # rss in MiB as labelled (issue #31 item 7: it said "MB"), near the kernel's figure read here.
    shown = res.stdout.split(f"would end: {sleeper.pid} compile-sidecar, rss ", 1)[1].split(":", 1)[0]
    resident = int(Path(f"/proc/{sleeper.pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    assert shown.endswith(" MiB") and abs(int(shown.split()[0]) - resident / 2**20) <= 2, shown
    assert_never_signalled(sleeper)
    res = _cleanup(str(log))
    assert res.returncode == 0 and f"ended: {sleeper.pid} compile-sidecar (SIGTERM)" in res.stdout
    assert sleeper.wait(10) == -signal.SIGTERM


def test_sigkill_after_grace(tmp_path: Path) -> None:
    """A process that ignores SIGTERM gets SIGKILL after --grace."""
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"],
                            env=clean_env(), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        began = started(proc.pid)
        assert began is not None
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": began}])
        res = _cleanup(str(log), "--grace", "0.5")
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"ended: {proc.pid} child (SIGKILL after 0.5 s)" in res.stdout
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait(10)


def test_a_running_run_is_left_alone(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """While the run's main process (here: this test) is alive, nothing is signalled; exit 3."""
    me = started(os.getpid())
    began = started(sleeper.pid)
    assert me is not None and began is not None
    records = [_record("process_start", os.getpid(), run=RUN, root_pid=os.getpid(), forked=False),
               _watcher("tree", os.getpid(), count=2, started=[
                   {"pid": os.getpid(), "create_time": me, "via": "root"},
                   {"pid": sleeper.pid, "create_time": began, "via": "child"}])]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cleanup(str(log))
    assert res.returncode == 3 and "still running" in res.stdout, res.stdout + res.stderr
    # No start time for the root anywhere (no tree record): its process_start time still identifies it.
    records[0]["ts"] = me + 0.5  # when the root wrote its process_start
    records = [records[0], _watcher("leftover", os.getpid(), how="root-exit", count=1, pids=[sleeper.pid],
                                    procs=[{"pid": sleeper.pid, "create_time": began}])]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cleanup(str(log))
    assert res.returncode == 3 and "still running" in res.stdout, res.stdout + res.stderr
    assert_never_signalled(sleeper)


def test_no_start_time_or_other_host_is_refused(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """A pid without a start time in the log, or on another host, is never signalled."""
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid}])
    res = _cleanup(str(log))
    assert res.returncode == 1 and "no start time" in res.stdout, res.stdout
    text = log.read_text().replace(f'"host": "{HOST}"', '"host": "elsewhere"')
    log.write_text(text)
    res = _cleanup(str(log))
    assert res.returncode == 1 and "on host elsewhere" in res.stdout, res.stdout
    # whether it still runs there, cleanup cannot know: its count never says "0 still alive" alone
    assert ("0 still alive; 1 refused, not signalled (whether still alive: not known here)" in res.stdout
            ), res.stdout
    assert_never_signalled(sleeper)


def test_children_first() -> None:
    """Deeper processes come first."""
    targets = [(Candidate("r", HOST, pid, 1.0, "x", "", None, None), {"ppid": ppid})
               for pid, ppid in ((10, 1), (12, 11), (11, 10))]
    assert [c.pid for c, _ in children_first(targets)] == [12, 11, 10]


def test_never_init_itself_or_processes_outside_the_run(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """A crafted log naming init, cleanup's own parents, or a live process (right start time) that started
    before the run's root or after the record naming it: every one refused, none signalled."""
    me, init, began = started(os.getpid()), started(1), started(sleeper.pid)
    assert me and init and began
    names = [{"pid": 1, "create_time": init},
             {"pid": os.getpid(), "create_time": me}]
    log = _log(tmp_path / "a.jsonl", _dead_pid(), names)
    res = _cleanup(str(log), "--dry-run")
    assert res.returncode == 1 and "would end" not in res.stdout, res.stdout
    assert res.stdout.count("never a run's process") == 2
    # The sleeper, named by a record written before it started.
    named = [{"pid": sleeper.pid, "create_time": began}]
    stale = read_log(_log(tmp_path / "b.jsonl", _dead_pid(), named))
    for r in stale:
        r["ts"] = began - 60
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stale))
    res = _cleanup(str(tmp_path / "b.jsonl"))
    assert res.returncode == 1 and "started after the record that names it" in res.stdout, res.stdout
    # The sleeper, started before the run's root did.
    later = read_log(_log(tmp_path / "c.jsonl", _dead_pid(), named))
    later[0]["create_time"] = began + 5
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in later))
    res = _cleanup(str(tmp_path / "c.jsonl"))
    assert res.returncode == 1 and "started before the run's main process" in res.stdout, res.stdout
    assert_never_signalled(sleeper)


def _pids_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds marker."""
    reader = ProcReader()
    found = []
    for pid in reader.pids():
        if pid != os.getpid() and marker in reader.cmdline(pid) and reader.stat(pid) is not None:
            found.append(pid)
    return found


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# A leftover that forks a new child every 20 ms while cleanup runs (each child sleeps); the marker names them.
FORKER = """
import os, sys, time
marker = sys.argv[1]
print("ready", flush=True)
while True:
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", marker])
    time.sleep(0.02)
"""


def test_a_leftover_that_keeps_forking_is_ended_with_its_whole_tree(tmp_path: Path) -> None:
    """The log names one leftover; it forks children born after the verdict, and keeps forking while cleanup
    runs. cleanup ends it and every descendant (they were left alive, the tree kept growing), and counts them."""
    marker = f"wp-forker-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, "-c", FORKER, marker], env=clean_env(), stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        wait_until(lambda: len(_pids_with(marker)) >= 4, 20, what="4 children born after the verdict")
        began = started(proc.pid)
        assert began is not None
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": began,
                                                           "role": "compile-sidecar", "cmd": "python forker"}])
        res = _cleanup(str(log), "--grace", "2")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "a descendant of the run's leftovers" in res.stdout
        assert proc.wait(10) == -signal.SIGTERM
        wait_until(lambda: not _pids_with(marker), 5, what=lambda: f"every forked child to end; still alive: "
                   f"{[(pid, ProcReader().stat(pid)) for pid in _pids_with(marker)]}; cleanup said:\n{res.stdout}")
        assert "still alive" in res.stdout and ", 0 still alive" in res.stdout
    finally:
        proc.kill()
        proc.wait(10)
        _kill_all(_pids_with(marker))


def test_dry_run_shows_the_live_command_line(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """--dry-run names the live process's command line beside the one the log holds."""
    began = started(sleeper.pid)
    assert began is not None
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid, "create_time": began,
                                                       "role": "compile-sidecar", "cmd": "python logged.py"}])
    res = _cleanup(str(log), "--dry-run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "time.sleep(120)" in res.stdout and "logged: python logged.py" in res.stdout
    assert_never_signalled(sleeper)


def test_possible_members_are_never_signalled(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """A process that only shares the root's group or session (tree.possible) is not the run's to end."""
    began = started(sleeper.pid)
    assert began is not None
    root = _dead_pid()
    entry = {"pid": sleeper.pid, "create_time": began, "ppid": 1, "via": "group"}
    records = [_record("process_start", root, run=RUN, root_pid=root, forked=False, argv=["python"]),
               _watcher("tree", root, count=1, started=[], ended=[], possible=[entry]),
               _record("process_exit", root, how="exit"),
               _watcher("leftover", root, how="root-exit", count=0, pids=[], procs=[])]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cleanup(str(log))
    assert res.returncode == 0 and "nothing to clean up" in res.stdout, res.stdout
    assert f"not signalled, only possibly the run's (they share only its process group or session): " \
        f"{sleeper.pid}" in res.stdout
    assert_never_signalled(sleeper)


def test_pending_verdict_uses_the_last_sample_and_says_so(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The main process ended and the watcher's leftover is not written yet: cleanup says so, and ends
    what the last sample after that end showed alive."""
    began = started(sleeper.pid)
    assert began is not None
    root = _dead_pid()
    entry = {"pid": sleeper.pid, "create_time": began, "ppid": root, "via": "child"}
    # The watcher is this test process (alive, started before its watcher_start): its verdict may still come.
    records = [_record("process_start", root, run=RUN, root_pid=root, forked=False, argv=["python"]),
               {**_watcher("watcher_start", root, interval=0.1, linger=60.0), "pid": os.getpid()},
               {**_watcher("tree", root, count=2, started=[entry], ended=[]), "pid": os.getpid()},
               _record("process_exit", root, how="exit"),
               {**_watcher("tree", root, count=1, started=[], ended=[{"pid": root, "end": time.time()}]),
                "pid": os.getpid()}]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cleanup(str(log), "--grace", "5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verdict pending" in res.stdout and "the last sample after its main process ended" in res.stdout
    assert f"ended: {sleeper.pid} child (SIGTERM)" in res.stdout
    assert sleeper.wait(10) == -signal.SIGTERM


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a log owned by another user naming root's process")
def test_each_log_judged_by_its_own_owner(tmp_path: Path) -> None:
    """As root, over a folder with root's own log and a log another user planted: the planted log's root-owned
    process is refused (ownership was judged on the union of the logs' owners), root's own leftover ends."""
    mine = subprocess.Popen([sys.executable, "-c", SLEEPER], env=clean_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    victim = subprocess.Popen([sys.executable, "-c", SLEEPER], env=clean_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        a, b = started(mine.pid), started(victim.pid)
        assert a is not None and b is not None
        own = _log(tmp_path / "own.jsonl", _dead_pid(), [{"pid": mine.pid, "create_time": a}])
        planted = _log(tmp_path / "planted.jsonl", _dead_pid(), [{"pid": victim.pid,
                                                                   "create_time": b}])
        os.chown(planted, 65534, 65534)  # nobody's
        res = _cleanup(str(own), str(planted), "--grace", "5")
        assert res.returncode == 1, res.stdout + res.stderr
        assert f"refused: {victim.pid} child: owned by uid 0, while the log that names it is uid 65534's" \
            in res.stdout
        assert mine.wait(10) == -signal.SIGTERM
        assert_never_signalled(victim)
    finally:
        for proc in (mine, victim):
            proc.kill()
            proc.wait(10)


class _Reader:
    """A fake /proc: stat and children of made-up pids (never signalled: the tests only walk)."""

    def __init__(self, stats: dict[int, dict[str, Any]], children: dict[int, list[int]]) -> None:
        self.stats, self.kids = stats, children

    def stat(self, pid: int) -> dict[str, Any] | None:
        return self.stats.get(pid)

    def children(self, pid: int, threads: int = 0) -> list[int] | None:
        return self.kids.get(pid) if pid in self.stats else None

    @staticmethod
    def argv(pid: int) -> list[str]:
        return ["sleep", "100"]

    @staticmethod
    def environ(pid: int) -> bytes:
        return b""


FAKE_MEMBER, FAKE_KID = 4_100_000, 4_100_001  # above any pid_max: no pidfd, no live process


def _fake_sweep(live_start: float) -> Sweep:
    """A sweep whose one member (logged start 100.0) is admitted; the live pid now started at live_start
    and has one child, started after both."""
    checker = Checker()
    checker.reader = _Reader({FAKE_MEMBER: {"pid": FAKE_MEMBER, "ppid": 1, "create_time": live_start, "rss": 0},
                              FAKE_KID: {"pid": FAKE_KID, "ppid": FAKE_MEMBER, "create_time": 300.0, "rss": 0}},
                             {FAKE_MEMBER: [FAKE_KID]})
    sweep = Sweep(checker, dry_run=True, grace=0.0, say=lambda text: None)
    member = Candidate(RUN, HOST, FAKE_MEMBER, 100.0, "child", "sleep", None, None, None)
    sweep.targets[FAKE_MEMBER] = (member, {"ppid": 1})
    sweep.pins[FAKE_MEMBER] = None
    return sweep


def test_children_of_an_ended_members_reused_pid_are_not_members() -> None:
    """A member ended and its pid now names another process (started later) with a child of its own:
    the walk re-verifies the parent after reading its children and takes nobody (review1 #9)."""
    reused, same = _fake_sweep(live_start=200.0), _fake_sweep(live_start=100.0)
    member = reused.targets[FAKE_MEMBER][0]
    assert not reused.member_alive(FAKE_MEMBER) and reused._children(member) == []
    assert reused.descendants([FAKE_MEMBER]) == []
    assert same.member_alive(FAKE_MEMBER) and [kid for kid, _ in same._children(member)] == [FAKE_KID]


def _take_pid(pid: int, argv: list[str]) -> subprocess.Popen[bytes] | None:
    """Start argv with exactly this pid (root: /proc/sys/kernel/ns_last_pid), or None if others raced us."""
    for _ in range(200):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait(10)
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK),
                    reason="needs root and a writable ns_last_pid to force a pid reuse")
def test_a_reused_pid_during_the_grace_is_never_walked(tmp_path: Path) -> None:
    """review1 #9, deterministic: leftover L dies at its SIGTERM; while cleanup waits the grace for a
    SIGTERM-ignoring leftover, an unrelated process takes L's pid and starts a child. cleanup's next walk
    must not take that child for a member of the run."""
    quick = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, start_new_session=True)
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ready', flush=True); time.sleep(300)"], env=clean_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    innocent: subprocess.Popen[bytes] | None = None
    kid = 0
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
        reader = ProcReader()
        a, b = started(quick.pid), started(stubborn.pid)
        assert a is not None and b is not None
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": quick.pid, "create_time": a},
                                                         {"pid": stubborn.pid, "create_time": b}])
        cl = subprocess.Popen([sys.executable, "-m", "wp_autotrace", "cleanup", "--grace", "4", str(log)],
                              env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        assert quick.wait(30) == -signal.SIGTERM  # reaped here, so its pid is free
        innocent = _take_pid(quick.pid, ["sh", "-c", "sleep 100 & echo $!; wait"])
        out, _ = cl.communicate(timeout=60)
        if innocent is None:
            pytest.skip("another process took the pid first")
        assert innocent.stdout is not None
        kid = int(innocent.stdout.readline())
        assert stubborn.wait(10) == -signal.SIGKILL
        assert innocent.poll() is None and reader.stat(kid) is not None, out
        # cleanup may NAME the child: it shares the ended leftover's process group (sh took that pid as its
        # session leader), and when the box's other processes move the pid counter past cleanup's reading
        # before sh forks, it is one born during the round there; it must never be signalled.
        said = [line for line in out.splitlines() if re.search(rf"\b{kid}\b", line)]
        assert all(line.startswith("not signalled: ") for line in said) and cl.returncode == 0, out
    finally:
        for proc in (quick, stubborn, innocent):
            if proc is not None:
                proc.kill()
                proc.wait(10)
        _kill_all([kid] if kid else [])


# A leftover whose SIGTERM handler forks a successor (it writes its pid to argv[1]) and exits at once: the
# successor is re-parented to init before any /proc walk can see it; traced, it writes its own process_start.
FORK_ON_TERM = r"""
import os, signal, sys, time
def on_term(*_):
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        time.sleep(120)
        os._exit(0)
    with open(sys.argv[1], "w") as f:
        f.write(str(pid))
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
time.sleep(120)
"""


def test_a_successor_forked_by_a_leftovers_sigterm_handler_is_ended(tmp_path: Path) -> None:
    """review1 #8: the successor is found from its own process_start (a child of a leftover) and ended;
    before, cleanup said '0 still alive' with the successor running."""
    log, succ = tmp_path / "run.jsonl", tmp_path / "succ.pid"
    pid, successor = _spawn_fork_on_term(log, succ), 0
    try:
        (left,) = events(wait_for_watcher(log, 20, event="leftover"), "leftover")
        assert pid in left["pids"]
        res = _cleanup(str(log), "--grace", "5")
        successor = int(succ.read_text())
        wait_until(lambda: ProcReader().stat(successor) is None, 10,  # a zombie counts as ended
                   what=f"the successor {successor} to end; cleanup said:\n{res.stdout}")
        assert res.returncode == 0 and f"ended: {successor} child" in res.stdout, res.stdout + res.stderr
        assert "2 process(es) ended, 0 still alive" in res.stdout
    finally:
        _kill_all([pid] + ([successor] if successor else []))


def _spawn_fork_on_term(log: Path, succ: Path) -> int:
    """A traced root that leaves behind a process whose SIGTERM handler forks a successor and exits."""
    code = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {FORK_ON_TERM!r}, {str(succ)!r}], "
            "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True); "
            "print(p.pid)")
    root = subprocess.run([sys.executable, "-c", code], env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                          capture_output=True, text=True, timeout=60)
    return int(root.stdout)


def test_a_successor_whose_record_lands_late_is_waited_for(tmp_path: Path) -> None:
    """The successor's own process_start is held back from cleanup's first re-reads of the log, as on a
    loaded host where it lands after them: cleanup waits for the newborn in the leftover's process group
    until the log names it, then ends it. Before, the round ended without it and the final count said it
    was alive and not signalled."""
    from wp_autotrace.analysis.fold.verdict import fold_and_judge
    from wp_autotrace.analysis.read.logread import stream_logs
    from wp_autotrace.cli.cleanup import cleanup

    log, succ = tmp_path / "run.jsonl", tmp_path / "succ.pid"
    pid, successor = _spawn_fork_on_term(log, succ), 0
    try:
        wait_for_watcher(log, 20, event="leftover")
        before = {r["pid"] for r in read_log(log)}
        reads = []

        def reload() -> list[tuple[Any, int | None]]:  # the first three re-reads miss the newcomers' records
            reads.append(1)
            records = list(stream_logs([str(log)]).records)
            if len(reads) <= 3:
                records = [r for r in records if r.get("pid") in before]
            return [(fold_and_judge(records), None)]

        said: list[str] = []
        status = cleanup(reload(), None, dry_run=False, grace=5, say=said.append, reload=reload)
        successor = int(succ.read_text())
        text = "\n".join(said)
        assert status == 0 and f"ended: {successor} child" in text, text
        assert "2 process(es) ended, 0 still alive" in text, text
        assert len(reads) > 4, text  # the wait polled past the held-back reads
    finally:
        _kill_all([pid] + ([successor] if successor else []))


def test_a_live_process_the_log_names_is_never_counted_as_gone(tmp_path: Path,
                                                              sleeper: subprocess.Popen[bytes]) -> None:
    """The log names a live process as the run's (its own process_start) that the verdict does not list:
    it is not proven left behind, so it is not signalled, but cleanup does not say the tree is empty."""
    began = started(sleeper.pid)
    assert began is not None
    root = _dead_pid()
    records = [_record("process_start", root, run=RUN, root_pid=root, forked=False, argv=["python"]),
               {**_record("process_start", sleeper.pid, run=RUN, root_pid=root, forked=True, argv=["python"],
                          create_time=began), "ppid": root, "role": "child"},
               _record("process_exit", root, how="exit"),
               _watcher("leftover", root, how="root-exit", count=0, pids=[], procs=[])]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = _cleanup(str(log))
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"still alive, not signalled: {sleeper.pid} child" in res.stdout and "1 still alive" in res.stdout
    assert_never_signalled(sleeper)


def test_one_process_in_several_logs_is_counted_once(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """review1 #7: the same log given twice names one process: one candidate, one count, one line."""
    began = started(sleeper.pid)
    assert began is not None
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": sleeper.pid, "create_time": began}])
    res = _cleanup(str(log), str(log), "--dry-run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 process(es) left behind" in res.stdout and res.stdout.count(f"would end: {sleeper.pid}") == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a log owned by another user naming root's process")
def test_a_claim_refused_by_one_log_is_refused_whatever_the_order(tmp_path: Path,
                                                                  sleeper: subprocess.Popen[bytes]) -> None:
    """review1 #7: root's log and a planted copy both name root's process. Whatever the order: one process,
    refused (a log whose owner does not own it names it), both claims said, exit 1, nothing signalled."""
    began = started(sleeper.pid)
    assert began is not None
    procs = [{"pid": sleeper.pid, "create_time": began}]
    root = _dead_pid()
    own, planted = _log(tmp_path / "own.jsonl", root, procs), _log(tmp_path / "planted.jsonl", root, procs)
    os.chown(planted, 65534, 65534)
    for order in ((own, planted), (planted, own)):
        res = _cleanup(*map(str, order), "--grace", "5")
        assert res.returncode == 1, res.stdout + res.stderr
        assert "1 process(es) left behind" in res.stdout
        assert "while the log that names it is uid 65534's" in res.stdout and "the log of uid 0 would admit it" \
            in res.stdout
        assert_never_signalled(sleeper)


NOBODY = 65534  # a user who owns nothing here: another user's process, another user's log


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a process and a log of another user")
def test_a_refused_leftover_is_said_refused_not_unproven(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """Issue 28 item 14: the verdict names a process left behind that cleanup refuses to signal (another
    user's process; a log of another user naming yours): the last word says the verdict named it and why
    cleanup refused, never "not proven left behind"."""
    theirs = subprocess.Popen(["sleep", "120"], user=NOBODY, group=NOBODY, cwd="/", env=clean_env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        a, b = started(theirs.pid), started(sleeper.pid)
        assert a is not None and b is not None
        mine = _log(tmp_path / "mine.jsonl", _dead_pid(), [{"pid": theirs.pid, "create_time": a}])
        planted = _log(tmp_path / "planted.jsonl", _dead_pid(), [{"pid": sleeper.pid,
                                                                   "create_time": b}])
        os.chown(planted, NOBODY, NOBODY)
        for log, pid, why in ((mine, theirs.pid, f"owned by uid {NOBODY}, not you"),
                              (planted, sleeper.pid, f"owned by uid 0, while the log that names it is uid {NOBODY}'s")):
            res = _cleanup(str(log), "--grace", "5")
            assert res.returncode == 1, res.stdout + res.stderr
            assert (f"still alive, not signalled: {pid} child: the verdict names it left behind; cleanup refused "
                    f"to signal it: {why}") in res.stdout, res.stdout
            assert "not proven" not in res.stdout and "1 still alive" in res.stdout
        assert_never_signalled(theirs)
        assert_never_signalled(sleeper)
    finally:
        theirs.kill()
        theirs.wait(10)


@pytest.mark.timing
def test_each_grace_wait_is_capped_by_the_budget() -> None:
    """review1 #22: a SIGTERM-ignoring target and a grace far beyond what is left of the budget: the wait
    ends with the budget, not with the grace."""
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"], env=clean_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        began = started(proc.pid)
        assert began is not None
        sweep = Sweep(Checker(), dry_run=False, grace=60.0, say=lambda text: None)
        sweep.admit(Candidate(RUN, HOST, proc.pid, began, "child", "python", None, None, None))
        assert proc.pid in sweep.targets
        sweep.deadline = time.monotonic() + 0.5
        start = time.monotonic()
        assert sweep.end_round([proc.pid]) == []
        assert time.monotonic() - start < 20  # 0.5 s budget + the SIGKILL wait, loaded box: never the 60 s grace
        assert proc.wait(10) == -signal.SIGKILL
        sweep.close()
    finally:
        proc.kill()
        proc.wait(10)


class _Ending(_Reader):
    """A fake /proc whose made-up pids each end at a moment of their own (monotonic clock; None: never)."""

    def __init__(self, ends: dict[int, float | None]) -> None:
        super().__init__({}, {})
        self.ends = ends

    def stat(self, pid: int) -> dict[str, Any] | None:
        end = self.ends.get(pid, 0.0)
        alive = end is None or time.monotonic() < end
        return {"pid": pid, "ppid": 1, "create_time": 100.0, "rss": 0} if alive else None

    @staticmethod
    def last_pid() -> int:
        return 0


def test_killed_members_still_ending_are_no_survivors(monkeypatch: pytest.MonkeyPatch) -> None:
    """After SIGKILL a member ends only once the kernel runs its exit, and under load hundreds take their time (a
    500-deep chain beside two busy loops: "73 still alive", and a look 1 s later found none). Members that keep
    ending, one a second here (the last 4 s after the SIGKILL, past KILL_WAIT_S), are waited for and counted
    ended; the one that never ends is the survivor, said once KILL_WAIT_S passed with no end."""
    t0 = time.monotonic()
    ends: dict[int, float | None] = {4_200_000 + i: t0 + 1.0 + i for i in range(4)}
    stuck = 4_200_009
    ends[stuck] = None
    checker = Checker()
    checker.reader = _Ending(ends)
    sweep = Sweep(checker, dry_run=False, grace=0.0, say=lambda text: None)
    for pid in ends:  # made-up pids above any pid_max, and no signal is sent: the sending is stubbed
        sweep.targets[pid] = (Candidate(RUN, HOST, pid, 100.0, "child", "sleep", None, None, None), {"ppid": 1})
        sweep.pins[pid] = None
    monkeypatch.setattr(sweep, "signal", lambda pid, sig: True)
    monkeypatch.setattr(sweep, "send", lambda pids, sig: None)
    assert sweep.end_round(list(ends)) == [stuck]
    assert sweep.ended == 4 and time.monotonic() - t0 < 60  # the budget (120 s) bounds it; 6 s when idle


def test_grace_is_bounded() -> None:
    """--grace beyond the budget (or not finite) is refused, naming the maximum."""
    for bad in ("1e9", "inf", "nan", "-1"):
        res = _cleanup("--grace", bad, "x.jsonl")
        assert res.returncode == 64 and "argument --grace" in res.stderr, (bad, res.stderr)  # a usage error
    assert "at most 120 s" in _cleanup("--grace", "121", "x.jsonl").stderr


def test_the_owner_is_the_read_files_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log's owner comes from fstat of the fd that is read, never from a second lookup of the path (a
    user who can write the folder could swap the file between the two): a path lookup here lies."""
    import argparse

    from wp_autotrace.cli import cleanup as cleanup_mod

    log = _log(tmp_path / "run.jsonl", _dead_pid(), [])
    seen: list[Any] = []
    monkeypatch.setattr(cleanup_mod, "cleanup", lambda models, *a, **k: seen.extend(models) or 0)
    real_stat = os.stat

    def lying_stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        st = real_stat(path, *args, **kwargs)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, 54321, *tuple(st)[5:])) \
            if str(path) == str(log) else st

    monkeypatch.setattr(os, "stat", lying_stat)
    cleanup_mod.run(argparse.Namespace(logs=[str(log)], run=None, dry_run=True, grace=1.0))
    assert [owner for _, owner in seen] == [real_stat(log).st_uid]


# Runs cleanup on a log, sending itself SIGTERM at its first "found:" line: Sweep.grow says it once the leftover is
# stopped for the walk and its child has joined (a `timeout` around cleanup firing then).
TERM_AT_FOUND = """
import os, signal, sys
from wp_autotrace.cli import cleanup as c
def say(text):
    print(text, flush=True)
    if text.startswith("found:"):
        os.kill(os.getpid(), signal.SIGTERM)
sys.exit(c.cleanup([c._owned_model(sys.argv[1])], None, False, 2.0, say=say))
"""
# A leftover with a child: "ready" once the child runs.
PARENT_OF_ONE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdin=subprocess.DEVNULL)
print("ready", flush=True)
time.sleep(120)
"""


def _stopped_or_stopping(pid: int) -> bool:
    """pid is stopped, or a SIGSTOP waits for it (sent to a process not yet scheduled, it stops later: on a
    loaded box only the pending bit shows it at once). SIGCONT discards a pending SIGSTOP."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return status["State"].split()[0] in ("T", "t") or bool(pending & (1 << (signal.SIGSTOP - 1)))


def test_cleanup_ended_by_a_signal_mid_walk_leaves_nothing_stopped(tmp_path: Path) -> None:
    """SIGTERM to cleanup while the tree is stopped for the walk (a `timeout` around it, the terminal closed):
    cleanup still ends by that signal, and first continues every process it stopped; none stays stopped."""
    proc = subprocess.Popen([sys.executable, "-c", PARENT_OF_ONE], env=clean_env(), stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    kids: list[int] = []
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        kids = [int(k) for k in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        began = started(proc.pid)
        assert began is not None and len(kids) == 1
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": began,
                                                           "role": "compile-sidecar", "cmd": "python parent"}])
        res = run_python(["-c", TERM_AT_FOUND, str(log)], clean_env(), timeout=60)
        assert res.returncode == -signal.SIGTERM, res.stdout + res.stderr
        assert "found:" in res.stdout and "ended:" not in res.stdout, res.stdout
        assert not _stopped_or_stopping(proc.pid) and not _stopped_or_stopping(kids[0]), res.stdout
        assert proc.poll() is None  # only stopped and continued: never sent SIGTERM
    finally:
        _kill_all(kids)
        proc.kill()
        proc.wait(10)


# A leftover server S that starts another run's job: with a launcher L between them (`wp-autotrace run`, a shell)
# or not, then the job's main B and its child C. Prints S's children's pids as the tree stands: "L B C".
SERVER = """
import os, sys, time
def idle():
    while True:
        time.sleep(60)
r, w = os.pipe()
launcher = sys.argv[1] == "launcher"
if os.fork() == 0:
    me = os.getpid()
    if launcher and os.fork() != 0:
        idle()  # L
    b = os.getpid()
    c = os.fork()
    if c == 0:
        idle()  # C
    os.write(w, f"{me if launcher else 0} {b} {c}\\n".encode())
    idle()  # B
print(os.read(r, 100).decode().strip(), flush=True)
idle()
"""


def _cleanup_of_the_server(tmp_path: Path, server: subprocess.Popen[bytes], spared: list[int],
                           starts: dict[int, float | None], records: list[dict[str, Any]] | None = None) -> Any:
    """Run A's log lists only the server left behind (then records, another run's): `cleanup --run A` ends the
    server and never signals the spared processes below it; cleanup's result."""
    log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": server.pid, "create_time": starts[server.pid],
                                                       "role": "child", "cmd": "python server"}])
    with log.open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in records or [])
    res = _cleanup("--run", RUN, str(log), "--grace", "2")
    assert server.wait(10) == -signal.SIGTERM, res.stdout
    for pid in spared:
        assert _alive(pid, starts[pid]), (pid, res.stdout)
        assert_no_signal_on_its_way(pid)
    return res


@pytest.mark.parametrize("shape", ["launcher", "direct"])
def test_another_runs_job_below_a_leftover_is_never_signalled(tmp_path: Path, shape: str) -> None:
    """Run A's leftover S (a server) started run B's job (with a launcher L between, or not): its main B and
    B's child C, which B's own records name as run B's. `cleanup --run A` ends S, and refuses B and L, never
    walking below them: being below a leftover never makes a process the run's where a log says it is another's."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER, shape], env=clean_env(), stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        launcher, main_b, child_c = (int(x) for x in proc.stdout.readline().split())
        pids = [p for p in (launcher, main_b, child_c) if p]
        starts = {pid: started(pid) for pid in (proc.pid, *pids)}
        run_b = "b0b0b0b0b0b0"
        # run A's watcher, lingering for S, listed C below it (before C's own first record), but not B: C's parent
        # is named nowhere in run A
        tree = {**_watcher("tree", 1, count=2, started=[{"pid": child_c, "ppid": main_b, "create_time": starts[child_c],
                                                        "cmd": "python job.py"}], ended=[]), "run": RUN}
        job = [{**_record("process_start", pid, run=run_b, root_pid=main_b, forked=True, argv=["python", "job.py"],
                          create_time=starts[pid]), "ppid": ppid, "role": role, "ts": tree["ts"] + 0.1}
               for pid, ppid, role in ((main_b, launcher or proc.pid, "main"), (child_c, main_b, "child"))]
        res = _cleanup_of_the_server(tmp_path, proc, pids, starts, [tree, *job])
        assert "still alive" not in res.stdout.replace(", 0 still alive", "") and res.returncode == 0, res.stdout
        refused = launcher or main_b
        assert f"refused: {refused} " in res.stdout and f"run {run_b}'s" in res.stdout, res.stdout
        assert f"ended: {child_c}" not in res.stdout and f"ended: {main_b}" not in res.stdout, res.stdout
    finally:
        proc.kill()
        proc.wait(10)
        _kill_all(pids)


# A leftover server S whose job traces into another log: its main B (here `sleep`, so that nothing traces it) has
# tracing on and its own log in its environment, started by S itself or by a launcher L. Prints "L B".
SERVER_ELSEWHERE = """
import os, sys, time
r, w = os.pipe()
launcher, other = sys.argv[1] == "launcher", sys.argv[2]
if os.fork() == 0:
    me = os.getpid()
    if launcher:
        b = os.fork()
        if b != 0:
            os.write(w, f"{me} {b}\\n".encode())
            while True:
                time.sleep(60)
    else:
        os.write(w, f"0 {me}\\n".encode())
    os.execve("/bin/sleep", ["sleep", "300"], {"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": other})
print(os.read(r, 100).decode().strip(), flush=True)
while True:
    time.sleep(60)
"""


@pytest.mark.parametrize("shape", ["launcher", "direct"])
def test_another_runs_job_tracing_into_another_log_is_never_signalled(tmp_path: Path, shape: str) -> None:
    """Run A's leftover S started a job that traces into another log (no record of it in A's): its environment
    (tracing on, no run id, its own log) says it is a new run's main; cleanup refuses it and its launcher."""
    other = tmp_path / "other.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", SERVER_ELSEWHERE, shape, str(other)], env=clean_env(),
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        launcher, main_b = (int(x) for x in proc.stdout.readline().split())
        pids = [p for p in (launcher, main_b) if p]
        wait_until(lambda: Path(f"/proc/{main_b}/cmdline").read_bytes().startswith(b"sleep"), 20,
                   what="the job's exec")
        starts = {pid: started(pid) for pid in (proc.pid, *pids)}
        res = _cleanup_of_the_server(tmp_path, proc, pids, starts)
        assert f"traced into {other}" in res.stdout and res.returncode == 0, res.stdout
    finally:
        proc.kill()
        proc.wait(10)
        _kill_all(pids)


# A leftover forked by a traced main (no exec): its /proc environ is the main's start environment, tracing on, no run
# id yet, and the main's log as the main's cwd named it (here relative, from /, where it names nothing). It forks a
# worker the same way. Prints the worker's pid.
FORKED_LEFTOVER = """
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, f"{os.getpid()}\\n".encode())
    while True:
        time.sleep(60)
print(os.read(r, 100).decode().strip(), flush=True)
while True:
    time.sleep(60)
"""


def test_a_leftovers_forked_child_is_the_runs_whatever_its_start_environment_says(tmp_path: Path) -> None:
    """A run's own leftover and the worker it forked: the worker's environment is its parent's, byte for byte
    (tracing on, no run id, a relative log its cwd does not name), so it was forked, not started as a new run:
    cleanup ends both. Fails where that environment alone made it a new run's main ("its environment starts
    another run"): the run's own worker was left running and the count said 0 still alive."""
    env = {**clean_env(), "WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": "run.jsonl"}
    proc = subprocess.Popen([sys.executable, "-S", "-c", FORKED_LEFTOVER], env=env, cwd="/",
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # -S: no site, so not traced itself
    worker = 0
    try:
        assert proc.stdout is not None
        worker = int(proc.stdout.readline())
        starts = {pid: started(pid) for pid in (proc.pid, worker)}
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": starts[proc.pid],
                                                           "role": "child", "cmd": "python leftover"}])
        res = _cleanup("--run", RUN, str(log), "--grace", "2")
        assert proc.wait(10) == -signal.SIGTERM, res.stdout
        wait_until(lambda: not _alive(worker, starts[worker]), 10, what="the worker's end")
        assert "another run" not in res.stdout and res.returncode == 0, res.stdout
    finally:
        proc.kill()
        proc.wait(10)
        _kill_all([worker] if worker else [])


def test_the_heading_counts_what_the_verdict_names(tmp_path: Path) -> None:
    """The verdict names 1 leftover and the log names a forked child of it: the heading said "2 process(es) left
    behind according to the log" where the verdict and the report say 1; the child is counted apart."""
    from wp_autotrace.cli import cleanup as c

    from .logs import T0, LogWriter, watcher

    w = LogWriter(host=os.uname().nodename)
    w.add(0, 100, 1, "main", "process_start", argv=["python", "train.py"], forked=False, run="r1", root_pid=100)
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    for t, pid, ppid in ((0.5, 200, 100), (0.6, 300, 200)):
        w.add(t, pid, ppid, "child", "process_start", argv=["python", "train.py"], forked=True, run="r1", root_pid=100,
              create_time=T0 + t)
    w.add(1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 1.5, "leftover", how="root-exit", count=1,
            procs=[{"pid": 200, "ppid": 1, "name": "python", "cmd": "python train.py", "rss": 1 << 20,
                    "create_time": T0 + 0.5}])
    log = str(w.write(tmp_path / "log.jsonl"))
    said: list[str] = []
    c.cleanup([c._owned_model(log)], None, True, 1.0, say=said.append)
    heading = next(line for line in said if "according to the log" in line)
    assert heading == ("run r1: 1 process(es) left behind according to the log, and 1 process(es) the log names as "
                       "their descendants"), said


def test_a_run_id_the_log_does_not_hold_is_no_usable_log(tmp_path: Path) -> None:
    """`cleanup LOG --run ID` with a mistyped id said "nothing to clean up: the log names no leftover process for run
    ID" and exited 0, while the run's leftovers ran on; it is no usable log (exit 2, the log's runs named), as for
    report --run. The log's own id still cleans up."""
    from wp_autotrace.cli.main import main

    from .logs import LogWriter

    w = LogWriter()
    w.add(0, 100, 1, "main", "process_start", argv=["python", "train.py"], forked=False, run="r1", root_pid=100)
    w.add(1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    log = str(w.write(tmp_path / "log.jsonl"))
    assert main(["cleanup", log, "--run", "r2"]) == 2
    assert main(["cleanup", log, "--run", "r1"]) == 0
