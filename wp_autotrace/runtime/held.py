"""Where a held descriptor of the log sits: high, just below the descriptor ceiling, so that the
program's own open() gets the numbers it gets untraced (docs/contracts.md, "The log's descriptor").

Loaded when a sink first holds its descriptor (a process that records calls, sink.Sink.hold), never on
the start-up path of a process that records none.
"""

import fcntl
import os
import resource

# A held descriptor goes at or above this far below the descriptor ceiling, so the program's own
# open() numbers (lowest free first) are the untraced ones; the ceiling is min(soft RLIMIT_NOFILE,
# HELD_FD_CEILING): a bigger number would grow the process's descriptor table for nothing.
HELD_FD_CEILING = 1024
HELD_FD_BELOW = 64


def place_high(fd: int) -> int:
    """fd moved to a free number near the descriptor ceiling (the old one closed); raises OSError
    where none is free there, leaving fd as it was."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    ceiling = HELD_FD_CEILING if soft == resource.RLIM_INFINITY else min(soft, HELD_FD_CEILING)
    low = ceiling - HELD_FD_BELOW
    if fd >= low:
        return fd
    if low <= 2:
        raise OSError("no descriptor number free above the program's own")
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
    if high >= ceiling:
        os.close(high)
        raise OSError("no descriptor number free below the ceiling")
    os.close(fd)
    return high
