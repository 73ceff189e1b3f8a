"""The nested-pools guard: what a refused call returns, and how the root hears of it.

A refused call happens in a compile sidecar or worker, whose stderr torch
sends to /dev/null. So the root creates a notice file at start (only it may:
O_EXCL, mode 0600, an absolute path it exports), a refusing process appends a
line to it (never creating it: a post after the root removed it leaves
nothing behind), and the root prints one ``wp-autotrace:`` line for the
first notice when it exits, then removes the file. No thread in any host
process: the root looks once, at exit.

The file lives in a directory the root creates, mode 0700, named by 16
random bytes (not the run id, which the watcher's argv shows to every user):
only the run's user can create, read or replace anything there, and once the
root removed both, no one can guess the name to re-create them. The path
travels in the environment only (readable by the same user).

The root imports this module at start-up, so it imports nothing heavy at
the top: the executor classes are made on first use (``InlinePool``).
"""

from __future__ import annotations

import os
import stat

from ..common.env import NOTICE_ENV
from .sink import warn

TYPE_CHECKING = False  # typing costs every guarded root milliseconds at start-up
if TYPE_CHECKING:
    from typing import Any

NOTICE_MAX_BYTES = 65536  # the first notice line is far shorter; never read more


def _make_inline_pool() -> Any:
    from concurrent.futures import Executor, Future
    from typing import Callable

    class InlinePool(Executor):
        """What a guarded process_pool() returns: jobs run in-process, at once.

        A plugin that calls AsyncCompile.process_pool() inside a compile sidecar
        or worker gets a working executor, so its code and torch's keep working,
        but no new sidecar is started.
        """

        def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
            future: Future[Any] = Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)
            return future

        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            """Nothing to stop."""

        def quiesce(self) -> None:
            """Nothing to stop."""

        def wakeup(self) -> None:
            """Nothing to start."""

    return InlinePool


_lazy: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """``InlinePool`` is made on first use: it needs concurrent.futures (and so threading)."""
    if name != "InlinePool":
        raise AttributeError(name)
    if name not in _lazy:
        _lazy[name] = _make_inline_pool()
    return _lazy[name]


NOTICE_NAME = "notice"  # the file, inside the run's private directory
DIR_PREFIX = "wp-autotrace-"  # then NAME_BYTES random bytes in hex: not the run id, in no argv
NAME_BYTES = 16
PRIVATE_MODE = 0o700


def _notice_dir() -> str:
    """A new private directory's path: absolute, unguessable (never derived from the run id, which ps shows)."""
    base = os.path.abspath(os.environ.get("TMPDIR") or "/tmp")
    return os.path.join(base, DIR_PREFIX + os.urandom(NAME_BYTES).hex())


def create_notice_file(run_id: str) -> str | None:
    """Root only: create the run's notice file (new, 0600) in a new private (0700) directory of an
    unguessable name; its path, or None if it cannot. run_id: unused in the path, on purpose."""
    inherited = os.environ.get(NOTICE_ENV)
    if inherited and _private(inherited):
        return inherited  # the root exec'd a new image: the one before made the file (same run)
    folder = _notice_dir()
    path = os.path.join(folder, NOTICE_NAME)
    try:
        os.mkdir(folder, PRIVATE_MODE)  # fails if anything is there: never someone else's directory
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
    except OSError as exc:
        warn(f"guard notices off: cannot create {path}: {exc.strerror or exc}", "guard-notice-file")
        _remove(path)
        return None
    return path


def _private(path: str) -> bool:
    """Whether path is a regular file (not a link) of this user's, in a directory of this user's that
    no one else may enter or write (a notice path another user could have made is never used)."""
    try:
        st, folder = os.lstat(path), os.lstat(os.path.dirname(path))
    except OSError:
        return False
    uid = os.geteuid()
    return (stat.S_ISREG(st.st_mode) and st.st_uid == uid and stat.S_ISDIR(folder.st_mode)
            and folder.st_uid == uid and not folder.st_mode & 0o077)


def _remove(path: str) -> None:
    """The notice file and its directory, if they are there."""
    for remove, target in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
        try:
            remove(target)
        except OSError:
            pass


def post_notice(info: dict[str, Any]) -> None:
    """Append one notice for the root; silently nothing if it cannot (or the root removed the file)."""
    path = os.environ.get(NOTICE_ENV)
    if not path or not _private(path):  # only into the run's own private directory
        return
    try:
        import json

        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            os.write(fd, json.dumps(info, default=repr).encode() + b"\n")
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass


def describe(info: dict[str, Any]) -> str:
    """One sentence about a refused call."""
    caller = info.get("caller") or {}
    where = f" (called from {caller.get('file')}:{caller.get('line')})" if caller else ""
    target = str(info.get("target", "")).rpartition(":")[2]
    return (f"guard nested-pools refused {target} in {info.get('role')} pid {info.get('pid')}{where}; "
            "no nested compile pool was started")


def print_and_remove_notice(path: str) -> bool:
    """Root exit: print the run's first notice, if any, then remove the file; True if printed."""
    first = b""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            first = os.read(fd, NOTICE_MAX_BYTES).partition(b"\n")[0]
        finally:
            os.close(fd)
    except OSError:
        pass
    _remove(path)
    if not first:
        return False
    import json

    try:
        info = json.loads(first)
    except ValueError:
        info = {}
    warn(describe(info if isinstance(info, dict) else {}), "guard-notice")
    return True
