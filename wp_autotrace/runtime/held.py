"""Where a held descriptor of the log sits: high, just below the descriptor ceiling, so that the
program's own open() gets the numbers it gets untraced (docs/contracts.md, "The log's descriptor").

Loaded when a sink first holds its descriptor (hold: a process that records calls) or opens the log again
(reopen), never on the start-up path of a process that records none.
"""

import errno
import fcntl
import os
import resource
import sys

TYPE_CHECKING = False  # typing is not imported at start-up
if TYPE_CHECKING:
    from typing import Any

# A held descriptor goes at or above this far below the descriptor ceiling, so the program's own
# open() numbers (lowest free first) are the untraced ones; the ceiling is min(soft RLIMIT_NOFILE,
# HELD_FD_CEILING): a bigger number would grow the process's descriptor table for nothing.
HELD_FD_CEILING = 1024
HELD_FD_BELOW = 64


def hold(sink: "Any") -> None:
    """Keep a descriptor of sink's log from now on (hot writers: no open/close per record), placed high and
    marked. Where no high number is free (a low RLIMIT_NOFILE, a full table) the sink stays released: the
    descriptor it held till now (the start's, a low number) is closed too. Never raises."""
    if not sink.active:
        return
    try:
        fd = sink.fd if sink.fd >= 0 else sink._open_same()
    except Exception:
        return
    if fd < 0:
        return
    try:
        high = place_high(fd)
    except Exception:
        if sink.fd == fd:  # not moved: the start's own descriptor (a low number, the program's) is let go too
            sink.release()
        elif sink.fd < 0:  # stays released: the descriptor opened here is closed
            try:
                os.close(fd)
            except OSError:
                pass
        return
    try:
        sink._mark = checked_mark(sink, high)
    except Exception:  # the number is the program's now: never closed here; the sink stays released
        sink.fd, sink._mark = -1, None
        sink.set_fast()
        return
    sink.fd = high
    sink.set_fast()


def place_high(fd: int) -> int:
    """fd moved to a free number near the descriptor ceiling (the old one closed); raises OSError
    where none is free there, or the program would keep fewer than HELD_FD_BELOW numbers below it, leaving fd
    as it was."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    ceiling = HELD_FD_CEILING if soft == resource.RLIM_INFINITY else min(soft, HELD_FD_CEILING)
    low = ceiling - HELD_FD_BELOW
    # Checked before fd's own number: under a low limit (< 2 * HELD_FD_BELOW) every number, the one just opened
    # too, is one the program's first open() calls get untraced (at 67 the zone would start at 3).
    if low < HELD_FD_BELOW:
        raise OSError("no descriptor number free above the program's own")
    if fd >= low:
        return fd
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
    if high >= ceiling:
        os.close(high)
        raise OSError("no descriptor number free below the ceiling")
    os.close(fd)
    return high


# The mark: the description's I/O readiness signal (F_SETSIG) set to SIGKILL's number, which no program gives a
# file of its own (its first readiness signal would kill it). The owner stays unset, so no signal is sent at
# all (a signal needs an owner, and the log is never O_ASYNC, holds no lease and is no socket).
MARK_SIGNAL = 9


def mark(fd: int) -> "tuple[Any, int, int] | None":
    """Mark the log's open file description (fd) as the log's, so Sink._write can tell a held descriptor is
    still the log with one F_GETSIG (~1.0K instructions, an int answer) instead of fstat's st_dev/st_ino (~6.9K,
    most of it the stat_result Python builds): its I/O signal set to MARK_SIGNAL (F_SETSIG). A description the
    program opens has signal 0, or the one it set for its own asynchronous I/O (never SIGKILL); the mark goes
    with the description (dup, fork), never with the number, so a number the program closed and reused reads
    no mark. The mark is the same in every process (a description shared by fork reads it in each). The
    signal is sent only to an owner, which the log never has (docs/security.md).

    Answers (fcntl.fcntl, F_GETSIG, what it reads while marked), or None where no mark could be set (not Linux,
    a refused call): the check stays fstat's."""
    getsig, setsig = getattr(fcntl, "F_GETSIG", None), getattr(fcntl, "F_SETSIG", None)
    if not sys.platform.startswith("linux") or getsig is None or setsig is None:
        return None
    try:
        fcntl.fcntl(fd, setsig, MARK_SIGNAL)
        if fcntl.fcntl(fd, getsig) != MARK_SIGNAL:
            return None
    except OSError:
        return None
    return fcntl.fcntl, getsig, MARK_SIGNAL


def reopen(sink: "Any", tries: int = 2) -> int:
    """sink's held fd is no longer the log (closed, maybe reused by the host): the log's path opened again, placed
    high and marked, as sink.Sink._write's new descriptor.

    The old number is left alone: it may be the host's file now. Only the same file (same st_dev/st_ino, same
    checks: Sink._open_same) is accepted; otherwise the sink stays released (each later record tries the path
    again), so no record can land in another file. A new number the program took before its mark (checked_mark)
    is left to it and the path opened once more: a program that dup2s over the log's number did so once, and its
    record is not lost for it."""
    sink.fd, sink._mark = -1, None
    sink.set_fast()
    fd: int = sink._open_same()
    if fd < 0 and sink._open_errno in (errno.EACCES, errno.EPERM):  # refused: it changed its user (setuid) since
        raise PermissionError(sink._open_errno, f"{sink.path} refuses this process now")  # silent: sink_rare.lost
    if fd < 0:  # said once, as ever: the program closed the log's fd and the path is gone
        raise OSError(f"{sink.path} is no longer the file this process opened")
    try:
        fd = place_high(fd)
    except OSError:
        pass
    try:
        sink._mark = checked_mark(sink, fd)
    except OSError:  # the number is the program's now: the sink stays released, or tries the path again
        if tries <= 1:
            raise
        return reopen(sink, tries - 1)
    sink.fd = fd
    sink.set_fast()
    return fd


def checked_mark(sink: "Any", fd: int) -> "tuple[Any, int, int] | None":
    """mark(fd), then fd looked at once more: still the log's file (st_dev/st_ino). The mark goes with whatever
    description the number names as it is set, and another thread of the program may dup2 a file of its own over
    the number at any moment (between the open's check and the mark): marked, that file would pass every later
    record's check and take the records, and its description would keep the mark's signal. Where fd is no
    longer the log's, the signal its description had is put back and OSError raised; fd is left alone (the
    number is the program's now)."""
    getsig, setsig = getattr(fcntl, "F_GETSIG", None), getattr(fcntl, "F_SETSIG", None)
    try:
        before = fcntl.fcntl(fd, getsig) if getsig is not None else None
    except OSError:
        before = None
    answer = mark(fd)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) == sink.identity:
        return answer
    if answer is not None and before is not None and before != MARK_SIGNAL and setsig is not None:
        try:
            fcntl.fcntl(fd, setsig, before)
        except OSError:
            pass
    raise OSError(errno.EBADF, f"descriptor {fd} names another file than {sink.path} now (the program's)")
