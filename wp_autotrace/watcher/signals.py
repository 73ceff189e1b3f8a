"""The signals a job's end sends the watcher: taken, recorded, and answered by watching on, bounded.

A scheduler ends a job step by signalling every process of the step's cgroup: slurmstepd (proctrack/cgroup;
scancel, a time limit), systemd's KillMode=control-group. The watcher is one of them (its double fork does
not leave the cgroup): SIGTERM, then SIGKILL after a grace (SLURM's KillWait, 30 s by default).
`srun --signal=USR1@60` / `sbatch --signal` send SIGUSR1 (or 2) to each a while before the end. Each of
these signals' default action would end the watcher without a record, exactly when the window that matters
begins: the main's SIGTERM handler, a pool's shutdown hanging, what is left when SIGKILL comes.

Protocol (the watcher is its own process: nothing here touches the program's signals):
- SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 are blocked in the watcher before it starts any thread (a
  thread that did not block one would take it at its default action), and taken with sigtimedwait as the
  watcher's sleep: a signal wakes it at once, and its siginfo names the sender (pid, uid; its name read
  from /proc then, one small read: "slurmstepd" says who ended the step).
- Each one taken is written at once as a `watcher_signal` record (SIGKILL may follow before any other), at
  most MAX_SAID of them; the rest are counted (watcher_exit's `signals`).
- SIGUSR1/SIGUSR2: recorded, nothing else (a checkpoint request meant for the program).
- The first SIGTERM/SIGINT/SIGHUP: the watcher keeps watching until the run ends as always (the root's
  end, the verdict, the leftovers' ends), but no longer than STOP_LINGER_S after the signal (within its
  own linger): SIGKILL follows anyway, and its last records must come before it.
- A second SIGTERM/SIGINT/SIGHUP: a user who means it. The watcher stops now: what it can say (the
  verdict if the root is gone, the final tree, watcher_exit), a few ms of writes. From then on the three
  are unblocked at their default action: a third one ends it at once.
"""

from __future__ import annotations

import signal
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CAUGHT = (*ENDING, signal.SIGUSR1, signal.SIGUSR2)
# After the first ending signal the watcher leaves within this long (or its linger, if shorter): under
# SLURM's default KillWait (30 s), so its verdict and watcher_exit are written before the SIGKILL.
STOP_LINGER_S = 25.0
# watcher_signal records written at most: a loop that signals the watcher cannot fill the log.
MAX_SAID = 16
# How a signal of CAUGHT comes to a process (siginfo's si_code): kill() SI_USER, sigqueue() SI_QUEUE, tgkill()
# SI_TKILL, the kernel (a terminal's hangup or ^C) SI_KERNEL. CPython's sigtimedwait returns a siginfo it never
# filled where the wait was stopped (SIGSTOP, a SLURM suspend, a debugger) and continued after its timeout: it
# retries the interrupted wait (EINTR), finds the time passed, and breaks out to fill the result from whatever
# the stack held (3.9-3.13). Seen as a SIGHUP (an ending signal that never came) or as no signal at all, which
# crashed the watcher and lost the run's verdict. A result not so sent is no signal.
SENT_BY = (0, -1, -6, 0x80)


class Signals:
    """The caught signals, blocked from construction on; `sleep` waits for the next tick or the next signal.

    `taken` holds the records not yet written (the watcher writes them each tick); `ending_at` is the
    monotonic time of the first ending signal; `stop_now` turns true at the second."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self.taken: list[dict[str, Any]] = []
        self.count = 0
        self.first = ""  # the first ending signal's name: watcher_exit's `signal`
        self.ending_at: float | None = None
        self.stop_now = False
        # Python's own SIGINT handler would raise KeyboardInterrupt once it is unblocked (a third SIGINT):
        # the default action instead, like the other two.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_BLOCK, CAUGHT)

    def sleep(self, seconds: float) -> None:
        """Sleep up to `seconds`, less if a caught signal comes; take every one pending."""
        info = signal.sigtimedwait(CAUGHT, max(0.0, seconds)) if not self.stop_now else None
        while info is not None and info.si_signo in CAUGHT and info.si_code in SENT_BY:
            self._take(info)
            info = signal.sigtimedwait(CAUGHT, 0) if not self.stop_now else None

    def poll(self) -> None:
        """Take what is pending, without waiting."""
        self.sleep(0.0)

    def _take(self, info: Any) -> None:
        self.count += 1
        name = signal.Signals(info.si_signo).name
        if info.si_signo in ENDING:
            if self.ending_at is None:
                self.ending_at, self.first = self.clock(), name
            else:
                self.stop_now = True  # the three go back to their default action: a third one ends us now
                signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING)
        if self.count <= MAX_SAID:
            said: dict[str, Any] = {"signal": name, "sender_pid": info.si_pid, "sender_uid": info.si_uid}
            if info.si_pid > 0 and (comm := _comm(info.si_pid)):
                said["sender"] = comm
            said["action"] = ("stop" if self.stop_now else "watch-on") if info.si_signo in ENDING else "ignored"
            self.taken.append(said)

    def take(self) -> list[dict[str, Any]]:
        """The records of the signals taken since the last call."""
        taken, self.taken = self.taken, []
        return taken

    def leave_by(self, linger: float) -> float | None:
        """The monotonic time the watcher leaves by, signalled; None while no ending signal came."""
        if self.ending_at is None:
            return None
        return self.ending_at + min(linger, STOP_LINGER_S)

    def exit_fields(self) -> dict[str, Any]:
        """watcher_exit's fields: the first ending signal's name, and how many caught signals came."""
        fields: dict[str, Any] = {"signal": self.first} if self.first else {}
        if self.count:
            fields["signals"] = self.count
        return fields


def _comm(pid: int) -> str:
    """The sender's name (/proc/PID/comm) as it is now; "" when gone or unreadable (a `kill` that ended)."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read(64).decode("utf-8", "replace").strip()
    except OSError:
        return ""
