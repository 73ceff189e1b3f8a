"""Who called: user code or torch. A stop (or quiesce) request's requester, from the thread that made the
call, its caller's frame and the call it ran under; a frame that is the user's (a file, not python -c's
<string>). The pool's story (derive/pools.py `shutdown_by`, `quiesced`) and the endings read it.
"""

from __future__ import annotations

from typing import Any

from ...common import targets
from ..fold.calls import SOURCELESS_FILES
from ..fold.model import Call

# torch's names for the threads that call into a pool on their own (its quiesce Timer, its pipe reader).
QUIESCE_TIMER_THREAD = "subproc_worker_timer"
READER_THREAD = "InductorSubproc"
MAIN_THREAD = "MainThread"  # threading's name for the interpreter's main thread, where atexit runs
# Who asked a pool to stop (the story's `shutdown_by`).
BY_USER = "user code"
BY_ATEXIT = "torch's atexit (shutdown_compile_workers)"
BY_READER = "the pool's reader thread (its sidecar had closed the pipe)"
BY_FINALIZER = "torch's multiprocessing finalizer at exit"
BY_POOL_ATEXIT = "torch's atexit (the pool's own shutdown, registered as the pool was made)"
BY_TIMER = "the quiesce timer"


def user_frame(frame: dict[str, Any] | None) -> dict[str, Any] | None:
    """frame if it is user code with a file (not python -c's <string>), else None."""
    return frame if frame and frame.get("file") not in SOURCELESS_FILES else None


def requester(c: Call) -> tuple[str, dict[str, Any] | None]:
    """Who made a shutdown (or quiesce) call, and the user's frame when it was user code."""
    if c.thread == QUIESCE_TIMER_THREAD:
        return BY_TIMER, None
    if c.at_exit:  # its caller is the frame the process was forked at: nobody's request
        return BY_FINALIZER, None
    own = user_frame(c.caller)
    if own is not None and c.parent is None:
        return BY_USER, own
    parent = c.parent
    if parent is not None and parent.tag == targets.EXIT_SHUTDOWN:
        frame = user_frame(parent.caller)
        return (BY_USER, frame) if frame is not None else (BY_ATEXIT, None)
    if own is not None:
        return BY_USER, own
    if c.thread == READER_THREAD:
        return BY_READER, None
    if c.by_interpreter and parent is None and c.thread == MAIN_THREAD:  # atexit ran pool.shutdown itself
        return BY_POOL_ATEXIT, None
    return BY_FINALIZER, None
