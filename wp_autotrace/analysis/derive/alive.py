"""Whether a process no record saw end is shown alive at the end of the log: the one rule behind every "still
running at the end of the log", "left running" told of now, and every figure "at the end" (docs/evidence.md,
"Alive at the end").

No record is an end's absence: a process without one was killed with its watcher, or the watcher stalled, or the
log was cut. What shows it alive late is its run's watcher still writing then: the watcher writes the end of every
member it watches at the sample that first misses it, so while it wrote, a member with no end record was alive.
It is never quiet for longer than its own pace: a keep-alive tree record of every live member at least every
KEEPALIVE_S (+ HEARTBEAT_S, the tick that looks for it), and, while a pool process it reads lives, a memory reading
within that reading's window (fold/pace.py: the pace it kept near it). So a process is alive at the end where its
last sign of life (its own last record, or its run's watcher's last record on its host once it had joined) is
within that pace of the log's last record, or (the run's main) the reader's own look finds it alive now; else
whether it still runs, no record shows, and the words say when it was last seen and when the watcher last wrote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

from ...common import vocab
from ..fold.model import in_namespace, last_seen

if TYPE_CHECKING:
    from ..fold.model import Process


# Its pids are a pid namespace's and no reading joined it to the host process the watcher saw (fold/pidns.py): the
# watcher wrote, but none of its entries is known to be this process (never "no watcher on its host").
SPACED = "no watcher entry is known to be it (its pid is its pid namespace's; the watcher's, the host's)"


class Seen(NamedTuple):
    """What the records show of a process with no end: alive at the log's end or not (proven), when it was last
    seen alive (None: never), and when its run's watcher last wrote on its host (None: never)."""

    proven: bool
    last: float | None
    watcher_last: float | None
    log_end: float | None = None
    quiet: float = 0.0  # the longest the watcher is quiet while it runs (quiet_s)
    spaced: bool = False  # a pid namespace's process joined to no host one: no watcher entry is known to be it


def quiet_s(p: Process) -> float:
    """The longest its run's watcher is quiet while p lives and it runs: a memory reading's window where p's pool
    processes were read (the longest window of the last readings of the run's processes with no end on p's host),
    else its keep-alive."""
    run = p.run
    tick = run.interval if run is not None else 0.0
    quiet = vocab.KEEPALIVE_S + vocab.HEARTBEAT_S + 2 * tick
    pace = run.pace if run is not None else None
    if run is None or pace is None:
        return quiet
    windows = [pace.windows(q)[q.mem[-1][0]] for q in run.processes
               if q.mem and q.host == p.host and q.ended_at is None and q.zombie is None]
    return min(quiet, max(windows)) if windows else quiet


def seen_alive(p: Process, log_end: float, quiet: float | None = None) -> Seen:
    """Whether p (no end record) is shown alive at log_end, the log's last record (module docstring); quiet: its
    run's quiet_s on its host, where the caller keeps it (one per run and host: a walk of the run's processes)."""
    run = p.run
    own = seen[1] if (seen := last_seen(p)) is not None else None
    watcher = run.watcher_last.get(p.host) if run is not None else None
    # the watcher's record shows p alive only once p had joined (a process started after it never was watched)
    joined = p.start is None or (watcher is not None and p.start <= watcher)
    signs = [t for t in (own, watcher if joined else None) if t is not None]
    last = max(signs) if signs else None
    quiet = quiet_s(p) if quiet is None else quiet
    # the run's main the reader itself found alive on this host (its pid and create time: verdict.look_now) was
    # alive at the log's end too, whatever its watcher wrote
    now = run is not None and p is run.root and run.alive_now is True
    return Seen(now or (last is not None and watcher is not None and log_end - last <= quiet), last, watcher, log_end,
                quiet, in_namespace(p))


def unseen_words(seen: Seen, say: Callable[[float | None], str]) -> str:
    """'last seen at 1.0 s; no watcher record after 1.0 s: whether it still runs, no record shows' (say: the
    report's time words, Endings.rel)."""
    last = f"last seen at {say(seen.last)}; " if seen.last is not None else ""
    watcher = (f"no watcher record after {say(seen.watcher_last)}" if seen.watcher_last is not None
               else SPACED if seen.spaced else "no watcher record of its run on its host")
    return f"{last}{watcher}: whether it still runs, no record shows"


def unseen_evidence(seen: Seen, say: Callable[[float | None], str]) -> list[str]:
    """The records an unproven ending rests on: no end record, when it was last seen, and the watcher's last record
    against the log's last and its own pace."""
    last = f"no end record; last seen at {say(seen.last)}" if seen.last is not None else "no end record"
    if seen.watcher_last is None:
        return [last, SPACED if seen.spaced else "no record of its run's watcher on its host"]
    return [last, f"its run's watcher last wrote at {say(seen.watcher_last)}, the log's last record at "
            f"{say(seen.log_end)}: quiet longer than its pace ({seen.quiet:.1f} s)"]
