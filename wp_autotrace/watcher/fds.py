"""What a pool process that outlived its creator holds: the listening sockets (ports) and the pipes it inherited.

A worker forked from a server copies every fd the server had open, its listening socket too, whatever its
close-on-exec flag: once the server dies hard, the port stays bound while the worker lives (a restarted server's
bind() fails with EADDRINUSE). A forked worker also holds its creator's stdout and stderr: a process reading those
pipes to their end (subprocess's communicate()) waits for the worker. The watcher reads both once per such
process, never per tick and never for every process: as it is first seen orphaned (its parent ended, or it was
re-parented), for pool processes only, and for the pool processes in the leftover verdict not read yet. Its creator
is its parent as it joined, or, where it joined by its process_start's claim, the parent that record named: one
whose creator died within one look of the fork is first seen already re-parented.

One read costs a listing of /proc/PID/fd and a readlink per fd (at most MAX_FDS), and, where it holds a socket,
one read of its network namespace's /proc/PID/net/{tcp,tcp6,udp,udp6} per look (the kernel lists listening
sockets first: at most NET_BYTES each). The orphans' pipes are matched against the fds of the creator's parent
(one listing more, and /proc/PID/fdinfo/N of the matching fds only: its access mode, the read end or not). Each
process's stat is read once more after its files: a pid reused in between reads as another create time, and what
was read is dropped.
docs/evidence.md says what the finding may claim from it.
"""

from __future__ import annotations

import os

from ..common import vocab as V
from ..common.procfs import read_small, same_process

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

MAX_FDS = 1024  # fds looked at per process: one with 100,000 open costs no more than this
NET_BYTES = 1 << 20  # bytes read of each /proc/PID/net file (~6,000 sockets); listeners come first
MAX_PENDING = 256  # orphans of no pool role yet looked at again per tick (a dict lookup each, no /proc read)
MAX_READ = 4096  # processes read per run at most (then none: a bound on the watcher's work and memory)
NET_FILES = (("tcp", "tcp", b"0A"), ("tcp6", "tcp", b"0A"), ("udp", "udp", b"07"), ("udp6", "udp", b"07"))
O_ACCMODE = 0o3


def fd_links(pid: int, proc: str = "/proc") -> dict[int, str] | None:
    """fd number -> its link (`socket:[INODE]`, `pipe:[INODE]`, a path) of a live process, MAX_FDS at most; None
    unreadable (gone, another user's)."""
    base = f"{proc}/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return None
    out = {}
    for name in names[:MAX_FDS]:
        try:
            out[int(name)] = os.readlink(f"{base}/{name}")
        except (OSError, ValueError):
            continue  # closed since the listing
    return out


def inodes(links: dict[int, str], kind: str) -> dict[int, list[int]]:
    """inode -> the fds whose link is `kind:[inode]` (kind: socket or pipe)."""
    out: dict[int, list[int]] = {}
    head = kind + ":["
    for fd, link in links.items():
        if link.startswith(head) and link.endswith("]") and link[len(head):-1].isdigit():
            out.setdefault(int(link[len(head):-1]), []).append(fd)
    return out


def _hex_addr(text: bytes) -> tuple[str, int] | None:
    """(address, port) of a /proc/net/{tcp,udp}[6] `ADDR:PORT` field (the address in host order words)."""
    import socket  # only where a socket is held: the watcher's start imports none of it

    addr, _, port = text.partition(b":")
    try:
        raw = bytes.fromhex(addr.decode())
        words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
        return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words), int(port, 16)
    except (ValueError, OSError):
        return None


def parse_net(data: bytes, proto: str, state: bytes) -> dict[int, dict[str, Any]]:
    """inode -> {proto, addr, port} of each socket of a /proc/net/{tcp,udp}[6] text in `state` (tcp: 0A, LISTEN;
    udp: 07 with no remote port: bound, not connected); the last line may be cut (NET_BYTES)."""
    out = {}
    for line in data.split(b"\n")[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != state or not f[9].isdigit():
            continue
        local = _hex_addr(f[1])
        if local is None or (proto == "udp" and not f[2].endswith(b":0000")):
            continue
        out[int(f[9])] = {"proto": proto, "addr": local[0], "port": local[1]}
    return out


def listeners(pid: int, proc: str = "/proc") -> dict[int, dict[str, Any]]:
    """inode -> {proto, addr, port} of every listening TCP / bound UDP socket in pid's network namespace."""
    out: dict[int, dict[str, Any]] = {}
    for name, proto, state in NET_FILES:
        out.update(parse_net(read_small(f"{proc}/{pid}/net/{name}", NET_BYTES) or b"", proto, state))
    return out


def read_end(pid: int, fd: int, proc: str = "/proc") -> bool | None:
    """Whether pid's fd is open for reading only (/proc/PID/fdinfo/FD's flags: O_RDONLY): a pipe's read end;
    None unread."""
    for line in (read_small(f"{proc}/{pid}/fdinfo/{fd}") or b"").split(b"\n"):
        if line.startswith(b"flags:"):
            try:
                return int(line.split()[1], 8) & O_ACCMODE == os.O_RDONLY
            except (IndexError, ValueError):
                return None
    return None


class OrphanFds:
    """The run's members' parents as they joined, the members ended since the last look, and the pool processes
    read so far (once each): what one look at the pool processes newly orphaned found."""

    def __init__(self, proc: str = "/proc", stat: Callable[[int], dict[str, Any] | None] | None = None) -> None:
        self.proc = proc
        # a process's stat as the tree reads it (its create_time): read after its fds, the same process or nothing
        self.stat = stat
        self.read: set[tuple[int, float]] = set()  # (pid, create_time) already read
        # pid -> its parent as it joined, of the live members; of those ended since the last look. As it joined: a
        # process's tree entry may be re-read (re-parented) in the very tick its creator's end is seen
        self.parents: dict[int, int] = {}
        self.gone: dict[int, int] = {}
        self.past: dict[int, int] = {}  # the same of members ended before (MAX_READ at most): a late join's creator
        self.pending: dict[int, tuple[Any, Any]] = {}  # orphan with no pool role yet -> (its creator, their parent)

    def joined(self, entry: dict[str, Any], creator: int | None = None) -> None:
        """A member joined; creator: the parent its own process_start named, where it joined by that claim. A process
        whose creator died within one look of its fork joins already re-parented (ppid 1 or a subreaper): its
        creator is the one it named, not the ppid read at the join; one that ended before the last look (its end
        taken already) makes it an orphan at once (pending: read as it has a pool role)."""
        pid = entry["pid"]
        if not isinstance(creator, int) or creator <= 0 or creator == entry["ppid"]:
            self.parents[pid] = entry["ppid"]
            return
        self.parents[pid] = creator
        if creator not in self.parents and creator not in self.gone and creator in self.past \
                and len(self.pending) < MAX_PENDING and not self._made_by_another(creator, entry):
            self.pending[pid] = (creator, self.past[creator])

    def ended(self, pid: int) -> None:
        self.pending.pop(pid, None)
        if pid in self.parents:
            self.gone[pid] = self.parents.pop(pid)
            if len(self.past) >= MAX_READ:
                self.past.clear()  # bounded; at worst a late join's orphaning is not seen
            self.past[pid] = self.gone[pid]

    def look(self, live: dict[int, dict[str, Any]], leftover: bool = False) -> list[dict[str, Any]]:
        """The entries of an `orphan_fds` record's `procs`: for each pool process whose parent (as it joined) ended
        since the last look or, with leftover, each pool process alive, not read yet: `{pid, create_time,
        creator?, listen?, read_by?}`; only those holding a listening socket or a pipe its creator's parent reads.
        An orphan with no pool role yet (a forked worker's role record comes after its start) is looked at again
        each tick until it has one or ends (`pending`, at most MAX_PENDING); nothing else is read per tick."""
        gone, self.gone = self.gone, {}
        if not gone and not self.pending and not leftover:
            return []
        found = []
        for pid, entry in (live if gone or leftover else {p: live[p] for p in self.pending if p in live}).items():
            key = (pid, entry["create_time"])
            if key in self.read or len(self.read) >= MAX_READ:
                continue
            creator = self.parents.get(pid, entry.get("ppid"))
            if creator in gone and not self._made_by_another(creator, entry):
                orphaned: tuple[Any, Any] | None = (creator, gone[creator])
            else:
                orphaned = self.pending.get(pid)
            if orphaned is None and not leftover:
                continue
            if entry.get("role") not in V.POOL_ROLES:
                if orphaned is not None and len(self.pending) < MAX_PENDING:
                    self.pending[pid] = orphaned  # its pool role may come later
                continue
            self.pending.pop(pid, None)
            self.read.add(key)
            # the creator's parent is read where it is a live member (a harness waiting on the creator's output)
            found.append((pid, entry, *(orphaned or (creator, None))))
        return self._read(found, live)

    def _read(self, found: list[tuple[int, dict[str, Any], Any, Any]], live: dict[int, Any]) -> list[dict[str, Any]]:
        out, nets, readers, creators = [], None, {}, {}
        for pid, entry, creator, parent in found:
            links = fd_links(pid, self.proc)
            if not links:
                continue
            got: dict[str, Any] = {"pid": pid, "create_time": entry["create_time"]}
            if isinstance(creator, int) and creator > 0:
                got["creator"] = creator
            socks = inodes(links, "socket")
            if socks:
                nets = listeners(pid, self.proc) if nets is None else nets  # one namespace per run, as a rule
                held = [dict(nets[i], inode=i, fds=sorted(fds)) for i, fds in socks.items() if i in nets]
                if held and creator in live:  # a creator still alive (the leftover verdict): does it hold them too?
                    if creator not in creators:
                        theirs = fd_links(creator, self.proc) or {}
                        creators[creator] = set(inodes(theirs, "socket")) if self._same(creator, live[creator]) \
                            else set()
                    for h in held:
                        if h["inode"] in creators[creator]:
                            h["creator_holds"] = True
                if held:
                    got["listen"] = sorted(held, key=lambda h: (h["port"], h["proto"]))
            pipes = inodes(links, "pipe")
            if parent in live and pipes:
                if parent not in readers:
                    ends = self._read_ends(parent)
                    readers[parent] = ends if self._same(parent, live[parent]) else set()
                # its write ends only (its stdout, its stderr): a pipe both only read (a shared stdin) is no wait
                fds = sorted(fd for i, fds in pipes.items() if i in readers[parent] for fd in fds
                             if read_end(pid, fd, self.proc) is False)
                if fds:
                    got["read_by"] = {"pid": parent, "fds": fds}
            # the pid was another process's by the reads' end (reused): not its fds, sockets or pipe ends
            if ("listen" in got or "read_by" in got) and self._same(pid, entry):
                out.append(got)
        return out

    def _stat(self, pid: int) -> dict[str, Any] | None:
        """pid's stat as the tree reads it; None gone, a zombie, or unread."""
        if self.stat is None:
            from ..common.procfs import ProcReader  # the watcher hands its tree's reader; a test may not

            self.stat = ProcReader().stat
        try:
            return self.stat(pid)
        except OSError:  # the watcher's own fd table full (its strict reader): unknown
            return None

    def _same(self, pid: int, entry: dict[str, Any]) -> bool:
        """Whether pid is still the process of entry, read after its files were: a pid reused between the tree's
        look and the read would give another process's fds (a live process keeps its pid, so one check after
        the read covers it all)."""
        info = self._stat(pid)
        return info is not None and same_process(info["create_time"], entry.get("create_time"))

    def _made_by_another(self, creator: int, entry: dict[str, Any]) -> bool:
        """Whether the pid of entry's creator, a member the tree wrote off (gone or a zombie), names a live process
        now made no later than entry's: the member's pid reused before entry was forked, so that process, not the
        member, made it (a child of the member was made while the member lived, before any reuse of its pid).
        One stat read, only for a process whose creator a member that ended had been."""
        info = self._stat(creator)
        return info is not None and info["create_time"] <= entry["create_time"]

    def _read_ends(self, pid: int) -> set[int]:
        """The pipe inodes pid holds a read end of."""
        links = fd_links(pid, self.proc) or {}
        pipes = inodes(links, "pipe").items()
        return {i for i, fds in pipes if any(read_end(pid, fd, self.proc) is True for fd in fds)}
