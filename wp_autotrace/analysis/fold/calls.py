"""A call record into the run model's Call (model.py): new_call, and the readers of a call's recorded stack it
asks (was it made by multiprocessing's exit handler, by a spawned child's re-import of its main script, in
sourceless code).

new_call runs once per call record, the fold's most frequent: it reads a record's fields once, walks a stack
only for the calls that need it (stop requests, a spawned child's calls), and makes a plain Call unless the
record holds what few calls hold (then a RichCall, its own slots); both read alike (docs/scale.md, "Memory per
call"). A Call is made here only.
"""

from __future__ import annotations

from typing import Any, Callable, cast

from ...common import targets
from ...common.vocab import SPAWNED_ARG
from .model import NO_FIELDS, Call, Process, RichCall

# Frames that hold a user's code without a file: python -c, stdin, a REPL.
SOURCELESS_FILES = ("<string>", "<stdin>")

# Call-record fields captured as the call started (targets.Target.capture_call).
_AT_CALL = frozenset(("pending_jobs", "pool_running", "threads", "compile_threads", "worker_start_method",
                      "autotune_pid", "running", "executor_class", "pool_jobs", "pool_pending"))
# A call record's fields that make its Call a RichCall (new_call): each read by RichCall alone.
_RARE_FIELDS = _AT_CALL | {"env", "action", "rss"}

_new = object.__new__


def new_call(proc: Process, r: Any, blocked: bool, shared: dict[Any, Any],
             share: Callable[[Any], Any]) -> Call:
    """The Call (or RichCall) of a call record (or a blocked one) of proc. shared: one object per distinct string
    (the fold's Registry keeps it), for the call's target, tag and thread; share: the same table's one kept frame
    equal to a frame (Registry.share), for its caller: a long run's calls repeat a few, and memory then grows with
    the calls' count only. One function, no __init__: it runs once per call record."""
    if type(r) is not dict:  # a typed record (read/fastread.py): the same values as attributes, none of _RARE_FIELDS
        target, tag, thread, stack, call_id = r.target, r.tag, r.thread, r.stack, r.call_id
        caller, parent, ts, rare = r.caller, r.parent_call, r.ts, False
    else:
        get = r.get
        target, tag, thread, stack, call_id = get("target"), get("tag"), get("thread"), get("stack"), get("call_id")
        caller, parent, ts, rare = get("caller"), get("parent_call"), r["ts"], not _RARE_FIELDS.isdisjoint(r)
    target, tag, thread = target or "?", tag or targets.USER_TAG, thread or ""
    # Only a stop request's caller is read for at_exit (callers.requester), and only a spawned child's calls for
    # mp_main: no other call pays the walk of its stack.
    stop = target.endswith(STOP_CALLS)
    at_exit = stop and _from_mp_exit(stack)
    by_interpreter = stop and stack == []
    mp_main = SPAWNED_ARG in proc.argv and _from_mp_main(stack)
    rich = blocked or proc.execs or at_exit or by_interpreter or mp_main or rare
    c: Call = _new(RichCall if rich else Call)
    c.proc = proc
    c.call_id = call_id
    c.ts = ts
    c.target = shared.setdefault(target, target)
    c.tag = shared.setdefault(tag, tag)
    caller = caller or _sourceless_frame(stack)
    c.caller = share(caller) if caller is not None else None
    c.parent = proc.calls.get(parent) if parent is not None else None
    c.thread = shared.setdefault(thread, thread)
    c.end = c.error = c.pool = None
    c.ret = NO_FIELDS
    if rich:
        rc = cast(RichCall, c)
        rc.gen = proc.execs
        rc.env = r.get("env") or NO_FIELDS
        rc.blocked = blocked
        rc.action = r.get("action") or ""
        rc.at_call = NO_FIELDS if not rare or _AT_CALL.isdisjoint(r) else {k: r[k] for k in _AT_CALL if k in r}
        rc.rss = r.get("rss")
        rc.at_exit = at_exit
        rc.by_interpreter = by_interpreter
        rc.mp_main = mp_main
    return c


def plain_call(proc: Process, r: Any, target: str, tag: str, shared: dict[Any, Any], share: Callable[[Any], Any]
               ) -> Call:
    """new_call's plain Call of a typed call record (read/fastread.py) whose target and tag are set and which
    new_call would make plain (fold.Builder._plain_call decides): the same fields, read once."""
    caller = r.caller or _sourceless_frame(r.stack)
    thread, parent = r.thread or "", r.parent_call
    c: Call = _new(Call)
    c.proc, c.call_id, c.ts = proc, r.call_id, r.ts
    c.target, c.tag = shared.setdefault(target, target), shared.setdefault(tag, tag)
    c.caller = share(caller) if caller is not None else None
    c.parent = proc.calls.get(parent) if parent is not None else None
    c.thread = shared.setdefault(thread, thread)
    c.end = c.error = c.pool = None
    c.ret = NO_FIELDS
    return c


# SubprocPool.shutdown/.quiesce, AsyncCompile.quiesce, AutotuneProcessPool._shutdown: requester's calls
STOP_CALLS = (".shutdown", ".quiesce", "._shutdown")


def _from_mp_main(stack: Any) -> bool:
    """Does the stack pass through multiprocessing.spawn's re-import of the main script (_fixup_main_from_path)?"""
    return any(isinstance(f, dict) and f.get("func") == "_fixup_main_from_path"
               and str(f.get("file", "")).endswith("multiprocessing/spawn.py") for f in stack or ())


def _from_mp_exit(stack: Any) -> bool:
    """Does the stack pass through multiprocessing's exit handler (util._exit_function)?"""
    return any(isinstance(f, dict) and f.get("func") == "_exit_function"
               and str(f.get("file", "")).endswith("multiprocessing/util.py") for f in stack or ())


def _sourceless_frame(stack: Any) -> dict[str, Any] | None:
    """The innermost frame in -c code or stdin, when no frame with a file is the caller."""
    for frame in reversed(stack or ()):
        if frame.get("file") in SOURCELESS_FILES:
            return frame  # type: ignore[no-any-return]
    return None
