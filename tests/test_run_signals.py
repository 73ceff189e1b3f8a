"""`wp-autotrace run` delivers a signal to the program exactly once, however it was sent (issue #30 item 2),
and records the status it waited for in the log, so `report` says what `run` saw (item 7).

The five ways a signal arrives: `kill PID` (run's pid), `kill -- -PGID` (run's process group: systemd's
KillMode=control-group sends to each process, SLURM and shells to the group), Ctrl-C on a terminal (the
terminal signals its foreground group), SIGINT without a terminal, and a cgroup stop (the signal sent to
every process of the cgroup, as systemd and slurmstepd do; here to every process of run's tree, which is
what a cgroup holding only the run would get). Each is compared with the same program run untraced and
sent the same signal the same way: the program's handler runs as often (once) either way.

The program's group: with a child in the program's group, each way (and SIGKILL to the group, and stops of
the group or the program alone) is compared untraced and under `run`, deliveries counted in the program and
in its child: a group signal reaches the whole group, a signal to run's pid the program only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import shlex
import signal
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import WaitTimeout, clean_env, read_log, report_json, wait_for_watcher, wait_until
from .test_oom import cgroup  # noqa: F401 (a fixture: a memory cgroup of the test's own)

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
    assert res.returncode == -signal.SIGKILL  # run ends by it too, after its summary
    assert "SIGKILL" in res.stderr
    wait_for_watcher(log, timeout=20)
    rep = report_json(log)
    main = next(p for p in rep["processes"] if p["role"] == "main")
    assert main["ending"]["kind"] == "signal" and main["ending"]["signal"] == "SIGKILL"
    assert any("run_exit" in e for e in main["ending"]["evidence"])
    assert "SIGKILL" in rep["answer"] or any("SIGKILL" in f["text"] for f in rep["findings"])


def test_report_says_a_ctrl_c_end(tmp_path: Path) -> None:
    """A program ended by SIGINT (Ctrl-C, no handler: KeyboardInterrupt, then Python re-raises the signal):
    `run` ends by SIGINT too, and the report's Run line says 'ended by SIGINT', not just 'ended' (issue #30 item 7)."""
    from wp_autotrace.analysis.present.render import render_text
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    prog = tmp_path / "prog.py"
    prog.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n")
    log = tmp_path / "log.jsonl"
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable,
                          str(prog)], env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == -signal.SIGINT
    wait_for_watcher(log, timeout=20)
    data = read_logs([str(log)])
    text = render_text(analyze(data), data.skipped)
    assert "ended by SIGINT" in text


# The program with a child in its process group (as a compile sidecar is): each counts the SIGTERM/SIGINT it
# gets in one file; the program writes both pids once both handlers are set, and exits (code 5) 1 s after
# its first signal; the child leaves once its parent is gone.
CHILD = textwrap.dedent('''
    import os, signal, sys, time
    out, parent = sys.argv[1], os.getppid()
    def handler(sig, frame):
        with open(out, "a") as f:
            f.write(f"child {sig}\\n")
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    open(out + ".child", "w").close()
    start = time.monotonic()
    while os.getppid() == parent and time.monotonic() - start < 60:
        time.sleep(0.05)
''')
GROUP_PROGRAM = textwrap.dedent('''
    import os, signal, subprocess, sys, time
    out = sys.argv[1]
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], out], stdin=subprocess.DEVNULL)
    while not os.path.exists(out + ".child"):
        time.sleep(0.02)
    first = []
    def handler(sig, frame):
        with open(out, "a") as f:
            f.write(f"program {sig}\\n")
        first.append(time.monotonic())
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    with open(out + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.rename(out + ".tmp", out + ".ready")
    start = time.monotonic()
    while time.monotonic() - start < 60 and (not first or time.monotonic() - first[0] < 1):
        time.sleep(0.05)
    sys.exit(5)
''')


def _gone(pid: int) -> bool:
    """Ended: no such pid, or a zombie (pid 1 reaps orphans late)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X")


def _group_run(cmd: list[str], how: str, out: Path, cg: Any = None) -> tuple[int, dict[str, int], list[int]]:
    """Run cmd in a session of its own (and in the cgroup cg, when given), send the signal `how` once the program
    and its child are ready: (the status, deliveries counted per process, the program's and child's pids
    still alive 10 s after)."""
    master = None
    if cg is not None:
        procs = os.path.join(cg.path, "cgroup.procs")

        def join() -> None:
            os.setsid()
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        proc = subprocess.Popen(cmd, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, preexec_fn=join)
    elif how == "tty-ctrl-c":
        master, slave = pty.openpty()
        proc = subprocess.Popen(cmd, env=clean_env(), stdin=slave, stdout=slave, stderr=slave,
                                preexec_fn=lambda: _controlling_tty(slave))
        os.close(slave)
    else:
        proc = subprocess.Popen(cmd, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    pids: list[int] = []
    try:
        pids = _ready_pids(out)
        if how == "group-sigkill":
            os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
        elif cg is not None:  # as systemd's stop does: each process the cgroup holds (here the last first)
            for pid in sorted((int(p) for p in cg.read("cgroup.procs").split()), reverse=True):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        else:
            _deliver(how, proc, master)
        deadline = time.monotonic() + TIMEOUT_S
        while master is not None and proc.poll() is None and time.monotonic() < deadline:
            try:
                os.read(master, 4096)  # drain: a full pty would block the program
            except OSError:
                break
        code = proc.wait(TIMEOUT_S)
        try:
            wait_until(lambda: all(_gone(p) for p in pids), 10, what="the program and its child gone")
        except WaitTimeout:
            pass
        survivors = [p for p in pids if not _gone(p)]
    finally:
        _kill_all([*pids, proc.pid], proc)
        if master is not None:
            os.close(master)
    lines = out.read_text().splitlines() if out.exists() else []
    counts = {who: sum(1 for line in lines if line.startswith(who)) for who in ("program", "child")}
    return code, counts, survivors


def _ready_pids(out: Path) -> list[int]:
    """The program's and its child's pids, once the program wrote OUT.ready (both are then ready)."""
    ready = Path(str(out) + ".ready")
    wait_until(ready.exists, TIMEOUT_S, what="the program and its child ready")
    return [int(p) for p in ready.read_text().split()]


def _end_session(proc: subprocess.Popen[Any]) -> None:
    """End the process group a test started in a session of its own (proc leads it), and reap proc."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(TIMEOUT_S)


def _kill_all(pids: list[int], proc: subprocess.Popen[Any]) -> None:
    """End what a test started, by pid (the program, its child, run), and reap run."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(TIMEOUT_S)


@contextlib.contextmanager
def _group_job(tmp_path: Path, traced: bool) -> Iterator[tuple[subprocess.Popen[Any], list[int]]]:
    """GROUP_PROGRAM (and its child) as a job in a session of its own, under run where traced; yields the job's
    process and the program's and child's pids once both are ready; ends them all after."""
    prog, out = tmp_path / "prog.py", tmp_path / "out.txt"
    prog.write_text(GROUP_PROGRAM)
    cmd = [sys.executable, str(prog), str(out), CHILD]
    if traced:
        cmd = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(tmp_path / "log.jsonl"), "--", *cmd]
    proc = subprocess.Popen(cmd, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    pids: list[int] = []
    try:
        pids = _ready_pids(out)
        yield proc, pids
    finally:
        _kill_all([*pids, proc.pid], proc)


# Each way a signal reaches a program: its pid, its group (`kill -- -PGID`, also with SIGKILL, which no one
# can pass on), every process of its cgroup (here every process of the tree, as a cgroup holding only the
# job gets it), and the terminal's Ctrl-C (its foreground group).
GROUP_WAYS = {"kill-pid": {"program": 1, "child": 0}, "kill-group": {"program": 1, "child": 1},
              "cgroup-stop": {"program": 1, "child": 1}, "tty-ctrl-c": {"program": 1, "child": 1},
              "group-sigkill": {"program": 0, "child": 0}}


@pytest.mark.parametrize("how", list(GROUP_WAYS))
def test_run_signals_the_programs_group_as_untraced(tmp_path: Path, how: str) -> None:
    """A signal sent to run's group reaches the program's whole group (its child too), as the same signal
    sent to the untraced program's group does; one sent to run's pid reaches the program only, as one sent
    to the untraced program's pid does. Counted in the program and in its child, untraced and under run."""
    prog = tmp_path / "prog.py"
    prog.write_text(GROUP_PROGRAM)
    plain_out, traced_out = tmp_path / "plain.txt", tmp_path / "traced.txt"
    plain = _group_run([sys.executable, str(prog), str(plain_out), CHILD], how, plain_out)
    cmd = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(tmp_path / "log.jsonl"), "--", sys.executable,
           str(prog), str(traced_out), CHILD]
    traced = _group_run(cmd, how, traced_out)
    assert plain[1:] == (GROUP_WAYS[how], []), plain  # the untraced program: what the test expects
    assert traced[1:] == plain[1:], (traced, plain)  # under run: the same deliveries, nothing left alive
    assert traced[0] == plain[0], (traced, plain)  # code 5; SIGKILL ends run with its group


def _wait_stopped(pid: int) -> bool:
    """Whether our child pid reports itself stopped within TIMEOUT_S (as a shell's waitpid sees a job stop)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if got and os.WIFSTOPPED(status):
            return True
        if got:
            return False
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("how", ["stop-group", "stop-program"])
@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "run"])
def test_a_stopped_program_stops_its_job(tmp_path: Path, how: str, traced: bool) -> None:
    """The job's group stopped (Ctrl-Z's stop; a terminal's SIGTSTP is not sent to this test's orphaned
    group, so SIGSTOP stands for it) or the program's pid alone: the job's process, run or the untraced
    program, shows stopped to its parent, as a shell sees a job stop; `fg` (SIGCONT to the group)
    continues all of it, and a later group signal reaches the program and its child once each."""
    out = tmp_path / "out.txt"
    with _group_job(tmp_path, traced) as (proc, pids):
        if how == "stop-group":
            os.killpg(proc.pid, signal.SIGSTOP)
        else:
            os.kill(pids[0], signal.SIGSTOP)
        assert _wait_stopped(proc.pid), "the job did not show stopped"
        os.killpg(proc.pid, signal.SIGCONT)  # fg
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(TIMEOUT_S) == 5
    assert sorted(out.read_text().split("\n")[:-1]) == [f"child {signal.SIGTERM}", f"program {signal.SIGTERM}"]


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "run"])
def test_a_program_stopped_and_continued_alone_ends_its_job(tmp_path: Path, traced: bool) -> None:
    """`kill -STOP PID; kill -CONT PID` of the program alone (pausing a job to free its GPU, a debugger):
    the job shows stopped, then runs on and ends with the program's code, as untraced. Under run, the
    continue never reaches run, which followed the program's stop: without the sentinel continuing it, run
    stayed stopped after the program's end and the job never ended."""
    with _group_job(tmp_path, traced) as (proc, pids):
        os.kill(pids[0], signal.SIGSTOP)
        assert _wait_stopped(proc.pid), "the job did not show stopped"
        os.kill(pids[0], signal.SIGCONT)
        os.kill(pids[0], signal.SIGTERM)  # the program's pid: it ends 3 s later with code 5
        code = proc.wait(TIMEOUT_S)
    assert code == 5


def test_run_takes_a_cgroup_wide_signal_as_untraced(tmp_path: Path, cgroup: Any) -> None:  # noqa: F811
    """SIGTERM to every process of a real cgroup (systemd's, slurmstepd's stop; here a memory cgroup the
    test makes and runs the job in): the program and its child get it once each, untraced and under run
    (run's sentinel got it too: run passes nothing on)."""
    prog = tmp_path / "prog.py"
    prog.write_text(GROUP_PROGRAM)
    plain_out, traced_out = tmp_path / "plain.txt", tmp_path / "traced.txt"
    plain = _group_run([sys.executable, str(prog), str(plain_out), CHILD], "cgroup", plain_out, cgroup)
    cmd = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(tmp_path / "log.jsonl"), "--", sys.executable,
           str(prog), str(traced_out), CHILD]
    traced = _group_run(cmd, "cgroup", traced_out, cgroup)
    assert plain == (5, {"program": 1, "child": 1}, []), plain
    assert traced == plain, (traced, plain)


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "run"])
def test_ctrl_c_stops_the_script_that_ran_it(tmp_path: Path, traced: bool) -> None:
    """Ctrl-C (SIGINT to the job's group: the script's shell, run, the program) ends a Python program by
    SIGINT; bash then stops its script there, as it does only when its child died of SIGINT: run, after its
    summary, ends by SIGINT too (exiting 130 let the script run on)."""
    ready = tmp_path / "ready"
    prog = [sys.executable, "-c", f"import time; open({str(ready)!r}, 'w').close(); time.sleep(60)"]
    if traced:
        prog = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(tmp_path / "log.jsonl"), "--", *prog]
    script = f"{shlex.join(prog)}; echo after"
    proc = subprocess.Popen(["bash", "-c", script], env=clean_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        wait_until(ready.exists, TIMEOUT_S, what="the program ready")
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        _end_session(proc)
    assert (proc.returncode, out) == (-signal.SIGINT, ""), (proc.returncode, out)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.parametrize("names", ["run-alone", "run-and-program"])
def test_a_signal_sent_by_name_reaches_the_program_once(tmp_path: Path, names: str) -> None:
    """`pkill -f PATTERN` signals each process whose command line matches, one pid at a time. A pattern only
    run's command line holds (its --log: `pkill -f 'wp-autotrace run'`) is addressed to run, which passes it
    on; one the program's holds too (`pkill -f train.py`) reaches the program itself, and run must not pass
    it on a second time. Either way the program handles it once (here: its pkill limited to run's tree, so
    no other process on this machine is touched)."""
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    log, out = tmp_path / "log.jsonl", tmp_path / "traced.txt"
    cmd = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, str(prog), str(out)]
    pattern = str(log) if names == "run-alone" else str(prog)
    proc = subprocess.Popen(cmd, env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(Path(str(out) + ".ready").exists, TIMEOUT_S, what="the program ready")
        matched = [pid for pid in _tree(proc.pid) if pattern in _cmdline(pid)]
        for pid in matched:
            os.kill(pid, signal.SIGTERM)
        code = proc.wait(TIMEOUT_S)
    finally:
        _end_session(proc)
    assert len(out.read_text().splitlines()) == 1, (names, matched, out.read_text())
    assert code == 5


# Handles SIGTERM (says so and exits 0), not SIGUSR1 or SIGHUP (their default action would end it).
AS_INIT = textwrap.dedent('''
    import signal, sys, time
    def on_term(sig, frame):
        print("term", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    open(sys.argv[1], "w").close()
    end = time.monotonic() + 60
    while time.monotonic() < end:
        time.sleep(0.02)
    print("no SIGTERM came", flush=True)
''')


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/unshare"),
                    reason="needs root and unshare (a pid namespace)")
@pytest.mark.parametrize("traced", [False, True])
def test_run_as_a_namespaces_init_passes_on_only_what_the_program_catches(tmp_path: Path, traced: bool) -> None:
    """`unshare -pf wp-autotrace run -- PROG`, a container's entry point without --init: run is the pid namespace's
    init, where untraced the program would be, and the kernel gives an init only the signals it catches. SIGUSR1
    and SIGHUP (no handler) then SIGTERM (a handler) sent to that pid 1 from outside, as `docker kill -s` and
    `docker stop` send them: the program runs on past the first two and its handler takes the third, as untraced
    (fails where run passed every signal on: the program died of SIGUSR1, status 138)."""
    script, ready = tmp_path / "init.py", tmp_path / "ready"
    script.write_text(AS_INIT)
    run = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(tmp_path / "run.jsonl"), "--"] if traced else []
    proc = subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", *run, sys.executable, str(script), str(ready)],
                            env=clean_env(WP_AUTOTRACE_SAMPLE_INTERVAL="0"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        wait_until(ready.exists, TIMEOUT_S, what="the program's start")
        init = wait_until(lambda: _tree(proc.pid)[1:2], TIMEOUT_S, what="the namespace's pid 1")[0]
        for sig in (signal.SIGUSR1, signal.SIGHUP, signal.SIGTERM):
            os.kill(init, sig)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        _end_session(proc)
    assert (proc.returncode, out) == (0, "term\n"), err


OTHER_SIGNALS = textwrap.dedent('''
    import os, signal, sys, time
    def on_signal(sig, frame):
        with open(sys.argv[1], "a") as f:
            f.write(f"{signal.Signals(sig).name}\\n")
        sys.exit(5)
    for name in ("SIGALRM", "SIGWINCH", "SIGURG"):
        signal.signal(getattr(signal, name), on_signal)
    with open(sys.argv[1] + ".ready", "w") as f:
        f.write(str(os.getpid()))
    end = time.monotonic() + 60
    while time.monotonic() < end:
        time.sleep(0.02)
''')


def _other_signal_run(tmp_path: Path, sig: int, how: str, traced: bool) -> tuple[int, list[str], bool]:
    """OTHER_SIGNALS in a session of its own (under run where traced), sent sig to its job's pid or group once
    ready: (the job's status, the program's lines, whether the program is gone 10 s after)."""
    out = tmp_path / f"{'run' if traced else 'bare'}-{how}-{sig}.txt"
    script = tmp_path / "other.py"
    script.write_text(OTHER_SIGNALS)
    run = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(out) + ".jsonl", "--"] if traced else []
    proc = subprocess.Popen([*run, sys.executable, str(script), str(out)], stdin=subprocess.DEVNULL,
                            env=clean_env(WP_AUTOTRACE_SAMPLE_INTERVAL="0"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    program = 0
    try:
        ready = Path(str(out) + ".ready")
        wait_until(lambda: ready.exists() and ready.read_text(), TIMEOUT_S, what="the program's start")
        program = int(ready.read_text())
        if how == "pid":
            os.kill(proc.pid, sig)
        else:
            os.killpg(proc.pid, sig)
        code = proc.wait(TIMEOUT_S)
        try:
            wait_until(lambda: _gone(program), 10, what="the program gone")
        except WaitTimeout:
            pass
        gone = _gone(program)
    finally:
        _kill_all([program] if program else [], proc)
        _end_session(proc)
    return code, out.read_text().splitlines() if out.exists() else [], gone


@pytest.mark.parametrize("how", ["pid", "group"])
@pytest.mark.parametrize("name", ["SIGALRM", "SIGRTMIN+3"])
def test_a_signal_run_has_no_word_for_still_reaches_the_program_once(tmp_path: Path, name: str, how: str) -> None:
    """A signal other than the usual six sent to the job's pid (`docker stop` with an image's STOPSIGNAL such as
    SIGRTMIN+3, `kill -ALRM PID`) or to its group: the program takes it as untraced, its handler once (SIGALRM:
    exit 5) or ended by it (SIGRTMIN+3), and nothing of it runs on. Fails where run passed on only SIGTERM, SIGHUP,
    SIGINT, SIGQUIT, SIGUSR1 and SIGUSR2: run died of the signal itself and the program ran on, never signalled."""
    sig = signal.SIGRTMIN + 3 if name == "SIGRTMIN+3" else signal.SIGALRM
    bare = _other_signal_run(tmp_path, sig, how, traced=False)
    under_run = _other_signal_run(tmp_path, sig, how, traced=True)
    assert bare == ((5, ["SIGALRM"], True) if sig == signal.SIGALRM else (-sig, [], True))
    assert under_run == bare


@pytest.mark.parametrize("how", ["pid", "group"])
@pytest.mark.parametrize("name", ["SIGWINCH", "SIGURG"])
def test_a_signal_ignored_by_default_reaches_a_program_that_catches_it(tmp_path: Path, name: str, how: str) -> None:
    """SIGWINCH (`kill -WINCH PID`: a server's reload, a terminal program's redraw) or SIGURG sent to the job's pid
    or group: the program's handler takes it once, as untraced. Fails where run passed on only the signals whose
    default ends a process: sent to run's pid alone, these reached no one and the program ran on for its minute."""
    sig = getattr(signal, name)
    bare = _other_signal_run(tmp_path, sig, how, traced=False)
    under_run = _other_signal_run(tmp_path, sig, how, traced=True)
    assert bare == (5, [name], True)
    assert under_run == bare
