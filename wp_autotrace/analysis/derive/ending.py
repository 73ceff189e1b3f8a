"""What one ending is: the record (Ending) a process's or a pool's ending is told in, its kinds (docs/evidence.md's
table), and the order proofs both kinds of ending rest on (did a process end before a request; whose descendant
is it). How a process ended is decided in endings.py, how a pool did in poolends.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from ..fold.model import Process
    from .alive import Seen

# Ending kinds (processes[].ending.kind): docs/evidence.md's table, in the order they are checked.
EXIT, OS_EXIT, EXEC, SIGNAL, OOM_KILL = "exit", "os-exit", "exec", "signal", "oom-kill"
# The OOM kill count rose by fewer than the processes that ended unexplained then: one of them, not known which.
OOM_AMONG = "oom-among"
WITH_GROUP, WITH_CREATOR, SHUTDOWN, QUIESCED = "with-group", "with-creator", "shutdown", "quiesced"
RUNNING, UNKNOWN = "running", "unknown"
# No record shows its end, nor shows it alive at the end of the log (its watcher stopped writing before: alive.py).
UNSEEN = "end-unseen"
# Pool ending kinds (pools[].ending.kind).
SHUTDOWN_COMPLETED, SHUTDOWN_NEVER_RETURNED = "shutdown-completed", "shutdown-never-returned"
SHUTDOWN_FOUND_DEAD, SIDECAR_ENDED, LEFT_RUNNING = "shutdown-found-dead", "sidecar-ended", "left-running"
# Its sidecar ended by a signal its creator (or one of the creator's parents) sent: the program ended its own pool.
ENDED_BY_CREATOR = "ended-by-creator"
# A fork/spawn pool (no sidecar): its workers ended as its creator exited, or ended on their own before.
ENDED_AT_EXIT, WORKERS_ENDED = "ended-at-exit", "workers-ended"
# A fork/spawn pool its creator got BrokenProcessPool from (poolends.py): the pool broke.
BROKE = "broke"

# Ends seen together: within one watcher tick of each other, plus scheduling slack on a loaded host.
GROUP_SLACK_S = 0.2
# A process's own exit record comes before its real end (its teardown follows): ended before a request only
# by this margin. The watcher's end needs none: it saw the process gone by then, so it had ended (proved_ended_before).
SEEN_LATE_S = 0.05


class Ending(NamedTuple):
    """How one process or pool ended: a stable kind, the words, when, and the records that back it."""

    kind: str
    words: str
    at: float | None  # when it ended (the watcher's end, else its record's), absolute seconds
    evidence: list[str]
    signal: str | None = None
    code: int | None = None
    exit_record_at: float | None = None  # its process_exit record's time, kept apart
    by: str | None = None  # a pool's: who asked it to stop
    group: bool = False  # it ended with the rest of its process group
    sender: Process | None = None  # the traced process whose signal ended it (a signal_sent record)
    last_seen: float | None = None  # UNSEEN's: when a record last showed it alive (alive.py)

    def as_dict(self, rel: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "words": self.words, "at": rel(self.at),
                               "evidence": self.evidence, "signal": self.signal, "code": self.code,
                               "exit_record_at": rel(self.exit_record_at), "group": self.group}
        if self.by is not None:
            out["by"] = self.by
        if self.sender is not None:
            out["sender"] = self.sender.pid
        if self.kind == UNSEEN:
            out["last_seen"] = rel(self.last_seen)
        return out


class EndingsOf(Protocol):
    """What a pool's ending reads of the others (endings.Endings): each process's ending, and a time as the report
    says it."""

    def of(self, p: Process) -> Ending: ...

    def rel(self, ts: float | None) -> str: ...

    def seen(self, p: Process) -> Seen: ...


def proved_ended_before(p: Process, ts: float) -> bool:
    """Does the log prove p ended before ts? Not Process.ended_at (when it ended) but what proves an order: the
    watcher's end (it first missed p then) is after the real one, so before ts proves it. Without one, p's own
    exit record, written before its teardown, proves it only SEEN_LATE_S earlier."""
    if p.gone is not None:
        return p.gone < ts
    return p.end is not None and p.end < ts - SEEN_LATE_S


def ancestors(p: Process) -> list[Process]:
    """p's parents up the tree (bounded: a cycle of reused pids ends it)."""
    out: list[Process] = []
    q = p.parent
    while q is not None and len(out) < 64 and q is not p:
        out.append(q)
        q = q.parent
    return out
