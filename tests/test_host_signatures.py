"""Every host patch (runtime/host_patches.py) and the object wrapper (runtime/recorder.py) accept and
reject exactly what the function they replace does: the same keywords, the same argument counts, the
same TypeError text, and the same inspect.signature() (issue #28, item 15).

Each call below is made on the original, then on our replacement (installed), and the outcomes
compared. No call here can succeed in a way that changes the process: exec paths do not exist, spawns
get too few arguments, and what atexit.register registers is unregistered.
"""

from __future__ import annotations

import _posixsubprocess
import _thread
import atexit
import builtins
import functools
import inspect
import os
import subprocess
import sys
import threading
from typing import Any, Callable

import pytest

from wp_autotrace.runtime import host_calls, host_patches, recorder, target_patches

NOWHERE = "/nonexistent/wp-autotrace-no-such-program"


def outcome(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """What calling fn gives: its exception's type and text, or 'returned'."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "returned"


def signature(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError) as exc:
        return f"no signature: {type(exc).__name__}"


# (owner, attribute, calls): each call is (args, kwargs).
EXEC_CALLS = [((NOWHERE, ["x"]), {}), ((), {"path": NOWHERE, "argv": ["x"]}), ((NOWHERE,), {"argv": ["x"]}),
              ((NOWHERE,), {}), ((), {})]
EXECVE_CALLS = [((NOWHERE, ["x"], {}), {}), ((), {"path": NOWHERE, "argv": ["x"], "env": {}}),
                ((NOWHERE, ["x"]), {"env": {}}), ((NOWHERE, ["x"]), {}), ((NOWHERE, ["x"], {}), {"bogus": 1})]
SPAWN_CALLS = [((), {"path": NOWHERE, "argv": ["x"], "env": {}}), ((NOWHERE,), {}), ((), {})]
FORK_EXEC_CALLS = [((), {"args": 1}), ((1,), {})]
HOOK_CALLS = [((), {"exctype": ValueError, "value": ValueError("x"), "traceback": None}), ((ValueError,), {}),
              ((), {})]
THREAD_HOOK_CALLS = [((), {"args": None}), ((), {})]


def compare(owner: Any, name: str, calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
            install: Callable[[], None], restore: Callable[[], None]) -> None:
    real = getattr(owner, name)
    want = [outcome(real, a, k) for a, k in calls]
    want_sig, want_name = signature(real), real.__name__
    install()
    try:
        ours = getattr(owner, name)
        assert ours is not real, f"{name} was not replaced"
        got = [outcome(ours, a, k) for a, k in calls]
        got_sig, got_name = signature(ours), ours.__name__
    finally:
        restore()
    assert getattr(owner, name) is real
    assert got == want, name
    assert (got_sig, got_name) == (want_sig, want_name)


def test_exec_functions_take_what_os_takes() -> None:
    """os.execv takes no keyword (untraced: TypeError); os.execve takes path/argv/env by keyword."""
    seen: list[Any] = []
    for name, calls in (("execv", EXEC_CALLS), ("execve", EXECVE_CALLS)):
        compare(os, name, calls, lambda: host_patches.install_exec_record(lambda *a: seen.append(a)),
                host_calls.restore_exec_record)
    # The exec record is still made for every call os accepts (the kernel refuses NOWHERE: no record,
    # as before, since os.access fails), and never for one it rejects.
    assert seen == []


def test_exec_record_binds_keywords_like_os() -> None:
    """A keyword call of os.execve is recorded as the positional one is (path executable: /bin/sh)."""
    seen: list[Any] = []
    real_execve = os.execve
    host_patches.install_exec_record(lambda *a: seen.append(a))
    try:
        host_patches.exec_patch["execve"] = lambda *a, **k: None  # the real exec is never reached here
        os.execve(path="/bin/sh", argv=["sh", "-c", "true"], env={"A": "1"})
        os.execve("/bin/sh", ["sh"], env={"B": "2"})
        os.execve("/bin/sh", ["sh"], {"C": "3"}, bogus=1)  # rejected by os: not recorded
    finally:
        host_patches.exec_patch["execve"] = real_execve
        host_calls.restore_exec_record()
    assert seen == [("/bin/sh", ["sh", "-c", "true"], {"A": "1"}), ("/bin/sh", ["sh"], {"B": "2"})]


def test_spawners_take_what_they_replace() -> None:
    """posix_spawn[p] (path, argv, env, /) and fork_exec (no keywords), as the originals."""
    for owner, name, calls in ((os, "posix_spawn", SPAWN_CALLS), (os, "posix_spawnp", SPAWN_CALLS),
                               (_posixsubprocess, "fork_exec", FORK_EXEC_CALLS)):
        compare(owner, name, calls, target_patches.install_child_role_handover,
                target_patches.restore_child_role_handover)
    if hasattr(subprocess, "_fork_exec"):
        compare(subprocess, "_fork_exec", FORK_EXEC_CALLS, target_patches.install_child_role_handover,
                target_patches.restore_child_role_handover)


def test_excepthooks_take_what_they_replace() -> None:
    """sys.excepthook (type, value, tb, /) and threading.excepthook (args, /): no keywords."""
    seen: list[Any] = []
    sys_hook, thread_hook = sys.excepthook, threading.excepthook
    # The interpreter's own hooks (3.9 has no threading.__excepthook__), not a test runner's.
    sys.excepthook = sys.__excepthook__
    threading.excepthook = getattr(threading, "__excepthook__", _thread._excepthook)
    try:
        for owner, name, calls in ((sys, "excepthook", HOOK_CALLS), (threading, "excepthook", THREAD_HOOK_CALLS)):
            compare(owner, name, calls,
                    lambda: target_patches.install_error_capture((), seen.append, lambda s, e: seen.append(s)),
                    target_patches.restore_error_capture)
    finally:
        sys.excepthook, threading.excepthook = sys_hook, thread_hook
    assert seen == []  # no call above had the hook's shape: nothing recorded


class FakeFinder:
    def _contained(self, where: str, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def patch_value(self, module: str, name: str, value: Any) -> None:
        pass

    def wrap_function(self, module: str, fn: Any) -> Any:
        return fn


CLASS_WITH_KEYWORDS = """
class Base:
    def __init_subclass__(cls, /, **kw):
        cls.kw = kw
class Named(Base, name="n", func="f"):
    pass
result = Named.kw
"""


def test_body_hooks_take_what_they_replace() -> None:
    """__build_class__ (func, name, /, *bases, **kwds): a class keyword named `name` or `func` works as
    untraced; atexit.register(func, /, *args, **kwargs) passes a keyword `func` to the callback."""
    untraced: dict[str, Any] = {}
    exec(CLASS_WITH_KEYWORDS, untraced)
    ns: dict[str, Any] = {}
    calls = [((), {"func": lambda: None, "name": "A"}), ((), {})]
    registered = [((print,), {"func": 1}), ((), {})]
    real_build, real_register = builtins.__build_class__, atexit.register
    want = [outcome(real_build, a, k) for a, k in calls] + [outcome(real_register, a, k) for a, k in registered]
    atexit.unregister(print)
    want_sigs = (signature(real_build), signature(real_register), real_build.__name__, real_register.__name__)
    target_patches.install_body_hooks(ns, FakeFinder(), "m")
    try:
        assert builtins.__build_class__ is not real_build and atexit.register is not real_register
        traced: dict[str, Any] = {}
        exec(CLASS_WITH_KEYWORDS, traced)
        got = ([outcome(builtins.__build_class__, a, k) for a, k in calls]
               + [outcome(atexit.register, a, k) for a, k in registered])
        atexit.unregister(print)
        got_sigs = (signature(builtins.__build_class__), signature(atexit.register), builtins.__build_class__.__name__,
                    atexit.register.__name__)
    finally:
        target_patches.restore_body_hooks(ns)
    assert traced["result"] == untraced["result"] == {"name": "n", "func": "f"}
    assert got == want and got_sigs == want_sigs


@pytest.mark.parametrize("raw", [functools.partial(lambda **kw: kw), type("C", (), {"__call__": lambda s, **kw: kw})()])
def test_object_wrapper_passes_a_keyword_named_self(raw: Any) -> None:
    """A traced callable object (a partial, an instance) takes a keyword `self` as the object does."""
    wrapper = recorder.ObjectWrapper(raw, raw)
    assert wrapper(self=1) == raw(self=1) == {"self": 1}


PROBE = """
import inspect, os
for call in (lambda: os.execv(path="/nonexistent/x", argv=["x"]), lambda: os.execv("/nonexistent/x"),
             lambda: os.execve(path="/nonexistent/x", argv=["x"], env={})):
    try:
        call()
    except Exception as exc:
        print(type(exc).__name__, exc)
print(os.execv.__name__, inspect.signature(os.execv), os.execve.__name__, inspect.signature(os.execve))
"""


def test_traced_process_sees_the_exec_functions_of_untraced(tmp_path: Any) -> None:
    """End to end, through the .pth: a traced program's os.execv/os.execve answer as untraced."""
    from .conftest import clean_env, run_python

    untraced = run_python(["-c", PROBE], clean_env())
    traced = run_python(["-c", PROBE], clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(tmp_path / "l.jsonl"),
                                                  WP_AUTOTRACE_SAMPLE_INTERVAL="0"))
    assert untraced.returncode == 0 and "takes no keyword arguments" in untraced.stdout, untraced.stderr
    assert (traced.returncode, traced.stdout, traced.stderr) == (untraced.returncode, untraced.stdout,
                                                                 untraced.stderr)
