"""What only a run's root does: start the run's watcher, and list what is alive below it at exit.

Imported by the root at start-up (bootstrap.start_runtime), never by a descendant, and never at
exit: a program may end with its descriptor table full, where an import (which opens a file) fails
and would cost the root its process_exit. So the /proc readers its exit record needs are loaded
here, with it, and so is ``resource``, which lets the exit record take one descriptor above a full
table's limit (sink_rare.one_more_descriptor).
"""

import os
import resource  # noqa: F401  (loaded for the exit record: sink_rare.one_more_descriptor's one more descriptor)
import sys

from ..common.core import TRACER_ERROR
from ..common.env import EXPORT_ENV, REDACT_ENV, WATCHED_ENV
from ..common.procfs import ProcReader, descendants
from .sink import warn

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

# The root's first verdict at exit: its live descendants, so a reader right after
# the job has one before the watcher's leftover (docs/contracts.md, "The root's `below`").
BELOW_KEEP = 200  # entries written (a record stays well under the sink's 32 KiB)
BELOW_WALK = 10000  # processes visited at most: a bounded cost at exit


def start_watcher(runtime: "Any") -> None:
    """Start the run's watcher process, unless it would become the host's own child (runtime: the
    root's Runtime, bootstrap.new_runtime)."""
    sink = runtime.sink
    if os.getpid() == 1:
        # A pid namespace's init (`docker run … python train.py`) adopts every
        # orphan, the watcher included: a host that waits for all its children
        # would wait for it forever. Said in the log only: stderr stays the host's.
        sink.emit(TRACER_ERROR, where="watcher",
                  error="not started: the main process is pid 1, which would adopt it as its child; "
                        "no tree or leftover records")
        return
    from .spawn import spawn

    os.environ[WATCHED_ENV] = runtime.run_id
    settings = runtime.settings
    # A sink released before this (a low RLIMIT_NOFILE left its hold no high number) lends the watcher a
    # descriptor for the spawn only: its end is where the root's process_start ended (the root has no child yet).
    fd = sink.fd
    try:
        if fd < 0:
            fd = sink._open_same()
            os.lseek(fd, 0, os.SEEK_END)
        started = spawn(fd, sink.path or "", runtime.run_id, runtime.create_time, settings.interval,
                        settings.linger, os.environ.get(REDACT_ENV, ""), os.environ.get(EXPORT_ENV, ""),
                        runtime.start_ticks)
    except OSError:
        started = False
    finally:
        if fd != sink.fd and fd >= 0:
            os.close(fd)
    if not started:
        warn("could not start the process-tree watcher; no tree or leftover records", "watcher")


def below() -> "dict[str, Any]":
    """{"below": [...], "below_count": n} of the root's live descendants; nothing without /proc, where
    /proc is another pid namespace's (`unshare -p` without --mount-proc: our pid there is another process,
    kthreadd for pid 2, and its children are not ours; the watcher says so in its watcher_exit), or where
    /proc cannot be read now (no descriptor free at exit): the exit record goes without it."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()) or not ProcReader.available():
            return {}
        found, count = descendants(os.getpid(), BELOW_KEEP, BELOW_WALK)
    except OSError:
        return {}
    return {"below": found, "below_count": count}


def unshadow(known: "set[str]") -> None:
    """Take the modules of other packages the root's start loads for its watcher and exit (resource, __future__) out
    of sys.modules again where the program had not loaded them: untraced, the program's own `import resource` finds
    a file of that name in its script's folder first, and so it must traced. The tracer's modules keep their
    references. Only these two, which hold no state of their own: a module such as threading, which the wrappers
    load at start where the user names targets, must stay one module (a second copy would not know the threads).
    errno (procfs's, built in: nothing can shadow it) goes too, so that a traced program's sys.modules holds
    nothing of the start's but atexit (docs/guarantees.md)."""
    for name in ("resource", "__future__", "errno"):
        if name not in known:
            sys.modules.pop(name, None)
