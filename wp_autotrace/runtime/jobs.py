"""A pool worker's jobs: a `job` record as each job starts and as it ends, written by the worker itself.

concurrent.futures' worker loop (`_process_worker`) takes one job after another from its call queue and runs it;
no function of its own marks a job's start or end. Its wrapper (recorder.py, mode targets.JOBS) hands the loop
a stand-in for the queue: each ``get`` first ends the job taken before (the loop sent its result back, or its
exception, and asks for the next one), then takes the next and writes its start, before the loop runs it. The
wrapper ends a job still open when the loop returns (a worker that stops after max_tasks jobs). A worker killed
inside a job writes no end: its start without an end is the evidence that it held the job.

Every process pool's workers run this loop: torch's fork/spawn pool's workers (the main's own children) and
the workers a SubprocPool's sidecar forks, whose job is ``SubprocMain.do_job`` over a pickled job: its
function and first name argument (a Triton kernel's name) are read from the pickle's first bytes, without
unpickling (short strings only: a bounded scan).

A user's own ProcessPoolExecutor runs the same loop, but its jobs are not recorded: only a loop started with
torch's compile initializer (``_async_compile_initializer``, through functools.partial) is watched, or one run by a
process whose role a torch pool's starting call handed it (the target row's loop_roles): AutotuneProcessPool's
one spawned worker, whose plain executor has no initializer, is the autotune-worker its warm_up/submit named.
A program's own pool may run millions of jobs (two records each, unbounded in the log) that are not the tracer's
business, and its arguments may hold tokens. Of a torch job nothing is asked but functools.partial's own fields and a
function's name.

Loaded by a process that runs the loop (a worker); in one that makes a pool, as the pool starts a worker (it keeps
the pool in compile_pools, for a wait's pending jobs where torch keeps no pool set), and where a traced wait or
exit join finds a torch compile pool's jobs pending (runtime/reads.py names them with job_names, as a worker
would). Never raises into the worker: a fault is reported once and the job runs untouched.
"""

from __future__ import annotations

from _weakrefset import WeakSet  # loaded already: threading imports it, and concurrent.futures threading
from functools import partial as _partial  # loaded already: concurrent.futures imports it
from types import BuiltinFunctionType, FunctionType, MethodType

from ..common.vocab import JOB, WORKER_SPAWNED

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

    from .sink import Sink

# What a job's record keeps of names: a function's "module:qualname", a first name argument.
MAX_NAME = 200
MAX_ARG = 120
# How far a job's arguments are looked into for a first name argument (a partial's own, one level down).
ARG_DEPTH = 2
ARGS_LOOKED = 8
# A SubprocPool job arrives pickled (SubprocMain.do_job's data): the bytes scanned for its names.
PICKLE_SCAN = 2048
_SHORT_UNICODE = 0x8C  # pickle's SHORT_BINUNICODE: one length byte, then the UTF-8 text
_MEMOIZE = 0x94
_STACK_GLOBAL = 0x93
_PARTIAL = ("functools", "partial")
# Callables named by their own __module__/__qualname__ (any other is named by its class: nothing of it is asked).
_NAMED_KINDS = (FunctionType, BuiltinFunctionType, MethodType, type)
# Only torch's own jobs have an argument written (a kernel's name); a user's job's arguments are never written.
_ARG_OWNERS = ("torch.", "torch:")
# How many functools.partial layers a job's function is unwrapped through (a partial subclass nests).
MAX_PARTIALS = 8
# torch's compile initializer ("module:qualname" ends so): the workers of torch's compile pools run it first.
_INITIALIZER = "_async_compile_initializer"
# torch 2.1's: an inner function of AsyncCompile.process_pool in its codecache module (docs/torch-coverage.md), no
# target of its own.
_INITIALIZER_21 = "torch._inductor.codecache:AsyncCompile.process_pool.<locals>.init"
# The sidecar's per-job function: its real job is the pickle it is given.
_DO_JOB = "SubprocMain.do_job"
# Executor.map's per-chunk function: its real job is the function it is given first.
_CHUNK = "concurrent.futures.process:_process_chunk"
# torch 2.14's AutotuneProcessPool.submit hands its worker every job (warm_up's too) through this: it sets the
# worker's environment from its second argument, then calls its first with the rest: that call is the real job.
_ENV_RUN = "torch._inductor.autotune_process:_run_with_subprocess_env"


def watch_queue(sink: Sink, args: tuple[Any, ...], roles: tuple[str, ...] = ()) -> tuple[JobQueue | None,
                                                                                        tuple[Any, ...]]:
    """The worker loop's arguments with its call queue (args[0]) watched, and the stand-in (None: left alone, as
    for a pool whose initializer (args[2]) is not torch's compile initializer, in a process whose role is not one
    of `roles`: the target row's loop_roles, a torch pool's worker its starting call named, which keeps that role:
    the compile-worker role the wrapper then takes leaves a pool's fixed role as it is)."""
    try:
        if len(args) > 2 and (roles and sink.role in roles or compile_pool_initializer(args[2])) \
                and hasattr(args[0], "get"):
            queue = JobQueue(args[0], sink)
            return queue, (queue, *args[1:])
    except Exception as exc:
        sink.error("job loop", exc)
    return None, args


def compile_pool_initializer(initializer: Any) -> bool:
    """Whether a worker loop's initializer is torch's compile initializer (torch's every compile pool starts its
    workers with it, in whichever module a release keeps it; 2.1's is an inner function): only partial's own
    fields and the function's names are read."""
    for _ in range(MAX_PARTIALS):
        if not isinstance(initializer, _partial):
            break
        initializer = initializer.func
    name = _name_of(initializer)
    if name == _INITIALIZER_21:
        return True
    return name is not None and name.startswith(_ARG_OWNERS) and name.endswith(_INITIALIZER)


# The torch compile pools (executors) this process started a worker for (note_spawned), for a wait's pending jobs
# where torch keeps no pool set of its own (2.1-2.2: runtime/reads.py reads this one then). Weak: the tracer never
# keeps alive an executor the program dropped (its finalizers run when they would untraced).
compile_pools: WeakSet[Any] = WeakSet()


def note_spawned(sink: Sink, executor: Any) -> None:
    """After an executor started a worker (_spawn_process put it last in its `_processes`): where the executor is
    a torch compile pool (its initializer), write that worker's pid (`worker_spawned`). Only the stdlib's executor
    or torch's subclass is read (no attribute of a program's own class asked). Never raises."""
    try:
        cls = type(executor)
        base = next((k for k in cls.__mro__ if k.__name__ == "ProcessPoolExecutor"
                     and k.__module__ == "concurrent.futures.process"), None)
        if base is None or not (cls is base or cls.__module__.startswith(_ARG_OWNERS)):
            return
        if not compile_pool_initializer(executor._initializer):
            return
        pids = list(executor._processes)  # one C-level copy: insertion order, the new worker last
        if pids and isinstance(pids[-1], int):
            sink.emit(WORKER_SPAWNED, worker_pid=pids[-1])  # a compile worker: the event says it
        compile_pools.add(executor)  # last: a class without weak references still has its worker told
    except Exception as exc:
        sink.error("worker spawned", exc)


def drop_get_frame(exc: BaseException) -> None:
    """Take JobQueue.get's frame out of exc's traceback (a Ctrl-C inside the queue's wait, which multiprocessing
    prints): the worker's traceback reads as untraced. Never raises."""
    try:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            if tb.tb_next.tb_frame.f_code is _GET_CODE:
                tb.tb_next = tb.tb_next.tb_next
            tb = tb.tb_next
    except Exception:
        pass


class JobQueue:
    """The worker loop's call queue, whose get() writes each job's end and start (module docstring).

    Only get() is the loop's; any other attribute is the queue's own."""

    __slots__ = ("_queue", "_sink", "_open", "_failed")

    def __init__(self, queue: Any, sink: Sink) -> None:
        self._queue = queue
        self._sink = sink
        self._open: Any = None  # the work id of the job taken last and not yet ended
        self._failed = False

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.end()
        item = self._queue.get(*args, **kwargs)
        if item is not None:
            try:
                work_id = getattr(item, "work_id", None)
                fn, arg = job_names(getattr(item, "fn", None), getattr(item, "args", ()))
                fields = {k: v for k, v in (("work_id", work_id), ("fn", fn), ("arg", arg)) if v is not None}
                self._sink.emit(JOB, state="start", **fields)
                self._open = work_id
            except Exception as exc:
                self._fault(exc)
        return item

    def end(self) -> None:
        """Write the end of the job taken last, if it is open."""
        if self._open is None:
            return
        work_id, self._open = self._open, None
        try:
            self._sink.emit(JOB, state="end", work_id=work_id)  # an open job has a work id (get())
        except Exception as exc:
            self._fault(exc)

    def _fault(self, exc: BaseException) -> None:
        if not self._failed:
            self._failed = True
            self._sink.error("job record", exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


_GET_CODE = JobQueue.get.__code__


def job_names(fn: Any, args: Any) -> tuple[str | None, str | None]:
    """A job's function ("module:qualname", through functools.partial) and, for torch's own functions only, its
    first name argument (a str that is an identifier: a kernel's name), or None for either; a SubprocPool job's
    from its pickle; an Executor.map chunk's, or a job torch 2.14's AutotuneProcessPool wraps (_ENV_RUN), the
    function it carries. Nothing of a job's objects is asked but a partial's fields and a function's name."""
    for _ in range(MAX_PARTIALS):
        if not isinstance(fn, _partial):
            break
        args = (*fn.args, *(args or ()))  # functools.partial: the function and its own arguments
        fn = fn.func
    name = _name_of(fn)
    if name == _CHUNK and args and callable(args[0]):
        return _name_of(args[0]) or name, None
    if name == _ENV_RUN and args and callable(args[0]):
        args = tuple(args)
        inner = _name_of(args[0])
        if inner is not None:
            return inner, _first_name(args[2:], ARG_DEPTH) if inner.startswith(_ARG_OWNERS) else None
    if name is not None and name.endswith(_DO_JOB):
        data = next((a for a in args or () if isinstance(a, (bytes, bytearray))), None)
        if data is not None:
            inner, arg = pickled_names(bytes(data[:PICKLE_SCAN]))
            fn_name = inner or name
            return fn_name, arg if fn_name.startswith(_ARG_OWNERS) else None
    if name is None or not name.startswith(_ARG_OWNERS):
        return name, None
    return name, _first_name(args, ARG_DEPTH)


def _name_of(fn: Any) -> str | None:
    owner = fn if isinstance(fn, _NAMED_KINDS) else type(fn)
    module, qualname = getattr(owner, "__module__", None), getattr(owner, "__qualname__", None)
    if not isinstance(qualname, str):
        return None
    return f"{module}:{qualname}"[:MAX_NAME] if isinstance(module, str) else qualname[:MAX_NAME]


def _first_name(values: Any, depth: int) -> str | None:
    """The first identifier str among values, looking into a partial's arguments down to depth."""
    try:
        for value in list(values)[:ARGS_LOOKED]:
            if isinstance(value, str):
                if value.isidentifier():
                    return value[:MAX_ARG]
            elif depth > 0 and isinstance(value, _partial):
                found = _first_name(value.args, depth - 1)
                if found is not None:
                    return found
    except Exception:
        return None
    return None


def pickled_names(data: bytes) -> tuple[str | None, str | None]:
    """From a pickle's first bytes: its first global that is not functools.partial ("module:name"), and the
    first identifier string after it that is not part of a global (an argument: a kernel's name). Short
    strings only (SHORT_BINUNICODE), found by a scan, never unpickled: (None, None) where none is found."""
    strings: list[tuple[str, bool]] = []  # (text, whether a STACK_GLOBAL follows it: a global's name)
    i = data.find(bytes((_SHORT_UNICODE,)))
    while 0 <= i < len(data) - 1 and len(strings) < 64:
        end = i + 2 + data[i + 1]
        try:
            text = data[i + 2:end].decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if end <= len(data) and text and all(part.isidentifier() for part in text.split(".")):
            after = end + (1 if end < len(data) and data[end] == _MEMOIZE else 0)
            strings.append((text, after < len(data) and data[after] == _STACK_GLOBAL))
            i = data.find(bytes((_SHORT_UNICODE,)), end)
        else:
            i = data.find(bytes((_SHORT_UNICODE,)), i + 1)
    fn = arg = None
    for k, (text, is_global) in enumerate(strings):
        if is_global and k > 0:
            module = strings[k - 1][0]
            if fn is None and (module, text) != _PARTIAL:
                fn = f"{module}:{text}"[:MAX_NAME]
        elif fn is not None and not is_global and "." not in text and not (k + 1 < len(strings)
                                                                            and strings[k + 1][1]):
            arg = text[:MAX_ARG]
            break
    return fn, arg
