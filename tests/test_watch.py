"""wp-autotrace watch: --once on a live traced run, the log read incrementally, the curses view under tmux."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.read.logread import Tail
from wp_autotrace.cli.watch import RunView

from .conftest import clean_env, read_log, run_python, wait_until

SIDECAR_SCRIPT = "torch/_inductor/compile_worker/__main__.py"
# The root starts a fake compile sidecar (its argv gives it the role) and both live until killed.
ROOT_CODE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, sys.argv[1]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
time.sleep(120)
"""
READY_TIMEOUT_S = 30


class LiveRun:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log
        self.sidecar = 0


@pytest.fixture
def live_run(tmp_path: Path) -> Iterator[LiveRun]:
    """A traced run with a live fake sidecar; the whole session is killed afterwards."""
    script = tmp_path / SIDECAR_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text("import time\ntime.sleep(120)\n")
    log = tmp_path / "wp_autotrace-live.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", ROOT_CODE, str(script)], cwd=tmp_path,
                            env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    run = LiveRun(proc, log)
    try:
        def sidecar() -> int:
            return next((r["pid"] for r in read_log(log, partial=True)
                         if r["event"] == "process_start" and r["role"] == "compile-sidecar"), 0)

        run.sidecar = wait_until(sidecar, READY_TIMEOUT_S, interval=0.2, what="the fake sidecar's process_start")
        yield run
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_once_shows_the_sidecar(live_run: LiveRun) -> None:
    """--once on a live run: the main process and the sidecar, with role, depth, rss and age."""
    res = run_python(["-m", "wp_autotrace", "watch", str(live_run.log), "--once"], clean_env(), timeout=60)
    assert res.returncode == 0, res.stderr
    assert "main" in res.stdout and "running" in res.stdout
    row = next(line for line in res.stdout.splitlines() if line.split()[:1] == [str(live_run.sidecar)])
    assert "compile-sidecar" in row and row.split()[3] == "1"  # depth 1, under main
    # rss in MiB, as labelled (bytes / 2**20), near the kernel's own figure read here (it may move a little).
    shown = int(row.split()[4])
    assert row.split()[5] == "MiB" and abs(shown - _rss_mib(live_run.sidecar)) <= RSS_SLACK_MIB, row


RSS_SLACK_MIB = 2  # a live process's rss moves between watch's reading and this test's


def _rss_mib(pid: int) -> float:
    """The process's resident size in MiB, from /proc/PID/statm (resident pages), as this test reads it."""
    resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_sizes_are_binary_units_as_labelled() -> None:
    """MiB are labelled MiB, and a process past 1 GiB is shown in GiB (issue #31 item 7: watch said 'MB')."""
    view = RunView()
    me = os.getpid()
    view.feed(json.loads(_rec("process_start", me, run="aa", root_pid=me, forked=False)))
    view.refresh()
    assert view.rss, "refresh did not read this process's rss"
    view.rss = {key: 3 * 2**30 for key in view.rss}
    text = "\n".join(view.render("run.jsonl"))
    assert "rss 3.0 GiB" in text and f"{me:>8}  main" in text and " 3.0 GiB " in text, text
    view.rss = {key: 600 * 2**20 for key in view.rss}
    text = "\n".join(view.render("run.jsonl"))
    assert "rss 600 MiB" in text and " 600 MiB " in text and "MB" not in text, text


def test_default_log_is_the_newest_in_cwd(live_run: LiveRun) -> None:
    """Without LOG: the newest wp_autotrace-*.jsonl here; none at all: exit 2."""
    res = run_python(["-m", "wp_autotrace", "watch", "--once"], clean_env(), cwd=live_run.log.parent, timeout=60)
    assert res.returncode == 0 and str(live_run.sidecar) in res.stdout, res.stderr
    res = run_python(["-m", "wp_autotrace", "watch", "--once"], clean_env(), cwd=live_run.log.parent / "torch")
    assert res.returncode == 2 and "no wp_autotrace-*.jsonl" in res.stderr


def _rec(event: str, pid: int, **fields: Any) -> bytes:
    base = {"v": 1, "event": event, "ts": time.time(), "pid": pid, "ppid": 1, "host": os.uname().nodename,
            "role": "main", "seq": 0}
    return json.dumps({**base, **fields}).encode()


def test_tail_is_incremental_and_tolerant(tmp_path: Path) -> None:
    """A partial last line waits for its end; blank lines and a torn fragment before a record are skipped."""
    log = tmp_path / "run.jsonl"
    start = _rec("process_start", os.getpid(), run="aa", root_pid=os.getpid(), forked=False)
    call = _rec("call", os.getpid(), target="m:AsyncCompile.warm_pool", call_id=1, thread="MainThread",
                caller={"file": "/x/y/backend/__init__.py", "line": 3, "func": "<module>"})
    log.write_bytes(b"\n" + start + b"\n\n" + call[:20])
    tail = Tail(str(log))
    assert [r["event"] for r in tail.read()] == ["process_start"]
    with open(log, "ab") as f:
        f.write(call[20:] + b"\n" + b'{"v":1,"event":"ca' + _rec("return", os.getpid(), call_id=9) + b"\n")
    assert [r["event"] for r in tail.read()] == ["call", "return"]
    assert tail.read() == []


def test_open_calls_say_who_waits_on_what(tmp_path: Path) -> None:
    """A call without its return, in a live process, is listed with its caller; warm_pool callers are named."""
    view = RunView()
    me = os.getpid()
    view.feed(json.loads(_rec("process_start", me, run="aa", root_pid=me, forked=False)))
    view.feed(json.loads(_rec("call", me, target="m:AsyncCompile.warm_pool", tag="warm-pool", call_id=1,
                              thread="MainThread",
                              caller={"file": "/x/y/backend/__init__.py", "line": 3, "func": "<module>"})))
    assert view.refresh() is False
    text = "\n".join(view.render("run.jsonl"))
    assert "waits" in text and "in AsyncCompile.warm_pool (MainThread, called from y/backend/__init__.py:3)" in text
    assert "x1 from y/backend/__init__.py:3" in text
    view.feed(json.loads(_rec("return", me, call_id=1)))
    assert "open calls (0)" in "\n".join(view.render("run.jsonl"))


def test_ends_when_the_run_has_ended(tmp_path: Path) -> None:
    """Not on a terminal and without --once, watch still stops once the main process is gone."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    log = tmp_path / "run.jsonl"
    log.write_bytes(_rec("process_start", dead.pid, run="bb", root_pid=dead.pid, forked=False) + b"\n")
    res = run_python(["-m", "wp_autotrace", "watch", str(log), "--interval", "0.2"], clean_env(), timeout=30)
    assert res.returncode == 0 and "ended" in res.stdout, res.stdout + res.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_curses_view_draws_and_quits_on_q(live_run: LiveRun, tmp_path: Path) -> None:
    """Under tmux (a real terminal) the view draws in place and 'q' ends it."""
    sock = f"wp-watch-{os.getpid()}"
    tmux = ["tmux", "-L", sock]
    cmd = f"{sys.executable} -m wp_autotrace watch {live_run.log} --interval 0.3; sleep 5"
    env = clean_env(TERM="xterm")
    try:
        subprocess.run([*tmux, "new-session", "-d", "-s", "w", "-x", "150", "-y", "30", cmd], env=env, check=True,
                       timeout=30)
        def pane(shows: Any) -> str:
            """The tmux pane's text when shows(text) holds, else ''."""
            text = subprocess.run([*tmux, "capture-pane", "-p", "-t", "w"], capture_output=True, text=True,
                                  timeout=10).stdout
            return text if shows(text) else ""

        screen = wait_until(lambda: pane(lambda t: "q: quit" in t), 30, interval=0.3, what="the live view's 'q: quit'")
        assert "compile-sidecar" in screen, screen
        subprocess.run([*tmux, "send-keys", "-t", "w", "q"], check=True, timeout=10)
        # After q the plain last frame is printed and the shell sleeps.
        screen = wait_until(lambda: pane(lambda t: "q: quit" not in t and "wp-autotrace watch" in t), 15,
                            interval=0.3, what="the plain last frame after q")
        assert "compile-sidecar" in screen, screen
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=10)


def test_a_left_behind_process_keeps_its_depth() -> None:
    """Once the main process is gone, a live child still shows at its depth, marked as left."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    view = RunView()
    view.feed(json.loads(_rec("process_start", dead.pid, run="cc", root_pid=dead.pid, forked=False)))
    child = json.loads(_rec("process_start", os.getpid(), run="cc", root_pid=dead.pid, forked=False,
                            role="compile-sidecar"))
    child["ppid"] = dead.pid
    view.feed(child)
    assert view.refresh() is False  # this process is alive: the run has not ended
    (row,) = [line for line in view.render("x") if line.split()[:1] == [str(os.getpid())]]
    assert row.split()[1:4] == ["compile-sidecar", "(left)", "-"] and row.split()[4] == "1", row


def test_a_leftover_past_the_first_8_mib_is_shown(tmp_path: Path) -> None:
    """A log bigger than one read (12 MB of records before the leftover's process_start): the live leftover
    is shown, never 'main ended; 0 process(es) alive' (the view decided before reading the rest)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=clean_env(),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = tmp_path / "big.jsonl"
        filler = _rec("import", dead.pid, module="m" * 1000) + b"\n"
        with open(log, "wb") as f:
            f.write(_rec("process_start", dead.pid, run="dd", root_pid=dead.pid, forked=False) + b"\n")
            f.write(filler * (12 * 2**20 // len(filler)))
            child = json.loads(_rec("process_start", sleeper.pid, run="dd", root_pid=dead.pid, forked=False,
                                    role="compile-sidecar"))
            child["ppid"] = dead.pid
            f.write(json.dumps(child).encode() + b"\n")
        res = run_python(["-m", "wp_autotrace", "watch", str(log), "--once"], clean_env(), timeout=120)
        assert res.returncode == 0, res.stderr
        assert "1 process(es) alive" in res.stdout and str(sleeper.pid) in res.stdout, res.stdout
    finally:
        sleeper.kill()
        sleeper.wait(10)


def test_escapes_in_thread_names_and_commands_are_not_written_raw() -> None:
    """A thread name (or role, command) from the log reaches the terminal escaped, as the report's does."""
    view = RunView()
    me = os.getpid()
    view.feed(json.loads(_rec("process_start", me, run="aa", root_pid=me, forked=False)))
    view.feed(json.loads(_rec("call", me, target="m:AsyncCompile.warm_pool", tag="warm-pool", call_id=1,
                              thread="\x1b[2J\x1b]0;pwned\x07T\u202e", caller=None)))
    view.refresh()
    text = "\n".join(view.render("run\x1b.jsonl"))
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b[2J" in text


def test_a_moved_log_is_said_and_watch_stops(tmp_path: Path) -> None:
    """The log moved while watched: watch says so and exits 2 (no usable log), no traceback."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=clean_env(),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "run.jsonl"
    log.write_bytes(_rec("process_start", sleeper.pid, run="ee", root_pid=sleeper.pid, forked=False) + b"\n")
    watcher = subprocess.Popen([sys.executable, "-m", "wp_autotrace", "watch", str(log), "--interval", "0.1"],
                               env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().startswith(b"wp-autotrace watch")  # it runs: the first frame
        log.rename(tmp_path / "moved.jsonl")
        _, err = watcher.communicate(timeout=30)
        assert watcher.returncode == 2, err
        assert b"was moved or removed while watched" in err and b"Traceback" not in err, err
    finally:
        for proc in (watcher, sleeper):
            proc.kill()
            proc.wait(10)


def test_the_header_says_whether_the_verdict_is_written() -> None:
    """After the main process's end: 'verdict pending' until the watcher's leftover, then its count."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    view = RunView()
    view.feed(json.loads(_rec("process_start", dead.pid, run="ff", root_pid=dead.pid, forked=False)))
    # The watcher: this test's own process, alive (its verdict may still come).
    view.feed(json.loads(_rec("watcher_start", os.getpid(), run="ff", root_pid=dead.pid, role="watcher",
                              interval=0.1, linger=60.0)))
    view.feed(json.loads(_rec("process_exit", dead.pid, how="exit")))
    view.refresh()
    assert "ended; verdict pending" in view.render("x")[1]
    view.feed(json.loads(_rec("leftover", os.getpid(), run="ff", root_pid=dead.pid, role="watcher", how="root-exit",
                              count=0, pids=[], procs=[])))
    view.refresh()
    assert "the watcher's verdict: 0 left behind" in view.render("x")[1]


def test_a_gone_watcher_is_no_pending_verdict() -> None:
    """The watcher's pid is gone and it wrote no verdict: 'no verdict will come', never 'pending' for ever."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    view = RunView()
    view.feed(json.loads(_rec("process_start", dead.pid, run="ff", root_pid=dead.pid, forked=False)))
    view.feed(json.loads(_rec("watcher_start", 4_000_000, run="ff", root_pid=dead.pid, role="watcher",
                              interval=0.1, linger=60.0)))
    view.feed(json.loads(_rec("process_exit", dead.pid, how="exit")))
    view.refresh()
    assert "ended; no verdict will come" in view.render("x")[1]


def test_a_clock_ahead_of_this_host_is_no_negative_age() -> None:
    """A log from a host whose clock runs ahead (skew between hosts) shows '?' for its ages and waits,
    never a negative number of seconds."""
    import re

    ahead = time.time() + 3600
    view = RunView()
    view.feed(json.loads(_rec("process_start", os.getpid(), run="sk", root_pid=os.getpid(), forked=False,
                              ts=ahead)))
    view.feed(json.loads(_rec("call", os.getpid(), target="m:AsyncCompile.warm_pool", call_id=1,
                              thread="MainThread", ts=ahead,
                              caller={"file": "/x/y/backend/__init__.py", "line": 3, "func": "<module>"})))
    view.refresh()
    text = "\n".join(view.render("x"))
    (wait,) = [line for line in text.splitlines() if "AsyncCompile.warm_pool (" in line]
    assert not re.search(r"-\d+(\.\d)?s", text) and "waits        ? in" in wait, text


def test_a_reader_that_leaves_is_no_fault_of_the_log(live_run: LiveRun) -> None:
    """`wp-autotrace watch LOG | head -1` on a live run: the pipe's reader leaves after a line and watch's next
    refresh meets a broken pipe; it ends quietly with the closed-output status, as report does. Fails where
    watch told the broken pipe as the log's ("nothing to report: LOG: Broken pipe")."""
    proc = subprocess.Popen([sys.executable, "-m", "wp_autotrace", "watch", "--interval", "0.2", str(live_run.log)],
                            env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves, as head does
    try:
        code = proc.wait(READY_TIMEOUT_S)
    finally:
        proc.kill()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert code == 74 and "nothing to report" not in err, (code, err)


@pytest.mark.parametrize("interval", ["1e10", "1e308", "3601"])
def test_an_interval_past_an_hour_is_a_usage_error(tmp_path: Path, interval: str) -> None:
    """--interval 1e10 was taken, and the first refresh's time.sleep raised OverflowError: a traceback (exit 1)
    once the run was seen still running; now a usage error before the log is read."""
    from wp_autotrace.cli.main import main

    assert main(["watch", str(tmp_path / "none.jsonl"), "--interval", interval]) == 64  # not 2: never read


@pytest.mark.parametrize("text", ["", "garbage\n", '{"event": "process_start"'])
def test_once_of_a_log_without_a_record_is_no_usable_log(tmp_path: Path, text: str) -> None:
    """watch --once of an empty log, or one of no valid record, printed a view of nothing ('main ? ?') and
    exited 0; it is no usable log (exit 2), as for report."""
    from wp_autotrace.cli.main import main

    log = tmp_path / "run.jsonl"
    log.write_text(text)
    assert main(["watch", str(log), "--once"]) == 2



def test_a_log_of_no_traced_process_is_no_usable_log_for_report_and_watch(tmp_path: Path, capsys) -> None:
    """A log of valid records that name no process (cut down to its run_exit line): report told a run in which
    nothing happened ('Nothing unusual', 'main waited 0.0 s at exit', exit 0) where watch said 'no valid records'
    (they are valid), exit 2; both say there is no traced process in it, exit 2, text, --json and --html alike."""
    from wp_autotrace.cli.main import main

    log = tmp_path / "cut.jsonl"
    log.write_text('{"v":1,"event":"run_exit","ts":1796597429.5,"pid":900,"ppid":1,"host":"vm","role":"run",'
                   '"seq":0,"run":"r1","status":0,"how":"exit","launched_pid":901}\n')
    for argv in (["report", str(log)], ["report", "--json", str(log)],
                 ["report", "--html", "-o", str(tmp_path / "p.html"), str(log)], ["watch", str(log), "--once"]):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and f"no traced process in {log}" in err, (argv, out, err)
    assert not (tmp_path / "p.html").exists()

def test_a_log_removed_while_listed_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest log is chosen from a listing; a log removed before its time was read (an old run's, cleared away
    meanwhile) raised FileNotFoundError out of watch (a traceback); it is passed over."""
    from wp_autotrace.cli import watch as w

    kept = tmp_path / "wp_autotrace-h-1-aaaaaaaa.jsonl"
    kept.write_text("")
    gone = str(tmp_path / "wp_autotrace-h-2-bbbbbbbb.jsonl")
    monkeypatch.setattr(w.glob, "glob", lambda pattern: [gone, str(kept)])
    assert w.newest_log(str(tmp_path)) == str(kept)
