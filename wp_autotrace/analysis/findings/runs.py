"""Findings about how a run stands: still in progress, its verdict pending or never to come, the watcher's
records lost. How its main process ended is mainend.py's; what it left, leftovers.py's; calls left open,
opencalls.py's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fold.verdict import RUN_IN_PROGRESS, VERDICT_HELD, VERDICT_HELD_FIX, verdict_held
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Run


def verdict_pending(v: View) -> Finding | None:
    """The main process ended, and nothing yet says what it left: no verdict, no look after its end."""
    runs = [r for r in v.runs if r.verdict_pending and not r.provisional_from]
    if not runs:
        return None
    pids = sorted(r.root.pid for r in runs if r.root is not None)
    if all(verdict_held(r) for r in runs):  # the full log is why: said, and the one fix
        return Finding(
            "verdict-pending", "warning",
            f"{VERDICT_HELD}; the watcher keeps its verdict and writes it once the log takes records again, if "
            "it still runs: what is still running is not known yet.",
            pids, [], f"{VERDICT_HELD_FIX}, then read the report again", {})
    return Finding(
        "verdict-pending", "warning",
        "Verdict pending: the main process ended, but the watcher has not yet written what the run left "
        "behind, and no look after that end is in the log: what is still running is not known yet.",
        pids, [],
        "read the report again in a few seconds (the watcher writes its verdict shortly after the main "
        "process ends)", {})

def root_runs(v: View, state: str) -> list[Run]:
    return [r for r in v.runs if v.states.get(r.id) == state and r.root is not None]

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
    runs = root_runs(v, RUN_IN_PROGRESS)
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
