"""Findings as a registry: each one a small function over the analysed run.

A finding function takes the View (report.View: the selected runs' model
plus what report derived from it) and returns a Finding or None. FINDINGS
lists them in the order they are shown. One finding per kind, aggregated
(counts and the first few pids), never one line per process; the full pid
lists are in ``pids`` (--json).

TODO(lead, after merge): label processes with wp_autotrace.labels (i12-runtime)
where findings name them (rank labels, toolchain names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from . import targets as T
from .targets import GUARDED_ROLES, HELPER_ROLES, SIDECAR_ROLES

if TYPE_CHECKING:
    from .model import Call, Pool, Process
    from .report import View

# The main process waiting longer than this at exit is worth a finding.
SLOW_EXIT_WAIT_S = 5.0
# Pids named in a finding's text; the rest are in --json.
TEXT_PIDS = 6
# multiprocessing's resource tracker and forkserver outlive their starter by design.
BENIGN_LEFTOVER_ROLES = HELPER_ROLES


class Finding(NamedTuple):
    """One finding: a stable kind, how bad, one sentence, the evidence, what to do, what it cost."""

    kind: str
    severity: str  # "problem", "warning" or "info"
    text: str
    pids: list[int]
    evidence: list[str]
    advice: str
    cost: dict[str, Any]


def pid_text(pids: Any, limit: int = TEXT_PIDS) -> str:
    """'1, 2, 3' or '1, 2, 3, ... (40 in all)'."""
    items = sorted(set(pids))
    text = ", ".join(map(str, items[:limit]))
    return text + (f", ... ({len(items)} in all)" if len(items) > limit else "")


def size_text(n: int) -> str:
    """Bytes for people: '600 MB', '65.6 GB'."""
    return f"{n / 2**30:.1f} GB" if n >= 10 * 2**30 else f"{n / 2**20:.0f} MB"


def site(frame: dict[str, Any] | None) -> str:
    """Where a call came from, for people: 'dist version: rel:line (func)' when known."""
    if not frame:
        return "?"
    where = frame.get("rel") or frame["file"]
    text = f"{where}:{frame.get('line')} ({frame.get('func') or '?'})"
    if frame.get("dist"):
        text = f"{frame['dist']} {frame.get('dist_version') or ''}".rstrip() + ": " + text
    if frame.get("src"):
        text += f' "{frame["src"][:60]}"'
    return text


def _sites(calls: Any) -> str:
    sites = sorted({site(c.caller) for c in calls})
    return ", ".join(sites[:3]) + (f" (+{len(sites) - 3} more)" if len(sites) > 3 else "")


def _roles(procs: Any) -> str:
    counts: dict[str, int] = {}
    for p in procs:
        counts[p.role] = counts.get(p.role, 0) + 1
    return ", ".join(f"{n} {role}" for role, n in sorted(counts.items()))


def nested_pools(v: View) -> Finding | None:
    nested = [c for c in v.warm_calls if c.proc.role in GUARDED_ROLES]
    if not nested:
        return None
    pids = sorted({c.proc.pid for c in nested})
    return Finding(
        "nested-pools", "problem",
        f"Nested compile pools: warm_pool ran inside {len(pids)} compile sidecar/worker process(es) "
        f"(pids {pid_text(pids)}), called from {_sites(nested)}; each call starts another sidecar, "
        f"{v.max_depth} deep.",
        pids, [site(c.caller) for c in nested[:TEXT_PIDS]],
        "the backend imported in every sidecar calls warm_pool() at import: keep it out of the sidecars "
        "(TORCH_DEVICE_BACKEND_AUTOLOAD=0 in the sidecar's environment, as newer torch_npu releases do), "
        "or run with WP_AUTOTRACE_GUARD=nested-pools",
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
        "TORCH_WARM_POOL only stops torch's own maybe_warm_pool(); stop the direct warm_pool() call at its "
        "source (see the call sites) or use WP_AUTOTRACE_GUARD=nested-pools",
        {"processes": len(pids)})


def leftovers(v: View) -> Finding | None:
    if not v.leftover_count:
        return None
    listed = v.leftover_procs
    rss = v.leftover_rss
    unlisted = v.leftover_count - len(listed)
    more = f"; {unlisted} more not listed (the log's list was cut)" if unlisted > 0 else ""
    mb = f", about {size_text(rss)} resident" if rss else ""
    killed = any(r.leftover_how == "root-killed" for r in v.runs)
    return Finding(
        "leftovers", "problem",
        f"{v.leftover_count} process(es) outlived the main process{' (it was killed)' if killed else ''} "
        f"({_roles(listed)}){mb}: "
        f"pids {pid_text(p.pid for p in listed)}{more}.",
        sorted(p.pid for p in listed), [],
        "they keep memory and CPU after the job: stop their pools before exit (torch's "
        "shutdown_compile_workers), and clean up with `wp-autotrace cleanup LOG` where available",
        {"processes": v.leftover_count, "leftover_rss_bytes": rss})


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
    return Finding(
        "sidecar-never-served", "problem" if raised else "warning",
        f"{len(pids)} compile sidecar(s) never served their pool (pids {pid_text(pids)}){why}.",
        pids, [_error_text(p) for p in raised[:TEXT_PIDS]],
        "a sidecar that never serves costs a process and its import time for nothing: see what it raised",
        {"processes": len(pids)})


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


def calls_never_returned(v: View) -> Finding | None:
    open_calls = _unreturned(v)
    if not open_calls:
        return None
    c = open_calls[0]
    took = (c.proc.end or v.t_end) - c.ts
    return Finding(
        "call-never-returned", "warning",
        f"{len(open_calls)} traced call(s) never returned, e.g. {T.short_label(c.target)} in {c.proc.role} "
        f"{c.proc.pid}, open {took:.1f} s until the process ended.",
        sorted({x.proc.pid for x in open_calls}),
        [f"{T.short_label(x.target)} in {x.proc.pid}" for x in open_calls[:TEXT_PIDS]],
        "the process was killed (or exited with os._exit) inside the call", {})


FINDINGS: tuple[Callable[[View], Finding | None], ...] = (
    nested_pools,
    warm_pool_bypass,
    leftovers,
    sidecars_killed,
    sidecars_never_served,
    slow_exit_wait,
    calls_never_returned,
    guard_refused,
    guard_idle,
    tracer_trouble,
    data_cut,
)


def find_all(view: View) -> list[Finding]:
    """Every finding that applies, in FINDINGS order."""
    return [f for f in (check(view) for check in FINDINGS) if f is not None]
