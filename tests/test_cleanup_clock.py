"""cleanup (and a report's own look at a live main) after a wall-clock step (NTP's makestep, a VM resumed,
`date -s`): a process is told by its start ticks on the clock the log's create times were computed on (the
watcher's boot time in watcher_start), not the reader's own, which moved with the step. The step is simulated
by writing the log on a clock 5 s behind this boot's (its boot time and every create time 5 s earlier); the
boot time compared against is the test's own reading (wall clock minus CLOCK_BOOTTIME), the process's state
the kernel's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from . import test_cleanup
from .clock import boot_id, boot_now, started
from .conftest import clean_env, events, report_json, run_python, wait_for_watcher, wait_until
from .test_cleanup import (
    RUN,
    _alive,
    _cleanup,
    _dead_pid,
    _log,
    _record,
    _watcher,
    assert_never_signalled,
    leave_a_child,
)

sleeper = test_cleanup.sleeper  # the fixture: a long-lived untraced process this test owns

STEP_S = 5.0


def _stepped_log(path: Path, pid: int, create_time: float, of_boot: str) -> Path:
    """A run whose verdict lists pid, written on a clock STEP_S behind: its watcher_start says so (of_boot: its
    boot id)."""
    root = _dead_pid()
    log = _log(path, root, [{"pid": pid, "create_time": round(create_time - STEP_S, 2), "role": "child",
                             "cmd": "python"}])
    start = _watcher("watcher_start", root, interval=0.1, linger=60, boot=boot_now() - STEP_S, boot_id=of_boot)
    log.write_text(json.dumps(start) + "\n" + log.read_text())
    return log


def test_a_leftover_after_a_clock_step_is_ended(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The log's clock (its watcher's boot time, this boot) is 5 s behind cleanup's: the leftover is the same
    process by its start ticks, and is ended; cleanup says the clock moved. It refused it as "pid reused"."""
    began = started(sleeper.pid)
    assert began is not None
    log = _stepped_log(tmp_path / "run.jsonl", sleeper.pid, began, boot_id())
    res = _cleanup(str(log), "--grace", "5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ended: {sleeper.pid} child" in res.stdout and "pid reused" not in res.stdout
    assert f"the wall clock moved {STEP_S:+.2f} s since the run" in res.stdout
    wait_until(lambda: sleeper.poll() is not None, 10, what=f"the ended leftover {sleeper.pid} gone")


def test_another_boots_clock_is_not_used(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The same log from another boot (its boot id not this one's): its pids are not this boot's processes,
    and its clock says nothing of them: refused, never signalled, and not worded as certain."""
    began = started(sleeper.pid)
    assert began is not None
    log = _stepped_log(tmp_path / "run.jsonl", sleeper.pid, began, "0" * 8 + boot_id()[8:])
    res = _cleanup(str(log), "--grace", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "pid reused, or the wall clock stepped since the run" in res.stdout
    assert_never_signalled(sleeper)


def test_on_the_logs_clock_a_reused_pid_is_still_refused(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """On the log's clock the live process started 1 s off the log's: a reused pid, said as one, never
    signalled."""
    began = started(sleeper.pid)
    assert began is not None
    log = _stepped_log(tmp_path / "run.jsonl", sleeper.pid, began - 1.0, boot_id())
    res = _cleanup(str(log), "--grace", "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"refused: {sleeper.pid} child: pid reused: the live process started at" in res.stdout
    assert_never_signalled(sleeper)
    assert _alive(sleeper.pid, began)


# cleanup run after a +STEP_S step: its boot time (computed once per process, env.boot_time) STEP_S later.
STEPPED_CLEANUP = ("import sys; from wp_autotrace.common import env; env._boot_time = env.boot_time() + {step}; "
                   "from wp_autotrace.cli.main import main; sys.exit(main(sys.argv[1:]))")


def test_a_real_runs_leftover_is_ended_by_a_cleanup_after_a_clock_step(tmp_path: Path) -> None:
    """End to end: a traced run leaves a child; its watcher's watcher_start carries its clock (its boot time
    within 20 ms of the test's own reading, this boot's id); a cleanup whose clock stepped +5 s since ends the
    child (the kernel says it is gone) and says the clock moved."""
    log = tmp_path / "run.jsonl"
    pid = leave_a_child(log)
    try:
        recs = wait_for_watcher(log, 20, event="leftover")
        (start,) = events(recs, "watcher_start")
        assert abs(start["boot"] - boot_now()) < 0.02 and start["boot_id"] == boot_id()
        assert pid in events(recs, "leftover")[0]["pids"]
        res = run_python(["-c", STEPPED_CLEANUP.format(step=STEP_S), "cleanup", str(log), "--grace", "5"],
                         clean_env(), timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"ended: {pid} child" in res.stdout and f"moved {STEP_S:+.2f} s" in res.stdout
        wait_until(lambda: not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), 10, what=f"{pid} gone")
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "Z"


def test_a_report_after_a_clock_step_finds_the_live_main_alive(tmp_path: Path,
                                                                sleeper: subprocess.Popen[bytes]) -> None:
    """A run whose main (a live process here) the log saw no end of, its log written on a clock 5 s behind:
    the report's own look finds it alive (it said "gone ... another process has it now": a false end)."""
    began = started(sleeper.pid)
    assert began is not None
    pid = sleeper.pid
    records = [_record("process_start", pid, run=RUN, root_pid=pid, forked=False, argv=["python"],
                       create_time=round(began - STEP_S, 2)),
               _watcher("watcher_start", pid, interval=0.1, linger=60, boot=boot_now() - STEP_S, boot_id=boot_id())]
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    (run,) = report_json(log)["runs"]
    assert run["alive_now"] is True, run["end_check"]
