"""Which watched processes ended, in one syscall: pidfds in one epoll set (the watcher's); and how one ended, where
its parent reaped it first (the wait status the kernel keeps with its pidfd).

Stdlib only. Kept apart from procfs.py, which every traced root imports at
start-up: only the watcher process needs this.
"""

from __future__ import annotations

import errno
import os
import sys

# File descriptors the watcher may hold: one pidfd per process of a run (a run of a thousand
# processes passes the usual soft limit of 1024), under the hard limit.
WANTED_FDS = 65536
# Of the fd limit it gets, the watcher keeps this share free of pidfds (at least FD_RESERVE_MIN): every
# /proc read, the log (twice while the root lives), the memory sampler's smaps and fd links, the live
# export's socket and Python's own imports open fds too. A pidfd table that filled the limit made each
# of those fail with EMFILE (a hard limit of 1024 and 1,100 processes: the live root read as ended).
# Processes past the cap get no pidfd: the watcher reads them every tick, as without pidfds.
FD_RESERVE_SHARE = 4  # a quarter of the limit
FD_RESERVE_MIN = 64
# Besides its pidfd, each watched process's stat and main-thread children files are kept open while the
# cap allows (kept_files): the watcher reads them again and again, and a pread on a kept descriptor costs
# a third of an open, read and close (3.2 against 8.8 us of CPU, docs/scale.md). pidfds come first: a
# process gets its pidfd by closing another's kept files when the cap is reached, and kept files only
# with room left; a process without them is read by path, as before.
KEPT_PER_PROCESS = 2
# PIDFD_GET_INFO (Linux 6.13+; its exit field 6.15+): _IOWR(0xFF, 11, struct pidfd_info), the struct's first 64
# bytes (PIDFD_INFO_SIZE_VER0). With PIDFD_INFO_EXIT asked, the kernel gives the wait status (waitpid's) of a
# process its parent has reaped: the pidfd keeps it after the zombie, and with it the pid, are gone.
PIDFD_GET_INFO = 0xC040FF0B
PIDFD_INFO_EXIT = 1 << 3
INFO_SIZE = 64
EXIT_CODE_AT = 60  # its exit_code (s32): after mask and cgroupid (u64 each) and eleven u32 ids


def pidfd_cap(limit: int) -> int:
    """pidfds held at most under an fd limit: the limit less its reserved share."""
    return max(0, limit - max(FD_RESERVE_MIN, limit // FD_RESERVE_SHARE))


class ExitWatch:
    """Which watched processes ended, in one syscall: a pidfd per process, all in one epoll set.

    A pidfd refers to one process, never to a later one that reuses its pid, and becomes
    readable when that process exits (a zombie included). The watcher polls it every tick,
    so an end is seen within one interval however seldom the process's files are read.
    A process whose pidfd cannot be opened (a limit, an old kernel), or one past the cap
    (pidfd_cap: fds kept free for everything else) is simply not watched here: add() says
    so, and the caller reads it every tick.
    """

    def __init__(self, cap: int = WANTED_FDS) -> None:
        import select

        self.cap = cap  # pidfds held at most (pidfd_cap)
        self._poll = select.epoll()
        self._events = select.EPOLLIN
        self._fd_of: dict[int, int] = {}  # pid -> pidfd
        self._pid_of: dict[int, int] = {}  # pidfd -> pid
        # pid -> (its /proc/PID/stat, its /proc/PID/task/PID/children), open: the reader preads them
        # (procfs.ProcReader.kept is this very dict). A /proc descriptor stays bound to the process it was
        # opened on: once that one is reaped it reads ESRCH (stat) or nothing (children), never the file of
        # a later process that got the pid; its end comes from the pidfd all the same.
        self.kept: dict[int, tuple[int, int]] = {}
        self.info = True  # whether the kernel may give an ended process's wait status (status())

    @staticmethod
    def make() -> ExitWatch | None:
        """An ExitWatch, or None where pidfds are unavailable; raises this process's fd limit."""
        if not hasattr(os, "pidfd_open"):
            return None
        try:
            os.close(os.pidfd_open(os.getpid()))
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            want = WANTED_FDS if hard == resource.RLIM_INFINITY else min(hard, WANTED_FDS)
            if soft != resource.RLIM_INFINITY and soft < want:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            return ExitWatch(pidfd_cap(WANTED_FDS if soft == resource.RLIM_INFINITY else soft))
        except (OSError, ValueError):
            return None

    def add(self, pid: int) -> bool:
        """Watch pid (the process it names now); False if it cannot be watched."""
        if pid in self._fd_of:
            return True
        if len(self._fd_of) >= self.cap:
            return False
        if self.kept and self._used() >= self.cap:
            self._let_go(next(iter(self.kept)))  # pidfds first: the oldest kept files make room
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return False
        try:
            self._poll.register(fd, self._events)
        except OSError:
            os.close(fd)
            return False
        self._fd_of[pid] = fd
        self._pid_of[fd] = pid
        self._keep(pid, fd)
        return True

    def _used(self) -> int:
        return len(self._fd_of) + KEPT_PER_PROCESS * len(self.kept)

    def _keep(self, pid: int, pidfd: int) -> None:
        """Keep pid's stat and children files open, where the cap leaves room; else it is read by path."""
        if self._used() + KEPT_PER_PROCESS > self.cap:
            return
        fds: list[int] = []
        try:
            for path in (f"/proc/{pid}/stat", f"/proc/{pid}/task/{pid}/children"):
                fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
            # Opened after the pidfd: they are its process's files if it had not exited by now (a pid
            # is free for another process only once its process has exited and been reaped).
            if not _exited(pidfd):
                self.kept[pid] = (fds[0], fds[1])
                return
        except OSError:
            pass  # read by path instead (EMFILE: the fds are short; the process gone: its pidfd says so)
        for fd in fds:
            os.close(fd)

    def _let_go(self, pid: int) -> None:
        for fd in self.kept.pop(pid, ()):
            os.close(fd)

    def __contains__(self, pid: int) -> bool:
        return pid in self._fd_of

    def remove(self, pid: int) -> None:
        self._let_go(pid)
        fd = self._fd_of.pop(pid, None)
        if fd is not None:
            del self._pid_of[fd]
            try:
                self._poll.unregister(fd)
            except OSError:
                pass
            os.close(fd)

    def status(self, pid: int) -> int | None:
        """The wait status of pid's process once its parent reaped it (PIDFD_GET_INFO's exit field): its exit code
        or the signal that ended it, which no zombie holds any more. None before the reaping (a zombie's is in
        /proc: zombies.py), without its pidfd, or on a kernel without the field (not asked again then)."""
        fd = self._fd_of.get(pid)
        if fd is None or not self.info:
            return None
        import fcntl

        # The struct's fields in the host's byte order by int's own methods: a `struct` import here is a top-level
        # module the tracer's finders do not know as their own (sink.TRACER_IMPORTS, a START source).
        buf = bytearray(INFO_SIZE)
        buf[:8] = PIDFD_INFO_EXIT.to_bytes(8, sys.byteorder)
        try:
            fcntl.ioctl(fd, PIDFD_GET_INFO, buf)
        except OSError as exc:
            self.info = exc.errno == errno.ESRCH  # ESRCH: 6.13/6.14 (no exit field), reaped; else none at all
            return None
        if not int.from_bytes(buf[:8], sys.byteorder) & PIDFD_INFO_EXIT:
            return None
        return int.from_bytes(buf[EXIT_CODE_AT:EXIT_CODE_AT + 4], sys.byteorder, signed=True)

    def ended(self) -> list[int]:
        """The watched pids whose process has exited (not removed: the caller does)."""
        return [self._pid_of[fd] for fd, _ in self._poll.poll(0) if fd in self._pid_of]

    def close(self) -> None:
        for pid in list(self._fd_of):
            self.remove(pid)
        self._poll.close()


def _exited(pidfd: int) -> bool:
    """Whether the pidfd's process has exited (its pidfd is readable then)."""
    import select

    poll = select.poll()
    poll.register(pidfd, select.POLLIN)
    return bool(poll.poll(0))
