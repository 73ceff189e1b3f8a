"""Turn a run's log into answers: who called warm_pool, which pools, what was left.

``analyze`` folds the records into the run model (model.py), derives a View
of the selected runs, runs the findings registry (findings.py) and returns
one JSON-ready dict with stable keys (README lists them). Rendering for
people lives in render.py.
"""

from __future__ import annotations

from typing import Any

from . import targets as T
from .findings import BENIGN_LEFTOVER_ROLES, find_all
from .logread import LogData, NoUsableLog
from .model import Call, Model, Pool, Process, Run, build
from .render import render_text

__all__ = ["analyze", "render_text", "View"]


class View:
    """The selected runs of a model, and what the findings and tables share."""

    def __init__(self, model: Model, runs: list[Run]) -> None:
        self.model = model
        self.runs = runs
        chosen = {id(r) for r in runs}
        self.procs: list[Process] = [p for p in model.processes if p.run is not None and id(p.run) in chosen]
        keep = {id(p) for p in self.procs}
        self.calls: list[Call] = [c for c in model.calls if id(c.proc) in keep]
        self.pools: list[Pool] = [pool for pool in model.pools if id(pool.creator) in keep]
        self.blocked: list[Call] = [c for r in runs for c in r.blocked]
        starts = [r.start for r in runs if r.start is not None]
        ends = [r.end for r in runs if r.end is not None]
        self.t0 = min(starts) if starts else model.t0
        self.t_end = max(ends) if ends else self.t0
        self.warm_calls = _top_warm_calls(self.calls)
        self.max_depth = max((p.depth for p in self.procs), default=0)
        self.leftover_procs = [p for r in runs for p in r.leftover if p.role not in BENIGN_LEFTOVER_ROLES]
        benign = sum(1 for r in runs for p in r.leftover if p.role in BENIGN_LEFTOVER_ROLES)
        self.leftover_count = max(sum(r.leftover_count for r in runs) - benign, len(self.leftover_procs))
        self.leftover_rss = sum(_leftover_rss(r, p) for r in runs for p in r.leftover
                                if p.role not in BENIGN_LEFTOVER_ROLES)

    def rel(self, ts: float | None) -> float | None:
        return round(ts - self.t0, 3) if ts is not None else None


def _leftover_rss(run: Run, p: Process) -> int:
    rss = run.leftover[p].get("rss")
    return rss if isinstance(rss, int) else p.last_rss


def _top_warm_calls(calls: list[Call]) -> list[Call]:
    """warm_pool calls not inside another warm_pool call (an override calling super())."""
    return [c for c in calls if c.tag == T.WARM_POOL and not c.blocked
            and (c.parent is None or c.parent.tag != T.WARM_POOL)]


def _warm_callers(v: View) -> list[dict[str, Any]]:
    callers: dict[int, dict[str, Any]] = {}
    for c in v.warm_calls:
        p = c.proc
        entry = callers.get(p.index)
        if entry is None:
            entry = callers[p.index] = {
                "pid": p.pid, "host": p.host, "run": _run_id(p), "role": p.role, "ppid": p.ppid,
                "depth": p.depth, "calls": 0, "first_ts": v.rel(c.ts), "caller": c.caller,
                "torch_warm_pool": c.env.get("TORCH_WARM_POOL"),
            }
        entry["calls"] += 1
    return sorted(callers.values(), key=lambda e: (e["first_ts"], e["pid"]))


def _run_id(p: Process) -> str:
    return p.run.id if p.run is not None else ""


def _pool_dict(v: View, pool: Pool) -> dict[str, Any]:
    side = pool.sidecar
    workers = set(side.worker_pids) if side else set()
    if side is not None:
        workers.update(q.pid for q in side.children if q.role == "compile-worker")
    exit_how = (side.exit_how or "ended") if side and side.end is not None else ("still running" if side else None)
    return {
        "run": _run_id(pool.creator), "creator_pid": pool.creator.pid, "creator_role": pool.creator.role,
        "host": pool.creator.host, "created_at": v.rel(pool.call.ts), "caller": pool.call.caller,
        "sidecar_pid": pool.sidecar_pid, "sidecar_start": v.rel(side.start) if side else None,
        "sidecar_end": v.rel(side.end) if side else None, "sidecar_exit": exit_how,
        "sidecar_served": bool(side and side.served), "worker_pids": sorted(workers),
        "wakeups": pool.wakeups, "quiesces": pool.quiesces, "shutdowns": pool.shutdowns,
    }


def _proc_dict(v: View, p: Process, leftover: set[int]) -> dict[str, Any]:
    return {
        "pid": p.pid, "ppid": p.ppid, "host": p.host, "run": _run_id(p), "role": p.role, "traced": p.traced,
        "forked": p.forked, "execs": p.execs, "create_time": p.create_time,
        "start_s": v.rel(p.start), "end_s": v.rel(p.end), "exit": p.exit_how or None,
        "peak_rss": p.peak_rss or None, "last_rss": p.last_rss or None, "depth": p.depth,
        "reparented_to": p.reparented_to, "left_behind": p.index in leftover, "rank": p.rank or None,
        "cmd": p.cmd, "name": p.name, "errors": len(p.errors),
    }


def _run_dict(r: Run) -> dict[str, Any]:
    return {"id": r.id, "command": r.command, "root_pid": r.root_pid, "hosts": r.hosts,
            "start": r.start, "end": r.end, "processes": len(r.processes),
            "leftover_checked": r.leftover_seen, "leftover_how": r.leftover_how or None, "cut": r.cut}


def _legacy_run(v: View, data: LogData) -> dict[str, Any]:
    """The `run` key: the first selected run's header, as before runs were kept apart."""
    r = v.runs[0]
    root = r.root
    cfg = next((c for c in r.configs if c[0] is root), r.configs[0] if r.configs else None)
    return {
        "id": r.id, "command": r.command, "hosts": sorted({p.host for p in v.procs}),
        "python": root.python if root and root.python else next((p.python for p in v.procs if p.python), ""),
        "torch": cfg[2] if cfg else "", "inductor": cfg[1] if cfg else {},
        "root_pid": r.root_pid, "duration_s": round(v.t_end - v.t0, 3),
        "guard": any(x.guard for x in v.runs), "files": data.files,
    }


def select_runs(model: Model, run_id: str | None) -> list[Run]:
    """The runs to report (one with --run), in start order; NoUsableLog for an unknown id."""
    runs = sorted(model.runs.values(), key=lambda r: (r.start if r.start is not None else 0.0, r.id))
    runs = [r for r in runs if r.processes] or runs
    if run_id is None:
        return runs
    chosen = [r for r in runs if r.id == run_id]
    if not chosen:
        raise NoUsableLog(f"no run {run_id!r} in the log; runs: {', '.join(r.id or '?' for r in runs)}")
    return chosen


def analyze(data: LogData, run_id: str | None = None) -> dict[str, Any]:
    """Build the report as one dict (the --json output)."""
    model = build(data.records)
    v = View(model, select_runs(model, run_id))
    leftover = {p.index for r in v.runs for p in r.leftover}
    findings = find_all(v)
    counts = [n for r in v.runs for _, n in r.tree_counts]
    warm = _warm_callers(v)
    return {
        "run": _legacy_run(v, data),
        "runs": [_run_dict(r) for r in v.runs],
        "all_runs": len(model.runs),
        "warm_pool_pids": sorted({e["pid"] for e in warm}),
        "distinct_warm_pool_pids": len(warm),
        "warm_pool_callers": warm,
        "pools": [_pool_dict(v, pool) for pool in v.pools],
        "processes": [_proc_dict(v, p, leftover)
                      for p in sorted(v.procs, key=lambda p: (p.start if p.start is not None else v.t0, p.index))],
        "max_concurrent_processes": max(counts, default=0),
        "processes_started": len(v.procs),
        "processes_exited": sum(1 for p in v.procs if p.end is not None),
        "max_sidecar_depth": v.max_depth,
        "leftover_pids": sorted({p.pid for p in v.leftover_procs}),
        "leftover_count": v.leftover_count,
        "leftover_rss_bytes": v.leftover_rss,
        "leftover_checked": any(r.leftover_seen for r in v.runs),
        "reparented_pids": sorted({p.pid for p in v.procs if _outlived_parent(p, leftover)}),
        "no_exit_pids": sorted({p.pid for p in v.procs if p.traced and p.index not in leftover
                                and (p.end is None or p.exit_how == "vanished") and not _stopped_by_pool(p)}),
        "blocked": [{"pid": c.proc.pid, "host": c.proc.host, "run": _run_id(c.proc), "role": c.proc.role,
                     "target": T.short_label(c.target), "tag": c.tag, "caller": c.caller, "action": c.action}
                    for c in v.blocked],
        "tracer_errors": [e for r in v.runs for e in r.tracer_errors][:20],
        "findings": [f._asdict() for f in findings],
        "input": {"records": len(data.records), "skipped": data.skipped, "fixed": data.fixed,
                  "problems": data.problems, "files": data.files},
    }


def _stopped_by_pool(p: Process) -> bool:
    """A compile worker that ended once its sidecar was asked to shut down: torch terminates those
    (no process_exit). One gone before that request was killed."""
    side = p.parent
    if p.role != "compile-worker" or side is None or side.served_at is None:
        return False
    return p.end is None or p.end >= side.served_at


def _outlived_parent(p: Process, leftover: set[int]) -> bool:
    """Re-parented (the watcher saw a new ppid), or still running / ended well after its parent ended."""
    if p.reparented_to is not None:
        return True
    q = p.parent
    if q is None or q.end is None:
        return False
    return (p.end is None and p.index in leftover) or (p.end is not None and p.end > q.end + 0.2)
