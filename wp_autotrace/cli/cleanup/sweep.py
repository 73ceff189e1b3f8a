"""What cleanup does to /proc and with signals: the verified targets of one cleanup (Sweep), pinned by
pidfd where the kernel has them, walked for their children, signalled in rounds; and a live process's
command line as a log would hold it (live_cmd).

What the logs claim is read by candidates.py and successors.py; the rounds, the final count and the
command are the package's (__init__.py), whose docstring holds the whole argument.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from ...common.env import REDACT_ENV
from ...common.procfs import environ_secrets, same_process
from ...common.redact import env_secrets, parse_patterns, redact_argv
from ...common.vocab import STOPPED
from .candidates import Candidate, Checker, Models, OtherRun, env_claim, other_runs

# Exit statuses (their meanings: cli/main.py EXIT_STATUSES).
CLEAN = 0  # every candidate ended or was already gone
REFUSED = 1  # some candidate was refused (pid reused, other owner/host) or survived SIGKILL

POLL_S = 0.05
# A member takes SIGSTOP within moments; one in uninterruptible sleep (D) takes it only when that ends: bounded.
STOP_WAIT_S = 2.0
STOP_POLL_S = 0.005  # most members have stopped by the first look: the wait is short and on the walk's path
KILL_WAIT_S = 2.0  # after SIGKILL, with none of the killed ending: a survivor (D state); Sweep.wait_gone
NAMED_MEMBER = "the log names it as the run's"  # and not as left behind (the package's _named_how)
CLEANUP_BUDGET_S = 120.0
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


def children_first(targets: list[tuple[Candidate, dict[str, Any]]]) -> list[tuple[Candidate, dict[str, Any]]]:
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


def target_label(c: Candidate) -> str:
    return f"{c.pid} {c.role}"


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
        self.unproven: dict[int, float] = {}  # pid -> start of each live process said but never proven the run's
        self._others: dict[tuple[str, int], list[OtherRun]] = {}  # other_runs of self.models, read once per reading
        self._others_of: Models | None = None
        self._runs: set[str] = set()  # the ids of the runs selected in self.models
        # (host, pid) -> (start, run id, "" where not known) of each process refused as another run's
        self.foreign: dict[tuple[str, int], tuple[float | None, str]] = {}
        self.logs: set[tuple[int, int]] = set()  # (st_dev, st_ino) of the logs read: a process tracing into one
        self.stopped_before: dict[int, str] = {}  # pid -> /proc state (T, t) of a member stopped before cleanup

    def know(self, c: Candidate) -> None:
        if c.create_time is not None:
            self.known.setdefault((c.host, c.pid), []).append(c.create_time)

    def is_known(self, host: str, pid: int, create_time: float | None) -> bool:
        """Is this process one a log claims for the run, or a target?"""
        return create_time is not None and any(same_process(t, create_time)
                                               for t in self.known.get((host, pid), ()))

    def other_run(self, c: Candidate) -> str:
        """Why c is another run's than the one selected, in words ("" where no log says so): its own run's
        records or watcher name it; or, for a process found below a leftover (by_descent), it started another
        run's main process (its launcher) or is a child of a process refused so. Every claim is matched by start
        time; a launcher without one counts where it began before the main it started: refused is the safe side."""
        if self._others_of is not self.models:
            self._others, self._others_of = other_runs(self.models, self.run_id), self.models
            self._runs = {r.id for model, _ in self.models for r in model.runs.values()
                          if self.run_id is None or r.id == self.run_id}
        for o in self._others.get((c.host, c.pid), ()):
            if o.before is not None and not c.by_descent:
                continue  # a leftover of this run that started another run's main is still this run's
            if o.create_time is None or c.create_time is None:
                same = o.before is not None and c.create_time is not None and c.create_time <= o.before + 1.0
            else:
                same = same_process(o.create_time, c.create_time)
            if same:
                self.foreign[(c.host, c.pid)] = (c.create_time, o.run)
                return (f"run {o.run}'s {o.what}, as the log says: not this run's, whatever runs above it "
                        f"(`cleanup --run {o.run}` once that run has ended)")
        if not c.by_descent:
            return ""
        info = self.checker.reader.stat(c.pid)
        above = self.foreign.get((c.host, info["ppid"])) if info is not None else None
        if above is not None and info is not None and self.checker.same(info["ppid"], above[0]) is not None:
            self.foreign[(c.host, c.pid)] = (c.create_time, above[1])
            return f"a child of {info['ppid']}, run {above[1]}'s: not this run's"
        # a run writing another log: only the process's environment tells (its own, or a child's it launched)
        why = env_claim(self.checker.reader, c.pid, self._runs, self.logs)
        if not why:
            why = next((f"the launcher of {kid}, whose {claim[4:]}" for kid in self.checker.reader.children(c.pid) or []
                        if (claim := env_claim(self.checker.reader, kid, self._runs, self.logs))), "")
        if why:
            self.foreign[(c.host, c.pid)] = (c.create_time, "")  # its run's id not known
        return why

    def refuse(self, c: Candidate, why: str) -> None:
        """Say and count a refusal: c is not signalled (said once)."""
        said = self.refusals.setdefault((c.host, c.pid), [])
        if (c.create_time, why) not in said:
            self.say(f"refused: {target_label(c)}: {why}")
            said.append((c.create_time, why))
        if (c.host, c.pid) not in self.foreign:
            self.status = REFUSED  # another run's process is not this run's to end: no failure of this one

    def is_foreign(self, host: str, pid: int, create_time: float | None) -> bool:
        """Is this process one refused as another run's?"""
        entry = self.foreign.get((host, pid))
        return entry is not None and same_process(entry[0], create_time)

    def admit(self, c: Candidate, also: tuple[Candidate, ...] = ()) -> None:
        """Pin, then judge every claim on this process (the checks then hold for the pidfd): c and the
        same process as named by other logs. It joins only if no claim is refused: a process that some
        log's owner may not have ended is not signalled, whichever log came first. Refusals are said
        and counted."""
        held = self.targets.get(c.pid)
        if held is not None and c.create_time is not None and held[0].create_time is not None and same_process(
                held[0].create_time, c.create_time):
            return  # already a member (a log's start and the live one may differ by the clock's grain)
        if other := self.other_run(c):
            self.refuse(c, other)
            return
        pidfd = _pin(c.pid)  # a dry run pins too: the walk's membership test uses the pin
        verdicts = [(claim, self.checker.refusal(claim)) for claim in (c, *also)]
        refused = [(claim, why) for claim, why in verdicts if why not in (None, "gone")]
        info = self.checker.same(c.pid, c.create_time) if not refused and all(
            why is None for _, why in verdicts) else None
        if info is not None:
            if info.get("state") in STOPPED:  # read before cleanup's own SIGSTOP (grow)
                self.stopped_before[c.pid] = info["state"]
            self.targets[c.pid] = (c, info)
            self.pins[c.pid] = pidfd
            self.know(c)
            return
        if pidfd is not None:
            os.close(pidfd)
        if not refused:
            self.say(f"already gone: {target_label(c)}")
            return
        for claim, reason in refused:
            self.refuse(claim, reason)
        for claim, verdict in verdicts:
            if verdict is None:
                self.say(f"refused: {target_label(claim)}: the log of uid {claim.owner} would admit it, but not every "
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
        self.say(f"still alive, not signalled: {target_label(c)}: {named}" + (
            f"; cleanup refused to signal it: {why}" if why else
            ", but not as left behind" if named == NAMED_MEMBER else ", but it was not signalled (see above)"))

    def stopped_words(self, pid: int) -> str:
        """How a member stopped before cleanup began is ended, in words ("" for one that was not): SIGTERM
        alone wakes a stopped process only where its action is the default; one that handles SIGTERM stays
        stopped until SIGCONT, which end_round sends after every SIGTERM, as a `kill` user does."""
        state = self.stopped_before.get(pid)
        if state == "T":
            return ("; it was stopped (state T) when cleanup began: SIGCONT followed its SIGTERM so that it could act "
                    "on it, as `kill -TERM` then `kill -CONT` do")
        return f"; it was stopped by a tracer (state {state}) when cleanup began" if state else ""

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
                              live_cmd(self.checker.reader, kid), None, None, member.owner, by_descent=True)
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
                self.wait_stopped(frontier)
            fresh = self.descendants(frontier)
            frontier = []
            for c in fresh:
                frontier.append(c.pid)
                added.append(c.pid)
                self.say(f"found: {target_label(c)}, a descendant of the run's leftovers")
        return added

    def wait_stopped(self, pids: list[int]) -> None:
        """Wait (bounded) until each member has stopped, before its children are read; say any that has not.

        kill() only queues SIGSTOP: the member takes it when it next returns to user space, so one inside
        fork() finishes it first. A child forked after its parent's children were read was never walked;
        when SIGTERM then ended the parent it was orphaned (ppid 1), out of reach of every later walk, and
        cleanup said "0 still alive" beside it. Once every thread is stopped its children are all listed."""
        deadline = min(time.monotonic() + STOP_WAIT_S, self.deadline)
        left = pids
        while True:
            left = [pid for pid in left if self.member_alive(pid) and not self.checker.reader.stopped(pid)]
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(STOP_POLL_S)
        for pid in left:
            self.say(f"not stopped after {STOP_WAIT_S:g} s: {target_label(self.targets[pid][0])} (uninterruptible? "
                     "a child it forks meanwhile may be missed)")

    def wait_gone(self, pids: list[int], seconds: float, while_ending: bool = False) -> list[int]:
        """Wait up to seconds for pids to end; the ones still alive. while_ending (after SIGKILL): each look that
        finds more of them ended gives the rest the seconds again, up to the cleanup's budget. A killed process
        ends only once it is scheduled to run its exit, and under load hundreds of them take their time (a
        500-deep chain beside two busy loops: 313 left after the grace, 1.9 s to end them; one run said "73
        still alive" that a look 1 s later found all gone): one still ending is no survivor. Only seconds in
        which none of them ended say still alive."""
        deadline = time.monotonic() + seconds
        left = pids
        while True:
            alive = [pid for pid in left if self.checker.same(pid, self.targets[pid][0].create_time)]
            now = time.monotonic()
            if while_ending and len(alive) < len(left):
                deadline = max(deadline, min(now + seconds, self.deadline))
            left = alive
            if not left or now >= deadline:
                return left
            time.sleep(POLL_S)

    def end_round(self, pids: list[int]) -> list[int]:
        """SIGTERM in order, SIGCONT, wait up to grace, SIGKILL what is left; the pids that survived."""
        order = [c.pid for c, _ in children_first([self.targets[pid] for pid in pids])]
        self.since = self.checker.reader.last_pid()  # every member is stopped: none has forked since
        gone = set()  # ended before its SIGTERM: not cleanup's doing, so never counted as ended by it
        for pid in order:
            if not self.signal(pid, signal.SIGTERM):
                gone.add(pid)
                self.say(f"already gone: {target_label(self.targets[pid][0])}")
        self.send(order, signal.SIGCONT)  # stopped for the walk: let each act on its SIGTERM
        grace = min(self.grace, max(0.0, self.deadline - time.monotonic()))  # the budget bounds every wait
        left = self.wait_gone([pid for pid in order if pid not in gone], grace)
        for pid in order:
            if pid not in left and pid not in gone:
                self.say(f"ended: {target_label(self.targets[pid][0])} (SIGTERM{self.stopped_words(pid)})")
                self.ended += 1
        self.send(left, signal.SIGKILL)
        survivors = self.wait_gone(left, KILL_WAIT_S, while_ending=True)
        for pid in left:
            if pid not in survivors:
                self.say(f"ended: {target_label(self.targets[pid][0])} (SIGKILL after {grace:.3g} s"
                         f"{self.stopped_words(pid)})")
                self.ended += 1
        return survivors


def live_cmd(reader: Any, pid: int) -> str:
    """A live process's command line as the log would hold it: masked argument by argument (redact.py),
    with the secrets of its own environment and of this one's."""
    patterns = parse_patterns(os.environ.get(REDACT_ENV, ""))
    secrets = env_secrets(os.environ, patterns) + environ_secrets(reader.environ(pid), patterns)
    return " ".join(redact_argv(reader.argv(pid), patterns, secrets)).strip()
