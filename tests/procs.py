"""Bounded runs of process trees that leave their own sessions (torchrun ranks, sidecar chains).

Killing a process group or session is not enough when a launcher starts
each child in a session of its own and orphans are re-parented: every
process of a traced run inherits WP_AUTOTRACE_LOG from the test, so the
test finds what it started by that variable in /proc/PID/environ (own
user's processes only) and kills exactly those.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

from .conftest import Result, WaitTimeout, read_log, wait_for_watcher, wait_until

# The start of a scenario script that measures its own pool beside the tracer: the waits for the watcher's
# samples, and smaps_rollup's PSS (the independent reading the tests compare the report's figures with).
PROBE_PRELUDE = textwrap.dedent('''
    import json, os, sys, time
    import psutil

    def sampled(n):
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            return f.read().count(b'"event":"memory"') >= n

    def read_all(pids, since):
        """Whether one watcher memory record after `since` holds every one of pids (a sweep of the whole pool:
        sweeps counted alone may all come before its workers exist, on a loaded box)."""
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            recs = [json.loads(x) for x in f.read().split(b"\\n") if b'"event":"memory"' in x and x.endswith(b"}")]
        return any(r["ts"] > since and set(pids) <= {e["pid"] for e in r["procs"]} for r in recs)

    def wait(cond, limit=30):
        start = time.monotonic()
        while not cond() and time.monotonic() - start < limit:
            time.sleep(0.2)

    def pss(pid):
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(x.split()[1]) * 1024 for x in f if x.startswith("Pss:"))
''')

# How long kill_run keeps sweeping: a dying sidecar chain may still fork for a moment.
SWEEP_S = 5.0
# How often run_until reads the whole log to ask ready(): the log grows to megabytes in torch runs.
READY_POLL_S = 0.5
# How long run_until gives the watcher to write its leftover record once the root has ended: a bound, not a
# sleep (it returns when the record lands); the watcher is niced, and beside two CPU hogs and torch runs it took
# over 5 s (test_torch_e2e's seed scenario found no leftover record once).
LEFTOVER_WAIT_S = 30.0


def pids_of_run(log: Path) -> list[int]:
    """Live processes of this user whose environment names this log."""
    marker = f"WP_AUTOTRACE_LOG={log}\0".encode()
    uid = os.getuid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read():
                    found.append(int(entry))
        except OSError:
            continue  # gone, or not ours to read
    return found


def kill_run(log: Path) -> int:
    """SIGKILL every process that runs with this log until none is left; returns how many."""
    killed: set[int] = set()

    def swept() -> bool:
        pids = pids_of_run(log)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        return not pids

    try:
        wait_until(swept, SWEEP_S, interval=0.1, what=f"no process left that runs with {log}")
    except WaitTimeout:
        pass  # called from `finally:` blocks: a survivor must not hide the test's own failure
    return len(killed)


def records(log: Path) -> list[dict[str, Any]]:
    """The complete records written so far (a line still being written is skipped)."""
    return read_log(log, partial=True)


def end_children_first(root: int) -> None:
    """Stop root (SIGSTOP: it cannot react to what follows), SIGKILL its descendants, and wait (bounded) until
    each has ended (a zombie, or gone): killed next, root ends after every one of them. Killed in one sweep
    (kill_run), root first in pid order, its children live on for as long as the sweep is descheduled between
    two kills, over the watcher's LEFTOVER_GRACE_S under load, and the report then rightly says them left
    running after the main process: a run that ends by the test's kill ends with no leftover only this way."""
    import psutil

    try:
        os.kill(root, signal.SIGSTOP)
        children = psutil.Process(root).children(recursive=True)
    except (ProcessLookupError, psutil.NoSuchProcess):
        return
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass

    def ended() -> bool:
        try:
            return all(not c.is_running() or c.status() == psutil.STATUS_ZOMBIE for c in children)
        except psutil.NoSuchProcess:
            return False  # one went between the two reads: ask again

    try:
        wait_until(ended, SWEEP_S, interval=0.05, what=f"the descendants of {root} ended")
    except WaitTimeout:
        pass  # called from a `finally:` block: kill_run still ends them


def run_until(cmd: list[str], env: dict[str, str], log: Path, ready: Callable[[list[dict[str, Any]]], Any],
              timeout: float = 120, cwd: Any = None, interrupts: int = 3, interrupt_wait: float = 3.0,
              children_first: bool = False, on_exit: Callable[[], Any] | None = None,
              root_first: bool = False) -> tuple[Result, bool]:
    """Run cmd until ready(records) holds (or timeout, or cmd exits), then stop the run; (result, reached).

    stdin is DEVNULL and stdout/stderr go to files beside the log, so a chatty run never blocks on a full
    pipe. Then SIGINT is sent up to `interrupts` times, `interrupt_wait` s apart, so the program's atexit
    handlers run (torch's may wait on a sidecar chain) and a launcher stops its ranks; when the root has
    ended, the watcher gets a moment to list what it left. Last, every process of the run is killed:
    the root's group and whatever else runs with this log (kill_run); with children_first, a root still
    running is stopped and its descendants end before it (end_children_first): none outlives it.
    on_exit, where given, is called once the root has ended (by itself or by the interrupts), before the
    leftover wait and the kill: what the run left is the test's to read then, before the kill ends it.
    With root_first, a root still running after the interrupts is SIGKILLed alone first and gets the same leftover
    wait, as a user's kill of a stuck main would: the sweep below ends the watcher too, and one that ended before
    it saw the root's end tells the root's end as unseen.
    """
    assert env.get("WP_AUTOTRACE_LOG") == str(log), "kill_run finds the run by its log"
    out_path, err_path = log.with_suffix(".stdout"), log.with_suffix(".stderr")
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
    try:
        try:
            wait_until(lambda: proc.poll() is not None or ready(records(log)), timeout, interval=READY_POLL_S)
        except WaitTimeout:
            pass  # the caller asserts on `reached`, with the run's stderr in its message
        reached = bool(ready(records(log)))
        for _ in range(interrupts):
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(interrupt_wait)
            except subprocess.TimeoutExpired:
                pass
        if root_first and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if on_exit is not None and proc.poll() is not None:
            on_exit()
        if proc.poll() is not None and b'"watcher_start"' in (log.read_bytes() if log.exists() else b""):
            try:
                wait_for_watcher(log, LEFTOVER_WAIT_S, event="leftover")  # the watcher lists what the root left
            except WaitTimeout:
                pass  # a test that needs the leftover record asserts on it itself
    finally:
        if children_first and proc.poll() is None:
            end_children_first(proc.pid)
        kill_run(log)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(10)
    result = Result(proc.returncode, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                    time.monotonic() - start)
    return result, reached
