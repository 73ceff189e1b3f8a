"""Turn a run's log into answers: who called warm_pool, which pools, what was left.

``analyze`` builds one JSON-ready dict with stable keys; ``render_text``
prints it for people. Every field read from the log is type-checked, since
logs can be cut or hand-edited.
"""

from __future__ import annotations

from typing import Any

from .logread import LogData, skipped_line
from .targets import GUARDED_ROLES, SIDECAR_ROLES

SIDECAR = "compile-sidecar"
WORKER = "compile-worker"
# Processes that only serve a pool: a warm_pool there nests pools.
POOL_ROLES = GUARDED_ROLES
MAX_ROWS = 20  # rows per table in the text report; --json has them all
MAX_INDENT = 8


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _frame(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict) and isinstance(value.get("file"), str):
        return {"file": value["file"], "line": _int(value.get("line")), "func": _str(value.get("func"))}
    return None


def _site(frame: dict[str, Any] | None) -> str:
    if not frame:
        return "?"
    return f"{frame['file']}:{frame['line']} ({frame['func']})"


def _method(target: str) -> str:
    """'torch._inductor.async_compile:AsyncCompile.warm_pool' -> 'warm_pool'."""
    return target.rpartition(":")[2].rpartition(".")[2]


def _short(target: str) -> str:
    return target.rpartition(":")[2]


class _Proc:
    """Everything the log says about one process."""

    def __init__(self, host: str, pid: int) -> None:
        self.host = host
        self.pid = pid
        self.ppid: int | None = None
        self.role = ""
        self.traced = False
        self.forked = False
        self.start: float | None = None
        self.end: float | None = None
        self.exit_how = ""
        self.last_seen: float | None = None
        self.peak_rss = 0
        self.cmd = ""
        self.name = ""
        self.env: dict[str, Any] = {}
        self.reparented_to: int | None = None

    def key(self) -> tuple[str, int]:
        return (self.host, self.pid)


def analyze(data: LogData) -> dict[str, Any]:
    """Build the report as one dict (the --json output)."""
    records = data.records
    procs: dict[tuple[str, int], _Proc] = {}

    def proc(r: dict[str, Any], pid: int | None = None) -> _Proc:
        host = _str(r.get("host"))
        pid = r["pid"] if pid is None else pid
        p = procs.get((host, pid))
        if p is None:
            p = procs[(host, pid)] = _Proc(host, pid)
        return p

    t0 = min(r["ts"] for r in records)
    t_end = max(r["ts"] for r in records)
    calls: dict[tuple[str, int, int], dict[str, Any]] = {}
    blocked: list[dict[str, Any]] = []
    configs: list[dict[str, Any]] = []
    tree_counts: list[tuple[float, int]] = []
    leftover: dict[tuple[str, int], dict[str, Any]] = {}
    leftover_seen = False
    errors: list[str] = []
    dropped = 0
    guard_on = False

    for r in records:
        event, ts = r["event"], float(r["ts"])
        p = proc(r)
        if r.get("role") and event != "tree":
            p.role = _str(r.get("role")) or p.role
        if p.ppid is None and _int(r.get("ppid")) is not None and event != "tree":
            p.ppid = r["ppid"]
        if event == "process_start":
            if not p.traced:  # an exec'd process writes a second start: keep the first
                p.start = ts
            p.traced = True
            p.ppid = _int(r.get("ppid"))
            p.forked = bool(r.get("forked"))
            argv = r.get("argv")
            if isinstance(argv, list):
                p.cmd = " ".join(str(a) for a in argv)[:300]
            if isinstance(r.get("env"), dict):
                p.env = r["env"]
            guard_on = guard_on or bool(r.get("guard"))
        elif event == "process_exit":
            p.end = ts
            p.exit_how = _str(r.get("how")) or "exit"
            dropped += _int(r.get("dropped")) or 0
        elif event == "call":
            cid = _int(r.get("call_id"))
            if cid is not None:
                calls[(p.host, p.pid, cid)] = {
                    "host": p.host, "pid": p.pid, "ts": ts, "target": _str(r.get("target")),
                    "caller": _frame(r.get("caller")), "parent_call": _int(r.get("parent_call")),
                    "env": r.get("env") if isinstance(r.get("env"), dict) else {},
                    "role": _str(r.get("role")), "end": None, "error": None, "return": {},
                    "thread": _str(r.get("thread")),
                }
        elif event == "return":
            c = calls.get((p.host, p.pid, _int(r.get("call_id")) or -1))
            if c is not None:
                c["end"] = ts
                c["error"] = _str(r.get("error")) or None
                c["return"] = r
        elif event == "blocked":
            blocked.append({"pid": p.pid, "host": p.host, "role": _str(r.get("role")),
                            "target": _short(_str(r.get("target"))), "caller": _frame(r.get("caller")),
                            "action": _str(r.get("action"))})
        elif event == "config":
            settings = r.get("settings") if isinstance(r.get("settings"), dict) else {}
            configs.append({"pid": p.pid, "role": p.role, "settings": settings,
                            "torch": _str(r.get("torch_version"))})
        elif event == "tree":
            items: list[Any] = r["procs"] if isinstance(r.get("procs"), list) else []
            tree_counts.append((ts, len(items)))
            for item in items:
                if not isinstance(item, dict) or _int(item.get("pid")) is None:
                    continue
                q = proc(r, item["pid"])
                q.last_seen = ts
                if q.start is None:
                    q.start = _num(item.get("create_time")) or ts
                    q.start = max(q.start, t0) if q.pid != r["pid"] else q.start
                rss = _int(item.get("rss")) or 0
                q.peak_rss = max(q.peak_rss, rss)
                ppid = _int(item.get("ppid"))
                if q.ppid is None:
                    q.ppid = ppid
                elif ppid is not None and ppid != q.ppid:
                    q.reparented_to = ppid
                if not q.role and _str(item.get("role")):
                    q.role = item["role"]
                if not q.cmd:
                    q.cmd = _str(item.get("cmd"))[:300]
                if not q.name:
                    q.name = _str(item.get("name"))[:40]
        elif event == "leftover":
            leftover_seen = True
            for item in r["procs"] if isinstance(r.get("procs"), list) else []:
                if isinstance(item, dict) and _int(item.get("pid")) is not None:
                    leftover[(_str(r.get("host")), item["pid"])] = item
        elif event == "tracer_error":
            errors.append(f"pid {p.pid}: {_str(r.get('where'))}: {_str(r.get('error'))}")

    # Processes seen by the sampler but never traced: their end is when they vanished.
    for p in procs.values():
        if p.end is None and p.last_seen is not None and p.key() not in leftover and p.last_seen < t_end:
            p.end = p.last_seen
            p.exit_how = p.exit_how or "vanished"
        if not p.role:
            p.role = "child"

    roots = [p for p in procs.values() if p.role == "main"]
    root = min(roots, key=lambda p: p.start or t0) if roots else None

    def ancestors(p: _Proc) -> list[_Proc]:
        chain, seen = [], {p.key()}
        q = procs.get((p.host, p.ppid)) if p.ppid is not None else None
        while q is not None and q.key() not in seen:
            chain.append(q)
            seen.add(q.key())
            q = procs.get((q.host, q.ppid)) if q.ppid is not None else None
        return chain

    def depth(p: _Proc) -> int:
        """Compile sidecars on the path from the root down to p, p included."""
        return sum(1 for q in [p, *ancestors(p)] if q.role in SIDECAR_ROLES)

    # -- warm_pool callers -------------------------------------------------
    warm_calls = [c for c in calls.values() if _method(c["target"]) == "warm_pool"]
    top_warm = [c for c in warm_calls
                if c["parent_call"] is None
                or _method(calls.get((c["host"], c["pid"], c["parent_call"]), {}).get("target", "")) != "warm_pool"]
    callers: dict[tuple[str, int], dict[str, Any]] = {}
    for c in top_warm:
        p = procs[(c["host"], c["pid"])]
        entry = callers.setdefault(p.key(), {
            "pid": p.pid, "host": p.host, "role": p.role, "ppid": p.ppid, "depth": depth(p),
            "calls": 0, "first_ts": round(c["ts"] - t0, 3), "caller": c["caller"],
            "torch_warm_pool": (c["env"] or {}).get("TORCH_WARM_POOL"),
        })
        entry["calls"] += 1
    warm_list = sorted(callers.values(), key=lambda e: (e["first_ts"], e["pid"]))

    # -- pools ---------------------------------------------------------------
    pools: list[dict[str, Any]] = []
    for c in sorted(calls.values(), key=lambda c: c["ts"]):
        if not c["target"].endswith("SubprocPool.__init__"):
            continue
        sidecar_pid = _int(c["return"].get("sidecar_pid")) if c["return"] else None
        creator = procs[(c["host"], c["pid"])]
        side = procs.get((c["host"], sidecar_pid)) if sidecar_pid is not None else None
        events: dict[str, int] = {"wakeup": 0, "quiesce": 0, "shutdown": 0}
        workers: set[int] = set()
        for d in calls.values():
            if d["host"] != c["host"]:
                continue
            m = _method(d["target"])
            if d["pid"] == c["pid"] and "SubprocPool." in d["target"] and m in events:
                events[m] += 1
            if sidecar_pid is not None and d["pid"] == sidecar_pid and d["return"]:
                workers.update(x for x in d["return"].get("worker_pids") or [] if _int(x) is not None)
        if side is not None:
            workers.update(q.pid for q in procs.values()
                           if q.host == side.host and q.ppid == side.pid and q.role == WORKER)
        pools.append({
            "creator_pid": creator.pid, "creator_role": creator.role, "host": creator.host,
            "created_at": round(c["ts"] - t0, 3), "caller": c["caller"], "sidecar_pid": sidecar_pid,
            "sidecar_start": round(side.start - t0, 3) if side and side.start else None,
            "sidecar_end": round(side.end - t0, 3) if side and side.end else None,
            "sidecar_exit": side.exit_how if side and side.end else ("still running" if side else None),
            "worker_pids": sorted(workers), **{f"{k}s": v for k, v in events.items()},
        })

    # -- timeline ----------------------------------------------------------------
    max_concurrent = max((n for _, n in tree_counts), default=0)
    started = len(procs)
    exited = sum(1 for p in procs.values() if p.end is not None)
    max_depth = max((depth(p) for p in procs.values()), default=0)
    # multiprocessing's resource tracker exits just after the process that
    # started it: alive at its exit by design, so not a leftover.
    leftover_keys = {k for k in leftover if k not in procs or procs[k].role != "resource-tracker"}
    leftover_pids = sorted({pid for _, pid in leftover_keys})
    def outlived_parent(p: _Proc) -> bool:
        q = procs.get((p.host, p.ppid)) if p.ppid is not None else None
        if p.reparented_to is not None:
            return True
        if q is None or q.end is None or q is p:
            return False
        return (p.end is None and p.key() in leftover_keys) or (p.end is not None and p.end > q.end + 0.2)

    reparented = sorted(p.pid for p in procs.values() if outlived_parent(p))
    no_exit = sorted(p.pid for p in procs.values() if p.traced and (p.end is None or p.exit_how == "vanished"))

    # -- findings --------------------------------------------------------------
    findings: list[str] = []
    nested = [e for e in warm_list if e["role"] in POOL_ROLES]
    if nested:
        sites = sorted({_site(e["caller"]) for e in nested})
        findings.append(
            f"Nested compile pools: warm_pool ran inside {len(nested)} compile sidecar/worker process(es) "
            f"(pids {_pids(e['pid'] for e in nested)}), called from {', '.join(sites[:3])}; each call starts "
            f"another sidecar, {max_depth} deep.")
    bypass = [e for e in warm_list if e["torch_warm_pool"] not in (None, "1")]
    if bypass:
        sites = sorted({_site(e["caller"]) for e in bypass})
        findings.append(
            f"TORCH_WARM_POOL={bypass[0]['torch_warm_pool']} was set in {len(bypass)} process(es) that still "
            f"called warm_pool (pids {_pids(e['pid'] for e in bypass)}): a direct call from {', '.join(sites[:3])} "
            "bypasses that guard, which only torch's own maybe_warm_pool() honours.")
    if leftover_pids:
        roles = _role_counts(procs[k] for k in leftover_keys if k in procs)
        findings.append(f"{len(leftover_pids)} process(es) outlived the main process ({roles}): "
                        f"pids {_pids(leftover_pids)}.")
    for pool in pools:
        side = procs.get((pool["host"], pool["sidecar_pid"])) if pool["sidecar_pid"] is not None else None
        if side is None or side.end is None:
            continue
        served = any(d["pid"] == side.pid and d["target"].endswith("SubprocMain._shutdown")
                     for d in calls.values() if d["host"] == side.host)
        if side.exit_how not in ("exit",):
            findings.append(f"Compile sidecar {side.pid} (created by {pool['creator_role']} {pool['creator_pid']}) "
                            f"was killed or vanished without a clean exit ({side.exit_how}).")
        elif not served and side.traced:
            findings.append(f"Compile sidecar {side.pid} exited without a shutdown request: its main loop never "
                            "served the pool (no SubprocMain._shutdown).")
    slow_exit = [c for c in calls.values() if c["target"].endswith(":shutdown_compile_workers")
                 and (root is None or c["pid"] == root.pid)
                 and ((c["end"] is not None and c["end"] - c["ts"] > 5) or c["error"])]
    for c in slow_exit:
        took = (c["end"] or t_end) - c["ts"]
        how = f", interrupted ({c['error']})" if c["error"] else ""
        findings.append(f"The main process waited {took:.1f} s in shutdown_compile_workers at exit{how}.")
    if blocked:
        findings.append(f"Guard nested-pools refused {len(blocked)} call(s) in pids "
                        f"{_pids(b['pid'] for b in blocked)} ({', '.join(sorted({b['target'] for b in blocked}))}).")
    elif guard_on:
        findings.append("Guard nested-pools was on and refused nothing.")
    if errors or dropped:
        findings.append(f"The tracer reported {len(errors)} error(s) and dropped {dropped} record(s).")

    main_cfg = next((c for c in configs if root and c["pid"] == root.pid), configs[0] if configs else None)
    run = {
        "command": root.cmd if root else "",
        "hosts": sorted({p.host for p in procs.values()}),
        "python": _str(next((r.get("python") for r in records if r["event"] == "process_start"), "")),
        "torch": main_cfg["torch"] if main_cfg else "",
        "inductor": main_cfg["settings"] if main_cfg else {},
        "root_pid": root.pid if root else None,
        "duration_s": round(t_end - t0, 3),
        "guard": guard_on,
        "files": data.files,
    }
    return {
        "run": run,
        "warm_pool_pids": sorted({e["pid"] for e in warm_list}),
        "distinct_warm_pool_pids": len({(e["host"], e["pid"]) for e in warm_list}),
        "warm_pool_callers": warm_list,
        "pools": pools,
        "processes": [_proc_dict(p, t0, depth(p))
                      for p in sorted(procs.values(), key=lambda p: (p.start or t0, p.pid))],
        "max_concurrent_processes": max_concurrent,
        "processes_started": started,
        "processes_exited": exited,
        "max_sidecar_depth": max_depth,
        "leftover_pids": leftover_pids,
        "leftover_checked": leftover_seen,
        "reparented_pids": reparented,
        "no_exit_pids": no_exit,
        "blocked": blocked,
        "tracer_errors": errors[:20],
        "findings": findings,
        "input": {"records": len(records), "skipped": data.skipped},
    }


def _pids(pids: Any) -> str:
    items = sorted(set(pids))
    text = ", ".join(map(str, items[:12]))
    return text + (f", ... ({len(items)} in all)" if len(items) > 12 else "")


def _role_counts(procs: Any) -> str:
    counts: dict[str, int] = {}
    for p in procs:
        counts[p.role] = counts.get(p.role, 0) + 1
    return ", ".join(f"{n} {role}" for role, n in sorted(counts.items()))


def _proc_dict(p: _Proc, t0: float, depth: int) -> dict[str, Any]:
    return {
        "pid": p.pid, "ppid": p.ppid, "host": p.host, "role": p.role, "traced": p.traced, "forked": p.forked,
        "start_s": round(p.start - t0, 3) if p.start is not None else None,
        "end_s": round(p.end - t0, 3) if p.end is not None else None,
        "exit": p.exit_how or None, "peak_rss": p.peak_rss or None, "depth": depth,
        "reparented_to": p.reparented_to, "cmd": p.cmd, "name": p.name,
    }


def _mb(n: Any) -> str:
    return f"{n / 2**20:.0f} MB" if n else "-"


def _t(x: Any) -> str:
    return f"{x:7.2f}s" if isinstance(x, (int, float)) else "      ?"


def render_text(rep: dict[str, Any], skipped: dict[str, int]) -> str:
    """The report for people: plain sections, answers first."""
    out: list[str] = []
    run = rep["run"]
    out.append("== Run")
    out.append(f"command:   {run['command'] or '?'}")
    out.append(f"host(s):   {', '.join(run['hosts'])}    python {run['python'] or '?'}    torch {run['torch'] or '?'}")
    if run["inductor"]:
        out.append("inductor:  " + ", ".join(f"{k}={v}" for k, v in run["inductor"].items()))
    out.append(f"duration:  {run['duration_s']:.1f}s    guard: {'nested-pools' if run['guard'] else 'off'}")

    out.append("")
    out.append("== Findings")
    out.extend(f"- {f}" for f in rep["findings"] or ["Nothing unusual."])

    out.append("")
    out.append(f"== warm_pool callers: {rep['distinct_warm_pool_pids']} distinct PID(s) {rep['warm_pool_pids']}")
    if rep["warm_pool_callers"]:
        out.append(f"{'pid':>8} {'role':<16} {'ppid':>8} {'depth':>5} {'calls':>5} {'first':>8}  called from")
        rows = rep["warm_pool_callers"]
        for e in rows if len(rows) <= MAX_ROWS else rows[: MAX_ROWS - 3] + rows[-3:]:
            if len(rows) > MAX_ROWS and e is rows[-3]:
                out.append(f"{'...':>8} ({len(rows) - MAX_ROWS} more, see --json)")
            out.append(f"{e['pid']:>8} {e['role']:<16} {e['ppid'] or '?':>8} {e['depth']:>5} {e['calls']:>5} "
                       f"{_t(e['first_ts'])}  {_site(e['caller'])}")
    else:
        out.append("warm_pool was not called in any traced process.")

    out.append("")
    out.append(f"== Pools ({len(rep['pools'])})")
    pools = rep["pools"]
    for pool in pools if len(pools) <= MAX_ROWS else pools[: MAX_ROWS - 3] + pools[-3:]:
        if len(pools) > MAX_ROWS and pool is pools[-3]:
            out.append(f"  ... ({len(pools) - MAX_ROWS} more, see --json)")
        end = _t(pool["sidecar_end"]).strip() if pool["sidecar_end"] else "end"
        life = f"{_t(pool['sidecar_start']).strip()} -> {end}"
        out.append(f"- sidecar {pool['sidecar_pid']} created by {pool['creator_role']} {pool['creator_pid']} "
                   f"at {pool['created_at']:.2f}s from {_site(pool['caller'])}")
        out.append(f"  alive {life} ({pool['sidecar_exit']}); workers {pool['worker_pids'] or 'none'}; "
                   f"wakeups {pool['wakeups']}, quiesces {pool['quiesces']}, shutdowns {pool['shutdowns']}")
    if rep["blocked"]:
        out.append(f"guard refused {len(rep['blocked'])} call(s):")
        for b in rep["blocked"][:10]:
            out.append(f"  - {b['target']} in {b['role']} {b['pid']} from {_site(b['caller'])}")

    out.append("")
    out.append("== Process tree (start/end seconds from the first record)")
    by_key = {(p["host"], p["pid"]): p for p in rep["processes"]}
    kids: dict[Any, list[dict[str, Any]]] = {}
    for p in rep["processes"]:
        parent = (p["host"], p["ppid"])
        kids.setdefault(parent if parent in by_key and parent != (p["host"], p["pid"]) else None, []).append(p)
    leftover = set(rep["leftover_pids"])
    shown: set[Any] = set()

    def show(p: dict[str, Any], indent: int) -> None:
        if (p["host"], p["pid"]) in shown or len(shown) > 400:
            return
        shown.add((p["host"], p["pid"]))
        end = _t(p["end_s"]) if p["end_s"] is not None else (" LEFT  " if p["pid"] in leftover else "   -   ")
        flags = [x for x in ("forked" if p["forked"] else "", "left behind" if p["pid"] in leftover else "",
                             f"re-parented to {p['reparented_to']}" if p["reparented_to"] else "",
                             "untraced" if not p["traced"] and p["role"] != "child" else "") if x]
        pad = "  " * indent if indent <= MAX_INDENT else "  " * MAX_INDENT + f"({indent}) "
        what = p["role"] if p["traced"] or p["role"] != "child" else f"{p['name'] or '?'} (untraced child)"
        out.append(f"{_t(p['start_s'])} {end} {pad}{p['pid']} {what} rss {_mb(p['peak_rss'])}"
                   + (f"  [{', '.join(flags)}]" if flags else ""))
        for k in sorted(kids.get((p["host"], p["pid"]), []), key=lambda q: (q["start_s"] or 0, q["pid"])):
            show(k, indent + 1)

    for p in kids.get(None, []):
        show(p, 0)

    out.append("")
    out.append("== Timeline")
    out.append(f"processes seen {rep['processes_started']}, exited {rep['processes_exited']}, "
               f"peak concurrent {rep['max_concurrent_processes']}, deepest sidecar nesting {rep['max_sidecar_depth']}")
    out.append(f"left behind at main exit: {rep['leftover_pids'] or 'none'}"
               + ("" if rep["leftover_checked"] else " (not checked: the main process did not exit normally)"))
    if rep["reparented_pids"]:
        out.append(f"outlived their parent (re-parented): {_pids(rep['reparented_pids'])}")
    if rep["no_exit_pids"]:
        out.append(f"no process_exit (killed, or still running): {_pids(rep['no_exit_pids'])}")
    line = skipped_line(skipped)
    if line:
        out.append("")
        out.append(line)
    return "\n".join(out) + "\n"
