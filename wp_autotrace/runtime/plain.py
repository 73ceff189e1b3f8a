"""A plain target's wrapper, the hot path of a traced call: a target whose call record holds no capture,
memory or role and whose call no guard may refuse (most of them; recorder.Probes makes the others).

Protocol (as recorder.Probes._enter/_leave's): the call record is on disk before the host's call starts, the
return record after it returns, each in one os.write (Sink._write); the busy flag keeps a target the tracer
itself calls from recording; the open calls give a nested call its parent; the environment is the one set
at this call; the recursion limit gives the host the depth it has untraced (unseen). Per call, only what
changes is made: a target's members, a call site's stack, an environment's and a thread name's JSON and
a duration's text are kept.
"""

from __future__ import annotations

import os
import time
from itertools import repeat, starmap

from ..common.env import POOL_ENV, pool_env
from ..common.vocab import CALL, MAX_RECORD_BYTES, RETURN
from .jsonline import c_encoder
from .reads import NS_PER_US, US_PER_S, micros_json_kept, micros_kept, thread_name_kept
from .sink import writer_codes
from .target_patches import clear_child_role, set_child_role
from .unseen import (
    HEADROOM,
    MOVE_REFUSED,
    STACK_COST,
    active,
    adjust_limit,
    calls_reader,
    drop_own_frame,
    kept_setting,
    limit_reader,
    mover,
    moving_codes,
    refused,
)

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..common.targets import Target
    from .sink import Sink


# A recording process's reads of POOL_ENV (here, not in env.py: a traced start that records no call never runs them).
_ENVIRON = type(os.environ)


def pool_env_key() -> tuple[object, ...] | None:
    """os.environ's own stored values of POOL_ENV's names (None where unset), in order: one C lookup a name,
    nothing decoded, and a key that changes whenever pool_env() would (a traced call's environment JSON is
    kept by it); None where os.environ is not the standard mapping (then read pool_env())."""
    env = os.environ
    data = getattr(env, "_data", None)
    if type(env) is _ENVIRON and type(data) is dict:
        get = data.get  # six calls written out: a third of map()'s cost, and POOL_ENV has six names
        a, b, c, d, e, f = _POOL_KEYS or _pool_keys()
        return get(a), get(b), get(c), get(d), get(e), get(f)
    return None


_POOL_KEYS: list[object] = []  # POOL_ENV's names as os.environ's dict holds them (encodekey), made once


def _pool_keys() -> list[object]:
    _POOL_KEYS[:] = [os.environ.encodekey(name) for name in POOL_ENV]  # type: ignore[attr-defined]
    return _POOL_KEYS


def pool_env_of(key: tuple[object, ...] | None) -> dict[str, str]:
    """pool_env() as of the stored values pool_env_key() read (the same moment: no change between)."""
    if key is None:
        return pool_env()
    decode: Any = os.environ.decodevalue  # type: ignore[attr-defined]
    return {name: decode(value) for name, value in zip(POOL_ENV, key) if value is not None}


encode_json = c_encoder()
# Bound once: the tracer must not call itself through a traced function.
_perf_counter_ns, _time_ns, _write = time.perf_counter_ns, time.time_ns, os.write
# A body up to this long always fits a record with its header (whose host name is at most 255 bytes, 1.5K
# escaped): a longer one is written by Sink._write, which shrinks an oversized record.
FAST_BODY = MAX_RECORD_BYTES - 4096
NS_HALF_US = NS_PER_US // 2  # rounds a duration to the nearest microsecond
# Environments whose JSON a plain target's wrapper keeps (its variables, as set at its calls).
MAX_CACHED_ENVS = 64
# What a target that records no environment adds to its call record (env_json's for one that does).
NO_ENV: tuple[None, str] = (None, "")
# A nested call's member before its parent's call id.
PARENT = ',"parent_call":'
# A call record's answer where none was written (ids count from 1).
UNRECORDED = 0
# The wrappers' four moves of the recursion limit (plain's and the recorder's; unseen.mover: one C call chain each,
# no lock): before its call record, before the host's call (the wrapper's own frame still allowed for), after it
# (for the return record), and at its end. UP counts the call in unseen.active before its move, DOWN uncounts it first.
# TO_CALL reads the limit it leaves and the calls in flight (set_at, alone), FROM_CALL the limit it finds and
# the calls then, each in the move's own chain: a host call that set the limit itself (torch's compile_fx raises
# it to 2000 inside dynamo's _compile) set an absolute value the host reads back after the call, which
# unseen.kept_setting keeps where the two differ (the relative moves would leave it STACK_COST lower).
UP = zip(map(active.append, repeat(1)), mover(HEADROOM))
TO_CALL = zip(mover(STACK_COST - HEADROOM), limit_reader(), calls_reader())
FROM_CALL = zip(limit_reader(), calls_reader(), mover(HEADROOM - STACK_COST))
DOWN = zip(starmap(active.pop, repeat(())), mover(-HEADROOM))


def plain_call(probes: Any, target: Target, label: str, raw: Any, method: bool) -> Callable[..., Any]:
    """A plain target's wrapper (probes: recorder.Probes'): _enter's and _leave's checks inline; a capture: _leave."""
    prefix, with_env, tag, child_role = probes._prefix(target, label), target.env, target.tag, target.child_role
    threads, stack_of, sink, slow = probes._thread_json, probes.stacks.stack, probes.sink, probes.sink._write
    put_call, put_return, plain_return = record_writer(sink, CALL), record_writer(sink, RETURN), not target.capture
    env_jsons: dict[Any, tuple[dict[str, str], str]] = {}  # env_json's

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            next(UP)  # the tracer's own work never counts against the host's limit (UP ... DOWN)
        except OverflowError:  # a limit within HEADROOM of a C int's largest: it stays HEADROOM below ours
            refused.append(-HEADROOM)
        try:
            local = probes._local.__dict__
            if local.get("busy"):
                call_id = UNRECORDED  # called from inside the tracer itself (a target it uses)
            else:
                local["busy"] = True
                try:
                    stack, caller, stack_json = stack_of(2)  # from this frame's caller
                    if (open_calls := local.get("calls")) is None:
                        open_calls = local["calls"] = []
                    cid = str(call_id := next(probes._ids))  # its digits once, for both records
                    thread = known._name if (known := local.get("thread")) is not None else thread_name_kept(local)
                    parent = open_calls[-1] if open_calls else None
                    env, env_text = (env_jsons.get(pool_env_key()) or env_json(env_jsons)) if with_env else NO_ENV
                    put_call(body := f'{prefix}{cid},"thread":{threads.get(thread) or probes._encode_thread(thread)},'
                             f'{stack_json}{"" if parent is None else PARENT + str(parent)}{env_text}') or slow(
                        CALL, body, call_fields, (label, tag, call_id, thread, stack, caller, parent, env))
                    open_calls.append(call_id)
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
        start = _perf_counter_ns()
        if child_role:
            set_child_role(child_role)
        try:
            try:
                result = raw(*args, **kwargs)
            finally:  # returned or raised, C calls first: at the stack's limit this frame may call no other
                try:
                    if (back := next(FROM_CALL))[0] != set_at:  # rare: the host set it, or another thread moved
                        kept_setting(alone, back[1])
                except OverflowError:  # the host set a limit near a C int's largest in its call
                    refused.append(STACK_COST - HEADROOM)
        except BaseException as exc:
            raised(exc, call_id, start, target, child_role, probes._leave)
            raise  # bare: re-raises with the traceback as drop_own_frame left it
        if child_role:
            clear_child_role()
        if call_id and plain_return:  # _leave's common case, inline: two numbers
            local["busy"] = True
            try:
                if open_calls and open_calls[-1] == call_id:
                    open_calls.pop()
                us = (_perf_counter_ns() - start + NS_HALF_US) // NS_PER_US
                body = f'"call_id":{cid},"duration_s":{micros_kept.get(us) or micros_json_kept(us)}'
                put_return(body) or slow(RETURN, body, return_fields, (call_id, us))
            except Exception as exc:
                sink.error("record return", exc)
            finally:
                local["busy"] = False
        elif call_id:
            probes._leave(call_id, start, target, args[0] if method and args else None, result, None)
        try:
            next(DOWN) if not refused else adjust_limit(-HEADROOM, -1)  # which makes good the moves refused
        except MOVE_REFUSED:  # refused now (the stack too deep): made good by a later one
            refused.append(HEADROOM)
        return result

    moving_codes.add(call.__code__)
    return call


def record_writer(sink: Sink, event: str) -> Callable[[str], bool]:
    """put(body): what sink._write(event, body, fields, args) writes, the same bytes (tests/test_sink.py), in
    one frame with only the checks a plain record needs where the sink holds a marked descriptor (held.mark):
    active, no exit closing it to this thread, no drop to be said, the body short enough, and the log's
    identity read on its description's mark, per record (docs/security.md). The first three are one
    attribute (Sink._fast, recomputed at each set of any of them: Sink.set_fast).
    False, and nothing taken or written, in any other case: the caller then calls _write with the record's
    fields (`put(body) or sink._write(...)`; their arguments are made only then); True once a seq is taken
    (a failed write after it is Sink.lost's)."""
    head = sink._heads.get(event) or sink._head(event)

    def put(body: str) -> bool:
        mark, fd = sink._fast, sink.fd  # the mark where no other check sends it to _write (Sink.set_fast)
        try:
            if mark is None or sink.dropped or len(body) > FAST_BODY or mark[0](fd, mark[1]) != mark[2]:
                return False
        except OSError:  # the descriptor closed: _write opens the log again
            return False
        line = f"\n{head}{_time_ns()}e-9{sink._middle or sink._make_middle()}{next(sink._seq)},{body}}}\n".encode()
        try:
            if _write(fd, line) != len(line):
                sink.lost(OSError("short write"), fd)
        except OSError as exc:
            sink.lost(exc)
        return True

    writer_codes.add(put.__code__)  # close_to_others waits for a thread inside it
    return put


def raised(exc: BaseException, call_id: int, start: int, target: Target, child_role: str | None,
           leave: Callable[..., None]) -> None:
    """The host's call raised exc (the limit already moved back for recording): its role cleared, its return
    record written (leave), the limit lowered (down), the wrapper's frame, the caller's, taken off exc's
    traceback."""
    if child_role:
        clear_child_role()
    if call_id:
        leave(call_id, start, target, None, None, exc)
    down()
    drop_own_frame(exc, 2)


def down() -> None:
    """DOWN, where a lowering was refused before (made good here), or this one is."""
    try:
        next(DOWN) if not refused else adjust_limit(-HEADROOM, -1)
    except MOVE_REFUSED:
        refused.append(HEADROOM)


def env_json(env_jsons: dict[Any, tuple[dict[str, str], str]]) -> tuple[dict[str, str], str]:
    """pool_env() and its JSON as a call record's field (',"env":{...}'), kept in env_jsons by os.environ's
    stored values of its names (pool_env_key): the variables change rarely (pytest's test name per test); the
    dict is shared by the records, never changed. Bounded; nothing kept where os.environ is not the standard
    mapping (key None)."""
    key = pool_env_key()
    env = pool_env_of(key)
    known = (env, f',"env":{encode_json(env)}')
    if key is not None:
        if len(env_jsons) >= MAX_CACHED_ENVS:
            env_jsons.clear()
        env_jsons[key] = known
    return known


def call_fields(label: str, tag: str, call_id: int, thread: str, stack: Any, caller: Any, parent: int | None,
                env: dict[str, str] | None, at_call: dict[str, Any] | None = None, rss: int | None = None
                ) -> dict[str, Any]:
    """A call record's fields as a dict, in the order of its encoded body (Probes._enter)."""
    out: dict[str, Any] = {"target": label, "tag": tag, "call_id": call_id, "thread": thread,
                           "stack": stack, "caller": caller}
    if parent is not None:
        out["parent_call"] = parent
    if env is not None:
        out["env"] = env
    if at_call:
        out.update(at_call)
    if rss is not None:
        out["rss"] = rss
    return out


def return_fields(call_id: int, us: int) -> dict[str, Any]:
    """A plain return record's fields as a dict (Probes._leave; us: the duration in microseconds)."""
    return {"call_id": call_id, "duration_s": us / US_PER_S}
