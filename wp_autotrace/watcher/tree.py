"""The membership and sampling core of the watcher: which processes are the run's, and when each is looked at.

Tree.sample is one look at the run: (started, ended) since the last one.

Ends first: with pidfds (pidfd.ExitWatch) one epoll call names every
process that exited since the last tick, however seldom its files are
read, so an end is written within one interval. A known process then
costs one read of its children file (of every thread's, when it has
several) when it is due: every tick while it changes, else twice as
late each time nothing new showed, up to MAX_BACKOFF ticks (pool
processes up to POOL_BACKOFF; the root's stat every tick, its children
file backed off only while the probe below reads the kernel's last pid;
no back-off at all without a pidfd). Its stat (zombie, pid reused, exec'd, rss, threads)
is re-read every STAT_EVERY ticks while busy, IDLE_STAT_EVERY when
backed off; a young process (YOUNG_TICKS) is looked at, stat included,
every tick: an exec right after fork is seen at once. A backed-off
process that forked since the last tick is looked at this tick
(probe_new reads the pids handed out since), so a child living one
interval is seen however idle its parent was.
Once the root has ended nothing backs off: the verdict is near. Orphans whose parent ended
between two ticks are found by their process_start in the log only. A scan of /proc every
SCAN_S (a listing costs in proportion to the whole host, so not every
tick; and none while the kernel's last pid stands still: it would find no new pid)
finds new processes of the root's group or session: those that
are not proven members go to ``possible`` (written once each).

What the samples become in the log (tree records, the verdict) is main.py's (Watcher).
"""

from __future__ import annotations

import os

from ..common import vocab as V
from ..common.env import ARGV_ROLES
from ..common.procfs import ProcReader, Unreadable, environ_secrets, make_reader, same_process
from ..common.redact import env_secrets, parse_patterns, redact_argv
from .limits import read_facts
from .logwatch import LogWatch
from .zombies import ZombieWatch

TYPE_CHECKING = False  # typing is for the type checker only: importing it would slow the watcher's start
if TYPE_CHECKING:
    from typing import Any, Callable


def role_from_cmd(cmd: str) -> str | None:
    """The role a command line shows (a compile sidecar, say), if any."""
    for suffix, role in ARGV_ROLES:
        if suffix in cmd.replace(os.sep, "/"):
            return role
    return None

STAT_EVERY = 5  # ticks between two stat reads of one process (zombie, reuse, exec, rss, threads)
# Cost grows with what changes: a process whose children file showed nothing new is looked at
# (children, and stat when due) twice as late as the time before, up to MAX_BACKOFF ticks (3.2 s
# at the default interval), pool processes up to POOL_BACKOFF; any new child resets it to every
# tick. Only processes with a pidfd (ExitWatch) back off, so ends stay within one interval, and a
# new child of a backed-off process is still seen within one interval: each tick the pids the
# kernel handed out since the last (probe_new) are read, and a member that is the parent of one
# is looked at that tick, whatever its back-off. 32, not 16 (docs/scale.md, "Watcher at 1,000 idle
# run processes"): an idle process's stat came every 32 ticks all the same (a look every 16,
# IDLE_STAT_EVERY passed at every second one), and its children file is the probe's backstop only;
# half the looks of a thousand idle processes were a third of the watcher's CPU.
MAX_BACKOFF = 32
# New pids read one by one per tick at most; past this many since the last tick (a host forking
# fast, or the pid counter wrapped) one listing of /proc is cheaper, and is done instead.
PROBE_MAX = 64
POOL_BACKOFF = 2
# The periodic /proc listing waits for the kernel's last pid to move, but is made at least every this many
# periods (16 s at the default): a virtualized /proc/loadavg (LXCFS's, refreshed on its own clock) may lag the
# kernel's cursor or stand still, and a process only a listing finds would otherwise never join.
LISTING_BACKSTOP = 8
# A backed-off process's stat (rss, exec, threads) is read at its first look this many ticks after
# the last (2 s at the default interval: the rss heartbeat's own period): every 32 ticks once fully
# backed off (MAX_BACKOFF); a busy one's every STAT_EVERY.
IDLE_STAT_EVERY = 20
# A process that joined the run less than this many ticks ago is looked at, stat included, every
# tick: a fork is often followed at once by an exec (sh, then its command), and by children.
YOUNG_TICKS = 10
# Looked at often and their stat (rss) read every STAT_EVERY ticks: the main, and every pool process (the memory
# sampler re-reads a pool process whose rss grew: an autotune subprocess backed off like an idle process had its
# growth seen 2 s late, by when it could have ended)
BUSY_ROLES = frozenset((V.MAIN, *V.POOL_ROLES))
SCAN_S = 2.0  # seconds between /proc scans for processes of the root's group or session ("possible")
CMD_CHARS = 1000  # command line kept per process; `cmd_len` says when it was cut
ENTRY_KEYS = ("pid", "ppid", "name", "create_time", "rss")  # a tree entry's fields from stat
MAX_POSSIBLE = 10000  # (pid, create_time) pairs remembered as already written "possible"

class Tree:
    """The run's processes as the last sample saw them, and how the next sample finds what changed."""

    def __init__(self, root: int, root_ct: float, interval: float, reader: Any = None, log: LogWatch | None = None,
                 redact: str = "", on_end: Callable[[int], None] | None = None) -> None:
        self.on_end = on_end  # told each pid written off (the watcher forgets what it wrote of it)
        self.root = root
        self.root_ct = root_ct
        self.interval = interval
        # Strict: a /proc read that fails for a reason other than "gone" (EMFILE...) raises Unreadable,
        # and the process is left as it was this tick: never an end read from a failed read.
        self.reader = reader or make_reader(strict=True)
        self.unread: set[int] = set()  # candidates whose stat could not be read: tried again next tick
        self.log = log
        # Command lines are masked as process_start's argv is (redact.py); secret values from the
        # environment, which the watcher inherits from the root.
        self.patterns = parse_patterns(redact)
        self.secrets = env_secrets(os.environ, self.patterns)
        # Never part of the run: this process, and the intermediate that started it.
        self.exclude = {os.getpid()} | ({os.getppid()} if os.getppid() != root else set())
        self.live: dict[int, dict[str, Any]] = {}  # the run's processes alive at the last sample
        self.threads: dict[int, int] = {}  # their thread counts, from their last stat
        self.listed: set[int] = set()  # every pid /proc listed at the last scan
        self.possible: list[dict[str, Any]] = []  # found since the last tree record: shares group/session only
        self.possible_seen: set[tuple[int, float]] = set()  # (pid, create_time) already written as possible
        self.ended_keys: set[tuple[int, float]] = set()  # (pid, create_time) whose end is written (bounded)
        self.scan_every = max(1, round(SCAN_S / interval))
        self.stat_every = STAT_EVERY
        self.scanned_after_root = False
        self.samples = 0
        self.sampled_at: float | None = None  # the last sample's time (an end's `seen`: see _end)
        self.root_end: float | None = None  # when a sample first found the root gone (set by the writer)
        # Back-off (see sample()): ends come from pidfds, where the reader has them.
        exit_watch = getattr(self.reader, "exit_watch", None)
        self.exits = exit_watch() if exit_watch is not None else None
        self.backoff: dict[int, int] = {}  # pid -> ticks between two looks at it now
        self.next_look: dict[int, int] = {}  # pid -> the sample that looks at it next
        # The same, by sample (entries may be stale: next_look decides), and the members with no back-off:
        # a tick visits only these, not a thousand idle members (docs/scale.md, the per-tick cost).
        self.wake: dict[int, list[int]] = {}
        self.every: set[int] = set()
        self.stat_at: dict[int, int] = {}  # pid -> the sample that last read its stat
        self.joined: dict[int, int] = {}  # pid -> the sample it joined the run in (young ones: stat as busy)
        self.images: dict[int, int | None] = {}  # pid -> its stat's image (arg_start) at the last read: exec sign
        self.last_pid: int | None = None  # the kernel's last pid at the last probe (probe_new)
        self.listed_last_pid: int | None = None  # last_pid as the last listing of /proc began (gather)
        self.restated: set[int] = set()  # members whose stat (rss) was read since the watcher's last heartbeat
        self.zombies = ZombieWatch(self.reader)  # members written off while defunct (zombies.py)

    def _entry(self, info: dict[str, Any], via: str) -> dict[str, Any]:
        return make_entry(self, info, via)

    def _via(self, info: dict[str, Any], members: Any) -> str | None:
        """Why this process (not yet in the run) is one of the run's, or None: it is the root,
        its parent is a member, or the log has its process_start for this run. Nothing else."""
        pid, ct = info["pid"], info["create_time"]
        if pid == self.root and (not self.root_ct or same_process(ct, self.root_ct)):
            return V.VIA_ROOT
        if info["ppid"] in members:
            return V.VIA_CHILD
        if self.log is None:
            return None
        if pid in self.log.claimed and same_process(self.log.claimed[pid], ct):
            return V.VIA_CLAIM
        if pid in self.log.below and same_process(self.log.below[pid], ct):
            return V.VIA_CHILD  # the root saw it below itself as it exited: descent, seen by the root
        return None

    def is_root(self, pid: int) -> bool:
        """pid is the root's and its process is the root (it joined via root: its create_time matched), not one
        that took the pid after the root ended (identity is (pid, create_time) here as in the log's readers)."""
        return pid == self.root and self.live.get(pid, {}).get("via") == V.VIA_ROOT

    def sample(self, now: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """One look at the run: (started, ended) since the last one (the module docstring says how)."""
        started: list[dict[str, Any]] = []
        ended: list[dict[str, Any]] = []
        candidates: set[int] = set()
        exits = self.exits
        if exits is not None:
            for pid in exits.ended():
                if pid in self.live:
                    self._end(pid, now, ended)
        parents, scan = self.probe_new()
        for pid in self._due(parents):
            if pid in self.live:
                self._look_at(pid, pid in parents, now, started, ended, candidates)
        gather(self, candidates, scan)
        strangers = self._adopt(candidates.difference(self.exclude, self.live), started)
        note_possible(self, strangers)
        if self.samples == 0 and not self.is_root(self.root) and self.root_ct:
            # Gone before the first sample (it exec'd a program that ended, or was killed): its end is
            # still this sample's, so a reader has one for the root.
            ended.append({"pid": self.root, "create_time": self.root_ct, "end": now})
        if self.log is not None:
            claims_already_gone(self, now, ended)
            self.log.claimed.clear()
            self.log.below.clear()
        self.samples += 1
        self.sampled_at = now
        return started, ended

    def _due(self, parents: set[int]) -> list[int]:
        """The members to look at this tick: those with no back-off, those whose back-off ends now, the
        parents of new pids (probe_new); every member once the root has ended."""
        samples, live, waits = self.samples, self.live, self.next_look
        woken = self.wake.pop(samples, ())
        if self.root_end is not None:
            return list(live)
        if len(self.every) + len(waits) != len(live):  # a member came in some other way: count again
            self.every = {pid for pid in live if pid not in waits}
            return [pid for pid in live if waits.get(pid, 0) <= samples or pid in parents]
        due = dict.fromkeys((self.root, *self.every) if self.root in live else self.every)  # the root: its stat
        due.update(dict.fromkeys(pid for pid in woken if waits.get(pid) == samples))
        due.update(dict.fromkeys(parents))
        return list(due)

    def _look_at(self, pid: int, forked: bool, now: float, started: list[dict[str, Any]],
                 ended: list[dict[str, Any]], candidates: set[int]) -> None:
        """One member's look this tick, when it is due (see sample): its stat when due, its children."""
        samples = self.samples
        backed_off = self.root_end is None and self.next_look.get(pid, 0) > samples and not forked
        if backed_off and not (pid == self.root and self.is_root(pid)):  # the root's stat every tick, children when due
            return  # backed off: its end still comes from its pidfd this tick
        since = samples - self.stat_at.get(pid, -IDLE_STAT_EVERY)
        # forked: its stat too, for its thread count (a new thread's child is in that thread's file). Asked
        # cheapest first: a backed-off process's look is as a rule IDLE_STAT_EVERY or more after its last stat.
        restat = (since >= IDLE_STAT_EVERY or forked or (pid == self.root and self.is_root(pid))
                  or samples - self.joined.get(pid, -YOUNG_TICKS) < YOUNG_TICKS  # young
                  or (since >= self.stat_every and self.backoff.get(pid, 1) <= POOL_BACKOFF))  # busy
        try:
            if restat and not self._restat(pid, now, started, ended, candidates):
                return
            if backed_off:  # the root's
                return
            kids = self.reader.children(pid, self.threads[pid])
        except Unreadable:
            if self.next_look.get(pid, samples + 1) <= samples:  # unchanged this tick, looked at again next tick
                self._wake_at(pid, samples + 1)
            return
        if kids is None:
            self._end(pid, now, ended)
        else:
            fresh = set(kids).difference(self.live)  # in C: the root's thousand children cost microseconds
            candidates.update(fresh)
            self._schedule(pid, bool(fresh))

    def probe_new(self) -> tuple[set[int], bool]:
        """(members that are the parent of a pid handed out since the last tick, whether to list /proc now).

        One read of the kernel's last pid (ProcReader.last_pid) when nothing started anywhere; else
        the stat of each new pid (a thread's too: its ppid is its process's parent, so at worst a
        parent is looked at needlessly; joining stays by children files and listings, which name
        processes only). Past PROBE_MAX new pids, or with the counter wrapped, a listing of /proc
        this tick instead. Without last_pid (psutil) nothing: the back-off's bound applies.
        """
        read_last = getattr(self.reader, "last_pid", None)
        last = read_last() if read_last is not None else None
        before, self.last_pid = self.last_pid, last
        if last is None or before is None or last == before:
            return set(), read_last is not None and last is None and self.samples > 0
        if not 0 < last - before <= PROBE_MAX:
            return set(), True
        parents = set()
        for pid in range(before + 1, last + 1):
            try:
                info = self.reader.stat(pid)
            except Unreadable:
                continue
            if info is not None and info["ppid"] in self.live:
                parents.add(info["ppid"])
        return parents, False

    def _schedule(self, pid: int, changed: bool) -> None:
        """When to look at pid again: next tick after a change, else twice as late as last time.

        Only a process whose end its pidfd tells is backed off (pool processes to POOL_BACKOFF ticks, others
        and the root to MAX_BACKOFF; the root's children file only, where probe_new reads the last pid: docs/scale.md,
        "Watcher at 1,000 idle run processes"): its end is still seen within one interval; a child it forks too.
        """
        if self.exits is None or pid not in self.exits or self.root_end is not None or (
                pid == self.root and self.is_root(pid) and self.last_pid is None):
            self.backoff.pop(pid, None)  # once the root ended, every process every tick: the verdict is near
            self.next_look.pop(pid, None)
            self.every.add(pid)
            return
        if changed or self.samples - self.joined.get(pid, -YOUNG_TICKS) < YOUNG_TICKS:  # or young
            ticks = 1
        else:
            cap = POOL_BACKOFF if self.live[pid].get("role") in BUSY_ROLES and not (
                pid == self.root and self.is_root(pid)) else MAX_BACKOFF
            ticks = min(self.backoff.get(pid, 1) * 2, cap)
        self.backoff[pid] = ticks
        self.every.discard(pid)
        self._wake_at(pid, self.samples + ticks)

    def _wake_at(self, pid: int, sample: int) -> None:
        self.next_look[pid] = sample
        self.wake.setdefault(sample, []).append(pid)

    def _restat(self, pid: int, now: float, started: list[dict[str, Any]], ended: list[dict[str, Any]],
                candidates: set[int]) -> bool:
        """Re-read a known process's stat; False if it ended (a reused pid becomes a candidate)."""
        old = self.live[pid]
        self.stat_at[pid] = self.samples
        info = self.reader.stat(pid)
        if info is None or info["create_time"] != old["create_time"]:
            self._end(pid, now, ended)
            if info is not None:
                candidates.add(pid)
            return False
        old["rss"], old["ppid"] = info["rss"], info["ppid"]  # the parent now: re-parented?
        self.restated.add(pid)
        self.threads[pid] = info["threads"]
        image, self.images[pid] = self.images.get(pid), info.get("image") or self.images.get(pid)
        # exec'd (or no cmd yet): its name or image changed (a python that execs python keeps its name: seen between
        # fork and exec, a sidecar had its parent's command line, no role); an image of 0 is no exec but an exit (its
        # memory released, argv empty, no zombie yet). `exec`, both images known: exec'd, or renamed (setproctitle);
        # an image read as 0 now (an exec into a setuid program: not dumpable, its arg_start hidden) tells neither
        if info["name"] != old["name"] or not old["cmd"] or (image and self.images[pid] != image):
            again = self._entry(info, old["via"]) | ({"exec": self.images[pid] != image}
                                                     if image and info.get("image") else {})
            if (again["name"], again["cmd"]) != (old["name"], old["cmd"]):
                self.live[pid] = again
                started.append(again)
        return True

    def _end(self, pid: int, now: float, ended: list[dict[str, Any]]) -> None:
        """Write off a process: its end is now, the first sample where it was gone; `seen`, where known, the last
        sample that saw it alive: the one before, where its pidfd (polled every tick, as each sample begins) was
        not yet readable and it was a member already. It ended in (seen, end]: an `oom` record read after that
        sample's tree look may hold its kill (evidence.md). Absent where that look is not known (no pidfd)."""
        old = self.live.pop(pid)
        seen = (self.sampled_at if self.exits is not None and pid in self.exits
                and self.joined.get(pid, self.samples) < self.samples else None)
        self.threads.pop(pid, None)
        self.backoff.pop(pid, None)
        self.next_look.pop(pid, None)
        self.every.discard(pid)
        self.stat_at.pop(pid, None)
        self.joined.pop(pid, None)
        self.images.pop(pid, None)
        status = self.exits.status(pid) if self.exits is not None else None  # reaped: its pidfd's (a zombie's: below)
        if self.exits is not None:
            self.exits.remove(pid)
        ended.append(_ended(pid, old["create_time"], now, seen, status))
        self.zombies.ended(pid, old["create_time"], now)
        if len(self.ended_keys) >= MAX_POSSIBLE:
            self.ended_keys.clear()
        self.ended_keys.add((pid, old["create_time"]))
        if self.on_end is not None:
            self.on_end(pid)

    def _adopt(self, candidates: set[int], started: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Candidates that belong join the run, then their own children, down the tree.

        Returns the stat of the candidates that did not join (strangers)."""
        strangers: dict[int, dict[str, Any]] = {}
        while candidates:
            fresh = {}
            for pid in candidates.difference(self.live):
                try:
                    info = self.reader.stat(pid)
                except Unreadable as exc:
                    if exc.transient():
                        self.unread.add(pid)
                    continue
                if info is not None:
                    fresh[pid] = info
            candidates = set()
            grew = True
            while grew:  # parents first, whatever the order the pids came in
                grew = False
                for pid, info in list(fresh.items()):
                    via = self._via(info, self.live)
                    if via is not None:
                        self.live[pid] = entry = self._entry(info, via)
                        if via == V.VIA_ROOT and not self.root_ct:
                            self.root_ct = info["create_time"]  # unknown to the root: pinned at first sight
                        self.threads[pid] = info["threads"]
                        self.stat_at[pid] = self.joined[pid] = self.samples
                        self.images[pid] = info.get("image")
                        self.every.add(pid)  # looked at every tick until its first look schedules it
                        if self.exits is not None:
                            # Opened just after its stat was read: a pid is not reused within that moment
                            # (pids are handed out in turn through pid_max), so the pidfd is this process's.
                            self.exits.add(pid)
                        started.append(entry)
                        del fresh[pid]
                        grew = True
                        try:
                            kids = self.reader.children(pid, info["threads"]) or []
                        except Unreadable:
                            kids = []  # young: its children are read again next tick
                        candidates.update(k for k in kids if k not in self.live and k not in self.exclude)
            strangers.update(fresh)
        return [info for pid, info in strangers.items() if pid not in self.live]

def gather(tree: Tree, candidates: set[int], scan: bool) -> None:
    """Tree.sample's: add the pids that may join besides members' children: the root at first, the log's claims
    and the root's below list, a /proc listing's new pids when one is due, reads retried from last tick."""
    if tree.samples == 0:
        candidates.add(tree.root)
    if tree.log is not None:
        candidates.update(tree.log.claimed)
        candidates.update(tree.log.below)
    after_root = tree.root_end is not None and not tree.scanned_after_root
    if scan or after_root or (tree.samples % tree.scan_every == 0 and (
            tree.last_pid is None or tree.last_pid != tree.listed_last_pid
            or tree.samples % (tree.scan_every * LISTING_BACKSTOP) == 0)):
        # A periodic listing is made only where the kernel handed out a pid since the last (its last pid
        # moved): else every pid it would list was listed then, and its new pids are none.
        tree.scanned_after_root = tree.root_end is not None
        try:
            listed = tree.reader.pids()
            tree.listed_last_pid = tree.last_pid  # read before the listing: any pid after it is listed again
        except OSError:  # EMFILE...: no listing this time; the next scan diffs against the last one
            listed = tree.listed
        candidates.update(listed - tree.listed)
        tree.listed = listed
    candidates.update(tree.unread)
    tree.unread.clear()


def _ended(pid: int, create_time: float, end: float, seen: float | None, status: int | None) -> dict[str, Any]:
    """A tree record's `ended` entry (Tree._end): `seen` and `status` where known; `status` its wait status, where its
    parent had reaped it before this look: the kernel keeps it with the pidfd (Linux 6.15+), and no zombie holds it."""
    return ({"pid": pid, "create_time": create_time, "end": end} | ({"seen": seen} if seen is not None else {})
            | ({"status": status} if status is not None else {}))


def claims_already_gone(tree: Tree, now: float, ended: list[dict[str, Any]]) -> None:
    """A process whose process_start claims the run but that was gone before any sample saw it
    (a pool worker living a few milliseconds): its end is this sample's, so no process of the run
    is left without an end. Once per (pid, create_time)."""
    assert tree.log is not None
    for pid, ct in tree.log.claimed.items():
        key = (pid, ct)
        if pid in tree.live or key in tree.ended_keys:
            continue
        if len(tree.ended_keys) >= MAX_POSSIBLE:
            tree.ended_keys.clear()  # bounded memory; at worst an end is written twice
        tree.ended_keys.add(key)
        ended.append({"pid": pid, "create_time": ct, "end": now})


def note_possible(tree: Tree, strangers: list[dict[str, Any]]) -> None:
    """Strangers sharing the root's group or session: listed once each as possible, never members."""
    for info in strangers:
        key = (info["pid"], info["create_time"])
        via = _possibly(info, tree.root, tree.root_ct)
        if via is None or key in tree.possible_seen:
            continue
        if len(tree.possible_seen) >= MAX_POSSIBLE:
            tree.possible_seen.clear()  # bounded memory; at worst one is listed twice
        tree.possible_seen.add(key)
        entry = make_entry(tree, info, via)
        entry.pop("role", None)  # not the run's: no run role
        tree.possible.append(entry)


def _possibly(info: dict[str, Any], root: int, root_ct: float) -> str | None:
    """group or session when this non-member shares the root's (and is younger): not evidence."""
    if info["create_time"] < root_ct:
        return None
    pgrp, sid = info["groups"]
    return V.VIA_GROUP if pgrp == root else V.VIA_SESSION if sid == root else None


def make_entry(tree: Tree, info: dict[str, Any], via: str) -> dict[str, Any]:
    """A tree entry for a process joining the run: its stat, command line, process group, role and why it
    is the run's."""
    pid = info["pid"]
    # Masked argument by argument, then joined; with the secrets of its own environment too
    # (a variable only this child was given).
    secrets = tree.secrets + environ_secrets(tree.reader.environ(pid), tree.patterns)
    cmd = " ".join(redact_argv(tree.reader.argv(pid), tree.patterns, secrets)).strip()
    entry = {k: info[k] for k in ENTRY_KEYS}
    entry["cmd"] = cmd[:CMD_CHARS]
    if info.get("groups"):
        entry["pgid"] = info["groups"][0]  # its process group: what a group's signal reached (evidence.md)
    if len(cmd) > CMD_CHARS:
        entry["cmd_len"] = len(cmd)
    # its ulimit -u and uid, read once here (not through psutil: without /proc none is claimed); a compile job's
    # failure to fork or start a thread is told against them (analysis/findings/compile.py); the ending signals it
    # ignores, from the same status read (a process left running after a Ctrl-C: findings/leftovers.py)
    if isinstance(tree.reader, ProcReader):
        entry.update(read_facts(pid))
    role = V.MAIN if via == V.VIA_ROOT else role_from_cmd(cmd)  # not by pid: one may take the root's
    parent = tree.live.get(info["ppid"])
    if role == V.COMPILE_SIDECAR and parent and parent.get("cmd") == entry["cmd"]:
        role = V.COMPILE_WORKER  # forked by the sidecar: same command line
    elif parent and spawned_by_a_sidecar(tree, role, cmd, parent):
        # A sidecar's spawn or forkserver pool: the worker re-imports torch for seconds before torch's initializer
        # says its role; read as one of its pool from its start (the pool's figure counts it, or says it is unread)
        role = V.COMPILE_WORKER
    if role:
        entry["role"] = role
    entry["via"] = via
    return entry


def spawned_by_a_sidecar(tree: Tree, role: str | None, cmd: str, parent: dict[str, Any]) -> bool:
    """Whether a process is a compile worker a sidecar's pool started with multiprocessing's spawn (its command
    line is spawn_main's, its parent the sidecar) or forkserver (forked by the forkserver the sidecar started,
    with its command line): nothing else a sidecar starts runs these (its resource tracker's is its own)."""
    if role is None and cmd.endswith(V.SPAWNED_ARG):
        return parent.get("role") in V.SIDECAR_ROLES
    if role == V.FORKSERVER and parent.get("role") == V.FORKSERVER and parent.get("cmd") == cmd:
        server = tree.live.get(parent.get("ppid", -1))
        return server is not None and server.get("role") in V.SIDECAR_ROLES
    return False
