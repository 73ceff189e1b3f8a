"""The root's side of the watcher: start it without the host ever seeing a child.

The root forks a tiny intermediate, which leaves the root's session, points
stdio at /dev/null, closes every other inherited fd but the log's, spawns a
fresh interpreter (``python -I -S``: no site, so no .pth activation and no
torch; WP_AUTOTRACE* cleared too) running ``wp_autotrace.watcher.main`` and
exits; the root reaps it before ``spawn`` returns. The watcher is therefore
an orphan in its own session, recognisable in ps as
``... wp-autotrace-watch RUN ...``. This module is imported by every traced
root at start-up: stdlib only, no typing.
"""

from __future__ import annotations

import os
import sys

ARGV_MARK = "wp-autotrace-watch"  # what ps shows, followed by the run id
NICE = 10  # it only watches: let the run have the CPU
EXEC_FAILED = 127  # as a shell says "command not found"
# The interpreter's code: put the package's directory first on sys.path, run main().
# Niced here, not in the intermediate: the root waits for the intermediate, at full priority.
BOOT = (f"import os,sys;os.nice({NICE});sys.path.insert(0,sys.argv[3]);"
        "from wp_autotrace.watcher.main import main;main(sys.argv[1:])")


_exit = os._exit  # bound once: the intermediate leaves by it without running the host's atexit handlers

def spawn(log_fd: int, log: str, run: str, root_ct: float | None, interval: float, linger: float,
          redact: str = "") -> bool:
    """Start the watcher for this run; True when the intermediate forked it.

    Called in the root at start-up, before any thread exists. The intermediate
    child is reaped here, so the host never sees a child of ours. redact: the
    WP_AUTOTRACE_REDACT spec (name patterns, no secrets), as the watcher's
    environment has no WP_AUTOTRACE* variables.
    """
    if not sys.executable:  # embedded: no interpreter to run
        return False
    pkg_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # Where the watcher starts reading the log: just after the root's process_start.
    offset = os.lseek(log_fd, 0, os.SEEK_CUR)
    argv = [sys.executable, "-I", "-S", "-c", BOOT, ARGV_MARK, run, pkg_dir, str(log_fd), log, str(offset),
            str(os.getpid()), repr(root_ct or 0.0), repr(interval), repr(linger), redact]
    pid = os.fork()
    if pid == 0:  # the intermediate: never returns into the host's code
        code = 1
        try:
            _detach_and_spawn(argv, log_fd)
            code = 0
        finally:
            _exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:  # SIGCHLD inherited as ignored: the kernel reaped it already
        return True
    return status == 0


def _detach_and_spawn(argv: list[str], keep_fd: int) -> None:
    """In the intermediate: own session, quiet stdio, only the log fd kept; fork the watcher."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, 1024))
    for fd in open_fds:
        if fd > 2 and fd != keep_fd:
            try:
                os.close(fd)
            except OSError:
                pass
    os.set_inheritable(keep_fd, True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    # fork + exec rather than posix_spawn: posix_spawn returns only once the new
    # process has exec'd, and on a busy host that wait (the root's) was up to 27 ms.
    if os.fork() == 0:
        try:
            os.execve(argv[0], argv, env)
        finally:
            _exit(EXEC_FAILED)
