"""The watcher's start in hostile surroundings (issue 28 items 3, 9, 11): it starts, and touches nothing of the job.

- a stdlib-named module in the package's site-packages (enum34's ``enum``) must not replace the stdlib's
  in the watcher (it puts the package's directory after the standard library on its sys.path);
- the job's filesystem (the root's cwd) unmounts right after a short job: the watcher never had its cwd there;
  nor the log's, with a leftover still alive: the watcher holds no fd of the log between two reads or writes;
- an inherited fd at or above the soft RLIMIT_NOFILE (``exec 300>lock; ulimit -n 256``) neither stops the
  watcher's start (posix_spawn's close of it is EBADF) nor stays open in the long-lived watcher.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

from wp_autotrace.common import vocab as V
from wp_autotrace.runtime import spawn

from .conftest import (
    ROOT,
    WaitTimeout,
    clean_env,
    events,
    read_log,
    report_json,
    run_python,
    tiny_tmpfs,
    wait_for_watcher,
    wait_until,
)
from .test_watcher import alive, kill_pids

# A stand-in for enum34 (a backport that shadows the stdlib's enum): `re` needs names it lacks.
FAKE_ENUM = '"""enum34 stand-in: not the standard library\'s enum."""\n\nclass Enum:\n    pass\n'
HIGH_FD = 300
LOW_NOFILE = 256
ATTEMPTS = 3  # short jobs whose filesystem is unmounted at once (the issue saw 3 of 3 fail)


def _watcher_ran(log: Path) -> list[dict[str, object]]:
    recs = wait_for_watcher(log, 30)
    assert events(recs, "watcher_start"), "the watcher never started"
    errors = [r for r in recs if r["event"] == "tracer_error" and r.get("role") == "watcher"]
    assert not errors, errors
    assert [r["reason"] for r in events(recs, "watcher_exit")] == [V.EXIT_RUN_ENDED]
    return recs


def test_a_stdlib_named_module_in_site_packages_does_not_kill_the_watcher(tmp_path: Path) -> None:
    """The package installed in a venv's site-packages beside a fake `enum`: the host imports the stdlib's,
    and so must the watcher (run-ended, no tracer_error), though its sys.path holds that site-packages."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert site != Path(sysconfig.get_paths()["purelib"])  # a throwaway venv, never the test's own
    shutil.copytree(ROOT / "wp_autotrace", site / "wp_autotrace", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "wp_autotrace" / "_bootstrap.pth", site / "wp_autotrace.pth")
    (site / "enum.py").write_text(FAKE_ENUM)
    log = tmp_path / "run.jsonl"
    env = {k: v for k, v in clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)).items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}  # the venv's copy, and only it
    res = run_python(["-c", "import subprocess, wp_autotrace; subprocess.run(['true']); print(wp_autotrace.__file__)"],
                     env, python=python, timeout=60)
    assert (res.returncode, res.stdout.strip()) == (0, str(site / "wp_autotrace" / "__init__.py")), res.stderr
    assert events(_watcher_ran(log), "leftover")  # the verdict (nothing left)


def test_the_jobs_filesystem_unmounts_right_after_a_short_job(tmp_path: Path) -> None:
    """The root's cwd on a tmpfs, the log elsewhere: umount right after the root's exit succeeds, every time
    (the watcher starts in /, not the job's cwd; no retry, which would hide a watcher still starting there)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "job"
    mnt.mkdir()
    env = clean_env(WP_AUTOTRACE="1")
    for attempt in range(ATTEMPTS):
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
        log = tmp_path / f"run{attempt}.jsonl"
        try:
            res = run_python(["-c", "pass"], {**env, "WP_AUTOTRACE_LOG": str(log)}, cwd=str(mnt), timeout=30)
            assert res.returncode == 0, res.stderr
            umount = subprocess.run(["umount", str(mnt)], capture_output=True, text=True)
            assert umount.returncode == 0, f"attempt {attempt}: {umount.stderr}"
        finally:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        _watcher_ran(log)


# The job's main: leaves a `sleep` (its cwd /, no fd of the job's) and ends once the watcher has started.
LEAVES_ONE = textwrap.dedent('''
    import subprocess, sys, time
    print(subprocess.Popen(["sleep", "60"], cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL).pid, flush=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(sys.argv[1], "rb") as f:
            data = f.read()
        if b'"watcher_start"' in data and b'"tree"' in data:  # its first sample written too
            break
        time.sleep(0.02)
''')


def test_the_logs_filesystem_unmounts_right_after_the_job(tmp_path: Path) -> None:
    """The log on the job's filesystem, a leftover lingering: an epilog keeps a copy of the log and
    unmounts right after the job's main ended, within 1 s (a read or write in flight holds the file for
    microseconds; the watcher holds nothing there between them, not only once it noticed the main's end,
    one interval later: 5 s here). The watcher, its log gone, leaves; a report of the copy says why no
    verdict came."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    script, copy = tmp_path / "main.py", tmp_path / "kept.jsonl"
    script.write_text(LEAVES_ONE)
    leftover = 0
    with tiny_tmpfs(tmp_path / "job", size="1m") as mnt:
        log = mnt / "run.jsonl"
        env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="5")
        try:
            res = run_python([str(script), str(log)], env, cwd=str(tmp_path), timeout=60)
            assert res.returncode == 0, res.stderr
            leftover = int(res.stdout)
            shutil.copy(log, copy)  # the epilog keeps the log, then unmounts
            tries: list[str] = []

            def unmounted() -> bool:
                umount = subprocess.run(["umount", str(mnt)], capture_output=True, text=True)
                tries.append(umount.stderr)
                return umount.returncode == 0

            try:
                wait_until(unmounted, 1.0, interval=0.05, what=f"umount {mnt}")
            except WaitTimeout:
                raise AssertionError(f"umount refused {len(tries)} times: {tries[-1]}") from None
            (start,) = events(read_log(copy), "watcher_start")
            wait_until(lambda: not alive(start["pid"]), 30, what="the watcher gone with its log")
        finally:
            if leftover:
                kill_pids([leftover])
    (run,) = report_json(copy)["runs"]
    assert "unmounted" in run["no_verdict"], run


@pytest.mark.parametrize("intermediate", ["shell", "python"])
def test_both_intermediates_start_the_watcher_in_root(tmp_path: Path, intermediate: str) -> None:
    """What the intermediate starts (the watcher) starts with / as its cwd, with the shell or, where there is
    none, the interpreter (runtime/spawn.py): never the job's cwd, not even for its first moments."""
    out = tmp_path / "cwd.txt"
    what = ["/bin/sh", "-c", f'pwd > "{out}"']
    if intermediate == "shell":
        argv = [spawn.SHELL, "-c", spawn.SHELL_SCRIPT, "wp-autotrace-spawn", *what]
    else:
        argv = [sys.executable, "-I", "-S", "-c", spawn.PY_INTERMEDIATE, *what]
    assert subprocess.run(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=30).returncode == 0
    wait_until(lambda: out.exists() and out.read_text().endswith("\n"), 30, what="the started program's cwd line")
    assert out.read_text() == "/\n"


def test_an_inherited_fd_above_the_soft_nofile_limit(tmp_path: Path) -> None:
    """`exec 300>lock; ulimit -n 256`, then a traced root that leaves a process behind: the watcher starts and
    gives its verdict, and holds no fd on the lock file (a flock on it would outlive the job)."""
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    lock = tmp_path / "lock"
    log = tmp_path / "run.jsonl"
    code = textwrap.dedent('''
        import subprocess
        # every stream DEVNULL: a leftover holding the test's stderr pipe kept subprocess.run waiting its 30 s
        print(subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL).pid)
    ''')
    script = f'exec {HIGH_FD}>"{lock}"; ulimit -n {LOW_NOFILE}; exec "{sys.executable}" -c "$0"'
    res = subprocess.run(["bash", "-c", script, code], env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    leftover = int(res.stdout)
    try:
        assert res.returncode == 0, res.stderr
        recs = wait_for_watcher(log, 30, event="leftover")
        assert [r["pids"] for r in events(recs, "leftover")] == [[leftover]]
        wpid = events(recs, "watcher_start")[0]["pid"]
        assert isinstance(wpid, int) and alive(wpid)  # lingering for the leftover
        held = {os.readlink(f"/proc/{wpid}/fd/{n}") for n in os.listdir(f"/proc/{wpid}/fd")}
        assert str(lock) not in held, held
    finally:
        kill_pids([leftover])
    wait_for_watcher(log, 30)
