"""Findings as a registry: each one a small function over the analysed run.

A finding function takes the View (view.View: the selected runs' model
plus what is derived from it) and returns a Finding or None. FINDINGS
lists them in the order they are shown. One finding per kind, aggregated
(counts and the first few pids), never one line per process; the full pid
lists are in ``pids`` (--json).

Advice is concrete where the log allows: a caller in a device plugin release
that plugins.py knows gets that release's known behaviour and fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ..common import targets as T
from ..common.vocab import GUARDED_ROLES, SIDECAR_ROLES
from .fmt import TEXT_PIDS, pid_text, site, size_text
from .model import RUN_END_UNSEEN, RUN_IN_PROGRESS, RUN_KILLED
from .plugins import advice_for_frame

if TYPE_CHECKING:
    from .model import Call, Pool, Process, Run
    from .view import View

# The main process waiting longer than this at exit is worth a finding.
SLOW_EXIT_WAIT_S = 5.0


class Finding(NamedTuple):
    """One finding: a stable kind, how bad, one sentence, the evidence, what to do, what it cost."""

    kind: str
    severity: str  # "problem", "warning" or "info"
    text: str
    pids: list[int]
    evidence: list[str]
    advice: str
    cost: dict[str, Any]


def _sites(calls: Any) -> str:
    sites = sorted({site(c.caller) for c in calls})
    return ", ".join(sites[:3]) + (f" (+{len(sites) - 3} more)" if len(sites) > 3 else "")


def _roles(procs: Any) -> str:
    counts: dict[str, int] = {}
    for p in procs:
        counts[p.role] = counts.get(p.role, 0) + 1
    return ", ".join(f"{n} {role}" for role, n in sorted(counts.items()))


NESTED_ADVICE = (
    "the backend imported in every sidecar calls warm_pool() at import: keep it out of the sidecars "
    "(TORCH_DEVICE_BACKEND_AUTOLOAD=0 in the sidecar's environment, as newer torch_npu releases do around "
    "their call), or run with WP_AUTOTRACE_GUARD=nested-pools")


def plugin_advice(calls: Any, generic: str) -> str:
    """The known behaviour and fix of each plugin release among the callers (plugins.py), then generic."""
    known: list[str] = []
    for c in calls:
        text = advice_for_frame(c.caller)
        if text and text not in known:
            known.append(text)
    if not known:
        return generic
    return " ".join(known[:2]) + f" In general: {generic}"


def _in_ranks(v: View, procs: Any) -> str:
    """' in rank 0, 1' (the ranks the processes belong to), or ''."""
    ranks = sorted({v.rank_of[p.index] for p in procs if p.index in v.rank_of})
    if not ranks:
        return ""
    names = [r.removeprefix("rank ") for r in ranks]
    return f" in {'rank' if len(names) == 1 else 'ranks'} {', '.join(names[:8])}" + (
        f" (+{len(names) - 8} more)" if len(names) > 8 else "")


def nested_pools(v: View) -> Finding | None:
    nested = [c for c in v.warm_calls if c.proc.role in GUARDED_ROLES]
    if not nested:
        return None
    pids = sorted({c.proc.pid for c in nested})
    return Finding(
        "nested-pools", "problem",
        f"Nested compile pools: warm_pool ran inside {len(pids)} compile sidecar/worker process(es)"
        f"{_in_ranks(v, (c.proc for c in nested))} (pids {pid_text(pids)}), called from {_sites(nested)}; "
        f"each call starts another sidecar, {v.max_depth} deep.",
        pids, [site(c.caller) for c in nested[:TEXT_PIDS]],
        plugin_advice(nested, NESTED_ADVICE),
        {"processes": len(pids)})


def warm_pool_bypass(v: View) -> Finding | None:
    bypass = [c for c in v.warm_calls if c.env.get("TORCH_WARM_POOL") not in (None, "1")]
    if not bypass:
        return None
    pids = sorted({c.proc.pid for c in bypass})
    value = bypass[0].env.get("TORCH_WARM_POOL")
    return Finding(
        "warm-pool-bypass", "warning",
        f"TORCH_WARM_POOL={value} was set in {len(pids)} process(es) that still called warm_pool "
        f"(pids {pid_text(pids)}): a direct call from {_sites(bypass)} bypasses that guard, which only "
        "torch's own maybe_warm_pool() honours.",
        pids, [site(c.caller) for c in bypass[:TEXT_PIDS]],
        plugin_advice(bypass, "TORCH_WARM_POOL only stops torch's own maybe_warm_pool(); stop the direct "
                      "warm_pool() call at its source (see the call sites)" + (
                          "; the guard is on and refuses it in pool processes, not in the main process"
                          if any(r.guard for r in v.runs) else " or use WP_AUTOTRACE_GUARD=nested-pools")),
        {"processes": len(pids)})


def leftovers(v: View) -> Finding | None:
    if not v.leftover_count:
        return None
    listed = v.leftover_procs
    rss = v.leftover_rss
    unlisted = v.leftover_count - len(listed)
    more = f"; {unlisted} more not listed (the log's list was cut)" if unlisted > 0 else ""
    mb = f", about {size_text(rss)} resident" if rss else ""
    killed = any(v.states[r.id] == RUN_KILLED for r in v.runs)
    pending = " (verdict pending: from the last look after the main process ended)" if any(
        r.verdict_pending for r in v.runs) else ""
    return Finding(
        "leftovers", "problem",
        f"{v.leftover_count} process(es) outlived the main process{_in_ranks(v, listed)} "
        f"({'it was killed; ' if killed else ''}{_roles(listed)}){mb}: "
        f"pids {pid_text(p.pid for p in listed)}{more}{pending}.",
        sorted(p.pid for p in listed), [],
        "end them now with `wp-autotrace cleanup LOG` (it checks each is still the process the log saw); "
        "then stop their cause: pools started where nothing shuts them down (see the findings above)",
        {"processes": v.leftover_count, "leftover_rss_bytes": rss})


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


def _clean_end(p: Process) -> bool:
    return p.exit_how in ("exit", "os._exit")


def _ended_before(p: Process, asked: float | None) -> bool:
    """p ended without a clean exit before it was asked to stop (or never was): killed, not stopped."""
    return p.end is not None and not _clean_end(p) and (asked is None or p.end < asked)


def _sidecar_killed(pool: Pool) -> bool:
    """Ended without a clean exit and never got its shutdown request (traced: SubprocMain._shutdown
    never ran; untraced: it was gone before its pool asked it to stop)."""
    side = pool.sidecar
    if side is None:
        return False
    if side.traced:
        return side.end is not None and not _clean_end(side) and not side.served
    return _ended_before(side, pool.shutdown_at)


def sidecars_killed(v: View) -> Finding | None:
    """Sidecars that ended without a clean exit before their pool asked them to stop."""
    bad = [pool.sidecar for pool in v.pools if _sidecar_killed(pool)]
    if not bad:
        return None
    pids = sorted({p.pid for p in bad if p is not None})
    return Finding(
        "sidecar-killed", "warning",
        f"{len(pids)} compile sidecar(s) ended without a clean exit and without a shutdown request "
        f"(killed, or vanished): pids {pid_text(pids)}.",
        pids, [], "a sidecar dying early loses its pool's jobs; look for an OOM kill or a crash in its workers",
        {"processes": len(pids)})


def _error_text(p: Process) -> str:
    err = p.errors[0]
    origin = err.get("origin")
    where = f" ({site(origin)})" if origin else ""
    return f"{err.get('exc_type') or 'an exception'}: {err.get('message', '')[:120]}{where}"


def sidecars_never_served(v: View) -> Finding | None:
    """Traced sidecars that exited (or are left) without ever being asked to shut down."""
    idle = [pool.sidecar for pool in v.pools if pool.sidecar is not None and pool.sidecar.traced
            and not pool.sidecar.served and _clean_end(pool.sidecar)]
    idle += [p for p in v.procs if p.role in SIDECAR_ROLES and p.errors and p not in idle]
    if not idle:
        return None
    pids = sorted({p.pid for p in idle})
    raised = [p for p in idle if p.errors]
    why = (f"; sidecar {raised[0].pid}'s main() raised {_error_text(raised[0])}"
           + (f" ({len(raised)} raised)" if len(raised) > 1 else "")) if raised else \
        ": its main loop never served the pool (no SubprocMain._shutdown)"
    warmed = {c.proc.index for c in v.warm_calls}
    if any(p.index in warmed for p in raised):
        advice = ("its own import started a pool (see nested-pools) and its main() then failed: keeping the "
                  "backend out of the sidecars fixes both")
    elif raised:
        advice = f"fix what its main() raised ({_error_text(raised[0])}); the sidecar cannot serve until then"
    else:
        advice = ("nothing asked it to stop: its pool was never shut down (torch's shutdown_compile_workers "
                  "never ran, or ran in another process); shut the pool down before exit")
    return Finding(
        "sidecar-never-served", "problem" if raised else "warning",
        f"{len(pids)} compile sidecar(s) never served their pool{_in_ranks(v, idle)} (pids {pid_text(pids)}){why}.",
        pids, [_error_text(p) for p in raised[:TEXT_PIDS]], advice,
        {"processes": len(pids), "cpu_s": None})


def slow_exit_wait(v: View) -> Finding | None:
    slow = [c for c in v.calls if c.tag == T.EXIT_SHUTDOWN and c.proc.role == "main"
            and ((c.end is not None and c.end - c.ts > SLOW_EXIT_WAIT_S) or c.error)]
    if not slow:
        return None
    waits = [(c.end if c.end is not None else v.t_end) - c.ts for c in slow]
    c = slow[0]
    how = f", interrupted ({c.error})" if c.error else ""
    return Finding(
        "slow-exit-wait", "problem",
        f"The main process waited {waits[0]:.1f} s in shutdown_compile_workers at exit{how}.",
        sorted({c.proc.pid for c in slow}), [],
        "torch waits for every pool it started, nested sidecars included: stop the nested pools (see "
        "nested-pools), or quiesce/shut the pool down before exit",
        {"exit_wait_s": round(sum(waits), 3)})


def guard_refused(v: View) -> Finding | None:
    if not v.blocked:
        return None
    pids = sorted({c.proc.pid for c in v.blocked})
    names = sorted({T.short_label(c.target) for c in v.blocked})
    return Finding(
        "guard-refused", "info",
        f"Guard nested-pools refused {len(v.blocked)} call(s) in pids {pid_text(pids)} ({', '.join(names)}).",
        pids, [site(c.caller) for c in v.blocked[:TEXT_PIDS]], "", {"calls": len(v.blocked)})


def guard_idle(v: View) -> Finding | None:
    if v.blocked or not any(r.guard for r in v.runs):
        return None
    return Finding("guard-idle", "info", "Guard nested-pools was on and refused nothing.", [], [],
                   "", {})


def tracer_trouble(v: View) -> Finding | None:
    errors = [e for r in v.runs for e in r.tracer_errors]
    dropped = sum(r.dropped for r in v.runs)
    if not errors and not dropped:
        return None
    return Finding(
        "tracer-errors", "warning",
        f"The tracer reported {len(errors)} error(s) and dropped {dropped} record(s): this report may miss events.",
        [], errors[:TEXT_PIDS], "see the errors; a dropped record usually means the log's disk was full",
        {"records_dropped": dropped})


def data_cut(v: View) -> Finding | None:
    cut = [c for r in v.runs for c in r.cut]
    if not cut:
        return None
    return Finding("log-cut", "warning", f"Parts of the log were cut: {'; '.join(sorted(set(cut))[:3])}.",
                   [], cut[:TEXT_PIDS], "counts above come from the records' own totals where they have them", {})


def _unreturned(v: View) -> list[Call]:
    """Calls entered and never left, in processes whose end was seen (a live loop is not stuck)."""
    return [c for c in v.calls if c.end is None and not c.blocked and c.tag != T.SIDECAR_MAIN
            and c.proc.end is not None]


def _last_seen(v: View, p: Process) -> str:
    """Where a process was when last seen: its last record (not process_exit)."""
    r = p.last
    if not r:
        return "no record"
    what = r["event"] + (f" {T.short_label(r['target'])}" if r.get("target") else "")
    return f"last record {what} at {r['ts'] - v.t0:.1f} s"


def _open_call_text(v: View, c: Call) -> str:
    took = max(0.0, (c.proc.end or v.t_end) - c.ts)
    how = c.proc.exit_how or "ended"
    return (f"{T.short_label(c.target)} in {c.proc.role} {c.proc.pid}, open {took:.1f} s until the process "
            f"ended ({how}), called from {site(c.caller)}; {_last_seen(v, c.proc)}")


def calls_never_returned(v: View) -> Finding | None:
    open_calls = _unreturned(v)
    if not open_calls:
        return None
    names: dict[str, int] = {}
    for c in open_calls:
        names[T.short_label(c.target)] = names.get(T.short_label(c.target), 0) + 1
    more = "" if len(names) == 1 else " (" + ", ".join(f"{n} {name}" for name, n in sorted(names.items())) + ")"
    return Finding(
        "call-never-returned", "warning",
        f"{len(open_calls)} traced call(s) never returned{more}, e.g. {_open_call_text(v, open_calls[0])}.",
        sorted({x.proc.pid for x in open_calls}),
        [_open_call_text(v, x) for x in open_calls[:TEXT_PIDS]],
        "a process that exited cleanly left the call running in another thread; one killed (or ended by "
        "os._exit) died inside it: see how each ended, and look for what it was waiting on", {})


def _root_runs(v: View, state: str) -> list[Run]:
    return [r for r in v.runs if v.states.get(r.id) == state and r.root is not None]


def root_killed(v: View) -> Finding | None:
    """The main process ended without process_exit: the watcher saw it go, or nothing saw it end."""
    runs = _root_runs(v, RUN_KILLED) + _root_runs(v, RUN_END_UNSEEN)
    if not runs:
        return None
    r = runs[0]
    root = r.root
    assert root is not None
    advice = "its pools were never shut down: end what is left with `wp-autotrace cleanup LOG`"
    if v.states[r.id] == RUN_KILLED:
        when = root.gone if root.gone is not None else r.end
        at = f" at {when - v.t0:.1f} s" if when is not None else ""
        alive = r.leftover_count or max((n for ts, n in r.tree_counts if when is not None and ts >= when),
                                        default=0)
        text = (f"The main process {root.pid} was killed{at} (no process_exit; its exit handlers did not run); "
                f"seen after it: {alive} process(es) of the run still alive.")
        if not alive and r.leftover_seen:  # the verdict: nothing left, so nothing to clean up
            advice = "nothing of the run is left to end; find what killed it (the OOM killer: dmesg; a time limit)"
    else:
        text = (f"The main process {root.pid} has no process_exit and nothing saw it end (no watcher record "
                f"after it): it was killed, or the log stops early; {_last_seen(v, root)}.")
    return Finding("root-killed", "problem", text, [root.pid], [], advice, {})


def run_in_progress(v: View) -> Finding | None:
    """The main process has not ended: nothing about the exit (leftovers, exit wait) is known yet."""
    runs = _root_runs(v, RUN_IN_PROGRESS)
    if not runs:
        return None
    r = runs[0]
    alive = f"; {r.tree_counts[-1][1]} process(es) alive at the last sample" if r.tree_counts else ""
    if not r.watcher_pids:  # only the log's age says so
        alive += "; no watcher record confirms it: the log's last record is recent"
    return Finding(
        "in-progress", "info",
        f"Run {r.id or '?'} is in progress: main process {r.root.pid if r.root else '?'} had not exited at the "
        f"last record ({(r.end or v.t0) - v.t0:.1f} s in){alive}; what it leaves behind is not known yet.",
        [], [], "report again when it ends, or follow it with `wp-autotrace watch LOG`", {})


def wakeup_no_pool(v: View) -> Finding | None:
    """AsyncCompile.wakeup() called, returned, and woke no sidecar (torch returned early)."""
    woke = {id(c.parent) for c in v.calls if c.tag == T.POOL_WAKEUP and c.parent is not None}
    idle = [c for c in v.calls if c.tag == T.ASYNC_WAKEUP and c.end is not None and id(c) not in woke
            and not c.error]
    if not idle:
        return None
    pids = sorted({c.proc.pid for c in idle})
    return Finding(
        "wakeup-no-pool", "info",
        f"AsyncCompile.wakeup() was called {len(idle)} time(s) (pids {pid_text(pids)}, from {_sites(idle)}) "
        "and returned without waking a sidecar: torch returns early when it does not use a process pool "
        "(compile_threads <= 1, or the pool failed) or the pool is not a SubprocPool, so pools show no wakeups.",
        pids, [site(c.caller) for c in idle[:TEXT_PIDS]],
        "check TORCHINDUCTOR_COMPILE_THREADS and the inductor settings in the Run section", {"calls": len(idle)})


FINDINGS: tuple[Callable[[View], Finding | None], ...] = (
    root_killed,
    run_in_progress,
    nested_pools,
    warm_pool_bypass,
    verdict_pending,
    leftovers,
    sidecars_killed,
    sidecars_never_served,
    slow_exit_wait,
    calls_never_returned,
    wakeup_no_pool,
    guard_refused,
    guard_idle,
    tracer_trouble,
    data_cut,
)


def find_all(view: View) -> list[Finding]:
    """Every finding that applies, in FINDINGS order."""
    return [f for f in (check(view) for check in FINDINGS) if f is not None]
