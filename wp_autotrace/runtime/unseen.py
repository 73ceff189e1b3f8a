"""What keeps a traced call looking untraced beyond its records: the recursion limit it gives back (its own
frame, and the room its recording uses), and its own frame taken off the tracebacks it passes on.

Loaded with the recorder (recorder.py), whose wrappers call these around each traced call.
"""

import _thread
import sys

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
_limit_lock = _thread.allocate_lock()
_getrecursionlimit = sys.getrecursionlimit
_setrecursionlimit = sys.setrecursionlimit
# How far the limit is above where it should be: a lowering refused because the
# stack was too deep at that moment, made good by the next adjustment.
_excess = 0
# Tracebacks keep the wrapper's frame out from 3.11, where a bare raise re-raises
# with the exception's own (trimmed) traceback; 3.9/3.10 re-raise the one saved
# when the exception was caught, which starts at the wrapper.
_TRIM_TRACEBACK = sys.version_info >= (3, 11)


def adjust_limit(delta: int) -> None:
    """Move the recursion limit by delta (under a lock: other threads move it too); never raises."""
    global _excess
    lock = _limit_lock  # acquire/release: half the cost of a `with` (four moves a traced call)
    lock.acquire()
    try:
        if _excess:  # rare: a lowering was refused; made good here
            _setrecursionlimit(_getrecursionlimit() + delta - _excess)
            _excess = 0
        else:  # the common case stores no global
            _setrecursionlimit(_getrecursionlimit() + delta)
    except RecursionError:
        _excess -= delta
    finally:
        lock.release()


def new_limit_lock() -> None:
    """A fresh lock in a forked child: another thread of the parent may have held it at the fork, where it
    would stay held forever and the first traced call would hang."""
    global _limit_lock
    _limit_lock = _thread.allocate_lock()


def drop_own_frame(exc: BaseException) -> None:
    """Take the wrapper's own frame off the head of exc's traceback (3.11+)."""
    tb = exc.__traceback__
    if _TRIM_TRACEBACK and tb is not None and tb.tb_frame is _getframe(1):
        exc.__traceback__ = tb.tb_next
