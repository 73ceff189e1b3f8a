"""The root's side of the watcher: start it without the host ever seeing a child.

The root never forks. It posix_spawns a tiny intermediate (``/bin/sh``, or
the interpreter itself where there is no shell) in a new session, with
stdio on /dev/null and only the log's fd (as WATCHER_LOG_FD) inherited; the
intermediate starts the watcher in the background -- a fresh interpreter
(``python -I -S``: no site, so no .pth activation and no torch; WP_AUTOTRACE*
cleared too) running ``wp_autotrace.watcher.main`` -- and exits, and the
root reaps it before ``spawn`` returns. The watcher is therefore an orphan
in its own session, recognisable in ps as ``... wp-autotrace-watch RUN ...``.

Why no fork: on Python 3.12+ a fork() in a process another .pth already
gave a thread prints a DeprecationWarning on the host's stderr, and a fork
runs the host's at-fork hooks. posix_spawn (vfork + exec) does neither.

Why SIGCHLD is ignored while the intermediate lives: the kernel adds a
child's rusage to its parent's RUSAGE_CHILDREN only when the parent reaps it
by wait(); a child that ends while SIGCHLD is SIG_IGN is reaped by the
kernel, unaccounted. So a traced root's getrusage(RUSAGE_CHILDREN) stays what
it is untraced (0 before its first child). The disposition is changed only
when it is SIG_DFL (the interpreter's own), and put back before spawn()
returns; the intermediate gets SIGCHLD back at its default. The one cost: a
child some other start-up code started and that ends in that millisecond is
reaped unseen (docs/security.md, Residual risks).

This module is imported by every traced root at start-up: stdlib only, no
typing, and ``_signal`` rather than ``signal`` (which imports enum).
"""

from __future__ import annotations

import os
import sys

ARGV_MARK = "wp-autotrace-watch"  # what ps shows, followed by the run id
NICE = 10  # it only watches: let the run have the CPU
# The log's fd number in the watcher: the first after stdio (the root's own number may be any).
WATCHER_LOG_FD = 3
# The root -> watcher contract: the watcher's argv after ARGV_MARK, one string each, in this order.
# to_argv (the root) and from_argv (the watcher) are its only two ends.
WATCHER_ARGS = ("run", "pkg_dir", "log_fd", "log", "offset", "root_pid", "root_ct", "interval", "linger",
                "redact", "export", "root_ticks")
# The interpreter's code: put the package's directory on sys.path, run main(). Appended, after the
# standard library: when the package is installed, that directory is site-packages, where a backport
# may shadow a stdlib module (enum34's enum, pathlib 1.0.1), as it does not in the host (site puts
# site-packages last there too). Niced here, not in the intermediate: the root waits for the
# intermediate, at full priority.
# sys.argv under -c: ["-c", ARGV_MARK, *values], so a value's index is its place in WATCHER_ARGS + 2.
BOOT = (f"import os,sys;os.nice({NICE});sys.path.append(sys.argv[{WATCHER_ARGS.index('pkg_dir') + 2}]);"
        "from wp_autotrace.watcher.main import main;main(sys.argv[1:])")
SHELL = "/bin/sh"
# The intermediate: start its arguments in the background and exit at once (an
# asynchronous list: the shell forks, the child execs; the shell does not wait). In /: the
# watcher then never has its cwd on the job's filesystem, which an epilog may unmount as soon
# as the root has ended (the watcher's interpreter may still be starting then).
SHELL_SCRIPT = 'cd /; "$@" &'
# Where there is no shell: the same with the interpreter (slower to start, milliseconds).
PY_INTERMEDIATE = ("import os,sys\ntry:\n os.chdir('/')\nexcept OSError:\n pass\n"
                   "if os.fork()==0:\n os.execv(sys.argv[1],sys.argv[1:])")


def spawn(log_fd: int, log: str, run: str, root_ct: float | None, interval: float, linger: float,
          redact: str = "", export: str = "", root_ticks: int | None = None) -> bool:
    """Start the watcher for this run; True when the intermediate was started and has ended.

    Called in the root at start-up. The intermediate is reaped here (by the
    kernel, see the module docstring), so the host never sees a child of
    ours. redact: the WP_AUTOTRACE_REDACT spec (name patterns, no secrets),
    as the watcher's environment has no WP_AUTOTRACE* variables. export:
    WP_AUTOTRACE_EXPORT's word (``otlp``), for the same reason; the OTEL_*
    settings it follows (headers may hold tokens) stay in the environment the
    watcher inherits, never in its argv, which ps shows to every user.
    root_ticks: the root's start ticks (-1 where unknown), which the watcher
    puts on its own clock: a wall-clock step between the root's start and the
    watcher's moves root_ct by the step, and the watcher's own root was
    another process to it.
    """
    if not sys.executable or not hasattr(os, "posix_spawn"):  # embedded, or no posix_spawn: no watcher
        return False
    pkg_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # Where the watcher starts reading the log: just after the root's process_start.
    offset = os.lseek(log_fd, 0, os.SEEK_CUR)
    target = WATCHER_LOG_FD if log_fd != WATCHER_LOG_FD else WATCHER_LOG_FD + 1
    # -B: -I ignores PYTHONDONTWRITEBYTECODE, so the root's choice is passed on.
    watcher = [sys.executable, "-I", "-S", *["-B"] * sys.dont_write_bytecode, "-c", BOOT, *to_argv({
        "run": run, "pkg_dir": pkg_dir, "log_fd": target, "log": log, "offset": offset, "root_pid": os.getpid(),
        "root_ct": root_ct or 0.0, "interval": interval, "linger": linger, "redact": redact, "export": export[:16],
        "root_ticks": -1 if root_ticks is None else root_ticks})]
    if os.access(SHELL, os.X_OK):
        argv = [SHELL, "-c", SHELL_SCRIPT, "wp-autotrace-spawn", *watcher]  # $0, then "$@"
    else:
        argv = [sys.executable, "-I", "-S", "-c", PY_INTERMEDIATE, *watcher]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    return _spawn_reaped(argv, env, _file_actions(log_fd, target))


def to_argv(values: dict[str, object]) -> list[str]:
    """ARGV_MARK, then each of WATCHER_ARGS's values as a string (a float by repr: it reads back exactly)."""
    if set(values) != set(WATCHER_ARGS):
        raise ValueError(f"watcher arguments: {sorted(set(values) ^ set(WATCHER_ARGS))}")
    return [ARGV_MARK] + [v if isinstance(v, str) else repr(v) for v in (values[k] for k in WATCHER_ARGS)]


def from_argv(argv: list[str]) -> dict[str, str]:
    """The watcher's side: {name: string} from its argv as to_argv wrote it (ARGV_MARK first)."""
    if len(argv) != len(WATCHER_ARGS) + 1 or argv[0] != ARGV_MARK:
        raise ValueError(f"not the watcher's arguments: {len(argv)} of {len(WATCHER_ARGS) + 1}")
    return dict(zip(WATCHER_ARGS, argv[1:]))


def _file_actions(log_fd: int, target: int) -> list[tuple[object, ...]]:
    """The log's fd at target (dup2 clears close-on-exec), stdio on /dev/null, every other fd closed.

    Except an fd at or above the soft RLIMIT_NOFILE (`exec 300>lock; ulimit -n 256`): posix_spawn refuses
    to close one (EBADF, and no watcher at all); the watcher closes those itself (watcher/main.py)."""
    actions: list[tuple[object, ...]] = [(os.POSIX_SPAWN_DUP2, log_fd, target)]
    actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0))
    actions += [(os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2)]
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = []  # no /proc: the host's fds are close-on-exec unless it made them inheritable
    # A close of a number not open (the listing's own fd) is ignored by posix_spawn.
    limit = os.sysconf("SC_OPEN_MAX")  # the soft RLIMIT_NOFILE (getdtablesize), without importing resource
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in sorted(open_fds) if 2 < fd < limit and fd != target]
    return actions


def _spawn_reaped(argv: list[str], env: dict[str, str], actions: list[tuple[object, ...]]) -> bool:
    """posix_spawn argv in a new session and wait for it to end, leaving no rusage behind."""
    import _signal  # type: ignore[import-not-found]  # signal.py would import enum (milliseconds)

    sigchld = _signal.SIGCHLD
    before = _signal.getsignal(sigchld)
    ignore = before == _signal.SIG_DFL  # a handler someone set (or C code's: None) is never touched
    if ignore:
        _signal.signal(sigchld, _signal.SIG_IGN)
    try:
        try:
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True, setsigdef=(sigchld,))
        except NotImplementedError:  # no POSIX_SPAWN_SETSID here
            return False
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # SIGCHLD ignored: the kernel reaped it as it ended
            return True
        return status == 0
    finally:
        if ignore:
            _signal.signal(sigchld, before)
