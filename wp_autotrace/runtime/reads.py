"""What a record reads of the process and of the call as it is written: the thread's name, the
process's resident memory, attributes captured from the call's instance or result, a config module's
pool settings. Each read is cheap and never raises into the host (recorder.py writes the records).
"""

from __future__ import annotations

import _thread
import os
import sys

from ..common.targets import KNOB_MARKS

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

# Bound once: the tracer must not call itself through a traced stdlib function.
_get_ident = _thread.get_ident

US_PER_S = 1_000_000
NS_PER_US = 1000
# Below 1e-4 s a float's repr is in exponent form (3e-06, 1.2e-05).
_EXPONENT_BELOW_US = 100
# Below 1e9 s a microsecond count has at most 15 significant digits: its decimal is then exactly the repr
# of the float it names (no shorter string reads back as that float, and no other float is nearer).
_POSITIONAL_BELOW_US = 10**15

# A traced call's error (`Type: message`) is kept whole up to ERROR_HEAD + ERROR_TAIL characters; a longer one as its
# first ERROR_HEAD and its last ERROR_TAIL with ERROR_CUT between. A job's error from a pool (SubprocException) opens
# with the pool's words and the kernel's name and ends with the job's own exception line: a cut after the head alone
# lost that line, the one that says what failed. Here, not in common/vocab.py: vocab loads at every traced start,
# this module with the recorder (bench/instructions.py counted vocab's three more names at every start).
ERROR_HEAD = 240
ERROR_TAIL = 560
ERROR_CUT = " [...] "


def error_text(error: BaseException) -> str:
    """A return record's `error`: `Type: message`, its head and its tail where longer than ERROR_HEAD + ERROR_TAIL
    (the head names the failure's kind, the tail holds the job's own exception line)."""
    text = f"{type(error).__name__}: {error}"
    if len(text) <= ERROR_HEAD + ERROR_TAIL:
        return text
    return text[:ERROR_HEAD] + ERROR_CUT + text[-ERROR_TAIL:]


def micros_json(us: int) -> str:
    """repr(us / 1e6) for us >= 0, written from the integer (tests/test_hooks.py checks it against repr)."""
    if us >= _POSITIONAL_BELOW_US:
        return repr(us / US_PER_S)
    if us >= _EXPONENT_BELOW_US:
        whole, frac = divmod(us, US_PER_S)
        return f"{whole}.{f'{frac:06d}'.rstrip('0') or '0'}"
    if us < 10:
        return f"{us}e-06" if us else "0.0"
    tens, ones = divmod(us, 10)
    return f"{tens}.{ones}e-05" if ones else f"{tens}e-05"


# micros_json's answers kept for the durations below this (most traced calls return within 10 ms): a dict
# lookup instead of a Python call that formats (a tenth of a plain call's cost); at most this many kept.
MICROS_KEPT_BELOW = 10_000
micros_kept: dict[int, str] = {}


def micros_json_kept(us: int) -> str:
    """micros_json(us), kept in micros_kept where us is below MICROS_KEPT_BELOW (read it there first)."""
    text = micros_json(us)
    if us < MICROS_KEPT_BELOW:
        micros_kept[us] = text
    return text


def config_knobs(module: Any) -> list[str]:
    """The pool settings module has: torch's ConfigModule keeps them in `_config` (dir() misses them)."""
    try:
        names = getattr(module, "_config", None)
        names = names if isinstance(names, dict) else vars(module)
        return sorted(n for n in names if isinstance(n, str) and not n.startswith("_")
                      and any(mark in n for mark in KNOB_MARKS))[:20]
    except Exception:
        return []


def thread_name() -> str:
    """The calling thread's name, without creating a _DummyThread for a foreign thread. A call as the
    interpreter finalizes (a __del__) may come after threading has left sys.modules: the ident's name then."""
    ident = _get_ident()
    threading = sys.modules.get("threading")
    thread = threading._active.get(ident) if threading is not None else None
    return str(thread.name) if thread is not None else f"Thread-{ident}"


def thread_name_kept(local: dict[str, Any]) -> str:
    """thread_name(), keeping the calling thread's Thread object in local (its per-thread dict, as
    local["thread"]) once threading knows it, so the next call reads only its name (which may change), as
    Thread.name's property reads it (_name, always a str: the property's setter stores str(name)) without
    the property's Python call; a thread whose class replaces that property is not kept."""
    ident = _get_ident()
    threading = sys.modules.get("threading")  # gone from sys.modules late in finalization, as above
    thread = threading._active.get(ident) if threading is not None else None
    if threading is None or thread is None:
        return f"Thread-{ident}"
    if type(thread).name is threading.Thread.name:  # Thread's own property: the wrapper reads its _name
        local["thread"] = thread
    return str(thread.name)


_page_size: list[int] = []  # os.sysconf's, read at the first read_rss


def _read_self(name: str, size: int) -> bytes:
    """/proc/self/NAME in one short read (an OSError where it cannot be read)."""
    fd = os.open(f"/proc/self/{name}", os.O_RDONLY)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def read_rss() -> int | None:
    """This process's resident memory in bytes, from /proc/self/statm (one short read, ~10 us); None where
    there is no such file (macOS) or it cannot be read."""
    try:
        data = _read_self("statm", 256)
        if not _page_size:
            _page_size.append(os.sysconf("SC_PAGE_SIZE"))
        return int(data.split()[1]) * _page_size[0]
    except (OSError, ValueError, IndexError):
        return None


def read_threads() -> int | None:
    """This process's threads, native ones included (an OpenMP or a C++ library's), from /proc/self/stat field
    20; None where it cannot be read. A fork copies only the forking thread: a lock another held is never
    released in the child."""
    try:
        data = _read_self("stat", 1024)
        return int(data[data.rindex(b")") + 2:].split()[17])  # after the name: field 3 is the first
    except (OSError, ValueError, IndexError):
        return None


# Where torch keeps its live compile pools (`_pool_set`): async_compile from 2.4, codecache in 2.3; 2.1-2.2 keep
# none, so there the compile executors this process started workers for are read instead (runtime/jobs.py's
# compile_pools; none such: pool_jobs None, unknown). Each pool's jobs not yet answered: a SubprocPool's
# `pending_futures`, a ProcessPoolExecutor's `_pending_work_items` (both dicts, a job removed once its result is in).
_POOL_SET_HOMES = ("torch._inductor.async_compile", "torch._inductor.codecache")
_OWN_POOLS_HOME = __name__.rpartition(".")[0] + ".jobs"
_PENDING_ATTRS = ("pending_futures", "_pending_work_items")


def _pools_pending() -> list[tuple[Any, dict[Any, Any]]] | None:
    """Each live compile pool of this process (torch's `_pool_set`, else the tracer's compile_pools) with its
    pending jobs (the dict); None where neither is kept (not imported: nothing is imported here) or a pool's
    pending jobs cannot be read.
    getattr and len only: the sidecar's reader thread may change a dict meanwhile (a len is atomic; a set changed
    while copied gives None)."""
    try:
        pools = None
        for home in _POOL_SET_HOMES:
            pools = getattr(sys.modules.get(home), "_pool_set", None)
            if pools is not None:
                break
        if pools is None:  # torch keeps no set (2.1-2.2): the tracer's own, where a worker start loaded it
            pools = getattr(sys.modules.get(_OWN_POOLS_HOME), "compile_pools", None)
        if pools is None:
            return None
        out = []
        for pool in list(pools):
            pending = next((d for d in (getattr(pool, a, None) for a in _PENDING_ATTRS) if d is not None), None)
            if not isinstance(pending, dict):
                return None
            out.append((pool, pending))
        return out
    except Exception:
        return None


def read_pool_jobs() -> int | None:
    """The jobs pending in this process's live compile pools, summed (None: _pools_pending's unknown). A wait
    begun with 0 pending waits on work in the process (CPU C++ compiles), not on any pool."""
    pools = _pools_pending()
    return None if pools is None else sum(len(d) for _, d in pools)


def read_pool_pending() -> list[dict[str, Any]] | None:
    """Each live compile pool's pending jobs (read_pool_jobs' count, per pool), with what names the pool in the
    log: a SubprocPool's sidecar pid, a ProcessPoolExecutor's worker pids (its `_processes`' keys) and its newest
    pending jobs by name (named_work: a SubprocPool keeps only a Future per job here, its job pickled and sent at
    submit, so its jobs are counted, not named); None where torch keeps no pool set or a pool cannot be read."""
    pools = _pools_pending()
    if pools is None:
        return None
    try:
        out: list[dict[str, Any]] = []
        for pool, pending in pools:
            side = getattr(getattr(pool, "process", None), "pid", None)
            if isinstance(side, int):
                out.append({"sidecar_pid": side, "pending": len(pending)})
            else:
                out.append(_executor_entry(getattr(pool, "_processes", None), pending))
        return out
    except Exception:
        return None


# concurrent.futures' process module: its work items and executor manager threads are what is read of a pool.
_CF_PROCESS = "concurrent.futures.process"
# How many of a pool's pending jobs are named, the newest: its oldest are those its workers took first, which
# their own job records name; the newest are those still queued.
PENDING_NAMED = 16


def _executor_entry(workers: Any, pending: dict[Any, Any]) -> dict[str, Any]:
    """A ProcessPoolExecutor's pool_pending entry: its worker pids, pending jobs' count, its newest named."""
    entry: dict[str, Any] = {"worker_pids": sorted(k for k in list(workers or {}) if isinstance(k, int)),
                             "pending": len(pending)}
    jobs = named_work(pending)
    if jobs:
        entry["jobs"] = jobs
    return entry


def named_work(pending: dict[Any, Any]) -> list[dict[str, Any]]:
    """The newest PENDING_NAMED of an executor's pending work items (work id -> concurrent.futures' _WorkItem),
    each {"work_id", "fn", "arg"} named as a worker names the job it takes (runtime/jobs.py job_names: a
    function's names, a torch function's first name argument; nothing unpickled, nothing of the job's objects
    called). Only concurrent.futures' own _WorkItem is read; [] where none can be. Called only by a traced wait on
    a torch compile pool (the pools whose workers record their jobs), never on the submit path."""
    cls = getattr(sys.modules.get(_CF_PROCESS), "_WorkItem", None)
    if cls is None:
        return []
    items = list(pending.items())[-PENDING_NAMED:]  # one C-level copy: the manager thread may change the dict
    from .jobs import job_names  # loaded only where a compile pool's jobs are pending at a wait

    out = []
    for work_id, item in items:
        if type(item) is cls and isinstance(work_id, int):
            fn, arg = job_names(item.fn, item.args)
            out.append({k: v for k, v in (("work_id", work_id), ("fn", fn), ("arg", arg)) if v is not None})
    return out


def read_exit_pending() -> list[dict[str, Any]] | None:
    """The torch compile pools concurrent.futures' exit join (_python_exit) is about to wait on, as it starts: each
    executor with a manager thread (the module's `_threads_wakeups`, the threads the join joins) whose initializer
    is torch's compile initializer (a fork/spawn pool in the main, a sidecar's own pool), as read_pool_pending's
    executor entries; None where they cannot be read. A program's own pools are not read (their jobs are not the
    tracer's business: runtime/jobs.py)."""
    try:
        module = sys.modules.get(_CF_PROCESS)
        manager, executor_cls = (getattr(module, n, None) for n in ("_ExecutorManagerThread", "ProcessPoolExecutor"))
        if manager is None or executor_cls is None:
            return None
        out = []
        for thread in list(getattr(module, "_threads_wakeups", None) or ()):
            executor = thread.executor_reference() if type(thread) is manager else None
            # only the stdlib's executor or torch's subclass is read: no attribute of a user's class is asked
            if not isinstance(executor, executor_cls) or not (
                    type(executor) is executor_cls or type(executor).__module__.startswith("torch.")):
                continue
            if executor._initializer is None:  # no compile pool: nothing loaded for a program's own pools
                continue
            from .jobs import compile_pool_initializer

            if compile_pool_initializer(executor._initializer):
                out.append(_executor_entry(thread.processes, thread.pending_work_items))
        return out
    except Exception:
        return None


# "process.NAME" capture paths: a fact of the calling process, not of the call's instance.
_PROCESS_FACTS = {"threads": read_threads, "pool_jobs": read_pool_jobs, "pool_pending": read_pool_pending,
                  "exit_pending": read_exit_pending}


# "config.NAME" capture paths: inductor's setting as the call runs (a later change to it is seen; the pool
# torch made before keeps the value it read then).
INDUCTOR_CONFIG = "torch._inductor.config"


def resolve(path: str, instance: Any, result: Any) -> Any:
    """Follow "self.a.b" or "result.a" with getattr only, a number indexing a list or tuple ("self.process.args.0":
    the program a Popen ran); dicts become key lists. "process.threads" (or "process.pool_jobs") reads the process
    (_PROCESS_FACTS); "config.NAME" inductor's config module, when it is loaded."""
    root, *attrs = path.split(".")
    if root == "process":
        fact = _PROCESS_FACTS.get(attrs[0]) if len(attrs) == 1 else None
        return fact() if fact is not None else None
    value = sys.modules.get(INDUCTOR_CONFIG) if root == "config" else instance if root == "self" else result
    for attr in attrs:
        if attr.isdigit() and isinstance(value, (list, tuple)):
            value = value[int(attr)] if int(attr) < len(value) else None
        else:
            value = getattr(value, attr, None)
        if value is None:
            return None
    if isinstance(value, dict):
        return sorted(k for k in value if isinstance(k, int))
    return value if isinstance(value, (int, float, str, bool)) else None



def ended_by(last: BaseException) -> dict[str, Any]:
    """process_exit's `error` for a process an uncaught exception ends (sys.last_value), with
    common/refused.py's count of its uid's tasks where the error says EAGAIN (a refused fork or thread start);
    nothing where sys.last_value is another's (ends_this_exit). Read at exit only, on that path only: a traced
    start loads none of it."""
    from ..common.refused import refused_fields

    if not ends_this_exit(last):
        return {}

    error = error_text(last)
    return {"error": error, **refused_fields(error)}


def ends_this_exit(last: BaseException) -> bool:
    """Whether sys.last_value is the exception that ends this process, not one a read-eval-print loop printed
    and went on from (sys.last_value stays set until the next one: a REPL's, `python -i`'s, code.interact's,
    IPython's error, then a normal exit). Python sets it for an uncaught exception just before the exit handlers,
    from the bottom of the stack: the outermost frame of its traceback is the program's own (the script's or
    -c's module, runpy's for -m), which nothing called. A console inside the program (the code module, IPython)
    catches it in a frame that something called; under -i (or PYTHONINSPECT) an uncaught exception is followed
    by the REPL, never the exit; and the built-in REPL's lines (`<stdin>`, sys.ps1 set) are its own catches."""
    tb = last.__traceback__
    if tb is None or tb.tb_frame.f_back is not None:
        return False
    if sys.flags.interactive or os.environ.get("PYTHONINSPECT"):
        return False
    return not (hasattr(sys, "ps1") and tb.tb_frame.f_code.co_filename == "<stdin>")
