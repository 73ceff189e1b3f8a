"""`wp-autotrace run` delivers a signal to the program exactly once, however it was sent (issue #30 item 2),
and records the status it waited for in the log, so `report` says what `run` saw (item 7).

The five ways a signal arrives: `kill PID` (run's pid), `kill -- -PGID` (run's process group: systemd's
KillMode=control-group sends to each process, SLURM and shells to the group), Ctrl-C on a terminal (the
terminal signals its foreground group), SIGINT without a terminal, and a cgroup stop (the signal sent to
every process of the cgroup, as systemd and slurmstepd do; here to every process of run's tree, which is
what a cgroup holding only the run would get). Each is compared with the same program run untraced and
sent the same signal the same way: the program's handler runs as often (once) either way.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import pytest

from .conftest import clean_env, read_log, report_json, wait_for_watcher

# The program: counts each delivery of SIGTERM/SIGINT in a file, exits 3 s after the first (its own exit,
# never the signal's), with code 5.
PROGRAM = textwrap.dedent('''
    import os, signal, sys, time
    out = sys.argv[1]
    first = []
    def handler(sig, frame):
        with open(out, "a") as f:
            f.write(f"{sig} {os.getpid()}\\n")
        first.append(time.monotonic())
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    open(out + ".ready", "w").close()
    start = time.monotonic()
    while time.monotonic() - start < 60 and (not first or time.monotonic() - first[0] < 3):
        time.sleep(0.05)
    sys.exit(5)
''')
TIMEOUT_S = 60


def _tree(root: int) -> list[int]:
    found, todo = [root], [root]
    while todo:
        pid = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                found += kids
                todo += kids
        except OSError:
            continue
    return found


def _deliver(how: str, proc: subprocess.Popen[bytes], master: int | None) -> None:
    if how == "kill-pid":
        os.kill(proc.pid, signal.SIGTERM)
    elif how == "kill-group":
        os.killpg(os.getpgid(proc.pid), signal.SIGTERM)
    elif how == "tty-ctrl-c":
        assert master is not None
        os.write(master, b"\x03")
    elif how == "sigint-no-tty":
        os.kill(proc.pid, signal.SIGINT)
    elif how == "cgroup-stop":  # the program first, then run: the order that doubled it
        for pid in reversed(_tree(proc.pid)):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def _controlling_tty(slave: int) -> None:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)


def _run(cmd: list[str], how: str, out: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    master = None
    if how == "tty-ctrl-c":
        master, slave = pty.openpty()
        proc = subprocess.Popen(cmd, env=env, stdin=slave, stdout=slave, stderr=slave,
                                preexec_fn=lambda: _controlling_tty(slave))
        os.close(slave)
    else:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not Path(str(out) + ".ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the program's handlers are set before it says ready; run's before it starts it
        _deliver(how, proc, master)
        if master is not None:
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    os.read(master, 4096)  # drain: a full pty would block the program
                except OSError:
                    break
        code = proc.wait(TIMEOUT_S)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if master is not None:
            os.close(master)
    return code, out.read_text().splitlines() if out.exists() else []


WAYS = ["kill-pid", "kill-group", "tty-ctrl-c", "sigint-no-tty", "cgroup-stop"]


@pytest.mark.parametrize("how", WAYS)
def test_run_delivers_a_signal_once_however_it_was_sent(tmp_path: Path, how: str) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    plain_out = tmp_path / "plain.txt"
    plain_code, plain = _run([sys.executable, str(prog), str(plain_out)], how, plain_out, clean_env())
    log = tmp_path / "log.jsonl"
    traced_out = tmp_path / "traced.txt"
    cmd = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, str(prog),
           str(traced_out)]
    code, traced = _run(cmd, how, traced_out, clean_env())
    assert plain_code == 5 and len(plain) == 1, plain  # the untraced program: once
    assert len(traced) == 1, traced  # under run: once, never twice
    assert code == 5
    # run recorded what it waited for, so report (without run) knows it
    wait_for_watcher(log, timeout=20)
    exits = [r for r in read_log(log) if r["event"] == "run_exit"]
    assert len(exits) == 1 and exits[0]["status"] == 5
    rep = report_json(log)
    (run,) = rep["runs"]
    assert run["exit_status"] == 5


def test_report_says_the_signal_run_saw(tmp_path: Path) -> None:
    """`run` printed "killed by SIGKILL": a later `report` of the log says the same (issue #30 item 7)."""
    prog = tmp_path / "prog.py"
    prog.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    log = tmp_path / "log.jsonl"
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable,
                          str(prog)], env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 128 + signal.SIGKILL
    assert "SIGKILL" in res.stderr
    wait_for_watcher(log, timeout=20)
    rep = report_json(log)
    main = next(p for p in rep["processes"] if p["role"] == "main")
    assert main["ending"]["kind"] == "signal" and main["ending"]["signal"] == "SIGKILL"
    assert any("run_exit" in e for e in main["ending"]["evidence"])
    assert "SIGKILL" in rep["answer"] or any("SIGKILL" in f["text"] for f in rep["findings"])


def test_report_says_a_ctrl_c_end(tmp_path: Path) -> None:
    """A program ended by SIGINT (Ctrl-C, no handler: KeyboardInterrupt, then Python re-raises the signal):
    `run` exits 130, and the report's Run line says 'ended by SIGINT', not just 'ended' (issue #30 item 7)."""
    from wp_autotrace.analysis.logread import read_logs
    from wp_autotrace.analysis.render import render_text
    from wp_autotrace.analysis.report import analyze

    prog = tmp_path / "prog.py"
    prog.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n")
    log = tmp_path / "log.jsonl"
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable,
                          str(prog)], env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 128 + signal.SIGINT
    wait_for_watcher(log, timeout=20)
    data = read_logs([str(log)])
    text = render_text(analyze(data), data.skipped)
    assert "ended by SIGINT" in text
