"""Who signalled a process: the signal_sent records of the run's traced processes (runtime/host_patches.py's
signal record), matched to the process that ended right after (docs/evidence.md, "Signals a process sent").

A record says a traced process was about to send signal S to one pid (os.kill(pid): psutil's send_signal,
subprocess's and multiprocessing's kill/terminate), to one process group (os.killpg, os.kill(-pgid), kill(0) for
its own), or to a pidfd's process; a failed call is marked (fold.note_signal) and never matches. A process that
ended within SIGNAL_TO_END_S of such a record (and not before it) ended by that signal: the evidence that tells a
kill of one process from a signal to its whole group. Without a record (a signal from systemd, SLURM, a shell's
`kill`, C code) nothing here matches, and the group rule of endings.py stands.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any, NamedTuple

from ..fold.model import in_namespace, signal_name

if TYPE_CHECKING:
    from ..fold.model import Process

# A record matches an end at most this long after it (plus the watcher's tick, which sees ends late): a signal's
# default action is at once, and a process that handles SIGTERM (a kernel's children, a server) ends within it.
# The same for SIGKILL: the watcher of a loaded host sees an end late, and a SIGKILL that went (no error
# recorded) to the pid of a process that had started (no pid reuse) ended it.
SIGNAL_TO_END_S = 5.0
# A record this much after the end still matches: the sender's clock read and the kernel's delivery race the
# target's end only by scheduling (its own exit record is written before its teardown).
SENT_LATE_S = 0.05
# Frames of the mechanism, not of who asked: the stdlib (subprocess, multiprocessing, asyncio) and psutil.
_MECHANISM = ("/psutil/",)
# A Python process handles SIGINT (KeyboardInterrupt): one that ended by it wrote its exit, or its status says so.
INTERRUPT = "SIGINT"
# The functions of os and signal a record names.
_CALLS = {"kill": "os.kill", "killpg": "os.killpg", "pidfd_send_signal": "signal.pidfd_send_signal"}


class Sent(NamedTuple):
    """One signal a traced process sent, as matched to a process that ended by it."""

    sender: Process
    ts: float
    signal: str
    how: str  # kill, killpg, pidfd_send_signal
    group: int | None  # the process group it went to; None: one process
    frame: dict[str, Any] | None  # the line that asked (innermost outside the stdlib and psutil)

    @property
    def who(self) -> str:
        """'child 7'; a sender joined to no host process: its pid there, never read as the host's pid of that number."""
        who = f"{self.sender.role} {self.sender.pid}"
        return f"{who} (pid {self.sender.pid} in its pid namespace, not known on the host)" if self.spaced else who

    @property
    def spaced(self) -> bool:
        """The sender's pids (its own, its target's) are those of a pid namespace no reading joined to the host."""
        return in_namespace(self.sender)

    @property
    def call(self) -> str:
        """'os.kill at train.py:79 in <module>': the call and the line that asked (the file's name; `evidence`
        has its path)."""
        return self._call(short=True)

    @property
    def call_path(self) -> str:
        return self._call(short=False)

    def _call(self, short: bool) -> str:
        where = frame_text(self.frame, short)
        return f"{_CALLS.get(self.how, self.how)}{' at ' + where if where else ''}"


def _is_library(path: str) -> bool:
    """A frame of the stdlib or psutil: how a signal was sent, not who asked."""
    if any(m in path for m in _MECHANISM):
        return True
    parts = path.replace(os.sep, "/").split("/")
    return any(p.startswith("python3") for p in parts[-3:-1]) and "site-packages" not in parts \
        and "dist-packages" not in parts


def asking_frame(frames: Any) -> dict[str, Any] | None:
    """The innermost frame outside the stdlib and psutil (a library such as ipykernel counts: it asked);
    the outermost where every frame is one of them."""
    kept = [f for f in frames if isinstance(f, dict) and isinstance(f.get("file"), str)] if isinstance(
        frames, list) else []
    return next((f for f in kept if not _is_library(f["file"])), kept[-1] if kept else None)


def frame_text(frame: dict[str, Any] | None, short: bool = False) -> str:
    """'ipykernel/kernelbase.py:1586 in _signal_children' for a package's file (its path below site-packages),
    the normalised path for the program's own (short: its name): 'FILE:LINE in FUNC'."""
    if not frame:
        return ""
    path = os.path.normpath(str(frame.get("file")))
    package = [path.split(m, 1)[1] for m in ("site-packages" + os.sep, "dist-packages" + os.sep) if m in path]
    path = package[0] if package else os.path.basename(path) if short else path
    return f"{path}:{frame.get('line')} in {frame.get('func') or '?'}"


def _after_a_break(r: dict[str, Any]) -> bool:
    """A signal concurrent.futures' terminate_broken sent: it runs only after a worker of the pool ended abruptly,
    and signals every worker, the one already ended too; so it tells no worker's end (which one broke the pool,
    and of what, the log does not say), and matching it named the cleanup as the cause."""
    frames = r.get("frames")
    return isinstance(frames, list) and any(
        isinstance(f, dict) and f.get("func") == "terminate_broken"
        and str(f.get("file", "")).replace(os.sep, "/").endswith("concurrent/futures/process.py") for f in frames)


class Senders:
    """The signals the run's traced processes sent, indexed by the pid and the process group they went to."""

    def __init__(self, procs: list[Process]) -> None:
        self._to_pid: dict[tuple[str, int], list[tuple[Process, dict[str, Any]]]] = {}
        self._to_group: dict[tuple[str, int], list[tuple[Process, dict[str, Any]]]] = {}
        for p in procs:
            for r in p.sent:
                self._index(p, r)

    def _index(self, p: Process, r: dict[str, Any]) -> None:
        target, how = r.get("target"), r.get("how")
        if r.get("error") or not isinstance(target, int) or not isinstance(r.get("signal"), int) or _after_a_break(r):
            return
        if how == "killpg" or (how == "kill" and target <= 0):
            group = -target if how == "kill" and target < -1 else target
            if group == 0:  # the sender's own group
                group = p.pgid if p.pgid is not None else 0
            if group > 0:  # kill(-1): every process it may signal; never matched to a group
                self._to_group.setdefault((p.host, group), []).append((p, r))
        elif target > 0:
            self._to_pid.setdefault((p.host, target), []).append((p, r))

    def __bool__(self) -> bool:
        return bool(self._to_pid or self._to_group)

    def to(self, p: Process, at: float, window: float, status: str | None = None) -> Sent | None:
        """The signal that ended p at `at` (its end as seen, up to `window` late): a record, by a process of p's
        run other than p (p itself for SIGKILL, or for the signal its wait status names: p did not live through it,
        though a handler of p's may have sent it again to end with that status, which the words then say), of a
        signal to p's pid or to its process group, sent after p started and at most SIGNAL_TO_END_S + window
        before that end. A signal to the pid first: it names p itself. Where p's wait status names a signal
        (`status`), only that signal; without one never SIGINT (a Python process handles it: it would have written
        its exit). Of several, the signal last sent, from its first record then (a kernel that SIGTERMs its
        children again while they end: the first one began the end)."""
        run = p.run
        for index, key in ((self._to_pid, p.pid), (self._to_group, p.pgid)):
            if key is None:
                continue
            # p's own record only of SIGKILL (no handler outlives it), or of the signal its wait status names (it
            # ended p, though perhaps sent again by p's handler of one from outside): another may have been handled
            found = [(q, r) for q, r in index.get((p.host, key), ())
                     if (q is not p or r["signal"] == signal.SIGKILL or signal_name(r["signal"]) == status)
                     and q.run is run
                     and (p.start is None or r["ts"] >= p.start)
                     and at - SIGNAL_TO_END_S - window <= r["ts"] <= at + SENT_LATE_S
                     and (signal_name(r["signal"]) == status if status else signal_name(r["signal"]) != INTERRUPT)]
            if found:
                last = max(found, key=lambda x: x[1]["ts"])[1]["signal"]
                q, r = min((x for x in found if x[1]["signal"] == last), key=lambda x: x[1]["ts"])
                return Sent(q, r["ts"], signal_name(r["signal"]), r.get("how") or "kill",
                            None if index is self._to_pid else key, asking_frame(r.get("frames")))
        return None

    def reaching(self, p: Process, signal: str) -> list[Sent]:
        """Every record of `signal` sent to p's pid or to its process group while p lived, in time order (p
        itself the sender where it signalled its own group: kill(0), killpg of its own pgid)."""
        found: list[Sent] = []
        for index, key in ((self._to_pid, p.pid), (self._to_group, p.pgid)):
            if key is None:
                continue
            for q, r in index.get((p.host, key), ()):
                if q.run is p.run and signal_name(r["signal"]) == signal and p.alive_at(r["ts"]):
                    found.append(Sent(q, r["ts"], signal, r.get("how") or "kill",
                                      None if index is self._to_pid else key, asking_frame(r.get("frames"))))
        return sorted(found, key=lambda x: x.ts)
