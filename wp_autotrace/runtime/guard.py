"""The nested-pools guard: what a refused call returns, and how the root hears of it.

A refused call happens in a compile sidecar or worker, whose stderr torch
sends to /dev/null. So the root creates a notice file at start (only it may:
O_EXCL, mode 0600, an absolute path it exports), a refusing process appends a
line to it (never creating it: a post after the root removed it leaves
nothing behind), and the root prints one ``wp-autotrace:`` line for the
first notice when it exits, then removes the file. No thread in any host
process: the root looks once, at exit.

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


def notice_path(run_id: str) -> str:
    """Where the processes of one run post guard notices: absolute, named by the (random) run id."""
    return os.path.abspath(os.path.join(os.environ.get("TMPDIR") or "/tmp", f"wp-autotrace-{run_id}.notice"))


def create_notice_file(run_id: str) -> str | None:
    """Root only: create the run's notice file (new, 0600); its path, or None if it cannot."""
    path = notice_path(run_id)
    if os.environ.get(NOTICE_ENV) == path and _own_regular_file(path):
        return path  # the root exec'd a new image: the one before made the file (same run)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
    except OSError as exc:
        warn(f"guard notices off: cannot create {path}: {exc.strerror or exc}", "guard-notice-file")
        return None
    return path


def _own_regular_file(path: str) -> bool:
    """Whether path is a regular file (not a link) of this user's."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def post_notice(info: dict[str, Any]) -> None:
    """Append one notice for the root; silently nothing if it cannot (or the root removed the file)."""
    path = os.environ.get(NOTICE_ENV)
    if not path:
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
    try:
        os.unlink(path)
    except OSError:
        pass
    if not first:
        return False
    import json

    try:
        info = json.loads(first)
    except ValueError:
        info = {}
    warn(describe(info if isinstance(info, dict) else {}), "guard-notice")
    return True
