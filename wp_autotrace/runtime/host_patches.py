"""Every replacement of a host function, listed in one place, each an install/restore pair.

The tracer changes what a host process's own code would find in these places.
Each row is one patch; nothing but this module, host_calls.py and target_patches.py replaces a
host function (tests/test_host_patches.py checks that, and that restore puts
back the very objects install found). This module holds the patches a traced
start-up makes (process hooks, exec record, signal record); what a plain start never runs of them is
host_calls.py, made at its first need (what the exec and signal replacements do once the host calls them, a
forked worker's multiprocessing exit hook, and the restores: the rows and halves marked (C)); the rows
marked (T) live in target_patches.py, loaded with the first target module or
pytest's config, never at start-up.

install / restore                 host objects                                 when (caller)
--------------------------------  -------------------------------------------  ---------------------------------
install_body_hooks (T)            builtins.__build_class__, atexit.register,   while a target module's body runs
  / restore_body_hooks            os.register_at_fork,                         (finder.before_body / after_body)
                                  threading._register_atexit
install_child_role_handover (T)   _posixsubprocess.fork_exec,                  first call of a child_role target
  / restore_child_role_handover   subprocess._fork_exec, os.posix_spawn[p]     (recorder.set_child_role)
install_error_capture (T)         sys.excepthook, threading.excepthook,        the process serves a pool
  / restore_error_capture         a logging.Filter on torch's pool loggers     (catch.watch_role)
install_process_hooks             an os.register_at_fork(before=,              start-up
  / restore_process_hooks         after_in_child=) pair, an atexit callback    (bootstrap.start)
install_mp_exit_finalizer (C)     multiprocessing.util's after-fork registry   every forked child
  / restore_mp_exit_finalizer (C) and one of its Finalize objects              (bootstrap._after_fork)
install_exec_record               os.execv, os.execve (os.execl*, execvp*,     start-up, when tracing
  / restore_exec_record (C)       pty and pexpect reach these)                 (bootstrap.start_runtime)
install_pytest_plugin (T)         _pytest.config.PytestPluginManager           _pytest.config loaded, when tracing
  / restore_pytest_plugin         .consider_env                                (finder, first_target)
install_signal_record             os.kill, os.killpg,                          start-up, when tracing
  / restore_signal_record (C)     signal.pidfd_send_signal (psutil, subprocess (bootstrap.start_runtime)
                                  and multiprocessing reach os.kill)

Why each: the body hooks wrap a target class's methods as its ``class``
statement completes and hand ``atexit``/``register_at_fork``/``threading._register_atexit`` the
wrapper of a target function; the hand-over tells a pool's processes their role
(CHILD_ROLE_ENV in the child's own environment, never os.environ); the error
capture records what a pool process swallows; the process hooks give a forked
child its new identity and write process_exit; the finalizer writes the
process_exit of a multiprocessing worker, which leaves by os._exit; the exec
record says that a process that vanishes without process_exit became another
program (a hand-written fork()+exec() child, pty.fork() as pexpect uses it, a
wrapper handing over to a script), not that it was killed; the signal record names who sent
the signal another process ended by (a driver's SIGKILL to each actor, a kernel's SIGTERM to its own
children), which tells a signal to one process from one to its whole group; the pytest plugin hook registers the
tracer's plugin (a ``test`` record as each test begins and ends) in a traced pytest session only,
with no entry point: untraced, pytest never imports the package nor lists it among its plugins.

Two more changes of host state are not replacements and live with their code:
``sys.meta_path`` holds the front finder, then the TargetFinder (bootstrap.install_finder,
finder.TargetFinder.install/uninstall),
and a traced call moves ``sys.setrecursionlimit`` by its own cost and back
(unseen.adjust_limit: balanced per call, so there is nothing to restore).

Rules every patch here keeps: it calls what it replaced (found at install, not
at import), passes the host's exceptions through without its own frame (3.11+),
restores only what is still ours (someone may have patched it after us), and
costs nothing until installed: importing this module replaces nothing.
"""

import _signal  # type: ignore[import-not-found]  # signal.py would import enum (milliseconds)
import _thread
import atexit
import os
import sys

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable

# Bound once: a user may trace sys._getframe itself (WP_AUTOTRACE_TARGETS=sys:_getframe).
getframe = sys._getframe
_get_ident = _thread.get_ident
# A bare raise re-raises with the exception's own traceback from 3.11; 3.9/3.10
# re-raise the one saved when the exception was caught, which starts at the hook.
_TRIM_TRACEBACK = sys.version_info >= (3, 11)
# os's own calls, bound at start-up, never builtins.open: a host may replace open (pyfakefs) or os's (host_calls
# reads a pidfd's process with them).
os_open, os_read, os_close, RDONLY = os.open, os.read, os.close, os.O_RDONLY | os.O_CLOEXEC
_CALLS = __name__.rpartition(".")[0] + ".host_calls"
_PACKAGE = __package__.partition(".")[0]  # the package: the start modules' loader (its __init__)


def calls() -> "Any":
    """runtime/host_calls.py, what the exec and signal replacements do once called: made at its first need from
    the start pack's bytes (the package's later(): no import statement, lock or file), or loaded with this module where
    it did not come from the pack (the end of this module)."""
    return sys.modules.get(_CALLS) or sys.modules[_PACKAGE].later(_CALLS)


def drop_own_frame(exc: "BaseException") -> None:
    """Keep a hook's own frame out of an exception's traceback (3.11+)."""
    tb = exc.__traceback__
    if _TRIM_TRACEBACK and tb is not None and tb.tb_frame is getframe(1):
        exc.__traceback__ = tb.tb_next


# Every replacement takes (*args, **kwargs) and hands them on untouched (but for the one value it
# changes), so the function it replaced accepts and rejects exactly what it did: keywords
# (os.execv, the excepthooks and posix_spawn take none; os.execve takes path/argv/env), a wrong
# count, a class keyword named `name` or `func`, each with the original's own TypeError.
def look_like(fn: "Any", real: "Any", module: str = "", name: str = "") -> None:
    """fn answers introspection as real: __name__, __doc__, and inspect.signature() through
    __wrapped__ (functools.wraps' convention). Its type and repr stay a Python function's.
    module: the module fn is installed in, under name (real's name if none), given as its __module__ and
    __qualname__: pickle (and pydoc) find it by reference there, the same object while installed, the real one in
    an untraced process."""
    if module:
        fn.__module__, fn.__qualname__ = module, name or real.__name__
    try:  # each on its own, not a loop of setattr/getattr by name: five of these run at every traced start
        fn.__name__ = real.__name__
    except (AttributeError, TypeError):
        pass
    try:
        fn.__doc__ = real.__doc__
    except (AttributeError, TypeError):
        pass
    fn.__wrapped__ = real


# -- process hooks: the at-fork hook and process_exit ----------------------------

# What the at-fork hooks call ("call"): in a forked child, install_process_hooks' after_fork (_fork_hook); in the
# parent before a fork, calls (_before_fork); and the exit callback it was given ("at_exit", _process_hooks).
_process_hooks: "dict[str, Any]" = {}
_fork_hook: "dict[str, Any]" = {}
_before_fork: "dict[str, Any]" = {}
_at_fork_registered = False


def _at_fork() -> None:
    """An at-fork hook (CPython cannot unregister one: restore disarms it instead): what its dict holds, if anything.
    Contained: CPython prints what an at-fork hook raises on the host's stderr (after_fork reports its own)."""
    call = _fork_hook.get("call")
    if call is not None:
        try:
            call()
        except Exception:
            pass


def install_process_hooks(after_fork: "Callable[[], None]", at_exit: "Callable[[], None]") -> None:
    """Call after_fork in every forked child and at_exit at interpreter exit; before each fork, make host_calls
    (calls(): once, from memory), so that the children inherit it and a pool's workers do not each make it (their
    multiprocessing exit hook, an exec, a kill)."""
    global _at_fork_registered
    restore_process_hooks()
    _fork_hook["call"] = after_fork
    _before_fork["call"] = calls
    _process_hooks["at_exit"] = at_exit
    if not _at_fork_registered:
        # CPython keeps the at-fork hooks to the interpreter's very end: each is a copy of _at_fork whose globals are
        # its own dict alone, so once the exit empties them (drop_fork_hook) they keep none of the tracer's modules
        # alive through finalization, whose every collection would walk them again (docs/scale.md).
        function: Any = type(_at_fork)
        os.register_at_fork(
            before=function(_at_fork.__code__, {"_fork_hook": _before_fork, "__builtins__": __builtins__}),
            after_in_child=function(_at_fork.__code__, {"_fork_hook": _fork_hook, "__builtins__": __builtins__}))
        _at_fork_registered = True
    atexit.register(at_exit)


def drop_fork_hook() -> None:
    """After the exit record: the at-fork hooks call nothing from now on (a child forked later writes nothing)."""
    _fork_hook.clear()
    _before_fork.clear()


def restore_process_hooks() -> None:
    """Unregister the exit callback; disarm the at-fork hooks."""
    at_exit = _process_hooks.pop("at_exit", None)
    if at_exit is not None:
        atexit.unregister(at_exit)
    _fork_hook.clear()
    _before_fork.clear()


# -- a multiprocessing worker's exit ------------------------------------------------

def mp_exit_token() -> None:
    """The key of host_calls.install_mp_exit_finalizer's hook in multiprocessing's after-fork registry (a
    WeakValueDictionary: its values must be weak-referenceable), never called; here, where its state lives (made
    once: host_calls may be made twice). A function, not an instance of a class of its own: a class made at
    import costs every traced start ~70K instructions, a function ~6K (BENCHMARKS.md, seventh round)."""
# The function the finalizer calls ("record_exit"), and the Finalize once made ("finalizer").
mp_exit: "dict[str, Any]" = {}


# -- exec: the record a process writes just before it becomes another program ----------

# What install_exec_record replaced ("execv", "execve") and the writer it was given ("record").
exec_patch: "dict[str, Any]" = {}


# os.execve's parameters: unlike os.execv's (path, argv, /), they may be given by keyword.
_EXECVE_PARAMS = ("path", "argv", "env")


def hooked_execv(*args: "Any", **kwargs: "Any") -> "Any":
    """os.execv(path, argv, /): the exec record first. os.execl, os.execvp and os.execlp call this."""
    if len(args) == len(_EXECVE_PARAMS) - 1 and not kwargs:
        try:  # host_calls.record_exec is contained; here, where it cannot be made (no memory): no record
            calls().record_exec(args[0], args[1], None)
        except Exception:
            pass
    try:
        return exec_patch["execv"](*args, **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def hooked_execve(*args: "Any", **kwargs: "Any") -> "Any":
    """os.execve(path, argv, env): the exec record first. os.execle, os.execvpe and os.execlpe call this."""
    rest = _EXECVE_PARAMS[len(args):]
    if len(args) <= len(_EXECVE_PARAMS) and set(kwargs) == set(rest):
        try:
            calls().record_exec(*args, *(kwargs[name] for name in rest))
        except Exception:
            pass
    try:
        return exec_patch["execve"](*args, **kwargs)
    except BaseException as exc:
        drop_own_frame(exc)
        raise


def install_exec_record(record: "Callable[[str, list[str], Any], None]") -> None:
    """Call record(executable, argv, env) just before this process execs through os.

    os.execv and os.execve only: every other exec function of os (execl*,
    execvp*, and so pty.spawn and pexpect's pty.fork()+execv) looks them up in
    os at call time, so one record per attempt that the kernel may accept. A
    failed exec raises as before; the process then writes on (readers take a
    later record of it as the exec having failed). subprocess execs in C,
    from a child that is never traced.
    """
    if exec_patch:
        return
    exec_patch.update(record=record, execv=os.execv, execve=os.execve)
    look_like(hooked_execv, os.execv, "os")
    look_like(hooked_execve, os.execve, "os")
    os.execv = hooked_execv
    os.execve = hooked_execve


# -- signals: the record a process writes as it signals another -------------------------

# What install_signal_record replaced ("kill", "killpg", "pidfd_send_signal") and its writer ("record": the
# sink's emit).
signal_patch: "dict[str, Any]" = {}


def _signal_record(how: str, args: "tuple[Any, ...]", kwargs: "dict[str, Any]", exc: "Any") -> None:
    """host_calls.record_signal, contained: where host_calls cannot be made (no memory) the signal goes, unrecorded.
    Called from a replacement's own frame: the record's frame walk counts on that depth."""
    try:
        calls().record_signal(how, args, kwargs, exc)
    except Exception:
        pass


# Each replacement calls the function it replaced in its own frame, with no frame of ours under it: 3.9/3.10's
# bare raise keeps the traceback saved at the catch, so that is the one frame of ours they show.
def _kill(*args: "Any", **kwargs: "Any") -> "Any":
    """os.kill(pid, signal, /): psutil's send_signal/terminate/kill, subprocess's and multiprocessing's reach it."""
    _signal_record("kill", args, kwargs, None)
    try:
        return signal_patch["kill"](*args, **kwargs)
    except BaseException as exc:
        _signal_record("kill", args, kwargs, exc)
        drop_own_frame(exc)
        raise


def _killpg(*args: "Any", **kwargs: "Any") -> "Any":
    """os.killpg(pgid, signal, /): a signal to a whole process group (jupyter_client's interrupt and restart)."""
    _signal_record("killpg", args, kwargs, None)
    try:
        return signal_patch["killpg"](*args, **kwargs)
    except BaseException as exc:
        _signal_record("killpg", args, kwargs, exc)
        drop_own_frame(exc)
        raise


def hooked_pidfd_send_signal(*args: "Any", **kwargs: "Any") -> "Any":
    """signal.pidfd_send_signal(pidfd, sig, siginfo=None, flags=0, /): recorded with the descriptor; the
    reader names its process only where the log says which process the descriptor was opened for."""
    _signal_record("pidfd_send_signal", args, kwargs, None)
    try:
        return signal_patch["pidfd_send_signal"](*args, **kwargs)
    except BaseException as exc:
        _signal_record("pidfd_send_signal", args, kwargs, exc)
        drop_own_frame(exc)
        raise


SENDERS = (("kill", os, _kill), ("killpg", os, _killpg))


def install_signal_record(emit: "Callable[..., None]") -> None:
    """Call emit(SIGNAL_SENT, how=, target=, signal=, frames=) as this process signals another through os.kill,
    os.killpg or signal.pidfd_send_signal: before the signal goes, and again with error= (the errno's name) if
    it failed. target is kill's pid (0 and negatives are groups, as kill(2) has them), killpg's pgid, or the
    pidfd's process (pidfd= the descriptor). Each replacement calls the function it replaced with the very
    arguments, returns what it returned and raises what it raised (errno and all).

    pidfd_send_signal is replaced in _signal (built in, loaded by every interpreter's start-up), which the
    signal module copies its functions from when it is first imported, and in signal where that is loaded
    already: importing signal here would cost every traced process its enum import."""
    if signal_patch:
        return
    signal_patch.update(record=emit, nsig=_signal.NSIG)
    for name, owner, fn in SENDERS:
        signal_patch[name] = getattr(owner, name)
        look_like(fn, signal_patch[name], "os")
        setattr(owner, name, fn)
    real = getattr(_signal, "pidfd_send_signal", None)
    if real is not None:
        signal_patch["pidfd_send_signal"] = real
        # pydoc's and CPython's own test ask a signal function that is no builtin for __module__ "signal"
        look_like(hooked_pidfd_send_signal, real, "signal")
        for owner in pidfd_owners():
            if getattr(owner, "pidfd_send_signal", None) is real:
                owner.pidfd_send_signal = hooked_pidfd_send_signal


def pidfd_owners() -> "list[Any]":
    signal = sys.modules.get("signal")
    return [_signal] if signal is None else [_signal, signal]


# Not made from the pack (load() never ran: a plain import of the start modules): loaded now, with this module, so
# a forked child's exec or kill later imports nothing.
if _CALLS not in getattr(sys.modules.get(_PACKAGE), "later_code", ()):
    __import__(_CALLS)  # binds no name here: the module's names are those it has made from the pack
