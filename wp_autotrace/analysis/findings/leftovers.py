"""Findings about what a run left running: the processes that outlived its main process, their memory at one
moment, and their cause where the records name it (a main killed alone and its children; a pool's orphaned
job programs; pools left running)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common.vocab import COMPILE_WORKER, SIDECAR_ROLES, STOPPED
from ..derive.labels import process_label
from ..derive.mempeak import left_at_once
from ..fold.verdict import RUN_KILLED
from ..words.fmt import MIB, TEXT_PIDS, pid_text, size_text
from .base import Finding, in_ranks, roles_text, sites_text
from .endings import dead_pools
from .mainend import exit_maybe_lost, no_exit_how

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Process, Run

def leftovers(v: View) -> Finding | None:
    if not v.leftover_count:
        return None
    listed = v.leftover_procs
    rss = v.leftover_rss
    unlisted = v.left_unlisted
    more = f"; {unlisted} more not listed (the log's list was cut)" if unlisted > 0 else ""
    # "at least" where a figure was read while a pool mate not in the sum still shared its pages
    about = "at least" if v.left_sum_at_least else "about"
    mb = f", holding {about} {size_text(v.leftover_real)}{left_read_text(v)}" if v.leftover_real else ""
    # How the main process ended, in words: "killed" only where a signal is known (`run` waited for it).
    killed = next((no_exit_how(v, r)[0] for r in v.runs if v.states[r.id] == RUN_KILLED), "")
    pending = _provisional(v) + _stopped_text(v, listed)
    # Those the log later saw end (killed by a runner, or finished), or this host shows gone as the log is read
    # (cleanup writes no record): nothing of them is left to end now.
    gone_now = {p for r in v.runs for p, entry in r.leftover.items() if entry.get("gone_now")}
    ended = [p for p in listed if p.end is not None or p in gone_now]
    checked = ", gone from this host as the log was read" if gone_now.intersection(ended) else ""
    since = ""
    if ended and len(ended) == len(listed) and not unlisted:
        since = f"; all have ended since{' (' + checked[2:] + ')' if checked else ''}"
    elif ended:
        since = f"; {len(ended)} have ended since (pids {pid_text(p.pid for p in ended)}{checked})"
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
    # workers whose sidecar died first (pool-died): no pool is left running them, and nothing stopped them
    dead = {q.index for pool, _ in dead_pools(v) for q in v.story(pool).procs}
    dead_left = bool(made) and not unlisted and all(p.role == COMPILE_WORKER and p.index in dead for p in listed)
    cause = (f": the workers of compile pools whose sidecar died before them (see pool-died; nothing stops a dead "
             f"sidecar's workers), made at {sites_text(made)}" if dead_left else
             f": compile pools left running, made at {sites_text(made)}" if made else
             ": compile pools left running (their makers were not traced)" if pool_left
             else ": what started them (the Process tree names each one's parent)")
    return Finding(
        "leftovers", "problem",
        f"{v.leftover_count} process(es) outlived the main process{in_ranks(v, listed)} "
        f"({f'it {killed}; ' if killed else ''}{roles_text(listed)}){mb}: "
        f"pids {pid_text(p.pid for p in listed)}{more}{pending}{since}.",
        sorted(p.pid for p in listed), [],
        todo + cause, {**_left_cost(v, rss), **({"dead_pool_workers": len(listed)} if dead_left else {})})


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
            "left_read_text": left_read_text(v), "stopped": len(_stopped(v, v.leftover_procs))}


def _stopped(v: View, listed: list[Process]) -> list[Process]:
    """Of listed, those the verdict saw stopped (its entry's /proc state T or t: a SIGSTOP or SIGTSTP, a tracer)."""
    held = {p for r in v.runs for p, entry in r.leftover.items() if entry.get("state") in STOPPED}
    return [p for p in listed if p in held]


def _stopped_text(v: View, listed: list[Process]) -> str:
    stopped = _stopped(v, listed)
    if not stopped:
        return ""
    who = ("all were" if len(stopped) == len(listed) else f"pid {stopped[0].pid} was" if len(stopped) == 1 else
           f"{len(stopped)} (pids {pid_text(p.pid for p in stopped)}) were")
    return f"; {who} stopped as the verdict was written (state T: a SIGSTOP or SIGTSTP; no code runs until a SIGCONT)"


def _is_pool_process(p: Process) -> bool:
    return p.role in SIDECAR_ROLES or p.role == COMPILE_WORKER


def _children_left(v: View) -> tuple[Run, list[Process]] | None:
    """A main process that ended without its exit (killed, or os._exit: RUN_KILLED) whose own children, not
    compile pool processes, outlived it: a signal to one process ends it alone, and its children run on with
    what they started (their pools included), re-parented. Its own pools' processes left are not this: those are
    told as pools left running. Not where the only sign of that end is the missing process_exit while the log
    refused records (exit_maybe_lost): a main that exited on a full disk also leaves daemon children."""
    for r in v.runs:
        if r.root is None or v.states[r.id] != RUN_KILLED or exit_maybe_lost(r):
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
    how, _, find = no_exit_how(v, r)
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
    pt, n = v.left_point, v.left_sampled
    # where some leftovers are no pool processes, the pool processes are named as such, so that each of the
    # leftovers the text counts is placed: "3 of the 4 pool processes ...; RSS for the other one"
    pools = "" if n >= n_left else (" pool processes" if n > 1 else " pool process")
    said = []
    ends = [r.root.ended_at for r in v.runs if r.root is not None and r.root.ended_at is not None]
    before = pt is not None and bool(ends) and pt.ts < min(ends)
    if pt is not None and (pt.read < n or before):
        who = (f"{pt.read} of the {n}{pools} " if pt.read < n else f"all {n}{pools} " if n > 1
               else "the pool process " if pools else "")
        together = "read together, at" if pt.read > 1 else "read at"
        when = "before the main process ended" if before else "after the main process ended"
        said.append(f"{who}{together} {v.rel(pt.ts):.1f} s, {when}")
    if by_rss:
        share = "their own share not read" if by_rss > 1 else "its own share not read"
        if by_rss >= n_left:
            said.append(f"RSS, {share}")
        elif pools and by_rss == n_left - n:
            said.append(f"RSS for the other {by_rss if by_rss > 1 else 'one'}, {share}")
        else:
            said.append(f"RSS for {by_rss} of them, {share}")
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
