"""How a process ended where its parent reaped it at once (subprocess.run, a shell): no zombie was there for the
watcher to read, so its wait status comes from its pidfd (PIDFD_GET_INFO's exit field, Linux 6.15+): a crashed child
reads "killed by SIGSEGV", never "ended unseen", and a sys.exit(3) step's code is known, which its process_exit
(written by atexit, which cannot see it) never held."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.words.lines import findings_lines
from wp_autotrace.common.pidfd import ExitWatch

from .conftest import clean_env, report_json, run_python, wait_for_watcher
from .logs import T0, LogWriter, report, start, watcher


def _kernel_keeps_status() -> bool:
    """Whether this kernel gives a reaped process's wait status through a pidfd held before it ended: Linux 6.15+,
    where the ioctl is not refused. Not whether the status READ is right: a wrong offset or request reads nothing or a
    wrong number, and that must fail the tests below, not skip them."""
    release = re.match(r"(\d+)\.(\d+)", os.uname().release)
    if release is None or (int(release[1]), int(release[2])) < (6, 15):
        return False
    watch = ExitWatch.make()
    if watch is None:
        return False
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    try:
        if not watch.add(child.pid):
            return False
        child.wait(60)
        watch.status(child.pid)
        return bool(watch.info)  # false: the ioctl was refused (a seccomp filter, a kernel without it)
    finally:
        watch.close()


def test_the_pidfd_gives_a_reaped_processes_wait_status() -> None:
    """ExitWatch.status: an exit code and a signal, read after the parent (here the test) reaped the process; None
    while it runs. Fails where the ioctl's request or the struct's offset is wrong (it then reads nothing or 0)."""
    if not _kernel_keeps_status():
        pytest.skip("this kernel keeps no wait status with a pidfd (Linux 6.15+)")
    watch = ExitWatch.make()
    assert watch is not None
    exits = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert watch.add(exits.pid)
    exits.wait(60)
    assert watch.status(exits.pid) == 3 << 8  # an exit code, after the test reaped it
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert watch.add(child.pid) and watch.status(child.pid) is None  # alive: nothing yet
        child.send_signal(signal.SIGSEGV)
        child.wait(60)
        assert watch.status(child.pid) == signal.SIGSEGV
    finally:
        child.kill()
        child.wait(60)
        watch.close()


# A program's first lines: wait until the watcher has listed this process (its pidfd is held from then), so that
# its end is the watcher's to see; one that ends before the watcher's first look at it has no pidfd to read.
LISTED = textwrap.dedent("""
    import os, time
    log, mark, end = os.environ["WP_AUTOTRACE_LOG"], '{"pid":%d,' % os.getpid(), time.monotonic() + 60
    while time.monotonic() < end:
        with open(log) as f:
            if any('"event":"tree"' in line and mark in line for line in f):
                break
        time.sleep(0.02)
""")
CRASHING = LISTED + textwrap.dedent("""
    import subprocess, sys
    for code in ("import ctypes; ctypes.string_at(0)", "import os; os.abort()", "import sys; sys.exit(3)"):
        print(subprocess.run([sys.executable, "-c", LISTED + code]).returncode, flush=True)
""").replace("LISTED", repr(LISTED))


def test_children_reaped_at_once_are_told_by_their_wait_status(tmp_path: Path) -> None:
    """A traced main runs three Python children with subprocess.run, which reaps each as it ends: one crashes
    (SIGSEGV), one aborts (SIGABRT), one calls sys.exit(3). Their endings say so from the wait status the watcher read
    through their pidfds; before, the first two ended unseen ("Nothing unusual" above them) and the third exited with
    no code. Fails without the watcher's status (the `ended` entries hold none) or without its reading."""
    if not _kernel_keeps_status():
        pytest.skip("this kernel keeps no wait status with a pidfd (Linux 6.15+)")
    script, log = tmp_path / "main.py", tmp_path / "log.jsonl"
    script.write_text(CRASHING)
    res = run_python([str(script)], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), cwd=tmp_path, timeout=120)
    assert res.stdout.split() == [str(-signal.SIGSEGV), str(-signal.SIGABRT), "3"], res
    wait_for_watcher(log, timeout=60)
    rep = report_json(log)
    kids = sorted((p for p in rep["processes"] if p["role"] == "child"), key=lambda p: p["start_s"])
    assert [(p["ending"]["signal"], p["ending"]["code"]) for p in kids] == [("SIGSEGV", None), ("SIGABRT", None),
                                                                          (None, 3)], kids
    assert all("read through its pidfd" in " ".join(p["ending"]["evidence"]) for p in kids[:2]), kids
    lines = " ".join(findings_lines(rep))  # with no finding, the line names each crash by its signal
    assert "3 traced processes ended" not in lines and (f"2 traced processes ended without an exit record: pid "
                                                        f"{kids[1]['pid']} by SIGABRT; pid {kids[0]['pid']} by "
                                                        "SIGSEGV.") in lines, lines


def test_a_steps_sys_exit_code_is_its_runs_exit_code(tmp_path: Path) -> None:
    """A Python step run by its parent (a shell, a CI runner; here the test), no `wp-autotrace run` around it, that
    ends with sys.exit(3): its run's exit_code is 3, from its wait status (its process_exit has no code)."""
    if not _kernel_keeps_status():
        pytest.skip("this kernel keeps no wait status with a pidfd (Linux 6.15+)")
    log = tmp_path / "log.jsonl"
    res = run_python(["-c", LISTED + "import sys; sys.exit(3)"], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                     cwd=tmp_path, timeout=60)
    assert res.returncode == 3
    wait_for_watcher(log, timeout=60)
    (run,) = report_json(log)["runs"]
    assert run["exit_code"] == 3, run


def test_an_ended_entrys_status_is_how_it_ended(tmp_path: Path) -> None:
    """The fold's reading, on any kernel: an `ended` entry's status 11 is SIGSEGV (the Timeline says so), 3 << 8 a
    main's exit code 3 where its process_exit holds none."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=5.0)
    start(w, 0.3, 301, 100, "child")
    watcher(w, 0.5, "tree", count=2, started=[{"pid": 301, "ppid": 100, "via": "child"}],
            ended=[{"pid": 301, "end": T0 + 0.45, "status": int(signal.SIGSEGV)}])
    w.add(1.0, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 1.1, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 1.05, "status": 3 << 8}])
    watcher(w, 1.2, "leftover", how="root-exit", count=0, pids=[], procs=[])
    rep = report(w, tmp_path)
    child = next(p for p in rep["processes"] if p["pid"] == 301)
    assert child["ending"]["signal"] == "SIGSEGV" and rep["runs"][0]["exit_code"] == 3, (child, rep["runs"])
    assert "ended by SIGSEGV" in render_text(rep, {})
