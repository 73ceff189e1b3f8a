"""The report as one self-contained HTML page (`wp-autotrace report --html -o run.html`).

Nothing on the page comes from elsewhere: no script, no font, no stylesheet, no URL; the charts are
inline SVG drawn here (svg.py), so the page works offline and without JavaScript, and attaches to an
issue as one file. The words are the text report's own (words/lines.py's run headers and findings, words/sentences.py's
process words, the whole text report at the bottom, which the caller hands in: present/render.py is
another presenter, never imported here): the page draws, it never re-words. Its input is the report dict
alone (runs[].memory_at_once holds the memory series, already bounded and thinned to the chart's width:
derive/mempeak.py run_series). Logged strings (command lines, already
masked as the log was read: common/redact.py via check.py) are escaped twice: control characters as
the text report shows them, then HTML.

Per run (ranks in order), a timeline: one lane per process, pools grouped (a pool row with its span
split into busy / idle / shutting down, then its sidecar and workers), leftovers striped past the main
process's end; under it each pool's real memory (PSS at once, memseries.py) as a stepped line with the
idle span shaded. Every mark has a <title>: pid, role, command line, times, figures. The page stays
small: calls are not drawn (a pool's jobs are its busy span), memory lines are thinned per pixel
(peaks kept), and at most MAX_LANES processes per run get a lane.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...common.vocab import COMPILE_WORKER
from ...common.vocab import MEMORY_STALE_S as STALE_S
from ..words.fmt import MIB, idle_mib_s_text, mib_s_text, pool_name, sidecar_name, size_text
from ..words.lines import finding_lines, no_finding_line, run_lines, unseen_ends
from ..words.sentences import covered_text, floor_text, process_words
from .svg import DASHES, LINE_GREYS, OTHER_FILL, ROLE_FILL, Scale, defs, esc, legend, num, rect, text, title

WIDTH = 1200  # the charts' drawing width (they scale down to the page)
LABEL_W = 330  # the lane labels' column
RIGHT_PAD = 40
LANE_H = 16
BAR_H = 11
AXIS_H = 22
MEM_H = 170  # the memory chart's plot height
MAX_LANES = 2500  # per run; the rest are counted, not drawn (--json lists them)
MAX_RINGS = 60  # per pool: the points that read fewer processes than were alive, ringed (evenly spread)
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1240px;padding:0 1em;color:#111}
h1{font-size:1.4em}h2{font-size:1.2em;border-bottom:1px solid #999;margin-top:1.6em}
.answer{font-size:1.05em;background:#f4f4f4;border-left:4px solid #333;padding:.6em .9em;user-select:text}
li{margin:.3em 0}ul.answer{list-style:none}.advice{color:#333}.advice b{font-weight:600}
svg{max-width:100%;height:auto;display:block;margin:.4em 0}
svg text{font:11px sans-serif;fill:#111}svg text.tick{fill:#444;font-size:10px}
svg text.lanelabel{font:11px monospace}svg .grid{stroke:#ddd;stroke-width:1}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:12px}.meta{font:12px monospace;color:#333}
.group{fill:#eef1ee;stroke:#556;stroke-width:.8}.mainend{stroke:#000;stroke-width:1.2;stroke-dasharray:5 3}
.memline{fill:none;stroke-width:2}.note{color:#444;font-size:12px}
"""


class Point(NamedTuple):
    """A memory series' point as the report holds it: seconds from t0, PSS bytes, processes read / alive; a peak
    also what makes it a floor beyond its moment (memseries.Point: processes never read, pools read in different
    passes and that moment)."""

    t: float
    pss: int
    read: int
    alive: int
    never: int = 0
    split: int = 0
    split_at: float | None = None


def render_html(rep: dict[str, Any], text_report: str) -> str:
    """The page of the report dict: Answer, findings, a section per run (ranks in order), then text_report
    (the text report of the same dict, as the caller rendered it)."""
    command = rep["runs"][0]["command"] if rep["runs"] else ""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width,initial-scale=1">',
           f"<title>wp-autotrace report: {esc(command[:120])}</title><style>{CSS}</style></head><body>",
           defs(), "<h1>wp-autotrace report</h1>",
           '<section id="answer"><h2>Answer</h2>', _answer_list(rep["answer"], esc) + "</section>",
           '<section id="findings"><h2>Findings</h2>', _findings(rep), "</section>",
           "<h2>How to read the charts</h2>", legend(),
           '<p class="note">Hover a mark for its pid, role, command line, times and figures. Memory: PSS '
           "of each pool's processes summed at one moment (samples at most 1.5 x the pace the watcher kept old, "
           f"{STALE_S:g} s at least; a point with fewer processes read than alive is ringed; no sample that fresh: "
           "a gap).</p>"]
    for run in _runs_in_rank_order(rep):
        out.append(_run_section(rep, run))
    # Line by line: esc writes a newline as \x0a (in a logged string it is one), and the report's own line
    # breaks are the <pre>'s.
    out += ["<h2>The text report</h2><details><summary>wp-autotrace report (text)</summary><pre>",
            "\n".join(map(esc, text_report.split("\n"))), "</pre></details></body></html>"]
    return "\n".join(out) + "\n"


def _findings(rep: dict[str, Any]) -> str:
    """Each finding in the text report's words (words/lines.py), its advice in bold 'what to do'; no
    finding: the text report's line for that (which reads the runs' exit codes)."""
    items = []
    for f in rep["findings"] or [None]:
        lines = finding_lines(f) if f else [no_finding_line(rep["runs"], rep.get("t0"), unseen_ends(rep))]
        head, rest = lines[0].removeprefix("- "), [x.strip() for x in lines[1:]]
        body = "".join(f'<br><span class="advice"><b>{esc(x.partition(":")[0])}:</b>{esc(x.partition(":")[2])}'
                       "</span>" for x in rest)
        sev = f' class="{esc(f["severity"])}" data-kind="{esc(f["kind"])}"' if f else ""
        items.append(f"<li{sev}>{esc(head)}{body}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _rank_key(label: str | None) -> tuple[int, int, str]:
    """'rank 3' / 'rank h1:3' in rank order (the rank's number first: a job's ranks across its hosts in
    order), then host; no rank last."""
    if not label:
        return (1, 0, "")
    host, _, value = label.removeprefix("rank ").rpartition(":")
    return (0, int(value), host) if value.isdigit() else (0, -1, host + value)


def _runs_in_rank_order(rep: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs, the one holding the lowest rank first (a job's hosts in rank order), then by start."""
    first: dict[str, tuple[int, int, str]] = {}
    for p in rep["processes"]:
        key = _rank_key(p.get("rank_label"))
        if p["run"] not in first or key < first[p["run"]]:
            first[p["run"]] = key
    return sorted(rep["runs"], key=lambda r: (first.get(r["id"], (1, 0, "")), r["start"] or 0.0))


def _rows(procs: list[dict[str, Any]], run: str) -> list[list[dict[str, Any]]]:
    """The run's processes in tree order, a row each (parents above children; a sidecar's workers right
    under it, so a pool's lanes stay together; siblings by rank, then start), except a parent's compiler
    toolchain (g++, cc1plus, ld and theirs): one row for all of them, as the text report folds them
    (each still its own lane, with its own title, on that row). procs: the report's whole list, whose
    `parent_index` links parents (a pid reused inside a run names two processes: rows are keyed by id())."""
    kids: dict[Any, list[dict[str, Any]]] = {}
    mine = [p for p in procs if p["run"] == run]
    for p in mine:
        at = p["parent_index"]
        parent = procs[at] if at is not None else None
        top = parent is None or parent is p or parent["run"] != run
        kids.setdefault(None if top else id(parent), []).append(p)

    def order(p: dict[str, Any]) -> tuple[Any, ...]:
        return (p["role"] != COMPILE_WORKER, _rank_key(p.get("rank_label")), p["start_s"] or 0.0, p["pid"])

    out: list[list[dict[str, Any]]] = []
    seen: set[int] = set()
    stack = sorted(kids.get(None, []), key=order, reverse=True)
    # then anyone no root reaches: a parent cycle (a reused pid: the main's parent's pid taken later by one
    # of its own descendants) has no root, and would leave its whole tree without a lane
    rest = sorted(mine, key=order, reverse=True)
    while stack or rest:  # iterative: nesting can be thousands deep
        p = stack.pop() if stack else rest.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        out.append([p])
        children = sorted(kids.get(id(p), []), key=order)
        tools, todo = [], [k for k in children if k["tool"]]
        while todo:  # the toolchain and every toolchain process below it
            t = todo.pop()
            if id(t) not in seen:
                seen.add(id(t))
                tools.append(t)
                todo.extend(k for k in kids.get(id(t), []) if k["tool"])
        if tools:
            out.append(sorted(tools, key=order))
        stack.extend(reversed([k for k in children if not k["tool"]]))
    return out


def _run_section(rep: dict[str, Any], run: dict[str, Any]) -> str:
    """One run: its header (the text report's words), the timeline, the memory chart."""
    t0 = rep["t0"]
    procs = [p for p in rep["processes"] if p["run"] == run["id"]]
    pools = [pool for pool in rep["pools"] if pool["run"] == run["id"]]
    ends = [x for p in procs for x in (p["start_s"], p["end_s"]) if x is not None]
    lo = min([0.0 if run["start"] is None else run["start"] - t0, *ends])
    hi = max([lo + 1.0, *ends, *((run["end"] - t0,) if run["end"] is not None else ())])
    scale = Scale(lo, hi, LABEL_W, WIDTH - RIGHT_PAD)
    lanes = _rows(rep["processes"], run["id"])
    head = _run_header(run)
    parts = [f'<section class="run" id="run-{esc(run["id"])}" data-run="{esc(run["id"])}">',
             f"<h2>Run {esc(run['id'] or '?')}</h2>", f'<div class="meta">{head}</div>',
             _timeline(run, lanes[:MAX_LANES], pools, scale, rep["processes"])]
    if len(lanes) > MAX_LANES:
        more = sum(map(len, lanes[MAX_LANES:]))
        parts.append(f'<p class="note">… {more} more processes not drawn (--json lists them).</p>')
    parts += [_memory(_memory_lines(rep, run), scale, bool(pools), run.get("memory_stale_s") or STALE_S),
              "</section>"]
    return "\n".join(parts)


def _run_header(run: dict[str, Any]) -> str:
    """The text report's Run header lines for this one run (render.run_lines)."""
    return "<br>".join(esc(x) for x in run_lines(run))


def _pool_rows(lanes: list[list[dict[str, Any]]], pools: list[dict[str, Any]], procs: list[dict[str, Any]]
               ) -> dict[int, Any]:
    """row index of each pool's sidecar -> (pool, index of its last worker row). A process is found as the model
    tells it, never by its pid alone (a pid reused within the run names another process, with a lane of its
    own): the sidecar by (host, pid, start) as the pool names it, its workers among the sidecar's own children
    (procs: the report's whole list, whose `parent_index` links them)."""
    where = {id(row[0]): i for i, row in enumerate(lanes) if len(row) == 1}
    sidecars = {(row[0]["host"], row[0]["pid"], row[0]["start_s"]): row[0] for row in lanes if len(row) == 1}
    under: dict[int, list[dict[str, Any]]] = {}  # id(parent) -> its children with a lane of their own
    for row in lanes:
        at = row[0]["parent_index"] if len(row) == 1 else None
        if at is not None:
            under.setdefault(id(procs[at]), []).append(row[0])
    rows: dict[int, Any] = {}
    for pool in pools:
        side = sidecars.get((pool["host"], pool["sidecar_pid"], pool["sidecar_start"]))
        if side is None:
            continue
        workers = set(pool["worker_pids"])
        i = where[id(side)]
        rows[i] = (pool, max([i, *(where[id(w)] for w in under.get(id(side), ()) if w["pid"] in workers)]))
    return rows


def _timeline(run: dict[str, Any], lanes: list[list[dict[str, Any]]], pools: list[dict[str, Any]], scale: Scale,
              procs: list[dict[str, Any]]) -> str:
    """Lanes (a pool row above each pool's sidecar and workers), the main's end, the time axis. procs: the
    report's whole list of processes."""
    rows = _pool_rows(lanes, pools, procs)
    ys, y = [], 4.0
    for i in range(len(lanes)):
        y += LANE_H if i in rows else 0.0  # the pool row above its sidecar
        ys.append(y)
        y += LANE_H
    height = y + AXIS_H
    marks: list[str] = []
    for i, (pool, last) in rows.items():
        top = ys[i] - LANE_H
        marks.append(rect(2, top - 1, WIDTH - RIGHT_PAD + 6, ys[last] + LANE_H - top + 2, "#eef1ee", cls="group",
                          extra=f' data-sidecar="{_sidecar_attr(pool)}"'))
        marks.append(_pool_row(pool, top, scale))
    end = scale.hi
    for row, y in zip(lanes, ys):
        if len(row) > 1:
            marks.append(text(8, y + BAR_H, _toolchain_words(row), "lanelabel"))
        marks.extend(_lane(p, y, scale, run.get("root_end_s"), end, len(row) == 1) for p in row)
    main_end = run.get("root_end_s")
    if isinstance(main_end, (int, float)):
        x = num(scale.x(main_end))
        marks.append(f'<line x1="{x}" y1="0" x2="{x}" y2="{num(y)}" class="mainend">'
                     f'{title([f"main process ended at {main_end:.2f} s"])}</line>')
        marks.append(text(scale.x(main_end) + 3, y + 9, "main ended", "tick"))
    return (f'<svg class="timeline" viewBox="0 0 {WIDTH} {num(height + 10)}" width="{WIDTH}" '
            f'height="{num(height + 10)}" role="img" aria-label="process timeline">'
            + scale.axis(height, y) + "".join(marks) + "</svg>")


def _unseen_at(pool: dict[str, Any]) -> float | None:
    """When a pool no record shows alive at the end of the log was last seen (its ending's, derive/alive.py);
    None for any other pool."""
    ending = pool.get("ending") or {}
    seen = ending.get("last_seen") if ending.get("kind") == "end-unseen" else None
    return seen if isinstance(seen, (int, float)) else None


def _pool_row(pool: dict[str, Any], y: float, scale: Scale) -> str:
    """The pool's span, split: busy (made to its last job), idle (to the shutdown request or the sidecar's
    end), shutting down (from the request to the sidecar's end); a pool whose sidecar never served: that
    span (made to the stop) instead of busy and idle."""
    made, busy, idle_to = pool["created_at"], pool["busy_until"], pool["idle_to"]
    seen = _unseen_at(pool)  # not shown alive at the end of the log: drawn to where it was last seen
    gone = pool["sidecar_end"] if pool["sidecar_end"] is not None else seen if seen is not None else scale.hi
    who = f"pool of {sidecar_name(pool['sidecar_pid'])} (made by {pool['creator_role']} {pool['creator_pid']})"
    jobs = str(pool["jobs"]) if pool["jobs"] is not None else "?"
    phases = _busy_phases(pool, made, busy, jobs)
    if pool.get("never_served"):  # its sidecar never reached its serving loop: jobs waited, nothing ran
        phases = [("unserved", made, idle_to, f"never served {made:.2f} -> {idle_to:.2f} s: its sidecar never "
                                              f"reached its serving loop; jobs {jobs}")]
    elif pool["idle_s"] > 0:
        part = covered_text(pool)  # the held figure's own moment: "N of M processes read" where it read fewer
        held = (f", holding {'at least ' if part else ''}{size_text(pool['held_pss_bytes'])} (PSS{part})"
                if pool["held_pss_bytes"] else "")
        cost = (f"; {idle_mib_s_text(pool['idle_mib_s'], pool.get('idle_unread_s') or 0.0, pool['idle_s'])} idle"
                if pool["idle_mib_s"] else "")
        phases.append(("idle", busy, idle_to, f"idle {pool['idle_s']:.1f} s ({busy:.2f} -> {idle_to:.2f} s){held}"
                                               f"{cost}"))
    orphan = pool.get("outlived_creator")
    if orphan:  # after its creator ended: no idle pool but an orphan, told by what it held then (the Answer's)
        phases.append(("orphaned", orphan["creator_end"], orphan["end"], _orphan_words(orphan)))
    if pool["shutdown_at"] is not None:
        phases.append(("stopping", max(idle_to, pool["shutdown_at"]), gone,
                       f"shutting down: asked at {pool['shutdown_at']:.2f} s by {pool['shutdown_by']}, sidecar "
                       + (f"gone at {gone:.2f} s" if pool["sidecar_end"] is not None else
                          f"last seen at {gone:.2f} s, its end not seen" if seen is not None else "still running")))
    out = [f'<g class="poolrow" data-sidecar="{_sidecar_attr(pool)}">',
           # its processes as the text report names them: no '+ 0 workers' where none was seen (no watcher, none yet)
           text(8, y + BAR_H, f"pool: {pool_name(pool)}", "lanelabel")]
    for kind, a, b, words in phases:
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b >= a:
            out.append(rect(scale.x(a), y + 2, scale.x(b) - scale.x(a), BAR_H, f"url(#{kind})",
                            title([who, words]), f"phase {kind}", ' stroke="#000" stroke-width="0.4"'))
    return "".join(out) + "</g>"


def _orphan_words(orphan: dict[str, Any]) -> str:
    """A pool's span after its creator ended, with what it held then (pools[].outlived_creator: the figure the
    Answer and the Findings tell)."""
    n, m, held = orphan.get("read"), orphan.get("processes"), orphan.get("held_pss_bytes")
    part = f", {n} of {m} processes read" if isinstance(n, int) and isinstance(m, int) and n < m else ""
    return (f"outlived its creator {orphan['s']:.1f} s ({orphan['creator_end']:.2f} -> {orphan['end']:.2f} s)"
            + (f", holding {'at least ' if part else ''}{size_text(held)} (PSS{part})" if held else "")
            + (f"; {mib_s_text(orphan['mib_s'])}" if orphan.get("mib_s") else ""))


def _busy_phases(pool: dict[str, Any], made: float, busy: float, jobs: str) -> list[tuple[str, Any, Any, str]]:
    """From its making to busy_until: busy, cut by each idle gap between its uses (pools[].idle_gaps, from its
    workers' job records), each gap drawn as idle with the report's seconds and MiB·s."""
    out: list[tuple[str, Any, Any, str]] = []
    t = made
    for g in pool.get("idle_gaps") or ():
        a, b = g["from_s"], g["to_s"]
        out.append(("busy", t, a, f"busy {t:.2f} -> {a:.2f} s"))
        cost = f"; {idle_mib_s_text(g['mib_s'], g.get('unread_s') or 0.0, g['s'])} idle" if g["mib_s"] else ""
        out.append(("idle", a, b, f"idle {g['s']:.1f} s between its {'ready' if g['first'] else 'jobs'} "
                                  f"({a:.2f} -> {b:.2f} s){cost}"))
        t = b
    out.append(("busy", t, busy, f"busy {t:.2f} -> {busy:.2f} s; jobs {jobs}"))
    return out


def _toolchain_words(row: list[dict[str, Any]]) -> str:
    """A folded toolchain row's label: how many of each program (the text report's toolchain line)."""
    names: dict[str, int] = {}
    for t in row:
        names[t["tool"]] = names.get(t["tool"], 0) + 1
    counts = ", ".join(f"{n} {name}" for name, n in sorted(names.items(), key=lambda x: (-x[1], x[0])))
    return f"toolchain: {len(row)} process(es) ({counts})"[:52]


def _lane(p: dict[str, Any], y: float, scale: Scale, main_end: Any, hi: float, labelled: bool = True) -> str:
    """One process: its life as a bar, the part after the main's end striped when it was left behind."""
    start = p["start_s"] if p["start_s"] is not None else scale.lo
    end = p["end_s"] if p["end_s"] is not None else hi
    rank = f" {p['rank_label']}" if p.get("rank_label") else ""
    mem = f"{p['held_kind']} {size_text(p['held_bytes'])}" if p["held_bytes"] else "memory not sampled"
    parent = "not known" if p["ppid"] is None else p["ppid"]  # a process no record of its own names (a watcher's)
    tip = title([f"{p['role']} {p['pid']}{rank} on {p['host']} (parent {parent})",
                 f"command: {p['cmd'][:400] or p['name'] or '?'}",
                 f"start {start:.2f} s, end " + (f"{p['end_s']:.2f} s ({p['exit'] or 'ended'})"
                                                  if p["end_s"] is not None else "not seen (running)"),
                 f"memory: {mem}" + (f", peak PSS {size_text(p['peak_pss'])}" if p["peak_pss"] else ""),
                 "left running after the main process ended" if p["left_behind"] else ""])
    label = f"{p['pid']} {process_words(p)}"  # the text report's words for it (its tree's)
    out = [f'<g class="lane" data-pid="{p["pid"]}" data-host="{esc(p["host"])}" data-role="{esc(p["role"])}">',
           text(8, y + BAR_H, label[:52], "lanelabel") if labelled else "",
           rect(scale.x(start), y + 2, scale.x(end) - scale.x(start), BAR_H, ROLE_FILL.get(p["role"], OTHER_FILL),
                tip, "life", ' stroke="#000" stroke-width="0.3"')]
    if p["left_behind"] and isinstance(main_end, (int, float)) and end > main_end:
        a = max(start, main_end)
        out.append(rect(scale.x(a), y + 2, scale.x(end) - scale.x(a), BAR_H, "url(#left)", tip, "leftover"))
        out.append(text(min(scale.x(end) + 3, WIDTH - RIGHT_PAD + 2), y + BAR_H, "left", "tick"))
    return "".join(out) + "</g>"


def _memory_lines(rep: dict[str, Any], run: dict[str, Any]) -> list[tuple[dict[str, Any], list[Point], Point]]:
    """The lines the memory chart draws, the run's memory_at_once series (the report bounds them: a pool's
    own, or past four pools the largest three each and one of the others summed at once), each with the pool
    dict it stands for; the summed one with a dict of its own, named for what it is."""
    out = []
    for series in run.get("memory_at_once") or ():
        points = [Point(*pt) for pt in series["points"]]
        # the report's peak (mempeak.peak: a point one moment read); a report without it: the largest point
        told = series.get("peak")  # [t, PSS, read, alive]; older reports: [t, PSS]
        best = Point(*told, *(0, 0)[len(told) - 2:]) if told else max(points, key=lambda pt: pt.pss)
        pools = [rep["pools"][i] for i in series["pools"]]
        if len(pools) == 1:
            out.append((pools[0], points, best))
            continue
        ends = [pool["sidecar_end"] for pool in pools]
        others = {"label": f"the other {len(pools)} pools, summed at once (sidecars "
                           f"{', '.join(str(pool['sidecar_pid']) for pool in pools[:6])}"
                           f"{', ...' if len(pools) > 6 else ''})",
                  "sidecar_pid": "", "sidecar_end": None if None in ends else max(ends), "idle_s": 0,
                  "busy_until": None, "idle_to": None, "idle_mib_s": None, "peak_pss_bytes": None}
        out.append((others, points, best))
    return out


def _memory(drawn: list[tuple[dict[str, Any], list[Point], Point]], scale: Scale, any_pool: bool,
            stale_s: float) -> str:
    """Each pool's PSS at once as a stepped line, its idle span shaded; one key row per pool under it. stale_s:
    how long a reading of the run counts (the report's memory_stale_s)."""
    if not any_pool:
        return ""
    if not drawn:
        return ('<p class="note">No memory line: the watcher read no pool process\'s PSS in this run '
                "(it samples compile sidecars and workers, about every 2 s).</p>")
    top = max(pt.pss for _, points, _ in drawn for pt in points) * 1.1 or 1.0

    def y(pss: float) -> float:
        return 6 + MEM_H * (1 - pss / top)

    marks = [_mib_axis(top, y)]
    for k, (pool, points, _) in enumerate(drawn):
        marks.append(_pool_memory(k, pool, points, scale, y, stale_s))
    key_y = MEM_H + 6 + AXIS_H + 8
    for k, (pool, _, peak) in enumerate(drawn):
        ky = key_y + k * 16
        marks.append(f'<line x1="{LABEL_W}" y1="{num(ky)}" x2="{LABEL_W + 36}" y2="{num(ky)}" class="memline" '
                     f'stroke="{LINE_GREYS[k % len(LINE_GREYS)]}" stroke-dasharray="{DASHES[k % len(DASHES)]}"/>')
        told, part = floor_text(peak.pss, peak.read, peak.alive, "read", never=peak.never,
                                split={"pools": peak.split, "at": peak.split_at} if peak.split else None)
        marks.append(text(LABEL_W + 44, ky + 4,
                          f"{_line_name(pool)}: peak {told} at once (PSS{part}), at {peak.t:.1f} s"))
    height = key_y + len(drawn) * 16
    return (f'<svg class="memory" viewBox="0 0 {WIDTH} {num(height)}" width="{WIDTH}" height="{num(height)}" '
            f'role="img" aria-label="pool memory">' + scale.axis(MEM_H + 6 + AXIS_H - 6, MEM_H + 6)
            + text(8, 16, "real memory (PSS) of each pool, at once", "lanelabel") + "".join(marks) + "</svg>")


def _peak_words(pool: dict[str, Any]) -> str:
    """'report: peak at least 137 MiB (PSS, 2 processes never read)': the pool's peak as the text tells it."""
    told, part = floor_text(pool["peak_pss_bytes"], pool.get("peak_read"), pool.get("peak_processes"),
                            never=pool.get("peak_never_read"))
    return f"report: peak {told} (PSS{part})"


def _line_name(pool: dict[str, Any]) -> str:
    return str(pool.get("label") or f"pool of {_pool_words(pool)}")


def _pool_words(pool: dict[str, Any]) -> str:
    """'sidecar PID'; a pool with none seen (a fork/spawn pool's workers are its creator's): its processes."""
    return pool_name(pool) if pool["sidecar_pid"] is None else f"sidecar {pool['sidecar_pid']}"


def _sidecar_attr(pool: dict[str, Any]) -> str:
    """A pool's sidecar pid as its group's data-sidecar; empty for a pool with none (a fork/spawn pool)."""
    return "" if pool["sidecar_pid"] is None else str(pool["sidecar_pid"])


def _mib_axis(top: float, y: Any) -> str:
    """Four horizontal MiB gridlines with their labels."""
    out = []
    for i in range(1, 5):
        v = top / 1.1 * i / 4
        out.append(f'<line x1="{LABEL_W}" y1="{num(y(v))}" x2="{WIDTH - RIGHT_PAD}" y2="{num(y(v))}" class="grid"/>')
        out.append(text(LABEL_W - 6, y(v) + 4, f"{v / MIB:.0f} MiB", "tick", "end"))
    return "".join(out)


def _steps(rel: list[tuple[float, Point]], end: float, stale_s: float) -> list[tuple[float, float, Point]]:
    """(from, to, point): each point holds until the next, or stale_s at most (the run's window: then nothing
    is known, a gap in the line, never a figure carried on), the last one until the pool's end."""
    out = []
    for i, (t, pt) in enumerate(rel):
        nxt = rel[i + 1][0] if i + 1 < len(rel) else max(end, t)
        out.append((t, min(nxt, t + stale_s), pt))
    return out


def _pool_memory(k: int, pool: dict[str, Any], points: list[Point], scale: Scale, y: Any, stale_s: float) -> str:
    """One pool's line (and its idle shading, its unread points ringed, its peak marked)."""
    rel = [(pt.t, pt) for pt in points]
    end = pool["sidecar_end"] if pool["sidecar_end"] is not None else rel[-1][0]
    steps = _steps(rel, end, stale_s)
    d, last = "", None
    for a, b, pt in steps:
        d += (f"V{num(y(pt.pss))}" if last == a else f"M{num(scale.x(a))} {num(y(pt.pss))}") + f"H{num(scale.x(b))}"
        last = b
    gaps = sum(1 for (_, b, _), (a, _, _) in zip(steps, steps[1:]) if a > b)
    partial = [(t, pt) for t, pt in rel if pt.read < pt.alive]
    who = pool.get("label") or f"pool of {_pool_words(pool)} (made by {pool['creator_role']} {pool['creator_pid']})"
    out = [f'<g class="pool-memory" data-sidecar="{_sidecar_attr(pool)}">']
    a, b = pool["busy_until"], pool["idle_to"]
    if pool["idle_s"] > 0 and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        cost = (f": {idle_mib_s_text(pool['idle_mib_s'], pool.get('idle_unread_s') or 0.0, pool['idle_s'])} held "
                "idle" if pool["idle_mib_s"] else "")
        out.append(_idle_shade(steps, scale, y, a, b, [who, f"idle {pool['idle_s']:.1f} s ({a:.2f} -> {b:.2f} s)"
                                                            f"{cost}"]))
    for g in pool.get("idle_gaps") or ():  # idle between its uses: the same shade, the report's figures
        cost = f": {idle_mib_s_text(g['mib_s'], g.get('unread_s') or 0.0, g['s'])} held idle" if g["mib_s"] else ""
        out.append(_idle_shade(steps, scale, y, g["from_s"], g["to_s"],
                               [who, f"idle {g['s']:.1f} s between its uses ({g['from_s']:.2f} -> {g['to_s']:.2f} s)"
                                     f"{cost}"]))
    out.append(f'<path class="memline" d="{d}" stroke="{LINE_GREYS[k % len(LINE_GREYS)]}" '
               f'stroke-dasharray="{DASHES[k % len(DASHES)]}">'
               + title([who, f"PSS of its processes summed at one moment: {len(points)} points drawn",
                        f"{gaps} gap(s): no sample for more than {stale_s:g} s" if gaps else "",
                        f"{len(partial)} point(s) read fewer processes than were alive (ringed)" if partial else "",
                        _peak_words(pool) if pool["peak_pss_bytes"] else "",
                        _orphan_words(orphan) if (orphan := pool.get("outlived_creator")) else ""])
               + "</path>")
    for t, pt in partial[::max(1, -(-len(partial) // MAX_RINGS))]:  # evenly spread: the page stays small
        out.append(f'<circle cx="{num(scale.x(t))}" cy="{num(y(pt.pss))}" r="3" fill="#fff" stroke="#000">'
                   + title([who, f"{t:.2f} s: {size_text(pt.pss)}, {pt.read} of {pt.alive} processes read"])
                   + "</circle>")
    t, peak = max(rel, key=lambda x: x[1].pss)
    out.append(f'<circle cx="{num(scale.x(t))}" cy="{num(y(peak.pss))}" r="3.5" fill="#000">'
               + title([who, f"peak {size_text(peak.pss)} at once at {t:.2f} s ({peak.read} of {peak.alive} "
                             "processes read)"]) + "</circle>")
    return "".join(out) + "</g>"


def _idle_shade(steps: list[tuple[float, float, Point]], scale: Scale, y: Any, a: float, b: float,
                words: list[str]) -> str:
    """The area under the line over an idle stretch (the span after its last job, or a gap between its uses;
    where the line is known): the memory held for nothing. words: its title, the report's figures (the MiB·s
    is the integral of the same memory at once this line draws: memseries.Memory)."""
    d = ""
    for s, e, pt in steps:
        lo, hi = max(s, a), min(e, b)
        if hi > lo:
            d += f"M{num(scale.x(lo))} {num(y(0))}V{num(y(pt.pss))}H{num(scale.x(hi))}V{num(y(0))}Z"
    return f'<path class="idle-shade" d="{d}" fill="url(#idle)" stroke="none">' + title(words) + "</path>"


def _answer_list(answer: str, esc: Any) -> str:
    """The Answer's bullets (one per line, '- ' first: analysis/words/answer.py) as a list."""
    items = "".join(f"<li>{esc(line)}</li>" for line in answer.splitlines() if line.strip())
    return f'<ul class="answer">{items}</ul>'
