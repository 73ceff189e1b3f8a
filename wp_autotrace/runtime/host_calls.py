"""host_patches' rare half: what the exec and signal patches do once the host calls them (the exec record's
hand-over and the signal record: which signal, to whom, from which frames, written through the writers
host_patches was given), a forked multiprocessing worker's exit hook, and the restores of the start's patches
(a test's; the inventory's pairs: host_patches.py's table).

A plain traced start never runs this, and the replacements host_patches installs (os.execv, os.kill...) reach it
only when the host calls them. So it is not made at start: host_patches' ``calls()`` makes it from the start
pack's bytes at its first need (wp_autotrace/__init__.py ``later``: no import statement, no module lock, no file:
a forked child's kill or exec, one made from a signal handler, imports nothing), or loads it with itself where
the start modules did not come from the pack. A process that forks makes it before its first fork (host_patches'
before-fork hook), so its children inherit it: a pool's forked workers do not each make it.

Invariants: functions and constants only; the state (what was replaced, the writers) lives in host_patches'
dicts, and the host's own functions it calls (os.open, sys._getframe...) were bound there at start-up, before
a host could replace them. It imports only modules loaded before it: no lock, no file.
"""

import os
import sys

from ..common.core import SIGNAL_SENT
from .host_patches import (
    RDONLY,
    SENDERS,
    exec_patch,
    getframe,
    hooked_execv,
    hooked_execve,
    hooked_pidfd_send_signal,
    mp_exit,
    mp_exit_token,
    os_close,
    os_open,
    os_read,
    pidfd_owners,
    signal_patch,
)

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable


def record_exec(path: "Any", argv: "Any", env: "Any") -> None:
    """Hand the exec about to happen to the recorder; contained: never raises, prints nothing."""
    try:
        if os.access(path, os.X_OK):  # a path the kernel will refuse (execvp's PATH walk) is no exec
            exec_patch["record"](os.fsdecode(path), [os.fsdecode(a) for a in argv], env)
    except Exception:
        pass




# Frames kept per signal record, innermost first: enough to pass psutil/subprocess/a library's own
# send_signal and reach the line that asked.
SIGNAL_FRAMES = 8


def _frames(f: "Any") -> "list[dict[str, Any]]":
    """From frame f outwards (the host's caller of the patched function first): file, line, func."""
    out: list[dict[str, Any]] = []
    while f is not None and len(out) < SIGNAL_FRAMES:
        code = f.f_code
        out.append({"file": code.co_filename, "line": f.f_lineno, "func": code.co_name})
        f = f.f_back
    return out


def record_signal(how: str, args: "tuple[Any, ...]", kwargs: "dict[str, Any]",
                  exc: "BaseException | None") -> None:
    """Hand one signal about to be sent (exc None), or one the kernel refused (an OSError: its errno's name), to
    the recorder; any other exception (a handler's KeyboardInterrupt after the signal went) adds nothing.
    Contained: never raises, prints nothing. Only a well-formed call with a real signal: signal 0 (a liveness
    probe: psutil.pid_exists), a number no signal has and a call os rejects are no signal sent. The record is
    written before the signal goes (one that ends this very process, or its group with it, is recorded too)."""
    if exc is not None and not isinstance(exc, OSError):
        return
    try:
        sig = 0 if kwargs else _signal_of(how, args)
        if not sig:
            return
        target: int = args[0]
        extra: dict[str, Any] = {} if exc is None else {"error": _errno_name(exc)}
        if how == "pidfd_send_signal":
            extra["pidfd"], target = target, _pidfd_pid(target)
        # past this function, host_patches' _signal_record and the replacement: the host's own caller, None
        # where C called the replacement with no Python frame below (atexit.register(os.kill, pid, sig) runs it
        # so: getframe(3) raised there, and the record was lost)
        signal_patch["record"](SIGNAL_SENT, how=how, target=target, signal=sig, frames=_frames(getframe(2).f_back),
                           **extra)
    except Exception:
        pass


# pid_t and a C int: a pid or descriptor outside this range is rejected by os (OverflowError) before any signal.
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _signal_of(how: str, args: "tuple[Any, ...]") -> int:
    """The signal a call of these positional arguments sends, or 0 where the call sends none: signal 0 (a
    liveness probe: psutil.pid_exists), a number no signal has, and any call os rejects before the kernel sees
    it (a float, a pid out of pid_t's range, siginfo not None): a record for one of those would tell a signal
    that never went (os raises TypeError/OverflowError, not OSError: no failure record follows). Runs no host
    code: a host's int subclass is read through int's own slots, never its __lt__/__int__; a non-int with
    __index__, which os accepts, is not recorded rather than calling that __index__ a second time."""
    counts = (2, 3, 4) if how == "pidfd_send_signal" else (2,)  # (pidfd, sig, siginfo=None, flags=0, /)
    if len(args) not in counts or type(args[0]) is not int or not _INT_MIN <= args[0] <= _INT_MAX:
        return 0
    if not issubclass(type(args[1]), int):
        return 0
    sig: int = int.__index__(args[1])  # bool, IntEnum, signal.Signals: their int value, no method of theirs
    if len(args) > 2 and (args[2] is not None or len(args) > 3 and not issubclass(type(args[3]), int)):
        return 0
    return sig if 0 < sig < signal_patch["nsig"] else 0


def _pidfd_pid(fd: int) -> int:
    """The process a pidfd refers to (/proc/self/fdinfo/FD's `Pid:` line; -1 if it has ended); 0 unknown."""
    try:  # os's own calls bound at start-up, never builtins.open: a host may have replaced open (pyfakefs)
        fd_info = os_open(f"/proc/self/fdinfo/{fd}", RDONLY)
        try:
            data = os_read(fd_info, 4096)
        finally:
            os_close(fd_info)
        for line in data.splitlines():
            if line.startswith(b"Pid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0




def _errno_name(exc: OSError) -> str:
    import errno  # already loaded by os at start-up: a dict lookup

    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


# -- a multiprocessing worker's exit --------------------------------------------------

# Runs after every other multiprocessing finalizer of a worker (they run highest first).
_LAST_FINALIZER = -(2**31)


def install_mp_exit_finalizer(record_exit: "Callable[[str], None]") -> None:
    """In a forked child: call record_exit("os._exit") as a multiprocessing worker leaves.

    os._exit skips atexit. Rather than replacing os._exit (it must stay
    posix._exit, keywords and all), hook multiprocessing's own exit path: a
    worker runs its after-fork callbacks as it starts (this one adds a
    finalizer) and its finalizers (util._exit_function) just before os._exit.
    Nothing happens where multiprocessing is not loaded.
    """
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        mp_exit["record_exit"] = record_exit
        util.register_after_fork(mp_exit_token, _add_mp_exit_finalizer)


def _add_mp_exit_finalizer(_token: object) -> None:
    util = sys.modules["multiprocessing.util"]
    mp_exit["finalizer"] = util.Finalize(None, mp_exit["record_exit"], args=("os._exit",),
                                          exitpriority=_LAST_FINALIZER)


def restore_mp_exit_finalizer() -> None:
    """Take our entry out of the after-fork registry and cancel a finalizer made."""
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        registry = util._afterfork_registry
        for key in [k for k, v in list(registry.items()) if v is mp_exit_token]:
            registry.pop(key, None)
    finalizer = mp_exit.pop("finalizer", None)
    if finalizer is not None:
        finalizer.cancel()
    mp_exit.clear()


# -- the restores of the start's patches (their installs: host_patches) ----------------


def restore_exec_record() -> None:
    """Put os.execv and os.execve back where they are still ours."""
    if not exec_patch:
        return
    if os.execv is hooked_execv:
        os.execv = exec_patch["execv"]
    if os.execve is hooked_execve:
        os.execve = exec_patch["execve"]
    exec_patch.clear()


def restore_signal_record() -> None:
    """Put os.kill, os.killpg and pidfd_send_signal (_signal's, signal's) back where they are still ours."""
    if not signal_patch:
        return
    for name, owner, fn in SENDERS:
        if getattr(owner, name, None) is fn:
            setattr(owner, name, signal_patch[name])
    if "pidfd_send_signal" in signal_patch:
        for owner in pidfd_owners():
            if getattr(owner, "pidfd_send_signal", None) is hooked_pidfd_send_signal:
                owner.pidfd_send_signal = signal_patch["pidfd_send_signal"]
    signal_patch.clear()
