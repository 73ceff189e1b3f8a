"""The watcher under a job step's end (watcher/signals.py): a scheduler signals every process of the step, the
watcher included. It records the signal (and its sender), watches on until the run ends, bounded, and the report
says it was sent the signal beside what it saw. Everything waited on is a condition (a record, a pid's state),
never a fixed sleep; each test kills what it started, by pid."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from .conftest import events, read_log, report_json, wait_for_watcher, wait_until
from .test_watcher import alive, kill_session, start_root, tree_started, watcher_pid

# The program: a child that ignores SIGTERM (a pool worker that will not end: the leftover), then, at its own
# SIGTERM, a handler that takes a moment: it waits until the watcher says it took its signal (a watcher killed
# by it never does: then the program goes on after WAIT_S), then exits 3 by sys.exit (its handlers run).
STEP = '''
    import json, os, signal, subprocess, sys, time
    got = []
    signal.signal(signal.SIGTERM, lambda s, f: got.append(1))
    kid = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                            "signal.SIG_IGN); print(flush=True); time.sleep(120)"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    kid.stdout.readline()  # its SIGTERM ignored from here on
    print(kid.pid, flush=True)
    while not got:
        time.sleep(0.02)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            if any(b'"watcher_signal"' in line for line in f):
                break
        time.sleep(0.02)
    sys.exit(3)
'''
IDLE = '''
    import time
    time.sleep(120)
'''


def kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def signals_of(recs: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(r["signal"], r["sender_pid"], r["action"]) for r in events(recs, "watcher_signal")]


def test_a_step_end_sigterm_to_every_process_keeps_the_watch_to_the_verdict(tmp_path: Path) -> None:
    """SIGTERM to the program's group and to the watcher at once (slurmstepd's step end): the watcher records it
    (the test's own pid as sender), sees the program's handler end it, writes the verdict with the child that
    ignored SIGTERM (alive: read from /proc here), and leaves at its bound (its linger after the signal) with
    what is still alive and watcher_exit saying SIGTERM.
    The report tells the program's end, the leftover and that the watcher was sent SIGTERM."""
    proc, log = start_root(STEP, tmp_path, WP_AUTOTRACE_LINGER="6")
    kid = 0
    try:
        assert proc.stdout is not None
        kid = int(proc.stdout.readline())
        wpid = watcher_pid(log)
        wait_until(lambda: kid in tree_started(read_log(log, partial=True)), 20, what=f"a tree record listing {kid}")
        os.killpg(proc.pid, signal.SIGTERM)
        os.kill(wpid, signal.SIGTERM)
        assert proc.wait(30) == 3
        recs = wait_for_watcher(log, 30)
        assert signals_of(recs) == [("SIGTERM", os.getpid(), "watch-on")]
        (main_exit,) = [r for r in events(recs, "process_exit") if r["pid"] == proc.pid]
        left = events(recs, "leftover")
        assert [(x["how"], x["pids"]) for x in left] == [("root-exit", [kid]), ("linger-end", [kid])]
        assert alive(kid)  # a true leftover: it ignored the SIGTERM
        (done,) = events(recs, "watcher_exit")
        assert done["reason"] == "signalled" and done["signal"] == "SIGTERM" and done["signals"] == 1
        assert main_exit["ts"] < left[0]["ts"] and events(recs, "tree")[-1]["final"] is True
        wait_until(lambda: not alive(wpid), 10, what=f"the watcher {wpid} gone")
        rep = report_json(log)
        (run,) = rep["runs"]
        assert run["leftover_checked"] and not run["no_verdict"] and main_exit["how"] == "exit"
        told = {f["kind"]: f["text"] for f in rep["findings"]}
        assert [f["pids"] for f in rep["findings"] if f["kind"] == "leftovers"] == [[kid]], told
        assert told["watcher-signalled"].startswith("The watcher was sent SIGTERM by ")
        assert f"(pid {os.getpid()}, uid {os.getuid()})" in told["watcher-signalled"]
        assert "it left within its bound, before a SIGKILL would come, the main process ended, 1 process(es) of " \
            "the run still alive" in told["watcher-signalled"]
    finally:
        if kid:
            kill_pid(kid)
        kill_session(proc)


def test_sigusr_is_ignored_and_a_second_sigterm_stops_the_watcher_now(tmp_path: Path) -> None:
    """SIGUSR1 (srun --signal's checkpoint request): recorded, ignored. A first SIGTERM: recorded, the watcher
    watches on (alive after its record, the main still running, its linger 60 s). A second: it leaves now,
    watcher_exit reason `signalled`, no verdict (the main process still runs), and the report says so."""
    proc, log = start_root(IDLE, tmp_path, WP_AUTOTRACE_LINGER="60")
    try:
        wpid = watcher_pid(log)
        for sig, said in ((signal.SIGUSR1, 1), (signal.SIGTERM, 2)):
            os.kill(wpid, sig)
            wait_until(lambda n=said: len(events(read_log(log, partial=True), "watcher_signal")) == n, 20,
                       what=f"watcher_signal record {said}")
            assert alive(wpid) and not events(read_log(log, partial=True), "watcher_exit")
        os.kill(wpid, signal.SIGTERM)
        recs = wait_for_watcher(log, 20)
        me = os.getpid()
        assert signals_of(recs) == [("SIGUSR1", me, "ignored"), ("SIGTERM", me, "watch-on"), ("SIGTERM", me, "stop")]
        (done,) = events(recs, "watcher_exit")
        assert done["reason"] == "signalled" and done["signal"] == "SIGTERM" and done["signals"] == 3
        assert not events(recs, "leftover") and proc.poll() is None  # the main runs on: no verdict to give
        wait_until(lambda: not alive(wpid), 10, what=f"the watcher {wpid} gone")
        told = {f["kind"]: f["text"] for f in report_json(log)["findings"]}
        me_said = f"{Path('/proc/self/comm').read_text().strip()} (pid {me}, uid {os.getuid()})"  # this test's name
        assert f"it left at a second SIGTERM (by {me_said}), the main process " \
            "still running (no verdict)" in told["watcher-signalled"]
    finally:
        kill_session(proc)


def test_one_sigterm_with_the_main_running_on_is_bounded_by_the_linger(tmp_path: Path) -> None:
    """One SIGTERM and a main process that ignores the step's end: the watcher leaves by itself within its
    linger (1 s here; SIGKILL would follow anyway), with a final tree record and watcher_exit `signalled`."""
    proc, log = start_root(IDLE, tmp_path, WP_AUTOTRACE_LINGER="1")
    try:
        wpid = watcher_pid(log)
        os.kill(wpid, signal.SIGTERM)
        recs = wait_for_watcher(log, 20)
        (done,) = events(recs, "watcher_exit")
        assert done["reason"] == "signalled" and done["signal"] == "SIGTERM"
        assert events(recs, "tree")[-1]["final"] is True and proc.poll() is None
        (said,) = events(recs, "watcher_signal")
        assert done["ts"] - said["ts"] >= 1.0  # it watched on for its linger first
    finally:
        kill_session(proc)


def test_a_signalled_watcher_without_its_exit_is_not_said_killed(tmp_path: Path) -> None:
    """A log read while the signalled watcher still watches (or after a SIGKILL): no watcher_exit. The log
    alone cannot tell which, and the finding says both, never "it was killed" as a fact; SIGUSR1 alone is a
    checkpoint request, ignored."""
    log = tmp_path / "run.jsonl"
    base = {"v": 1, "host": os.uname().nodename, "seq": 0, "run": "feedc0ffee01"}
    start = {**base, "event": "process_start", "ts": 100.0, "pid": 10, "ppid": 1, "role": "main", "root_pid": 10,
             "argv": ["python"], "create_time": 99.9}
    said = {**base, "event": "watcher_signal", "pid": 11, "ppid": 1, "role": "watcher", "root_pid": 10,
            "sender_pid": 7, "sender_uid": 0, "sender": "slurmstepd"}
    for records, words in (([{**said, "ts": 101.0, "signal": "SIGTERM", "action": "watch-on"}],
                            "The watcher was sent SIGTERM by slurmstepd (pid 7, uid 0) at 1.0 s: a scheduler "
                            "ending the job step"),
                           ([{**said, "ts": 101.0, "signal": "SIGUSR1", "action": "ignored"}],
                            "The watcher was sent SIGUSR1 by slurmstepd (pid 7, uid 0) at 1.0 s: a checkpoint "
                            "request")):
        log.write_text("".join(json.dumps(r) + "\n" for r in [start, *records]))
        told = {f["kind"]: f["text"] for f in report_json(log)["findings"]}
        assert told["watcher-signalled"].startswith(words), told
        if "SIGTERM" in words:
            assert "it was still watching as the log was read, or was killed before it could write one" in \
                told["watcher-signalled"]


def _state(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0]
    except OSError:
        return b""


# How long the watcher is held stopped each time: past its tick (INTERVAL_S), as a suspend is.
INTERVAL_S, HELD_S = 0.3, 1.0


def test_a_watcher_stopped_and_continued_watches_on_without_a_signal(tmp_path: Path) -> None:
    """The watcher stopped past its tick and continued, three times (SIGSTOP/SIGCONT: a SLURM suspend and
    resume, a debugger): no signal came, so none is recorded, and it watches on to the verdict. CPython's
    sigtimedwait handed its sleep a siginfo it never filled there: the watcher recorded a SIGHUP no one sent, or
    crashed on a signal number no signal has (tracer_error, no verdict)."""
    proc, log = start_root(IDLE, tmp_path, WP_AUTOTRACE_LINGER="5", WP_AUTOTRACE_SAMPLE_INTERVAL=str(INTERVAL_S))
    wpid = 0
    try:
        wpid = watcher_pid(log)
        wait_until(lambda: proc.pid in tree_started(read_log(log, partial=True)), 20, what="the root's tree entry")
        for _ in range(3):
            os.kill(wpid, signal.SIGSTOP)
            wait_until(lambda: _state(wpid) == b"T", 10, what=f"the watcher {wpid} stopped")
            time.sleep(HELD_S)  # the suspend itself: a duration, not a wait for an event
            os.kill(wpid, signal.SIGCONT)
            wait_until(lambda: _state(wpid) not in (b"T", b""), 10, what=f"the watcher {wpid} running")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        recs = wait_for_watcher(log, 30)
        assert not events(recs, "tracer_error") and not events(recs, "watcher_signal"), \
            events(recs, "tracer_error") + events(recs, "watcher_signal")
        assert [x["how"] for x in events(recs, "leftover")] == ["root-killed"]
        assert events(recs, "watcher_exit")[0]["reason"] != "error"
    finally:
        if wpid:
            try:
                os.kill(wpid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        kill_session(proc)
