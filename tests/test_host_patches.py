"""The inventory of host patches (runtime/host_patches.py): every replacement of a
host function is there, and each restore puts back the very objects its install found.
"""

from __future__ import annotations

import _posixsubprocess
import ast
import atexit
import builtins
import logging
import multiprocessing.util
import os
import signal
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace import JOINED
from wp_autotrace.runtime import catch, host_calls, host_patches, target_patches

from .conftest import clean_env, traced_env

RUNTIME = Path(host_patches.__file__).parent

# Every host object some patch replaces: (owner, attribute).
REPLACED = (
    (builtins, "__build_class__"), (atexit, "register"), (os, "register_at_fork"), (threading, "_register_atexit"),
    (_posixsubprocess, "fork_exec"), (subprocess, "_fork_exec"), (os, "posix_spawn"), (os, "posix_spawnp"),
    (sys, "excepthook"), (threading, "excepthook"), (os, "execv"), (os, "execve"), (os, "kill"), (os, "killpg"),
    (signal, "pidfd_send_signal"),
)
# Replacing one of these, or calling one of the registrations, is a host patch: only host_patches.py, host_calls.py
# (its rare half) and target_patches.py (the patches made with the first target module) may.
REPLACED_NAMES = {name for _, name in REPLACED}
REGISTRATIONS = {"register_at_fork", "addFilter", "register_after_fork", "Finalize"}
INVENTORY = ("host_patches.py", "host_calls.py", "target_patches.py")
# host_patches' code joined with the other start modules' (tools/join_start.py; test_join_start holds it current)
JOINED_FILE = JOINED.rpartition(".")[2] + ".py"


def host_objects() -> dict[str, Any]:
    """What a host's code finds in every patched place, multiprocessing's registries included
    (atexit's cannot be read: test_process_hooks_... runs the exit instead)."""
    found: dict[str, Any] = {f"{owner.__name__}.{name}": getattr(owner, name, None) for owner, name in REPLACED}
    found["logger filters"] = {name: list(logging.getLogger(name).filters) for name in catch.LOGGERS}
    found["after-fork registry"] = dict(multiprocessing.util._afterfork_registry)
    found["finalizers"] = dict(multiprocessing.util._finalizer_registry)
    return found


class FakeFinder:
    """The finder as the body hooks see it: wraps nothing."""

    def _contained(self, where: str, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def patch_value(self, module: str, name: str, value: Any) -> None:
        pass

    def wrap_function(self, module: str, fn: Any) -> Any:
        return fn


def test_body_hooks_restore_what_they_found() -> None:
    """install_body_hooks replaces three host functions; restore_body_hooks puts back those very objects,
    and undoes `from os import register_at_fork` run by the body."""
    before = host_objects()
    ns: dict[str, Any] = {}
    target_patches.install_body_hooks(ns, FakeFinder(), "m")
    try:
        assert builtins.__build_class__ is not before["builtins.__build_class__"]
        assert atexit.register is not before["atexit.register"]
        exec("from os import register_at_fork", ns)
        assert ns["register_at_fork"] is not before["os.register_at_fork"]
    finally:
        target_patches.restore_body_hooks(ns)
    assert host_objects() == before
    assert ns["register_at_fork"] is before["os.register_at_fork"]


def test_child_role_handover_restores_the_spawners() -> None:
    """The hand-over replaces every spawner of subprocess; restore puts each back."""
    before = host_objects()
    target_patches.install_child_role_handover()
    try:
        assert _posixsubprocess.fork_exec is not before["_posixsubprocess.fork_exec"]
        assert os.posix_spawn is not before["os.posix_spawn"]
    finally:
        target_patches.restore_child_role_handover()
    assert host_objects() == before


def test_child_role_reaches_the_child_only_while_set() -> None:
    """A child started inside set_child_role gets the role in its own environment; os.environ never does."""
    show = [sys.executable, "-c", "import os; print(os.environ.get('WP_AUTOTRACE_CHILD_ROLE'))"]
    try:
        target_patches.set_child_role("compile-worker")
        assert subprocess.run(show, capture_output=True, text=True, timeout=30).stdout.strip() == "compile-worker"
        assert "WP_AUTOTRACE_CHILD_ROLE" not in os.environ
        target_patches.clear_child_role()
        assert subprocess.run(show, capture_output=True, text=True, timeout=30).stdout.strip() == "None"
    finally:
        target_patches.restore_child_role_handover()


def test_error_capture_restores_hooks_and_filters() -> None:
    """The excepthooks and the logger filters come back as they were; what they saw was recorded."""
    before = host_objects()
    seen: list[Any] = []
    target_patches.install_error_capture(catch.LOGGERS, seen.append, lambda source, exc: seen.append(source))
    try:
        assert sys.excepthook is not before["sys.excepthook"]
        logging.getLogger(catch.LOGGERS[1]).warning("x")
        assert [r.msg for r in seen] == ["x"]
    finally:
        target_patches.restore_error_capture()
    assert host_objects() == before


def test_restore_leaves_a_later_patch_alone() -> None:
    """Someone who hooked sys.excepthook after us keeps their hook when we restore."""
    real = sys.excepthook

    def theirs(*args: Any) -> None:
        pass

    target_patches.install_error_capture((), lambda r: None, lambda s, e: None)
    sys.excepthook = theirs
    try:
        target_patches.restore_error_capture()
        assert sys.excepthook is theirs
    finally:
        sys.excepthook = real


def test_process_hooks_restore_the_exit_callback_and_disarm_the_fork_hook() -> None:
    """The exit callback runs at exit until restore; the at-fork hook (CPython cannot unregister it) is disarmed."""
    code = ("import os, sys\nfrom wp_autotrace.runtime import host_patches as hp\n"
            "hp.install_process_hooks(lambda: os.write(1, b'forked\\n'), lambda: os.write(1, b'exit\\n'))\n"
            "pid = os.fork()\nif pid == 0: os._exit(0)\nos.waitpid(pid, 0)\n"
            "if sys.argv[1] == 'restore':\n    hp.restore_process_hooks()\n"
            "    pid = os.fork()\n    if pid == 0: os._exit(0)\n    os.waitpid(pid, 0)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    kept = subprocess.run([sys.executable, "-c", code, "keep"], capture_output=True, text=True, env=env, timeout=60)
    gone = subprocess.run([sys.executable, "-c", code, "restore"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert (kept.stdout.split(), kept.stderr) == (["forked", "exit"], "")
    assert (gone.stdout.split(), gone.stderr) == (["forked"], "")


def test_the_fork_hook_holds_only_its_own_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython keeps the at-fork hook to the interpreter's end: its globals are the hook's own dict, which the exit
    empties (drop_fork_hook), so it keeps none of the tracer's modules alive through finalization."""
    got: list[Any] = []
    monkeypatch.setattr(os, "register_at_fork", lambda **kw: got.append(kw))
    monkeypatch.setattr(host_patches, "_at_fork_registered", False)
    monkeypatch.setattr(host_patches, "calls", lambda: calls.append("before"))
    calls: list[str] = []
    host_patches.install_process_hooks(lambda: calls.append("fork"), lambda: None)
    try:
        [hooks] = got
        assert sorted(hooks) == ["after_in_child", "before"]
        for hook in hooks.values():
            assert set(hook.__globals__) == {"_fork_hook", "__builtins__"}
            hook()
        host_patches.drop_fork_hook()
        for hook in hooks.values():
            hook()
            assert hook.__globals__["_fork_hook"] == {}
        assert calls == ["before", "fork"]
    finally:
        host_patches.restore_process_hooks()


def test_mp_exit_finalizer_restores_the_registries() -> None:
    """The after-fork entry and the finalizer it makes both leave multiprocessing's registries."""
    before = host_objects()
    host_calls.install_mp_exit_finalizer(lambda how: None)
    try:
        assert len(multiprocessing.util._afterfork_registry) == len(before["after-fork registry"]) + 1
        host_calls._add_mp_exit_finalizer(host_patches.mp_exit_token)  # as a starting worker would
        assert len(multiprocessing.util._finalizer_registry) == len(before["finalizers"]) + 1
    finally:
        host_calls.restore_mp_exit_finalizer()
    assert host_objects() == before


def _host_patches_in(path: Path) -> list[str]:
    """Assignments to a replaced name (also by setattr or vars()[...]) and registrations, with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr in REPLACED_NAMES:
                    found.append(f"{path.name}:{node.lineno} assigns {target.attr}")
                if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                        and target.slice.value in REPLACED_NAMES):
                    found.append(f"{path.name}:{node.lineno} assigns {target.slice.value}")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in REGISTRATIONS or (name == "register" and getattr(func, "value", None) is not None
                                         and getattr(func.value, "id", "") == "atexit"):  # type: ignore[attr-defined]
                found.append(f"{path.name}:{node.lineno} calls {name}")
            if (name == "setattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in REPLACED_NAMES):
                found.append(f"{path.name}:{node.lineno} setattr {node.args[1].value}")
    return found


def test_the_check_sees_every_patch_in_the_inventory() -> None:
    """The AST check below recognises each kind of patch host_patches.py, host_calls.py and target_patches.py make."""
    seen = " ".join(path for name in INVENTORY for path in _host_patches_in(RUNTIME / name))
    for word in ("assigns __build_class__", "assigns excepthook", "calls register_at_fork", "calls addFilter",
                 "calls register_after_fork", "calls Finalize", "calls register"):
        assert word in seen


@pytest.mark.parametrize("path", sorted(RUNTIME.glob("*.py")), ids=lambda p: p.name)
def test_no_host_patch_outside_the_inventory(path: Path) -> None:
    """Only host_patches.py, host_calls.py and target_patches.py touch the functions a host patch replaces."""
    if path.name in INVENTORY or path.name == JOINED_FILE:
        return
    assert not _host_patches_in(path)


def test_every_patch_is_in_the_inventory_tables() -> None:
    """Each install/restore pair is listed in the module's own table and in docs/architecture.md, with its pair."""
    names = sorted((n, m) for m in (host_patches, host_calls, target_patches) for n in vars(m)
                   if n.startswith("install_") and callable(getattr(m, n)) and getattr(m, n).__module__ == m.__name__)
    architecture = (RUNTIME.parent.parent / "docs" / "architecture.md").read_text()
    assert names
    for name, module in names:
        restore = "restore_" + name.removeprefix("install_")
        # a start's patch is restored by its rare half (host_calls: a test's or an uninstall's need only)
        found = getattr(module, restore, None) or getattr(host_calls, restore, None)
        assert callable(found), f"{name} has no {restore}"
        assert name in (host_patches.__doc__ or "") and restore in (host_patches.__doc__ or ""), name
        assert f"`{name}` / `{restore}`" in architecture, name


def test_pytest_plugin_hook_registers_the_plugin_and_restores_consider_env() -> None:
    """consider_env runs pytest's own, then imports the tracer's plugin (not when blocked); restore puts back
    the very function it found."""
    imported: list[str] = []

    class Manager:
        def consider_env(self) -> str:
            return "real"

        def is_blocked(self, name: str) -> bool:
            return name in self.blocked

        def import_plugin(self, name: str) -> None:
            imported.append(name)

        blocked: tuple[str, ...] = ()

    real = Manager.__dict__["consider_env"]
    module = types.SimpleNamespace(PytestPluginManager=Manager)
    target_patches.install_pytest_plugin(module, "wp_autotrace.pytest_plugin")
    try:
        assert Manager().consider_env() == "real" and imported == ["wp_autotrace.pytest_plugin"]
        Manager.blocked = ("wp_autotrace",)
        assert Manager().consider_env() == "real" and imported == ["wp_autotrace.pytest_plugin"]
    finally:
        target_patches.restore_pytest_plugin()
    assert Manager.__dict__["consider_env"] is real


def test_signal_record_restores_what_it_found() -> None:
    """install_signal_record replaces os.kill, os.killpg (and signal.pidfd_send_signal where it exists);
    restore_signal_record puts back those very objects, and a second install changes nothing."""
    before = host_objects()
    host_patches.install_signal_record(lambda event, **fields: None)
    try:
        replaced = host_objects()
        host_patches.install_signal_record(lambda event, **fields: None)
        assert host_objects() == replaced
        assert os.kill is not before["os.kill"] and os.killpg is not before["os.killpg"]
        if before["signal.pidfd_send_signal"] is not None:
            assert signal.pidfd_send_signal is not before["signal.pidfd_send_signal"]
    finally:
        host_calls.restore_signal_record()
    assert host_objects() == before


def test_a_replacement_answers_introspection_as_the_function_it_replaced() -> None:
    """look_like: __name__, __doc__ and __wrapped__ from the replaced function; a replaced callable with no
    __name__ (a partial) or one that is no str keeps the replacement's own name, and nothing raises."""
    import functools

    def fn(*args: Any) -> None:
        """the replacement's own"""

    host_patches.look_like(fn, os.execv)
    assert (fn.__name__, fn.__doc__, fn.__wrapped__) == ("execv", os.execv.__doc__, os.execv)  # type: ignore[attr-defined]

    class Odd:
        __name__ = 3  # type: ignore[assignment]
        __doc__ = "odd's"

        def __call__(self) -> None:
            pass

    for real in (functools.partial(print), Odd()):
        def g(*args: Any) -> None:
            """the replacement's own"""

        host_patches.look_like(g, real)
        assert (g.__name__, g.__doc__, g.__wrapped__) == ("g", real.__doc__, real)  # type: ignore[attr-defined]


PICKLE_SENDERS = ("import os, pickle, sys; sys.stdout.buffer.write(b'|'.join(pickle.dumps(f) for f in "
                  "(os.kill, os.killpg, os.execv, os.execve)))")


def test_a_traced_programs_pickle_of_a_replaced_os_function_loads_untraced(tmp_path: Path) -> None:
    """pickle names a function by __module__ and __qualname__: a traced program's pickle.dumps(os.kill) named this
    package's wrapper, which an untraced process (a multiprocessing peer, a cache read later) cannot load
    (AttributeError). Each wrapper is found by reference in os: the real function there untraced."""
    import pickle

    traced = subprocess.run([sys.executable, "-c", PICKLE_SENDERS], env=traced_env(tmp_path / "log.jsonl"),
                            capture_output=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert traced.returncode == 0, traced.stderr
    loaded = [pickle.loads(d) for d in traced.stdout.split(b"|")]
    assert loaded == [os.kill, os.killpg, os.execv, os.execve], loaded


# In the deepest frame a Python call cannot pass, os.kill and os.killpg (builtins, no frame: 3.11+ runs them there)
# and their replacements (one Python frame each).
AT_THE_LIMIT = """
import os
PID, GROUP = os.getpid(), os.getpgid(0)  # not called down there: some builtins' calls count a frame (3.11 METH_O)
def deep(group):
    try:
        return deep(group)
    except RecursionError:
        try:
            os.killpg(GROUP, 0) if group else os.kill(PID, 0)
            return "ran"
        except RecursionError:
            return "RecursionError"
print(deep(False), deep(True))
"""


def test_a_replacement_in_the_deepest_frame_raises_where_the_builtin_runs(tmp_path: Path) -> None:
    """What docs/guarantees.md says stays visible: a replacement is one Python frame where the builtin is none, so at
    the recursion limit it raises RecursionError where (3.11+) the builtin runs; 3.9/3.10 raise there untraced too."""
    runs = [subprocess.run([sys.executable, "-c", AT_THE_LIMIT], env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL, cwd=tmp_path)
            for env in (clean_env(), traced_env(tmp_path / "log.jsonl"))]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    untraced, traced = (r.stdout.split() for r in runs)
    assert traced == ["RecursionError", "RecursionError"]
    assert untraced == (["ran", "ran"] if sys.version_info >= (3, 11) else traced)


# The places target_patches.py installs its wrappers in (the rest of REPLACED are host_patches.py's).
TARGET_TIME = REPLACED[:10]
# Untraced: loads (places, pickles) from stdin; prints the places whose pickle did not load what is there, and
# whether this package was imported.
UNPICKLE_EACH = ("import pickle, sys; places, data = pickle.load(sys.stdin.buffer); "
                 "loaded = [pickle.loads(d) for d in data]; "
                 "print([m + '.' + n for (m, n), f in zip(places, loaded) if f is not getattr(sys.modules[m], n)], "
                 "'wp_autotrace' in sys.modules)")


def test_a_pickle_of_a_target_time_wrapper_loads_the_real_function_untraced(tmp_path: Path) -> None:
    """A traced program's pickle.dumps(atexit.register) (or sys.excepthook, os.register_at_fork, ...) while a
    target module's body, a child_role call or a pool's error capture runs named this package's wrapper, which an
    untraced process cannot load, or loads as the wrapper. Each is found by reference where it is installed: the
    same object while installed, the real function in an untraced process (without importing this package)."""
    import pickle

    ns: dict[str, Any] = {}
    target_patches.install_body_hooks(ns, FakeFinder(), "m")
    target_patches.install_child_role_handover()
    target_patches.install_error_capture((), lambda r: None, lambda s, e: None)
    try:
        ours = [(f"{owner.__name__}.{name}", getattr(owner, name, None)) for owner, name in TARGET_TIME]
        ours = [(place, fn) for place, fn in ours if fn is not None]  # subprocess._fork_exec: from 3.11
        data = [pickle.dumps(fn) for _, fn in ours]
        assert [pickle.loads(d) for d in data] == [fn for _, fn in ours]
    finally:
        target_patches.restore_error_capture()
        target_patches.restore_child_role_handover()
        target_patches.restore_body_hooks(ns)
    places = [tuple(place.split(".")) for place, _ in ours]
    untraced = subprocess.run([sys.executable, "-c", UNPICKLE_EACH], input=pickle.dumps((places, data)),
                              capture_output=True, timeout=60, cwd=tmp_path)
    assert untraced.returncode == 0, untraced.stderr
    assert untraced.stdout.decode().split() == ["[]", "False"], untraced.stdout
