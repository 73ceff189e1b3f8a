"""A program a compile job ran (a compiler, a linker) that outlived its pool: told as what it is, who started it and
the ending signals it ignores (the watcher's `sigign`), with the fix that ends it, never as "compile pools left
running" (the pool had ended).

torch's compile processes ignore SIGINT, and a program they start inherits that: after a Ctrl-C the main process and
its pool end, the compiler runs on (bench/users/interrupted_compiler.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.common.procfs import ProcReader

from .conftest import wait_until
from .logs import T0, LogWriter, report, watcher
from .test_model import with_sidecar_hang

MIB = 1 << 20
ENDING = (("HUP", signal.SIGHUP), ("INT", signal.SIGINT), ("QUIT", signal.SIGQUIT), ("TERM", signal.SIGTERM))


def _sleeper(ignored: tuple[signal.Signals, ...]) -> subprocess.Popen[bytes]:
    def ignore() -> None:
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)
    return subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=ignore)


def test_the_tree_entry_names_the_ending_signals_a_member_ignores() -> None:
    """A child that ignores SIGINT (set before its exec, kept through it), one that ignores SIGHUP and SIGTERM, and
    one with this process's own dispositions (Python's signal.getsignal: what it inherits): each entry's `sigign`."""
    from wp_autotrace.watcher.tree import Tree

    own = {name for name, sig in ENDING if signal.getsignal(sig) == signal.SIG_IGN}
    asked = [{"INT"}, {"HUP", "TERM"}, set()]
    kids = [_sleeper(tuple(sig for name, sig in ENDING if name in names)) for names in asked]
    tree = Tree(os.getpid(), 0.0, 0.1)
    try:
        tree.exclude = set()
        wait_until(lambda: all(ProcReader().cmdline(k.pid).startswith("sleep") for k in kids), 20, what="the execs")
        started = {e["pid"]: e for e in tree.sample(time.time())[0]}
        said = [started[k.pid].get("sigign", "") for k in kids]
        assert said == [",".join(n for n, _ in ENDING if n in names | own) for names in asked], (said, own)
    finally:
        for k in kids:
            k.kill()
            k.wait(timeout=20)
        if tree.exits is not None:
            tree.exits.close()


def _compiler_left(sigign: str | None = "INT", ended_at: float | None = None, parent: int = 201) -> LogWriter:
    """with_sidecar_hang (main 100's wait interrupted by Ctrl-C at 8 s, 5 s into worker 201's job; the pool ended at
    8.3 s) with the job's compiler, child 300 of `parent` started at 3.1 s, listed by the watcher (its `sigign`),
    left running after the main (the watcher's leftover record), ending at `ended_at` where given."""
    w = with_sidecar_hang()
    entry: dict[str, Any] = {"pid": 300, "ppid": parent, "name": "cc1plus", "cmd": "cc1plus -O3 kernel.cpp",
                             "create_time": T0 + 3.1, "rss": 50 * MIB, "pgid": 100, "via": "child",
                             **({"sigign": sigign} if sigign else {})}
    watcher(w, 3.2, "tree", count=5, started=[entry], ended=[])
    w.lines[-1], w.lines[-2] = w.lines[-2], w.lines[-1]  # keep the leftover record last
    w.lines.sort(key=lambda r: r["ts"])
    leftover = next(r for r in w.lines if r["event"] == "leftover")
    leftover.update(count=1, pids=[300], procs=[{**entry, "ppid": 1}])
    if ended_at is not None:
        watcher(w, ended_at, "tree", count=0, started=[], ended=[{"pid": 300, "end": T0 + ended_at}])
    return w


def _left(rep: dict[str, Any]) -> dict[str, Any]:
    return next(f for f in rep["findings"] if f["kind"] == "leftovers")


def test_a_compiler_that_outlived_its_pool_is_told_as_the_jobs_program(tmp_path: Path) -> None:
    """The compiler is told as worker 201's job's program that ran on after the worker ended, ignoring SIGINT; the
    fix ends it with SIGTERM (a Ctrl-C does not) and says how the next job is stopped; it is told under the
    interrupted wait in the Answer, whose Fix first is that fix, never "compile pools left running"."""
    rep = report(_compiler_left(), tmp_path)
    f = _left(rep)
    said = ("child 300 (cc1plus), which compile-worker 201 started at 3.1 s for a job of its pool, ran on after "
            "compile-worker 201 ended at 8.3 s (still running at the watcher's last look), ignoring SIGINT")
    assert said in " ".join(f["text"].split()), f["text"]
    assert f["advice"].startswith("end it with SIGTERM: `kill 300` (or `wp-autotrace cleanup LOG`): a Ctrl-C does "
                                  "not end a process that ignores SIGINT; next time, stop the job with SIGTERM to its "
                                  "whole process group (`kill -TERM -- -100`)"), f["advice"]
    assert "compile pools left running" not in f["advice"] and "a Ctrl-C ends them with it" in f["advice"]
    lines = rep["answer"].splitlines()
    lead = next(i for i, x in enumerate(lines) if "interrupted by Ctrl-C" in x)
    assert any(x.startswith("  - 1 process was left running after the main process") and "child 300" in x
               for x in lines[lead:]), lines
    fix = " ".join(x for x in rep["answer"].split("- Fix first: ", 1)[1].split())
    assert fix.startswith("end it with SIGTERM: `kill 300`"), fix


def test_an_orphan_that_ignores_nothing_or_ended_is_told_so(tmp_path: Path) -> None:
    """No ignored signal read: no Ctrl-C words; one that ended since: nothing to end, only the next time's fix."""
    f = _left(report(_compiler_left(sigign=None), tmp_path))
    assert "ignoring" not in f["text"] and "Ctrl-C" not in f["advice"], f
    assert f["advice"].startswith("end it with SIGTERM: `kill 300`"), f["advice"]
    (tmp_path / "ended").mkdir()
    f = _left(report(_compiler_left(ended_at=20.0), tmp_path / "ended"))
    assert "(until 20.0 s)" in f["text"] and f["advice"].startswith("next time, stop the job"), f


@pytest.mark.parametrize("parent", [100])
def test_a_leftover_no_pool_process_started_keeps_the_old_cause(tmp_path: Path, parent: int) -> None:
    """The main's own child left running is no pool's orphan: not told as a job's program."""
    f = _left(report(_compiler_left(parent=parent), tmp_path))
    assert "for a job of its pool" not in f["text"] and "kill 300" not in f["advice"], f
