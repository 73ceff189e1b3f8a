"""`wp-autotrace run` reports what it knows (review 1, items 6, 11, 13, 17, 19, 20): the program runs whatever
run's stderr is; WP_AUTOTRACE_LOG is honoured; a dead watcher ends the wait at once; the waited status
(os._exit, a forwarded signal) and a missing watcher are said as such; doctor is pointed at the right python."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wp_autotrace.cli.run import _python_of

from .conftest import clean_env, read_log, report_json, run_python, wait_until
from .procs import kill_run

RUN = [sys.executable, "-m", "wp_autotrace", "run"]
# The program SIGKILLs its own watcher (pid from watcher_start), then exits 0.
KILLS_ITS_WATCHER = (
    "import json, os, signal, time\n"
    "log = os.environ['WP_AUTOTRACE_LOG']\n"
    "for _ in range(400):\n"
    "    ws = [json.loads(l)['pid'] for l in open(log) if '\"watcher_start\"' in l]\n"
    "    if ws: break\n"
    "    time.sleep(0.05)\n"
    "os.kill(ws[0], signal.SIGKILL)\n")


@pytest.mark.parametrize("redirect", ["2>&-", "2>/dev/full"], ids=["closed", "full"])
def test_the_program_runs_whatever_runs_stderr_is(tmp_path: Path, redirect: str) -> None:
    """Closed or failing stderr: the program runs, its code comes back, run's notes never reach stdout."""
    log, ran = tmp_path / "c.jsonl", tmp_path / "ran"
    program = f"open({str(ran)!r}, 'w').write('ran'); print('out'); raise SystemExit(5)"
    script = shlex.join([*RUN, "--log", str(log), "--", sys.executable, "-c", program])
    try:
        res = subprocess.run(["sh", "-c", f"exec {script} {redirect}"], env=clean_env(), cwd=tmp_path,
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=120)
        assert res.returncode == 5 and ran.exists(), res.stdout
        assert res.stdout == "out\n"
    finally:
        kill_run(log)


def test_run_honours_wp_autotrace_log(tmp_path: Path) -> None:
    log = tmp_path / "from-env.jsonl"
    res = run_python([*RUN[1:], "--", sys.executable, "-c", "pass"], clean_env(WP_AUTOTRACE_LOG=str(log)),
                     cwd=tmp_path, timeout=120)
    assert res.returncode == 0 and log.exists(), res.stderr
    assert f"logging to {log}" in res.stderr and not list(tmp_path.glob("wp_autotrace-*.jsonl"))


@pytest.mark.timing
def test_a_dead_watcher_ends_the_wait_at_once(tmp_path: Path) -> None:
    """The watcher SIGKILLed, interval 600: run no longer waits 2 x 600 s for a verdict that cannot come,
    and says the watcher ended without one."""
    log = tmp_path / "k.jsonl"
    try:
        start = time.monotonic()
        res = run_python([*RUN[1:], "--log", str(log), "--", sys.executable, "-c", KILLS_ITS_WATCHER],
                         clean_env(WP_AUTOTRACE_SAMPLE_INTERVAL="600"), cwd=tmp_path, timeout=120)
        took = time.monotonic() - start
        assert res.returncode == 0, res.stderr
        assert took < 30, took  # the bound once was LEFTOVER_GRACE_S + 1200 s + slack
        assert "the watcher ended without a verdict" in res.stderr and "verdict pending" not in res.stderr
    finally:
        kill_run(log)


def test_no_watcher_is_said_not_pending(tmp_path: Path) -> None:
    """WP_AUTOTRACE_SAMPLE_INTERVAL=0: no watcher, and run says so rather than "verdict pending"."""
    log = tmp_path / "i0.jsonl"
    res = run_python([*RUN[1:], "--log", str(log), "--", sys.executable, "-c", "pass"],
                     clean_env(WP_AUTOTRACE_SAMPLE_INTERVAL="0"), cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "no watcher ran: WP_AUTOTRACE_SAMPLE_INTERVAL=0" in res.stderr and "pending" not in res.stderr


# Waits (bounded) until the watcher's tree record lists it, then os._exit(0): a main that ended before the watcher's
# first look may have changed its user or root unseen, so its os._exit is then not told as fact (test_main_end_words).
SEEN_THEN_OS_EXIT = (
    "import json, os, sys, time\n"
    "end = time.monotonic() + 60\n"
    "def seen():\n"
    "    try:\n"  # a line still being written reads as no look yet
    "        with open(sys.argv[1]) as f:\n"
    "            rs = [json.loads(x) for x in f if x.strip()]\n"
    "    except ValueError:\n"
    "        return False\n"
    "    return any(r.get('event') == 'tree' and any(e.get('pid') == os.getpid() for e in r.get('started') or ())\n"
    "               for r in rs)\n"
    "while not seen() and time.monotonic() < end:\n"
    "    time.sleep(0.05)\n"
    "os._exit(0)\n")


def test_an_os_exit_main_is_not_called_killed(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    res = run_python([*RUN[1:], "--log", str(log), "--", sys.executable, "-c", SEEN_THEN_OS_EXIT, str(log)],
                     clean_env(), cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "exited 0 without running its exit handlers (os._exit" in res.stderr
    assert "killed" not in res.stderr, res.stderr


def test_a_main_that_execs_is_not_called_os_exit(tmp_path: Path) -> None:
    """The main process execs a shell that exits 7: its exec record is its ending ("exec'd into sh"), and run's
    summary and the report say the code, never "without running its exit handlers (os._exit)"."""
    log = tmp_path / "e.jsonl"
    program = "import os; os.execvp('sh', ['sh', '-c', 'exit 7'])"
    try:
        res = run_python([*RUN[1:], "--log", str(log), "--", sys.executable, "-c", program], clean_env(),
                         cwd=tmp_path, timeout=120)
        assert res.returncode == 7, res.stderr
        said = " ".join(res.stderr.split())
        assert "os._exit" not in said and "exit handlers" not in said and "exited with code 7" in said, said
        rep = report_json(log)
        main = next(p for p in rep["processes"] if p["role"] == "main")
        assert main["ending"]["kind"] == "exec" and main["ending"]["code"] == 7, main["ending"]
        assert "exec'd into sh" in main["ending"]["words"]
        assert "root-os-exit" not in {f["kind"] for f in rep["findings"]}
    finally:
        kill_run(log)


def test_a_forwarded_sigterm_is_no_oom_kill(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    proc = subprocess.Popen([*RUN, "--log", str(log), "--", sys.executable, "-c",
                             "import time; print('ready', flush=True); time.sleep(60)"],
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)  # to run only: it passes it on
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGTERM
        said = " ".join(err.split())  # the summary wraps at 100 columns: where a phrase breaks depends on the pid
        assert "was ended by SIGTERM" in said and "passed it on" in said and "OOM" not in said, err
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        kill_run(log)


def test_the_python_a_shell_script_names_is_the_one_checked(tmp_path: Path) -> None:
    """`bash -c '/usr/bin/python3 …'`: that python, not run's own; a script naming none: a guess, said so."""
    fake = tmp_path / "python3.99"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert _python_of(["sh", "-c", f"exec {fake} -c pass"], os.environ["PATH"]) == (str(fake), True)
    assert _python_of(["sh", "-c", "true"], os.environ["PATH"])[1] is False
    log = tmp_path / "never.jsonl"
    res = run_python([*RUN[1:], "--log", str(log), "--", "sh", "-c", f"exec {sys.executable} -S -c pass"],
                     clean_env(), cwd=tmp_path, timeout=120)
    assert f"doctor --python {sys.executable}" in res.stderr, res.stderr
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the python on PATH can trace
    res = run_python([*RUN[1:], "--log", str(log), "--", "sh", "-c", "exit 0"], clean_env(PATH=path),
                     cwd=tmp_path, timeout=120)
    assert "it does not say which" in res.stderr, res.stderr


def test_the_program_inherits_the_descriptors_run_was_given(tmp_path: Path) -> None:
    """A descriptor its launcher passed on (make's jobserver pipe, systemd's LISTEN_FDS socket, a harness's
    status pipe, a shell's `flock 9`) is the program's under run as it is untraced: run passes on every
    descriptor it inherited, and nothing of its own (its own are close-on-exec)."""
    r, w = os.pipe()
    os.set_inheritable(w, True)
    prog = f"import os, sys; os.write({w}, b'x'); sys.exit(len(os.listdir('/proc/self/fd')))"
    codes = []
    try:
        for cmd in ([sys.executable, "-c", prog],
                    [*RUN, "--log", str(tmp_path / "log.jsonl"), "--", sys.executable, "-c", prog]):
            done = subprocess.run(cmd, pass_fds=(w,), env=clean_env(), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
            codes.append(done.returncode)
            assert b"Bad file descriptor" not in done.stderr, done.stderr
    finally:
        os.close(w)
    with os.fdopen(r, "rb") as f:
        assert f.read() == b"xx"  # written by the untraced program and by the program under run
    assert codes[1] == codes[0], codes  # the same descriptors open: stdio, w, listdir's own


def test_a_signal_after_the_program_ended_keeps_its_status(tmp_path: Path) -> None:
    """Ctrl-C (or a supervisor's SIGTERM) while run waits for the verdict and writes its summary, after the
    program exited 0: untraced, that 0 was the parent's already and the signal met nothing. run exits 0,
    still writes run_exit, and says its summary was cut short. (The program stops its watcher, so run waits
    its whole bound for a verdict that does not come: the signal lands in that wait; the test ends them.)"""
    log = tmp_path / "log.jsonl"
    program = KILLS_ITS_WATCHER.replace("signal.SIGKILL", "signal.SIGSTOP")
    proc = subprocess.Popen([*RUN, "--log", str(log), "--", sys.executable, "-c", program],
                            env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        def reaped() -> bool:  # run has waited for its program: it is finishing
            mains = [r["pid"] for r in read_log(log) if r["event"] == "process_start" and r.get("role") == "main"]
            return bool(mains) and not os.path.exists(f"/proc/{mains[0]}")

        def waiting() -> bool:  # run reads the log for the verdict: its summary's signal handling is on
            try:
                return any(os.readlink(f"/proc/{proc.pid}/fd/{fd}") == str(log)
                           for fd in os.listdir(f"/proc/{proc.pid}/fd"))
            except OSError:  # an fd closed between the listing and its read
                return False

        # the signal lands in the verdict's wait (the moment of the reap itself: the test below)
        wait_until(lambda: log.exists() and reaped() and waiting(), 120, what="run waiting for the verdict")
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        kill_run(log)  # and the watcher the program stopped: its environment does not name the log
        for pid in {r["pid"] for r in (read_log(log) if log.exists() else []) if r["event"] == "watcher_start"}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 0, err
    assert [r["status"] for r in read_log(log) if r["event"] == "run_exit"] == [0]
    assert b"cut short" in err


def test_run_ending_by_a_core_signal_files_no_crash_of_its_own() -> None:
    """A program that died of SIGSEGV ends run by SIGSEGV too (its parent sees what it would see untraced),
    but a crash report belongs to the program: RLIMIT_CORE 0 does not stop a pipe core_pattern
    (systemd-coredump, apport run their helper anyway), so run makes itself not dumpable before it kills
    itself. Read at the moment of the kill (os.kill stood in for)."""
    code = ("import ctypes, os, resource\n"
            "from wp_autotrace.cli.run import end_as\n"
            "os.kill = lambda pid, sig: print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),"  # PR_GET_DUMPABLE
            " resource.getrlimit(resource.RLIMIT_CORE)[0])\n"
            "end_as(11)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0"], done.stdout  # not dumpable, no core


# run's main with one change: right after the forwarder reaps the program, a signal comes to run's pid alone
# (a supervisor's SIGTERM, `kill PID`), in the moment before run's summary has its own handlers.
SIGNAL_AT_THE_REAP = """
import os, signal, sys
from wp_autotrace.cli.run import signals
from wp_autotrace.cli.main import main
wait = signals.Forwarder.wait
def reaped_then_signalled(self):
    code = wait(self)
    os.kill(os.getpid(), signal.SIGTERM)
    return code
signals.Forwarder.wait = reaped_then_signalled
sys.exit(main(["run", "--log", sys.argv[1], "--", sys.executable, "-c", "pass"]))
"""


def test_a_signal_at_the_programs_reap_cuts_the_summary_short(tmp_path: Path) -> None:
    """A signal to run's pid alone that meets the forwarder after the program ended has nothing to be passed
    on to: it is run's own, as in the summary's wait, and cuts the summary short at once (it was swallowed,
    and run waited and wrote its whole summary). run still exits with its program's status and writes
    run_exit."""
    log = tmp_path / "log.jsonl"
    done = subprocess.run([sys.executable, "-c", SIGNAL_AT_THE_REAP, str(log)], env=clean_env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"cut short" in done.stderr, done.stderr
    assert [r["status"] for r in read_log(log) if r["event"] == "run_exit"] == [0]


class _SlowSentinel:
    """A sentinel whose word on a signal comes after SENTINEL_HOLD_S (a loaded host): got() answers yes only to
    a look longer than that; never, for a signal sent to run's pid alone."""

    pid = 1

    def __init__(self, group: bool) -> None:
        self.group = group

    def got(self, sig: int, hold: float = 0.1) -> bool:
        from wp_autotrace.cli.run import signals

        return self.group and hold > signals.SENTINEL_HOLD_S

    def stop(self) -> None:
        pass


class _Ended:
    returncode = -signal.SIGTERM

    def poll(self) -> int:
        return self.returncode


@pytest.mark.parametrize("group", [True, False], ids=["group_word_late", "pid_alone"])
def test_a_group_signal_whose_sentinel_word_comes_late_is_not_runs_own(group: bool) -> None:
    """A group's SIGTERM that ended the program meets run's forwarder after the reap; the sentinel's word on it
    comes later than SENTINEL_HOLD_S: still the program's, so run's summary is not cut short (late is empty).
    One the sentinel never got (sent to run's pid alone) stays run's own."""
    from wp_autotrace.cli.run import signals

    fwd = signals.Forwarder(["true"], {})
    fwd.sentinel = _SlowSentinel(group)  # type: ignore[assignment]
    fwd.child = _Ended()  # type: ignore[assignment]
    fwd.forward(signal.SIGTERM, None)
    fwd.__exit__()
    assert fwd.late == ([] if group else [signal.SIGTERM])


@pytest.mark.parametrize("ending", ["exit-3", "sigterm"])
def test_a_parent_that_ignores_sigchld_still_gets_the_programs_status(tmp_path: Path, ending: str) -> None:
    """A parent that set SIGCHLD to SIG_IGN (a Python supervisor does, and every child it starts inherits it
    across exec): the kernel reaps an ignoring process's children itself, so a wait finds no status. Untraced,
    the program's own status reaches that parent; under run, run's wait must still find it (run's exit code and
    run_exit's status), and the program must still start with SIGCHLD ignored, as untraced."""
    log, seen = tmp_path / "log.jsonl", tmp_path / "seen"
    end = "raise SystemExit(3)" if ending == "exit-3" else "os.kill(os.getpid(), signal.SIGTERM)"
    program = (f"import os, signal\nopen({str(seen)!r}, 'w').write(str(int(signal.getsignal(signal.SIGCHLD))))\n"
               f"{end}\n")
    want = 3 if ending == "exit-3" else -signal.SIGTERM

    def ignoring() -> None:  # the supervisor's disposition, kept across exec
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)

    untraced = subprocess.run([sys.executable, "-c", program], env=clean_env(), preexec_fn=ignoring,
                              stdin=subprocess.DEVNULL, timeout=120)  # noqa: PLW1509
    assert untraced.returncode == want and seen.read_text() == str(int(signal.SIG_IGN))
    seen.unlink()
    try:
        res = subprocess.run([*RUN, "--log", str(log), "--", sys.executable, "-c", program], env=clean_env(),
                             preexec_fn=ignoring, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,  # noqa: PLW1509
                             timeout=120)
    finally:
        kill_run(log)
    assert res.returncode == want, res.stderr
    assert seen.read_text() == str(int(signal.SIG_IGN))
    assert [r["status"] for r in read_log(log) if r["event"] == "run_exit"] == [want]


def test_a_shell_script_of_python_steps_is_one_launch_with_the_scripts_status(tmp_path: Path) -> None:
    """`run -- bash -c "python; python; exit 3"`: each Python step is a traced root (a run of its own), the shell
    is none. The report tells one launch (never "runs that are not one launch") and the command's status 3 (the
    truth: run's own return code, which the test reads), never "Nothing unusual"; the steps exited 0."""
    log = tmp_path / "s.jsonl"
    step = shlex.join([sys.executable, "-c", "pass"])
    res = subprocess.run([*RUN, "--log", str(log), "--", "bash", "-c", f"{step}; {step}; exit 3"], env=clean_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 3, res.stderr
    rep = report_json(log)
    assert len(rep["runs"]) == 2 and len(rep["jobs"]) == 1, (rep["runs"], rep["jobs"])
    assert all(r["exit_code"] in (0, None) for r in rep["runs"]), rep["runs"]
    said = " ".join(rep["answer"].split())
    assert "not one launch" not in said and "started (pid" in said and "exited with code 3" in said, said
    # a step's own sys.exit code is in no record: which step failed is said to be unknown, never guessed
    assert "no record shows a step's own failure" in said, said


def test_a_failed_step_of_a_shell_script_is_told_under_the_scripts_status(tmp_path: Path) -> None:
    """`run -- bash -c "python -c pass; python -c '...raise ValueError'; exit 3"`: the Answer told the step as "the
    program of run <id> ended by ..." and dropped the command's status 3. It tells the command's status (run's own
    return code, read by the test), then the step as the user counts it (2 of 2), its pid (the step prints its own)
    and the exception its process_exit names (the step's stderr, untraced Python's own line, reads the same)."""
    log = tmp_path / "f.jsonl"
    ok = shlex.join([sys.executable, "-c", "pass"])
    bad = shlex.join([sys.executable, "-c", "import os; print(os.getpid(), flush=True); raise ValueError('boom')"])
    res = subprocess.run([*RUN, "--log", str(log), "--", "bash", "-c", f"{ok}; {bad}; exit 3"], env=clean_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 3 and "ValueError: boom" in res.stderr, res.stderr
    pid = int(res.stdout.split()[0])
    said = " ".join(report_json(log)["answer"].split())
    assert "started (pid" in said and "exited with code 3, after its Python step 2 of 2 (`" in said, said
    assert f"pid {pid}) ended by an uncaught ValueError: boom." in said and "The program of run" not in said, said


def test_a_failed_step_the_script_ran_on_after_is_not_told_as_the_scripts_cause(tmp_path: Path) -> None:
    """`run -- bash -c "python -c '...raise ValueError'; python -c ...; exit 3"`: the script ignored step 1's failure,
    ran step 2, then set its own status. The Answer had said "exited with code 3, after its Python step 1 of 2 ...
    ended by ...", which reads as the cause. It tells the order the records show: step 1 failed, and the script
    ran on (step 2 began after it ended: the test's own reading, step 2 prints when it began, step 1 when it
    left)."""
    log = tmp_path / "o.jsonl"
    bad = shlex.join([sys.executable, "-c", "import os, time; print(os.getpid(), time.time(), flush=True); "
                      "raise ValueError('boom')"])
    ok = shlex.join([sys.executable, "-c", "import time; print(time.time(), flush=True)"])
    res = subprocess.run([*RUN, "--log", str(log), "--", "bash", "-c", f"{bad}; {ok}; exit 3"], env=clean_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 3 and "ValueError: boom" in res.stderr, res.stderr
    (pid, failed_at), (began,) = [line.split() for line in res.stdout.split("\n")[:2]]
    assert float(began) > float(failed_at)  # the truth: the script went on after step 1
    said = " ".join(report_json(log)["answer"].split())
    assert "exited with code 3; its Python step 1 of 2 (`" in said and ", after its Python step" not in said, said
    assert f"pid {pid}) ended by an uncaught ValueError: boom, and the script ran on (its step 2 of 2 began after " \
           "it ended)." in said, said


def test_a_step_left_running_in_the_background_is_not_told_as_tracing_not_started(tmp_path: Path) -> None:
    """`run -- bash -c "python … & exit 4"`: the shell exits before its step writes anything. run had said "no log
    was written: tracing did not start; check with doctor" while the step, traced, was still starting (it wrote
    the log a moment later). The truth is the test's: the step is alive (it waits for the test's go file before
    its Python starts) and, let go, writes the log."""
    log, go = tmp_path / "bg.jsonl", tmp_path / "go"
    step = (f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.05; done; "
            f"exec {shlex.join([sys.executable, '-c', 'pass'])}")
    # Above run, given the same log and tracing on (a job's environment): no step of the command.
    above = subprocess.Popen(["sleep", "120"], env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        res = subprocess.run([*RUN, "--log", str(log), "--", "bash", "-c", f"({step}) >/dev/null 2>&1 & exit 4"],
                             env=clean_env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert res.returncode == 4, res.stderr
        assert not log.exists()
        assert "tracing did not start" not in res.stderr and "still run (pid " in res.stderr, res.stderr
        named = res.stderr.split("still run (pid ")[1].split(")")[0].split(", ")
        assert str(above.pid) not in named, res.stderr
        go.touch()
        wait_until(lambda: log.exists() and any(r["event"] == "process_exit" for r in read_log(log)), 60,
                   what="the background step's traced exit")
    finally:
        go.touch()
        above.kill()
        above.wait(10)
        kill_run(log)


def test_a_command_that_names_no_python_runs_though_the_python_on_path_cannot_trace(tmp_path: Path) -> None:
    """`run -- sh -c "echo ran; exit 5"` names no Python: the one on PATH is a guess. run had refused the command
    (78, "nothing was run") where that guess could not trace, though the command may start none or others. The
    truth is the test's: the command's own output and status, as untraced."""
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    env = clean_env(PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    res = subprocess.run([*RUN, "--log", str(tmp_path / "g.jsonl"), "--", "sh", "-c", "echo ran; exit 5"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert (res.returncode, res.stdout) == (5, "ran\n"), res.stderr
    assert f"the one on PATH, {fake}, cannot trace" in res.stderr, res.stderr


def test_a_shell_script_whose_last_step_is_execd_is_one_launch(tmp_path: Path) -> None:
    """`run -- bash -c "python -c pass; exec python -c 'raise SystemExit(9)'"`: the exec'd step is the root run
    waited for (bash's pid), the step before it was that shell's child, a run of its own. One launch, never "runs
    that are not one launch"; the code 9 is the exec'd step's (run's return code, read by the test)."""
    log = tmp_path / "x.jsonl"
    first, last = shlex.join([sys.executable, "-c", "pass"]), shlex.join([sys.executable, "-c", "raise SystemExit(9)"])
    res = subprocess.run([*RUN, "--log", str(log), "--", "bash", "-c", f"{first}; exec {last}"], env=clean_env(),
                         cwd=tmp_path, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 9, res.stderr
    rep = report_json(log)
    assert len(rep["runs"]) == 2 and len(rep["jobs"]) == 1, (rep["runs"], rep["jobs"])
    said = " ".join(rep["answer"].split())
    assert "not one launch" not in said and "exited with code 9" in said, said


def test_an_interpreter_named_by_a_relative_path_is_probed_from_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run -- ../venv/bin/python ...` runs untraced from the current folder; run's probe of that interpreter ran the
    path from a fresh folder, where it names nothing, and run refused the command (rc 78, 'cannot run it')."""
    from wp_autotrace.cli.doctor import probe_interpreter

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "py").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path / "bin")
    probe = probe_interpreter("../bin/py")
    assert not probe.problem.startswith("cannot run it"), probe


# A program's first lines that wait (at most 2 min) for the file its argv[1] names: the two-run tests order their
# runs by files, never by time
_WAIT_FOR = ("import os, sys, time\nend = time.monotonic() + 120\n"
             "while not os.path.exists(sys.argv[1]) and time.monotonic() < end: time.sleep(0.02)\n")


def _two_runs(log: Path, release: Path, first: list[str], second: list[str], ready, envs=(None, None), waits=1):
    """Start `run --log LOG -- *first`; once ready() holds, `run --log LOG -- *second`. The run numbered `waits`
    (0 or 1) is the one whose program waits for `release`: the other is waited for first, then `release` touched,
    then that one waited for. Returns both processes, their stderr, and whether the waiting run was still running
    when the other ended. Kills what it started."""
    common = dict(cwd=log.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                  stdin=subprocess.DEVNULL)
    procs: list = [subprocess.Popen([*RUN, "--log", str(log), "--", *first], env=envs[0] or clean_env(), **common)]
    errs = ["", ""]
    try:
        wait_until(ready, 120, what="the first run's records")
        procs.append(subprocess.Popen([*RUN, "--log", str(log), "--", *second], env=envs[1] or clean_env(),
                                      **common))
        errs[1 - waits] = procs[1 - waits].communicate(timeout=240)[1]
        ran_on = procs[waits].poll() is None
        release.touch()
        errs[waits] = procs[waits].communicate(timeout=240)[1]
    finally:
        release.touch()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        kill_run(log)
    return procs[0], procs[1], errs[0], errs[1], ran_on


def test_run_onto_a_log_of_earlier_runs_answers_its_own_run(tmp_path: Path) -> None:
    """`run --log L` twice (an exported WP_AUTOTRACE_LOG does the same): the first program exits 3, the second 0
    (the test's own reading: each run's return code). The second summary answered every run of the log, and so
    told the first one's code 3 under a program that exited 0; it answers its own run, and says in one line that
    the log holds another."""
    log = tmp_path / "twice.jsonl"
    said = []
    for code in (3, 0):
        res = subprocess.run([*RUN, "--log", str(log), "--", sys.executable, "-c", f"import sys; sys.exit({code})"],
                             env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=240,
                             stdin=subprocess.DEVNULL)
        assert res.returncode == code, res.stderr
        said.append(" ".join(res.stderr.split("\nwp-autotrace:\n", 1)[1].split()))
    first = [r["id"] for r in report_json(log)["runs"]][0]
    assert "The program exited with code 3." in said[0] and "other run" not in said[0], said[0]
    assert "code 3" not in said[1] and first not in said[1] and "Nothing unusual." in said[1], said[1]
    assert "This log holds 1 other run(s), begun before this one: not told here" in said[1], said[1]


def test_two_runs_at_once_on_one_log_each_answer_their_own(tmp_path: Path) -> None:
    """Two `run --log L` at once: A's program exits 3 once B's has begun; B's waits until A's run has answered,
    then exits 0 (the test's own ordering, by files: A's summary is read while B still runs). A's summary took
    every run begun after it started its program, and so told B's run under A's; each answers its own now, and
    says the other is another program's; `report L` tells both apart, each with its own exit."""
    log, began, release = tmp_path / "shared.jsonl", tmp_path / "b-began", tmp_path / "release"
    a_prog = _WAIT_FOR + "sys.exit(3)\n"
    b_prog = f"open({str(began)!r}, 'w').close()\n" + _WAIT_FOR + "sys.exit(0)\n"
    a, b, a_err, b_err, b_ran_on = _two_runs(log, release, [sys.executable, "-c", a_prog, str(began)],
                                             [sys.executable, "-c", b_prog, str(release)], log.exists)
    assert b_ran_on, "B's program ended before A's summary: the test orders them by files"
    assert (a.returncode, b.returncode) == (3, 0), (a_err, b_err)
    runs = {r["command"].split()[-1]: r for r in report_json(log)["runs"]}
    a_id, b_id = runs[str(began)]["id"], runs[str(release)]["id"]
    said_a = " ".join(a_err.split("\nwp-autotrace:\n", 1)[1].split())
    said_b = " ".join(b_err.split("\nwp-autotrace:\n", 1)[1].split())
    assert "The program exited with code 3." in said_a and b_id not in said_a and "2 runs" not in said_a, said_a
    assert "This log holds 1 other run(s), another program's, written beside this one" in said_a, said_a
    assert "code 3" not in said_b and a_id not in said_b and "Nothing unusual." in said_b, said_b
    assert "This log holds 1 other run(s), begun before this one" in said_b, said_b
    assert runs[str(began)]["exit_code"] == 3 and runs[str(release)]["exit_code"] == 0, runs
    # the line on the other run is wrapped as the summary's other lines are (100 columns, run's 2 ahead of each)
    told = a_err.split("\nwp-autotrace:\n", 1)[1].split("\n  log: ")[0].splitlines()
    assert all(len(line) <= 102 for line in told), [line for line in told if len(line) > 102]


def test_a_run_without_a_watcher_beside_one_with_a_watcher_says_none_ran(tmp_path: Path) -> None:
    """Two `run --log L` at once: B's program (a watcher) waits until A's run has answered; A's, started with
    WP_AUTOTRACE_SAMPLE_INTERVAL=0 (no watcher), exits 3. A's run found a watcher record in the log, B's, and so
    did not say that no watcher ran for its own program (its summary told no verdict's cause)."""
    log, release = tmp_path / "shared.jsonl", tmp_path / "release"
    b, a, _, a_err, _ = _two_runs(
        log, release, [sys.executable, "-c", _WAIT_FOR, str(release)],
        [sys.executable, "-c", "import sys; sys.exit(3)"],
        lambda: log.exists() and b'"role":"watcher"' in log.read_bytes(),
        envs=(None, clean_env(WP_AUTOTRACE_SAMPLE_INTERVAL="0")), waits=0)
    assert a.returncode == 3, a_err
    said = " ".join(a_err.split("\nwp-autotrace:\n", 1)[1].split())
    assert "The program exited with code 3." in said, said
    assert "no watcher ran: WP_AUTOTRACE_SAMPLE_INTERVAL=0 starts none" in said, said


def _new_pid_namespace_works() -> bool:
    try:
        return subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _new_pid_namespace_works(), reason="no new pid namespace here (unshare -p needs privilege)")
def test_a_main_in_a_pid_namespace_of_its_own_keeps_the_commands_exit_code(tmp_path: Path) -> None:
    """`run -- unshare -p -f --mount-proc python -c 'sys.exit(5)'`: the main is pid 1 of its namespace (ppid 0 in
    its records) and the pid run waited for is unshare's, which no record names: the Answer lost "exited with code
    5" (the test's own reading: run's return code, unshare's, which untraced is the same). It tells the command's
    status, the main as its step, never as the main's own code."""
    log = tmp_path / "ns.jsonl"
    untraced = subprocess.run(["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c", "import sys; sys.exit(5)"],
                              env=clean_env(), timeout=60, stdin=subprocess.DEVNULL)
    res = subprocess.run([*RUN, "--log", str(log), "--", "unshare", "-p", "-f", "--mount-proc", sys.executable, "-c",
                          "import sys; sys.exit(5)"], env=clean_env(), cwd=tmp_path, capture_output=True, text=True,
                         timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == untraced.returncode == 5, res.stderr
    starts = [r for r in read_log(log) if r["event"] == "process_start"]
    assert [(r["pid"], r["ppid"]) for r in starts] == [(1, 0)], starts  # traced, as pid 1 of its own namespace
    said = " ".join(report_json(log)["answer"].split())
    assert "The command wp-autotrace run started (pid " in said and ") exited with code 5" in said, said


@pytest.mark.skipif(not _new_pid_namespace_works(), reason="no new pid namespace here (unshare -p needs privilege)")
def test_two_runs_at_once_of_namespaced_mains_are_not_told_each_others_status(tmp_path: Path) -> None:
    """Two `run --log L -- unshare -p -f --mount-proc python ...` at once: A's main exits 5 once B's has begun, B's
    exits 0 once A's run has ended (ordered by files). No pid joins a namespace's main to the command run waited
    for, only its start within the command's life; B's main began within both commands' lives, and the first
    run_exit in the log, A's, took it: the report told B's run as A's step, 'exited with code 5'. It is joined to
    neither now; A's main, begun before B's command, is A's."""
    log, began, release = tmp_path / "ns.jsonl", tmp_path / "b-began", tmp_path / "release"
    ns = ["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c"]
    a, b, a_err, b_err, _ = _two_runs(log, release, [*ns, _WAIT_FOR + "sys.exit(5)", str(began)],
                                      [*ns, f"open({str(began)!r}, 'w').close()\n" + _WAIT_FOR + "sys.exit(0)",
                                       str(release)], log.exists)
    assert (a.returncode, b.returncode) == (5, 0), (a_err, b_err)
    runs = {r["command"].split()[-1]: r for r in report_json(log)["runs"]}
    assert runs[str(began)]["command_exit"]["status"] == 5, runs[str(began)]
    assert runs[str(release)]["command_exit"] is None, runs[str(release)]
    # A's summary, made while B's main ran: B's run is another program's (its live namespace's parents say so)
    said_a = " ".join(a_err.split("\nwp-autotrace:\n", 1)[1].split())
    assert runs[str(release)]["id"] not in said_a and "exited with code 5" in said_a, said_a
    assert "This log holds 1 other run(s), another program's, written beside this one" in said_a, said_a


def test_run_under_faulthandler_keeps_the_programs_status(tmp_path: Path) -> None:
    """PYTHONFAULTHANDLER=1 (what a crash's advice says to export): SIGABRT's handler at run's start is
    faulthandler's, not one set from Python; run puts its own back at the end and still exits with the
    program's status, its run_exit written, no traceback of its own."""
    log = tmp_path / "fh.jsonl"
    res = run_python([*RUN[1:], "--log", str(log), "--", sys.executable, "-c", "raise SystemExit(3)"],
                     clean_env(PYTHONFAULTHANDLER="1"), cwd=tmp_path, timeout=120)
    assert res.returncode == 3 and "Traceback" not in res.stderr, res.stderr
    assert [r for r in read_log(log) if r["event"] == "run_exit"], res.stderr


def test_run_of_an_untraced_program_onto_a_log_of_earlier_runs_tells_none_of_them(tmp_path: Path) -> None:
    """`run --log L` of a Python that exits 3, then of a command that writes no record (/bin/true: nothing traces
    it) onto the same log: the second summary told the first run's 'exited with code 3' under a program that
    exited 0 (the test's own reading of each return code); it says its run wrote no record, and no earlier run's
    words."""
    log = tmp_path / "twice.jsonl"
    said = []
    for command in ([sys.executable, "-c", "import sys; sys.exit(3)"], ["/bin/true"]):
        res = subprocess.run([*RUN, "--log", str(log), "--", *command], env=clean_env(), cwd=tmp_path,
                             capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
        assert res.returncode == (3 if command[0] == sys.executable else 0), res.stderr
        said.append(" ".join(res.stderr.split("\nwp-autotrace:\n", 1)[1].split()))
    assert "The program exited with code 3." in said[0], said[0]
    assert "code 3" not in said[1] and "This run wrote no record into the log" in said[1], said[1]


def test_a_run_its_program_started_is_not_another_programs(tmp_path: Path) -> None:
    """`run -- bash -c '<run> -- python ...; python ...'`: the step's own `run` writes the same log (the outer's
    WP_AUTOTRACE_LOG). The outer summary said "1 other run(s), another program's, written beside this one" of a run
    its own program started; that run's `run` is a child of the outer main (bash, which then became its last
    command), as its run_exit names it."""
    log = tmp_path / "run.jsonl"
    inner = " ".join(shlex.quote(a) for a in [*RUN, "--", sys.executable, "-c", "import sys; sys.exit(3)"])
    script = f"{inner} 2>/dev/null; {shlex.quote(sys.executable)} -c 'import sys; sys.exit(5)'"
    res = subprocess.run([*RUN, "--log", str(log), "--", "bash", "-c", script], env=clean_env(), cwd=tmp_path,
                         capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    kill_run(log)
    assert res.returncode == 5, res.stderr
    said = " ".join(res.stderr.split("\nwp-autotrace:\n", 1)[1].split())
    assert "1 run(s) its program started (a `wp-autotrace run` inside it)" in said, said
    assert "another program's" not in said, said


# A subreaper (systemd --user, tini -s, a supervisor): run under it, its orphans handed to it, not to init.
UNDER_SUBREAPER = ("import ctypes, subprocess, sys\n"
                   "assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER\n"
                   "sys.exit(subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL).returncode)\n")


def test_a_main_whose_shell_a_subreaper_took_is_not_another_programs(tmp_path: Path) -> None:
    """`run -- bash -c "bash -c 'python prog; true' & ..."` under a subreaper: the outer shell exits once the main
    has written the log; the inner one, run's grandchild, is handed to the subreaper, run's parent, older than run.
    The summary said "This run wrote no record into the log: tracing did not start" and called the run another
    program's; the main lives (it waits for the test's file) while run reads its parents."""
    log, release = tmp_path / "reaped.jsonl", tmp_path / "release"
    main = shlex.join([sys.executable, "-c", _WAIT_FOR, str(release)])
    outer = (f"bash -c {shlex.quote(main + '; true')} >/dev/null 2>&1 & "
             f"until grep -q process_start {shlex.quote(str(log))} 2>/dev/null; do sleep 0.05; done")
    try:
        res = subprocess.run([sys.executable, "-c", UNDER_SUBREAPER, *RUN, "--log", str(log), "--", "bash", "-c",
                              outer], env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=240,
                             stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stderr
        said = " ".join(res.stderr.split("\nwp-autotrace:\n", 1)[1].split())
        assert "This run wrote no record" not in said and "another program's" not in said, said
    finally:
        release.touch()
        kill_run(log)
