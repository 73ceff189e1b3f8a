"""Findings about how a run ended: the main process's end, the watcher's verdict, what was left,
calls left open, records lost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ...common.vocab import COMPILE_WORKER, SIDECAR_ROLES
from ..derive.callers import user_frame
from ..derive.ending import OOM_KILL, SIGNAL, UNSEEN
from ..derive.labels import process_label
from ..derive.memseries import left_at_once
from ..fold.model import last_seen, signal_name
from ..fold.verdict import RUN_END_UNSEEN, RUN_IN_PROGRESS, RUN_KILLED
from ..words.fmt import MIB, TEXT_PIDS, pid_text, site, size_text
from .base import Finding, in_ranks, roles_text, sites_text

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Call, Process, Run

def leftovers(v: View) -> Finding | None:
    if not v.leftover_count:
        return None
    listed = v.leftover_procs
    rss = v.leftover_rss
    unlisted = v.leftover_count - len(listed)
    more = f"; {unlisted} more not listed (the log's list was cut)" if unlisted > 0 else ""
    # "at least" where a figure was read while a pool mate not in the sum still shared its pages
    about = "at least" if v.left_sum_at_least else "about"
    mb = f", holding {about} {size_text(v.leftover_real)}{left_read_text(v)}" if v.leftover_real else ""
    # How the main process ended, in words: "killed" only where a signal is known (`run` waited for it).
    killed = next((_no_exit_how(v, r)[0] for r in v.runs if v.states[r.id] == RUN_KILLED), "")
    pending = _provisional(v)
    # Those the log later saw end (killed by a runner, or finished): nothing of them is left to end now.
    ended = [p for p in listed if p.end is not None]
    since = ""
    if ended and len(ended) == len(listed) and not unlisted:
        since = "; all have ended since"
    elif ended:
        since = f"; {len(ended)} have ended since (pids {pid_text(p.pid for p in ended)})"
    todo = ("nothing is left of them to end; stop their cause" if since.startswith("; all") else
            "end them now with `wp-autotrace cleanup LOG` (it checks each is still the process the log saw); "
            "then stop their cause")
    orphaned = _children_left(v)
    if orphaned is not None:  # the kill is the cause: the pools the children made are what they left, under it
        text, cause, cost = _killed_launcher(v, *orphaned)
        return Finding(
            "leftovers", "problem",
            f"{v.leftover_count} process(es) outlived the main process{in_ranks(v, listed)} ({roles_text(listed)})"
            f"{mb}: {text}; pids {pid_text(p.pid for p in listed)}{more}{pending}{since}.",
            sorted(p.pid for p in listed), [], f"{todo}: {cause}", {**_left_cost(v, rss), **cost})
    orphans = orphaned_by_pools(listed)
    if orphans and len(orphans) == len(listed) and not unlisted:  # a pool's job's programs, its pool ended
        return Finding(
            "leftovers", "problem",
            f"{v.leftover_count} process(es) outlived the main process{in_ranks(v, listed)} "
            f"({f'it {killed}; ' if killed else ''}{roles_text(listed)}){mb}: {orphans_text(v, orphans)}; "
            f"pids {pid_text(p.pid for p in listed)}{pending}{since}.",
            sorted(p.pid for p in listed), [], orphan_advice(orphans),
            {**_left_cost(v, rss), "orphans": len(orphans), "orphans_short": orphans_short(orphans)})
    # Pools are one cause among others: named only when a pool process is among those left. The
    # Answer quotes this advice above the findings, so it points at no place in the report.
    left = set(listed)
    made = [pool.call for pool in v.pools if left.intersection(v.story(pool).procs)]
    pool_left = made or any(p.role in SIDECAR_ROLES or p.role == COMPILE_WORKER for p in listed)
    # Where the pools whose processes were left were made, named here: no other finding need exist to say it.
    cause = (f": compile pools left running, made at {sites_text(made)}" if made else
             ": compile pools left running (their makers were not traced)" if pool_left
             else ": what started them (the Process tree names each one's parent)")
    return Finding(
        "leftovers", "problem",
        f"{v.leftover_count} process(es) outlived the main process{in_ranks(v, listed)} "
        f"({f'it {killed}; ' if killed else ''}{roles_text(listed)}){mb}: "
        f"pids {pid_text(p.pid for p in listed)}{more}{pending}{since}.",
        sorted(p.pid for p in listed), [],
        todo + cause, _left_cost(v, rss))


def orphaned_by_pools(procs: list[Process]) -> list[Process]:
    """Of procs, those a compile pool's sidecar or worker started (a job's compiler or linker: not a pool process
    itself) that outlived their starter: re-parented when it ended, so no pool is left running them, and ending the
    pool (torch's atexit, a shutdown) did not end them."""
    return [p for p in procs if not _is_pool_process(p) and p.parent is not None and _is_pool_process(p.parent)
            and p.parent.ended_at is not None and (p.ended_at is None or p.parent.ended_at < p.ended_at)]


def orphans_text(v: View, orphans: list[Process]) -> str:
    """Each orphan (the first TEXT_PIDS): what it runs, which pool process started it and when, that it ran on after
    that one ended, and the ending signals it ignores where the watcher read them (a Ctrl-C does not end one that
    ignores SIGINT: inherited from torch's compile processes, which ignore it)."""
    said = []
    for p in orphans[:TEXT_PIDS]:
        assert p.parent is not None and p.parent.ended_at is not None
        inherited = p.sigign and p.sigign == p.parent.sigign
        ignores = (f", ignoring {_signals(p.sigign)}" + (f" (as {p.parent.role} {p.parent.pid} did: an ignored signal "
                                                         "is inherited)" if inherited else "") if p.sigign else "")
        until = (f" (until {v.rel(p.ended_at) or 0:.1f} s)" if p.ended_at is not None else
                 " (still running at the watcher's last look)")
        said.append(f"{p.role} {p.pid} ({process_label(p)}), which {p.parent.role} {p.parent.pid} started at "
                    f"{v.rel(p.start) or 0:.1f} s for a job of its pool, ran on after {p.parent.role} "
                    f"{p.parent.pid} ended at {v.rel(p.parent.ended_at) or 0:.1f} s{until}{ignores}")
    more = f"; {len(orphans) - TEXT_PIDS} more alike" if len(orphans) > TEXT_PIDS else ""
    return "; ".join(said) + more


def _signals(sigign: str) -> str:
    return " and ".join("SIG" + name for name in sigign.split(","))


def orphans_short(orphans: list[Process]) -> str:
    """The orphans in a clause for the Answer: the first one's pid, who started it, and the signals it ignores."""
    p = orphans[0]
    assert p.parent is not None
    more = f" and {len(orphans) - 1} more" if len(orphans) > 1 else ""
    ignores = f", ignoring {_signals(p.sigign)}" if p.sigign else ""
    return (f"{p.role} {p.pid}{more}, which {p.parent.role} {p.parent.pid} started for a job of its pool, ran on "
            f"after it ended{ignores}")


# What ends a compile pool's orphaned programs, and what keeps them from being left: the pool's end does not reach
# them, a signal to the whole process group does (one they do not ignore).
ORPHAN_NEXT = ("next time, stop the job with SIGTERM to its whole process group (`kill -TERM -- -PGID`), which "
               "reaches the programs its pool's jobs started, or compile without the pool "
               "(TORCHINDUCTOR_COMPILE_THREADS=1: they are then the main process's children")


def orphan_advice(orphans: list[Process]) -> str:
    """What to do about a pool's orphaned programs (orphaned_by_pools): end those still running with SIGTERM, where
    one ignores SIGINT saying that a Ctrl-C does not end it; then how to stop the next job so none is left."""
    running = [p for p in orphans if p.end is None]
    ctrl_c = any("INT" in p.sigign.split(",") for p in orphans)
    unreached = ": a Ctrl-C does not end a process that ignores SIGINT" if ctrl_c else ""
    them = "it" if len(running) == 1 else "them"
    now = (f"end {them} with SIGTERM: `kill {' '.join(str(p.pid) for p in running)}` (or `wp-autotrace cleanup LOG`)"
           f"{unreached}; " if running else "")
    pgid = orphans[0].pgid
    nxt = ORPHAN_NEXT.replace("-PGID", f"-{pgid}") if pgid else ORPHAN_NEXT
    return f"{now}{nxt}, and a Ctrl-C ends them with it)" if ctrl_c else f"{now}{nxt})"


def _left_cost(v: View, rss: int) -> dict[str, object]:
    return {"processes": v.leftover_count, "leftover_rss_bytes": rss, "leftover_pss_bytes": v.leftover_pss,
            "leftover_real_bytes": v.leftover_real, "procs_left": v.leftover_count,
            "mib_left": round(v.leftover_real / MIB, 1) if v.leftover_real else None,
            "left_read_text": left_read_text(v)}


def _is_pool_process(p: Process) -> bool:
    return p.role in SIDECAR_ROLES or p.role == COMPILE_WORKER


def _children_left(v: View) -> tuple[Run, list[Process]] | None:
    """A main process that ended without its exit (killed, or os._exit: RUN_KILLED) whose own children, not
    compile pool processes, outlived it: a signal to one process ends it alone, and its children run on with
    what they started (their pools included), re-parented. Its own pools' processes left are not this: those are
    told as pools left running. Not where the only sign of that end is the missing process_exit while the log
    refused records (_exit_maybe_lost): a main that exited on a full disk also leaves daemon children."""
    for r in v.runs:
        if r.root is None or v.states[r.id] != RUN_KILLED or _exit_maybe_lost(r):
            continue
        kids = [p for p in v.leftover_procs if p.parent is r.root and not _is_pool_process(p)]
        if kids:
            return r, kids
    return None


# A launcher killed alone leaves its children: what the user can do, before finding what sent the signal.
GROUP_ADVICE = ("stop the program with a signal to its whole process group (`kill -TERM -- -PGID`, as Ctrl-C in a "
                "terminal does) or with one it handles by stopping its children first, or have each child end with "
                "its parent (on Linux prctl(PR_SET_PDEATHSIG) in the child)")


def _killed_launcher(v: View, r: Run, kids: list[Process]) -> tuple[str, str, dict[str, object]]:
    """The leftovers told from their cause, a main that ended killed (or by os._exit) and left its children: the
    finding's words, its advice, and its cost keys (what the Answer says of it). The pools the children made are
    under it: their processes among the leftovers and what those held together at one moment (left_at_once, the
    one rule for leftovers' memory; its moment after the main's end where one read them)."""
    how, _, find = _no_exit_how(v, r)
    assert r.root is not None
    left = set(v.leftover_procs)
    pools = [pool for pool in v.pools if pool.creator in kids or left.intersection(v.story(pool).procs)]
    pooled = [p for p in v.leftover_procs if _is_pool_process(p)]
    point = left_at_once([p for p in pooled if p.mem], r.root.ended_at)
    mem = f", {size_text(point.pss)} of it" if point is not None and point.pss else ""
    with_pools = (f", with the {len(pools)} compile pool(s) they made ({len(pooled)} processes{mem})"
                  if pools and pooled else "")
    text = (f"the main process {r.root.pid} {how}, which ends that one process, and its {len(kids)} child "
            f"process(es) ran on{with_pools}")
    cost = {"children_left": len(kids), "main_how": how, "pools_left": len(pools) if pooled else 0,
            "pool_procs_left": len(pooled), "pools_left_bytes": point.pss if point is not None and pooled else None}
    return text, f"the main process {how} and its children ran on: {GROUP_ADVICE}; {find}", cost


def left_read_text(v: View) -> str:
    """What the leftovers' memory figure is, where it is not simply their real memory read at one moment after the
    main process ended ('' where it is): the RSS of those no sweep read for their own share (PSS: the watcher reads
    pool processes'; RSS counts the pages a process shares with others in full, 8.1 MiB for a helper whose own
    share was 2.8), and for the ones read, which moment and how many: their figure is one at_once point
    (View.left_point), never latest figures of different moments summed, so it says what it covers."""
    n_left, by_rss = len(v.leftover_procs), v.left_by_rss()
    said = [] if not by_rss else [
        ("RSS, their own share not read" if n_left > 1 else "RSS, its own share not read")
        if by_rss >= n_left else f"RSS for {by_rss} of them, their own share not read"]
    pt, n = v.left_point, v.left_sampled
    ends = [r.root.ended_at for r in v.runs if r.root is not None and r.root.ended_at is not None]
    before = pt is not None and bool(ends) and pt.ts < min(ends)
    if pt is not None and (pt.read < n or before):
        who = f"{pt.read} of the {n}" if pt.read < n else f"all {n}"
        when = "before the main process ended" if before else "after the main process ended"
        said.append(f"{who} read together, at {v.rel(pt.ts):.1f} s, {when}")
    return f" ({'; '.join(said)})" if said else ""


def _provisional(v: View) -> str:
    """Where a left-behind list comes from when it is not the watcher's verdict, in words ("" when it is)."""
    runs = [r for r in v.runs if r.verdict_pending or r.no_verdict]
    if not runs:
        return ""
    whence = " and ".join(sorted({"the main process's own list at its exit" if r.provisional_from == "below"
                                  else "the last look after the main process ended" for r in runs}))
    state = "verdict pending" if any(r.verdict_pending for r in runs) else "no verdict will come"
    return f" ({state}: from {whence})"


def verdict_pending(v: View) -> Finding | None:
    """The main process ended, and nothing yet says what it left: no verdict, no look after its end."""
    runs = [r for r in v.runs if r.verdict_pending and not r.provisional_from]
    if not runs:
        return None
    return Finding(
        "verdict-pending", "warning",
        "Verdict pending: the main process ended, but the watcher has not yet written what the run left "
        "behind, and no look after that end is in the log: what is still running is not known yet.",
        sorted(r.root.pid for r in runs if r.root is not None), [],
        "read the report again in a few seconds (the watcher writes its verdict shortly after the main "
        "process ends)", {})


def _unreturned(v: View) -> list[Call]:
    """Calls entered and never left, in processes whose end was seen (a live loop is not stuck)."""
    return [c for c in v.calls if c.end is None and not c.blocked and c.tag not in _SERVING_LOOPS
            and c.proc.end is not None]


# Calls that run for a process's whole life: one still open when it ended is how it ends.
# concurrent.futures' exit join still open is told as a hang at exit (exit-hang), not again here.
_SERVING_LOOPS = (targets.SIDECAR_MAIN, targets.DATALOADER_LOOP, targets.EXIT_JOIN)


def _last_seen(v: View, p: Process) -> str:
    """Where a process was when last seen: its last record (not process_exit). A call's target is its label; a
    signal_sent's is the pid it signalled (a process that kills itself: its last record)."""
    last = last_seen(p)
    if last is None:
        return "no record"
    event, ts, target, sig = last
    if event == "signal_sent":
        what = f"signal_sent {signal_name(sig) if isinstance(sig, int) else '?'} to pid {target}"
    else:
        what = event + (f" {targets.short_label(target)}" if isinstance(target, str) and target else "")
    return f"last record {what} at {ts - v.t0:.1f} s"


def call_site(c: Call) -> str:
    """Where a call came from for people: its user frame; for a pool call made from no user frame
    (torch's atexit, python -c's <string>), the user line that made the process's pool."""
    own = user_frame(c.caller)
    if own is not None or not c.proc.pools:
        return site(c.caller)
    made = c.proc.pools[-1].call
    return f"torch at exit, for the pool made at {site(user_frame(made.caller) or made.caller)}"


def _open_call_text(v: View, c: Call) -> str:
    took = max(0.0, (c.proc.end or v.t_end) - c.ts)
    how = c.proc.exit_how or "ended"
    return (f"{targets.short_label(c.target)} in {c.proc.role} {c.proc.pid}, open {took:.1f} s until the process "
            f"ended ({how}), called from {call_site(c)}; {_last_seen(v, c.proc)}")


def _open_seconds(v: View, c: Call) -> float:
    """How long a call stayed open: to its process's end, else the log's (a hang: evidence.md's hang_s)."""
    end = c.proc.end if c.proc.end is not None else v.t_end
    return max(0.0, end - c.ts)


def calls_never_returned(v: View) -> Finding | None:
    open_calls = _unreturned(v)
    if not open_calls:
        return None
    names: dict[str, int] = {}
    for c in open_calls:
        names[targets.short_label(c.target)] = names.get(targets.short_label(c.target), 0) + 1
    more = "" if len(names) == 1 else " (" + ", ".join(f"{n} {name}" for name, n in sorted(names.items())) + ")"
    return Finding(
        "call-never-returned", "warning",
        f"{len(open_calls)} traced call(s) never returned{more}, e.g. {_open_call_text(v, open_calls[0])}.",
        sorted({x.proc.pid for x in open_calls}),
        [_open_call_text(v, x) for x in open_calls[:TEXT_PIDS]],
        "a process that exited cleanly left the call running in another thread; one killed (or ended by "
        "os._exit) died inside it: see how each ended, and look for what it was waiting on",
        {"hang_s": round(sum(_open_seconds(v, x) for x in open_calls), 3),
         "pool_wait_pids": sorted({x.proc.pid for x in open_calls} - {x.proc.pid for x in open_calls
                                                                      if x.tag not in POOL_WAITS})})


# Calls whose open end is a wait on a compile pool (starting it, or stopping it at exit): a pool's creator killed
# inside one waited on its pool, and where that pool nests the wait is the nesting's (words/causes.py).
POOL_WAITS = frozenset((targets.WARM_POOL, targets.MAYBE_WARM_POOL, targets.PROCESS_POOL, targets.WAIT_POOL_READY,
                        targets.EXIT_SHUTDOWN, targets.EXIT_JOIN, targets.POOL_CREATE, targets.POOL_SHUTDOWN,
                        targets.EXECUTOR_SHUTDOWN, targets.SIDECAR_SHUTDOWN, targets.SIDECAR_POOL_SHUTDOWN))


def _root_runs(v: View, state: str) -> list[Run]:
    return [r for r in v.runs if v.states.get(r.id) == state and r.root is not None]


# The cause's fix where the OOM killer ended a main: what to change, not what to look for.
OOM_MAIN_CAUSE = "give the job more memory, or make it need less (fewer compile workers: compile_threads)"


def _no_exit_how(v: View, r: Run) -> tuple[str, str, str]:
    """How a main process without process_exit ended, in words, a note, and where to look for the
    cause: from `run`'s waited status when it ran the program, else from its ending where the cgroup's OOM kill
    count names it (derive/endings.py's oom-kill: the one evidence for the OOM killer), else both possibilities."""
    waited = r.waited
    oom = _oom_words(r)
    ending = v.endings.of(r.root) if waited is None and r.root is not None else None
    named = ending is not None and ending.kind in (SIGNAL, OOM_KILL)  # a record names a signal: a kill, told below
    if r.root_changes and (waited is None or waited.status >= 0) and not named:  # its end's record was refused
        return "ended without a process_exit in the log", f" ({changed_note(v, r)})", CHANGED_CAUSE
    # a signal a record names (its wait status, a signal_sent) proves a kill: its exit record was never written
    if _exit_maybe_lost(r) and not named:
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
        also = f"{oom}; " if ending.signal == "SIGKILL" else ""
        return f"was {ending.words}", "", f"find what sent {ending.signal} ({also}a time limit, a user, a scheduler)"
    if waited is None or waited.status >= 0:
        return ("ended without process_exit", " (killed, or os._exit)",
                f"find what ended it (os._exit in the code; {oom}; a time limit)")
    sig = -waited.status
    name = signal_name(sig)
    if sig in waited.forwarded:
        return (f"was ended by {name}", " (wp-autotrace run was sent it and passed it on)",
                f"it was asked to stop: find what sent {name} to wp-autotrace run, if that was not you")
    if name == "SIGKILL":
        if r.ooms:
            return "was killed by SIGKILL, by the OOM killer (the cgroup's OOM kill count rose)", "", OOM_MAIN_CAUSE
        return "was killed by SIGKILL", "", f"find what sent it ({oom}; a time limit, a user, a scheduler)"
    return f"was ended by {name}", "", f"find what sent {name} (a time limit, a scheduler, a user)"


def _oom_words(r: Run) -> str:
    """What the log says of the OOM killer: its cgroup count did not rise, or it is not known (dmesg)."""
    if r.oom_start is not None and not r.ooms:
        return "not the OOM killer: the cgroup's OOM kill count did not rise during the run"
    return "whether the OOM killer did is not in the log: dmesg says"


# Where the log refused records (its disk full), a missing process_exit may be one of them: no kill is inferred
# from its absence (docs/evidence.md, "Process endings").
LOST_EXIT = ("records of the run were lost, the log's disk full or unwritable: its process_exit may be one of "
             "them; whether it was killed is not known")


def _exit_maybe_lost(r: Run) -> bool:
    """Whether a main's missing process_exit may be a lost record (LOST_EXIT, or its change of user or root:
    changed_note): records of its run were lost, or its own refused, and no waited status shows a signal. Then
    nothing but a missing record says it ended unlike an exit."""
    return (r.waited is None or r.waited.status >= 0) and (_lost_records(r) or bool(r.root_changes))


# A main that changed its user or root: what keeps its records (the log is the user's that started the run).
CHANGED_CAUSE = ("to keep its records, start it as the user it switches to and in the root it enters (setpriv, "
                 "su, gosu or chroot before python starts, not setuid or chroot in the program)")


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
    runs = _root_runs(v, RUN_KILLED) + _root_runs(v, RUN_END_UNSEEN)
    if not runs:
        return None
    r = runs[0]
    root = r.root
    assert root is not None
    advice = "its pools were never shut down: end what is left with `wp-autotrace cleanup LOG`"
    if not _pools_left_open(r):  # every pool's sidecar seen gone (or no pool): only the cause to find
        advice = _no_exit_how(v, r)[2]
    elif all(v.endings.of_pool(pool).kind == UNSEEN for p in r.processes for pool in p.pools
             if pool.sidecar is None or pool.sidecar.end is None):  # the watcher stopped before the log's end
        advice = ("no record shows its pools alive at the end of the log: check with `ps` whether they still run "
                  "(`wp-autotrace cleanup LOG` ends only what the log proves the run's and finds alive)")
    if v.states[r.id] == RUN_KILLED:
        when = root.gone if root.gone is not None else r.end
        at = f" at {when - v.t0:.1f} s" if when is not None else ""
        alive = r.leftover_count or max((n for ts, n in r.tree_counts if when is not None and ts >= when),
                                        default=0)
        how, note, cause = _no_exit_how(v, r)
        lost = note == f" ({LOST_EXIT})"
        handlers = "" if _exit_maybe_lost(r) else "; its exit handlers did not run"
        if lost:
            advice = "end what is left with `wp-autotrace cleanup LOG`; give the log's filesystem room"
        text = (f"The main process {root.pid} {how}{at}{note}{handlers}; "
                f"seen after it: {alive} process(es) of the run still alive{_ended_soon_text(r, root)}.")
        if r.leftover_seen and not _left_alive(r):  # the verdict, and what the log saw end since
            advice = f"nothing of the run is left to end; {cause}"
    elif r.alive_now is False:  # gone when the log was read: it ended after the log's last record of it
        text = (f"The main process {root.pid} ended without its exit record: it has no process_exit and nothing "
                f"in the log saw it end, but {r.now_how}: it was killed, or the log stops early; "
                f"{_last_seen(v, root)}.")
    else:
        unknown = f"; whether it still runs cannot be known: {r.now_how}" if r.now_how else ""
        text = (f"The main process {root.pid} has no process_exit and nothing saw it end (no watcher record "
                f"after it): it was killed, or the log stops early; {_last_seen(v, root)}{unknown}.")
    return Finding("root-killed", "warning" if _lost_records(r) else "problem", text, [root.pid], [], advice, {})


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


def no_verdict(v: View) -> Finding | None:
    """No verdict will ever come (no watcher ran, or it ended without one): say so, never 'pending'."""
    runs = [r for r in v.runs if r.no_verdict]
    if not runs:
        return None
    r = runs[0]
    source = {"sample": "the last sample after the main process ended",
              "below": "the main process's own list of its live descendants at its exit"}.get(r.provisional_from)
    what = (f" What was left behind comes from {source}." if source else
            "" if r.root is not None and r.root.pid == 1 else " What was left behind is not known.")
    more = f" ({len(runs) - 1} more run(s) alike)" if len(runs) > 1 else ""
    if r.root is not None and r.root.pid == 1:
        advice = "nothing to end: its namespace's processes ended with it"
    elif source:  # a list from before the end of what was seen: some may have ended since, others started
        advice = ("check with `ps` whether what was left still runs (the list is from before any verdict); "
                  "`wp-autotrace cleanup LOG` ends only what the log proves the run's")
    else:
        advice = "look for the run's processes with `ps`; cleanup acts only on what the log proves"
    return Finding(
        "no-verdict", "warning" if r.root is None or r.root.pid != 1 else "info",
        f"No verdict will come: {r.no_verdict}.{what}{more}",
        sorted(x.root.pid for x in runs if x.root is not None), [], advice, {})


def records_lost(v: View) -> Finding | None:
    """The watcher could not write some records (a full disk) and kept sampling: the log is incomplete."""
    lost = sum(r.watcher_dropped for r in v.runs)
    if not lost:
        return None
    return Finding(
        "records-lost", "warning",
        f"The watcher could not write {lost} record(s) (the log's disk was full or unwritable) and kept "
        "sampling: processes, ends and samples of that time may be missing from this report.",
        [], [], "give the log's filesystem room (WP_AUTOTRACE_LOG on a disk with space)",
        {"records_dropped": lost})


def run_in_progress(v: View) -> Finding | None:
    """The main process has not ended: nothing about the exit (leftovers, exit wait) is known yet."""
    runs = _root_runs(v, RUN_IN_PROGRESS)
    if not runs:
        return None
    r = runs[0]
    alive = f"; {r.tree_counts[-1][1]} process(es) alive at the last sample" if r.tree_counts else ""
    if r.alive_now:  # this host's /proc says so
        alive += f"; {r.now_how}"
    else:  # nothing here could check it: only the log's age says so
        who = "nothing here confirms it" if r.watcher_pids else "no watcher record confirms it"
        alive += f"; {who}: the log's last record is recent" + (f" ({r.now_how})" if r.now_how else "")
    return Finding(
        "in-progress", "info",
        f"Run {r.id or '?'} is in progress: main process {r.root.pid if r.root else '?'} had not exited at the "
        f"last record ({(r.end or v.t0) - v.t0:.1f} s in){alive}; what it leaves behind is not known yet.",
        [], [], "report again when it ends, or follow it with `wp-autotrace watch LOG`", {})
