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

from wp_autotrace.analysis.fold.verdict import fold_and_judge
from wp_autotrace.analysis.read.logread import stream_logs
from wp_autotrace.cli.cleanup import cleanup
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
