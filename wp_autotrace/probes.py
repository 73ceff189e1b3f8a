"""The wrappers put around each target: record, count, or (guard) refuse.

Each wrapper is a wrapt wrapper function. Recording is contained: a fault in
the tracer is reported once and the wrapped call goes ahead untouched; the
wrapped function's own exceptions pass through unchanged.
"""

from __future__ import annotations

import itertools
import os
import sys
import time

from .sink import Sink, thread_name
from .targets import (
    CHILD_ROLE_ENV,
    CONFIG_KEYS,
    COUNT,
    GUARDED_ROLES,
    IMPORT,
    INLINE_POOL,
    SKIP,
    Target,
    watched_env,
)

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable

# Bound once: the tracer must not call itself through a traced stdlib function.
_perf_counter = time.perf_counter
_getframe = sys._getframe
_getpid = os.getpid

# How a stack frame counts: left out, library (torch, stdlib), or user/plugin code.
_SKIP, _LIBRARY, _USER = 0, 1, 2

_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep

# Roles that a later call may not overwrite (a sidecar also runs the worker
# initializer on itself).
_FIXED_ROLES = GUARDED_ROLES - {"compile-worker"} | {"main"}


class Probes:
    """Per-process recording state shared by all wrappers."""

    def __init__(self, sink: Sink, stack_limit: int, guard: bool, notice: Callable[[dict[str, Any]], None]) -> None:
        self.sink = sink
        self.stack_limit = stack_limit
        self.guard = guard
        self.notice = notice
        self.counts: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._local: Any = None  # a threading.local, made with the first wrapper
        self._torch_dir: str | None = None  # "" once torch is known to have no file
        self._kinds: dict[Any, int] = {}
        self._skip_dirs: tuple[str, ...] = (_OWN_DIR,)
        self._inline_pool: Any = None

    def reset_after_fork(self) -> None:
        """Forget the parent's counters and open calls in a forked child."""
        self.counts = {}
        self._ids = itertools.count(1)
        if self._local is not None:
            import threading

            self._local = threading.local()

    def _thread_state(self) -> dict[str, Any]:
        """Per-thread open calls and re-entrancy flag (made with the first wrapper)."""
        return self._local.__dict__  # type: ignore[no-any-return]

    # -- stacks -----------------------------------------------------------

    def _frame_kind(self, code: Any) -> int:
        """_SKIP (ours, wrapt's, importlib's), _LIBRARY (torch, stdlib) or _USER, cached per code object."""
        kind = self._kinds.get(code)
        if kind is None:
            filename = code.co_filename
            if filename.startswith(self._skip_dirs) or filename.startswith("<frozen importlib"):
                kind = _SKIP
            elif (filename.startswith("<") or (self._torch_dir and filename.startswith(self._torch_dir))
                  or (filename.startswith(_STDLIB_DIR) and "-packages" not in filename)):
                kind = _LIBRARY
            else:
                kind = _USER
            if len(self._kinds) > 20000:
                self._kinds.clear()
            self._kinds[code] = kind
        return kind

    def _learn_dirs(self) -> None:
        """Note torch's and wrapt's folders once they are imported (the cache depends on them)."""
        modules = sys.modules
        if self._torch_dir is None and "torch" in modules:
            path = getattr(modules["torch"], "__file__", None)
            self._torch_dir = os.path.dirname(path) + os.sep if path else ""
            self._kinds.clear()
        if len(self._skip_dirs) == 1 and "wrapt" in modules:
            path = getattr(modules["wrapt"], "__file__", None)
            self._skip_dirs = (_OWN_DIR, os.path.dirname(path) + os.sep) if path else (_OWN_DIR, _OWN_DIR)
            self._kinds.clear()

    def capture_stack(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The caller's frames (innermost last, ours and importlib's left out),
        and the innermost frame outside torch and the stdlib."""
        self._learn_dirs()
        kinds = self._kinds
        limit = self.stack_limit
        frames: list[dict[str, Any]] = []
        caller = None
        frame: Any = _getframe(1)
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = self._frame_kind(code)
            if kind != _SKIP:
                entry = None
                if len(frames) < limit:
                    entry = {"file": code.co_filename, "line": frame.f_lineno, "func": code.co_name}
                    frames.append(entry)
                elif caller is not None:
                    break  # both found: the rest of the stack is not needed
                if caller is None and kind == _USER:
                    caller = entry or {"file": code.co_filename, "line": frame.f_lineno, "func": code.co_name}
            frame = frame.f_back
        frames.reverse()
        return frames, caller

    # -- roles ------------------------------------------------------------

    def take_role(self, role: str) -> None:
        """Adopt a role announced by a call (the worker initializer)."""
        if self.sink.role != role and self.sink.role not in _FIXED_ROLES:
            self.sink.role = role
            self.sink.emit("role", role=role)

    # -- wrappers ---------------------------------------------------------

    def make_wrapper(self, target: Target, label: str) -> Callable[..., Any]:
        """Build the wrapt wrapper function for one target."""
        if self._local is None:
            # Here, not at start-up (threading costs every process), and not at a
            # first call (two threads could race to make it).
            import threading

            self._local = threading.local()
        if target.mode == COUNT:
            return self._counting_wrapper(label)
        return self._tracing_wrapper(target, label)

    def _counting_wrapper(self, label: str) -> Callable[..., Any]:
        counts_owner = self

        def count(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            counts = counts_owner.counts
            counts[label] = counts.get(label, 0) + 1
            return wrapped(*args, **kwargs)

        return count

    def _tracing_wrapper(self, target: Target, label: str) -> Callable[..., Any]:
        def trace(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            local = self._thread_state()
            if local.get("busy"):
                # Called from inside the tracer itself (a target it uses): no record.
                return wrapped(*args, **kwargs)
            local["busy"] = True
            try:
                call_id = self._enter(target, label)
            except Exception as exc:
                self.sink.error("record call", exc)
                return wrapped(*args, **kwargs)
            finally:
                local["busy"] = False
            if call_id < 0:
                return self._refuse(target)
            start = _perf_counter()
            try:
                if target.child_role:
                    result = _with_child_role(target.child_role, wrapped, args, kwargs)
                else:
                    result = wrapped(*args, **kwargs)
            except BaseException as exc:
                self._leave(call_id, start, target, instance, None, exc)
                raise
            self._leave(call_id, start, target, instance, result, None)
            return result

        return trace

    def _enter(self, target: Target, label: str) -> int:
        """Write the call record; return its id, or -1 if the guard refuses it."""
        stack, caller = self.capture_stack()
        open_calls = self._thread_state().setdefault("calls", [])
        call_id = next(self._ids)
        fields: dict[str, Any] = {
            "target": label,
            "tag": target.tag,
            "call_id": call_id,
            "thread": thread_name(),
            "stack": stack,
            "caller": caller,
        }
        if open_calls:
            fields["parent_call"] = open_calls[-1]
        if target.env:
            fields["env"] = watched_env()
        if target.role:
            self.take_role(target.role)
        if self.guard and target.guard and self.sink.role in GUARDED_ROLES:
            fields["action"] = target.guard
            self.sink.emit("blocked", **fields)
            self.notice({"pid": _getpid(), "role": self.sink.role, "target": label, "caller": caller})
            return -1
        self.sink.emit("call", **fields)
        open_calls.append(call_id)
        return call_id

    def _leave(self, call_id: int, start: float, target: Target, instance: Any, result: Any,
               error: BaseException | None) -> None:
        """Write the return record; never raises."""
        local = self._thread_state()
        local["busy"] = True
        try:
            open_calls = self._thread_state().get("calls")
            if open_calls and open_calls[-1] == call_id:
                open_calls.pop()
            fields: dict[str, Any] = {"call_id": call_id, "duration_s": round(_perf_counter() - start, 6)}
            if error is not None:
                fields["error"] = f"{type(error).__name__}: {error}"[:500]
            else:
                for key, path in target.capture:
                    value = _resolve(path, instance, result)
                    if value is not None:
                        fields[key] = value
            self.sink.emit("return", **fields)
        except Exception as exc:
            self.sink.error("record return", exc)
        finally:
            local["busy"] = False

    def _refuse(self, target: Target) -> Any:
        """What a guarded call returns instead of starting a pool."""
        if target.guard == INLINE_POOL:
            if self._inline_pool is None:
                from .guard import InlinePool

                self._inline_pool = InlinePool()
            return self._inline_pool
        assert target.guard == SKIP
        return None

    # -- module events ----------------------------------------------------

    def notify(self, kind: str, target: Target, module: Any) -> None:
        """Record a target module's import, or the settings it holds."""
        if target.mode == IMPORT:
            stack, caller = self.capture_stack()
            self.sink.emit("import", module=target.module, stack=stack, caller=caller, env=watched_env())
            return
        settings = {}
        for key in CONFIG_KEYS:
            try:
                settings[key] = getattr(module, key)
            except Exception:
                continue
        torch = sys.modules.get("torch")
        self.sink.emit("config", settings=settings, torch_version=str(getattr(torch, "__version__", "")))


def _with_child_role(role: str, wrapped: Any, args: Any, kwargs: Any) -> Any:
    """Call wrapped with CHILD_ROLE_ENV exported, so interpreters it starts know their role.

    torch builds a pool process's environment from os.environ at start, so
    this is the only channel that reaches it. Restored right after.
    """
    previous = os.environ.get(CHILD_ROLE_ENV)
    os.environ[CHILD_ROLE_ENV] = role
    try:
        return wrapped(*args, **kwargs)
    finally:
        if previous is None:
            os.environ.pop(CHILD_ROLE_ENV, None)
        else:
            os.environ[CHILD_ROLE_ENV] = previous


def _resolve(path: str, instance: Any, result: Any) -> Any:
    """Follow "self.a.b" or "result.a" with getattr only; dicts become key lists."""
    root, *attrs = path.split(".")
    value = instance if root == "self" else result
    for attr in attrs:
        value = getattr(value, attr, None)
        if value is None:
            return None
    if isinstance(value, dict):
        return sorted(k for k in value if isinstance(k, int))
    return value if isinstance(value, (int, float, str, bool)) else None
