"""``wp-autotrace run -- COMMAND``: run a command traced, then print the short answer.

It checks first that the command's Python can trace (doctor's probe), passes on the signals it is sent,
waits (bounded) for the watcher's verdict, and summarises on stderr: stdout is the program's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import Any

from ...analysis.read.logread import NoUsableLog, stream_logs
from ...common.cmdline import is_python, python_flags
from ...common.env import (
    CLI_SCRIPT,
    ENABLE_ENV,
    GUARD_ENV,
    GUARD_NESTED_POOLS,
    LOG_ENV,
    RUN_IDENTITY_ENV,
    TRUE_WORDS,
    runs_own_cli,
)
from ...common.vocab import RUN_EXIT, RUNNER
from ...runtime.sink import Sink
from ...runtime.sink_rare import default_log_name
from ..base import USAGE
from ..doctor import INSTALL_ADVICE, probe_interpreter
from . import signals
from .own import Own

# run's own exit statuses (their meanings: main.py EXIT_STATUSES); else the program's own code.
NOT_TRACEABLE = 78  # run: the interpreter lacks the package or its .pth (a configuration problem)
NOT_FOUND = 127  # run: no such command, as shells say
SIGNALLED = 128  # run: a program ended by signal N exits 128 + N
PR_SET_DUMPABLE = 4  # prctl(2)


def add_parser(sub: Any) -> None:
    """run's subcommand and its arguments."""
    p = sub.add_parser("run", help="run a command traced, then print the short answer: wp-autotrace run -- python "
                                   "train.py")
    p.add_argument("--log", help="log path (default: ./wp_autotrace-<host>-<pid>-<random>.jsonl)")
    p.add_argument("--guard", action="store_true", help="also set WP_AUTOTRACE_GUARD=nested-pools (default: off)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the program and its arguments")
    p.set_defaults(func=run)


SHELLS = ("sh", "bash", "dash", "zsh", "ksh")


def _python_in_script(command: list[str]) -> str | None:
    """The first Python a `sh -c SCRIPT` command names in its script, else None."""
    import shlex

    if os.path.basename(command[0]) not in SHELLS or "-c" not in command[1:-1]:
        return None
    try:
        words = shlex.split(command[command.index("-c", 1) + 1])
    except ValueError:
        return None
    return next((w for w in words if is_python(w)), None)


def _python_of(command: list[str], path: str | None) -> tuple[str | None, bool]:
    """The interpreter a command will run: itself if it is a Python, its #! line's Python, the Python a
    shell's -c script names, else the python on PATH; and whether the command says so (False: a guess)."""
    exe = shutil.which(command[0], path=path)
    if exe is None:
        return None, False
    if is_python(exe):
        return exe, True
    named = _python_in_script(command)
    if named is not None:
        return shutil.which(named, path=path) or named, True
    try:
        with open(exe, "rb") as f:
            first = f.readline(256).decode(errors="replace")
    except OSError:
        first = ""
    words = first[2:].split() if first.startswith("#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    if words and is_python(words[0]):
        return shutil.which(words[0], path=path) or words[0], True
    return shutil.which("python", path=path) or shutil.which("python3", path=path), False


def _say(*lines: str) -> None:
    """`run`'s own message, on its stderr; dropped when that is closed (sys.stderr None) or fails
    (2>/dev/full): never sent to stdout, which is the program's, and never a reason not to run it."""
    err = sys.stderr
    if err is None:
        return
    try:
        print(*lines, sep="\n  ", file=err)
        err.flush()
    except (OSError, ValueError):
        pass


def run(args: argparse.Namespace) -> int:
    """Check the interpreter, run the command traced, then print the short answer; the program's code."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _say("wp-autotrace run: give the command after --, e.g. wp-autotrace run -- python train.py")
        return USAGE
    # --log, else WP_AUTOTRACE_LOG as a traced program would take it, else the default name.
    log = os.path.abspath(args.log or os.environ.get(LOG_ENV) or default_log_name(os.uname().nodename, os.getpid()))
    env = dict(os.environ)
    # The program is a new run, with itself as the root, even if this command was started traced.
    for key in RUN_IDENTITY_ENV:
        env.pop(key, None)
    env[ENABLE_ENV] = TRUE_WORDS[0]
    env[LOG_ENV] = log
    if args.guard:
        env[GUARD_ENV] = GUARD_NESTED_POOLS
    if _is_own_cli(command, env.get("PATH")):
        return _run_nested(command, env, log if args.log else None)
    python, told = _python_of(command, env.get("PATH"))
    if python is not None and is_python(command[0]) and "S" in python_flags(command):
        _say(f"wp-autotrace run: {command[0]} -S skips site, and so tracing; nothing was run")
        return NOT_TRACEABLE
    probe = probe_interpreter(python) if python is not None else None
    if probe is not None and probe.problem and told:
        _say(f"wp-autotrace run: {python} cannot trace: {probe.problem}; nothing was run. Install the "
             f"package into it ({INSTALL_ADVICE.format(python=python)}), then check with: "
             f"wp-autotrace doctor --python {python}")
        return NOT_TRACEABLE
    if shutil.which(command[0], path=env.get("PATH")) is None:
        # Said before "logging to": no program, no log (the line would name a file never made).
        _say(f"wp-autotrace run: cannot run {command[0]}: command not found (or not executable); nothing was run")
        return NOT_FOUND
    if probe is not None and probe.problem:
        # A guess (the command names no Python: make, a script of tools) refuses nothing: the program runs as
        # untraced, and the Pythons it starts may be others, which trace.
        _say(f"wp-autotrace run: {command[0]} does not say which Python it runs; the one on PATH, {python}, cannot "
             f"trace ({probe.problem}): running it anyway")
    if not os.path.isdir(log):  # a directory is no log: the traced start says it cannot open it, and runs untraced
        _say(f"wp-autotrace: logging to {log}")
    since = time.time()  # the runs of the log that began after this may be the program's (its summary's)
    try:
        forwarder = signals.Forwarder(command, env).start()
    except OSError as exc:
        _say(f"wp-autotrace run: cannot run {command[0]}: {exc.strerror or exc}; nothing was run, no log "
             "was written")
        return NOT_FOUND
    with forwarder:
        code = forwarder.wait()
        mask = signals.block()
    forwarded = tuple(forwarder.sent)
    pid = forwarder.child.pid if forwarder.child is not None else 0
    recorded = False
    with signals.CutShort() as cut:
        try:
            cut.open(mask, forwarder.late)
            from ...analysis.fold.model import Waited

            waited = Waited(pid, code, forwarded, os.uname().nodename)
            own = Own(os.getpid(), since, os.uname().nodename, _proc_reader(), log)
            watched: set[str] = set()  # run's own runs that had a watcher (another program's may have one)
            if os.path.exists(log) and not await_verdict(log, mine=own.of, watched=watched) and not watched:
                waited = waited._replace(no_watcher=_why_no_watcher(env))
            with cut.held():
                record_exit(log, pid, code, forwarded, since)
                recorded = True
            _summarize(log, python if told else None, waited, command[0], own)
        except signals.Interrupted:
            cut.ignore()  # one signal is enough: nothing more interrupts the last record and line
            if not recorded:
                record_exit(log, pid, code, forwarded, since)
            from ...analysis.words.fmt import escape

            _say(f"\nwp-autotrace: the summary was cut short by a signal; the program's own status is run's. "
                 f"Full report: wp-autotrace report {escape(log)}")
    if code < 0:
        end_as(-code)
    return SIGNALLED - code if code < 0 else code


def end_as(sig: int) -> None:
    """End run by the signal that ended its program, so that run's parent sees what it would have seen of the
    untraced program: a shell script that Ctrl-C ended the program of stops there (bash stops only when its
    child died of SIGINT, not when it exited 130), a supervisor reads "killed by SIGTERM". With no core dump
    of run's own (RLIMIT_CORE 0: the program's core, if any, is the one to look at). Returns where the signal
    cannot end run (pid 1 of a pid namespace ignores it): run then exits 128 + N."""
    import resource
    import signal

    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    except (ValueError, OSError):
        pass
    # RLIMIT_CORE 0 does not stop a pipe core_pattern (systemd-coredump, apport): the kernel runs the helper
    # anyway, which would file a crash of run's own. Not dumpable, the kernel skips the dump altogether.
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    try:
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    except (OSError, ValueError):
        pass


def _is_own_cli(command: list[str], path: str | None) -> bool:
    """Whether the command is the wp-autotrace command itself (its console script, or python -m wp_autotrace)."""
    exe = shutil.which(command[0], path=path)
    if exe is not None and os.path.basename(exe) == CLI_SCRIPT:
        return True
    return is_python(command[0]) and runs_own_cli(command)


def _run_nested(command: list[str], env: dict[str, str], log: str | None) -> int:
    """`wp-autotrace run -- wp-autotrace …`: the wp-autotrace command never traces itself, so there is nothing
    for this run to trace or summarise: the inner command runs as it is (its own `run` traces its program,
    into its --log, else into this run's log, WP_AUTOTRACE_LOG) and speaks for itself; the code is its own.
    Said only when this run was given a --log that the inner command left unwritten."""
    try:
        forwarder = signals.Forwarder(command, env).start()
    except OSError as exc:
        _say(f"wp-autotrace run: cannot run {command[0]}: {exc.strerror or exc}; nothing was run")
        return NOT_FOUND
    with forwarder:
        code = forwarder.wait()
    if log is not None and not os.path.exists(log):
        _say(f"wp-autotrace run: no log was written ({log}): the command was wp-autotrace itself, which traces "
             "nothing of its own; the log its own run named holds the trace")
    if code < 0:
        end_as(-code)
    return SIGNALLED - code if code < 0 else code


def _why_no_watcher(env: dict[str, str]) -> str:
    """Why the program's run has no watcher, as far as `run` can tell from what it gave the program."""
    from ...common.env import INTERVAL_ENV

    try:
        off = float(env.get(INTERVAL_ENV, "") or "nan") == 0
    except ValueError:
        off = False
    if off:
        return f"{INTERVAL_ENV}=0 starts none"
    return f"none wrote a record within {WATCHER_START_WAIT_S:g} s (it could not start, or the main process was pid 1)"


# The watcher writes its verdict (leftover) LEFTOVER_GRACE_S after it first misses the main process, sampling
# fast once the main process's process_exit is in the log (a killed one: at its next tick). `run` waits
# that long, two ticks (at most VERDICT_TICK_S each, whatever the interval: a watcher that samples every
# 600 s must not hold a batch job's end for 20 minutes) and this much slack for a loaded host's scheduling,
# before it summarises; then it says "verdict pending" rather than guess. It stops waiting as soon as the
# watcher is gone (its pid, from watcher_start, on this host): a dead watcher writes nothing more.
VERDICT_SLACK_S = 3.0
VERDICT_TICK_S = 1.0
# A run with no watcher record by then has none coming (WP_AUTOTRACE_SAMPLE_INTERVAL=0, or it could not
# start): nothing to wait for. The watcher writes watcher_start as soon as it runs, long before this.
WATCHER_START_WAIT_S = 1.0
VERDICT_POLL_S = 0.05


def await_verdict(log: str, clock: Any = None, sleep: Any = None, mine: Any = None,
                  watched: set[str] | None = None) -> bool:
    """Wait, bounded, until every run in the log that has a watcher has its verdict (leftover or
    watcher_exit), or its watcher is gone; True if they all have a verdict. Reads the log
    incrementally into the run model. mine (Own.of): the runs to wait for, where the log holds others
    (another program's, whose verdict may be long in coming); None: every run. watched: given, it gets the ids
    of those runs that had a watcher (none: none ran for them, whatever another program's did)."""
    from ...analysis.fold.fold import Builder
    from ...analysis.fold.verdict import watchers_gone
    from ...analysis.read.logread import Tail
    from ...common.vocab import LEFTOVER_GRACE_S

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    builder = Builder()
    start = clock()
    try:
        tail = Tail(log)
    except OSError:
        return False
    with tail.file:
        gone = False
        while True:
            for r in tail.read():
                builder.feed(r)
            ours = [run for run in builder.model.runs.values() if run.watcher_pids and (mine is None or mine(run))]
            if watched is not None:
                watched.update(run.id for run in ours)
            if not tail.behind and ours and all(run.verdict for run in ours):
                return True
            if gone and not tail.behind:
                return False  # read once more after the watcher was seen gone: no verdict will come
            waited = clock() - start
            if not ours and waited >= WATCHER_START_WAIT_S and not tail.behind:
                return False
            interval = min(max((run.interval for run in ours), default=0.0), VERDICT_TICK_S)
            if waited >= LEFTOVER_GRACE_S + 2 * interval + VERDICT_SLACK_S:
                return False
            gone = bool(ours) and all(watchers_gone(run) for run in ours if not run.verdict)
            if not tail.behind and not gone:
                sleep(VERDICT_POLL_S)


def record_exit(log: str, pid: int, status: int, forwarded: tuple[int, ...], since: float | None = None) -> None:
    """Write what run waited for into the log (run_exit: docs/evidence.md), so a later `report` says the same
    as run's summary; since: when run started its program (a run the log cannot join to pid by its pids, a main
    in a pid namespace of its own, is joined by its start within since..now). Into an existing log only (never
    created here), and never a reason to fail."""
    if not os.path.exists(log):
        return
    try:
        sink = Sink(log, os.uname().nodename, RUNNER, create=False)
    except OSError:
        return
    try:
        extra = {} if since is None else {"since": round(since, 6)}
        sink.emit(RUN_EXIT, root_pid=pid, status=status, forwarded=list(forwarded), **extra)
    finally:
        if sink.fd >= 0:
            os.close(sink.fd)


def short_answer(log: str, waited: Any = None, own: Own | None = None) -> list[str]:
    """The report's short answer for a log: the answer paragraph, then one line per finding and its advice;
    waited (analysis.fold.model.Waited): what `run` saw of the program it ran. own: which runs are `run`'s: a log
    that holds others (`--log L` again, an exported WP_AUTOTRACE_LOG, two `run`s at once) is answered for run's
    own, and one line says how many others the log holds; None: every run."""
    from ...analysis.fold.verdict import fold_and_judge, here_and_now
    from ...analysis.present.render import summary_lines
    from ...analysis.report import report_of, select_runs
    from ...analysis.words.fmt import escape, wrap
    from ..base import text_width

    width = text_width(sys.stderr)
    data = stream_logs([log], typed=True)  # typed: the fold alone reads them
    reader = here_and_now()
    model = fold_and_judge(data.records, waited, reader)
    every = select_runs(model, None)
    told = [own is None or own.of(r) for r in every]
    mine = [r for r, yes in zip(every, told) if yes]
    others = [r for r, yes in zip(every, told) if not yes]
    if every and not mine:  # never the other runs' answer under this program's run
        return [escape(line) for line in wrap(
            f"- This run wrote no record into the log: tracing did not start in its program (check with: wp-autotrace "
            f"doctor --python PYTHON); the log holds {_others(others, own)}: not told here; the full report tells "
            "every run.", width)]
    rep, _ = report_of(model, data, None, reader.now, mine)
    lines = summary_lines(rep, width)
    if others:  # wrapped as the lines above it are
        lines += wrap(f"- This log holds {_others(others, own, mine)}: not told here; the full report tells every run.",
                      width)
    return [escape(line) for line in lines]


def _others(runs: list[Any], own: Own | None, mine: list[Any] | None = None) -> str:
    """Other programs' runs of the log in words: how many this program started (a `run` inside it), how many began
    before this one, how many beside it."""
    inside = [r for r in runs if own is not None and own.started_inside(r, mine or [])]
    if inside:
        rest = [r for r in runs if r not in inside]
        started = f"{len(inside)} run(s) its program started (a `wp-autotrace run` inside it)"
        return started + (f" and {_others(rest, own)}" if rest else "")
    before = sum(own is not None and (r.start is None or r.start < own.since) for r in runs)
    if before == len(runs):
        return f"{before} other run(s), begun before this one"
    if not before:
        return f"{len(runs)} other run(s), another program's, written beside this one"
    return f"{len(runs)} other run(s) ({before} begun before this one, {len(runs) - before} beside it)"


def _proc_reader() -> Any:
    """A /proc reader of this host, None where it has none (Own then reads no parents)."""
    from ...common.procfs import ProcReader

    return ProcReader() if ProcReader.available() else None


def still_running(log: str) -> list[int]:
    """This user's live processes the command started and left running (a shell script's `step &`): started
    after run itself, with run's WP_AUTOTRACE and this log in their environment (a process above run given the
    same WP_AUTOTRACE_LOG is no step of it; one whose tracing the command turned off writes nothing there).
    Read only where no log was written, where "tracing did not start" would be said over a step still starting."""
    from ...common.procfs import ProcReader

    reader = ProcReader()
    own = reader.stat(os.getpid())
    since = own["create_time"] if own is not None else 0.0
    wanted = (f"\0{LOG_ENV}={log}\0".encode(), f"\0{ENABLE_ENV}={TRUE_WORDS[0]}\0".encode())
    found = []
    for pid in reader.pids() - {os.getpid()}:
        env = b"\0" + reader.environ(pid)
        info = reader.stat(pid) if all(w in env for w in wanted) else None
        if info is not None and info["create_time"] > since:  # run started past one grain before its command
            found.append(pid)
    return sorted(found)


def _summarize(log: str, python: str | None, waited: Any = None, program: str = "", own: Own | None = None
               ) -> None:
    """After the program: the short answer and where the log is, on stderr (stdout is the program's).
    python: the interpreter the command ran, None when the command does not say which."""
    if os.path.isdir(log):  # no record could be written there: nothing to report, nor a report to point to
        _say(f"wp-autotrace: no log was written: {log} is a directory, and the program ran untraced; name a file "
             f"in it (--log {os.path.join(log, 'run.jsonl')})")
        return
    if not os.path.exists(log):
        still = still_running(log)
        if still:
            _say(f"wp-autotrace: no log yet ({log}): the command ended, but {len(still)} process(es) it started "
                 f"still run (pid {', '.join(map(str, still[:5]))}{' ...' if len(still) > 5 else ''}), put in the "
                 f"background and not waited for; what they record goes to that log: wp-autotrace report {log}")
            return
        check = (f"wp-autotrace doctor --python {python}" if python else
                 f"wp-autotrace doctor --python PYTHON, naming the interpreter {program or 'the command'} ran "
                 "(it does not say which)")
        _say(f"wp-autotrace: no log was written ({log}): tracing did not start; check with: {check}")
        return
    try:
        lines = short_answer(log, waited, own)
    except NoUsableLog as exc:
        lines = [f"(no usable record: {exc})"]
    except Exception as exc:  # the program's exit code matters more than our summary
        lines = [f"(the report failed: {type(exc).__name__}: {exc})"]
    from ...analysis.words.fmt import escape

    if os.getpid() == 1:  # `unshare -fp wp-autotrace run …`, a container's entry point
        lines.append("wp-autotrace run is pid 1 here: its exit now ends every process left in this pid namespace")
    shown = escape(log)  # the user's path, shown as the report shows logged text
    _say("\nwp-autotrace:", *lines, f"log: {shown}", f"full report: wp-autotrace report {shown}")
