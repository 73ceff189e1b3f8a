"""The report for people, from report.analyze's dict: plain sections, answers first.

Every line is passed through ``escape``: a logged string (a command line, a
path, an exception message) can hold control characters, and a terminal
must never interpret them. The JSON output is the dict itself, exact.
"""

from __future__ import annotations

from typing import Any

from ...common.vocab import POOL_ROLES
from ..derive.labels import SHORT_HELPERS
from ..words.fmt import (
    MIB,
    UNKNOWN_IDLE,
    costs_idle_text,
    escape,
    pid_text,
    pool_name,
    seconds_text,
    site,
    size_text,
    skipped_line,
    wrap,
)
from ..words.lines import NO_FINDING, findings_lines, run_lines, unseen_ends, when_text
from ..words.sentences import counts_words, floor_text, lifespan, made_at, pool_idle_text, process_words
from ..words.state import exit_code_words

MAX_ROWS = 20  # rows per table in the text report; --json has them all
MAX_TREE_LINES = 400
MAX_INDENT = 8
# The default text is short (about 60 lines at 30 nested sidecars): tables show this many rows, then
# "… N more"; --verbose shows every row, every tree line and every finding's pids and evidence.
SHORT_ROWS = {"callers": 5, "pools": 3, "ranks": 8, "tree": 12}


def _mb(n: Any) -> str:
    return f"{n / MIB:.0f} MiB" if n else "-"


def _t(x: Any) -> str:
    return f"{x:7.2f}s" if isinstance(x, (int, float)) else "      ?"


def _clip(rows: list[Any], limit: int | None = MAX_ROWS) -> list[Any]:
    """At most limit rows (None: all): the first ones, then None where rows were left out."""
    if limit is None or len(rows) <= limit:
        return rows
    return [*rows[:limit], None]


def _more(rows: list[Any], limit: int | None, indent: str = "  ") -> str:
    shown = len(rows) if limit is None else min(limit, len(rows))
    return f"{indent}… {len(rows) - shown} more (--verbose, or --json)"


def _run_section(rep: dict[str, Any]) -> list[str]:
    out = ["== Run"]
    runs = rep["runs"]
    ids = ", ".join(r["id"] or "?" for r in runs)
    holds = "these logs hold" if len(rep["input"].get("files") or ()) > 1 else "this log holds"
    if rep["all_runs"] > len(runs):
        out.append(f"{holds} {rep['all_runs']} runs; showing run {ids}")
    elif len(runs) > 1 and len(rep.get("jobs") or ()) == 1:
        out.append(f"{len(runs)} runs ({ids}), one job (== Job above); each has its header below; "
                   "`--run ID` shows one")
    elif len(runs) > 1:
        out.append(f"{holds} {len(runs)} runs ({ids}); each has its header below; `--run ID` shows one")
    for r in runs:
        if len(runs) > 1:
            out.append(f"-- run {r['id'] or '?'}")
        out += run_lines(r)
    return out


def _job_section(rep: dict[str, Any], verbose: bool) -> list[str]:
    """Each job of several runs (several hosts or launches): header, then per node and per rank."""
    out: list[str] = []
    jobs = rep.get("jobs") or ()
    ids = [job["id"] for job in jobs]
    for job in jobs:
        if len(job["runs"]) < 2:
            continue  # one run: its Run header says it all
        # Two launches that reuse an id are two jobs: their start and runs tell them apart.
        which = (f", launched {when_text(job['start'])}, runs {', '.join(r or '?' for r in job['runs'])}"
                 if ids.count(job["id"]) > 1 else "")
        out.append(f"== Job: {job['id']}{which} ({len(job['runs'])} runs, {job['nodes']} node(s))")
        out.extend(_job_header(job))
        limit = None if verbose else SHORT_ROWS["ranks"]
        for node in _clip(job["per_node"], limit):
            if node is None:
                out.append(_more(job["per_node"], limit))
                continue
            out.append(f"- node {node['host']} (run {', '.join(node['runs'])}): "
                       + "; ".join(x for x in (", ".join(node["launchers"]), _node_figures(node)) if x))
            ranks = [e for e in job["per_rank"] if e["host"] == node["host"]]
            for e in _clip(ranks, limit):
                out.append(_more(ranks, limit, "    ") if e is None else
                           f"  - {e['name']}: {e['role']} {e['pid']} ({e['label']}); {_node_figures(e)}")
        out.append("")
    return out


def _job_header(job: dict[str, Any]) -> list[str]:
    ends = ", ".join(f"{n['host']} {'/'.join(map(str, n['exit_codes']))}" for n in job["per_node"] if n["exit_codes"])
    state = {"killed": "a main process ended without process_exit", "in progress": "in progress",
             "end not seen": "end not seen (no process_exit)"}.get(job["state"], "ended")
    out = [f"hosts:     {', '.join(job['hosts'])}    ranks: {len(job['ranks'])}"
           + (f" ({pid_text_list(job['ranks'])})" if job["ranks"] else ""),
           f"launchers: {', '.join(job['launchers']) or 'none traced'}"
           + (f"    identities: {'; '.join(job['identities'])}" if job["identities"] else "")
           + (f" (steps {', '.join(job['steps'])})" if job["steps"] else ""),
           f"{when_text(job['start'])} -> {when_text(job['end'])}    {state}"
           + (f" (exit codes: {ends})" if ends else "")]
    return out


def pid_text_list(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(x.removeprefix("rank ") for x in items[:limit])
    return shown + (f", … {len(items) - limit} more" if len(items) > limit else "")


def _node_figures(e: dict[str, Any]) -> str:
    """Pools, idle pool memory, leftovers and errors of a node or rank, in words."""
    # Real memory (PSS where read) after the main process ended, never a sum of RSS (shared pages again).
    idle_b, left_b = e.get("idle_pool_real_bytes"), e.get("leftover_real_bytes")
    idle = f", idle pool memory {size_text(idle_b)}" if idle_b else ""
    left = ("left: not known" if e["leftovers"] is None else  # no verdict on a run of it (Run.left_known)
            (f"{e['leftovers']} left" + (f" ({size_text(left_b)})" if left_b else "")) if e["leftovers"]
            else "nothing left")
    return f"{e['pools']} pool(s){idle}; {left}; {e['errors']} error(s)"


def answer_lines(rep: dict[str, Any], width: int | None = None) -> list[str]:
    """The Answer's bullets, wrapped to width."""
    # a symptom's bullet ("  - ", under its cause's) continues deeper than a bullet
    return [line for bullet in rep["answer"].splitlines()
            for line in wrap(bullet, width, "    " if bullet.startswith("  - ") else "  ")]


def summary_lines(rep: dict[str, Any], width: int | None = None) -> list[str]:
    """The short answer (`wp-autotrace run` prints it after the program): the Answer, then the findings
    (the Answer's problems told again only when it has no bullet for them)."""
    ended = exit_code_words(rep)
    if not rep["findings"] and ended and ended in rep["answer"] and not rep.get("no_exit_pids"):
        # how it ended is the Answer's: not said twice
        return [*answer_lines(rep, width), f"{NO_FINDING}."]
    return [*answer_lines(rep, width), *findings_lines(rep, width=width)]


def _findings_section(rep: dict[str, Any], verbose: bool, width: int | None = None) -> list[str]:
    return ["", "== Findings", *findings_lines(rep, verbose, width)]


def _who(e: dict[str, Any]) -> str:
    rank = f" {e['rank_label']}" if e.get("rank_label") else ""
    return f"{e['role']}{rank}"


def _callers_section(rep: dict[str, Any], verbose: bool) -> list[str]:
    pids = rep["warm_pool_pids"]
    out = ["", f"== warm_pool callers: {rep['distinct_warm_pool_pids']} distinct PID(s) [{pid_text(pids, 12)}]"]
    rows = rep["warm_pool_callers"]
    if not rows:
        out.append("warm_pool was not called in any traced process.")
        return out
    limit = None if verbose else SHORT_ROWS["callers"]
    out.append(f"{'pid':>8} {'role':<24} {'ppid':>8} {'depth':>5} {'calls':>5} {'first':>8}  called from")
    for e in _clip(rows, limit):
        if e is None:
            out.append(_more(rows, limit, " " * 8))
            continue
        out.append(f"{e['pid']:>8} {_who(e):<24} {e['ppid'] or '?':>8} {e['depth']:>5} {e['calls']:>5} "
                   f"{_t(e['first_ts'])}  {site(e['caller'])}")
    return out


def _workers(pids: list[int]) -> str:
    return f"{len(pids)} ({pid_text(pids)})" if pids else "none"


# The idle gaps a pool's line lists (the JSON has them all; the Answer tells the largest).
GAPS_LISTED = 3


def _lifecycle(pool: dict[str, Any]) -> str:
    """ready, jobs, idle span, quiesces and who asked for the shutdown, real memory: one line."""
    jobs = ("jobs ?" if pool["jobs"] is None and pool["last_job"] is None else
            f"jobs {pool['jobs'] if pool['jobs'] is not None else '?'}"
            + (f" ({seconds_text(pool['first_job'])} -> {seconds_text(pool['last_job'])})"
               if pool["last_job"] is not None else ""))
    span = f"({seconds_text(pool['busy_until'])} -> {seconds_text(pool['idle_to'])})"
    parts = [f"ready {seconds_text(pool['ready_at'])}" if pool["ready_at"] is not None else "ready ?", jobs,
             f"never served {span}: its sidecar never reached its serving loop" if pool.get("never_served")
             else f"not idle after its last job: busy until {seconds_text(pool['busy_until'])}, past its stop at "
                  f"{seconds_text(pool['idle_to'])}" if pool.get("busy_past_stop")
             else f"not idle: stopped at {seconds_text(pool['idle_to'])}, before {seconds_text(pool['busy_until'])}"
                  " (its serving or ready came after)" if pool.get("stopped_first")
             else f"idle {UNKNOWN_IDLE}" if pool.get("idle_known") is False
             else f"idle {pool['idle_s']:.1f} s {span}"]
    gaps = pool.get("idle_gaps") or []
    if gaps:  # idle between its uses (its workers' job records): each gap, then every idle second in all
        parts.append("idle gaps " + ", ".join(f"{g['s']:.1f} s ({seconds_text(g['from_s'])} -> "
                                               f"{seconds_text(g['to_s'])})" for g in gaps[:GAPS_LISTED])
                     + (f" (+{len(gaps) - GAPS_LISTED} more)" if len(gaps) > GAPS_LISTED else "")
                     + f"; idle in all {pool['idle_total_s']:.1f} s")
    starts = [w["start"] for w in pool["workers"] if w["start"] is not None]
    ends = [w["end"] for w in pool["workers"] if w["end"] is not None]
    if starts:
        gone = seconds_text(max(ends)) if len(ends) == len(pool["workers"]) else "?"
        parts.append(f"workers {seconds_text(min(starts))} -> {gone}")
    parts += [f"quiesced {seconds_text(q['at'])} by {q['by']}" for q in pool["quiesced"][:3]]
    if pool["shutdown_by"]:
        who = pool["shutdown_by"] + (f" at {site(pool['shutdown_caller'])}" if pool["shutdown_caller"] else "")
        extra = f"; {pool['shutdown_calls'] - 1} later no-op call(s)" if pool["shutdown_calls"] > 1 else ""
        parts.append(f"shutdown asked {seconds_text(pool['shutdown_at'])} by {who}{extra}")
    if pool["peak_pss_bytes"]:
        idle_mib_s = pool.get("idle_total_mib_s") if gaps else pool["idle_mib_s"]
        told, part = floor_text(pool["peak_pss_bytes"], pool.get("peak_read"), pool.get("peak_processes"),
                                never=pool.get("peak_never_read"))
        parts.append(f"real memory peak {told} (PSS{part})"
                     + (f", {pool_idle_text(pool, idle_mib_s, gaps)} idle" if idle_mib_s else ""))
    if pool["device_files"]:
        parts.append(f"device files {', '.join(pool['device_files'][:4])}")
    return "; ".join(parts)


def _pools_section(rep: dict[str, Any], verbose: bool) -> list[str]:
    pools = rep["pools"]
    out = ["", f"== Pools ({len(pools)})"]
    limit = None if verbose else SHORT_ROWS["pools"]
    for pool in _clip(pools, limit):
        if pool is None:
            out.append(_more(pools, limit))
            continue
        start, end = lifespan(pool)
        how = pool["sidecar_exit"] if pool.get("kind") != "executor" else (pool.get("ending") or {}).get("kind")
        how = how or "how it ended: not known"  # no sidecar seen, no record of the pool's end (never 'None')
        out.append(f"- {pool_name(pool)} created by {pool['creator_role']} {pool['creator_pid']} "
                   f"at {_t(pool['created_at']).strip()} from {made_at(pool)}")
        seen = (pool.get("ending") or {}).get("last_seen")  # an end-unseen pool: to where it was last seen
        till = _t(end).strip() if end is not None else f"last seen {_t(seen).strip()}" if seen is not None else "end"
        out.append(f"  alive {_t(start).strip()} -> {till} ({how}); "
                   f"workers {_workers(pool['worker_pids'])}; wakeups {pool['wakeups']}, "
                   f"quiesces {pool['quiesces']}, shutdowns {pool['shutdowns']}")
        if pool.get("test"):
            outlived = pool.get("tests_outlived") or []
            names = f": {', '.join(outlived)}" if verbose and outlived else ""
            used = pool.get("tests_used") or []
            by = f"; used by {len(used)} later test(s): {', '.join(used[:None if verbose else 3])}" if used else ""
            more = f" (+{len(used) - 3} more)" if used and not verbose and len(used) > 3 else ""
            out.append(f"  made by test {pool['test']}{by}{more}; outlived {len(outlived)} later test(s){names}")
        if pool["ready_at"] is not None or pool["last_job"] is not None or pool["shutdown_by"] \
                or pool["peak_pss_bytes"] or pool["device_files"]:  # a pool that never served has no story
            out.append("  " + _lifecycle(pool))
        if pool.get("counts"):  # as ps counts it, at the moment of its memory figure
            out.append("  " + counts_words(pool).strip())
    if rep["blocked"]:
        out.append(f"guard refused {len(rep['blocked'])} call(s):")
        for b in rep["blocked"][:None if verbose else 10]:
            out.append(f"  - {b['target']} in {b['role']} {b['pid']} from {site(b['caller'])}")
    return out


def _launched_by(rep: dict[str, Any], limit: int = 4) -> str:
    """The ranks' launchers: one per node of a multi-host job, named with its host."""
    launchers = [p for p in rep["processes"] if p["launcher"]]
    if not launchers:
        return ""
    hosts = len({p["host"] for p in launchers}) > 1
    names = [f"{p['label']} {p['pid']}" + (f" on {p['host']}" if hosts else "") for p in launchers[:limit]]
    more = f" (+{len(launchers) - limit} more)" if len(launchers) > limit else ""
    return ", launched by " + ", ".join(names) + more


def _ranks_section(rep: dict[str, Any], verbose: bool) -> list[str]:
    ranks = rep["ranks"]
    if not ranks:
        return []
    out = ["", f"== Ranks ({len(ranks)})" + _launched_by(rep)]
    limit = None if verbose else SHORT_ROWS["ranks"]
    for e in _clip(ranks, limit):
        if e is None:
            out.append(_more(ranks, limit))
            continue
        left = ", left: not known" if e["leftovers"] is None else f", {e['leftovers']} left" if e["leftovers"] else ""
        started = e.get("started") or []
        again = f", started {len(started)} times ({', '.join(map(str, started))})" if len(started) > 1 else ""
        out.append(f"- {e['name']}: {e['role']} {e['pid']} ({e['label']}){again}; {e['processes']} process(es), "
                   f"{e['pools']} pool(s), {e['sidecars']} sidecar(s) {e['max_depth']} deep{left}"
                   + (f", {e['errors']} error(s)" if e["errors"] else ""))
    return out


def _tree_line(p: dict[str, Any], indent: int, mixed: bool = False) -> str:
    left = p["left_behind"]
    end = _t(p["end_s"]) if p["end_s"] is not None else (" LEFT  " if left else "   -   ")
    flags = [x for x in ("forked" if p["forked"] else "", "left behind" if left else "",
                         f"re-parented to {p['reparented_to']}" if p["reparented_to"] else "") if x]
    mem = f"{p['held_kind']} {_mb(p['held_bytes'])}"  # the process's one figure (view.held_bytes)
    if mixed and p["held_kind"] == "rss" and p["role"] in POOL_ROLES:  # the watcher reads PSS there: a missed read
        mem += " (PSS not read: RSS counts shared pages)"  # beside other pool processes' PSS
    return (f"{_t(p['start_s'])} {end} {_pad(indent)}{p['pid']} {process_words(p)} {mem}"
            + (f"  [{', '.join(flags)}]" if flags else ""))


def _pad(indent: int) -> str:
    return "  " * indent if indent <= MAX_INDENT else "  " * MAX_INDENT + f"({indent}) "


def _tools_line(tools: list[dict[str, Any]], indent: int) -> str:
    """A parent's compiler toolchain processes (and theirs) in one line: count per program, peak RSS."""
    names: dict[str, int] = {}
    for t in tools:
        names[t["tool"]] = names.get(t["tool"], 0) + 1
    peak = max((t["peak_rss"] or 0 for t in tools), default=0)
    start = min((t["start_s"] for t in tools if t["start_s"] is not None), default=None)
    counts = ", ".join(f"{n} {name}" for name, n in sorted(names.items(), key=lambda x: (-x[1], x[0])))
    return f"{_t(start)}    ...   {_pad(indent)}toolchain: {len(tools)} process(es) ({counts}); peak rss {_mb(peak)}"


def _helpers_line(kind: str, helpers: tuple[dict[str, Any], ...], indent: int) -> str:
    """A parent's short-lived helpers of one kind (ISA probes) in one line: count, longest life, peak RSS."""
    lives = [p["end_s"] - p["start_s"] for p in helpers if p["start_s"] is not None and p["end_s"] is not None]
    start = min((p["start_s"] for p in helpers if p["start_s"] is not None), default=None)
    peak = max((p["peak_rss"] or 0 for p in helpers), default=0)
    longest = f", each at most {max(lives):.1f} s" if len(lives) == len(helpers) else ""
    return (f"{_t(start)}    ...   {_pad(indent)}{kind}: {len(helpers)} process(es){longest}; "
            f"peak rss {_mb(peak)}")


# An untraced child that still ran its parent's command line and ended within this long: a fork the watcher read
# only before its exec (on a loaded box a g++ run or an ISA probe is listed between its fork and its exec, and
# gone before the next listing), told with the parent's short-lived helpers, never as a process of its own.
FORK_SEEN_S = 1.0


def _helper_kind(p: dict[str, Any], parent: dict[str, Any], kids: dict[Any, list[dict[str, Any]]]) -> str | None:
    """The line a short-lived helper the default tree folds goes in: its label where it is one of SHORT_HELPERS,
    or a fork of its parent seen only before its exec (FORK_SEEN_S); None where it is no such helper, did not end,
    something marks it (left behind, re-parented) or it has children of its own."""
    if p["end_s"] is None or p["left_behind"] or p["reparented_to"] or kids.get(id(p)):
        return None
    if p["label"] in SHORT_HELPERS:
        return str(p["label"])
    if (not p["traced"] and p["label"] == parent["label"] and p["start_s"] is not None
            and p["end_s"] - p["start_s"] <= FORK_SEEN_S):
        return f"forks of {parent['label']} seen only before their exec"
    return None


def _tree_parents(procs: list[dict[str, Any]]) -> dict[int, dict[str, Any] | None]:
    """Each row's parent row (by id() of the entries: a pid reused inside a run names two processes, so
    (run, host, pid) is no key): the report's own parent link (`parent_index`), None for a top row, as is a
    parent of another run (each run's tree stands on its own)."""
    out: dict[int, dict[str, Any] | None] = {}
    for p in procs:
        at = p["parent_index"]
        parent = procs[at] if at is not None else None
        out[id(p)] = parent if parent is not None and parent is not p and parent["run"] == p["run"] else None
    return out


def _pool_lines(procs: list[dict[str, Any]], parents: dict[int, dict[str, Any] | None]) -> set[int]:
    """The processes (id()) that are pool processes or have one below them: listed before their siblings."""
    found: set[int] = set()
    for p in procs:
        q: dict[str, Any] | None = p
        while p["role"] in POOL_ROLES and q is not None and id(q) not in found:  # up to the top (or a cycle)
            found.add(id(q))
            q = parents[id(q)]
    return found


def _tree_kids(procs: list[dict[str, Any]], parents: dict[int, dict[str, Any] | None]
               ) -> dict[int | None, list[dict[str, Any]]]:
    """Each row's children by the parent's id(), in the report's order; the top rows under None."""
    kids: dict[int | None, list[dict[str, Any]]] = {}
    for p in procs:
        parent = parents[id(p)]
        kids.setdefault(None if parent is None else id(parent), []).append(p)
    return kids


def _toolchain_under(kids: dict[int | None, list[dict[str, Any]]], roots: list[dict[str, Any]]
                     ) -> list[dict[str, Any]]:
    """roots and every toolchain process below them (a g++ driver's cc1plus, as, collect2, ld)."""
    found, stack = [], list(roots)
    while stack:
        t = stack.pop()
        found.append(t)
        stack.extend(k for k in kids.get(id(t), []) if k["tool"])
    return found


def _tree_section(rep: dict[str, Any], verbose: bool) -> list[str]:
    """Processes indented under their parents (iteratively: chains can be thousands deep); compiler
    toolchain children folded into one line per parent unless verbose."""
    out = ["", "== Process tree (start/end seconds from the first record)"]
    procs = rep["processes"]
    parents = _tree_parents(procs)
    kids = _tree_kids(procs, parents)
    # Some pool processes have PSS and others only RSS (the watcher missed a read): the RSS rows say so, as
    # RSS is never summed with PSS (docs/evidence.md, "Memory at once").
    mixed = any(p["held_kind"] == "pss" for p in procs)
    limit = MAX_TREE_LINES if verbose else SHORT_ROWS["tree"]
    pooled = _pool_lines(procs, parents)
    shown: set[int] = set()  # id() of the rows told
    stack: list[tuple[Any, int]] = [(p, 0) for p in reversed(kids.get(None, []))]
    lines = 0
    # then anyone no root reaches: a parent cycle (a reused pid: the main's parent's pid taken later by one
    # of its own descendants) has no root, and its whole tree was left out as "more process(es)"
    unreached = list(reversed(procs))
    while (stack or unreached) and lines < limit:
        if not stack:
            stack.append((unreached.pop(), 0))
        p, indent = stack.pop()
        if isinstance(p, tuple):  # folded short-lived helpers of one kind
            out.append(_helpers_line(p[0], p[1], indent))
            shown.update(id(t) for t in p[1])
            lines += 1
            continue
        if isinstance(p, list):  # a folded toolchain group
            out.append(_tools_line(p, indent))
            shown.update(id(t) for t in p)
            lines += 1
            continue
        if id(p) in shown:
            continue
        shown.add(id(p))
        out.append(_tree_line(p, indent, mixed))
        lines += 1
        children = kids.get(id(p), [])
        # unless --verbose: the pools' processes first, then the others, then one line for the short-lived
        # helpers and one for the compiler toolchain (the stack pops the last pushed first)
        tools = [k for k in children if k["tool"]] if not verbose else []
        helpers: dict[str, list[dict[str, Any]]] = {}
        for k in children:
            if not verbose and not (tools and k["tool"]) and (kind := _helper_kind(k, p, kids)) is not None:
                helpers.setdefault(kind, []).append(k)
        folded = {id(k) for group in helpers.values() for k in group}
        rest = sorted((k for k in children if not (tools and k["tool"]) and id(k) not in folded),
                      key=lambda k: id(k) not in pooled)
        if tools:
            stack.append((_toolchain_under(kids, tools), indent + 1))
        stack.extend(((kind, tuple(group)), indent + 1) for kind, group in reversed(helpers.items()))
        stack.extend((k, indent + 1) for k in reversed(rest))
    if len(procs) > len(shown):  # --verbose stops at MAX_TREE_LINES: only --json has the rest then
        out.append(f"… {len(procs) - len(shown)} more process(es) ({'--json' if verbose else '--verbose, or --json'})")
    return out


def _timeline_section(rep: dict[str, Any]) -> list[str]:
    peak = rep["max_concurrent_processes"]
    out = ["", "== Timeline",
           f"processes seen {rep['processes_started']}, exited {rep['processes_exited']}, "
           f"peak concurrent {'unknown (no watcher sample)' if peak is None else peak}, "
           f"deepest sidecar nesting {rep['max_sidecar_depth']}"]
    left, count = rep["leftover_pids"], rep["leftover_count"]  # count None: a run's is not known (Run.left_known)
    listed = (f"{count}: {pid_text(left, 12)}" if count else "none" if count is not None else
              f"not known (listed: {pid_text(left, 12)})" if left else "not known")
    if rep["leftover_unlisted"]:
        listed += f" ({rep['leftover_unlisted']} not listed: the log's list was cut)"
    states = {r["state"] for r in rep["runs"]}
    pending = [r for r in rep["runs"] if r.get("verdict_pending")]
    lost = [r for r in rep["runs"] if r.get("no_verdict")]
    if lost and not pending and not rep["leftover_checked"]:
        whence = {"sample": "from the last sample after the main process ended",
                  "below": "from the main process's own list of its descendants at exit"}
        lost_from = sorted({whence[r["verdict_from"]] for r in lost if r.get("verdict_from") in whence})
        out.append(f"left behind at main exit: {listed} (no verdict will come: "
                   f"{lost[0]['no_verdict']}" + (f"; {' and '.join(lost_from)}" if lost_from else "") + ")")
    elif pending:
        source = {"sample": "the last sample after the main process ended",
                  "below": "the main process's own list of its descendants at exit"}
        froms = {r["verdict_from"] for r in pending}
        if None in froms:
            out.append("left behind at main exit: not known yet (verdict pending: nothing seen after the main "
                       "process ended)")
        else:
            out.append(f"left behind at main exit: {listed} (verdict pending: from "
                       f"{' and '.join(sorted(source[f] for f in froms))})")
    elif "killed" in states:
        out.append(f"left behind after the main process ended without process_exit: {listed}"
                   + ("" if rep["leftover_checked"] else " (not checked: no leftover record)"))
    elif rep["leftover_checked"]:
        out.append(f"left behind at main exit: {listed}")
    elif "in progress" in states:
        out.append("left behind at main exit: not known yet (the run is in progress)")
    else:
        out.append(f"left behind at main exit: {listed} (not checked: no leftover record)")
    costs = rep["costs"]
    real = costs.get("leftover_real_bytes")
    # "13.1 s: at least 2.0 GiB·s (read for 8 of 13 s)": the floor's own parentheses never nest in others
    idle = (f"; pools idle {costs['idle_s']:.1f} s" + (f": {costs_idle_text(costs)}"
                                                       if costs["idle_mib_s"] else "")) if costs["idle_s"] >= 1 else ""
    out.append(f"cost: {costs['processes']} process(es), {costs['sidecars']} sidecar(s)"
               + (f", pools' peak real memory {'at least ' if costs.get('pool_peak_at_least') else ''}"
                  f"{size_text(costs['pool_peak_pss_bytes'])} (PSS)"
                  if costs["pool_peak_pss_bytes"] else "")
               + f"{idle}; left {'at least ' if real and costs.get('leftover_at_least') else ''}"
               f"{size_text(real) if real else 'nothing' if rep['leftover_checked'] else '?'}"
               + ("; main's wait at exit not known (no exit of it in the log)" if costs["exit_wait_s"] is None
                  else f"; main waited {costs['exit_wait_s']:.1f} s at exit"))
    if rep.get("possible"):
        out.append("possibly the run's (they share only its process group or session; cleanup never ends "
                   f"them): {pid_text([e['pid'] for e in rep['possible']], 12)}")
    if rep["reparented_pids"]:
        out.append(f"outlived their parent (re-parented): {pid_text(rep['reparented_pids'], 12)}")
    if rep["running_pids"]:
        out.append(f"still running at the last record: {pid_text(rep['running_pids'], 12)}")
    # a wait status the watcher read (a zombie's, a pidfd's) names the signal even where no record names its sender
    ends = unseen_ends(rep)
    for name, pids in sorted((s, p) for s, p in ends.items() if s):
        out.append(f"ended by {name} (its wait status; no record names the sender): {pid_text(sorted(pids), 12)}")
    if ends.get(None):
        out.append(f"ended unseen (no process_exit, nothing explains it): {pid_text(ends[None], 12)}")
    return out


def render_text(rep: dict[str, Any], skipped: dict[str, int], verbose: bool = False,
                width: int | None = None) -> str:
    """The report for people; every line escaped. Short by default; verbose shows every row. The Answer
    and the Findings are wrapped to width (the terminal's; WIDTH when not a terminal; None: unwrapped)."""
    out = ["== Answer", *answer_lines(rep, width), "", *_job_section(rep, verbose), *_run_section(rep)]
    out.extend(_findings_section(rep, verbose, width))
    for section in (_ranks_section, _callers_section, _pools_section, _tree_section):
        out.extend(section(rep, verbose))
    out.extend(_timeline_section(rep))
    line = skipped_line(skipped)
    fixed = rep["input"].get("fixed") or {}
    if line or fixed or rep["input"].get("notes"):
        out.append("")
    if line:
        out.append(line)
    if fixed:
        out.append("dropped " + ", ".join(f"{n} {why}" for why, n in sorted(fixed.items())))
    for problem in rep["input"].get("problems") or ():
        out.append(f"could not read {problem}")
    for note in rep["input"].get("notes") or ():
        out.append(f"note: {note}")
    return "\n".join(escape(x) for x in out) + "\n"
