"""A task start the process limit refused (EAGAIN) as the refused process recorded it at its exit, and the failed
compile it explains: the count is checked against psutil's reading, taken by the test itself.

A compile job's linker whose thread start `ulimit -u` refused leaves only its exit status in the job's error (its
own "can't start new thread" goes to its stderr), and the tasks that met the limit are gone before any sweep: the
refused process's exit record (`error`, `uid`, `uid_tasks`, `nproc`: common/refused.py) is the one record of it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from wp_autotrace.analysis.findings.compile import LIMIT_ADVICE
from wp_autotrace.common.refused import refused_fields, uid_tasks

from .conftest import events, read_log, run_python, traced_env
from .logs import report
from .test_floors import _kernel_failed_between_sweeps

SYSTEM_PYTHON = "/usr/bin/python3.11"  # a python another uid can run (the venv's may sit under /root)
# uids no process on a test box runs as: each live test takes one and first checks that nobody runs as it
FREE_UIDS = (65531, 65530)
LIMIT = 12


def _can_switch_uid() -> bool:
    return (os.geteuid() == 0 and sys.version_info[:2] == (3, 11) and os.path.exists(SYSTEM_PYTHON)
            and shutil.which("setpriv") is not None and shutil.which("prlimit") is not None)


needs_root = pytest.mark.skipif(not _can_switch_uid(), reason="needs root, setpriv, prlimit and a system 3.11")


def _free(uid: int) -> int:
    if any(p.info["uids"] and p.info["uids"].real == uid for p in psutil.process_iter(["uids"])):
        pytest.skip(f"uid {uid} is in use on this box")
    return uid


def _psutil_tasks(uid: int) -> int:
    """The test's own reading: every thread of every process of real uid `uid`, as psutil reads it."""
    total = 0
    for p in psutil.process_iter(["uids", "num_threads"]):
        if p.info["uids"] is not None and p.info["uids"].real == uid:
            total += p.info["num_threads"] or 0
    return total


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another uid can enter and write (pytest's tmp_path is root's only), with a python for that uid
    whose one .pth adds this checkout's site-packages (the tracer's .pth and psutil with them)."""
    d = Path(tempfile.mkdtemp(prefix="wp-refused-"))
    try:
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(d / "venv")], check=True, timeout=120)
        site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "psutil").is_dir())
        (d / "venv/lib/python3.11/site-packages/zz.pth").write_text(
            f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
            f"import site; site.addsitedir({site!r})\n")
        subprocess.run(["chmod", "-R", "a+rwX", str(d)], check=True)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_the_uid_count_reads_every_process_of_that_uid_once(tmp_path: Path) -> None:
    """A fake /proc: pids 10 and 11 of uid 7 (3 + 2 threads), 12 of uid 8, `self` (the same process again) and
    a kernel file left out: 5."""
    proc = tmp_path / "proc"
    for name, uid, threads in (("10", 7, 3), ("11", 7, 2), ("12", 8, 9), ("self", 7, 3)):
        (proc / name).mkdir(parents=True)
        (proc / name / "status").write_text(f"Name:\tx\nUid:\t{uid}\t0\t0\t0\nThreads:\t{threads}\n")
    (proc / "sys").mkdir()
    assert uid_tasks(7, str(proc)) == 5 and uid_tasks(8, str(proc)) == 9
    assert refused_fields("ValueError: no", str(proc)) == {}  # no EAGAIN: nothing read
    said = refused_fields("RuntimeError: can't start new thread", str(proc))
    assert said["uid"] == os.getuid() and "uid_tasks" in said, said


@needs_root
def test_the_uid_count_matches_psutil() -> None:
    """Two processes of a free uid, 4 threads and 1: uid_tasks reads 5, as psutil does."""
    uid = _free(FREE_UIDS[1])
    as_uid = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    code = "import threading, time; [threading.Thread(target=time.sleep, args=(60,), daemon=True).start() " \
           "for _ in range(3)]; print(1, flush=True); time.sleep(60)"
    procs = [subprocess.Popen([*as_uid, SYSTEM_PYTHON, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL),
             subprocess.Popen([*as_uid, "sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        assert procs[0].stdout is not None and procs[0].stdout.readline().strip() == b"1"
        assert _psutil_tasks(uid) == 5 and uid_tasks(uid) == 5
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)


REFUSED = textwrap.dedent("""
    import json, os, sys, threading
    import psutil
    go = threading.Event()
    try:
        while True:  # until the kernel refuses one
            threading.Thread(target=go.wait, daemon=True).start()
    except RuntimeError:
        uid = os.getuid()
        seen = sum(p.info["num_threads"] for p in psutil.process_iter(["uids", "num_threads"])
                   if p.info["uids"] and p.info["uids"].real == uid)
        open(sys.argv[1], "w").write(json.dumps(seen))
        raise
""")


@needs_root
def test_a_process_an_uncaught_eagain_ends_counts_its_uids_tasks(shared_dir: Path) -> None:
    """A traced program under ulimit -u 12 (a free uid, no watcher) starts threads until one is refused and lets
    the error end it: its process_exit says so, with 12 tasks of its uid, as psutil read them just before."""
    uid = _free(FREE_UIDS[0])
    log, seen = shared_dir / "run.jsonl", shared_dir / "seen.json"
    script = shared_dir / "refused.py"
    script.write_text(REFUSED)
    env = traced_env(log, WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "prlimit", f"--nproc={LIMIT}:{LIMIT}",
           str(shared_dir / "venv/bin/python"), str(script), str(seen)]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and "can't start new thread" in result.stderr, result.stderr
    exit_ = events(read_log(log), "process_exit")
    assert len(exit_) == 1, exit_
    r = exit_[0]
    assert r["error"] == "RuntimeError: can't start new thread", r
    assert (r["uid"], r["nproc"]) == (uid, LIMIT), r
    assert r["uid_tasks"] == int(seen.read_text()) == LIMIT, (r, seen.read_text())


# A console inside the program prints an error and goes on (sys.last_value stays set), then the program ends.
CONSOLE_THEN = "import code; code.InteractiveInterpreter().runsource('1/0'); "


@pytest.mark.parametrize("how", ["import sys; sys.exit(3)", "raise ValueError('bad input')", "pass",
                                 CONSOLE_THEN + "pass", CONSOLE_THEN + "raise ValueError('bad input')",
                                 "-i", "-m"])
def test_only_an_uncaught_exception_is_an_exit_error(tmp_path: Path, how: str) -> None:
    """sys.exit and a plain end write no `error`; an uncaught ValueError writes its line and reads no /proc (it
    says nothing of a refused start), also under -m (runpy's frames at the stack's bottom) and after a console's
    error. An error a console printed and went on from is not the exit's (sys.last_value is still set: it was
    written as the error of a normal exit), nor is -i's script error, after which the REPL ran (exit status 0)."""
    log = tmp_path / "run.jsonl"
    (tmp_path / "bad.py").write_text("raise ValueError('bad input')\n")
    args = {"-i": ["-i", "-c", "raise ValueError('bad input')"], "-m": ["-m", "bad"]}.get(how, ["-c", how])
    res = run_python(args, traced_env(log, WP_AUTOTRACE_SAMPLE_INTERVAL="0"), cwd=tmp_path)
    r = events(read_log(log), "process_exit")[0]
    if how == "-m" or how.endswith("raise ValueError('bad input')"):
        assert res.returncode == 1 and r["error"] == "ValueError: bad input" and "uid_tasks" not in r, r
    else:
        assert "error" not in r and "uid_tasks" not in r, (r, res.returncode)
        assert res.returncode in (0, 3) and ("ZeroDivisionError" in res.stderr) == how.startswith(CONSOLE_THEN)


def _linker_refused(tasks: int, at: float = 2.25, uid: int = 65534) -> Any:
    """_kernel_failed_between_sweeps (uid 65534 under ulimit -u 24; the wait raised the linker's bare exit status
    at 2.35 s) with linker 310 (worker 300's) ended at `at` by an uncaught refused thread start, `tasks` counted."""
    w = _kernel_failed_between_sweeps()
    for r in w.lines:
        if r["pid"] == 310 and r["event"] == "process_start":
            r["argv"] = ["/usr/bin/ld.lld", "-shared"]
        if r["pid"] == 310 and r["event"] == "process_exit":
            r.update(ts=r["ts"] - 2.25 + at, error="RuntimeError: can't start new thread", uid=uid, uid_tasks=tasks,
                     nproc=24)
    w.lines.sort(key=lambda r: r["ts"])
    return w


def _failed(w: Any, tmp_path: Path) -> dict[str, Any]:
    return next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "compile-failed")


def test_a_linker_refused_at_the_limit_is_the_failures_cause(tmp_path: Path) -> None:
    """The linker counted 24 tasks of its uid under its ulimit -u 24 as it ended: the limit was reached, told with
    the linker, its worker and its own line, and Fix first is the limit's."""
    f = _failed(_linker_refused(24), tmp_path)
    said = ("the process limit (ulimit -u 24) was reached: child 310 (ld.lld, which compile-worker 300 started) "
            "ended by RuntimeError: can't start new thread at 2.2 s")
    assert said in f["text"] and "24 processes and threads of uid 65534 alive on the host as it ended" in f["text"]
    assert f["advice"] == LIMIT_ADVICE and f["cost"]["limit_reached"], f


@pytest.mark.parametrize("case", ["below", "after", "root"])
def test_a_refusal_that_does_not_show_the_limit_reached_is_no_cause(tmp_path: Path, case: str) -> None:
    """13 of 24 counted: a refusal, the limit only a possibility; a refusal after the failure: not its cause (the
    floor of before); root's (uid 0, exempt outside a user namespace): never "reached"."""
    w = {"below": lambda: _linker_refused(13), "after": lambda: _linker_refused(24, at=2.5),
         "root": lambda: _linker_refused(24, uid=0)}[case]()
    f = _failed(w, tmp_path)
    assert "limit (ulimit -u 24) was reached" not in f["text"] and not f["cost"]["limit_reached"], f["text"]
    if case == "after":
        assert "child 310" not in f["text"] and "whether the limit was reached, no record shows" in f["text"]
    else:
        assert "its processes ran under ulimit -u 24, and child 310 (ld.lld" in f["text"], f["text"]
        assert "whether the limit was reached, no record shows" in f["text"], f["text"]
        assert f["advice"] == f"if the process limit caused it: {LIMIT_ADVICE}", f["advice"]
