"""What keeps a traced call looking untraced beyond its records: the recursion limit it gives back (its own
frame, and the room its recording uses), and its own frame taken off the tracebacks it passes on.

Loaded with the recorder (recorder.py), whose wrappers call these around each traced call.
"""

import sys
from itertools import repeat, starmap
from operator import add

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

_getframe = sys._getframe  # bound once: a user may trace sys._getframe itself

# Recursion-limit units one traced call adds beyond the wrapped function's own:
# the wrapper's frame (bench/recursion.py measures 1 on 3.9 - 3.13). The wrapper
# raises the limit by this much for the length of the call, so a traced
# recursive function reaches the depth it would untraced.
STACK_COST = 1
# Recursion-limit room the tracer's own recording may use (capture, JSON, write),
# so a traced call at the host's limit raises where the untraced one would and
# the record is still written.
HEADROOM = 64
_getrecursionlimit = sys.getrecursionlimit
_setrecursionlimit = sys.setrecursionlimit
# Lowerings refused (RecursionError: the stack was too deep at that moment), each as the units the limit stayed
# above where it should be; made good by the next adjust_limit. Appended and popped one item at a time (each
# one C call, atomic under the GIL), so threads need no lock for it.
refused: "list[int]" = []
# Tracebacks keep the wrapper's frame out from 3.11, where a bare raise re-raises
# with the exception's own (trimmed) traceback; 3.9/3.10 re-raise the one saved
# when the exception was caught, which starts at the wrapper.
_TRIM_TRACEBACK = sys.version_info >= (3, 11)
# What a move of the limit can raise and leaves it unchanged: RecursionError (a lowering below the stack's
# depth), OverflowError (a raise past a C int: a host that set 2**31 - 1), ValueError (a lowering below 1,
# where another thread set a tiny limit between two moves). Each is kept in refused, never passed to the host.
MOVE_REFUSED = (RecursionError, OverflowError, ValueError)


# The traced calls whose moves of the limit are outstanding, in every thread: one item from before a call's first
# move to after its last (it may count a call a moment too long, never too short). Read with the limit in one C
# call chain (READ: (limit, calls in flight)), it tells a limit the host set in its call from another thread's
# moves in flight, which would read as one (and leave a frame's allowance behind for good with each overlap).
active: "list[int]" = []
# The code objects of the wrappers that move the limit around their host's call (plain.call, the recorder's):
# their frames on a thread's stack are that thread's calls in active (own_calls, after_fork).
moving_codes: "set[object]" = set()
# Wrapper frames of the thread that forked this process, whose move for their host's call after_fork undid: each
# moves HEADROOM back after its call, not HEADROOM - STACK_COST (kept_setting). Empty but in a forked child.
forked: "set[object]" = set()


def limit_reader() -> "Iterator[int]":
    """An endless iterator of the recursion limit: a C call chain's link (starmap calls with no sentinel compare)."""
    return starmap(_getrecursionlimit, repeat(()))


def calls_reader() -> "Iterator[int]":
    """An endless iterator of len(active): the calls in flight, a C call chain's link."""
    return starmap(len, repeat((active,)))


READ = zip(limit_reader(), calls_reader())


def mover(delta: int) -> "Iterator[None]":
    """An endless iterator whose each next() moves the recursion limit by delta: get, add and set run as one
    chain of C calls (map over starmap), with no bytecode between the read and the write, so no other
    thread (which runs only between bytecodes, under the GIL) can move the limit in between. A lock-free
    read-modify-write: a traced call makes four moves, and the lock each took cost more than the move
    (BENCHMARKS.md). next() raises one of MOVE_REFUSED where the move is refused; the limit is then
    unchanged, and the iterator stays usable."""
    return map(_setrecursionlimit, map(add, limit_reader(), repeat(delta)))


_FRAME_BACK = mover(STACK_COST)


def kept_setting(alone: int, calls: int, up: int = 1) -> None:
    """Called by a wrapper (its frame: up frames above this call) where the limit, read with its move back after
    its host's call (calls in flight then: calls), differs from set_at, read as the call began (alone calls in
    flight then): where its host set the limit itself in that call, that absolute value is what the host reads
    after, so the move back, HEADROOM - STACK_COST, is made HEADROOM here (the last move then leaves the host's
    value). The host set it where no other thread's call was in flight at both reads (the calls counted are this
    thread's own: its wrapper frames, own_calls) and no move of ours was refused; or where after_fork undid this
    call's STACK_COST already (forked)."""
    wrapper = _getframe(up)
    if wrapper in forked:
        forked.discard(wrapper)
    elif refused or alone != calls or (alone != 1 and alone != own_calls(wrapper)):
        return
    try:
        next(_FRAME_BACK)
    except OverflowError:  # the host set a limit near a C int's largest in its call
        refused.append(-STACK_COST)


def own_calls(frame: "Any") -> int:
    """The wrapper frames (moving_codes) from frame up to the thread's first: its traced calls in flight."""
    count = 0
    while frame is not None:
        count += frame.f_code in moving_codes
        frame = frame.f_back
    return count


def after_fork() -> None:
    """In a forked child (Probes.reset_after_fork, from the at-fork hook, in the thread that forked): the
    limit the child reads is its host's, as untraced. The forking thread's traced calls (its wrapper frames)
    each held their host call's STACK_COST: undone here, and each such call then moves HEADROOM back after
    its call (forked), so one that returns in the child nets nothing more (a fork pool's worker never does:
    without this it read the limit one higher for life). The other threads' calls do not exist in the child:
    dropped from active (their moves in flight, HEADROOM or STACK_COST each as the fork found them, stay)."""
    own = []
    frame: Any = _getframe(1)
    while frame is not None:
        if frame.f_code in moving_codes:
            own.append(frame)
        frame = frame.f_back
    del active[len(own):]
    forked.clear()
    forked.update(own)
    if own:
        adjust_limit(-STACK_COST * len(own))


def adjust_limit(delta: int, track: int = 0) -> None:
    """Move the recursion limit by delta, making good the moves refused before (refused); never raises
    but where the stack is at the limit itself (a traced call there raises as the untraced one would).
    track 1: a traced call's first move (counted in active before it), -1: its last (uncounted after it)."""
    if track > 0:
        active.append(1)
    excess = 0
    while refused:  # rare: a lowering was refused; made good here
        try:
            excess += refused.pop()
        except IndexError:  # another thread took the last one
            break
    try:  # mover's chain, made here: a call of mover would be one frame more at the stack's limit
        next(map(_setrecursionlimit, map((delta - excess).__add__, iter(_getrecursionlimit, None))))
    except MOVE_REFUSED:
        refused.append(excess - delta)
    if track < 0:
        active.pop()


def drop_own_frame(exc: BaseException, up: int = 1) -> None:
    """Take the wrapper's own frame (up frames above this call) off the head of exc's traceback (3.11+)."""
    tb = exc.__traceback__
    if _TRIM_TRACEBACK and tb is not None and tb.tb_frame is _getframe(up):
        exc.__traceback__ = tb.tb_next
