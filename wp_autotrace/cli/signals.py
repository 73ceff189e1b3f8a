"""`wp-autotrace run`'s signals: the program gets each signal exactly once, however it was sent.

Untraced, `python train.py` started from a shell is alone in its job's process group. Under `run` the
program used to share run's group, so a signal sent to the group (`kill -- -PGID`, SLURM, systemd,
a shell's job control) reached it directly *and* through run's forwarding: twice (issue #30 item 2;
servers such as uvicorn, vLLM or Ray take a second SIGTERM or SIGINT as "force quit").

So the program gets a process group of its own (as init shims such as tini do), and run forwards
what it is sent, once, to the program's pid:

- `kill PID` (run's pid), SIGINT without a terminal, `kill -- -PGID` of run's group: only run gets it,
  and passes it on once.
- Ctrl-C (and Ctrl-\\) on a terminal: the terminal signals its foreground group, which run hands to the
  program's group while it runs (and takes back after): the program gets it from the terminal, run does
  not. Ctrl-Z stops the program's group; run then stops itself too, so the shell sees its job stopped,
  and on `fg` (SIGCONT) gives the terminal back to the program and continues it.
- a cgroup stop (systemd, slurmstepd, a container runtime: the signal sent to every process of the cgroup):
  the program gets it directly, and run too. Nothing in the signal tells run that sender from one that
  signalled run alone, so run keeps a *sentinel*: a small forked process in a group of its own that
  catches the forwarded signals and reports each one down a pipe, and that nothing else signals (no
  terminal, no group, no `kill PID` names it). A signal the sentinel got too within SENTINEL_HOLD_S was
  sent to every process: the program has it, and run does not pass it on. The sentinel ends when run
  closes its pipe (or run dies).

Every signal run passes on is recorded (`run_exit.forwarded`), and the status it waited for.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# A signal sent to every process of a cgroup reaches them one after another within a few milliseconds:
# this long run waits for the sentinel's word before it passes a signal on (the cost of a `kill PID`).
SENTINEL_HOLD_S = 0.1


class Sentinel:
    """A forked process in a group of its own that only catches FORWARDED and tells run each one it got."""

    def __init__(self) -> None:
        self.pid = 0
        self.report = -1  # run reads the signals the sentinel got here
        self.alive = -1  # run holds this open: its end (run closed it, or died) ends the sentinel
        self.seen: dict[int, float] = {}  # signal -> when the sentinel last reported it

    def start(self) -> None:
        report_r, report_w = os.pipe()
        alive_r, alive_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the sentinel
            try:
                os.close(report_r)
                os.close(alive_w)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):  # holds none of run's (the program's) stdio open
                    os.dup2(null, fd)
                os.setpgid(0, 0)
                for sig in FORWARDED:
                    signal.signal(sig, lambda s, f: os.write(report_w, bytes((s,))))
                while os.read(alive_r, 1):
                    pass
            finally:
                os._exit(0)
        os.close(report_w)
        os.close(alive_r)
        os.set_blocking(report_r, False)
        self.pid, self.report, self.alive = pid, report_r, alive_w

    def got(self, sig: int, hold: float = SENTINEL_HOLD_S) -> bool:
        """Whether the sentinel got sig as well (now, or within hold): then it was sent to every process."""
        deadline = time.monotonic() + hold
        while True:
            self._drain()
            if time.monotonic() - self.seen.get(sig, -1e9) <= hold:
                self.seen.pop(sig, None)
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self.report < 0:
                return False
            select.select([self.report], [], [], left)

    def _drain(self) -> None:
        try:
            data = os.read(self.report, 256) if self.report >= 0 else b""
        except BlockingIOError:
            return
        except OSError:
            data = b""
        now = time.monotonic()
        for sig in data:
            self.seen[sig] = now

    def stop(self) -> None:
        for fd in (self.alive, self.report):
            if fd >= 0:
                os.close(fd)
        self.alive = self.report = -1
        if self.pid:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0


def _foreground_tty() -> int | None:
    """The fd of our controlling terminal when our group is its foreground (an interactive shell's job)."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return fd
        except OSError:
            continue
    return None


def _give_tty(fd: int, pgid: int) -> None:
    """Make pgid the terminal's foreground group; from the background too (SIGTTOU held off)."""
    before = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgid)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, before)


def start(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int | None]:
    """Start the program in a process group of its own (the terminal's foreground when run had it)."""
    tty = _foreground_tty()

    def own_group() -> None:  # in the child, before exec: both sides set it, so neither races the other
        os.setpgid(0, 0)
        if tty is not None:
            _give_tty(tty, os.getpid())

    child = subprocess.Popen(command, env=env, preexec_fn=own_group)  # noqa: PLW1509 (run has no threads)
    try:
        os.setpgid(child.pid, child.pid)
    except OSError:
        pass  # it exec'd already, having set it itself
    if tty is not None:
        _give_tty(tty, child.pid)
    return child, tty


class Forwarder:
    """Passes on to the program what run is sent, once; follows the program's stops on a terminal."""

    def __init__(self, child: subprocess.Popen[bytes], tty: int | None) -> None:
        self.child = child
        self.tty = tty
        self.sent: list[int] = []
        self.before: dict[int, Any] = {}
        self.sentinel = Sentinel()

    def __enter__(self) -> Forwarder:
        self.before = {sig: signal.signal(sig, self.forward) for sig in FORWARDED}
        try:
            self.sentinel.start()
        except OSError:
            pass  # no sentinel: every signal run is sent is passed on
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.before.items():
            signal.signal(sig, handler)
        self.sentinel.stop()
        if self.tty is not None:
            _give_tty(self.tty, os.getpgrp())

    def forward(self, sig: int, frame: Any) -> None:
        if self.tty is not None and sig in (signal.SIGINT, signal.SIGQUIT) and self._tty_sent_child():
            return  # the terminal signals the program's (foreground) group itself
        if self.sentinel.pid and self.sentinel.got(sig):
            return  # sent to every process (a cgroup stop): the program has it already
        if self.child.poll() is not None:
            return  # it has ended: nothing to pass on
        try:
            self.child.send_signal(sig)
            self.sent.append(sig)
        except OSError:
            pass

    def _tty_sent_child(self) -> bool:
        try:
            return self.tty is not None and os.tcgetpgrp(self.tty) == self.child.pid
        except OSError:
            return False

    def wait(self) -> int:
        """The program's status (its code, or -N for signal N); a stopped program stops run too."""
        while True:
            try:
                _, status = os.waitpid(self.child.pid, os.WUNTRACED)
            except ChildProcessError:
                return self.child.wait()
            except InterruptedError:
                continue
            if os.WIFSTOPPED(status):
                self._stopped()
                continue
            self.child.returncode = os.waitstatus_to_exitcode(status)
            return self.child.returncode

    def _stopped(self) -> None:
        """Ctrl-Z stopped the program's group: stop run as well (its shell sees the job stopped), and on
        SIGCONT give the terminal back to the program and continue it."""
        if self.tty is not None:
            _give_tty(self.tty, os.getpgrp())
        os.kill(os.getpid(), signal.SIGSTOP)
        if self.tty is not None:
            _give_tty(self.tty, self.child.pid)
        try:
            os.killpg(self.child.pid, signal.SIGCONT)
        except OSError:
            pass


def run_and_wait(command: list[str], env: dict[str, str]) -> tuple[int, int, tuple[int, ...]]:
    """Start command, wait for it forwarding signals; (its pid, its status, the signals passed on)."""
    child, tty = start(command, env)
    with Forwarder(child, tty) as fwd:
        status = fwd.wait()
    return child.pid, status, tuple(fwd.sent)


if __name__ == "__main__":  # manual check: python -m wp_autotrace.cli.signals CMD...
    print(run_and_wait(sys.argv[1:], dict(os.environ)))
