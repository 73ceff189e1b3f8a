"""The host patches made while a target module loads or a target runs (host_patches.py's inventory
lists every patch, and says which of the two modules holds it).

Loaded with the first target module (finder.py, recorder.py, catch.py) or when pytest's config loads in
a traced process, never on a traced start-up's path: the body hooks, the child-role hand-over of the
spawners, the error capture of a pool process, and the pytest plugin's registration. They keep the
rules host_patches.py states: each calls what it replaced (found at install), passes the host's
exceptions through without its own frame, restores only what is still ours, and costs nothing until
installed.
"""

import _thread
import atexit
import builtins
import os
import sys

from ..common.env import CHILD_ROLE_ENV
from .host_patches import drop_own_frame, look_like

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable

_get_ident = _thread.get_ident


# -- body hooks: while a target module's body runs ------------------------------
#
# A post-import hook is too late for code that runs in the module body (finder.py
# says why). The finder passed in is duck-typed: _contained(where, fn, *args),
# patch_value(module, name, value), wrap_function(module, fn).

# id(module dict) -> (finder, module name) for every target module body running now.
_bodies: "dict[int, tuple[Any, str]]" = {}
_real_build_class: "Any" = None
_real_register_at_fork: "Any" = None
_real_atexit_register: "Any" = None
_real_thread_atexit: "Any" = None
_hooks_lock = _thread.allocate_lock()


def _build_class(*args: "Any", **kwds: "Any") -> "Any":
    """builtins.__build_class__(func, name, /, *bases, **kwds) while a target module runs: wraps
    its target classes at once."""
    try:
        cls = _real_build_class(*args, **kwds)
    except BaseException as exc:
        drop_own_frame(exc)
        raise
    func, name = args[:2]  # the call above succeeded: both are there
    body = _bodies.get(id(getattr(func, "__globals__", None))) if _bodies else None
    if body is not None and isinstance(cls, type) and cls.__qualname__ == name:
        finder, module_name = body
        finder._contained("patch " + module_name, finder.patch_value, module_name, name, cls)
        # And the body's top-level function targets defined by now: a function's def is no hook, and what the
        # body runs after a class may hand one on (torch 2.2-2.3's import-time warm_pool gives its fork pool
        # partial(_async_compile_initializer, ...), defined above AsyncCompile, before the import ends).
        finder._contained("patch " + module_name, finder.wrap_defined, module_name, func.__globals__)
    return cls


def _handover(fn: "Any") -> "Any":
    """fn, or its wrapper when fn is a top-level target function of a module body running now."""
    body = _bodies.get(id(getattr(fn, "__globals__", None))) if _bodies else None
    return fn if body is None else body[0].wrap_function(body[1], fn)


def _register_at_fork(*args: "Any", **kwargs: "Any") -> "Any":
    """os.register_at_fork while a target module runs: registers the wrappers of its targets."""
    try:
        return _real_register_at_fork(*args, **{k: _handover(v) for k, v in kwargs.items()})
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def _atexit_register(*args: "Any", **kwargs: "Any") -> "Any":
    """atexit.register(func, /, *args, **kwargs) while a target module runs: registers the
    wrappers of its targets."""
    try:
        return _real_atexit_register(*map(_handover, args[:1]), *args[1:], **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def _thread_atexit_register(*args: "Any", **kwargs: "Any") -> "Any":
    """threading._register_atexit(func, *args, **kwargs) while a target module runs: registers the wrapper of a
    target function (concurrent.futures.process registers its exit join there, before atexit's handlers run)."""
    try:
        return _real_thread_atexit(*map(_handover, args[:1]), *args[1:], **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def install_body_hooks(ns: "dict[str, Any]", finder: "Any", name: str) -> None:
    """Put the four hooks in place for a module body (nested bodies share them)."""
    global _real_build_class, _real_register_at_fork, _real_atexit_register, _real_thread_atexit
    with _hooks_lock:
        if not _bodies:
            _real_build_class = builtins.__build_class__
            _real_atexit_register = atexit.register
            _real_register_at_fork = getattr(os, "register_at_fork", None)
            threading = sys.modules.get("threading")
            _real_thread_atexit = getattr(threading, "_register_atexit", None)
            look_like(_build_class, _real_build_class, "builtins", "__build_class__")
            look_like(_atexit_register, _real_atexit_register, "atexit", "register")
            vars(builtins)["__build_class__"] = _build_class
            vars(atexit)["register"] = _atexit_register
            if _real_register_at_fork is not None:
                look_like(_register_at_fork, _real_register_at_fork, "os", "register_at_fork")
                vars(os)["register_at_fork"] = _register_at_fork
            if _real_thread_atexit is not None:
                look_like(_thread_atexit_register, _real_thread_atexit, "threading", "_register_atexit")
                vars(threading)["_register_atexit"] = _thread_atexit_register
        _bodies[id(ns)] = (finder, name)


def restore_body_hooks(ns: "dict[str, Any]") -> None:
    """Take the hooks away when the last running body ends; undo `from os import register_at_fork`."""
    with _hooks_lock:
        _bodies.pop(id(ns), None)
        if _bodies:
            return
        for owner, name, ours, real in ((builtins, "__build_class__", _build_class, _real_build_class),
                                        (atexit, "register", _atexit_register, _real_atexit_register),
                                        (os, "register_at_fork", _register_at_fork, _real_register_at_fork),
                                        (sys.modules.get("threading"), "_register_atexit", _thread_atexit_register,
                                         _real_thread_atexit)):
            if real is not None and owner is not None and getattr(owner, name, None) is ours:
                setattr(owner, name, real)
    for key, value in list(ns.items()):
        if value is _register_at_fork or value is _atexit_register:
            ns[key] = _real_register_at_fork if value is _register_at_fork else _real_atexit_register


def reset_body_hooks_after_fork() -> None:
    """In a forked child: a fresh hooks lock (another thread of the parent may have held it at the fork)."""
    global _hooks_lock
    _hooks_lock = _thread.allocate_lock()


# -- child-role handover: the spawners of subprocess and multiprocessing ----------

# Thread ident -> role, while a child_role target runs in that thread.
_child_roles: "dict[int, str]" = {}
# What the hand-over replaced, by name: fork_exec, posix_spawn, posix_spawnp.
_real_spawners: "dict[str, Any]" = {}
# _posixsubprocess.fork_exec's env argument: the same place on 3.9 - 3.13.
_ENV_ARG = 5
# os.posix_spawn[p]'s env argument (path, argv, env).
_SPAWN_ENV_ARG = 2


def set_child_role(role: str) -> None:
    """Hand role to the interpreters this thread starts until clear_child_role."""
    install_child_role_handover()
    _child_roles[_get_ident()] = role


def clear_child_role() -> None:
    """The child_role call of this thread ended."""
    _child_roles.pop(_get_ident(), None)


def _role_for_child() -> "str | None":
    """The role for a child started now by this thread, if it is inside a child_role call."""
    return _child_roles.get(_get_ident()) if _child_roles else None


def _fork_exec(*args: "Any", **kwargs: "Any") -> "Any":
    """_posixsubprocess.fork_exec, with CHILD_ROLE_ENV added to the child's own
    environment when the starting thread is inside a child_role call."""
    role = _role_for_child()
    if role is not None and len(args) > _ENV_ARG:
        env = args[_ENV_ARG]
        if env is None:
            env = [k + b"=" + v for k, v in os.environb.items()]
        key = CHILD_ROLE_ENV.encode() + b"="
        env = [e for e in env if not bytes(e).startswith(key)] + [key + role.encode()]
        args = args[:_ENV_ARG] + (env,) + args[_ENV_ARG + 1:]
    try:
        return _real_spawners["fork_exec"](*args, **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def _with_role(env: "Any") -> "Any":
    """A copy of a posix_spawn environment mapping, with this thread's child role added."""
    role = _role_for_child()
    if role is None:
        return env
    env = dict(os.environ if env is None else env)  # None: this process's environment (3.13)
    env[CHILD_ROLE_ENV] = role
    return env


def _args_with_role(args: "tuple[Any, ...]") -> "tuple[Any, ...]":
    """posix_spawn[p]'s (path, argv, env, ...) with the role added to env (where there is one)."""
    if len(args) <= _SPAWN_ENV_ARG:
        return args  # the real function raises its own TypeError
    return args[:_SPAWN_ENV_ARG] + (_with_role(args[_SPAWN_ENV_ARG]),) + args[_SPAWN_ENV_ARG + 1:]


def _posix_spawn(*args: "Any", **kwargs: "Any") -> "Any":
    """os.posix_spawn(path, argv, env, /, **options) (subprocess uses it from 3.13 when it can),
    with the child role added."""
    try:
        return _real_spawners["posix_spawn"](*_args_with_role(args), **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def _posix_spawnp(*args: "Any", **kwargs: "Any") -> "Any":
    """os.posix_spawnp, with the child role added."""
    try:
        return _real_spawners["posix_spawnp"](*_args_with_role(args), **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def _spawner_slots() -> "list[tuple[Any, str, str, Any]]":
    """(owner, attribute, key, our function) for every way subprocess/multiprocessing start a child."""
    import _posixsubprocess
    import subprocess

    return [(_posixsubprocess, "fork_exec", "fork_exec", _fork_exec),
            (subprocess, "_fork_exec", "fork_exec", _fork_exec),  # its own alias, from 3.11
            (os, "posix_spawn", "posix_spawn", _posix_spawn),
            (os, "posix_spawnp", "posix_spawnp", _posix_spawnp)]


def install_child_role_handover() -> None:
    """Route the calls that start child processes through our versions (once).

    subprocess and multiprocessing start every child through
    _posixsubprocess.fork_exec (subprocess from 3.11 through its own alias) or,
    from 3.13, os.posix_spawn; only the environment of a child started by a
    thread inside a child_role call changes, so os.environ never holds the role.
    """
    if _real_spawners:
        return
    import _posixsubprocess

    _real_spawners["fork_exec"] = _posixsubprocess.fork_exec
    for owner, name, key, ours in _spawner_slots():
        real = getattr(owner, name, None)
        if real is not None and (key not in _real_spawners or real is _real_spawners[key]):
            _real_spawners[key] = real
            look_like(ours, real, owner.__name__, name)
            setattr(owner, name, ours)


def restore_child_role_handover() -> None:
    """Put the real spawners back (where they are still ours)."""
    if not _real_spawners:
        return
    for owner, name, key, ours in _spawner_slots():
        if getattr(owner, name, None) is ours:
            setattr(owner, name, _real_spawners[key])
    _real_spawners.clear()
    _child_roles.clear()


# -- error capture: excepthooks and torch's pool loggers ---------------------------

# What install_error_capture put in place: on_log, on_exception, the filter, the loggers, the hooks replaced.
_capture: "dict[str, Any]" = {}


# How many positional arguments each excepthook takes: (type, value, traceback, /) and (args, /).
_EXCEPTHOOK_ARGS = 3
_THREADING_EXCEPTHOOK_ARGS = 1


def _excepthook(*args: "Any", **kwargs: "Any") -> "Any":
    """sys.excepthook in a pool process: record, then the hook it replaced."""
    if len(args) == _EXCEPTHOOK_ARGS and not kwargs:
        _capture["on_exception"]("excepthook", args[1])
    try:
        return (_capture.get("excepthook") or sys.__excepthook__)(*args, **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def _threading_excepthook(*args: "Any", **kwargs: "Any") -> "Any":
    """threading.excepthook in a pool process: record, then the hook it replaced."""
    if len(args) == _THREADING_EXCEPTHOOK_ARGS and not kwargs:
        _capture["on_exception"]("threading.excepthook", getattr(args[0], "exc_value", None))
    previous = _capture.get("threading_excepthook")
    if previous is None:
        return None
    try:
        return previous(*args, **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def install_error_capture(loggers: "tuple[str, ...]", on_log: "Callable[[Any], None]",
                          on_exception: "Callable[[str, BaseException | None], None]") -> None:
    """A filter that shows every record of loggers to on_log and lets it through; both
    excepthooks chained through on_exception. Once; on_log/on_exception never raise.

    A filter, not a handler: a handler would silence logging's last-resort
    stderr output, and what the host prints must not change.
    """
    if _capture:
        return
    # Pool processes load logging and threading with torch anyway.
    import logging
    import threading

    class _Recorder(logging.Filter):
        """Shows every record to on_log; lets it through."""

        def filter(self, record: "logging.LogRecord") -> bool:
            on_log(record)
            return True

    _capture.update(on_log=on_log, on_exception=on_exception, filter=_Recorder(), loggers=loggers,
                    excepthook=sys.excepthook, threading_excepthook=threading.excepthook)
    for name in loggers:
        logging.getLogger(name).addFilter(_capture["filter"])
    look_like(_excepthook, sys.excepthook, "sys", "excepthook")
    look_like(_threading_excepthook, threading.excepthook, "threading", "excepthook")
    sys.excepthook = _excepthook
    threading.excepthook = _threading_excepthook


def restore_error_capture() -> None:
    """Remove the filter; put the excepthooks back where they are still ours."""
    if not _capture:
        return
    import logging
    import threading

    for name in _capture["loggers"]:
        logging.getLogger(name).removeFilter(_capture["filter"])
    if sys.excepthook is _excepthook:
        sys.excepthook = _capture["excepthook"]
    if threading.excepthook is _threading_excepthook:
        threading.excepthook = _capture["threading_excepthook"]
    _capture.clear()


# -- pytest: the tracer's plugin, in a traced session only ------------------------------

# What install_pytest_plugin replaced ("owner", "consider_env") and the plugin's module name ("plugin").
_pytest: "dict[str, Any]" = {}


def _consider_env(*args: "Any", **kwargs: "Any") -> "Any":
    """PytestPluginManager.consider_env(self), where pytest imports the PYTEST_PLUGINS modules: the tracer's
    plugin too, as pytest would import it by entry point (not where plugin autoload is off or the session
    says `-p no:wp_autotrace`). A failure to register it is the tracer's, never the session's."""
    try:
        result = _pytest["consider_env"](*args, **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise
    try:
        manager = args[0]
        if not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") and not manager.is_blocked(_PLUGIN_NAME):
            manager.import_plugin(_pytest["plugin"])
    except Exception:
        pass
    return result


_PLUGIN_NAME = "wp_autotrace"  # what `-p no:NAME` named the plugin by when it had an entry point


def install_pytest_plugin(config_module: "Any", plugin: str) -> None:
    """Have every plugin manager of pytest's config_module (_pytest.config, just loaded) import the plugin
    module named plugin where it reads PYTEST_PLUGINS (consider_env). Once."""
    owner: Any = getattr(config_module, "PytestPluginManager", None)
    real = getattr(owner, "__dict__", {}).get("consider_env")
    if _pytest or real is None:
        return
    _pytest.update(owner=owner, consider_env=real, plugin=plugin)
    look_like(_consider_env, real)
    owner.consider_env = _consider_env


def restore_pytest_plugin() -> None:
    """Put consider_env back where it is still ours."""
    if not _pytest:
        return
    owner = _pytest["owner"]
    if owner.__dict__.get("consider_env") is _consider_env:
        owner.consider_env = _pytest["consider_env"]
    _pytest.clear()
