"""A run the log saw no end of is judged from evidence, never "in progress" by default (issue 28 item 10).

A main killed before any watcher ran (no process_exit, no watcher record) was "in progress" for 120 s
after its last record, and a log cut mid-run (a watcher_start, no final record) for ever. The reader
now asks this host (analysis/fold/verdict.py look_now, with an explicit Reader): the main's pid and create
time (alive: in progress; gone: ended without its exit record), else its watcher's pid; where nothing
here can tell (another host's log), it says so, and "in progress" lasts only while the log is fresh.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from wp_autotrace.analysis.fold.verdict import (
    NO_WATCHER,
    RECENT_S,
    WATCHER_ENDED,
    WATCHER_START_LATE_S,
    Reader,
    this_host,
)
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.common.procfs import own_create_time

from .conftest import WaitTimeout, clean_env, run_python, wait_until
from .logs import T0, LogWriter, kinds, report
from .test_report_text import finding

GONE_PID = 4_000_000  # above any pid_max: never a live process
GONE_WATCHER = 4_000_001
DEADLINE_S = 60.0  # a real run's bound: its records come within a second or two


def killed_before_the_watcher(pid: int = GONE_PID, create_time: float = T0, host: str = "") -> LogWriter:
    """A main process that wrote process_start and a call, then was killed: no watcher record, no end."""
    w = LogWriter(host=host or this_host())
    w.add(0, pid, 1, "main", "process_start", argv=["python", "train.py"], python="3.11.7", forked=False,
          env={}, run="r1", root_pid=pid, create_time=create_time)
    w.add(0.5, pid, 1, "main", "config", settings={"compile_threads": 2}, torch_version="2.13.0")
    return w


def cut_mid_run(host: str = "") -> LogWriter:
    """The same with a watcher that started and sampled: the log stops there (no final tree, no verdict)."""
    w = killed_before_the_watcher(host=host)
    run = {"run": "r1", "root_pid": GONE_PID}
    w.add(0.05, GONE_WATCHER, GONE_PID, "watcher", "watcher_start", interval=0.1, linger=60.0, **run)
    w.add(0.1, GONE_WATCHER, GONE_PID, "watcher", "tree", count=1, started=[
        {"pid": GONE_PID, "ppid": 1, "rss": 10 << 20, "role": "main", "via": "root", "create_time": T0}],
        ended=[], **run)
    return w


def test_a_main_gone_before_any_watcher_ran_is_not_in_progress(tmp_path: Path) -> None:
    """Read on its host 5 s after its last record (a watcher may still be starting) and long after: its pid
    is gone, so it ended without its exit record; once no watcher can come, no verdict will."""
    rep = report(killed_before_the_watcher(), tmp_path, reader=Reader(T0 + 5, this_host()))
    (run,) = rep["runs"]
    assert run["state"] == "end not seen" and run["alive_now"] is False, run
    assert f"its pid {GONE_PID} is gone from this host" in run["end_check"]
    assert "in-progress" not in kinds(rep) and run["verdict_pending"] and not run["no_verdict"]
    rep = report(killed_before_the_watcher(), tmp_path, reader=Reader(T0 + 0.5 + WATCHER_START_LATE_S + 1,
                                                                     this_host()))
    (run,) = rep["runs"]
    assert run["state"] == "end not seen" and run["no_verdict"].startswith(NO_WATCHER), run
    assert not run["verdict_pending"] and {"root-killed", "no-verdict"} <= kinds(rep), rep["findings"]
    assert "ended without its exit record" in finding(rep, "root-killed")["text"]
    out = render_text(rep, {})
    assert "ended without its exit record (no process_exit; its pid" in out, out
    assert "in progress" not in out and "left behind at main exit: not known (no verdict will come: no watcher" in out


def test_a_main_whose_last_record_is_the_signal_it_sent_itself(tmp_path: Path) -> None:
    """A main that killed itself: its last record is its signal_sent, whose target is a pid, not a call's label;
    the report tells where it was last seen from it (it raised AttributeError on the int)."""
    w = killed_before_the_watcher()
    w.add(0.7, GONE_PID, 1, "main", "signal_sent", how="kill", target=GONE_PID, signal=9,
          frames=[{"file": "<string>", "line": 1, "func": "<module>"}])
    rep = report(w, tmp_path, reader=Reader(T0 + 5, this_host()))
    text = finding(rep, "root-killed")["text"]
    assert f"last record signal_sent SIGKILL to pid {GONE_PID} at 0.7 s" in text, text


def test_a_reused_pid_is_not_the_main(tmp_path: Path) -> None:
    """The main's pid is alive, but another process's (its create time differs): the main is gone."""
    rep = report(killed_before_the_watcher(pid=os.getpid(), create_time=T0), tmp_path,
                 reader=Reader(T0 + 5, this_host()))
    (run,) = rep["runs"]
    assert run["alive_now"] is False and "another process has it now" in run["end_check"], run


def test_a_live_main_is_in_progress_however_old_its_last_record(tmp_path: Path) -> None:
    """Its pid and create time are this process's: in progress a day after its last record (the log's age
    no longer decides), and the finding says what confirmed it."""
    w = killed_before_the_watcher(pid=os.getpid(), create_time=own_create_time() or 0.0)
    rep = report(w, tmp_path, reader=Reader(T0 + 86400, this_host()))
    (run,) = rep["runs"]
    assert run["state"] == "in progress" and run["alive_now"] is True, run
    assert "is alive on this host" in finding(rep, "in-progress")["text"]


def test_a_log_cut_mid_run_is_not_in_progress_for_ever(tmp_path: Path) -> None:
    """A watcher_start and a sample, then nothing: on its host the main's pid and the watcher's are gone:
    ended without its exit record, and the watcher ended without a verdict (it was "in progress" for ever)."""
    rep = report(cut_mid_run(), tmp_path, reader=Reader(T0 + 3600, this_host()))
    (run,) = rep["runs"]
    assert run["state"] == "end not seen" and run["alive_now"] is False, run
    assert run["no_verdict"].startswith(WATCHER_ENDED) and str(GONE_WATCHER) in run["no_verdict"], run
    assert "in-progress" not in kinds(rep)


def test_another_hosts_log_says_what_cannot_be_known(tmp_path: Path) -> None:
    """Read elsewhere nothing can be checked: in progress only while the log is fresh, and said to rest on
    its age; later "end not seen", with why it cannot be known, never "in progress" for ever."""
    rep = report(cut_mid_run("h1"), tmp_path, reader=Reader(T0 + 5, "elsewhere"))
    (run,) = rep["runs"]
    assert run["state"] == "in progress" and run["alive_now"] is None, run
    text = finding(rep, "in-progress")["text"]
    assert "nothing here confirms it: the log's last record is recent" in text and "written on h1" in text
    rep = report(cut_mid_run("h1"), tmp_path, reader=Reader(T0 + 0.5 + RECENT_S + 1, "elsewhere"))
    (run,) = rep["runs"]
    assert run["state"] == "end not seen" and run["alive_now"] is None, run
    assert "cannot be known: the log was written on h1 and is read on elsewhere" in finding(rep, "root-killed")["text"]
    assert "in progress" not in render_text(rep, {})


def test_a_real_main_killed_before_its_watcher(tmp_path: Path) -> None:
    """A traced program SIGKILLs itself at once, its watcher disabled (WP_AUTOTRACE_SAMPLE_INTERVAL=0): the
    report right after says it ended without its exit record (it said "still in progress" for 120 s), and
    read later, that no watcher ran."""
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    res = run_python(["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], env, cwd=tmp_path)
    assert res.returncode == -signal.SIGKILL, res.stderr
    out = run_python(["-m", "wp_autotrace", "report", str(log)], clean_env(), cwd=tmp_path)
    assert "ended without its exit record (no process_exit; its pid" in out.stdout, out.stdout + out.stderr
    assert "in progress" not in out.stdout and "its pools were never shut down" not in out.stdout, out.stdout
    (run,) = analyze(read_logs([str(log)]), reader=Reader(time.time() + WATCHER_START_LATE_S + 1,
                                                          this_host()))["runs"]
    assert run["state"] == "end not seen" and run["no_verdict"].startswith(NO_WATCHER), run


def test_a_main_alive_in_a_pid_namespace_below_is_in_progress(tmp_path: Path) -> None:
    """The main runs in a pid namespace of its own (`unshare -pf --mount-proc`: the log's pid is that
    namespace's): from outside, its pid here names nothing or another process, but it is alive (NSpid):
    in progress, never "ended"."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a pid namespace)")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed")
    log, flag = tmp_path / "log.jsonl", tmp_path / "started"
    (tmp_path / "main.py").write_text(textwrap.dedent(f'''
        import time
        open({str(flag)!r}, "w").close()
        time.sleep({DEADLINE_S})
    '''))
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    # sh is the namespace's pid 1, the main its pid 2 (a pid 1 main would be judged apart).
    proc = subprocess.Popen([unshare, "-pf", "--mount-proc", "sh", "-c", f'"{sys.executable}" main.py; true'],
                            env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        try:
            wait_until(lambda: proc.poll() is not None or flag.exists(), DEADLINE_S, what="the main's start")
        except WaitTimeout:
            pass  # said below
        if not flag.exists():
            pytest.skip("cannot make a pid namespace here (the main never started)")
        rep = analyze(read_logs([str(log)]), reader=Reader(time.time() + 86400, this_host()))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    (run,) = rep["runs"]
    assert run["state"] == "in progress" and run["alive_now"] is True, run
    assert f"its own pid namespace's pid {run['root_pid']}" in run["end_check"], run


def test_a_log_without_start_times_says_its_pid_cannot_be_checked(tmp_path: Path) -> None:
    """On its host, but no create time (no /proc where it ran, or an older writer): a live pid could be a reused
    one, so neither alive nor gone is claimed; the log's age decides, and the report says why."""
    w = killed_before_the_watcher()
    for r in w.lines:
        r.pop("create_time", None)
    rep = report(w, tmp_path, reader=Reader(T0 + 0.5 + RECENT_S + 1, this_host()))
    (run,) = rep["runs"]
    assert run["state"] == "end not seen" and run["alive_now"] is None, run
    assert "a reused pid cannot be told from it" in run["end_check"]
    assert "cannot be known" in finding(rep, "root-killed")["text"]


def test_end_unseen_advises_cleanup_only_for_a_pool_not_seen_to_end(tmp_path: Path) -> None:
    """A main whose end the log never saw: 'its pools were never shut down ... cleanup' only while a pool's
    sidecar was not seen to end; no pool at all, or a pool whose sidecar exited, leaves only the cause to
    find (the log says nothing is left of a pool)."""
    later = Reader(T0 + 0.5 + RECENT_S + 1, "elsewhere")
    never = "its pools were never shut down"
    rep = report(cut_mid_run("h1"), tmp_path, reader=later)
    assert never not in finding(rep, "root-killed")["advice"], rep["findings"]  # no pool was made
    w = cut_mid_run("h1")
    w.warm(0.2, GONE_PID, 1, "main", sidecar=200)
    w.add(0.25, 200, GONE_PID, "compile-sidecar", "process_start", argv=["python", "sidecar.py"], python="3.11.7",
          forked=False, env={}, run="r1", root_pid=GONE_PID)
    open_pool = finding(report(w, tmp_path, reader=later), "root-killed")["advice"]
    assert never in open_pool and "cleanup" in open_pool  # its sidecar was not seen to end
    w.add(0.4, 200, GONE_PID, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path, reader=later)
    assert rep["pools"] and never not in finding(rep, "root-killed")["advice"], rep["findings"]
