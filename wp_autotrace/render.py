"""The report for people, from report.analyze's dict: plain sections, answers first.

Every line is passed through ``escape``: a logged string (a command line, a
path, an exception message) can hold control characters, and a terminal
must never interpret them. The JSON output is the dict itself, exact.
"""

from __future__ import annotations

import datetime
from typing import Any

from .findings import pid_text, site, size_text
from .logread import skipped_line
from .targets import GUARDED_ROLES

MAX_ROWS = 20  # rows per table in the text report; --json has them all
MAX_TREE_LINES = 400
MAX_INDENT = 8

# C0 controls, DEL and C1 controls (ESC included) shown as \xNN: never sent to a terminal.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def escape(text: str) -> str:
    """text with every control character (C0, DEL, C1) written as \\xNN."""
    return text.translate(_CONTROL)


def _mb(n: Any) -> str:
    return f"{n / 2**20:.0f} MB" if n else "-"


def _t(x: Any) -> str:
    return f"{x:7.2f}s" if isinstance(x, (int, float)) else "      ?"


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "?"
    try:
        return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ts:.0f}"


def _clip(rows: list[Any]) -> list[Any]:
    """At most MAX_ROWS rows: the first ones and the last three, with None where rows were left out."""
    if len(rows) <= MAX_ROWS:
        return rows
    return [*rows[: MAX_ROWS - 3], None, *rows[-3:]]


def _run_section(rep: dict[str, Any]) -> list[str]:
    out = ["== Run"]
    runs, run = rep["runs"], rep["run"]
    ids = ", ".join(r["id"] or "?" for r in runs)
    if rep["all_runs"] > len(runs):
        out.append(f"this log holds {rep['all_runs']} runs; showing run {ids}")
    elif len(runs) > 1:
        out.append(f"this log holds {len(runs)} runs ({ids}); each has its header below; `--run ID` shows one")
    for r in runs:
        if len(runs) > 1:
            out.append(f"-- run {r['id'] or '?'}")
        out.append(f"command:   {r['command'] or '?'}")
        out.append(f"root pid:  {r['root_pid'] or '?'}    host(s): {', '.join(r['hosts'])}    "
                   f"{_when(r['start'])} -> {_when(r['end'])}")
    out.append(f"python {run['python'] or '?'}    torch {run['torch'] or '?'}    "
               f"guard: {'nested-pools' if run['guard'] else 'off'}    duration {run['duration_s']:.1f}s")
    if run["inductor"]:
        out.append("inductor:  " + ", ".join(f"{k}={v}" for k, v in run["inductor"].items()))
    return out


def _answer(rep: dict[str, Any]) -> str:
    """One paragraph: who started pools where, what it cost, what to do first."""
    callers = rep["warm_pool_callers"]
    if callers:
        nested = [e for e in callers if e["role"] in GUARDED_ROLES]
        sites = sorted({site(e["caller"]) for e in callers})
        text = (f"{len(callers)} process(es) called warm_pool, from {', '.join(sites[:2])}"
                + (f" (+{len(sites) - 2} more sites)" if len(sites) > 2 else "")
                + (f"; {len(nested)} of them inside compile sidecars/workers, nesting pools "
                   f"{rep['max_sidecar_depth']} deep" if nested else "") + ".")
    else:
        text = f"No traced process called warm_pool; {len(rep['pools'])} compile pool(s) were made."
    costs = {k: v for f in rep["findings"] for k, v in f["cost"].items()}
    if rep["leftover_count"]:
        mb = f" (about {size_text(rep['leftover_rss_bytes'])})" if rep["leftover_rss_bytes"] else ""
        text += f" {rep['leftover_count']} process(es) were left running after the main process{mb}."
    if costs.get("exit_wait_s"):
        text += f" The main process waited {costs['exit_wait_s']:.1f} s at exit."
    advice = next((f["advice"] for f in rep["findings"] if f["advice"]), "")
    return text + (f" First: {advice}." if advice else "")


def _findings_section(rep: dict[str, Any]) -> list[str]:
    out = ["", "== Findings"]
    if not rep["findings"]:
        out.append("- Nothing unusual.")
    for f in rep["findings"]:
        out.append(f"- {f['text']}")
        if f["advice"]:
            out.append(f"  what to do: {f['advice']}")
    return out


def _callers_section(rep: dict[str, Any]) -> list[str]:
    pids = rep["warm_pool_pids"]
    out = ["", f"== warm_pool callers: {rep['distinct_warm_pool_pids']} distinct PID(s) [{pid_text(pids, 12)}]"]
    rows = rep["warm_pool_callers"]
    if not rows:
        out.append("warm_pool was not called in any traced process.")
        return out
    out.append(f"{'pid':>8} {'role':<16} {'ppid':>8} {'depth':>5} {'calls':>5} {'first':>8}  called from")
    for e in _clip(rows):
        if e is None:
            out.append(f"{'...':>8} ({len(rows) - MAX_ROWS} more, see --json)")
            continue
        out.append(f"{e['pid']:>8} {e['role']:<16} {e['ppid'] or '?':>8} {e['depth']:>5} {e['calls']:>5} "
                   f"{_t(e['first_ts'])}  {site(e['caller'])}")
    return out


def _workers(pids: list[int]) -> str:
    return f"{len(pids)} ({pid_text(pids)})" if pids else "none"


def _pools_section(rep: dict[str, Any]) -> list[str]:
    pools = rep["pools"]
    out = ["", f"== Pools ({len(pools)})"]
    for pool in _clip(pools):
        if pool is None:
            out.append(f"  ... ({len(pools) - MAX_ROWS} more, see --json)")
            continue
        end = _t(pool["sidecar_end"]).strip() if pool["sidecar_end"] is not None else "end"
        out.append(f"- sidecar {pool['sidecar_pid']} created by {pool['creator_role']} {pool['creator_pid']} "
                   f"at {_t(pool['created_at']).strip()} from {site(pool['caller'])}")
        out.append(f"  alive {_t(pool['sidecar_start']).strip()} -> {end} ({pool['sidecar_exit']}); "
                   f"workers {_workers(pool['worker_pids'])}; wakeups {pool['wakeups']}, "
                   f"quiesces {pool['quiesces']}, shutdowns {pool['shutdowns']}")
    if rep["blocked"]:
        out.append(f"guard refused {len(rep['blocked'])} call(s):")
        for b in rep["blocked"][:10]:
            out.append(f"  - {b['target']} in {b['role']} {b['pid']} from {site(b['caller'])}")
    return out


def _tree_line(p: dict[str, Any], indent: int) -> str:
    left = p["left_behind"]
    end = _t(p["end_s"]) if p["end_s"] is not None else (" LEFT  " if left else "   -   ")
    flags = [x for x in ("forked" if p["forked"] else "", "left behind" if left else "",
                         f"re-parented to {p['reparented_to']}" if p["reparented_to"] else "",
                         "untraced" if not p["traced"] and p["role"] != "child" else "") if x]
    pad = "  " * indent if indent <= MAX_INDENT else "  " * MAX_INDENT + f"({indent}) "
    what = p["role"] if p["traced"] or p["role"] != "child" else f"{p['name'] or '?'} (untraced child)"
    rank = (p["rank"] or {}).get("RANK")
    if rank is not None:
        what += f" rank {rank}"
    return (f"{_t(p['start_s'])} {end} {pad}{p['pid']} {what} rss {_mb(p['peak_rss'])}"
            + (f"  [{', '.join(flags)}]" if flags else ""))


def _tree_section(rep: dict[str, Any]) -> list[str]:
    """Processes indented under their parents (iteratively: chains can be thousands deep).

    TODO(lead, after merging i12-runtime): label processes with wp_autotrace.labels (script, -m module,
    -c first line, toolchain names) and fold compiler toolchain children into one line per parent.
    """
    out = ["", "== Process tree (start/end seconds from the first record)"]
    procs = rep["processes"]
    keys = {(p["run"], p["host"], p["pid"]) for p in procs}
    kids: dict[Any, list[dict[str, Any]]] = {}
    for p in procs:
        parent = (p["run"], p["host"], p["ppid"])
        top = parent not in keys or p["ppid"] == p["pid"]
        kids.setdefault(None if top else parent, []).append(p)
    shown: set[Any] = set()
    stack = [(p, 0) for p in reversed(kids.get(None, []))]
    while stack and len(shown) < MAX_TREE_LINES:
        p, indent = stack.pop()
        key = (p["run"], p["host"], p["pid"])
        if key in shown:
            continue
        shown.add(key)
        out.append(_tree_line(p, indent))
        stack.extend((k, indent + 1) for k in reversed(kids.get(key, [])))
    if len(procs) > len(shown):
        out.append(f"... ({len(procs) - len(shown)} more, see --json)")
    return out


def _timeline_section(rep: dict[str, Any]) -> list[str]:
    out = ["", "== Timeline",
           f"processes seen {rep['processes_started']}, exited {rep['processes_exited']}, "
           f"peak concurrent {rep['max_concurrent_processes']}, deepest sidecar nesting {rep['max_sidecar_depth']}"]
    left = rep["leftover_pids"]
    listed = f"{rep['leftover_count']}: {pid_text(left, 12)}" if rep["leftover_count"] else "none"
    if rep["leftover_count"] > len(left):
        listed += f" ({rep['leftover_count'] - len(left)} not listed: the log's list was cut)"
    checked = rep["leftover_checked"]
    out.append(f"left behind at main exit: {listed}"
               + ("" if checked else " (not checked: no leftover record — the run is in progress, or its "
                                     "main process was killed)"))
    if rep["reparented_pids"]:
        out.append(f"outlived their parent (re-parented): {pid_text(rep['reparented_pids'], 12)}")
    if rep["no_exit_pids"]:
        out.append(f"no process_exit (killed, or still running): {pid_text(rep['no_exit_pids'], 12)}")
    return out


def render_text(rep: dict[str, Any], skipped: dict[str, int]) -> str:
    """The report for people; every line escaped."""
    out = ["== Answer", _answer(rep), "", *_run_section(rep)]
    for section in (_findings_section, _callers_section, _pools_section, _tree_section, _timeline_section):
        out.extend(section(rep))
    line = skipped_line(skipped)
    fixed = rep["input"].get("fixed") or {}
    if line or fixed:
        out.append("")
    if line:
        out.append(line)
    if fixed:
        out.append("dropped " + ", ".join(f"{n} {why}" for why, n in sorted(fixed.items())))
    for problem in rep["input"].get("problems") or ():
        out.append(f"could not read {problem}")
    return "\n".join(escape(x) for x in out) + "\n"
