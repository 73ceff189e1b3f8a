"""The signal record (runtime/host_patches.install_signal_record): a traced process that signals another through
os.kill, os.killpg or signal.pidfd_send_signal writes a `signal_sent` record naming the target, the signal and
its own line, and the call itself answers exactly as untraced: the same return, the same exception, the same
errno, the same signature. The targets' ends are read independently: the sender's own wait status."""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.fold.fold import build
from wp_autotrace.runtime import host_calls, host_patches

from .conftest import clean_env, events, run_python, wait_for_watcher
from .test_invisible import without_wrapper_frames
from .test_watcher import differential

# A pid no process has (above the kernel's PID_MAX_LIMIT, 2**22): kill(2) answers ESRCH.
NO_PID = 2**30


def outcome(fn: Any, *args: Any, **kwargs: Any) -> str:
    """What calling fn gives: its return, or its exception's type, errno and text."""
    try:
        return f"returned {fn(*args, **kwargs)!r}"
    except Exception as exc:
        return f"{type(exc).__name__} errno={getattr(exc, 'errno', None)}: {exc}"


def calls(child: int) -> list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]]:
    """Calls whose outcome does not change the process: failures, rejections, signal 0 to a live child."""
    found = [("kill", os.kill, (NO_PID, signal.SIGTERM), {}), ("killpg", os.killpg, (NO_PID, signal.SIGTERM), {}),
             ("kill", os.kill, (child, 0), {}), ("kill", os.kill, ("x", 1), {}), ("kill", os.kill, (child,), {}),
             ("kill", os.kill, (), {"pid": child, "signal": 0}), ("kill", os.kill, (child, 2**40), {}),
             ("kill", os.kill, (child, signal.SIGTERM, 1), {})]
    if hasattr(signal, "pidfd_send_signal"):
        found += [("pidfd_send_signal", signal.pidfd_send_signal, (2**20, signal.SIGTERM), {}),
                  ("pidfd_send_signal", signal.pidfd_send_signal, (0, signal.SIGTERM, None, 99), {})]
    return found


def test_signal_calls_answer_as_untraced() -> None:
    """Differential, in this process: each call on the original, then on the replacement (installed): the same
    outcomes (errno included), signatures and names; only the well-formed failures are recorded, with their
    errno, and nothing for signal 0 or a call os rejects."""
    seen: list[tuple[str, dict[str, Any]]] = []
    child = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        want = [outcome(fn, *a, **k) for _, fn, a, k in calls(child.pid)]
        reals = {n: getattr(signal if n.startswith("pidfd") else os, n) for n in ("kill", "killpg",
                                                                                  "pidfd_send_signal")
                 if hasattr(signal if n.startswith("pidfd") else os, n)}
        host_patches.install_signal_record(lambda event, **f: seen.append((event, f)))
        try:
            ours = calls(child.pid)
            assert all(fn is not reals[name] for name, fn, _, _ in ours)
            got = [outcome(fn, *a, **k) for _, fn, a, k in ours]
            sigs = {n: (str(inspect.signature(getattr(signal if n.startswith("pidfd") else os, n))),
                        getattr(signal if n.startswith("pidfd") else os, n).__name__) for n in reals}
        finally:
            host_calls.restore_signal_record()
        assert {n: getattr(signal if n.startswith("pidfd") else os, n) for n in reals} == reals
        assert got == want
        assert sigs == {n: (str(inspect.signature(fn)), fn.__name__) for n, fn in reals.items()}
        assert child.poll() is None  # nothing reached it but signal 0
    finally:
        child.kill()
        child.wait()
    errors = [(f["how"], f["target"], f.get("error")) for _, f in seen if f.get("error")]
    assert ("kill", NO_PID, "ESRCH") in errors and ("killpg", NO_PID, "ESRCH") in errors, seen
    assert all(f["signal"] > 0 and isinstance(f["target"], int) for _, f in seen), seen
    assert not [f for _, f in seen if f["target"] == child.pid], seen  # signal 0 and rejected calls: none


class _HostSig(int):
    """A host's int subclass whose comparisons and conversions are its own code: os.kill reads its int value
    through int's slots and calls none of them."""

    ran: list[str] = []

    def __lt__(self, other: Any) -> bool:
        _HostSig.ran.append("__lt__")
        return int(self) < other

    def __gt__(self, other: Any) -> bool:
        _HostSig.ran.append("__gt__")
        return int(self) > other

    def __int__(self) -> int:
        _HostSig.ran.append("__int__")
        return int.__index__(self)


def test_a_call_os_rejects_before_the_kernel_is_no_signal_sent_and_no_host_code_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """os.kill(pid, 1.5) raises TypeError and a pid past pid_t's range OverflowError, before any signal: neither
    is an OSError, so no failure record would follow, and a record before the call told SIGHUP sent to a live
    child that got nothing. A host's int subclass as the signal is recorded by its int value without running its
    __lt__/__gt__/__int__ (untraced, os.kill runs none), and a pidfd's process is read without builtins.open (a
    host's replacement of open saw the tracer's /proc/self/fdinfo read)."""
    seen: list[dict[str, Any]] = []
    child = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    host_patches.install_signal_record(lambda event, **f: seen.append(f))
    try:
        for bad in ((child.pid, 1.5), (2**40, signal.SIGCONT), (child.pid, True, None)):
            with pytest.raises((TypeError, OverflowError)):
                os.kill(*bad)
        assert seen == [] and child.poll() is None, seen
        _HostSig.ran.clear()
        os.kill(child.pid, _HostSig(signal.SIGCONT))
        assert _HostSig.ran == [] and [(f["target"], f["signal"]) for f in seen] == [(child.pid, signal.SIGCONT)]
        assert type(seen[0]["signal"]) is int, seen
        if hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal"):
            import builtins

            opened: list[Any] = []
            real_open = builtins.open
            monkeypatch.setattr(builtins, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
            fd = os.pidfd_open(child.pid)
            try:
                with pytest.raises(TypeError):
                    signal.pidfd_send_signal(fd, signal.SIGCONT, "siginfo")
                signal.pidfd_send_signal(fd, signal.SIGCONT)
            finally:
                os.close(fd)
            monkeypatch.undo()
            assert opened == [] and [(f["target"], f.get("pidfd")) for f in seen[1:]] == [(child.pid, fd)], seen
    finally:
        host_calls.restore_signal_record()
        child.kill()
        child.wait()


def test_a_signal_sent_with_no_python_frame_below_is_recorded() -> None:
    """atexit.register(os.kill, pid, sig): atexit calls the replacement from C, with no Python frame below it
    (a process group cleaned up at exit: atexit.register(os.killpg, pgid, SIGTERM)). The record's frame walk
    asked for a frame that is not there, and the record was lost; it is written, with no frames."""
    child = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    code = ("import atexit, json, os, signal, sys\n"
            "from wp_autotrace.runtime import host_patches\n"
            "host_patches.install_signal_record(lambda e, **f: print(json.dumps(f), flush=True))\n"
            f"atexit.register(os.kill, {child.pid}, signal.SIGCONT)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0 and out.stderr == "", out
        got = [json.loads(line) for line in out.stdout.splitlines()]
        assert [(r["how"], r["target"], r["signal"], r["frames"]) for r in got] == [
            ("kill", child.pid, signal.SIGCONT, [])], got
    finally:
        child.kill()
        child.wait()


HOST = '''
import os, signal, subprocess, sys

def outcome(fn, *args):
    try:
        return f"returned {fn(*args)!r}"
    except Exception as exc:
        return f"{type(exc).__name__} errno={getattr(exc, 'errno', None)}"

def sleeper(**kw):
    return subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **kw)

pids = []
one = sleeper()
pids.append(one.pid)
print("kill", outcome(os.kill, one.pid, signal.SIGKILL), "status", one.wait())
group = sleeper(start_new_session=True)
pids.append(group.pid)
print("killpg", outcome(os.killpg, group.pid, signal.SIGTERM), "status", group.wait())
term = sleeper()
pids.append(term.pid)
term.terminate()  # subprocess's own os.kill
print("terminate status", term.wait())
print("no such", outcome(os.kill, 2**30, signal.SIGTERM), outcome(os.killpg, 2**30, signal.SIGTERM))
print("probe", outcome(os.kill, os.getpid(), 0))
if hasattr(signal, "pidfd_send_signal") and hasattr(os, "pidfd_open"):
    fd_child = sleeper()
    pids.append(fd_child.pid)
    fd = os.pidfd_open(fd_child.pid)
    print("pidfd", outcome(signal.pidfd_send_signal, fd, signal.SIGKILL), "status", fd_child.wait())
    os.close(fd)
if os.environ.get("WP_AUTOTRACE_LOG"):  # the traced run's pids, for the test (nothing printed)
    with open(os.environ["WP_AUTOTRACE_LOG"] + ".pids", "w") as f:
        f.write(" ".join(map(str, pids)))
'''


def test_traced_program_records_whom_it_signals(tmp_path: Path) -> None:
    """End to end, through the .pth, in the three modes (identical exit code, stdout, stderr: each kill's return
    and its target's wait status, each failure's errno): the traced run's log holds one signal_sent record per
    signal that went, naming the very pid the program killed (its own Popen), the signal, the line that sent it,
    and the failures with their errno; none for signal 0."""
    recs = differential(HOST, tmp_path)
    pids = [int(x) for x in (tmp_path / "run.jsonl.pids").read_text().split()]
    sent = [r for r in events(recs, "signal_sent") if not r.get("error")]
    got = [(r["how"], r["target"], r["signal"]) for r in sent]
    want = [("kill", pids[0], signal.SIGKILL), ("killpg", pids[1], signal.SIGTERM), ("kill", pids[2], signal.SIGTERM)]
    if len(pids) > 3:
        want.append(("pidfd_send_signal", pids[3], signal.SIGKILL))
    assert [g for g in got if g[1] != 2**30] == want, got
    frames = [(f["file"].endswith("host.py"), f["line"], f["func"]) for f in sent[0]["frames"]]
    assert frames == [(True, 6, "outcome"), (True, 16, "<module>")], sent[0]["frames"]
    assert sent[2]["frames"][0]["file"].endswith("subprocess.py")  # terminate(): subprocess's own os.kill
    assert any(f["file"].endswith("host.py") for f in sent[2]["frames"])
    failed = [(r["how"], r["error"]) for r in events(recs, "signal_sent") if r.get("error")]
    assert failed == [("kill", "ESRCH"), ("killpg", "ESRCH")], failed
    main = next(p for p in build(recs).processes if p.role == "main")
    assert [(s["how"], s["target"]) for s in main.sent if s.get("error")] == [("kill", 2**30), ("killpg", 2**30)]


@pytest.mark.parametrize("name", ["kill", "killpg"])
def test_restore_leaves_a_later_patch_alone(name: str) -> None:
    real = getattr(os, name)
    host_patches.install_signal_record(lambda event, **f: None)
    later = lambda *a: None  # noqa: E731 - someone patched it after us
    setattr(os, name, later)
    try:
        host_calls.restore_signal_record()
        assert getattr(os, name) is later
    finally:
        setattr(os, name, real)


@pytest.mark.skipif(not hasattr(signal, "pidfd_send_signal"), reason="no pidfd_send_signal on this platform")
def test_the_replaced_signal_function_answers_as_the_signal_modules() -> None:
    """CPython's test_signal (test_functions_module_attr) asks each of signal's functions that is no builtin for
    __module__ "signal"; pickle finds it by reference there, the same object back."""
    import pickle

    host_patches.install_signal_record(lambda event, **f: None)
    try:
        fn = signal.pidfd_send_signal
        assert not inspect.isbuiltin(fn) and fn.__module__ == "signal", fn.__module__
        assert pickle.loads(pickle.dumps(fn)) is fn
    finally:
        host_calls.restore_signal_record()


FAILING = '''
import os, signal, traceback

def show(fn, *args):
    try:
        fn(*args)
    except OSError:
        print(traceback.format_exc())

show(os.kill, 2**30, signal.SIGTERM)
show(os.killpg, 2**30, signal.SIGTERM)
if hasattr(signal, "pidfd_send_signal"):
    show(signal.pidfd_send_signal, 2**20, signal.SIGTERM)
show(os.execv, "/nonexistent/prog", ["prog"])
os.kill(2**30, signal.SIGTERM)
'''


def test_a_failing_replaced_call_shows_the_untraced_traceback(tmp_path: Path) -> None:
    """An exception the replaced os.kill / os.killpg / signal.pidfd_send_signal / os.execv raises, caught and
    printed or uncaught, shows the untraced traceback from 3.11; 3.9/3.10 re-raise the traceback saved at the
    catch, where one frame of ours stays: the replacement's own, never the record's frames under it. The failures
    are still recorded (each errno)."""
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    log = tmp_path / "run.jsonl"
    untraced = run_python([str(script)], clean_env(), cwd=tmp_path)
    traced = run_python([str(script)], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)), cwd=tmp_path)
    assert untraced.returncode == 1 and "ProcessLookupError" in untraced.stderr, untraced.stderr
    ours = [line for line in (traced.stdout + traced.stderr).splitlines() if "wp_autotrace" in line]
    tracebacks = (untraced.stdout + untraced.stderr).count("Traceback (most recent call last)")
    if sys.version_info >= (3, 11):
        assert ours == []
    else:  # one entry per traceback: the replacement's line that called the real function
        assert len(ours) == tracebacks and all("host_patches.py" in x or "_start_joined.py" in x for x in ours), ours
    assert (traced.returncode, without_wrapper_frames(traced.stdout), without_wrapper_frames(traced.stderr)) == (
        untraced.returncode, untraced.stdout, untraced.stderr)
    failed = [(r["how"], r["error"]) for r in events(wait_for_watcher(log), "signal_sent") if r.get("error")]
    want = [("kill", "ESRCH"), ("killpg", "ESRCH")]
    want += [("pidfd_send_signal", "EBADF")] if hasattr(signal, "pidfd_send_signal") else []
    assert failed == [*want, ("kill", "ESRCH")], failed
