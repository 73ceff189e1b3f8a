"""Pid reuse for real: a pid namespace (unshare -pf, as root) steered with ns_last_pid.

The run's first child gets pid P and exits; the next child is steered to the
same pid P and leaves a process behind. The report must track the new
process and its child, and report the leftover. This needs the watcher's
records (docs/contracts.md, "The watcher's records"); it skips when not root or without unshare.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze

from .conftest import clean_env, read_log

ROOT_SCRIPT = textwrap.dedent('''
    import os, subprocess, sys, time
    # the first child lives 0.1 s: two processes of one pid whose starts are closer than the identity's tolerance
    # (procfs.SAME_START_S, a clock tick and more) are one process by design, and a quick traced start comes close
    first = subprocess.run([sys.executable, "-c", "import os, time; print(os.getpid()); time.sleep(0.1)"],
                           capture_output=True, text=True)
    reused = int(first.stdout)
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(reused - 1))
    code = ("import os, subprocess, sys, time; "
            "subprocess.Popen(['sleep', '30'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL); "
            "print(os.getpid(), flush=True); time.sleep(30)")
    second = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    got = int(second.stdout.readline())
    print(reused, got, flush=True)

    def seen():  # a tree record lists the new process's child: the watcher has seen both
        import json
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            lines = [line for line in f if b'"tree"' in line]
        for line in lines:
            try:
                if any(e.get("ppid") == got for e in json.loads(line).get("started", [])):
                    return True
            except ValueError:
                continue  # a line being written
        return False

    for _ in range(400):  # bounded (20 s): the test's own assertions then say what is missing
        if seen():
            break
        time.sleep(0.05)
''')


def test_reused_pid_in_a_pid_namespace(tmp_path: Path) -> None:
    """A child that reuses a pid the run already used is tracked, with its child, and reported left behind."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a pid namespace and ns_last_pid)")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed")
    script = tmp_path / "root.py"
    script.write_text(ROOT_SCRIPT)
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    # sh is the namespace's pid 1: it outlives the traced root for a while (so the
    # watcher can report the leftovers), and its exit ends everything in the namespace.
    cmd = [unshare, "-pf", "--mount-proc", "sh", "-c", f'"{sys.executable}" "{script}"; sleep 4']
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    if proc.returncode != 0 and "unshare" in err:
        pytest.skip(f"cannot make a pid namespace here: {err.strip()[:200]}")
    reused, got = map(int, out.split())
    if reused != got:
        pytest.skip(f"ns_last_pid steering did not take (wanted {reused}, got {got})")
    records = read_log(log)
    # The watcher's records are the run's tree (docs/contracts.md, "The watcher's records"): none is a regression.
    assert any(r.get("role") == "watcher" for r in records), "the run's watcher wrote no record"
    rep = analyze(read_logs([str(log)]))
    same_pid = [p for p in rep["processes"] if p["pid"] == reused]
    assert len(same_pid) == 2, same_pid
    assert same_pid[0]["end_s"] is not None and same_pid[1]["left_behind"]
    assert reused in rep["leftover_pids"] and rep["leftover_count"] >= 2  # the new process and its sleep
    assert "leftovers" in {f["kind"] for f in rep["findings"]}
