"""Bounded runs of process trees that leave their own sessions (torchrun ranks, sidecar chains).

Killing a process group or session is not enough when a launcher starts
each child in a session of its own and orphans are re-parented: every
process of a traced run inherits WP_AUTOTRACE_LOG from the test, so the
test finds what it started by that variable in /proc/PID/environ (own
user's processes only) and kills exactly those.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

# How long kill_run keeps sweeping: a dying sidecar chain may still fork for a moment.
SWEEP_S = 5.0


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
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:
        pids = pids_of_run(log)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return len(killed)


def records(log: Path) -> list[dict[str, Any]]:
    """The complete records written so far (a line still being written is skipped)."""
    if not log.exists():
        return []
    out = []
    for line in log.read_bytes().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def run_until_records(cmd: list[str], env: dict[str, str], log: Path, ready: Callable[[list[dict[str, Any]]], bool],
                      timeout: float, cwd: Any = None, grace: float = 0) -> tuple[bool, str]:
    """Start cmd (stdout/stderr to a file, stdin DEVNULL), wait until ready(records) or
    timeout, then kill everything of the run. Returns (ready reached, stderr tail).

    grace: first send SIGINT to cmd and give it that many seconds to wind down
    (so a launcher stops its ranks and the root writes its exit records).
    """
    assert env.get("WP_AUTOTRACE_LOG") == str(log), "kill_run finds the run by its log"
    err_path = log.with_suffix(".stderr")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, start_new_session=True)
    reached = False
    start = time.monotonic()
    try:
        while time.monotonic() - start < timeout:
            if ready(records(log)):
                reached = True
                break
            if proc.poll() is not None:
                reached = ready(records(log))
                break
            time.sleep(0.5)
        if grace and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
    finally:
        kill_run(log)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(10)
    return reached, err_path.read_text(errors="replace")[-3000:]
