"""cleanup against a leftover that forks as fast as it can: no child it forked outlives cleanup's "0 still alive".

A fork in flight when cleanup stops its parent for the walk finishes before the parent stops (kill() only queues
SIGSTOP). Read too early, the parent's children list lacked that child; SIGTERM then ended the parent and the
child, orphaned to init, lived on while cleanup counted "0 still alive". The forker here spends most of its time
inside fork() (a large address space to copy), so each round meets that window often: on the code before the
fix about half the rounds left such a child (10 of 20 measured, quiet box). What is alive afterwards is read
from /proc by the test itself (the leftover's session, which every child it forks inherits), never from cleanup.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wp_autotrace.analysis.fold.verdict import fold_and_judge
from wp_autotrace.analysis.read.logread import stream_logs
from wp_autotrace.cli.cleanup import cleanup
from wp_autotrace.cli.cleanup.sweep import Sweep
from wp_autotrace.common.procfs import ProcReader

from .conftest import clean_env, wait_until
from .test_cleanup import _dead_pid, _log

ROUNDS = 8
BALLAST_MB = 64  # page tables fork() copies: the longer a fork, the likelier one is in flight at the stop
# Forks without pause; keeps at most 8 children alive (the oldest SIGKILLed, reaped without blocking), so the
# tree stays small while fork() never stops. The children sleep: one that outlives cleanup is seen.
FORKER = """
import os, signal, sys, time
ballast = bytearray(int(sys.argv[1]) << 20)
for i in range(0, len(ballast), 4096):
    ballast[i] = 1
print("ready", flush=True)
kids = []
while True:
    pid = os.fork()
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    kids.append(pid)
    if len(kids) > 8:
        os.kill(kids.pop(0), signal.SIGKILL)
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
"""


def _alive_in_session(sid: int) -> list[str]:
    """Live (not zombie) processes of session sid, each as "pid state ppid", read from /proc here."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.getsid(int(name)) != sid:
                continue
            fields = Path(f"/proc/{name}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if fields[0] not in ("Z", "X"):
            found.append(f"{name} {fields[0]} ppid {fields[1]}")
    return found


def _one_round(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", FORKER, str(BALLAST_MB)], env=clean_env(), stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        info = ProcReader().stat(proc.pid)
        assert info is not None
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": info["create_time"],
                                                           "role": "compile-sidecar", "cmd": "python forker"}])
        said: list[str] = []
        status = cleanup([(fold_and_judge(stream_logs([str(log)]).records), None)], None, dry_run=False, grace=2.0,
                         say=said.append)
        text = "\n".join(said)
        assert status == 0 and said[-1].endswith(", 0 still alive"), text
        assert proc.wait(10) == -signal.SIGTERM, text
        wait_until(lambda: not _alive_in_session(proc.pid), 5,
                   what=lambda: f"the leftover's session to be empty; alive: {_alive_in_session(proc.pid)}; "
                                f"cleanup said:\n{text}")
    finally:
        proc.kill()
        proc.wait(10)
        for entry in _alive_in_session(proc.pid):
            try:
                os.kill(int(entry.split()[0]), signal.SIGKILL)
            except OSError:
                pass


def test_a_child_forked_as_the_walk_stops_its_parent_is_ended_too(tmp_path: Path) -> None:
    """Round after round, cleanup ends a leftover caught mid-fork and every child it forked: none is left alive
    in its session when cleanup says "0 still alive"."""
    for _ in range(ROUNDS):
        _one_round(tmp_path)


# A leftover with a child in its session: prints the child's pid once the child runs.
PARENT = """
import os, sys, time
pid = os.fork()
if pid == 0:
    time.sleep(120)
    os._exit(0)
print(pid, flush=True)
time.sleep(120)
"""


def _signals_pending(pid: int) -> int:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)


def test_an_orphan_left_in_a_leftovers_group_is_said_not_signalled(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The leftover ends on its own after cleanup admitted it and before cleanup stopped it (made to, here, just
    before the walk): its child, adopted by init before any walk, is tied to the run by nothing cleanup can read.
    It is not signalled, and the final count does not say "0 still alive" alone: it names the child as alive in
    the leftover's process group, not proven the run's."""
    proc = subprocess.Popen([sys.executable, "-c", PARENT], env=clean_env(), stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    child = 0
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        info = ProcReader().stat(proc.pid)
        assert info is not None
        log = _log(tmp_path / "run.jsonl", _dead_pid(), [{"pid": proc.pid, "create_time": info["create_time"],
                                                           "role": "compile-sidecar", "cmd": "python parent"}])
        real_grow = Sweep.grow

        def ended_first(sweep: Sweep) -> list[int]:
            proc.kill()
            proc.wait(10)  # reaped: its child is adopted now
            wait_until(lambda: Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()[1] != str(proc.pid),
                       10, what="the child to be adopted")
            return real_grow(sweep)

        monkeypatch.setattr(Sweep, "grow", ended_first)
        said: list[str] = []
        status = cleanup([(fold_and_judge(stream_logs([str(log)]).records), None)], None, dry_run=False, grace=2.0,
                         say=said.append)
        text = "\n".join(said)
        assert status == 0, text
        assert said[-1] == ("cleanup: 0 process(es) ended, 0 still alive; 1 more alive in their process groups, "
                            "not proven the run's, not signalled"), text  # the leftover ended by itself: not counted
        assert f"already gone: {proc.pid}" in text, text
        assert f"not signalled: {child} (python" in text and "nothing proves it the run's" in text, text
        assert Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()[0] == "S"  # alive, not stopped
        assert not _signals_pending(child), text
    finally:
        proc.kill()
        proc.wait(10)
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
