"""Where a held descriptor of the log sits: high, just below the descriptor ceiling, so that the
program's own open() gets the numbers it gets untraced (docs/contracts.md, "The log's descriptor").

Loaded when a sink first holds its descriptor (a process that records calls, sink.Sink.hold), never on
the start-up path of a process that records none.
"""

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


# F_SETOWN_EX and F_GETOWN_EX (Linux 2.6.32+), which Python's fcntl module does not name: the values of
# asm-generic/fcntl.h, taken only on the architectures that use them (others keep the fstat check).
F_SETOWN_EX, F_GETOWN_EX, F_OWNER_TID = 15, 16, 0
_GENERIC_FCNTL = ("x86_64", "aarch64", "riscv64", "ppc64le", "s390x", "i686", "armv7l")
NO_OWNER = bytes(8)  # F_GETOWN_EX's answer buffer: struct f_owner_ex {int type; pid_t pid;}
# The mark: "owned" by thread 1, init's, at which no program directs SIGIO (one that is pid 1 itself aside:
# docs/security.md, "Residual risks").
_MARK = F_OWNER_TID.to_bytes(4, sys.byteorder) + (1).to_bytes(4, sys.byteorder)


def mark(fd: int) -> "tuple[Any, int, bytes, bytes] | None":
    """Mark the log's open file description (fd) as the log's, so Sink._write can tell a held descriptor is
    still the log with one F_GETOWN_EX (~0.9K instructions) instead of fstat's st_dev/st_ino (~6.9K, most of
    it the stat_result Python builds): its owner set to thread 1, init's (F_SETOWN_EX, F_OWNER_TID). A
    description the program opens has no owner, or the one it set (itself, its process group, one of its
    threads, a lease's holder), never init's thread; the mark goes with the description (dup, fork), never
    with the number, so a number the program closed and reused reads no mark. The mark is the same in every
    process (a description shared by fork reads it in each). The owner only says where SIGIO/SIGURG would
    go: the log is never O_ASYNC, holds no lease and is no socket, so none is ever sent (docs/security.md).

    Answers (fcntl.fcntl, F_GETOWN_EX, its buffer, what it reads while marked), or None where no mark could
    be set (not Linux, another architecture's numbers, a refused call): the check stays fstat's."""
    if not sys.platform.startswith("linux") or os.uname().machine not in _GENERIC_FCNTL:
        return None
    try:
        fcntl.fcntl(fd, F_SETOWN_EX, _MARK)
        if fcntl.fcntl(fd, F_GETOWN_EX, NO_OWNER) != _MARK:
            return None
    except OSError:
        return None
    return fcntl.fcntl, F_GETOWN_EX, NO_OWNER, _MARK
