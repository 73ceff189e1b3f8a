"""End a run's leftover processes safely: ``wp-autotrace cleanup LOG``.

What the run left is read from the run model (analysis/fold/model.py), one model
per log: the watcher's verdict (``leftover``), or, while that verdict is not
written yet, what the last sample after the main process's end (else the
root's own ``below`` list) showed alive, and cleanup says so. Only proven
members are candidates: a process that shares only the root's process group
or session ("possibly the run's") is never signalled.

A pid in a log is only a name that the kernel hands out again. So every
candidate is checked, just before it is signalled, to still be the process
the log saw: same pid, same start time (procfs.same_process), and owned by
the log's owner (each log judges its own candidates: a log another user
planted cannot name a process of yours, nor, as root, one of root's). Where
the kernel has pidfds the process is pinned first and signalled through the
pidfd, so it cannot be swapped for another between the check and the kill.

The run's tree is then ended in rounds: each round stops (SIGSTOP) every
live target, waits until each has stopped (kill() only queues the signal: a
fork in flight finishes first, and a child read too early would be orphaned
unseen once its parent ended), and walks /proc children from each, so that descendants born
after the verdict (children of a member are members) join, and a process that
keeps forking cannot outrun the walk; then SIGTERM, children first, SIGCONT,
a grace period, SIGKILL. A child joins only while its parent is a live member
re-verified AFTER the children list was read (its pidfd has not reported an
exit, and the pid still has the member's start time), and each child is
pinned as it joins, so that its own children are judged the same way; a
member that has ended is never walked: its pid may already name another
process, whose children are not the run's. After each round the logs are
read again (cleanup's `reload`): a traced successor forked by a member's
SIGTERM handler is re-parented to init at once, out of reach of the walk, but
writes its own process_start naming its parent; a child the logs name of a
process they claim, or of a target, is a candidate like any other. Where that
record lands late, a process born during the round in a member's process group
is waited for until the logs name it (bounded; successors.py). Rounds
repeat until the tree is empty, at most MAX_ROUNDS times and CLEANUP_BUDGET_S
seconds; every wait, the grace included, ends by that budget. The final count
reads the logs once more: a live process they name as the run's (same pid and
start) that was not ended counts as still alive, and the exit status is then
REFUSED, never "0 still alive".

One process named by several logs (the same log twice, a copy, a planted log)
is one candidate with several claims, keyed by (host, pid, start): it is
counted once, every claim is judged, and a single refused claim refuses it, so
the outcome does not depend on the order of the logs. The log's owner is taken
(_owned_model) from fstat of the file it reads, not from its path. The candidates
and their checks are candidates.py's; what joins the tree after a round (the
children the logs name, the newborns waited for) successors.py's; the signalling
rounds are this module's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ...analysis.fold.model import Process, Run
from ...analysis.fold.verdict import fold_and_judge, held_not_absent
from ...analysis.read.logread import NoUsableLog, stream_logs
from ...analysis.words.fmt import escape, size_text
from ...common.procfs import same_process
from ..base import seconds
from .candidates import (
    Candidate,
    Checker,
    Key,
    Models,
    find_candidates,
    key_of,
    on_the_logs_clock,
)
from .successors import await_newborns, logged_successors, members_named, selected_runs, strays
from .sweep import (
    CLEAN,
    CLEANUP_BUDGET_S,
    CMD_SHOWN,
    NAMED_MEMBER,
    Sweep,
    children_first,
    live_cmd,
    target_label,
)
from .sweep import REFUSED as REFUSED

# Exit statuses (their meanings: cli/main.py EXIT_STATUSES): CLEAN and REFUSED are sweep.py's (what became of
# the targets), re-exported for main.py's table.
STILL_RUNNING = 3  # a selected run's main process is alive: nothing signalled

DEFAULT_GRACE_S = 5.0
# A round ends what the walk found; a member's signal handler may still fork. Rounds repeat until the
# tree is empty, bounded: a tree that regrows this often, or for this long, is reported, not chased.
MAX_ROUNDS = 5
# --grace at most this: every wait is capped at what is left of CLEANUP_BUDGET_S, so a longer grace
# could never be waited; refusing it says so instead of silently waiting less.
MAX_GRACE_S = CLEANUP_BUDGET_S


# Signals whose default action ends cleanup at once (a `timeout` around it, the terminal closed, Ctrl-\\). One
# that came while the tree is stopped for the walk (Sweep.grow's SIGSTOP) would leave every target stopped for
# good, holding its memory, with nothing left to continue it. While cleanup signals, each is raised as _Ended, so
# that cleanup's finally continues the targets; the signal is then delivered again, with its own action.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class _Ended(BaseException):
    """One of ENDING_SIGNALS came while cleanup signalled (a BaseException: no `except Exception` stops it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_ended(signum: int, frame: Any) -> None:
    raise _Ended(signum)


def _catch_ending(caught: dict[int, Any]) -> None:
    """Raise ENDING_SIGNALS as _Ended; each handler replaced goes into caught as it is set. Only a signal whose
    action is the default one (one its caller ignores, nohup's SIGHUP, stays ignored), and only on the main
    thread (the only one that may set handlers: a caller's thread keeps the default actions)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in ENDING_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            caught[sig] = signal.SIG_DFL
            signal.signal(sig, _raise_ended)


def _end_as_sent(caught: dict[int, Any], ended: int | None) -> None:
    """Put back the handlers _catch_ending replaced; then, if an ending signal came, send it again: now
    pending with its own action, it ends this process as it would have (the shell sees the signal)."""
    for sig, old in caught.items():
        signal.signal(sig, old)
    if ended is not None:
        os.kill(os.getpid(), ended)


def _escaping(say: Any) -> Any:
    """say, with every line passed through fmt.escape (controls, bidi and invisible characters)."""
    return lambda text: say(escape(text))


def _named_how(run: Run, p: Process) -> str:
    """How the log names a process of the run, in words: left behind by the verdict, listed left behind
    before one (pending, or none will come), or only a member."""
    if p not in run.leftover:
        return NAMED_MEMBER
    if run.leftover_seen:
        return "the verdict names it left behind"
    return f"the log lists it left behind ({'no verdict will come' if run.no_verdict else 'verdict pending'})"


def named_alive(sweep: Sweep) -> list[tuple[Candidate, str]]:
    """Processes the re-read logs name as the run's that are alive now with the logged start time and
    were not made targets (refused, or never proven left behind), each with how the log names it
    (_named_how): the tree is not empty while one is."""
    found: dict[Key, tuple[Candidate, str]] = {}
    for run, owner in selected_runs(sweep):
        for p in members_named(run):
            held = sweep.targets.get(p.pid)
            if held is not None and same_process(held[0].create_time, p.create_time):
                continue  # a target: counted as ended or surviving already
            if sweep.is_foreign(p.host, p.pid, p.create_time):
                continue  # another run's, below a leftover: said refused, counted apart (_foreign_words)
            if p.host == sweep.checker.host and sweep.checker.same(p.pid, p.create_time) is not None:
                c = Candidate(run.id, p.host, p.pid, p.create_time, p.role or "child", p.cmd or p.name, None, None,
                              owner)
                # named by this run's watcher (below a leftover) but another run's by its own records, never
                # reached by the walk (its parent was not named): another run's too (sweep.foreign, counted apart)
                if not sweep.other_run(c):
                    found.setdefault(key_of(c), (c, _named_how(run, p)))
    return list(found.values())


def _dry_run(sweep: Sweep) -> int:
    """Say what would be ended: each target with its live command line beside the logged one."""
    sweep.grow()
    for c, info in children_first(list(sweep.targets.values())):
        live = live_cmd(sweep.checker.reader, c.pid)
        logged = f"; logged: {c.cmd[:CMD_SHOWN]}" if c.cmd and c.cmd != live else ""
        state = sweep.stopped_before.get(c.pid)
        stopped = f", stopped (state {state})" if state else ""
        sweep.say(f"would end: {target_label(c)}{stopped}, rss {size_text(info['rss'])}: {live[:CMD_SHOWN] or '?'}"
                  f"{logged}")
    sweep.say(f"dry run: {len(sweep.targets)} process(es) would be ended; nothing signalled")
    return sweep.status


def _next_round(sweep: Sweep) -> list[int]:
    """What is left of the tree after a round: the live members' new children (their signal handlers
    may have forked), and the children the re-read logs name (a successor already re-parented)."""
    pending = []
    for c in sweep.descendants([pid for pid in sweep.targets if sweep.member_alive(pid)]):
        pending.append(c.pid)
        sweep.say(f"found: {target_label(c)}, a descendant of the run's leftovers")
    _admit_logged(sweep, pending)
    for info in await_newborns(sweep, lambda: _admit_logged(sweep, pending)):
        sweep.unproven[info["pid"]] = info["create_time"]
        sweep.say(f"not signalled: {info['pid']} ({escape(info['name'])}), born during the round in the process "
                  "group of one of the run's leftovers, but no log names it as the run's")
    return pending


def _admit_logged(sweep: Sweep, pending: list[int]) -> None:
    """Admit the children the re-read logs name (a successor already re-parented); those that join are
    added to pending."""
    for c in logged_successors(sweep):
        sweep.admit(c)
        if c.pid in sweep.targets and c.pid not in pending:
            pending.append(c.pid)
            sweep.say(f"found: {target_label(c)}, named by the log as a child of one of the run's leftovers")


def _rounds(sweep: Sweep) -> int:
    """End the tree in rounds until it is empty (bounded); the exit status, after a final count that
    also reads the logs again: a live process they name as the run's is counted as still alive."""
    sweep.deadline = time.monotonic() + CLEANUP_BUDGET_S
    pending = list(sweep.targets)
    rounds = 0
    while pending and rounds < MAX_ROUNDS and time.monotonic() < sweep.deadline:
        rounds += 1
        pending += sweep.grow()
        survivors = sweep.end_round(pending)
        for pid in survivors:
            sweep.say(f"still alive after SIGKILL: {target_label(sweep.targets[pid][0])} "
                      f"(uninterruptible? check /proc/{pid}/status)")
        sweep.survivors = [sweep.targets[pid][0] for pid in survivors]
        pending = _next_round(sweep)
    if pending:
        sweep.say(f"the run's tree still grows after {rounds} round(s): {len(pending)} process(es) not ended")
    unended = [(c, named) for c, named in named_alive(sweep) if c.pid not in pending]
    for c, named in unended:
        sweep.unsignalled(c, named)
    left = len(sweep.survivors) + len(pending) + len(unended)
    sweep.say(f"cleanup: {sweep.ended} process(es) ended, {left} still alive{_refused_words(sweep, unended)}"
              f"{_unproven_words(sweep, {c.pid for c, _ in unended})}{_foreign_words(sweep)}")
    return REFUSED if left else sweep.status


def _unproven_words(sweep: Sweep, said: set[int]) -> str:
    """The final count's words for the live processes of the leftovers' process groups that nothing proves the
    run's (the newborns said, and the strays, each said here): "still alive" counts only the proven, and alone it
    would say that cleanup saw nothing else there. said: the pids said already (a live process a log names)."""
    for info in strays(sweep, said):
        sweep.unproven[info["pid"]] = info["create_time"]
        sweep.say(f"not signalled: {info['pid']} ({escape(info['name'])}), alive in the process group of one of the "
                  f"run's leftovers, started after it and adopted by {info['ppid']}: possibly left by a leftover that "
                  "ended before cleanup stopped it, but nothing proves it the run's")
    alive = sum(sweep.checker.same(pid, start) is not None for pid, start in sweep.unproven.items())
    return f"; {alive} more alive in their process groups, not proven the run's, not signalled" if alive else ""


def _foreign_words(sweep: Sweep) -> str:
    """The final count's words for the processes refused as another run's (alive now): not this run's, so neither
    "still alive" of it nor "refused" among its own."""
    runs = [run for (_, pid), (start, run) in sweep.foreign.items() if sweep.checker.same(pid, start)]
    named = sorted(set(runs) - {""})
    which = f" ({', '.join(named)})" if named else ""
    return f"; {len(runs)} of another run{which} below its leftovers, not signalled" if runs else ""


def _refused_words(sweep: Sweep, unended: list[tuple[Candidate, str]]) -> str:
    """The final count's words for the claims refused and not already counted alive here: "0 still alive" alone
    would say a process on another host, or one whose log another user owns, is gone; cleanup never looked."""
    counted = {(c.host, c.pid) for c, _ in unended}
    refused = [key for key in sweep.refusals if key not in counted and key not in sweep.foreign]
    return f"; {len(refused)} refused, not signalled (whether still alive: not known here)" if refused else ""


def _claims(sweep: Sweep, run: str | None) -> tuple[dict[Key, list[Candidate]], int | None]:
    """Every log's claims, grouped by process (host, pid, start): one process named by several logs is
    one candidate with several claims. Also the processes the logs name as their descendants. Notes
    are said once each; the status STILL_RUNNING if a selected run's root is alive (then no claims)."""
    claims: dict[Key, list[Candidate]] = {}
    said: set[str] = set()
    for model, owner in sweep.models:
        found, roots, notes = find_candidates(model, run, owner)
        for root in roots:
            if sweep.checker.may_be_root(root):
                sweep.say(f"run {root.run} is still running (main process {root.pid} is alive): nothing "
                          "signalled; stop it first, or wait for it to end")
                return {}, STILL_RUNNING
        for note in notes:
            if note not in said:
                said.add(note)
                sweep.say(note)
        for c in found:
            claims.setdefault(key_of(c), []).append(c)
            sweep.know(c)
    for c in logged_successors(sweep, reread=False):
        claims.setdefault(key_of(c), []).append(c)
    return claims, None


def _nothing_left(sweep: Sweep, run: str | None) -> int:
    """No candidate: say so, unless the log names a live process of the run (then it is not empty)."""
    alive = named_alive(sweep)
    for c, named in alive:
        sweep.unsignalled(c, named)
    if alive:
        sweep.say(f"cleanup: 0 process(es) ended, {len(alive)} still alive")
        return REFUSED
    sweep.say("nothing to clean up: the log names no leftover process" + (f" for run {run}" if run else ""))
    return CLEAN


def cleanup(models: Models, run: str | None, dry_run: bool, grace: float, say: Any = print,
            reload: Callable[[], Models] | None = None, logs: set[tuple[int, int]] | None = None) -> int:
    """Verify and end the selected run's leftovers; the exit status. models: each log's model with the
    uid that owns the log (None: not known); each log's candidates are judged by its own owner, and a
    process named by several logs by every one of them. reload reads the logs again (between rounds,
    and for the final count); None: the logs are read once."""
    sweep = Sweep(Checker(), dry_run, grace, _escaping(say))  # log text reaches the terminal escaped
    sweep.models, sweep.reload, sweep.run_id, sweep.logs = models, reload, run, logs or set()
    if moved := on_the_logs_clock(sweep.checker, models):
        sweep.say(moved)
    caught: dict[int, Any] = {}
    ended = None
    try:
        if not dry_run:  # a dry run stops nothing
            _catch_ending(caught)
        return _judge_and_end(sweep, run, dry_run)
    except _Ended as exc:
        ended = exc.signum
        return 128 + ended  # only where the signal, sent again below, does not end the process
    finally:
        _leave(sweep, caught, ended)


def _leave(sweep: Sweep, caught: dict[int, Any], ended: int | None) -> None:
    """cleanup's last act, however it ends (Ctrl-C, an ending signal): never leave a process stopped. The
    ending signals are blocked first, so that one more cannot cut these SIGCONTs short (one whose Python
    handler was already due raises once more while they are blocked: kept, and blocked again)."""
    while True:
        try:
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, list(caught)) if caught else None
            break
        except _Ended as exc:
            ended = exc.signum
    try:
        if not sweep.dry_run:
            sweep.send(list(sweep.targets), signal.SIGCONT)
        sweep.close()
        _end_as_sent(caught, ended)
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending ending signal acts now


def _judge_and_end(sweep: Sweep, run: str | None, dry_run: bool) -> int:
    """cleanup's work once its sweep is set: the claims, their verdicts, then a dry run's list or the rounds."""
    claims, running = _claims(sweep, run)
    if running is not None:
        return running
    if not claims:
        return _nothing_left(sweep, run)
    for rid in sorted({c.run for group in claims.values() for c in group}):
        # the verdict's count, as the report gives it; the descendants the log names of them said apart
        n = sum(any(c.run == rid and not c.by_descent for c in group) for group in claims.values())
        kids = sum(all(c.by_descent for c in group) and any(c.run == rid for c in group) for group in claims.values())
        more = f", and {kids} process(es) the log names as their descendants" if kids else ""
        sweep.say(f"run {rid or '?'}: {n} process(es) left behind according to the log{more}")
    for group in claims.values():
        sweep.admit(group[0], tuple(group[1:]))
    if dry_run:
        return _dry_run(sweep)
    return _rounds(sweep)


def add_parser(sub: Any) -> None:
    """cleanup's subcommand and its arguments."""
    p = sub.add_parser("cleanup", help="end a run's leftover processes, each checked by pid, start time and owner")
    p.add_argument("logs", nargs="+", metavar="LOG", help="the run's log(s)")
    p.add_argument("--run", metavar="ID", help="only this run id (default: every run in the log)")
    p.add_argument("--dry-run", action="store_true", help="say what would be ended; signal nothing (default: off)")
    p.add_argument("--grace", type=_grace, default=DEFAULT_GRACE_S, metavar="S",
                   help=f"seconds between SIGTERM and SIGKILL, at most {MAX_GRACE_S:g} (each wait is capped by "
                        f"what is left of cleanup's {CLEANUP_BUDGET_S:g} s; default: {DEFAULT_GRACE_S:g})")
    p.set_defaults(func=run)


def _owned_model(path: str) -> tuple[Any, int]:
    """A log's model and the uid that owns the very file read. The owner comes from fstat of the fd
    that is read (reopened through /proc/self/fd, which names that open file, not the path): a
    second lookup of the path could find another file, swapped in by a user who can write the folder."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # NONBLOCK: a FIFO must not hang
    alias = f"/proc/self/fd/{fd}"
    try:
        owner = os.fstat(fd).st_uid
        model = fold_and_judge(stream_logs([alias]).records)
        for r in model.runs.values():
            held_not_absent(r)  # as the report: no watcher record in a log that lost records is no proof none ran
        return model, owner
    except NoUsableLog as exc:
        raise NoUsableLog(str(exc).replace(alias, path)) from None
    except OSError as exc:
        raise OSError(str(exc).replace(alias, path)) from None
    finally:
        os.close(fd)


def run(args: argparse.Namespace) -> int:
    """Each log read and judged on its own: its candidates must be its owner's processes. cleanup reads
    the logs again between rounds (a successor forked by a leftover writes its own record); a log that
    cannot be read again keeps its last reading."""
    last: dict[str, tuple[Any, int | None]] = {}
    unusable = []
    for path in args.logs:
        try:
            last[path] = _owned_model(path)
        except (OSError, NoUsableLog) as exc:
            unusable.append(f"{path}: {exc}")
    for problem in unusable:
        print(f"wp-autotrace: cannot read {problem}", file=sys.stderr)
    if not last:
        raise NoUsableLog("; ".join(unusable))
    held = sorted({rid for model, _ in last.values() for rid in model.runs}, key=str)
    if args.run is not None and args.run not in held:
        # as report --run: a mistyped id is no run with nothing left ("nothing to clean up", exit 0)
        raise NoUsableLog(f"no run {args.run!r} in the log; runs: {', '.join(rid or '?' for rid in held)}")

    def reload() -> list[tuple[Any, int | None]]:
        for path in list(last):
            try:
                last[path] = _owned_model(path)
            except (OSError, NoUsableLog):
                pass
        return list(last.values())

    logs = set()
    for path in last:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            logs.add((st.st_dev, st.st_ino))
    return cleanup(list(last.values()), args.run, args.dry_run, args.grace, reload=reload, logs=logs)


def _grace(text: str) -> float:
    """0, or a positive number of seconds up to cleanup.MAX_GRACE_S (argparse type)."""
    value = 0.0 if text.strip() in ("0", "0.0") else seconds(text)
    if value > MAX_GRACE_S:
        raise argparse.ArgumentTypeError(f"at most {MAX_GRACE_S:g} s (cleanup's whole budget: every wait is "
                                         f"capped by it): {text!r}")
    return value
