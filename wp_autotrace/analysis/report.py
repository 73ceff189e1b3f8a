"""Turn a run's log into answers: who called warm_pool, which pools, what was left.

``analyze`` folds the records into the run model (fold.py, model.py), derives a View
of the selected runs, runs the findings registry (findings/__init__.py) and returns
one JSON-ready dict with stable keys (docs/report.md lists them). Rendering for
people lives in render.py; the CLI composes the two.
"""

from __future__ import annotations

from typing import Any

from ..common import targets, vocab
from .derive import facts
from .derive.attempts import launchers
from .derive.autotune import Kill, kills
from .derive.ending import OOM_AMONG, OOM_KILL, UNSEEN
from .derive.held import unended
from .derive.jobs import Job, group, identity_text, slurm_steps
from .derive.labels import process_label, rank_value, tool_name
from .derive.lostjobs import pool_jobs
from .derive.mempeak import run_series
from .derive.poolprocs import fx_subprocess, start_method
from .derive.view import BENIGN_LEFTOVER_ROLES, View, held_kind, left_count, left_unknown
from .findings import find_all
from .findings.mainend import UNREAD_END, changed_words, ended_unread, root_ending
from .findings.rank import ranked, report_key
from .fold.model import AUTOTUNE, Model, Pool, Process, Run, Waited, ended_by, exec_name
from .fold.pidns import doubled
from .fold.verdict import (
    RUN_END_UNSEEN,
    RUN_ENDED,
    RUN_IN_PROGRESS,
    RUN_KILLED,
    Reader,
    fold_and_judge,
    held_not_absent,
    here_and_now,
)
from .read.logread import LogData, LogStream, NoUsableLog
from .words import causes
from .words.answer import RUNS_ANSWERED, answer_bullets, runs_answer


def _warm_callers(v: View) -> list[dict[str, Any]]:
    callers: dict[int, dict[str, Any]] = {}
    for c in v.warm_calls:
        p = c.proc
        entry = callers.get(p.index)
        if entry is None:
            entry = callers[p.index] = {
                "pid": p.pid, "host": p.host, "run": p.run_id, "role": p.role, "ppid": p.ppid,
                "depth": p.depth, "calls": 0, "first_ts": v.rel(c.ts), "caller": c.caller,
                "torch_warm_pool": c.env.get("TORCH_WARM_POOL"),
            }
        entry["calls"] += 1
    return sorted(callers.values(), key=lambda e: (e["first_ts"], e["pid"]))


def _pool_dict(v: View, pool: Pool) -> dict[str, Any]:
    side = pool.sidecar
    workers = set(side.worker_pids) if side else {q.pid for q in pool.members}
    if side is not None:
        workers.update(q.pid for q in side.children if q.role == vocab.COMPILE_WORKER)
    exit_how = (side.exit_how or "ended") if side and side.end is not None else None if side is None else (
        "end not seen" if v.endings.of(side).kind == UNSEEN else "still running")  # derive/alive.py
    return {
        # what kind of pool, and its processes as `ps` lists them: the sidecar (none for fork/spawn) + workers
        "kind": pool.kind, "start_method": start_method(pool) or None, "fx_subprocess": fx_subprocess(pool),
        "processes": (side is not None) + len(workers),
        **v.story(pool).as_dict(v.rel),
        "ending": v.endings.of_pool(pool).as_dict(v.rel), **_jobs_of(v, pool),
        "unended_jobs": unended(pool, v.t_end, v.rel),
        "run": pool.creator.run_id, "creator_pid": pool.creator.pid, "creator_role": pool.creator.role,
        "host": pool.creator.host, "created_at": v.rel(pool.call.ts), "caller": pool.call.caller,
        "sidecar_pid": pool.sidecar_pid, "sidecar_start": v.rel(side.start) if side else None,
        "sidecar_end": v.rel(side.ended_at) if side else None, "sidecar_exit": exit_how,
        "sidecar_served": bool(side and side.served), "worker_pids": sorted(workers),
        "wakeups": pool.wakeups, "quiesces": pool.quiesces, "shutdowns": pool.shutdowns,
        "test": None, "tests_outlived": [], "tests_used": [], **facts.pool_tests(v, pool),
        "made_in": facts.made_in(v, pool), "called_from": facts.called_from(v, pool),
        "kills": [_kill_dict(v, k) for k in kills(pool)] if pool.kind == AUTOTUNE else [],
    }


def _kill_dict(v: View, k: Kill) -> dict[str, Any]:
    """An autotune pool's kill (derive/autotune.py), times relative to the run's first record."""
    creator = k.call.proc
    return {"pid": k.pid, "at": v.rel(k.call.ts), "waited_s": None if k.waited_s is None else round(k.waited_s, 3),
            "caller": k.caller, "signal": v.endings.of(k.proc).signal if k.proc is not None else None,
            "replacement_pid": k.replacement.pid if k.replacement is not None else None,
            "zombie_from": v.rel(k.zombie_from), "zombie_to": v.rel(k.zombie_to),
            "zombie_under_creator": k.zombie_under_creator,
            "zombie_until_creator_end": k.zombie_to is not None and k.zombie_to == creator.ended_at}


def _jobs_of(v: View, pool: Pool) -> dict[str, Any]:
    jobs = pool_jobs(v.endings, pool)
    return {**jobs, "lost_line": jobs["lost_line"]}


def _zombie(v: View, p: Process) -> dict[str, Any] | None:
    z = p.zombie
    if z is None:
        return None
    return {"ppid": z.get("ppid"), "since": v.rel(z.get("since")), "status": z.get("status"),
            "reaped": v.rel(z.get("reaped"))}


def parent_links(procs: list[Process]) -> dict[int, int | None]:
    """Each process's parent's place in procs (by p.index): the fold's own link, not the ppid (a pid reused inside a
    run names two processes), where that parent had started by the child's start; else (the link names a process
    first seen later, without a create time: one that took the pid after) the process of its ppid on its run and
    host that was alive as it started, the latest started of them; else none."""
    at = {p.index: i for i, p in enumerate(procs)}
    by_pid: dict[tuple[str, str, int | None], list[Process]] = {}
    for p in procs:
        by_pid.setdefault((p.run_id, p.host, p.pid), []).append(p)
    links: dict[int, int | None] = {}
    for p in procs:
        q, t = p.parent, p.start
        if q is not None and t is not None and q.start is not None and q.start > t:
            alive = [c for c in by_pid.get((p.run_id, p.host, p.ppid), ()) if c is not p and c.alive_at(t)]
            q = max(alive, key=lambda c: c.start if c.start is not None else float("-inf")) if alive else None
        links[p.index] = at.get(q.index) if q is not None else None
    return links


def _proc_dict(v: View, p: Process, leftover: set[int], at: dict[int, int | None]) -> dict[str, Any]:
    """One process's entry; `at` gives each process's parent's place in the report's processes list (parent_links)."""
    return {
        "pid": p.pid, "ppid": p.ppid, "parent_index": at[p.index],
        "host": p.host, "run": p.run_id, "role": p.role,
        "traced": p.traced if p.traced or not p.one_of else None,  # its records may be another row's (one_of)
        "host_pids": p.may_be if p.traced and p.one_of else None,
        "forked": p.forked, "execs": p.execs, "create_time": p.create_time,
        "start_s": v.rel(p.start), "end_s": v.rel(p.ended_at), "exit_record_s": v.rel(p.end) if p.exited else None,
        "exit": p.exit_how or None, "ending": v.endings.of(p).as_dict(v.rel), "zombie": _zombie(v, p),
        "peak_rss": p.peak_rss or None, "last_rss": p.last_rss or None, "depth": p.depth,
        "peak_pss": max((m[1] for m in p.mem), default=None), "last_uss": p.mem[-1][2] if p.mem else None,
        "held_bytes": v.held(p) or None, "held_kind": held_kind(p), "held_at_least": p.index in v.left_at_least,
        "device_files": p.devices,
        "reparented_to": p.reparented_to, "left_behind": p.index in leftover, "rank": p.rank or None,
        "cmd": p.cmd, "name": p.name, "errors": len(p.errors),
        "label": process_label(p), "rank_label": v.rank_of.get(p.index), "launcher": p.index in v.launchers,
        "tool": None if p.traced else tool_name(p.name, p.cmd),
    }


def _run_dict(v: View, r: Run) -> dict[str, Any]:
    root = r.root
    alive = [n for ts, n in r.tree_counts if root is not None and root.gone is not None and ts >= root.gone]
    cfg = next((c for c in r.configs if c[0] is root), r.configs[0] if r.configs else None)
    python = root.python if root and root.python else next((p.python for p in r.processes if p.python), "")
    ending = root_ending(v, r)  # a record names the signal: no end is unread then
    return {"id": r.id, "command": r.command, "root_pid": r.root_pid, "hosts": r.hosts,
            "python": python, "torch": cfg[2] if cfg else "", "inductor": cfg[1] if cfg else {},
            "guard": r.guard, "duration_s": round((r.end or 0.0) - (r.start or 0.0), 3),
            "start": r.start, "end": r.end, "processes": len(r.processes) - doubled(r.processes),
            "leftover_checked": r.leftover_seen, "leftover_how": r.leftover_how or None, "cut": r.cut,
            "state": v.states[r.id], "root_end_s": v.rel(root.end if root and root.end is not None
                                                          else root.gone if root else None),
            "alive_at_last_record": r.tree_counts[-1][1] if r.tree_counts else None,
            "alive_after_root": max(alive) if alive else None, "left_running": left_count(r),
            "verdict_pending": r.verdict_pending, "verdict_from": r.provisional_from or None,
            "no_verdict": r.no_verdict or None, "ended_by": ended_by(r),
            "exit_status": r.waited.status if r.waited is not None else None,
            "exit_code": _exit_code(v, r), "program_s": _program_s(r),
            "records_lost": r.dropped + r.watcher_dropped + r.log_cut,
            "alive_now": r.alive_now, "end_check": r.now_how or None,
            "exec_into": exec_name(root.exec_into) if root is not None and root.exec_into is not None else None,
            "root_ending": ending,
            "root_error": root.exit_error if root is not None else None,
            "command_exit": ({"pid": r.command_exit.get("root_pid"), "status": r.command_exit["status"]}
                             if r.command_exit is not None else None),
            "root_changed": changed_words(v, r) or None,
            "end_unread": UNREAD_END if ending is None and ended_unread(r) else None}


def _memory_at_once(v: View, run: Run) -> list[dict[str, Any]]:
    """The run's pools' memory at once (mempeak.run_series: bounded, thinned): per series the indices of its
    pools in the report's `pools`, its points [seconds from t0, PSS bytes, processes read, processes alive], and
    its peak [seconds from t0, PSS bytes, processes read, processes alive, processes never read, pools read in
    different passes, that moment from t0 or None] (mempeak.peak: a point one moment read, and what makes it a
    floor beyond that moment)."""
    mine = [(i, v.story(pool)) for i, pool in enumerate(v.pools) if pool.creator.run_id == run.id]
    # t unrounded (unlike the report's other times): the page places each point from it, to a tenth of a pixel
    lines = run_series([s.procs for _, s in mine], [s.series for _, s in mine], [s.peak for _, s in mine])
    return [{"pools": [mine[k][0] for k in which], "points": [[pt.ts - v.t0, pt.pss, pt.read, pt.alive]
                                                               for pt in points],
             "peak": [best.ts - v.t0, best.pss, best.read, best.alive, best.never, best.split,
                      v.rel(best.split_at)]}
            for which, points, best in lines]


def _exit_code(v: View, r: Run) -> int | None:
    """The main process's exit code: what `run` waited for (-N: signal N), else _code_of's."""
    if r.waited is not None:
        return r.waited.status
    return _code_of(v, r.root) if r.root is not None else None


def _code_of(v: View, p: Process) -> int | None:
    """A process's exit code: its process_exit's, else the one its ending holds (a wait status: its zombie's, or read
    through its pidfd once reaped: a sys.exit's code, which the exit record, written by atexit, cannot see)."""
    return p.exit_code if p.exit_code is not None else v.endings.of(p).code


def _program_s(r: Run) -> float | None:
    """How long the program (the run's main process) lived: apart from the run, which lasts until its last
    process ended (a leftover stretches it)."""
    root = r.root
    end = root.ended_at if root is not None else None
    if root is None or root.start is None or end is None:
        return None
    return round(end - root.start, 3)


def _possible(v: View) -> list[dict[str, Any]]:
    """Processes that share only a run's process group or session: possibly the run's, never proven."""
    return [{"pid": e["pid"], "host": host, "run": r.id, "via": e.get("via") or None, "name": e.get("name"),
             "cmd": e.get("cmd"), "create_time": e.get("create_time")}
            for r in v.runs for (host, _, _), e in r.possible.items()]


def _ranks(v: View, leftover: set[int]) -> list[dict[str, Any]]:
    """Per rank: its process, launcher-given label, pools, sidecars, nesting, leftovers, errors.

    A rank is keyed by its run and its label: two launches that reuse a job id, or two Slurm steps,
    each have their own "rank n0:0" (the label alone would give the later one the earlier's row)."""
    groups: dict[tuple[str, str], list[Process]] = {}
    agents = launchers(v)  # torchrun under srun carries a rank of its own (SLURM_PROCID): no rank's process
    for p in v.procs:
        label = v.rank_of.get(p.index)
        if label and p.index not in agents:
            groups.setdefault((p.run.id if p.run is not None else "", label), []).append(p)
    labels = [label for _, label in groups]
    rows = []
    for (run, label), procs in groups.items():
        members = {p.index for p in procs}
        # the processes the launcher started as this rank: one per attempt where it restarted the ranks
        heads = [p for p in procs if rank_value(p.rank) and not (p.parent and p.parent.index in members)]
        top = heads[0] if heads else procs[0]
        left = [p for p in procs if p.index in leftover]
        step = top.rank.get("SLURM_STEP_ID") if top.rank else None
        rows.append({
            "rank": label, "run": run, "step": str(step) if step is not None else None,
            "name": _rank_name(label, run, step, labels.count(label) > 1),
            "pid": top.pid, "host": top.host, "role": top.role, "label": process_label(top),
            "started": [p.pid for p in sorted(heads, key=lambda p: (p.start or 0.0, p.index))],
            "processes": len(procs), "sidecars": sum(1 for p in procs if p.role in vocab.SIDECAR_ROLES),
            "pools": sum(1 for pool in v.pools if pool.creator.index in members),
            "max_depth": max(p.depth for p in procs) - top.depth,
            **_left_figures(left, [r for r in v.runs if r.id == run], v),
            "errors": sum(len(p.errors) for p in procs),
        })
    return sorted(rows, key=lambda e: (_rank_sort(e["rank"]), _run_start(v, e["run"])))


def _left_figures(left: list[Process], runs: list[Run], v: View) -> dict[str, int | None]:
    """A node's or rank's leftovers (those listed of `runs`) and their memory: None where not known (left_unknown)."""
    unknown = left_unknown(left, runs)
    return {"leftovers": None if unknown else len(left),
            "leftover_rss_bytes": None if unknown else sum(p.last_rss for p in left),
            "leftover_real_bytes": None if unknown else sum(v.real_left(p) for p in left)}


def _rank_name(label: str, run: str, step: Any, repeated: bool) -> str:
    """The rank's label, with its Slurm step or run when another rank row has the same label."""
    if not repeated:
        return label
    return f"{label} (step {step})" if step is not None else f"{label} (run {run or '?'})"


def _run_start(v: View, run_id: str) -> float:
    r = next((r for r in v.runs if r.id == run_id), None)
    return r.start if r is not None and r.start is not None else 0.0


def _rank_sort(label: str) -> tuple[str, int, str]:
    host, _, value = label.removeprefix("rank ").rpartition(":")
    return (host, int(value), "") if value.isdigit() else (host, -1, value)


def _job_state(states: list[str]) -> str:
    """How a job ended: killed or in progress when any of its runs is, ended when all ended."""
    for state in (RUN_KILLED, RUN_IN_PROGRESS, RUN_END_UNSEEN):
        if state in states:
            return state
    return RUN_ENDED


def _idle_pool_rss(p: Process) -> int:
    """A pool process left running after its run's main process ended (its latest RSS sample, the leftover
    record's when that came last: model.note_rss): nothing can give it work."""
    return p.last_rss if p.role in vocab.POOL_ROLES else 0


def _idle_pool_real(v: View, p: Process) -> int:
    """The real memory (View.real_left) of a pool process left running after its main process ended."""
    return v.real_left(p) if p.role in vocab.POOL_ROLES else 0


def _node_row(v: View, job: Job, host: str, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """One node (host) of a job: its runs, launchers, ranks, pools, idle pool memory, leftovers, errors."""
    runs = [r for r in job.runs if host in r.hosts]
    procs = [p for r in runs for p in r.processes if r.host_of(p) == host]
    mine = [p for r in runs for p in r.leftover if r.host_of(p) == host and p.role not in BENIGN_LEFTOVER_ROLES]
    roots = [r.root for r in runs if r.root is not None and r.host_of(r.root) == host]
    return {
        "host": host, "runs": [r.id for r in runs],
        "launchers": [f"{process_label(p)} {p.pid}" for p in procs if p.index in v.launchers],
        "ranks": [e["name"] for e in ranks if e["host"] == host],
        "pools": sum(len(p.pools) for p in procs),
        "idle_pool_rss_bytes": None if left_unknown(mine, runs) else sum(_idle_pool_rss(p) for p in mine),
        "idle_pool_real_bytes": None if left_unknown(mine, runs) else sum(_idle_pool_real(v, p) for p in mine),
        **_left_figures(mine, runs, v),
        "errors": sum(len(p.errors) for p in procs),
        "exit_codes": [code for p in roots if (code := _code_of(v, p)) is not None],
        "state": _job_state([v.states[r.id] for r in runs]),
    }


def _rank_rows(v: View, job: Job, ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The job's rank rows (report's `ranks` of the job's own runs) with the idle pool memory of each
    rank's pool processes."""
    ids = {r.id for r in job.runs}
    idle: dict[tuple[str, str], int] = {}
    real: dict[tuple[str, str], int] = {}
    for r in job.runs:
        for p in r.leftover:
            label = v.rank_of.get(p.index)
            if label:
                idle[(r.id, label)] = idle.get((r.id, label), 0) + _idle_pool_rss(p)
                real[(r.id, label)] = real.get((r.id, label), 0) + _idle_pool_real(v, p)
    rows = [e for e in ranks if e["run"] in ids]
    labels = [e["rank"] for e in rows]  # a label repeats within the job only across its Slurm steps
    known = {r.id for r in job.runs if r.left_known}
    return [{**e, "name": _rank_name(e["rank"], e["run"], e["step"], labels.count(e["rank"]) > 1),
             "idle_pool_rss_bytes": idle.get((e["run"], e["rank"]), 0) if e["run"] in known else None,
             "idle_pool_real_bytes": real.get((e["run"], e["rank"]), 0) if e["run"] in known else None}
            for e in rows]


def _job_dict(v: View, job: Job, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """One job (jobs.py): its header, then per node and per rank."""
    hosts = job.hosts
    rows = _rank_rows(v, job, ranks)
    nodes = [_node_row(v, job, h, rows) for h in hosts]
    kinds = sorted({i[0] for i in job.identities})
    start, end = job.start, job.end
    return {
        "id": job.id, "identities": [identity_text(i) for i in job.identities], "kinds": kinds,
        "runs": [r.id for r in job.runs], "hosts": hosts, "nodes": len(hosts),
        "launchers": [f"{n['host']}: {x}" for n in nodes for x in n["launchers"]],
        "ranks": [e["name"] for e in rows], "steps": slurm_steps(job),
        "start": start, "end": end,
        "duration_s": round(end - start, 3) if start is not None and end is not None else None,
        "state": _job_state([v.states[r.id] for r in job.runs]),
        "per_node": nodes, "per_rank": rows,
    }


def _jobs(v: View, ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_job_dict(v, job, ranks) for job in group(v.runs)]


def _costs(v: View, findings: list[Any], across: dict[str, Any] | None) -> dict[str, Any]:
    """What the run cost, in total: processes, what was left (memory), the main process's wait at exit."""
    never = next((f.cost.get("processes", 0) for f in findings if f.kind == "sidecar-never-served"), 0)
    return {
        "processes": len(v.procs) - doubled(v.procs),
        "sidecars": sum(1 for p in v.procs if p.role in vocab.SIDECAR_ROLES),
        "leftover_count": v.left_total, "leftover_rss_bytes": v.left_figure(v.leftover_rss),
        "leftover_pss_bytes": v.leftover_pss, "leftover_real_bytes": v.left_figure(v.leftover_real),
        "leftover_at_least": v.left_sum_at_least,
        # Memory at once (docs/evidence.md): what every pool's processes held together at one moment.
        # (facts.pools_across's figure: the one sum over every pool's processes, taken once)
        "pools": len(v.pools), "pool_peak_pss_bytes": across["at_once_bytes"] if across is not None else None,
        # a floor: its moment did not read every process alive, or beyond it (View.at_once_keys)
        "pool_peak_at_least": across is not None and bool(
            not across["at_once_all_read"] or across["at_once_never_read"] or across["at_once_split"]),
        # Every idle stretch of every pool: between its uses (its gaps) and after its last job (derive/pools.py's
        # idle_total_*), the figures the idle-pool finding, the Pools section and the Answer tell.
        "idle_s": round(sum(v.story(p).idle_total_s for p in v.pools), 3),
        "idle_mib_s": round(sum(v.story(p).idle_total_mib_s or 0.0 for p in v.pools), 1),
        "idle_unread_s": round(sum(v.story(p).idle_total_unread_s for p in v.pools), 3),
        "exit_wait_s": round(v.exit_wait_s, 3) if v.exit_wait_s is not None else None, "sidecars_never_served": never,
        # The log records no CPU time per process (the watcher samples RSS only): not guessed.
        "never_served_cpu_s": None,
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


def analyze(data: LogData | LogStream, run_id: str | None = None, waited: Waited | None = None,
            reader: Reader | None = None) -> dict[str, Any]:
    """Build the report as one dict (the --json output); waited: what `run` saw of the program it ran;
    reader: where and when the log is read (None: here and now)."""
    return analyze_view(data, run_id, waited, reader)[0]


def analyze_view(data: LogData | LogStream, run_id: str | None = None, waited: Waited | None = None,
                 reader: Reader | None = None) -> tuple[dict[str, Any], View]:
    """analyze's dict and the View it was made from."""
    reader = reader or here_and_now()
    return report_of(fold_and_judge(data.records, waited, reader), data, run_id, reader.now)


def report_of(model: Model, data: LogData | LogStream, run_id: str | None, now: float,
              runs: list[Run] | None = None) -> tuple[dict[str, Any], View]:
    """The report of a model already folded and judged (the Chrome export folds as it writes). Over runs of
    several jobs, the Answer is each job's own (its runs' report alone), the sections take them together.
    runs: those to report, where the caller chose them (`run`: its own), else select_runs(run_id)'s."""
    rep, v = _report_for(model, data, runs or select_runs(model, run_id), now)
    jobs = group(v.runs)
    if len(jobs) > 1:
        # worst first by each launch's own report: the few answered one by one are those with a problem, if any
        keys = sorted((*report_key(_report_for(model, data, job.runs, now)[0]), i) for i, job in enumerate(jobs))
        each = [([r.id for r in jobs[i].runs], _report_for(model, data, jobs[i].runs, now)[0] if n < RUNS_ANSWERED
                 else {}, troubled) for n, (_, troubled, i) in enumerate(keys)]
        rep["answer"] = runs_answer(rep, each)
    return rep, v


# How a line the reader could not parse shows that the log was cut mid-record (records.py's skip reasons): a write
# cut short (a full disk, EFBIG) leaves one, and every later write of the run is lost with it.
CUT_LINES = ("truncated last line", "torn fragment")
# A run whose last record came this close to the log's last one was writing when the log was cut.
CUT_WINDOW_S = 1.0


def mark_log_cut(v: View, skipped: dict[str, int]) -> None:
    """Where the log was cut mid-record, the runs whose main left no process_exit and whose records reach the log's
    end count one record lost (Run.log_cut: at least the cut one): their main's exit may be among the lost, so it
    is never told as a kill or os._exit (findings/mainend.py _lost_records). A run still in progress is left alone: a
    live log read mid-write can show a cut last line."""
    if not any(skipped.get(reason) for reason in CUT_LINES):
        return
    latest = max((r.end for r in v.runs if r.end is not None), default=None)
    for r in v.runs:
        exit_missing = r.root is not None and not r.root.exited and r.root.exec_into is None
        gone = v.states.get(r.id) in (RUN_KILLED, RUN_END_UNSEEN) or (r.waited is not None and r.waited.status >= 0)
        if exit_missing and gone and latest is not None and r.end is not None and r.end >= latest - CUT_WINDOW_S:
            r.log_cut = 1


def _report_for(model: Model, data: LogData | LogStream, runs: list[Run], now: float
                ) -> tuple[dict[str, Any], View]:
    """The report of these runs of the model, taken together."""
    v = View(model, runs, now)
    mark_log_cut(v, data.skipped)
    for r in v.runs:
        held_not_absent(r)  # the cut just marked may be where the watcher's records went
    leftover = {p.index for r in v.runs for p in r.leftover}
    procs = sorted(v.procs, key=lambda p: (p.start if p.start is not None else v.t0, p.index))
    at = parent_links(procs)
    findings = find_all(v)
    counts = [n for r in v.runs for _, n in r.tree_counts]
    warm = _warm_callers(v)
    ranks = _ranks(v, leftover)
    jobs = _jobs(v, ranks)
    ordered = ranked([{k: x for k, x in f._asdict().items() if k != "headline" or x} for f in findings])
    across = facts.pools_across(v)
    rep = {
        "t0": v.t0,
        "runs": [{**_run_dict(v, r), "memory_at_once": _memory_at_once(v, r), "memory_stale_s": round(r.stale_s, 3)}
                 for r in v.runs],
        "ranks": ranks,
        # The selected runs grouped by their launchers' ids (jobs.py): one entry per job.
        "jobs": jobs,
        "costs": _costs(v, findings, across),
        "all_runs": len(model.runs),
        "warm_pool_pids": sorted({e["pid"] for e in warm}),
        "distinct_warm_pool_pids": len(warm),
        "warm_pool_callers": warm,
        "pools": [_pool_dict(v, pool) for pool in v.pools],
        "processes": [_proc_dict(v, p, leftover, at) for p in procs],
        # the watcher's tree counts only: with no sample (no watcher) the peak is not known, never 0
        "max_concurrent_processes": max(counts) if counts else None,
        "processes_started": len(v.procs) - doubled(v.procs),
        "processes_exited": len(ended := [p for p in v.procs if p.end is not None]) - doubled(ended),
        "max_sidecar_depth": v.max_depth,
        "leftover_pids": sorted({p.pid for p in v.leftover_procs}),
        "leftover_count": v.left_total, "leftover_unlisted": v.left_unlisted,
        "leftover_rss_bytes": v.left_figure(v.leftover_rss),
        "leftover_checked": any(r.leftover_seen for r in v.runs),
        "verdict_pending": any(r.verdict_pending for r in v.runs),
        "possible": _possible(v),
        "reparented_pids": sorted({p.pid for p in v.procs if _outlived_parent(p, leftover)}),
        "no_exit_pids": sorted({p.pid for p in v.procs if p.traced and p.index not in leftover
                                and (p.end is None or p.exit_how == "vanished") and not _stopped_by_pool(p)
                                and not _explained_end(v, p)}),
        "running_pids": sorted({p.pid for p in v.procs if _still_running(v, p)}),
        "blocked": [{"pid": c.proc.pid, "host": c.proc.host, "run": c.proc.run_id, "role": c.proc.role,
                     "target": targets.short_label(c.target), "tag": c.tag, "caller": c.caller, "action": c.action}
                    for c in v.blocked],
        "tracer_errors": [e for r in v.runs for e in r.tracer_errors][:20],
        "findings": ordered,
        "pools_across": across,
        "compiling": facts.compiling(v),
        "no_pool_why": facts.no_pool_why(v),
        "untraced_pools": facts.untraced_pools(v),
        "input": {"records": data.record_count, "skipped": data.skipped, "fixed": data.fixed,
                  "problems": data.problems, "files": data.files,
                  "notes": list(getattr(data, "notes", ()))},
    }
    told = causes.in_order(rep, ordered)  # a cause before its symptoms, as the Answer tells them
    rep["findings"] = told
    rep["answer"] = "\n".join(answer_bullets(rep, ranked(told)))
    return rep, v


def _still_running(v: View, p: Process) -> bool:
    """In a run in progress, a process with no end seen is running, not missing its process_exit."""
    return p.run is not None and v.states.get(p.run.id) == RUN_IN_PROGRESS and p.end is None and p.gone is None


def _explained_end(v: View, p: Process) -> bool:
    """No process_exit, but something says why: still running, the main process killed (said apart), the
    OOM killer (its own record; the oom-killed finding says it), a signal a traced process of the run sent
    (its signal_sent record), or its exit record found no descriptor, or the main changed its user or root (the
    watcher's root_change: the log refused its records since; said apart)."""
    ending = v.endings.of(p)
    if _still_running(v, p) or ending.kind in (OOM_KILL, OOM_AMONG) or ending.sender is not None \
            or p.exit_unwritten is not None or (p.run is not None and p is p.run.root and p.run.root_changes):
        return True
    return p.run is not None and p is p.run.root and v.states.get(p.run.id) == RUN_KILLED


def _stopped_by_pool(p: Process) -> bool:
    """A compile worker that ended once its sidecar was asked to shut down: torch terminates those
    (no process_exit). One gone before that request was killed."""
    side = p.parent
    if p.role != vocab.COMPILE_WORKER or side is None or side.served_at is None:
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
