"""The nested-pools guard: what a refused call returns, and how the root hears of it.

A refused call happens in a compile sidecar or worker, whose stderr torch
sends to /dev/null. So the refusing process appends a line to a notice file
named in the environment, and a small thread in the root prints one
``wp-autotrace:`` line the first time one appears.
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import Executor, Future
from typing import Any, Callable

from .sink import warn

NOTICE_ENV = "WP_AUTOTRACE_NOTICE"


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


def notice_path(run_id: str) -> str:
    """Where the processes of one run post guard notices (run ids are random)."""
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", f"wp-autotrace-{run_id}.notice")


def post_notice(info: dict[str, Any]) -> None:
    """Append one notice for the root; silently nothing if it cannot."""
    path = os.environ.get(NOTICE_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, json.dumps(info, default=repr).encode() + b"\n")
        finally:
            os.close(fd)
    except OSError:
        pass


def describe(info: dict[str, Any]) -> str:
    """One sentence about a refused call."""
    caller = info.get("caller") or {}
    where = f" (called from {caller.get('file')}:{caller.get('line')})" if caller else ""
    target = str(info.get("target", "")).rpartition(":")[2]
    return (f"guard nested-pools refused {target} in {info.get('role')} pid {info.get('pid')}{where}; "
            "no nested compile pool was started")


class NoticeWatcher:
    """Root-only: prints the first guard notice of the run as it arrives."""

    def __init__(self, path: str, interval: float = 0.5) -> None:
        self.path = path
        self.interval = interval
        self.printed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wp-autotrace-notice", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.check():
                return

    def check(self) -> bool:
        """Print the first notice if one is there; True once printed."""
        if self.printed:
            return True
        try:
            with open(self.path, "rb") as f:
                first = f.readline()
        except OSError:
            return False
        if not first.endswith(b"\n"):
            return False
        try:
            info = json.loads(first)
        except ValueError:
            info = {}
        self.printed = True
        warn(describe(info), "guard-notice")
        return True

    def close(self) -> None:
        """At root exit: a last look, then remove the notice file."""
        self._stop.set()
        self.check()
        try:
            os.unlink(self.path)
        except OSError:
            pass
