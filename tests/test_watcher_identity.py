"""The watcher's identity of the run's main process is (pid, create_time), never the pid alone (issue 28 item 2).

In a pid namespace (unshare -pf --mount-proc, as root) steered with ns_last_pid, a descendant of the main
takes the main's pid right after the main is killed. The watcher must write it as a new process of the
run (not `main`), see the main's end, and give its verdict: both processes named left behind, within the
linger. On the code before the fix it adopted the descendant as the main: no verdict while it lived.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

from .conftest import WaitTimeout, clean_env, read_log, wait_until

# The descendant: waits for the main's pid to be free (killed, then reaped by the namespace's sh), steers
# the next pid to it and forks at once.
CHILD = textwrap.dedent('''
    import os, sys, time
    main = int(sys.argv[1])
    print("ready", flush=True)
    while os.path.exists(f"/proc/{main}"):
        time.sleep(0.001)
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(main - 1))
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    time.sleep(60)
''')
# The main: starts the descendant, waits until it runs, and is killed (no process_exit: the watcher keeps
# its interval, so the descendant's fork lands before the watcher's next look at the tree).
MAIN = textwrap.dedent('''
    import os, signal, subprocess, sys
    child = subprocess.Popen([sys.executable, sys.argv[1], str(os.getpid())], stdout=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
    assert child.stdout.readline() == b"ready\\n"
    os.kill(os.getpid(), signal.SIGKILL)
''')
LINGER_S = 2
DEADLINE_S = 60


def _records(log: Path) -> list[dict[str, Any]]:
    return read_log(log, partial=True)  # while the run writes: a line being written is read at the next ask


def _until(proc: subprocess.Popen[bytes], written: Callable[[], Any]) -> None:
    """Wait until written() holds or the namespace's sh has ended, DEADLINE_S at most; no failure here: the
    checks after it skip where no namespace could be made, and say what is missing."""
    try:
        wait_until(lambda: proc.poll() is not None or written(), DEADLINE_S, interval=0.1)
    except WaitTimeout:
        pass


def test_descendant_taking_the_mains_pid_is_not_the_main(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (a pid namespace and ns_last_pid)")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed")
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "main.py").write_text(MAIN)
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="1",
                    WP_AUTOTRACE_LINGER=str(LINGER_S))
    # sh is the namespace's pid 1: it reaps the killed main, then becomes a sleep without a fork (a fork could
    # take the steered pid); its exit would end every process in the namespace.
    script = f'"{sys.executable}" main.py child.py; exec sleep {DEADLINE_S}'
    proc = subprocess.Popen([unshare, "-pf", "--mount-proc", "sh", "-c", script], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        _until(proc, lambda: [r for r in _records(log) if r["event"] == "leftover" and r.get("how") == "linger-end"])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    if b"unshare" in err and not log.exists():
        pytest.skip(f"cannot make a pid namespace here: {err[:200]}")
    records = read_log(log)
    verdicts = [r for r in records if r["event"] == "leftover" and r.get("how") == "linger-end"]
    start = next(r for r in records if r["event"] == "process_start" and r.get("role") == "main")
    main_pid, main_ct = start["pid"], start["create_time"]
    entries = [e for r in records if r["event"] == "tree" for e in r.get("started", [])]
    again = [e for e in entries if e["pid"] == main_pid and e["create_time"] != main_ct]
    if not again:
        pytest.skip(f"ns_last_pid steering did not take: {err[-300:]!r}")
    assert all(e.get("role") != "main" for e in again), again  # a new process of the run, not the main
    ended = {(e["pid"], e["create_time"]) for r in records if r["event"] == "tree" for e in r.get("ended", [])}
    assert (main_pid, main_ct) in ended  # the main's end is written
    kinds = [r.get("how") for r in records if r["event"] == "leftover"]
    assert kinds and kinds[0] == "root-killed", kinds  # the verdict, and in time (the linger, not the reuser's end)
    assert verdicts, "no linger-end verdict while the pid's new owner lived"
    left = {(p["pid"], p["create_time"]) for p in verdicts[0]["procs"]}
    assert (main_pid, again[0]["create_time"]) in left, left


def _main_under_outer_proc(tmp_path: Path, unshare: str) -> tuple[Path, str]:
    """Run a traced main that leaves a sleep behind, under `unshare -pf` without --mount-proc (so /proc is the
    outer namespace's), until its log holds the watcher's exit and the main's; its log and unshare's stderr.
    sh is the namespace's init and forks the main (pid 2 there: outside, pid 2 is kthreadd, whose children
    are kernel threads; the main is not pid 1, so it starts a watcher); the sleep outlives the main while sh
    waits, and the namespace ends with sh, after the test has read the log."""
    (tmp_path / "main.py").write_text(textwrap.dedent('''
        import subprocess
        subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)  # left behind
    '''))
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="2")
    proc = subprocess.Popen([unshare, "-pf", "sh", "-c", f'"{sys.executable}" main.py; exec sleep {DEADLINE_S}'],
                            env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        # the watcher leaves at its start, maybe before the main's end: both are needed
        _until(proc, lambda: {"watcher_exit", "process_exit"} <= {r["event"] for r in _records(log)})
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
    return log, err.decode(errors="replace")


def test_a_proc_of_another_pid_namespace_gives_no_verdict(tmp_path: Path) -> None:
    """Issue 28 item 8: `unshare -pf` without --mount-proc, so /proc shows the outer namespace: the run's pids
    name other processes there. The watcher cannot see the run and says so (watcher_exit reason, no tree, no
    leftover), and the report says no verdict will come, never "nothing left" while a process lives on."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a pid namespace)")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed")
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze
    from wp_autotrace.common import vocab as V

    log, err = _main_under_outer_proc(tmp_path, unshare)
    if not log.exists():
        pytest.skip(f"cannot make a pid namespace here: {err[:200]}")
    records = read_log(log)
    watcher = [r for r in records if r.get("role") == "watcher"]
    assert [r["reason"] for r in watcher if r["event"] == "watcher_exit"] == [V.EXIT_PROC_ELSEWHERE], watcher
    assert not [r for r in watcher if r["event"] in ("tree", "leftover", "watcher_start")], watcher
    (run,) = analyze(read_logs([str(log)]))["runs"]
    assert V.EXIT_PROC_ELSEWHERE in (run["no_verdict"] or ""), run


def test_the_roots_below_list_is_not_read_from_another_namespaces_proc(tmp_path: Path) -> None:
    """Issue 28 item 8, the root's side: under `unshare -pf` without --mount-proc the root's own list of its
    live descendants at exit (process_exit.below) read the outer /proc, where its pid is another process
    (pid 2: kthreadd), and the report named that process's children (kernel threads) left behind. The root
    writes no list there, and the report says no verdict will come and that the run could not be seen."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a pid namespace)")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed")
    from wp_autotrace.analysis.present.render import render_text
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    log, _ = _main_under_outer_proc(tmp_path, unshare)
    records = read_log(log) if log.exists() else []
    if not records:
        pytest.skip("cannot make a pid namespace here")
    (end,) = [r for r in records if r["event"] == "process_exit" and r.get("role") == "main"]
    assert "below" not in end and "below_count" not in end, end
    data = read_logs([str(log)])
    rep = analyze(data)
    (run,) = rep["runs"]
    # no verdict and no look of this namespace's: how many were left is not known (null), never 0
    assert rep["leftover_count"] is None and rep["leftover_pids"] == [] and "leftovers" not in {
        f["kind"] for f in rep["findings"]}, rep["findings"]
    assert "could not see the run" in (run["no_verdict"] or ""), run
    assert "left behind at main exit: not known (no verdict will come" in render_text(rep, data.skipped)
