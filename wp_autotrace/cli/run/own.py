"""Which runs of a log are the program `run` started, where others write the same log (`run --log L` twice at
once, an exported WP_AUTOTRACE_LOG): its summary answers those alone, and waits for their verdicts alone.

A run is `run`'s where the log joins it to run's own run_exit (its main was the command, or a step of it:
fold/finish.match_waits), or its main's parents, read live on this host, lead up to `run` itself. It is
another's where the log joins it to another run_exit, it began before `run` started its program, or those
parents reach a process older than `run` before reaching it (a shell, another `run`: not below this one).
A main whose pids are another pid namespace's (`unshare -p`: its own pid 1, ppid 0) is followed from a live process
of that namespace instead. Where nothing tells (a parent gone, or gone so that init took its child, a namespace none
of whose processes lives, another host), a run begun after the program started is counted as its own, as the time
alone says. An orphan a subreaper took (systemd --user, tini -s: the kernel hands it to its nearest subreaper
ancestor, so one of `run`'s parents) is told by what it kept: the environment `run` gave its program (tracing on,
this log). Another `run` beside this one has none; a program started traced onto the same log by one of `run`'s
parents, through a shell, has it too: told by the time alone, as above.
"""

from __future__ import annotations

import os
from typing import Any

from ...common.vocab import MAIN

# A chain of parents longer than this is not walked further (not known): a run's main sits a few levels below
# its `run`, a shell or two between.
MAX_PARENTS = 64


class Own:
    """`run`'s own runs of a log's model: me, its pid; since, when it started its program (time.time());
    host, its host's name; reader: a ProcReader of this host (None: no /proc, no parents read); log: the log run
    gave its program (its environment's LOG_ENV, with ENABLE_ENV on)."""

    def __init__(self, me: int, since: float, host: str, reader: Any, log: str | None = None) -> None:
        from ...common.env import ENABLE_ENV, LOG_ENV, TRUE_WORDS

        self.me, self.since, self.host, self.reader = me, since, host, reader
        # what run put in its program's environment: its children keep it wherever the kernel moves them
        self.given = None if log is None else {f"{ENABLE_ENV}={TRUE_WORDS[0]}".encode(),
                                               f"{LOG_ENV}={log}".encode(errors="surrogateescape")}
        self.ancestors: set[int] | None = None  # run's own parents, read once where needed
        mine = reader.stat(me) if reader is not None else None
        self.my_ticks: int | None = mine["start_ticks"] if mine is not None else None
        self.my_ns = _pid_namespace() if reader is not None else None
        self.below: dict[str, bool | None] = {}  # run id -> what its parents said (read once: they end)

    def record(self, rec: dict[str, Any] | None) -> bool | None:
        """Whether a run_exit record is this run's own (None: no record)."""
        if rec is None:
            return None
        return rec.get("pid") == self.me and rec.get("host") == self.host and rec.get("since") == round(self.since, 6)

    def of(self, run: Any) -> bool:
        """Whether the run (fold.model.Run) is this `run`'s program's."""
        # a namespace's first process joined to a command by its start alone (fold/finish._namespace_mains: the
        # only run_exit yet may be run's own while another program's runs): its live namespace may say otherwise
        by_time = run.run_exit is None and run.root is not None and not run.root.ppid
        for rec in (run.run_exit, run.launch, run.command_exit):
            joined = self.record(rec)
            if joined is not None and not (joined and by_time):
                return joined
        if run.start is None or run.start < self.since:
            return False
        if run.id not in self.below:
            # a log still being read (run's wait) has no root chosen yet: the main its records name
            root = run.root or next((p for p in run.processes if p.role == MAIN and p.pid == run.root_pid), None)
            if root is None:
                return True  # its main not yet read: by the time alone
            self.below[run.id] = self.parents_reach_me(root)
        return self.below[run.id] is not False

    def started_inside(self, run: Any, mine: list[Any]) -> bool:
        """Whether another `run`'s run (its run_exit joins it to that `run`) was started by this run's program: that
        `run`'s parent, as its record names it on this host, is a process of this run's own runs (`run` inside
        `run`: a script's step that is itself `wp-autotrace run -- ...`), not a program beside this one."""
        rec = run.run_exit or run.launch
        if rec is None or rec.get("host") != self.host or self.record(rec):
            return False
        ppid, ts = rec.get("ppid"), rec.get("ts")
        return any(p.pid == ppid and p.host == self.host
                   and (p.create_time is None or ts is None or p.create_time <= ts) for r in mine for p in r.processes)

    def parents_reach_me(self, root: Any) -> bool | None:
        """Whether the parents of a run's main, read live, lead up to `run`: True; False where they reach a
        process that started before `run` did (so not below it); None where they cannot be followed (a parent
        gone, its pid taken by a newer process, a main on another host, a process whose parent exited: the kernel
        gives it to init, older than `run` though `run` started it). A main whose pids are another pid namespace's
        (pid N there is not this /proc's pid N) is followed from a live process of that namespace instead."""
        from ...analysis.fold.identities import namespace_of

        run = root.run
        if self.my_ticks is None or run is None or run.real_host.get(root.host, root.host) != self.host:
            return None
        named = namespace_of(root.host)
        ns = named[1] if named is not None else run.home_ns.get(root.host)
        if ns != self.my_ns:
            return self._namespace_reaches_me(ns)
        if not root.ppid or root.host != self.host:
            return None
        return self._walk(root.ppid, root.create_time)

    def _namespace_reaches_me(self, ns: int | None) -> bool | None:
        """_walk from a live process of pid namespace ns (its /proc/PID/ns/pid inode); None where ns is the initial
        one (no inode a record names) or none of its processes lives."""
        from ...watcher.limits import read_pidns

        if ns is None:
            return None
        member = next((pid for pid in sorted(self.reader.pids()) if read_pidns(pid) == ns), None)
        return None if member is None else self._walk(member, None)

    def _walk(self, pid: int, born: float | None) -> bool | None:
        """From pid (a parent the log names, born by `born`, else a live process) up its parents (parents_reach_me)."""
        from ...common.procfs import SAME_START_S

        child = None  # the process whose live parent pid is (None: pid is the log's, or the first one read)
        for _ in range(MAX_PARENTS):
            if pid == self.me:
                return True
            if pid == 1:  # an orphan's parent (its own exited): init says nothing of who started the chain
                return None
            info = self.reader.stat(pid) if pid > 0 else None
            if info is None or (born is not None and info["create_time"] > born + SAME_START_S):
                return None  # gone, or a newer process that got its pid: not the parent the log names
            if info["start_ticks"] < self.my_ticks:
                return None if child is not None and self._taken_from_me(child, pid) else False
            child, pid, born = pid, info["ppid"], info["create_time"]
        return None

    def _taken_from_me(self, child: int, parent: int) -> bool:
        """Whether child, newer than run, became parent's (older) as an orphan of run's program: parent is one of
        run's own parents (a subreaper takes only its descendants' orphans) and child carries the environment run
        gave its program (another `run` started by run's parent has none of it)."""
        if self.given is None:
            return False
        if self.ancestors is None:
            from ..cleanup.candidates import ancestors

            self.ancestors = set(ancestors(self.me, self.reader, MAX_PARENTS + 1)[1:])  # run, then its parents
        return parent in self.ancestors and self.given <= set(self.reader.environ(child).split(b"\0"))


# The initial pid namespace's inode (the kernel's PROC_PID_INIT_INO): a traced record carries no `pidns` there
INIT_PID_NS = 0xEFFFFFFC


def _pid_namespace() -> int | None:
    """run's own pid namespace as a record's `pidns` names it: None for the initial one (or where unreadable)."""
    from ...watcher.limits import read_pidns

    ns = read_pidns(os.getpid())
    return None if ns == INIT_PID_NS else ns
