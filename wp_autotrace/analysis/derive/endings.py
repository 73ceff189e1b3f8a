"""How each process ended, chosen from evidence and named with it (docs/evidence.md), and Endings, which computes
every process's and pool's ending once (a pool's is decided in poolends.py; the record and its kinds: ending.py).

Every verb the report says about an ending comes from here or poolends.py, with the records that back it (`evidence`):
"killed by SIGTERM" only with a signal number the log holds (`run`'s waited status, a zombie's wait status,
the pool owner's own process.wait()), "shut it down" only for a shutdown request that returned with the
sidecar ending after it, "the OOM killer" only with the cgroup's OOM kill count rising. Otherwise the
ending is `unknown`, and said so. The jobs a pool lost or had cut off, read from these endings: lostjobs.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common import vocab as V
from ..fold.model import signal_name
from .alive import Seen, quiet_s, seen_alive, unseen_evidence, unseen_words
from .callers import requester
from .ending import (
    EXEC,
    EXIT,
    GROUP_SLACK_S,
    OOM_AMONG,
    OOM_KILL,
    OS_EXIT,
    QUIESCED,
    RUNNING,
    SHUTDOWN,
    SIGNAL,
    UNKNOWN,
    UNSEEN,
    WITH_CREATOR,
    WITH_GROUP,
    Ending,
    ancestors,
    proved_ended_before,
)
from .errors import broken_jobs
from .ooms import group_ooms
from .poolends import pool_ending
from .senders import Senders

if TYPE_CHECKING:
    from ..fold.model import Pool, Process, Run

# A process still alive this long after the others of its group ended lived on (the group's signal
# did not end it: it has a handler).
LIVED_ON_S = 1.0
# Died with its creator: ended this soon after it (plus two ticks). Pool processes poll their parent
# in torch's _async_compile_initializer (compile_worker/utils.py): every 1 s up to 2.9, every 60 s from 2.10.
WITH_CREATOR_S = 2.0
WATCHDOG_OLD_S, WATCHDOG_NEW_S = 1.0, 60.0


def _status_words(status: int) -> tuple[str | None, int | None]:
    """A wait status (waitpid's, as /proc/PID/stat field 52 holds it): (signal name, exit code)."""
    sig = status & 0x7F
    return (signal_name(sig), None) if sig else (None, (status >> 8) & 0xFF)


def _signal_evidence(p: Process, pools_by_sidecar: dict[int, Pool]) -> tuple[str | None, int | None, str]:
    """(signal, exit code, evidence) from the records that hold a status: `run`'s waited status (the
    main process), a zombie's wait status, the one the watcher read through its pidfd once it was reaped, the pool
    owner's process.wait() of its sidecar."""
    run = p.run
    if run is not None and run.root is p and run.run_exit is not None:
        status = run.run_exit.get("status")
        if isinstance(status, int):
            if status < 0:
                return signal_name(-status), None, f"run_exit: wp-autotrace run waited for it: {signal_name(-status)}"
            return None, status, f"run_exit: wp-autotrace run waited for it: exit code {status}"
    z = p.zombie
    if z is not None and isinstance(z.get("status"), int):
        sig, code = _status_words(z["status"])
        return sig, code, (f"zombie: /proc/{p.pid}/stat wait status {z['status']} "
                           f"({sig or f'exit code {code}'}), defunct under {z.get('ppid')}")
    if p.wait_status is not None:  # no zombie to read: its parent reaped it at once (a Popen.wait, a shell)
        sig, code = _status_words(p.wait_status)
        return sig, code, (f"tree: wait status {p.wait_status} ({sig or f'exit code {code}'}), read through its "
                           "pidfd once its parent had reaped it")
    pool = pools_by_sidecar.get(id(p))
    call = pool.shutdown_call if pool is not None else None
    rc = call.ret.get("sidecar_returncode") if call is not None else None
    if isinstance(rc, int):
        if rc < 0:
            return signal_name(-rc), None, f"SubprocPool.shutdown: torch's process.wait() of its sidecar gave {rc}"
        return None, rc, f"SubprocPool.shutdown: torch's process.wait() of its sidecar gave exit code {rc}"
    return None, None, ""


def _oom_possible(p: Process, pools_by_sidecar: dict[int, Pool]) -> bool:
    """Whether p's records leave room for an OOM kill: no status, or SIGKILL's (the kernel's only signal)."""
    sig, code, _ = _signal_evidence(p, pools_by_sidecar)
    return sig == "SIGKILL" or (sig is None and code is None)


def _parent_ended_them(q: Process, at: float, window: float) -> bool:
    """Whether q's parent explains q's end at `at` with no signal to the group: its sidecar was asked to stop by
    then (torch 2.13's sidecar ends its workers as it stops), or logged a broken pool then (one worker ended
    abruptly and the executor ended the rest: worker-lost tells it)."""
    side = q.parent
    if side is None:
        return False
    return (side.served_at is not None and side.served_at <= at + window) or any(
        abs(e["ts"] - at) <= window for e in broken_jobs(side))


class Endings:
    """Every process's and pool's ending for the selected runs (view.View), computed once."""

    def __init__(self, procs: list[Process], pools: list[Pool], torch_version: str = "", t0: float = 0.0,
                 log_end: float | None = None) -> None:
        self.t0 = t0  # evidence says times as the report does: seconds from its first record
        self.log_end = log_end  # the log's last record (all runs'): "at the end of the log" is then (alive.py)
        self.procs = procs
        self.pools = pools
        self.by_sidecar = {id(pool.sidecar): pool for pool in pools if pool.sidecar is not None}
        self.pool_of: dict[int, Pool] = {}
        for pool in pools:
            side = pool.sidecar
            if side is not None:
                self.pool_of[id(side)] = pool
                for q in side.children:
                    self.pool_of.setdefault(id(q), pool)
            for q in pool.members:
                self.pool_of.setdefault(id(q), pool)
        self.torch = torch_release(torch_version)
        self.senders = Senders(procs)
        self._proc: dict[int, Ending] = {}
        self._seen: dict[int, Seen] = {}  # id(process) -> alive.seen_alive's, once
        self._quiet: dict[tuple[int, str], float] = {}  # (id(run), host) -> alive.quiet_s, once
        self._pool: dict[int, Ending] = {}
        self._oom_groups: dict[int, dict[int, tuple[int, list[Process], str]]] = {}  # per run: ooms.group_ooms
        self._unnamed: dict[int, list[tuple[float | None, float, int]]] = {}  # per run: unnamed_ooms

    def rel(self, ts: float | None) -> str:
        return f"{ts - self.t0:.1f} s" if ts is not None else "?"

    def of(self, p: Process) -> Ending:
        found = self._proc.get(id(p))
        if found is None:
            found = self._proc[id(p)] = self._process(p)
        return found

    def seen(self, p: Process) -> Seen:
        """Whether p, no end record seen, is shown alive at the end of the log (alive.py); without a log end
        given, taken as alive (nothing to measure against)."""
        if self.log_end is None:
            return Seen(True, None, None)
        found = self._seen.get(id(p))
        if found is None:
            key = (id(p.run), p.host)
            quiet = self._quiet.get(key)
            if quiet is None:
                quiet = self._quiet[key] = quiet_s(p)
            found = self._seen[id(p)] = seen_alive(p, self.log_end, quiet)
        return found

    def _alive(self, p: Process, record: float | None) -> Ending:
        """The ending of p, no end seen: still running at the end of the log where a record shows it alive then;
        else when it was last seen, and that no record shows more."""
        seen = self.seen(p)
        if not seen.proven:
            return Ending(UNSEEN, unseen_words(seen, self.rel), None, unseen_evidence(seen, self.rel),
                          exit_record_at=record, last_seen=seen.last)
        return Ending(RUNNING, "still running at the end of the log", None, [], exit_record_at=record)

    def of_pool(self, pool: Pool) -> Ending:
        found = self._pool.get(id(pool))
        if found is None:
            found = self._pool[id(pool)] = pool_ending(self, pool)
        return found

    # -- processes ------------------------------------------------------------

    def _process(self, p: Process) -> Ending:
        at = p.ended_at
        record = p.end if p.exited else None
        sig, code, why = _signal_evidence(p, self.by_sidecar)
        if at is None and p.zombie is not None:
            at = p.zombie.get("since")
        if at is None:
            return self._alive(p, record)
        if p.exec_into is not None and not p.exited:
            name = p.exit_how.removeprefix("exec'd into ") if p.exit_how.startswith("exec'd") else "another program"
            # what that program's end was, where a status is known (`run`'s wait, a zombie's status)
            then = (f", which was killed by {sig}" if sig else
                    f", which exited (code {code})" if code is not None else "")
            return Ending(EXEC, f"exec'd into {name}{then}", at, ["exec record", *([why] if why else [])], sig,
                          code=code, exit_record_at=record)
        if code is None and (sent := self._sent(p, at, sig, why)) is not None:  # an exit code: it exited
            return sent
        group = self._with_group(p, at)
        if sig is not None:
            evidence = [why]
            oom, among = self._oom(p, at) if sig == "SIGKILL" else ("", False)
            if among:
                evidence.append(oom)
            elif oom:
                return Ending(OOM_KILL, "killed by the OOM killer (SIGKILL)", at, [why, oom], sig,
                              exit_record_at=record)
            # a Ctrl-C the program handled: it wrote its process_exit, so its exit handlers ran (the user's stop)
            words = ("stopped with Ctrl-C (SIGINT; its exit handlers ran)" if sig == "SIGINT" and p.exited
                     else f"killed by {sig}")
            if group:
                words += ", with the rest of its process group (a signal to the process group)"
                evidence.append(group)
            return Ending(SIGNAL, words, at, evidence, sig, exit_record_at=record, group=bool(group))
        if p.exited:
            if p.exit_how == "os._exit":
                return Ending(OS_EXIT, "left by os._exit", at, ["process_exit how os._exit"], exit_record_at=record)
            code = p.exit_code if p.exit_code is not None else code
            words = f"exited (code {code})" if code is not None else "exited"
            evidence = [f"process_exit (code {code})"]
            if (main := _killed_main(p)) is not None and record is not None:  # fold/finish.py settle_leftovers
                m_end = main.ended_at or at
                evidence.append(f"its process_exit {record - m_end:.1f} s after {main.role} {main.pid}'s end, where "
                                "the watcher's verdict named it left running; seen gone then")
                # its own exit record, not "by itself": a signal it handled (a launcher's SIGTERM to a handler that
                # calls sys.exit) writes the same record, and no record holds the signals a process received
                how = f" (code {code})" if code is not None else ""
                words = f"exited{how} {max(at - m_end, 0.0):.1f} s after {main.role} {main.pid}'s end"
            return Ending(EXIT, words, at, evidence, code=code, exit_record_at=record)
        if p.exit_unwritten is not None:  # it reached its exit record, which found no descriptor: lost, not a kill
            return _unwritten(p.exit_unwritten, code, at)
        if code is not None and p.traced:  # a code, and no process_exit: its exit handlers did not run
            return Ending(OS_EXIT, f"left without its exit handlers (os._exit, code {code})", at, [why], code=code)
        if code is not None:  # not traced: it wrote no records, and had no Python exit handlers to skip
            return Ending(EXIT, f"exited (code {code})", at, [why], code=code)
        oom, among = self._oom(p, at)
        if oom and among:
            kills, cands, _ = self.oom_group(p) or (0, [], "")
            return Ending(OOM_AMONG, f"ended as the OOM killer killed {kills} of the {len(cands)} processes that "
                          "ended then (which, the log does not say)", at, [oom])
        if oom:
            return Ending(OOM_KILL, "killed by the OOM killer", at, [oom])
        if group:
            return Ending(WITH_GROUP, "ended with the rest of its process group (a signal to the process group)",
                          at, [group], group=True)
        return self._by_relation(p, at)

    def _by_relation(self, p: Process, at: float) -> Ending:
        """Died with its creator, stopped by its pool, quiesced; else unknown."""
        parent = p.parent
        pend = parent.ended_at if parent is not None else None
        window = self._creator_window(p)
        # The parent first only when p's end was seen at least a tick later: ends in one tick (equal times) say
        # nothing of their order, and a parent that waited for its child (a shell wrapper) ends right after it.
        tick = p.run.interval if p.run is not None else 0.0
        if parent is not None and pend is not None and pend + tick / 2 < at <= pend + window:
            # a pool process notices its creator's end only at its watchdog's next poll: a late end is said as late
            words = (f"ended {at - pend:.1f} s after its creator ({parent.role} {parent.pid}), whose end torch's "
                     "worker watchdog polls for" if at - pend >= 1.0 and window > WITH_CREATOR_S + 2 * tick
                     else f"died with its creator ({parent.role} {parent.pid})")
            return Ending(WITH_CREATOR, words, at,
                          [f"no process_exit; {parent.role} {parent.pid} ended {at - pend:.1f} s before it "
                           f"(within {window:.0f} s)"])
        pool = self.pool_of.get(id(p))
        if pool is not None and pool.shutdown_at is not None and not proved_ended_before(p, pool.shutdown_at):
            by = requester(pool.shutdown_call)[0] if pool.shutdown_call is not None else "its pool"
            return Ending(SHUTDOWN, f"stopped by its pool's shutdown ({by})", at,
                          [f"SubprocPool.shutdown asked at {self.rel(pool.shutdown_at)}, before its end"], by=by)
        quiesce = [c for c in (pool.quiesce_calls if pool is not None else []) if c.ts <= at]
        if p.role == V.COMPILE_WORKER and quiesce:
            return Ending(QUIESCED, f"stopped when its pool quiesced ({requester(quiesce[-1])[0]})", at,
                          [f"SubprocPool.quiesce at {self.rel(quiesce[-1].ts)}, before its end"])
        return Ending(UNKNOWN, "ended (how is not known)", at, [])

    def _creator_window(self, p: Process) -> float:
        interval = p.run.interval if p.run is not None else 0.0
        if p.role in V.SIDECAR_ROLES or p.role == V.COMPILE_WORKER:
            poll = WATCHDOG_OLD_S if self.torch and self.torch < (2, 10) else WATCHDOG_NEW_S
            return poll + 2 * interval
        return WITH_CREATOR_S + 2 * interval

    def _with_group(self, p: Process, at: float) -> str:
        """Evidence that p ended with the rest of its process group while one of that group lived on."""
        pgid = p.pgid
        if pgid is None or p.exited or p.run is None:
            return ""
        window = max(p.run.interval, 0.0) + GROUP_SLACK_S
        same = [q for q in p.run.processes if q.pgid == pgid and q.host == p.host]
        together = [q for q in same if not q.exited and (e := q.ended_at) is not None and abs(e - at) <= window
                    and not self._killed_alone(q, e, window)]
        lived = [q for q in same if (e := q.ended_at) is None or e > at + LIVED_ON_S]
        if len(together) < 2 or not lived or not self._not_a_wait(together):
            return ""
        if any(_parent_ended_them(q, at, window) for q in together):
            return ""
        return (f"process group {pgid}: {len(together)} of its processes ended within {window:.1f} s "
                f"(pids {', '.join(str(q.pid) for q in together[:6])}) while {lived[0].role} {lived[0].pid} of "
                "the same group lived on")

    def oom_group(self, p: Process) -> tuple[int, list[Process], str] | None:
        """(kills, the processes they may be, the rises in words) of the OOM records at p's end
        (ooms.group_ooms); None where none is."""
        run = p.run
        if run is None or not run.ooms:
            return None
        return self._ooms_of(run).get(id(p))

    def _oom(self, p: Process, at: float) -> tuple[str, bool]:
        """(evidence, ambiguous): the cgroup's OOM kill count rose around p's end (oom_group). Ambiguous where
        more processes ended unexplained around those records than they count: each of them is only possibly
        the OOM killer's."""
        found = self.oom_group(p)
        if found is None:
            return "", False
        kills, cands, rose = found
        if len(cands) > kills:
            return f"oom: the cgroup's OOM kill count rose {rose} as {len(cands)} processes ended", True
        return f"oom: the cgroup's OOM kill count rose {rose} at its end", False

    def unnamed_ooms(self, run: Run) -> list[tuple[float | None, float, int]]:
        """(since, by, kills) of the run's cgroup's OOM kills that no end of the run's processes explains: a
        process outside the run sharing its cgroup, or one whose end was not seen. `since` None: an older log,
        whose watcher read the count only at ends, so when the kill happened is not bounded."""
        if not run.ooms:
            return []
        self._ooms_of(run)
        return self._unnamed[id(run)]

    def _ooms_of(self, run: Run) -> dict[int, tuple[int, list[Process], str]]:
        groups = self._oom_groups.get(id(run))
        if groups is None:
            groups, self._unnamed[id(run)] = group_ooms(
                run, self.procs, lambda q: _oom_possible(q, self.by_sidecar) and not self._signalled(q),
                max(run.interval, 0.1) + GROUP_SLACK_S, lambda q: _signal_evidence(q, self.by_sidecar)[0] == "SIGKILL")
            self._oom_groups[id(run)] = groups
        return groups

    def _signalled(self, q: Process) -> bool:
        """Whether a traced process recorded sending q the signal that ended it (senders.py): that end is explained,
        so no OOM kill is q's (a sidecar SIGTERMs its workers as its main dies: they end with the main's kill)."""
        at = q.ended_at
        if at is None or not self.senders:
            return False
        tick = q.run.interval if q.run is not None else 0.0
        return self.senders.to(q, at, max(tick, 0.0) + GROUP_SLACK_S) is not None

    def _sent(self, p: Process, at: float, sig: str | None, why: str) -> Ending | None:
        """p's ending by a signal a traced process of the run sent to it or to its group (senders.py), where it
        wrote no process_exit (its exit handlers did not run), or its wait status names a signal all the same.
        "killed by S" where its status says S, or S is SIGKILL (no process can outlive it); "ended on S" otherwise.
        One that wrote its process_exit, its status unread, ended by a SIGKILL sent after that record: its exit
        handlers ran, and the kill cut its teardown short (a parent's bounded wait on a torch process under load:
        quack's _PrecompileHandle.shutdown kills a worker 5 s after closing its stdin)."""
        if not self.senders:
            return None
        unread = p.exited and sig is None
        tick = p.run.interval if p.run is not None else 0.0
        found = self.senders.to(p, at, max(tick, 0.0) + GROUP_SLACK_S, "SIGKILL" if unread else sig)
        teardown = found is not None and p.exited and p.end is not None and found.ts > p.end
        if found is None or (unread and not teardown):
            return None
        base = f"killed by {found.signal}" if sig == found.signal or found.signal == "SIGKILL" else \
            f"ended on {found.signal}"
        if teardown and found.signal == "SIGKILL":
            base += f" {found.ts - (p.end or found.ts):.1f} s after its exit record (in its teardown)"
            if unread:
                why = "its process_exit came first (its exit handlers ran); its wait status was not read"
        who = "itself" if found.sender is p else found.who  # a SIGKILL it sent itself (senders.to)
        there = " of its pid namespace" if found.spaced else ""  # its pids are the namespace's, not the host's
        words = (f"{base}, sent by {who} ({found.call})" if found.group is None else
                 f"{base}, with the rest of its process group: {found.who} signalled group {found.group}{there} "
                 f"({found.call})")
        to = (f"pid {p.pid}" if found.group is None else f"process group {found.group}") + there
        evidence = [f"signal_sent: {found.who} sent {found.signal} to {to} at {self.rel(found.ts)} "
                    f"({found.call_path}); it ended {max(at - found.ts, 0.0):.1f} s later", *([why] if why else [])]
        return Ending(SIGNAL, words, at, evidence, found.signal, exit_record_at=p.end if p.exited else None,
                      by=found.who, group=found.group is not None, sender=found.sender)

    def _not_a_wait(self, together: list[Process]) -> bool:
        """Whether ends seen together can be a group signal's, not a parent that waited for its child and then
        exited (a shell wrapper: `sh -c "sleep 1; true"`, both ends in one tick): two of them outside one line
        of descent (siblings: a pool's workers), or one of them with a signal's status."""
        def line(a: Process, b: Process) -> bool:
            return any(x is b for x in ancestors(a)) or any(x is a for x in ancestors(b))

        if any(_signal_evidence(q, self.by_sidecar)[0] for q in together):
            return True
        return any(not line(a, b) for i, a in enumerate(together) for b in together[i + 1:])

    def _killed_alone(self, q: Process, at: float, window: float) -> bool:
        """A record shows q's end was a signal to q alone (os.kill of its pid): no part of a group's."""
        found = self.senders.to(q, at, window) if self.senders else None
        return found is not None and found.group is None


def torch_release(text: str) -> tuple[int, int] | None:
    """A torch version's (major, minor): '2.3.1+cu121' -> (2, 3); None where it does not read so."""
    parts = text.split("+")[0].split(".")[:2]
    return (int(parts[0]), int(parts[1])) if len(parts) == 2 and all(x.isdigit() for x in parts) else None


def _unwritten(said: dict[str, Any], code: int | None, at: float) -> Ending:
    """The ending of a process whose process_exit found no descriptor (the watcher read the note its exit left):
    it exited, through its exit handlers; the record is lost, never read as a kill."""
    noted = said.get("code")
    code = code if code is not None else noted if isinstance(noted, int) else None
    return Ending(EXIT, "exited; its process_exit found no descriptor free (its file table full at its hard "
                  "limit), so the log lacks it" + (f" (code {code})" if code is not None else ""), at,
                  [f"exit_unwritten: the watcher read the note its exit left (how {said.get('how') or '?'})"],
                  code=code)


def _killed_main(p: Process) -> Process | None:
    """The run's main process, where the verdict named p left running after it but p's own exit record came that
    soon after the main's end (run.ended_soon): p ended by itself as the main ended (torch 2.13's orphaned sidecar
    reads the end of its pipe); None otherwise."""
    run = p.run
    return run.root if run is not None and run.root is not None and p in run.ended_soon and p.exited else None
