"""`wp-autotrace run`'s signals: the program gets each signal as it would untraced, once, however it was sent.

The program stays in the process group run was started in, as it would be untraced (run takes the place its
shell, launcher or supervisor gave it): a signal sent to that group (`kill -- -PGID`, Ctrl-C and Ctrl-Z on a
terminal, `timeout`, SLURM, a launcher that signals its job's group, `kill -9 -- -PGID` included) reaches the
program and every process of its group (its compile sidecar and workers) from the kernel itself, stops and
uncatchable signals too. run is in that group as well, so it must tell such a signal from one sent to its
pid alone (`kill PID`, `docker stop`, a supervisor that knows only run's pid), which only run gets and
passes on, once, to the program's pid (untraced, that pid would have been the program's):

- run keeps a *sentinel*: a small forked process in run's own group, which nothing names by pid, that
  catches PASSED and reports each one down a pipe. A signal the sentinel got too within SENTINEL_HOLD_S
  was sent to more than run's pid (run's group, the terminal's foreground group, every process of the
  cgroup as systemd, slurmstepd or a container runtime send it): the program has it already, and run does
  not pass it on. Otherwise run passes it to the program's pid. The sentinel ends when run closes its pipe
  (or run dies).
- run catches PASSED itself, so a group signal does not end it before the program (it waits and exits
  with the program's status); the program starts with the dispositions run was started with (a signal
  ignored by run's parent, nohup's SIGHUP, is ignored in the program too).
- Ctrl-Z stops the whole group, run with it: the shell sees its job stopped, and `fg` continues them all.
  A stop of the program alone (`kill -STOP`, SIGTTIN) stops run too, so the shell sees the job stopped.

Why not a group of the program's own (what run did before): the group's stops, SIGKILL and the signals
run does not catch could not reach the program's group at all, and a caught one reached the program's pid
only, never its sidecar and workers (docs/guarantees.md, "`run` and signals", says what stays different).

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

# Caught by run (and its sentinel) and passed on when sent to run's pid alone: every signal whose default action
# would end run and leave the program running, never signalled (`docker stop` with an image's STOPSIGNAL such as
# SIGRTMIN+3, systemd's WatchdogSec SIGABRT, `kill -ALRM PID`); SIGUSR1/SIGUSR2 too (a launcher's checkpoint
# request to the group would end run, not the program). Not: SIGKILL and SIGSTOP (no handler can take them), those
# whose default is to ignore or stop (run follows stops itself), and those the kernel raises for run's own doing,
# run's and never the program's: SIGPIPE (Python ignores it: EPIPE), SIGXCPU/SIGXFSZ (run's own limits), SIGSYS
# (seccomp), the faults SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGTRAP.
_ENDING = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF",
           "SIGABRT", "SIGPWR", "SIGSTKFLT", "SIGIO")
FORWARDED = tuple(getattr(signal, name) for name in _ENDING if hasattr(signal, name)) + tuple(
    range(getattr(signal, "SIGRTMIN", 0), getattr(signal, "SIGRTMAX", -1) + 1))  # the real-time ones: each ends
# Passed on too, though their default is to ignore: a program may catch them (a terminal program redraws on
# SIGWINCH, `kill -WINCH PID` asks a server to reload; SIGURG: out-of-band data, Go's runtime preemption), and
# sent to run's pid alone they would reach no one. Never run's own to act on: a terminal's resize while run
# finishes its summary must not cut it short (CutShort takes FORWARDED only). Not SIGCHLD (run's own child's
# end), nor SIGCONT (run follows stops itself: Forwarder._stopped).
PASSED = FORWARDED + tuple(getattr(signal, name) for name in ("SIGWINCH", "SIGURG") if hasattr(signal, name))
# A signal sent to a group or a cgroup reaches its processes one after another within a few milliseconds:
# this long run waits for the sentinel's word before it passes a signal on (the cost of a `kill PID`).
SENTINEL_HOLD_S = 0.1
# A signal met once the program has ended (Forwarder.late) is run's own only if the sentinel did not get it too:
# nothing waits on the program then, so its word gets this long (a group signal that ended the program reaches
# the sentinel as it does run, but on a loaded host the sentinel's word can come after SENTINEL_HOLD_S).
LATE_HOLD_S = 1.0
# The sentinel says it is ready (its handlers set) before run starts the program: a group signal sent at
# once must find it. A sentinel not ready by then is given up (run passes on every signal it is sent).
SENTINEL_READY_S = 5.0
SENTINEL_MARK = b" [signal sentinel]"  # ends the sentinel's command line (the program's): ps tells them apart
# While run is stopped following its program, the sentinel looks this often whether the program runs again.
FOLLOW_POLL_S = 0.05
PID_BYTES = 4  # run tells the sentinel a pid in this many bytes (pid_max is at most 2**22)
READY = 0  # the byte the sentinel writes once its handlers are set (no signal is numbered 0)


def _named_as(command: list[str]) -> None:
    """In the sentinel: take the program's name (comm) and command line, best effort (setproctitle's way:
    the argument area rewritten in place, never longer than it was, which run's own argv, holding the
    program's, always is). A signal sent by name (`pkill -f PATTERN`, `killall NAME`) then reaches the
    sentinel exactly when it reaches the program: one that names run alone (`pkill -f 'wp-autotrace run'`)
    is passed on, one that names the program too (`pkill -f train.py`) is not passed on a second time.
    Its command line ends with SENTINEL_MARK, so ps shows which is the program."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, ctypes.c_char_p(os.fsencode(os.path.basename(command[0]))[:15]), 0, 0, 0)  # PR_SET_NAME
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rfind(b")") + 2:].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (stat fields 48, 49)
        if end - start < 2:
            return
        # Marked for whoever reads ps, with words no pattern for run or the program would hold.
        title = (b" ".join(os.fsencode(word) for word in command) + SENTINEL_MARK)[:end - start - 2] + b"\0"
        # The area's last byte not NUL: the kernel then reads the command line up to the first NUL.
        ctypes.memmove(start, title.ljust(end - start - 1, b"\0") + b" ", end - start)
    except (OSError, ValueError, IndexError, AttributeError):
        pass


def _serve(alive: int, run: int) -> None:
    """The sentinel's loop, until run closes `alive` (or dies). A pid read there: run stopped itself because
    that program stopped alone (`kill -STOP PID`); once the program runs again (`kill -CONT PID`, which never
    reaches run) or has ended, continue run, which would otherwise stay stopped, its job never ending. 0: run
    runs again (continued with the program, or by `fg`): nothing to watch."""
    child = 0
    while True:
        ready, _, _ = select.select([alive], [], [], FOLLOW_POLL_S if child else None)
        if ready:
            data = os.read(alive, PID_BYTES)
            if len(data) < PID_BYTES:
                return
            child = int.from_bytes(data, "little")
        elif not _is_stopped(child) and _is_stopped(run):
            os.kill(run, signal.SIGCONT)  # run then says it resumed (0)


class Sentinel:
    """A forked process in run's group that only catches PASSED and tells run each one it got. It goes by
    the program's name and command line (_named_as)."""

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command or []
        self.pid = 0
        self.report = -1  # run reads the signals the sentinel got here
        self.alive = -1  # run holds this open: its end (run closed it, or died) ends the sentinel
        self.seen: dict[int, float] = {}  # signal -> when the sentinel last reported it

    def start(self) -> None:
        """Fork it and wait until its handlers are set; an OSError when it cannot be had."""
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
                if null > 2:
                    os.close(null)
                if self.command:
                    _named_as(self.command)
                for sig in PASSED:
                    signal.signal(sig, lambda s, f: os.write(report_w, bytes((s,))))
                os.write(report_w, bytes((READY,)))
                _serve(alive_r, os.getppid())
            finally:
                os._exit(0)
        os.close(report_w)
        os.close(alive_r)
        self.pid, self.report, self.alive = pid, report_r, alive_w
        ready, _, _ = select.select([report_r], [], [], SENTINEL_READY_S)
        if not ready or os.read(report_r, 1) != bytes((READY,)):
            self.stop()
            raise OSError("the signal sentinel did not start")
        os.set_blocking(report_r, False)

    def follow(self, child: int) -> None:
        """run is about to stop itself because child stopped alone: the sentinel continues run once child
        runs again or ends (_serve); resumed() says run runs again."""
        self._tell(child)

    def resumed(self) -> None:
        self._tell(0)

    def _tell(self, pid: int) -> None:
        if self.alive >= 0:
            try:
                os.write(self.alive, pid.to_bytes(PID_BYTES, "little"))
            except OSError:
                pass

    def got(self, sig: int, hold: float = SENTINEL_HOLD_S) -> bool:
        """Whether the sentinel got sig as well (now, or within hold): then it was sent to more than run."""
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


def _catches(pid: int, sig: int) -> bool:
    """Whether process pid has a handler of its own for sig (/proc/PID/status SigCgt); True where that cannot be
    read (the signal is then passed on, as everywhere else)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True


def _is_stopped(pid: int) -> bool:
    """Whether pid is stopped now (/proc/PID/stat's state T); False where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] == b"T"


class Forwarder:
    """Starts the program in run's group and passes on to it, once, what is sent to run's pid alone;
    follows the program's stops. start(), then `with` it around wait()."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.command = command
        self.env = env
        self.child: subprocess.Popen[bytes] | None = None
        self.sent: list[int] = []
        # Sent to run's pid alone once the program had ended: run's own to take (CutShort.open), not the
        # program's: untraced it would have met nothing, so it cuts run's summary short instead.
        self.late: list[int] = []
        self.before: dict[int, Any] = {}
        self.continued = False  # run got SIGCONT since its last wait began (it was stopped with its group)
        self.sentinel = Sentinel(command)

    def start(self) -> Forwarder:
        """The sentinel, run's handlers, then the program; an OSError (run's handlers undone) when it cannot
        be started."""
        try:
            self.sentinel.start()
        except OSError:
            pass  # no sentinel: every signal run is sent is passed on
        self.before = {sig: signal.signal(sig, self.forward) for sig in PASSED}
        self.before[signal.SIGCONT] = signal.signal(signal.SIGCONT, self._continued)
        # SIGCHLD ignored by run's parent (kept across exec: a Python supervisor's SIG_IGN reaches every child):
        # the kernel would reap the program at once and run's wait find no status (Popen says 0 for any end).
        # run waits with the default; the program gets SIG_IGN back below, as untraced.
        if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
            self.before[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        ignored = [sig for sig, h in self.before.items() if h == signal.SIG_IGN]

        def as_run_was() -> None:  # in the child, before exec: what run's parent ignored stays ignored
            for sig in ignored:
                signal.signal(sig, signal.SIG_IGN)

        try:
            # close_fds=False: the descriptors run inherited (make's jobserver, LISTEN_FDS, a harness's pipe)
            # are the program's, as untraced; run's own are all close-on-exec (PEP 446), so none leaks.
            self.child = subprocess.Popen(self.command, env=self.env, close_fds=False,  # noqa: PLW1509
                                          preexec_fn=as_run_was if ignored else None)  # (run has no threads)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        # The sentinel first (its end takes a moment): run's handlers stay until the last step, and what run
        # does next (CutShort) takes over right after them. A late signal it got too was a group's: not run's.
        if self.late and self.sentinel.pid:
            group = {sig for sig in set(self.late) if self.sentinel.got(sig, LATE_HOLD_S)}
            self.late = [sig for sig in self.late if sig not in group]
        self.sentinel.stop()
        for sig, handler in self.before.items():
            _restore(sig, handler)
        self.before = {}

    def _continued(self, sig: int, frame: Any) -> None:
        self.continued = True

    def forward(self, sig: int, frame: Any) -> None:
        if self.sentinel.pid and self.sentinel.got(sig):
            return  # sent to run's group, the terminal's or every process: the program has it already
        if self.child is None:
            return  # not started: nothing to pass on
        if self.child.poll() is not None:
            self.late.append(sig)  # ended (reaped, or reaped just now): nothing to pass it on to
            return
        if os.getpid() == 1 and not _catches(self.child.pid, sig):
            # run is its pid namespace's init (a container's entry point without --init): untraced the program
            # would be, and the kernel gives an init only the signals it catches (`docker stop`'s SIGTERM to a
            # program with no handler, a `docker kill -s HUP`, never reach it); so run does not pass one on
            return
        try:
            self.child.send_signal(sig)
            self.sent.append(sig)
        except OSError:
            pass

    def wait(self) -> int:
        """The program's status (its code, or -N for signal N); a program stopped alone stops run too."""
        assert self.child is not None, "start() first"
        while True:
            self.continued = False
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
        """The program stopped. With its group (Ctrl-Z, SIGSTOP to the group), run stopped too and was
        continued with it: nothing to do. Alone (`kill -STOP PID`, SIGTTIN): stop run as well, so its shell
        sees the job stopped; once run is continued, continue the program (`fg` did both already). A
        continue of the program alone (`kill -CONT PID`) continues run too, through the sentinel."""
        assert self.child is not None
        if self.continued or not _is_stopped(self.child.pid):
            return
        self.sentinel.follow(self.child.pid)  # a `kill -CONT` of the program alone must continue run too
        os.kill(os.getpid(), signal.SIGSTOP)
        self.sentinel.resumed()
        try:
            os.kill(self.child.pid, signal.SIGCONT)
        except OSError:
            pass


class Interrupted(BaseException):
    """A signal run got after its program ended, while it finished (CutShort). A BaseException, as
    KeyboardInterrupt is: the summary's own `except Exception` (a report that fails) must not take it."""


class CutShort:
    """Around what run does after its program ended (the verdict's wait, run_exit, the summary): a FORWARDED
    signal (Ctrl-C, a supervisor's or SLURM's SIGTERM) raises Interrupted, so run finishes at once with its
    program's status. Untraced, the program's status was its parent's already; the signal would have met
    nothing. Signals run's parent ignored stay ignored."""

    def __init__(self) -> None:
        self.before: dict[int, Any] = {}

    def __enter__(self) -> CutShort:
        for sig in FORWARDED:
            handler = signal.getsignal(sig)
            if handler != signal.SIG_IGN:
                self.before[sig] = signal.signal(sig, self._raise)
        return self

    def _raise(self, sig: int, frame: Any) -> None:
        raise Interrupted(sig)

    def held(self) -> Any:
        """A context in which the signals wait (blocked) and arrive after it: run_exit is written once."""
        import contextlib

        @contextlib.contextmanager
        def blocked() -> Any:
            old = signal.pthread_sigmask(signal.SIG_BLOCK, list(self.before))
            try:
                yield
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)

        return blocked()

    def open(self, mask: Any, late: list[int]) -> None:
        """Inside the try that takes Interrupted: the signals blocked at the hand-over (block()) arrive
        now, through _raise; one the forwarder was sent after its program ended raises here."""
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        taken = [sig for sig in late if sig in self.before]  # one run's parent ignored stays ignored
        if taken:
            raise Interrupted(taken[0])

    def ignore(self) -> None:
        for sig in self.before:
            signal.signal(sig, signal.SIG_IGN)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.before.items():
            _restore(sig, handler)
        self.before = {}


def _restore(sig: int, handler: Any) -> None:
    """Put back what signal.signal() returned for sig. None: a handler not set from Python (faulthandler's for
    SIGABRT under PYTHONFAULTHANDLER=1), which signal.signal() cannot take back; the default then."""
    signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def block() -> Any:
    """Block FORWARDED from the program's reap until CutShort.open: between the forwarder's handlers and
    CutShort's, run's own (Python's KeyboardInterrupt for SIGINT) would be back for a moment."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)


def run_and_wait(command: list[str], env: dict[str, str]) -> tuple[int, int, tuple[int, ...]]:
    """Start command, wait for it forwarding signals; (its pid, its status, the signals passed on)."""
    with Forwarder(command, env).start() as fwd:
        status = fwd.wait()
    assert fwd.child is not None
    return fwd.child.pid, status, tuple(fwd.sent)


if __name__ == "__main__":  # manual check: python -m wp_autotrace.cli.run.signals CMD...
    print(run_and_wait(sys.argv[1:], dict(os.environ)))
