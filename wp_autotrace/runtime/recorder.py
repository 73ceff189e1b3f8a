"""The wrappers put around each target: record, count, or (guard) refuse.

Each wrapper is a plain function dressed as the target (name, module,
signature via __wrapped__), or an ObjectWrapper for a callable object.
Recording is contained: a fault in the tracer is reported once and the
wrapped call goes ahead untouched; the wrapped function's own exceptions pass
through unchanged, and from 3.11 without the wrapper's frame.
"""

from __future__ import annotations

import itertools
import os
import sys
import time

from ..common.env import pool_env
from ..common.targets import (
    CONFIG_KEYS,
    COUNT,
    IMPORT,
    INLINE_POOL,
    JOBS,
    SKIP,
    SPAWN,
    Target,
)
from ..common.vocab import BLOCKED, CALL, COMPILE_WORKER, CONFIG, GUARDED_ROLES, MAIN, RETURN, ROLE
from .catch import watch_role
from .jsonline import c_encoder
from .plain import (
    FROM_CALL,
    NS_HALF_US,
    TO_CALL,
    UNRECORDED,
    UP,
    call_fields,
    down,
    plain_call,
    raised,
    return_fields,
)
from .reads import (
    NS_PER_US,
    US_PER_S,
    config_knobs,
    error_text,
    micros_json,
    read_rss,
    resolve,
    thread_name,
)
from .sink import Sink
from .stacks import Stacks
from .target_patches import clear_child_role, set_child_role
from .unseen import (
    HEADROOM,
    MOVE_REFUSED,
    STACK_COST,
    adjust_limit,
    after_fork,
    drop_own_frame,
    kept_setting,
    moving_codes,
    refused,
)

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable

encode_json = c_encoder()  # json's C encoder: the recorder's records are many
# Bound once: the tracer must not call itself through a traced stdlib function.
_perf_counter_ns = time.perf_counter_ns
_time = time.time  # the log's clock (sink.py): a counted call's first/last times are comparable to ts
_getframe = sys._getframe
_getpid = os.getpid

# Thread names whose JSON is kept (names are few; a bound for hosts that make many).
MAX_CACHED_THREADS = 256

# Roles that a later call may not overwrite (a sidecar also runs the worker
# initializer on itself).
_FIXED_ROLES = (GUARDED_ROLES - {COMPILE_WORKER}) | {MAIN}


class Probes:
    """Per-process recording state shared by all wrappers; the caller's stack is its Stacks' job (stacks)."""

    def __init__(self, sink: Sink, stack_limit: int, guard: bool, notice: Callable[[dict[str, Any]], None]) -> None:
        self.sink = sink
        self.stacks = Stacks(stack_limit)
        self._stack_of = self.stacks.stack  # bound once: _enter's lookup stays one attribute deep
        self.guard = guard
        self.notice = notice
        self.counts: dict[str, int] = {}
        # label -> [first, last] call time of each counted target: a pool's first and last job
        # (process_exit's `count_times`), one clock read and one list store per call.
        self.count_times: dict[str, list[float]] = {}
        self.count_callers: dict[str, tuple[Any, int] | None] = {}  # label -> last call's user (code, line)
        self._ids = itertools.count(1)
        self._local: Any = None  # a threading.local, made with the first wrapper
        self._prefixes: dict[str, str] = {}  # label -> '"target":..,"tag":..,"call_id":'
        self._thread_json: dict[str, str] = {}  # thread name -> its JSON string
        self._inline_pool: Any = None

    def reset_after_fork(self) -> None:
        """Forget the parent's counters and open calls in a forked child, and give it its host's recursion limit
        (unseen.after_fork: the forking thread's calls in flight had raised it; the limit's moves hold no lock
        that another thread of the parent could have held at the fork: unseen.mover)."""
        after_fork()
        self.counts = {}
        self.count_times = {}
        self.count_callers = {}
        self._ids = itertools.count(1)
        if self._local is not None:
            import threading

            self._local = threading.local()

    def _thread_state(self) -> dict[str, Any]:
        """Per-thread open calls and re-entrancy flag (made with the first wrapper)."""
        return self._local.__dict__  # type: ignore[no-any-return]

    # -- roles ------------------------------------------------------------

    def take_role(self, role: str) -> None:
        """Adopt a role announced by a call (the worker initializer)."""
        if self.sink.role != role and self.sink.role not in _FIXED_ROLES:
            self.sink.role = role
            self.sink.emit(ROLE, role=role)
            watch_role(self.sink)

    # -- wrappers ---------------------------------------------------------

    def make_wrapper(self, target: Target, label: str) -> Callable[[Any, bool], Any]:
        """Return wrap(raw, method): a plain function that records, then calls raw.

        method says whether raw's first argument is the instance (or class)
        that capture paths ("self.x") read.
        """
        if self._local is None:
            # Here, not at start-up (threading costs every process), and not at a
            # first call (two threads could race to make it).
            import threading

            self._local = threading.local()
        if target.mode == JOBS:
            return lambda raw, method: _dress(self._job_loop(raw, target.loop_roles), raw)
        if target.mode == SPAWN:
            return lambda raw, method: _dress(_spawning(self.sink, raw), raw)
        if target.mode == COUNT:
            if target.last_caller:
                return lambda raw, method: _dress(self._counting_call_site(label, raw), raw)
            return lambda raw, method: _dress(self._counting_call(label, raw), raw)
        return lambda raw, method: _dress(self._tracing_call(target, label, raw, method), raw)

    def _job_loop(self, raw: Any, roles: tuple[str, ...]) -> Callable[..., Any]:
        """A worker loop's wrapper: jobs recorded by runtime/jobs.py (loaded where the loop runs; roles: loop_roles)."""
        sink, owner = self.sink, self

        def call(*args: Any, **kwargs: Any) -> Any:
            from .jobs import drop_get_frame, watch_queue

            queue, args = watch_queue(sink, args, roles)
            if queue is not None:  # a torch compile pool's worker: so it says before its initializer runs (2.1's
                owner.take_role(COMPILE_WORKER)  # is an inner function, no target, and says nothing)
            try:
                return raw(*args, **kwargs)
            except BaseException as exc:  # a Ctrl-C in the queue's wait: printed by multiprocessing as untraced
                drop_get_frame(exc)
                drop_own_frame(exc)
                raise
            finally:
                if queue is not None:
                    queue.end()  # a loop that returned after its last job (max_tasks) ends it

        return call

    def _counting_call(self, label: str, raw: Any) -> Callable[..., Any]:
        counts_owner = self

        def call(*args: Any, **kwargs: Any) -> Any:
            counts = counts_owner.counts
            counts[label] = counts.get(label, 0) + 1
            now = _time()
            times = counts_owner.count_times.get(label)
            if times is None:
                counts_owner.count_times[label] = [now, now]
            else:
                times[1] = now
            return raw(*args, **kwargs)

        return call

    def _counting_call_site(self, label: str, raw: Any) -> Callable[..., Any]:
        """_counting_call that also keeps the last call's innermost user frame (code, line): a walk of
        cached frame kinds, no encoding; process_exit attributes it once (count_callers)."""
        counted, call_site, owner = self._counting_call(label, raw), self.stacks.call_site, self

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                owner.count_callers[label] = call_site()  # looked up per call: a fork replaces the dict
            except Exception:  # never the host's problem
                pass
            return counted(*args, **kwargs)

        return call

    def _tracing_call(self, target: Target, label: str, raw: Any, method: bool) -> Callable[..., Any]:
        """The wrapper of one traced target: its constant parts (the encoded prefix, whether its records
        are plain) fixed here once, so a call runs one record function before and one after the host's."""
        if not (target.capture_call or target.mem or target.role or (self.guard and target.guard)):
            return plain_call(self, target, label, raw, method)  # the common case's one-frame wrapper
        enter, leave, child_role, sink, probes = self._enter, self._leave, target.child_role, self.sink, self

        def call(*args: Any, **kwargs: Any) -> Any:
            # The limit's moves as plain's wrapper makes them (plain.UP ... DOWN), each a C call chain: at the
            # stack's limit this frame may call no Python function before its move, nor after the host raised
            # there (a call would raise RecursionError again, over the host's, and leave the limit moved)
            try:
                next(UP)  # the tracer's own work never counts against the host's limit
            except OverflowError:  # a limit within HEADROOM of a C int's largest: it stays HEADROOM below ours
                refused.append(-HEADROOM)
            try:
                local = probes._local.__dict__
                if local.get("busy"):
                    call_id = UNRECORDED  # called from inside the tracer itself (a target it uses)
                else:
                    local["busy"] = True
                    try:
                        call_id = enter(target, label, args[0] if method and args else None, local)
                    except Exception as exc:
                        sink.error("record call", exc)
                        call_id = UNRECORDED
                    finally:
                        local["busy"] = False
            finally:
                try:
                    _, set_at, alone = next(TO_CALL)  # a host that sets the limit in its call: kept after
                except MOVE_REFUSED:  # refused (the stack too deep now): made good by a later adjust_limit
                    refused.append(HEADROOM - STACK_COST)
                    set_at = alone = 0
            if call_id == _REFUSED:
                adjust_limit(-STACK_COST, -1)
                return self._refuse(target)
            start = _perf_counter_ns()
            if child_role:
                set_child_role(child_role)
            try:
                try:
                    result = raw(*args, **kwargs)
                finally:  # returned or raised, C calls first
                    try:
                        if (back := next(FROM_CALL))[0] != set_at:  # rare: the host set it, or another thread's
                            kept_setting(alone, back[1])
                    except OverflowError:  # the host set a limit near a C int's largest in its call
                        refused.append(STACK_COST - HEADROOM)
            except BaseException as exc:
                raised(exc, call_id, start, target, child_role, leave)
                raise  # bare: re-raises with the traceback as drop_own_frame left it
            if child_role:
                clear_child_role()
            if call_id > 0:
                leave(call_id, start, target, args[0] if method and args else None, result, None)
            down()
            return result

        moving_codes.add(call.__code__)
        return call

    def _enter(self, target: Target, label: str, instance: Any, local: dict[str, Any]) -> int:
        """Write the call record; return its id, or _REFUSED if the guard refuses it (local: _thread_state()).
        A target without capture, memory or role takes _plain_enter's copy of this instead."""
        stack, caller, stack_json = self._stack_of()
        at_call = {key: value for key, path in target.capture_call
                   if (value := resolve(path, instance, None)) is not None} if target.capture_call else None
        open_calls = local.get("calls")
        if open_calls is None:
            open_calls = local["calls"] = []
        call_id = next(self._ids)
        thread = thread_name()
        parent = open_calls[-1] if open_calls else None
        env = pool_env() if target.env else None
        rss = read_rss() if target.mem else None
        if target.role:
            self.take_role(target.role)

        # The fields of an oversized record (emit_encoded) or a blocked one: no closure (cells slow every local).
        parts = (label, target.tag, call_id, thread, stack, caller, parent, env, at_call, rss)
        if self.guard and target.guard and self.sink.role in GUARDED_ROLES:
            self.sink.emit(BLOCKED, **call_fields(*parts), action=target.guard)
            self.notice({"pid": _getpid(), "role": self.sink.role, "target": label, "caller": caller})
            return _REFUSED
        prefix = self._prefixes.get(label) or self._prefix(target, label)
        body = f'{prefix}{call_id},"thread":{self._thread_json.get(thread) or self._encode_thread(thread)},{stack_json}'
        if parent is not None:
            body += f',"parent_call":{encode_json(parent)}'
        if env is not None:
            body += f',"env":{encode_json(env)}'
        for key, value in (at_call or {}).items():
            body += f',{encode_json(key)}:{encode_json(value)}'
        if rss is not None:
            body += f',"rss":{rss}'
        self.sink.emit_encoded(CALL, body, call_fields, *parts)
        open_calls.append(call_id)
        return call_id

    def _prefix(self, target: Target, label: str) -> str:
        """A target's constant call-record members, encoded once."""
        prefix = f'"target":{encode_json(label)},"tag":{encode_json(target.tag)},"call_id":'
        self._prefixes[label] = prefix
        return prefix

    def _encode_thread(self, name: str) -> str:
        text = str(encode_json(name))
        if len(self._thread_json) >= MAX_CACHED_THREADS:
            self._thread_json.clear()
        self._thread_json[name] = text
        return text

    def _leave(self, call_id: int, start: int, target: Target, instance: Any, result: Any,
               error: BaseException | None) -> None:
        """Write the return record; never raises."""
        local = self._local.__dict__
        local["busy"] = True
        try:
            open_calls = local.get("calls")
            if open_calls and open_calls[-1] == call_id:
                open_calls.pop()
            # To the microsecond, written from the integer (reads.micros_json: the float's repr, no dtoa).
            us = (_perf_counter_ns() - start + NS_HALF_US) // NS_PER_US
            if error is None and not target.capture and not target.mem:  # the common case: two numbers
                self.sink._write("return", f'"call_id":{call_id},"duration_s":{micros_json(us)}', return_fields,
                                 (call_id, us))
                return
            fields: dict[str, Any] = {"call_id": call_id, "duration_s": us / US_PER_S}
            if error is not None:
                fields["error"] = error_text(error)
            else:
                for key, path in target.capture:
                    value = resolve(path, instance, result)
                    if value is not None:
                        fields[key] = value
            rss = read_rss() if target.mem else None
            if rss is not None:
                fields["rss"] = rss
            self.sink.emit(RETURN, **fields)
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

    def notify(self, kind: str, target: Target, module: Any, env_changed: list[dict[str, Any]] | None = None) -> None:
        """Record a target module's import, or the settings it holds (with env_changed: common/env.env_watch's
        changes of the variables it reads, seen before it loaded)."""
        if target.mode == IMPORT:
            stack, caller = self.stacks.capture_stack()
            rss = read_rss() if target.mem else None
            mem = {"rss": rss} if rss is not None else {}
            self.sink.emit(IMPORT, module=target.module, stack=stack, caller=caller, env=pool_env(), **mem)
            return
        settings = {}
        for key in CONFIG_KEYS:
            try:
                settings[key] = getattr(module, key)
            except Exception:
                continue
        torch = sys.modules.get("torch")
        extra = {"env_changed": env_changed} if env_changed else {}
        self.sink.emit(CONFIG, settings=settings, torch_version=str(getattr(torch, "__version__", "")),
                       knobs=config_knobs(module), **extra)


# -- what makes a wrapper indistinguishable -----------------------------------

# A refused call's answer besides a call id (ids count from 1; plain.UNRECORDED: none written).
_REFUSED = -1

# The executors whose worker starts are looked at (runtime/jobs.py note_spawned): the stdlib's, torch's subclass.
_SPAWN_OWNERS = ("concurrent.futures.", "torch.")


def _spawning(sink: Sink, raw: Any) -> Callable[..., Any]:
    """An executor's worker start's wrapper: the worker's pid written where the executor is a torch compile pool
    (runtime/jobs.py note_spawned, loaded only for an executor with an initializer)."""

    def call(executor: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = raw(executor, *args, **kwargs)
        except BaseException as exc:  # a worker that could not start: its traceback reads as untraced
            drop_own_frame(exc)
            raise
        # the stdlib's executor or torch's (a class attribute: no instance hook of a program's class runs)
        if type(executor).__module__.startswith(_SPAWN_OWNERS) and executor._initializer is not None:
            from .jobs import note_spawned

            note_spawned(sink, executor)
        return result

    return call


# Attributes a wrapper copies from what it wraps (functools.WRAPPER_ASSIGNMENTS,
# plus defaults, which introspection reads, and an lru_cache's own methods).
_COPIED = ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__", "__defaults__",
           "__kwdefaults__", "cache_clear", "cache_info", "cache_parameters")
def is_wrapper(obj: Any) -> bool:
    """Whether obj is one of our wrappers."""
    return getattr(obj, "__code__", None) in _wrapper_codes or type(obj) is ObjectWrapper


# The code objects of our wrapper functions: how a wrapper is recognised
# without an attribute of its own.
_wrapper_codes: set[Any] = set()


def _dress(fn: Any, raw: Any) -> Any:
    """Make the wrapper function fn look like raw (name, docs, signature via __wrapped__), or
    an ObjectWrapper where raw is not a function (a partial, a callable instance)."""
    _wrapper_codes.add(fn.__code__)
    if not (isinstance(raw, _NAMED_CALLABLES) or type(raw).__name__ == "_lru_cache_wrapper"):
        return ObjectWrapper(raw, fn)
    for name in _COPIED:
        try:
            value = getattr(raw, name)
        except AttributeError:
            continue
        try:
            setattr(fn, name, value)
        except (AttributeError, TypeError):
            pass
    fn.__dict__.update(getattr(raw, "__dict__", {}))
    fn.__wrapped__ = raw
    return fn


# Callables pickled by name (functions, builtins, lru_cache): their wrapper is a function.
_NAMED_CALLABLES = (type(_dress), type(len))


class ObjectWrapper:
    """A wrapper for a callable object that is not a function: it reduces,
    copies, prints and answers isinstance as the object itself.

    A copy is the object's own copy (untraced), as pickling gives the object's
    own reduction: what a copy or an unpickled object does is what it would do.
    """

    __slots__ = ("__wrapped__", "_wp_call", "__weakref__")

    def __init__(self, raw: Any, call: Callable[..., Any]) -> None:
        self.__wrapped__ = raw
        self._wp_call = call

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:  # a keyword named "self" is the callable's
        try:
            return self._wp_call(*args, **kwargs)
        except BaseException as exc:
            drop_own_frame(exc)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__wrapped__, name)

    @property  # type: ignore[misc]
    def __class__(self) -> Any:  # noqa: D105
        return type(self.__wrapped__)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__wrapped__.__reduce_ex__(protocol)

    def __repr__(self) -> str:
        return repr(self.__wrapped__)

    def __copy__(self) -> Any:
        import copy

        return copy.copy(self.__wrapped__)

    def __deepcopy__(self, memo: Any) -> Any:
        import copy

        return copy.deepcopy(self.__wrapped__, memo)
