"""Findings about how a run's main process ended without its exit record: killed (by whom, where a record says),
by os._exit, or not known (its records lost or refused after a change of user or root), and what of the run was
seen after it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common.vocab import LEFTOVER_ENDED_S
from ..derive.ending import OOM_KILL, SIGNAL, UNSEEN
from ..fold.model import last_seen, signal_name
from ..fold.verdict import RUN_END_UNSEEN, RUN_KILLED
from .base import CRASH_FIX, Finding, crash_note
from .opencalls import last_seen_text
from .runs import root_runs
from .stepend import step_end, step_end_words

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Process, Run


# The cause's fix where the OOM killer ended a main: what to change, not what to look for.
OOM_MAIN_CAUSE = "give the job more memory, or make it need less (fewer compile workers: compile_threads)"


def no_exit_how(v: View, r: Run) -> tuple[str, str, str]:
    """How a main process without process_exit ended, in words, a note, and where to look for the
    cause: from `run`'s waited status when it ran the program, else from its ending where the cgroup's OOM kill
    count names it (derive/endings.py's oom-kill: the one evidence for the OOM killer), else both possibilities."""
    waited = r.waited
    oom = _oom_words(r)
    ending = v.endings.of(r.root) if waited is None and r.root is not None else None
    named = ending is not None and ending.kind in (SIGNAL, OOM_KILL)  # a record names a signal: a kill, told below
    # its own status unread, the signal that ended the rest of its group as it ended: the Run line's and the Answer's
    # fact too (root_ending), so no line of the report says less of the same end
    group = group_signal(v, r, r.root) if ending is not None and not named else None
    if r.root_changes and (waited is None or waited.status >= 0) and not named and group is None:
        # its end's record was refused
        return "ended without a process_exit in the log", f" ({changed_note(v, r)})", CHANGED_CAUSE
    # a signal a record names (its wait status, a signal_sent) proves a kill: its exit record was never written
    if exit_maybe_lost(r) and not named and group is None:
        if not _lost_records(r):  # only the watcher's late first look: a change of user or root may have gone unseen
            return ("ended without a process_exit in the log", _UNREAD_NOTE,
                    f"{_UNREAD_CAUSE}; else find what ended it (os._exit in the code; {oom}; a time limit)")
        return ("ended without a process_exit in the log", f" ({LOST_EXIT})", "give the log's filesystem room")
    if ending is not None and ending.kind == OOM_KILL:
        return "was killed by the OOM killer (the cgroup's OOM kill count rose as it ended)", "", OOM_MAIN_CAUSE
    if ending is not None and ending.kind == SIGNAL:
        if ending.sender is not None:
            # a traced process of the run sent it, to it or to its group (its signal_sent record; the main itself
            # for a SIGKILL it sent)
            sender = "the main process" if ending.sender is r.root else ending.by
            return f"was {ending.words}", "", f"{sender} sent it: read why at that line"
        # its wait status (the watcher read its zombie's) names the signal, so never os._exit; no record says who
        # sent it (a scheduler's group kill, a user's kill -9)
        if crash_note(ending.signal):  # its own fault or abort(), by the signal: where its stacks are
            return f"was {ending.words}", crash_note(ending.signal), CRASH_FIX
        also = f"{oom}; " if ending.signal == "SIGKILL" else ""
        return f"was {ending.words}", "", f"find what sent {ending.signal} ({also}a time limit, a user, a scheduler)"
    if group is not None:
        sent, members = group
        also = f"{oom}; " if sent == "SIGKILL" else ""
        return (_GROUP_HOW.format(sig=sent), _GROUP_NOTE.format(n=members),
                f"find what sent {sent} to its process group ({also}a time limit, a user, a scheduler); if nothing "
                "did, the main left by itself (os._exit in the code) and the rest died of a parent-death signal "
                "(PR_SET_PDEATHSIG)")
    # its own status unread, a scheduler's signal to the whole job step while it ran (the watcher's record): the
    # step's end, or its SIGKILL after the grace, as far as the records go (os._exit within the grace not ruled out
    # where it ended later)
    step = step_end(v, r) if waited is None else None
    if step is not None:
        how, note, advice = step_end_words(v, r, step)
        return how, f" ({note})", advice
    if waited is None or waited.status >= 0:
        return ("ended without process_exit", " (killed, or os._exit)",
                f"find what ended it (os._exit in the code; {oom}; a time limit)")
    sig = -waited.status
    name = signal_name(sig)
    if sig in waited.forwarded:
        return (f"was ended by {name}", " (wp-autotrace run was sent it and passed it on)",
                f"it was asked to stop: find what sent {name} to wp-autotrace run, if that was not you")
    # a traced process of the run sent it (its signal_sent record: the main itself, or one to its group), told as
    # without `run`: the status alone would send the user after a time limit or a scheduler
    recorded = v.endings.of(r.root) if r.root is not None else None
    if recorded is not None and recorded.kind == SIGNAL and recorded.sender is not None and recorded.signal == name:
        if recorded.sender is not r.root:
            return f"was {recorded.words}", "", f"{recorded.by} sent it: read why at that line"
        if name == "SIGKILL":
            return f"was {recorded.words}", "", "the main process sent it: read why at that line"
        # a signal it could catch: its own send may be its handler re-raising one sent from outside (the usual way
        # to end with the signal's status), which no record shows
        return (f"was {recorded.words}", "", f"the main process sent {name} to itself: read why at that line; where "
                f"it re-raises a {name} its handler caught, find what sent the first (a time limit, a scheduler, a "
                "user)")
    if name == "SIGKILL":
        if r.ooms:
            return "was killed by SIGKILL, by the OOM killer (the cgroup's OOM kill count rose)", "", OOM_MAIN_CAUSE
        return "was killed by SIGKILL", "", f"find what sent it ({oom}; a time limit, a user, a scheduler)"
    if crash_note(name):
        return f"was ended by {name}", crash_note(name), CRASH_FIX
    return f"was ended by {name}", "", f"find what sent {name} (a time limit, a scheduler, a user)"


def root_ending(v: View, r: Run) -> str | None:
    """How a main with no process_exit ended where a record names a signal (its wait status as the watcher read
    it, a signal_sent record, the OOM kill count, its group's signal: group_signal): the run's header says it, never
    "killed, or os._exit"; no_exit_how tells the same end in the findings."""
    if r.root is None or r.root.exited or r.waited is not None:
        return None
    ending = v.endings.of(r.root)
    if ending.kind in (SIGNAL, OOM_KILL):
        return ending.words
    group = group_signal(v, r, r.root)
    if group is not None:
        return _GROUP_HOW.format(sig=group[0]) + _GROUP_NOTE.format(n=group[1])
    step = step_end(v, r)
    if step is None:
        return None
    how, note, _ = step_end_words(v, r, step, why=False)
    return f"{how} ({note})"


# A main's end told by its group's signal (group_signal), and the evidence's limit.
_GROUP_HOW = "ended as {sig} ended the rest of its process group"
_GROUP_NOTE = " ({n} process(es), their wait statuses; its own status was not read)"


def group_signal(v: View, r: Run, root: Process | None) -> tuple[str, int] | None:
    """Where the main's own status went unread (its parent, a `timeout`, reaped it at once) but one signal ended every
    other member of its process group that ended as it did (within vocab.LEFTOVER_ENDED_S; at least two, their wait
    statuses, none sent by a traced process of the run): that signal and how many members it ended. One member that
    ended otherwise (a sidecar that exited, workers its sidecar stopped) and the records show no group signal: None."""
    end = root.ended_at if root is not None else None
    if root is None or root.pgid is None or end is None:
        return None
    signals: set[str | None] = set()
    members = 0
    for p in r.processes:
        ending = v.endings.of(p) if p is not root and p.pgid == root.pgid else None
        if ending is None or ending.at is None or abs(ending.at - end) > LEFTOVER_ENDED_S:
            continue
        members += 1
        signals.add(ending.signal if ending.kind == SIGNAL and ending.sender is None else None)
    if members < 2 or len(signals) != 1 or None in signals:
        return None
    (sig,) = signals
    return (sig, members) if sig is not None else None


def _oom_words(r: Run) -> str:
    """What the log says of the OOM killer: its cgroup count did not rise, or it is not known (dmesg)."""
    if r.oom_start is not None and not r.ooms:
        return "not the OOM killer: the cgroup's OOM kill count did not rise during the run"
    return "whether the OOM killer did is not in the log: dmesg says"


# Where the log refused records (its disk full), a missing process_exit may be one of them: no kill is inferred
# from its absence (docs/evidence.md, "Process endings").
LOST_EXIT = ("records of the run were lost, the log's disk full or unwritable: its process_exit may be one of "
             "them; whether it was killed is not known")


def exit_maybe_lost(r: Run) -> bool:
    """Whether a main's missing process_exit may be a lost record (LOST_EXIT, or its change of user or root:
    changed_note): records of its run were lost, or its own refused, and no waited status shows a signal. Then
    nothing but a missing record says it ended unlike an exit."""
    return (r.waited is None or r.waited.status >= 0) and (_lost_records(r) or bool(r.root_changes)
                                                           or ended_unread(r))


# A main the watcher never saw alive: a change of its user or root directory, which refuses its records (rootchange.py),
# could have gone unseen, so its missing process_exit proves neither a kill nor os._exit.
UNREAD_END = ("the watcher's first look found it ended, so no record shows whether it changed its user or root "
              "directory, after which the log refuses its records, its process_exit too")


_UNREAD_NOTE = f" ({UNREAD_END}: how it ended is not known)"


def ended_unread(r: Run) -> bool:
    """Whether the watcher's first look found the main, with no process_exit, already ended: its end is in the
    watcher's first tree record (watcher/tree.py writes a main gone before its first sample there; one alive then
    joins the run in it) and no record of the main is later than the watcher's start, when that look is made. No
    sample read its user or root directory, so a change of either is not ruled out (a root_change record, where one
    was read, is told instead: changed_note). Not where `run` waited for a signal: that names how it ended."""
    root = r.root
    if root is None or root.exited or r.root_changes or root.gone is None or not r.tree_counts:
        return False
    if r.waited is not None and r.waited.status < 0:
        return False
    last = last_seen(root)
    looked = min(r.watcher_started.values(), default=None)
    return (root.gone <= r.tree_counts[0][0] and looked is not None
            and (last is None or last[1] <= looked) and (root.start is None or root.start <= looked))


# A main that changed its user or root: what keeps its records (the log is the user's that started the run).
CHANGED_CAUSE = ("to keep its records, start it as the user it switches to and in the root it enters (setpriv, "
                 "su, gosu or chroot before python starts, not setuid or chroot in the program)")


_UNREAD_CAUSE = f"if it changes its user or root directory: {CHANGED_CAUSE}"


def changed_words(v: View, r: Run) -> str:
    """'it changed its user from 0 to 65534 between 0.2 s and 0.3 s' (its root directory likewise), from the
    watcher's root_change records (between its last sample before and the one that saw it); '' where none."""
    said = []
    for c in r.root_changes:
        what = (f"its user from {c.get('was_uid', '?')} to {c['uid']}" if isinstance(c.get("uid"), int) else
                f"its root directory from {c.get('was_root', '?')} to {c.get('root')}")
        since = c.get("since")
        when = (f"between {since - v.t0:.1f} s and {c['ts'] - v.t0:.1f} s" if isinstance(since, (int, float))
                else f"by {c['ts'] - v.t0:.1f} s")
        said.append(f"{what} {when}")
    return f"it changed {' and '.join(said)}" if said else ""


def changed_note(v: View, r: Run, unknown: str = "how it ended") -> str:
    """Why a main that changed its user or root has no process_exit in the log, and what that leaves unknown."""
    uid = any(isinstance(c.get("uid"), int) for c in r.root_changes)
    why = "private to the user that started the run" if uid else "its path outside that root"
    return (f"{changed_words(v, r)} (the watcher's root_change), after which the log, {why}, refused its records, "
            f"its process_exit too: {unknown} is not known")


def _lost_records(r: Run) -> bool:
    """Whether the log says records of this run were lost (its processes' or its watcher's counts, or the log cut
    mid-record while its main was to write its exit: report.py mark_log_cut)."""
    return bool(r.dropped or r.watcher_dropped or r.log_cut)


def _left_alive(r: Run) -> bool:
    """Something the run left behind may still be running, as far as the log knows: a leftover not seen
    to end since, or one the verdict counted without listing."""
    return r.leftover_count > len(r.leftover) or any(p.end is None for p in r.leftover)


def _pools_left_open(r: Run) -> bool:
    """A pool of the run whose sidecar was not seen to end (a shutdown request alone stops nothing: a pool
    asked to stop may keep running). None such: `cleanup` has nothing of a pool to end."""
    return any(pool.sidecar is None or pool.sidecar.end is None for p in r.processes for pool in p.pools)


def _ended_soon_text(r: Run, root: Process) -> str:
    """', the last ended 0.3 s after it (none left running)' where the verdict's leftovers all ended that soon
    (run.ended_soon: fold/finish.settle_leftovers), told from the log's ends (Process.ended_at); else ''."""
    main_end = root.ended_at
    if not r.ended_soon or r.leftover_count or main_end is None:
        return ""
    last = max(e for p in r.processes if (e := p.ended_at) is not None and e > main_end)
    return f", the last ended {last - main_end:.1f} s after it (none left running)"


def root_killed(v: View) -> Finding | None:
    """The main process ended without process_exit: the watcher saw it go, or nothing saw it end."""
    runs = root_runs(v, RUN_KILLED) + root_runs(v, RUN_END_UNSEEN)
    if not runs:
        return None
    r = runs[0]
    root = r.root
    assert root is not None
    advice = "its pools were never shut down: end what is left with `wp-autotrace cleanup LOG`"
    if not _pools_left_open(r):  # every pool's sidecar seen gone (or no pool): only the cause to find
        advice = no_exit_how(v, r)[2]
    elif all(v.endings.of_pool(pool).kind == UNSEEN for p in r.processes for pool in p.pools
             if pool.sidecar is None or pool.sidecar.end is None):  # the watcher stopped before the log's end
        advice = ("no record shows its pools alive at the end of the log: check with `ps` whether they still run "
                  "(`wp-autotrace cleanup LOG` ends only what the log proves the run's and finds alive)")
    unread = False  # no look saw it alive: how it ended is not known (ended_unread)
    if v.states[r.id] == RUN_KILLED:
        when = root.gone if root.gone is not None else r.end
        at = f" at {when - v.t0:.1f} s" if when is not None else ""
        alive = r.leftover_count or max((n for ts, n in r.tree_counts if when is not None and ts >= when),
                                        default=0)
        how, note, cause = no_exit_how(v, r)
        lost, unread = note == f" ({LOST_EXIT})", note == _UNREAD_NOTE
        handlers = "" if exit_maybe_lost(r) else "; its exit handlers did not run"
        if lost:
            advice = "end what is left with `wp-autotrace cleanup LOG`; give the log's filesystem room"
        text = (f"The main process {root.pid} {how}{at}{note}{handlers}; "
                f"seen after it: {alive} process(es) of the run still alive{_ended_soon_text(r, root)}.")
        if r.leftover_seen and not _left_alive(r):  # the verdict, and what the log saw end since
            advice = f"nothing of the run is left to end; {cause}"
    elif r.alive_now is False:  # gone when the log was read: it ended after the log's last record of it
        step = step_end(v, r)
        how = "ended without its exit record"
        if step is not None:
            said, note, _ = step_end_words(v, r, step)
            how = f"{said} ({note})"
        why = "" if step is not None else ": it was killed, or the log stops early"
        text = (f"The main process {root.pid} {how}: it has no process_exit and nothing in the log saw it end, but "
                f"{r.now_how}{why}; {last_seen_text(v, root)}.")
    else:
        unknown = f"; whether it still runs cannot be known: {r.now_how}" if r.now_how else ""
        text = (f"The main process {root.pid} has no process_exit and nothing saw it end (no watcher record "
                f"after it): it was killed, or the log stops early; {last_seen_text(v, root)}{unknown}.")
    # what ended it is not known (records lost, or no look saw it alive): not told as a problem
    return Finding("root-killed", "warning" if _lost_records(r) or unread else "problem", text, [root.pid], [], advice,
                   {})


def root_os_exit(v: View) -> Finding | None:
    """`run` saw the main process exit with a code, and it wrote no process_exit: it left by os._exit. Not a
    main that exec'd another program (its exec record says so): that program's code is run's, and it has no
    exit handlers of Python's to skip."""
    runs = [r for r in v.runs if r.root is not None and r.waited is not None and r.waited.status >= 0
            and not r.root.exited and r.root.exec_into is None]
    if not runs:
        return None
    r = runs[0]
    assert r.root is not None and r.waited is not None
    code = r.waited.status
    if r.root_changes:  # its exit handlers may have run: no record of theirs could be written
        return Finding("root-os-exit", "info", f"The main process {r.root.pid} exited {code} without a process_exit "
                       f"in the log ({changed_note(v, r, 'whether its exit handlers ran')}).", [r.root.pid], [],
                       CHANGED_CAUSE, {"exit_code": code})
    if ended_unread(r):  # likewise, where no record could show such a change
        return Finding("root-os-exit", "info", f"The main process {r.root.pid} exited {code} without a process_exit "
                       f"in the log ({UNREAD_END}: whether its exit handlers ran is not known).", [r.root.pid], [],
                       _UNREAD_CAUSE, {"exit_code": code})
    how = (f"exited {code} without a process_exit in the log ({LOST_EXIT.replace('killed', 'os._exit')})"
           if _lost_records(r) else f"exited {code} without running its exit handlers (os._exit: no "
           "process_exit, and torch's atexit shutdown of its pools did not run)")
    return Finding(
        "root-os-exit", "info", f"The main process {r.root.pid} {how}.",
        [r.root.pid], [], "" if not r.leftover_count else
        "shut pools down before os._exit, or exit normally" + (
            "; end what is left with `wp-autotrace cleanup LOG`" if _left_alive(r) else
            " (what it left has ended since: nothing is left to end)"),
        {"exit_code": r.waited.status})
