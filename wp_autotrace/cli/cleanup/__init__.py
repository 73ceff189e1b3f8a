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
live target and walks /proc children from each, so that descendants born
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
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from ...analysis.fold.model import Process, Run
from ...analysis.read.logread import NoUsableLog, stream_logs
from ...analysis.words.fmt import escape, size_text
from ...common.env import REDACT_ENV
from ...common.procfs import same_process
from ...common.redact import env_secrets, environ_secrets, parse_patterns, redact_argv
from ..base import seconds
from .candidates import (
    Candidate,
    Checker,
    Key,
    Models,
    _key,
    find_candidates,
)
from .successors import _members_named, _selected, await_newborns, logged_successors

# Exit statuses (their meanings: cli/main.py EXIT_STATUSES).
CLEAN = 0  # every candidate ended or was already gone
REFUSED = 1  # some candidate was refused (pid reused, other owner/host) or survived SIGKILL
STILL_RUNNING = 3  # a selected run's main process is alive: nothing signalled

DEFAULT_GRACE_S = 5.0
POLL_S = 0.05
KILL_WAIT_S = 2.0  # after SIGKILL the kernel needs only a moment; bounded anyway
# A round ends what the walk found; a member's signal handler may still fork. Rounds repeat until the
# tree is empty, bounded: a tree that regrows this often, or for this long, is reported, not chased.
MAX_ROUNDS = 5
NAMED_MEMBER = "the log names it as the run's"  # and not as left behind (_named_how)
CLEANUP_BUDGET_S = 120.0
# --grace at most this: every wait is capped at what is left of CLEANUP_BUDGET_S, so a longer grace
# could never be waited; refusing it says so instead of silently waiting less.
MAX_GRACE_S = CLEANUP_BUDGET_S
MAX_TREE = 100_000  # processes walked per round: a ppid loop or a fork bomb cannot hang the walk
CMD_SHOWN = 120  # characters of a command line in a message


def _pin(pid: int) -> int | None:
    """A pidfd for pid (signals through it cannot reach a later process with the same pid)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _exited(pidfd: int) -> bool:
    """Whether the pinned process has ended (a pidfd polls readable once its process exits)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _signal(pid: int, pidfd: int | None, sig: int) -> bool:
    """Send sig; False if the process is gone."""
    try:
        if pidfd is not None and hasattr(signal, "pidfd_send_signal"):
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _children_first(targets: list[tuple[Candidate, dict[str, Any]]]) -> list[tuple[Candidate, dict[str, Any]]]:
    """Deepest first, by the live parent links among the targets."""
    parent = {c.pid: info["ppid"] for c, info in targets}

    def depth(pid: int) -> int:
        d, seen = 0, {pid}
        while parent.get(pid) in parent and parent[pid] not in seen:
            pid = parent[pid]
            seen.add(pid)
            d += 1
        return d

    return sorted(targets, key=lambda t: (-depth(t[0].pid), t[0].pid))


def _label(c: Candidate) -> str:
    return f"{c.pid} {c.role}"


def _escaping(say: Any) -> Any:
    """say, with every line passed through fmt.escape (controls, bidi and invisible characters)."""
    return lambda text: say(escape(text))


class Sweep:
    """The verified targets of one cleanup, their pidfds, and what became of them."""

    def __init__(self, checker: Checker, dry_run: bool, grace: float, say: Any) -> None:
        self.checker = checker
        self.dry_run = dry_run
        self.grace = grace
        self.say = say
        self.deadline = time.monotonic() + CLEANUP_BUDGET_S  # every wait ends by then
        self.run_id: str | None = None  # the run selected (None: every run in the logs)
        self.models: Models = []  # the logs as last read
        self.reload: Callable[[], Models] | None = None  # read the logs again (None: keep self.models)
        self.known: dict[tuple[str, int], list[float]] = {}  # (host, pid) -> start times claimed or admitted
        self.targets: dict[int, tuple[Candidate, dict[str, Any]]] = {}  # pid -> (candidate, live stat)
        self.pins: dict[int, int | None] = {}
        self.ended = 0
        self.survivors: list[Candidate] = []
        self.status = CLEAN
        self.since: int | None = None  # the kernel's last pid before a round's SIGTERMs (successors.py)
        # (host, pid) -> (start, why) of each claim refused: a live process the log names is then said refused.
        self.refusals: dict[tuple[str, int], list[tuple[float | None, str]]] = {}

    def know(self, c: Candidate) -> None:
        if c.create_time is not None:
            self.known.setdefault((c.host, c.pid), []).append(c.create_time)

    def is_known(self, host: str, pid: int, create_time: float | None) -> bool:
        """Is this process one a log claims for the run, or a target?"""
        return create_time is not None and any(same_process(t, create_time)
                                               for t in self.known.get((host, pid), ()))

    def admit(self, c: Candidate, also: tuple[Candidate, ...] = ()) -> None:
        """Pin, then judge every claim on this process (the checks then hold for the pidfd): c and the
        same process as named by other logs. It joins only if no claim is refused: a process that some
        log's owner may not have ended is not signalled, whichever log came first. Refusals are said
        and counted."""
        held = self.targets.get(c.pid)
        if held is not None and c.create_time is not None and held[0].create_time is not None and same_process(
                held[0].create_time, c.create_time):
            return  # already a member (a log's start and the live one may differ by the clock's grain)
        pidfd = _pin(c.pid)  # a dry run pins too: the walk's membership test uses the pin
        verdicts = [(claim, self.checker.refusal(claim)) for claim in (c, *also)]
        refused = [(claim, why) for claim, why in verdicts if why not in (None, "gone")]
        info = self.checker.same(c.pid, c.create_time) if not refused and all(
            why is None for _, why in verdicts) else None
        if info is not None:
            self.targets[c.pid] = (c, info)
            self.pins[c.pid] = pidfd
            self.know(c)
            return
        if pidfd is not None:
            os.close(pidfd)
        if not refused:
            self.say(f"already gone: {_label(c)}")
            return
        for claim, reason in refused:
            self.say(f"refused: {_label(claim)}: {reason}")
            self.refusals.setdefault((claim.host, claim.pid), []).append((claim.create_time, reason))
        for claim, verdict in verdicts:
            if verdict is None:
                self.say(f"refused: {_label(claim)}: the log of uid {claim.owner} would admit it, but not every "
                         "log that names it may: it is ended only if every log that names it may")
        self.status = REFUSED

    def refusal_of(self, c: Candidate) -> str:
        """Why cleanup refused to signal this process ("" if it did not)."""
        return "; ".join(dict.fromkeys(why for start, why in self.refusals.get((c.host, c.pid), ())
                                       if same_process(start, c.create_time)))

    def unsignalled(self, c: Candidate, named: str) -> None:
        """Say why a live process the log names as the run's was not signalled: refused (and why), or never
        listed left behind."""
        why = self.refusal_of(c)
        self.say(f"still alive, not signalled: {_label(c)}: {named}" + (
            f"; cleanup refused to signal it: {why}" if why else
            ", but not as left behind" if named == NAMED_MEMBER else ", but it was not signalled (see above)"))

    def close(self) -> None:
        for fd in self.pins.values():
            if fd is not None:
                os.close(fd)
        self.pins.clear()

    def member_alive(self, pid: int) -> bool:
        """Is pid still the member admitted? Its pidfd (where pinned) has not reported an exit, and the
        live pid has the member's start time. False for a member that ended, even if its pid is reused."""
        entry = self.targets.get(pid)
        if entry is None:
            return False
        pidfd = self.pins.get(pid)
        if pidfd is not None and _exited(pidfd):
            return False
        return self.checker.same(pid, entry[0].create_time) is not None

    def signal(self, pid: int, sig: int) -> bool:
        """Send sig to a member; False if it is gone. Through its pidfd where pinned; without one, only
        while the live pid is still the member (never a later process that took an ended member's pid)."""
        pidfd = self.pins.get(pid)
        if pidfd is None and not self.member_alive(pid):
            return False
        return _signal(pid, pidfd, sig)

    def send(self, pids: list[int], sig: int) -> None:
        for pid in pids:
            self.signal(pid, sig)

    def _children(self, member: Candidate) -> list[tuple[int, dict[str, Any]]]:
        """The live children of a live member, each with its stat; [] unless the member is still itself.

        The member is re-verified AFTER its children list and their stats are read: a child whose ppid
        named the member's pid while the member (pinned) was alive is the member's child. A member that
        ended, or a pid reused since, yields nothing: its children are not the run's."""
        reader = self.checker.reader
        kids = []
        for kid in reader.children(member.pid) or []:
            info = reader.stat(kid)
            if kid in self.targets or info is None or info["ppid"] != member.pid or member.create_time is None:
                continue
            if info["create_time"] < member.create_time and not same_process(info["create_time"],
                                                                             member.create_time):
                continue
            kids.append((kid, info))
        return kids if kids and self.member_alive(member.pid) else []

    def descendants(self, pids: list[int]) -> list[Candidate]:
        """Live children of the given live members, down the tree (born after the verdict: members by
        descent), each admitted (pinned, checked) as it is found, so that its own children are walked
        only while it is a live, pinned member too; the candidates admitted."""
        found: list[Candidate] = []
        queue = [pid for pid in pids if pid in self.targets]
        walked = 0
        while queue and walked < MAX_TREE:
            member = self.targets[queue.pop()][0]
            walked += 1
            for kid, info in self._children(member):
                c = Candidate(member.run, member.host, kid, info["create_time"], "child",
                              live_cmd(self.checker.reader, kid), None, None, member.owner)
                self.admit(c)
                if kid in self.targets:
                    found.append(c)
                    queue.append(kid)
        return found

    def grow(self) -> list[int]:
        """Stop every live target (not in a dry run), then add their descendants, stopping each as it
        joins, until a walk finds nobody new; the pids added."""
        added: list[int] = []
        frontier = [pid for pid in self.targets if self.member_alive(pid)]
        while frontier:
            if not self.dry_run:
                self.send(frontier, signal.SIGSTOP)  # a stopped process cannot fork while we walk
            fresh = self.descendants(frontier)
            frontier = []
            for c in fresh:
                frontier.append(c.pid)
                added.append(c.pid)
                self.say(f"found: {_label(c)}, a descendant of the run's leftovers")
        return added

    def wait_gone(self, pids: list[int], seconds: float) -> list[int]:
        """Wait up to seconds for pids to end; the ones still alive."""
        deadline = time.monotonic() + seconds
        left = pids
        while True:
            left = [pid for pid in left if self.checker.same(pid, self.targets[pid][0].create_time)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(POLL_S)

    def end_round(self, pids: list[int]) -> list[int]:
        """SIGTERM in order, SIGCONT, wait up to grace, SIGKILL what is left; the pids that survived."""
        order = [c.pid for c, _ in _children_first([self.targets[pid] for pid in pids])]
        self.since = self.checker.reader.last_pid()  # every member is stopped: none has forked since
        for pid in order:
            if not self.signal(pid, signal.SIGTERM):
                self.say(f"already gone: {_label(self.targets[pid][0])}")
        self.send(order, signal.SIGCONT)  # stopped for the walk: let each act on its SIGTERM
        grace = min(self.grace, max(0.0, self.deadline - time.monotonic()))  # the budget bounds every wait
        left = self.wait_gone(order, grace)
        for pid in order:
            if pid not in left:
                self.say(f"ended: {_label(self.targets[pid][0])} (SIGTERM)")
                self.ended += 1
        self.send(left, signal.SIGKILL)
        survivors = self.wait_gone(left, KILL_WAIT_S)
        for pid in left:
            if pid not in survivors:
                self.say(f"ended: {_label(self.targets[pid][0])} (SIGKILL after {grace:.3g} s)")
                self.ended += 1
        return survivors


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
    for run, owner in _selected(sweep):
        for p in _members_named(run):
            held = sweep.targets.get(p.pid)
            if held is not None and same_process(held[0].create_time, p.create_time):
                continue  # a target: counted as ended or surviving already
            if p.host == sweep.checker.host and sweep.checker.same(p.pid, p.create_time) is not None:
                c = Candidate(run.id, p.host, p.pid, p.create_time, p.role or "child", p.cmd or p.name, None, None,
                              owner)
                found.setdefault(_key(c), (c, _named_how(run, p)))
    return list(found.values())


def live_cmd(reader: Any, pid: int) -> str:
    """A live process's command line as the log would hold it: masked argument by argument (redact.py),
    with the secrets of its own environment and of this one's."""
    patterns = parse_patterns(os.environ.get(REDACT_ENV, ""))
    secrets = env_secrets(os.environ, patterns) + environ_secrets(reader.environ(pid), patterns)
    return " ".join(redact_argv(reader.argv(pid), patterns, secrets)).strip()


def _dry_run(sweep: Sweep) -> int:
    """Say what would be ended: each target with its live command line beside the logged one."""
    sweep.grow()
    for c, info in _children_first(list(sweep.targets.values())):
        live = live_cmd(sweep.checker.reader, c.pid)
        logged = f"; logged: {c.cmd[:CMD_SHOWN]}" if c.cmd and c.cmd != live else ""
        sweep.say(f"would end: {_label(c)}, rss {size_text(info['rss'])}: {live[:CMD_SHOWN] or '?'}{logged}")
    sweep.say(f"dry run: {len(sweep.targets)} process(es) would be ended; nothing signalled")
    return sweep.status


def _next_round(sweep: Sweep) -> list[int]:
    """What is left of the tree after a round: the live members' new children (their signal handlers
    may have forked), and the children the re-read logs name (a successor already re-parented)."""
    pending = []
    for c in sweep.descendants([pid for pid in sweep.targets if sweep.member_alive(pid)]):
        pending.append(c.pid)
        sweep.say(f"found: {_label(c)}, a descendant of the run's leftovers")
    _admit_logged(sweep, pending)
    for info in await_newborns(sweep, lambda: _admit_logged(sweep, pending)):
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
            sweep.say(f"found: {_label(c)}, named by the log as a child of one of the run's leftovers")


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
            sweep.say(f"still alive after SIGKILL: {_label(sweep.targets[pid][0])} "
                      f"(uninterruptible? check /proc/{pid}/status)")
        sweep.survivors = [sweep.targets[pid][0] for pid in survivors]
        pending = _next_round(sweep)
    if pending:
        sweep.say(f"the run's tree still grows after {rounds} round(s): {len(pending)} process(es) not ended")
    unended = [(c, named) for c, named in named_alive(sweep) if c.pid not in pending]
    for c, named in unended:
        sweep.unsignalled(c, named)
    left = len(sweep.survivors) + len(pending) + len(unended)
    sweep.say(f"cleanup: {sweep.ended} process(es) ended, {left} still alive")
    return REFUSED if left else sweep.status


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
            claims.setdefault(_key(c), []).append(c)
            sweep.know(c)
    for c in logged_successors(sweep, reread=False):
        claims.setdefault(_key(c), []).append(c)
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
            reload: Callable[[], Models] | None = None) -> int:
    """Verify and end the selected run's leftovers; the exit status. models: each log's model with the
    uid that owns the log (None: not known); each log's candidates are judged by its own owner, and a
    process named by several logs by every one of them. reload reads the logs again (between rounds,
    and for the final count); None: the logs are read once."""
    sweep = Sweep(Checker(), dry_run, grace, _escaping(say))  # log text reaches the terminal escaped
    sweep.models, sweep.reload, sweep.run_id = models, reload, run
    try:
        claims, running = _claims(sweep, run)
        if running is not None:
            return running
        if not claims:
            return _nothing_left(sweep, run)
        for rid in sorted({c.run for group in claims.values() for c in group}):
            n = sum(any(c.run == rid for c in group) for group in claims.values())
            sweep.say(f"run {rid or '?'}: {n} process(es) left behind according to the log")
        for group in claims.values():
            sweep.admit(group[0], tuple(group[1:]))
        if dry_run:
            return _dry_run(sweep)
        return _rounds(sweep)
    finally:
        if not dry_run:  # interrupted mid-round: never leave a process stopped
            sweep.send(list(sweep.targets), signal.SIGCONT)
        sweep.close()


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
    from ...analysis.fold.verdict import fold_and_judge as build

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # NONBLOCK: a FIFO must not hang
    alias = f"/proc/self/fd/{fd}"
    try:
        owner = os.fstat(fd).st_uid
        return build(stream_logs([alias]).records), owner
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

    def reload() -> list[tuple[Any, int | None]]:
        for path in list(last):
            try:
                last[path] = _owned_model(path)
            except (OSError, NoUsableLog):
                pass
        return list(last.values())

    return cleanup(list(last.values()), args.run, args.dry_run, args.grace, reload=reload)


def _grace(text: str) -> float:
    """0, or a positive number of seconds up to cleanup.MAX_GRACE_S (argparse type)."""
    value = 0.0 if text.strip() in ("0", "0.0") else seconds(text)
    if value > MAX_GRACE_S:
        raise argparse.ArgumentTypeError(f"at most {MAX_GRACE_S:g} s (cleanup's whole budget: every wait is "
                                         f"capped by it): {text!r}")
    return value
