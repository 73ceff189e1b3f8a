"""A main started as root that changes its user (setuid) or its root directory (chroot) in the program: the log,
private to the user that started the run, refuses its later records, its process_exit too. The watcher writes the
change (root_change), and the report tells the missing exit as unknown, never as a kill or an os._exit; the
program's stderr stays as untraced (no "cannot write the log" line). The truth is the test's own: the program's
return code and output untraced, the user and root it changed to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wp_autotrace.watcher.rootchange import RootChange

from .conftest import clean_env, events, wait_for_watcher

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (setuid, chroot)")

NOBODY = 65534
# Traced, it waits for the watcher to have sampled it before and after the change (it reads the log through a
# descriptor it opened as root): a change and an exit in one sample interval would go unseen (rootchange.py).
PROGRAM = textwrap.dedent('''
    import json, os, sys, time
    traced = os.environ.get("WP_AUTOTRACE") == "1"
    fd = os.open(os.environ["WP_AUTOTRACE_LOG"], os.O_RDONLY) if traced else -1

    def wait_for(event):
        end = time.monotonic() + 60
        while b'"event":"%s"' % event.encode() not in os.pread(fd, 1 << 22, 0):
            if time.monotonic() > end:
                raise SystemExit("no " + event)
            time.sleep(0.02)

    if traced:
        wait_for("watcher_start")
    json.dumps([0])  # a target where the run names it: the log's descriptor is held from here
    log = os.environ["WP_AUTOTRACE_LOG"]
    held = [int(n) for n in os.listdir("/proc/self/fd")
            if int(n) != fd and os.path.realpath(f"/proc/self/fd/{n}") == log]
    if sys.argv[1] == "setuid":
        os.setgid(65534)
        os.setuid(65534)
        for n in held:  # a daemon's close of every descriptor: the next record opens the log again, refused
            os.close(n)
        json.dumps([1])
    else:
        os.chroot(sys.argv[2])
        os.chdir("/")
    if traced:
        wait_for("root_change")
    if sys.argv[3:] == ["kill"]:
        os.kill(os.getpid(), 9)
    print("exiting 3 by sys.exit")
    sys.exit(3)
''')


def _report(log: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "wp_autotrace", "report", str(log), *args], capture_output=True,
                         text=True, timeout=120, env=clean_env())
    assert out.returncode == 0, out.stderr
    return out.stdout


@needs_root
@pytest.mark.parametrize("how", ["setuid", "chroot", "setuid-under-run", "setuid-held"])
def test_a_main_that_changes_its_user_or_root_is_told_unknown_not_killed(tmp_path: Path, how: str) -> None:
    tmp_path.chmod(0o755)  # nobody may read the program
    script, log, jail = tmp_path / "prog.py", tmp_path / "run.jsonl", tmp_path / "jail"
    script.write_text(PROGRAM)
    jail.mkdir()
    mode = how.split("-")[0]
    argv = [sys.executable, str(script), mode, str(jail)]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                           env=clean_env(WP_AUTOTRACE_LOG=str(log)), stdin=subprocess.DEVNULL)
    assert (plain.returncode, plain.stdout) == (3, "exiting 3 by sys.exit\n"), plain.stderr
    runner = [sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--"] if how.endswith("run") else []
    env = clean_env(**({} if runner else {"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log)}),
                    **({"WP_AUTOTRACE_TARGETS": "json:dumps"} if how.endswith("held") else {}))
    traced = subprocess.run([*runner, *argv], capture_output=True, text=True, timeout=120, env=env,
                            stdin=subprocess.DEVNULL)
    assert (traced.returncode, traced.stdout) == (plain.returncode, plain.stdout), traced.stderr
    # the program's stderr as untraced (run adds its own summary there, no line of the program's)
    assert traced.stderr == plain.stderr if not runner else "cannot write the log" not in traced.stderr

    records = wait_for_watcher(log)
    (change,) = events(records, "root_change")
    if mode == "setuid":
        assert (change["uid"], change["was_uid"]) == (NOBODY, os.geteuid())
    else:
        assert (change["root"], change["was_root"]) == (str(jail), "/")
    assert not [r for r in events(records, "process_exit") if r.get("role") == "main"]

    (run,) = json.loads(_report(log, "--json"))["runs"]
    assert str(NOBODY if mode == "setuid" else jail) in run["root_changed"], run
    text = _report(log)
    told = text.split("== Warm", 1)[0]  # the Answer, the Run line, the Findings
    assert "os._exit" not in told and "killed" not in told, text
    assert "is not known" in told and "it changed its" in told and "nothing explains it" not in text, text
    if runner:  # run saw the code: the exit is told, its handlers unknown
        assert "exited 3 without a process_exit in the log" in told, text
    else:
        assert "main process ended without a process_exit in the log (it changed its" in told, text


@needs_root
def test_a_kill_after_the_change_is_told_as_the_kill(tmp_path: Path) -> None:
    """SIGKILL after the change: the watcher reads the signal from the main's zombie (the test reaps it only after
    the watcher's verdict), so the report names the kill; the change makes nothing of it unknown (fails where the
    change was told first, 'how it ended is not known', over the zombie's signal)."""
    tmp_path.chmod(0o755)
    script, log = tmp_path / "prog.py", tmp_path / "run.jsonl"
    script.write_text(PROGRAM)
    proc = subprocess.Popen([sys.executable, str(script), "setuid", "-", "kill"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)))
    try:
        wait_for_watcher(log, event="leftover")  # the main a zombie meanwhile: this test has not reaped it
    finally:
        assert proc.wait(timeout=60) == -9
    text = _report(log)
    told = text.split("== Warm", 1)[0]
    assert "killed by SIGKILL" in told and "is not known" not in told, text


def _status(uids: str) -> str:
    return f"Name:\tpython\nUid:\t{uids}\nGid:\t0\t0\t0\t0\n"


def test_a_change_is_said_once_from_the_fs_uid_and_the_root_link(tmp_path: Path) -> None:
    """The file-system uid (the 4th of Uid:, the one open() is checked with) and the root link, against the
    watcher's own at first; each change once, with the last sample before it; nothing where unreadable."""
    for who, uids in (("self", "0\t0\t0\t0"), ("7", "0\t0\t0\t0")):
        (tmp_path / who).mkdir()
        (tmp_path / who / "status").write_text(_status(uids))
        (tmp_path / who / "root").symlink_to("/")
    seen = RootChange(7, proc=str(tmp_path))
    assert seen.check(10.0) == []
    (tmp_path / "7" / "status").write_text(_status("0\t65534\t0\t65534"))  # seteuid: fs uid follows euid
    assert seen.check(10.1) == [{"uid": 65534, "was_uid": 0, "since": 10.0}]
    assert seen.check(10.2) == []
    (tmp_path / "7" / "root").unlink()
    (tmp_path / "7" / "root").symlink_to("/jail")
    (tmp_path / "7" / "status").write_text("Name:\tpython\n")  # no Uid line: no uid said, none changed
    assert seen.check(10.3) == [{"root": "/jail", "was_root": "/", "since": 10.2}]
    (tmp_path / "7" / "root").unlink()  # a zombie: no root link to read
    assert seen.check(10.4) == []
