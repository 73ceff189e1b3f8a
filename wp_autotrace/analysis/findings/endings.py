"""The findings that say how pools and processes ended, and what that cost (docs/evidence.md).

Their words come from analysis/derive/endings.py, with the records that back them in `evidence`: a pool that died before
anything asked it to stop (how, from its sidecar's ending), jobs lost in a dead pool and jobs cut off at
shutdown, processes the OOM killer ended, and zombies nobody reaped. Cost keys as docs/evidence.md names them
(`jobs_lost`, `oom_kills`, `zombies`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...common import targets
from ...common.vocab import COMPILE_WORKER
from ..derive.busy import merged, waits_on_no_job
from ..derive.callers import user_frame
from ..derive.counts import counts_at
from ..derive.ending import OOM_AMONG, OOM_KILL, SHUTDOWN_FOUND_DEAD, SIDECAR_ENDED, SIGNAL, WITH_GROUP
from ..derive.errors import broken_jobs, own_errors
from ..derive.labels import process_label
from ..derive.lostjobs import pool_jobs
from ..derive.poolends import WORKER_END_SLACK_S
from ..words.fmt import TEXT_PIDS, cgroup_text, error_words, pid_text, site, size_text
from .base import CRASH_FIX, CRASHES, Finding
from .sidecars import other_python, unseen_other_python

if TYPE_CHECKING:
    from ..derive.ending import Ending
    from ..derive.view import View
    from ..fold.model import Pool, Process

# Advice for a pool its process group's signal ended while its creator lived on (a server's SIGTERM handler that
# drains or only logs): a service manager's stop signals every process of the group (systemd's default
# KillMode=control-group, scancel, a container init run with -g), and torch 2.13's pool does not notice its dead
# sidecar, so each compile after it waits for ever. Signalling the creator alone keeps the pool serving until the
# creator's own exit shuts it down (measured: docs/users.md, graceful_drain); shutting the dead pool down lets the
# next compile make a new one (the job in flight is lost). Leaving the group helps only a creator in another's
# group (a launcher's): one that leads its group is already in its own session, and the signal was meant for it.
GROUP_ADVICE = ("a signal to the process group ended the pool while its creator lived on (systemd's stop, scancel "
                "and `kill -- -PGID` signal every process of the group): have the stop signal the creator alone "
                "(systemd KillMode=mixed, `kill PID`, a container init without -g), whose exit then shuts the pool "
                "down; or, once the signal came, call torch._inductor.async_compile.shutdown_compile_workers() so "
                "that the next compile makes a new pool")
OWN_SESSION = ("; or start it in its own session (subprocess start_new_session=True, setsid), with the pool made "
               "inside, so that its launcher's group signal misses it")


def group_advice(creator: Process) -> str:
    """GROUP_ADVICE, with the own-session way where the creator is in another process's group (its pgid is not its
    pid: a launcher's); not where it leads its group, or its group is not known."""
    apart = creator.pgid is not None and creator.pgid != creator.pid
    return GROUP_ADVICE + (OWN_SESSION if apart else "")


# Advice for an OOM kill while compile pools lived: the setting first (one worker per CPU by default; each
# worker's PSS counts), then memory.
OOM_ADVICE = ("the OOM killer ended it: fewer compile workers (TORCHINDUCTOR_COMPILE_THREADS=1: one per CPU by "
              "default, each holding its own memory), or give the job more memory (its cgroup's limit)")


def _finding(kind: str, severity: str, text: str, pids: list[int], evidence: list[str], advice: str,
             cost: dict[str, Any], headline: str = "") -> Finding:
    return Finding(kind, severity, text, pids, evidence, advice, cost, headline)


def _sure_oom_sidecars(v: View, dead: list[tuple[Pool, Ending]]) -> int:
    """Dead pools whose sidecar the OOM killer ended, surely: pool-died tells those (oom-killed does not)."""
    return sum(1 for pool, _ in dead if pool.sidecar is not None and v.endings.of(pool.sidecar).kind == OOM_KILL)


def dead_pools(v: View) -> list[tuple[Pool, Ending]]:
    """Pools whose sidecar ended before anything asked them to stop, or whose stop request found it dead, and
    how their sidecar ended was no clean exit of its own."""
    dead = [(pool, v.endings.of_pool(pool)) for pool in v.pools]
    return [(pool, e) for pool, e in dead if e.kind in (SHUTDOWN_FOUND_DEAD, SIDECAR_ENDED)
            and pool.sidecar is not None and v.endings.of(pool.sidecar).kind not in ("exit", "os-exit", "shutdown")]


def pool_died(v: View) -> Finding | None:
    """Pools whose sidecar ended before anything asked them to stop (or whose stop request found them dead)."""
    dead = dead_pools(v)
    if not dead:
        return None
    pool, ending = dead[0]
    side = pool.sidecar
    assert side is not None
    at = v.rel(ending.at)
    more = f" (+{len(dead) - 1} more pool(s) alike)" if len(dead) > 1 else ""
    lead = (f"The compile pool of sidecar {side.pid} (made by {pool.creator.role} {pool.creator.pid} at "
            f"{site(user_frame(pool.call.caller) or pool.call.caller)}) died at {at:.1f} s: ")
    text = f"{lead}{ending.words}{more}."
    # the Answer's bullet keeps how its sidecar ended (the cause: a group signal, an OOM kill), not a cut before it
    # at the colon; what came after (a stop request that found it dead) is the Findings' to tell
    how = first_clause(ending.words)
    headline = f"{lead}{how}{more}." if how != ending.words else ""
    sig = v.endings.of(side)
    if sig.sender is not None:  # a traced process of the run sent it: the cause is named, not to be looked for
        call = sig.words.rsplit("(", 1)[1].rstrip(")") if "(" in sig.words else "its line is above"
        advice = (f"{sig.by} sent the {sig.signal} itself ({call}): to stop a pool, call torch's "
                  "shutdown_compile_workers() in the process that made it, after its last job; else keep that "
                  "signal off the pool's processes")
    elif sig.group or sig.kind == WITH_GROUP:
        advice = group_advice(pool.creator)
    elif sig.kind in (OOM_KILL, OOM_AMONG):
        advice = OOM_ADVICE
    elif own_errors(side):
        advice = "its sidecar logged an error before it ended (see sidecar-never-served / its errors)"
    elif sig.signal in CRASHES:  # its own fault or abort(): where the crash's stacks are, not a sender to find
        advice = (f"its {sig.signal} tells a crash of the sidecar ({CRASHES[sig.signal]}), or a signal sent from "
                  f"outside the run; no record shows a sender: {CRASH_FIX}")
    elif sig.signal is not None:
        advice = f"find what sent {sig.signal} to the sidecar (a time limit, a scheduler, a user, a cleanup script)"
    else:  # no status read: both readings stay open, as for a worker (WORKER_UNREAD_ADVICE); no word claims either
        advice = ("how its sidecar ended is not in the log (no status was readable): an abort or a fault in native "
                  "code prints on its stderr (run again with PYTHONFAULTHANDLER=1 for its stack), a kill for lack of "
                  "memory is in the kernel log (dmesg)")
    jobs = pool_jobs(v.endings, pool)
    pids = sorted({x.sidecar.pid for x, _ in dead if x.sidecar is not None})
    return _finding("pool-died", "problem", text, pids, ending.evidence[:TEXT_PIDS + 2], advice,
                    {"processes": len(dead), **({"jobs_lost": jobs["jobs_lost"]} if jobs["jobs_lost"] else {}),
                     **({"oom_kills": ooms} if (ooms := _sure_oom_sidecars(v, dead)) else {})}, headline)


def first_clause(words: str) -> str:
    """words up to its first "; " outside parentheses (an ending's how, before what came after it), else all."""
    depth = 0
    for i, ch in enumerate(words):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and words.startswith("; ", i):
            return words[:i]
    return words


def oom_killed(v: View) -> Finding | None:
    """Processes of the run the OOM killer ended (an `oom-kill` ending: the cgroup's count rose at that end), or
    may have (`oom-among`: it rose by fewer than the processes that ended then). A pool's sidecar is
    pool-died's to tell (the pool's death, its lost jobs), not told twice."""
    told = {id(pool.sidecar) for pool, _ in dead_pools(v)}  # pool-died's, with its jobs and its oom_kills
    sure = [p for p in v.procs if v.endings.of(p).kind == OOM_KILL and id(p) not in told]
    groups = {id(cands): (kills, cands) for p in v.procs if v.endings.of(p).kind == OOM_AMONG
              for kills, cands, _ in [v.endings.oom_group(p) or (0, [], "")]}
    if not sure and not groups:
        return None
    hit = sure + [q for _, c in groups.values() for q in c]
    at = min((e for q in hit if (e := v.endings.of(q).at) is not None), default=None)
    parts, short = [], ""
    if sure:
        p = sure[0]
        last = _last_reading(p)
        beside = _pools_beside(v, p, last[0]) if last else ""
        held = (f" (its last memory reading, at {v.rel(last[0]) or 0:.1f} s, was {size_text(last[1])}{beside})"
                if last else "")
        more = f" (+{len(sure) - 1} more)" if len(sure) > 1 else ""
        at_s = v.rel(v.endings.of(p).at) or 0
        lead = f"The OOM killer ended {p.role} {p.pid} ({process_label(p)}) at {at_s:.1f} s"
        limit = memory_limit(v, sure[:1])
        parts.append(f"{lead}{held}{more}.{limit}")
        if (last and beside or limit) and not groups:  # the Answer's: what held the memory, the clause a cut drops
            short = (f"{lead}{more}." + (f" At its last memory reading ({v.rel(last[0]) or 0:.1f} s) it held "
                                         f"{size_text(last[1])}{beside}." if last and beside else "") + limit)
    for kills, cands in groups.values():
        who = ", ".join(f"{q.role} {q.pid}" for q in cands[:TEXT_PIDS])
        parts.append(f"The OOM killer ended {kills} of {len(cands)} processes that ended together at "
                     f"{v.rel(v.endings.of(cands[0]).at) or 0:.1f} s ({who}; which, the log does not say: the "
                     f"cgroup counts kills, not whom).{memory_limit(v, cands)}")
    pools_then = [q for pool in v.pools for q in v.story(pool).procs if at is not None and q not in hit
                  and (q.start is None or q.start <= at) and ((e := q.ended_at) is None or e >= at)]
    text = " ".join(parts) + (f" {len(pools_then)} compile pool process(es) were alive then." if pools_then else "")
    pooled = pools_then or any(q.role == COMPILE_WORKER for q in hit)
    advice = OOM_ADVICE if pooled else ("the OOM killer ended it: give the job more memory (its cgroup's limit), "
                                        "or lower what its processes hold at once")
    kills_all = len(sure) + sum(k for k, _ in groups.values())
    return _finding("oom-killed", "problem", text, sorted(q.pid for q in hit),
                    [f"{q.pid}: {v.endings.of(q).evidence[-1]}" for q in hit[:TEXT_PIDS]], advice,
                    {"processes": len(hit), "oom_kills": kills_all}, short)


def oom_unnamed(v: View) -> Finding | None:
    """OOM kills the run's cgroup counted at no end of the run's processes (analysis/derive/endings.py's
    unnamed_ooms): a process outside the run that shares its cgroup (a container's usual case), or one whose end
    was not seen. Said with when it happened, never pinned on a process of the run."""
    found = [(since, by, kills) for run in v.runs for since, by, kills in v.endings.unnamed_ooms(run)]
    if not found:
        return None
    kills = sum(k for _, _, k in found)
    whens = [f"between {v.rel(since) or 0:.1f} s and {v.rel(by) or 0:.1f} s" if since is not None
             else f"before {v.rel(by) or 0:.1f} s" for since, by, _ in found]
    text = (f"The run's cgroup counted {kills} OOM kill(s) ({'; '.join(whens[:TEXT_PIDS])}) in a process the log "
            "cannot name: no process of the run ended then (a process outside the run that shares its cgroup, "
            "or one whose end the watcher did not see).")
    evidence = [f"oom: the cgroup's OOM kill count rose by {k} {w}" for (_, _, k), w in zip(found, whens)]
    return _finding("oom-in-cgroup", "warning", text, [], evidence[:TEXT_PIDS],
                    "the job's cgroup ran out of memory: the kernel log (dmesg) names the process; give the cgroup "
                    "more memory, or run less beside the job", {"oom_kills_unnamed": kills})


def _pools_beside(v: View, p: Process, t: float) -> str:
    """What the compile pools p made held beside p at its last reading t, at that one moment (derive/counts.py,
    the rule every pool count uses): '; its compile pool's 3 processes held 265 MiB beside it then: 666 MiB
    together (PSS)'. What the OOM killer weighed was the cgroup's whole charge; the user asks what held it. ''
    where p made no pool alive then, or none of its processes was read at that moment."""
    counts = [c for pool in p.pools if (c := counts_at(v.story(pool).procs, p, t)) is not None]
    if not counts or any(c["creator_pss_bytes"] is None for c in counts):
        return ""
    own = counts[0]["creator_pss_bytes"]
    pools = sum(c["pool_pss_bytes"] for c in counts)
    read, alive = sum(c["read"] for c in counts), sum(c["processes"] for c in counts)
    of = f"{read} of {alive}" if read < alive else f"{alive}"
    whose = "its compile pool's" if len(counts) == 1 else f"its {len(counts)} compile pools'"
    return (f"; {whose} {of} process{'es' * (alive != 1)} held {size_text(pools)} beside it then: "
            f"{size_text(own + pools)} together (PSS)")


def memory_limit(v: View, procs: list[Process]) -> str:
    """' Its memory cgroup's limit was 768 MiB (memory.max of /slurm/job_7); the charge of /slurm/job_7 (every process
    in it counts, the run's or not) reached it during the run (peak 768 MiB).': the limit the watcher read on the
    one memory cgroup all of procs were in (its memcg record in their own run: another traced program in the same
    cgroup is another run), or on a cgroup above it, which it names. Whether the run reached it: only from the
    kernel's peak charge of that cgroup, where the one at the watcher's end (`final`) is above the one read at the
    join (a peak reached in between): at the limit (within LIMIT_REACHED), "reached it"; under it, "peaked at P ...,
    under it"; else no record shows (an OOM kill counted in the cgroup may be the host's, not the limit's). '' where
    one of them was unread, they were in different cgroups or runs, its record is missing, or it set none (`max` is
    no limit)."""
    where = {(q.run, q.host, q.memcg) for q in procs}
    if len(where) != 1:
        return ""
    run, host, path = next(iter(where))
    recs = run.memcgs.get((host, path or ""), []) if run is not None else []
    rec = recs[0] if recs else {}
    if not isinstance(rec.get("limit"), int):
        return ""
    at = rec.get("limit_path")
    on = cgroup_text(path, rec)
    limit = rec["limit"]
    before, after = rec.get("peak"), recs[-1].get("peak") if recs[-1].get("final") is True else None
    # the peak is the limit's cgroup's (a SLURM job's, all its steps), not the run's: said whose
    whose = f"the charge of {at if isinstance(at, str) else path} (every process in it counts, the run's or not)"
    if not (isinstance(before, int) and isinstance(after, int) and after > before):
        reached = "; whether the run reached it, no record shows"
    elif after >= limit * LIMIT_REACHED:
        reached = f"; {whose} reached it during the run (peak {size_text(after)})"
    else:
        reached = f"; {whose} peaked at {size_text(after)} during the run, under it"
    return f" Its memory cgroup's limit was {size_text(limit)} ({rec.get('file') or 'its limit'} of {on}){reached}."


# A peak charge this close to the limit is the limit reached: the kernel reclaims and kills at the limit, and its
# counters move in pages, per CPU batches.
LIMIT_REACHED = 0.99


def _last_reading(p: Process) -> tuple[float, int] | None:
    """p's last PSS reading (time, bytes); None unsampled (the watcher reads pool processes only). Its RSS
    heartbeat has no time of its own: a figure from the process's start would read as what the OOM killer
    saw."""
    return (p.mem[-1][0], p.mem[-1][1]) if p.mem else None


# The creator's calls that wait on its pool's answers: the first Triton kernel's wait for the pool's ready probe,
# and a compiled module's wait on its kernels.
POOL_WAITS = (targets.WAIT_POOL_READY, targets.ASYNC_WAIT)
# How much of the error that ended such a wait is told beside it (the Answer's line stays one sentence).
ERROR_CHARS = 70


def _waited(v: View, pool: Pool, end: float | None) -> str:
    """'; main P waited S s in AsyncCompile.X() (a -> b s), until E' for the creator's waits on the pool that were
    in flight when its sidecar ended or began after, before anything stopped the pool (torch keeps the dead pool
    until a shutdown: each compile sent meanwhile waits on it), S their seconds together and E how they ended (the
    longest's error, else that it never returned; torch's own wait timeout, compile_worker_wait_timeout, said as
    that); '' where none was. A lost job's cost is the wait that no answer ever ended."""
    if end is None:
        return ""
    stop = pool.shutdown_at
    waits = sorted((c for c in pool.creator.calls.values() if c.tag in POOL_WAITS and (c.end is None or c.end >= end)
                    and (stop is None or c.ts < stop) and not waits_on_no_job(c, pool)), key=lambda c: c.ts)
    if not waits:
        return ""
    # a wait with no return lasted until its process ended (Process.ended_at), where the log shows that end;
    # only a process still running at the log's end waited up to it
    died = pool.creator.ended_at
    spans = [(c.ts, c.end if c.end is not None else died or v.t_end) for c in waits]
    c = max(waits, key=lambda c: (c.end if c.end is not None else died or v.t_end) - c.ts)
    timeouts = [TIMEOUT_WITHIN.search(x.error or "") for x in waits]
    if all(timeouts):  # torch's own verdict, each: its setting and value, not its message cut short
        within = sorted({m.group(1) for m in timeouts if m})
        each = "each " if len(waits) > 1 else ""
        how = f"{each}until {TIMED_OUT} ({'/'.join(within)} s) raised"
    else:
        error = error_words(c.error).splitlines()[0] if c.error else ""
        how = (f"until {error if len(error) <= ERROR_CHARS else error[:ERROR_CHARS].rsplit(' ', 1)[0] + ' …'}"
               if error else "until it ended" if c.end is not None else
               "until its process ended" if died is not None else "and it never returned")
    name = c.target.rpartition(".")[2] if "." in c.target else c.target
    covered = sum(b - a for a, b in merged(list(spans)))  # waits in several threads may overlap: none counted twice
    calls = f"{len(waits)} {name}() calls" if len(waits) > 1 else f"{name}()"
    return (f"; {pool.creator.role} {pool.creator.pid} waited {covered:.1f} s in {calls} "
            f"({v.rel(spans[0][0]) or 0:.1f} -> {v.rel(max(b for _, b in spans)) or 0:.1f} s), {how}")


# How _waited names torch's own bound on a wait (the jobs' text then says no wait went on for ever).
TIMED_OUT = "torch's compile_worker_wait_timeout"
# torch's RuntimeError where a compile future outlived compile_worker_wait_timeout (async_compile._wait_futures).
TIMEOUT_WITHIN = re.compile(r"did not complete within (\d+(?:\.\d+)?)s")


def _lost_advice(v: View, pool: Pool) -> str:
    """What to do about jobs a dead pool lost: a new pool, and where the report says why it died: pool-died where
    that finding tells this pool; sidecar-never-served where the sidecar logged its error or ran another Python
    (a new pool dies the same way); else (it exited on its own, which neither tells) its exit code, and that a new
    pool may die the same way."""
    new = "make a new pool after the old one died (shutdown_compile_workers(), then the next compile starts one)"
    if any(p is pool for p, _ in dead_pools(v)):
        return f"{new}; see pool-died for why it died"
    side = pool.sidecar
    if (side is not None and (own_errors(side) or any(s is side for s, _ in other_python(v)))) or (
            side is None and any(p is pool for p, _ in unseen_other_python(v))):
        return "see sidecar-never-served for why its sidecar died: a new pool would die the same way until then"
    code = v.endings.of(pool.sidecar).code if pool.sidecar is not None else v.endings.of_pool(pool).code
    exited = f"its sidecar exited (code {code}) on its own" if code not in (None, 0) else "its sidecar ended"
    return (f"find why first: {exited}, before anything asked it to stop, and no record says why; a new pool may "
            f"die the same way; then {new}")


def jobs_lost(v: View) -> Finding | None:
    """Jobs sent to a pool whose sidecar had already ended (or in flight in it): they never come back."""
    lost = [(pool, pool_jobs(v.endings, pool)) for pool in v.pools]
    lost = [(pool, j) for pool, j in lost if j["jobs_lost"]]
    if not lost:
        return None
    pool, jobs = lost[0]
    total = sum(j["jobs_lost"] for _, j in lost)
    line = jobs["lost_line"]
    where = f", the last from {site(line)}" if line else ""
    end = pool.sidecar.ended_at if pool.sidecar is not None else None
    # a sidecar no look saw (it died as it started) ended after its pool was made: the waits in flight then
    waited = _waited(v, pool, end if end is not None else pool.call.end)
    when = f"at {v.rel(end) or 0:.1f} s" if end is not None else "before the watcher's first look"
    head = ((f"{total} job(s) went to a compile pool whose sidecar {pool.sidecar_pid} had ended ("
             if any(j["lost_after_end"] for _, j in lost) else
             f"{total} job(s) sent to the compile pool of sidecar {pool.sidecar_pid} were never answered: it ended "
             "(") + f"{when}){where}{waited}")
    return Finding(
        "jobs-lost", "problem",
        # where torch's own timeout ended each wait, the wait's words say so: no "waits for ever" beside them
        head + (": they never return" if TIMED_OUT in waited else
                ": they never return (a future's result() waits for ever, or until its timeout)")
        + "; in torch 2.13 the pool does not notice its sidecar's end.",
        sorted({p.creator.pid for p, _ in lost}),
        [f"pool of sidecar {p.sidecar_pid}: {j['jobs_lost']} lost" for p, j in lost[:TEXT_PIDS]],
        # lost_in: the sidecars of the pools that lost them, whose pool-died is their cause (words/causes.py)
        _lost_advice(v, pool), {"jobs_lost": total, "lost_in": sorted({p.sidecar_pid for p, _ in lost
                                                                        if p.sidecar_pid is not None})},
        # the Answer keeps the wait (what the lost job cost the user) whole: a cut at a clause would drop it; with
        # none, the sentence up to what it means, so that under its cause (pool-died) a long line's site is not
        # cut off in its middle
        (f"{total} job(s) the compile pool of sidecar {pool.sidecar_pid} never answered (it ended {when}): "
         f"{waited.removeprefix('; ')}.") if waited else f"{head}.")


def jobs_cut_off(v: View) -> Finding | None:
    """Jobs still running in a live pool when it was asked to stop."""
    cut = [(pool, pool_jobs(v.endings, pool)) for pool in v.pools]
    cut = [(pool, j) for pool, j in cut if j["jobs_cut_off"]]
    if not cut:
        return None
    pool, jobs = cut[0]
    total = sum(j["jobs_cut_off"] for _, j in cut)
    by = v.endings.of_pool(pool).by or "something"
    return _finding(
        "jobs-cut-off", "warning",
        f"{total} job(s) were still running in the compile pool of sidecar {pool.sidecar_pid} when {by} asked "
        f"it to stop at {v.rel(pool.shutdown_at) or 0:.1f} s: {jobs['cut_off_means']}.",
        sorted({p.creator.pid for p, _ in cut}), [], "wait for the pool's jobs (their futures) before shutting it "
        "down", {"jobs_lost": total})


# A zombie stays (the Answer tells it) when its parent is no init and did not reap it while the watcher still
# looked (the watcher waits REAP_WAIT_S for that: a parent that reaps at all does so at once), or when under pid 1
# it was still defunct this long after it ended: pid 1 may reap late (a multiprocessing resource tracker defunct
# for a moment at exit until pid 1 gets to it is no problem of the user's).
ZOMBIE_STAYS_S = 5.0
INIT_PID = 1


def _under_its_launcher(p: Process) -> bool:
    """p is the run's root, defunct under the parent it started under: the launcher outside the run (a shell, a
    job runner, a test harness) reaps it at its own pace, and one that polls (a Popen.poll loop) takes longer than
    the watcher stays after the root's end; so it is judged as pid 1's are (ZOMBIE_STAYS_S), never as a parent of
    the run that does not reap."""
    return p.parent is None and p.zombie is not None and p.zombie.get("ppid") == p.ppid


def _stays(p: Process) -> bool:
    """p was still defunct at the watcher's last look, under a parent other than pid 1 that was still alive, or
    (under pid 1, under a parent that ended, which hands it to pid 1, or the root under its launcher)
    ZOMBIE_STAYS_S after it ended and after that parent ended."""
    z, run = p.zombie, p.run
    if z is None or z.get("reaped") is not None or run is None:
        return False
    since = z.get("since") if isinstance(z.get("since"), (int, float)) else p.ended_at
    # a parent of the run that ended since hands its zombies to pid 1 (or a subreaper): judged as pid 1's then
    parent = p.parent if p.parent is not None and p.parent.pid == z.get("ppid") else None
    handed = parent.ended_at if parent is not None else None
    if z.get("ppid") != INIT_PID and handed is None and not _under_its_launcher(p):
        return True
    start = max(t for t in (since, handed) if t is not None) if since is not None or handed is not None else None
    return start is not None and run.last_sample is not None and run.last_sample - start >= ZOMBIE_STAYS_S


def _outlived_its_launcher(p: Process) -> bool:
    """p is the run's main, defunct under pid 1 though it started under another parent: that parent (its launcher:
    a shell, a job runner, `wp-autotrace run`) ended first, which is what hands a child to pid 1."""
    return (p.run is not None and p is p.run.root and p.zombie is not None and p.zombie.get("ppid") == INIT_PID
            and p.ppid is not None and p.ppid != INIT_PID)


def zombies(v: View) -> Finding | None:
    """Processes of the run left defunct: ended, never reaped by their parent (a container's pid 1 that
    does not wait for orphans, pytorch#153593). A problem (the Answer's) only for those that stayed (_stays);
    the others are listed, as seen briefly, at info."""
    found = [p for p in v.procs if p.zombie is not None and p.zombie.get("reaped") is None]
    if not found:
        return None
    stayed = [p for p in found if _stays(p)]
    found = stayed + [p for p in found if p not in stayed]
    p = found[0]
    z = p.zombie
    assert z is not None
    parents = sorted({q.zombie["ppid"] for q in found if q.zombie and q.zombie.get("ppid") is not None})
    # pid 1 is the reaper a container may lack; a parent outside the run is no init (the run's own launcher, a live
    # harness that reaps each run in turn, is told as the launcher it is)
    init = any(pp == INIT_PID for pp in parents)
    launched = all(_under_its_launcher(q) for q in found)
    who = ", ".join(str(x) for x in parents)
    # not seen to stay: under pid 1 at the last look, or under a parent of the run that ended since (which hands
    # it to pid 1): said as it was, never "under pid 1" for a zombie whose parent was the main
    under = ("each was under pid 1, which may reap late" if all(pp == INIT_PID for pp in parents) else
             "it was under the launcher that started the run, which reaps it at its own pace"
             if launched else
             "its parent ended since, having reaped it first or handing it to pid 1, which may reap late (no look "
             "tells which)")
    brief = "" if stayed else (f" None was seen to stay: {under}, and the watcher's last look came less than "
                               f"{ZOMBIE_STAYS_S:g} s after that.")
    orphan = next((q for q in found if _outlived_its_launcher(q)), None)
    if orphan is not None and not stayed:  # the reader's question is the launcher's end, not the moment's zombie
        return _finding(
            "zombies", "warning",
            f"Main {orphan.pid} outlived the process that started it (pid {orphan.ppid}, its launcher: a shell, a job "
            f"runner, `wp-autotrace run`): that one ended first, so the main ran on under pid 1 and ended there: "
            f"{v.endings.of(orphan).words}; its exit status reached no launcher.",
            sorted(q.pid for q in found), [f"{q.pid}: defunct under {q.zombie.get('ppid')}" for q in found[:TEXT_PIDS]
                                          if q.zombie],
            f"where pid {orphan.ppid} was to wait for it (`wp-autotrace run`, a job step), find what ended it (a kill, "
            "a time limit, a closed terminal): what waited for the program's exit status got none; a launcher meant "
            "to leave first (nohup, a daemon's start) needs nothing", {"zombies": 0})
    if not stayed:  # every child is defunct for a moment, until its parent waits for it: one look is no fault
        advice = ("nothing, unless `ps -o pid,stat,ppid` shows defunct processes that stay: a process is defunct "
                  "from its end until its parent waits for it, and no look here saw one stay")
    elif init:
        advice = ("its parent had not reaped it when the watcher last looked (a reaper may still come to it: check "
                  "`ps -o pid,stat,ppid` later); where defunct processes stay, that parent does not wait for "
                  "orphans: run the container with an init that reaps them (`docker run --init`, tini, dumb-init), "
                  "or make the parent wait for its children")
    elif launched:
        advice = (f"its parent ({who}), the launcher that started the run, had not waited for it when the watcher "
                  "last looked: it goes when that launcher waits for it or ends")
    else:
        advice = (f"its parent ({who}) has not waited for it: it goes when that parent waits or ends; in a "
                  "container without an init, use `docker run --init` (tini)")
    return _finding(
        "zombies", "warning" if stayed else "info",
        f"{len(found)} process(es) of the run {'are' if stayed else 'were seen'} defunct (zombies: ended, not "
        f"{'reaped' if stayed else 'yet reaped'}) under parent {who}: "
        f"pids {pid_text(q.pid for q in found)}; {p.role} {p.pid} since {v.rel(z.get('since')) or 0:.1f} s "
        f"({v.endings.of(p).words}). A zombie holds no memory, only its pid; only its parent can remove it, "
        f"by waiting for it.{brief}",
        sorted(q.pid for q in found), [f"{q.pid}: defunct under {q.zombie.get('ppid')}" for q in found[:TEXT_PIDS]
                                      if q.zombie], advice, {"zombies": len(stayed)})


# Endings whose words come from a record that shows how the process ended (a status, the OOM kill count).
SHOWN_ENDINGS = (SIGNAL, OOM_KILL, OOM_AMONG)

# What the user can do when a compile worker ended under a sidecar that lived on: find how it ended, then the
# setting that removes or shrinks the workers; the pool itself serves on.
WORKER_LOST_ADVICE = ("find why the worker ended: the kernel log (dmesg) says whether the kernel ended it for "
                      "lack of memory; fewer workers hold less memory (TORCHINDUCTOR_COMPILE_THREADS=1 compiles in "
                      "the main with no worker to lose), or give the job more memory; the failed compile can be run "
                      "again: the pool serves on with its new workers")

# Where no status read shows a kill (the sidecar reaped the worker that ran the job before a look; the SIGTERM its
# executor then sends the others is no cause), both readings stay open: the worker's own abort or fault (abort() on a
# failed check, a segfault) or a kill for memory; no word claims either.
WORKER_UNREAD_ADVICE = ("find why the worker ended (no status read shows it): an abort or a fault in native code "
                        "prints on the job's stderr (run again with PYTHONFAULTHANDLER=1 for its stack), a kill for "
                        "lack of memory is in the kernel log (dmesg); TORCHINDUCTOR_COMPILE_THREADS=1 compiles in the "
                        "main, with no worker to lose, where a fault shows its stack; the failed compile can be run "
                        "again: the pool serves on with its new workers")


def worker_crash_advice(pid: int, signal: str) -> str:
    """A worker that ended by a crash signal no record says another process sent (abort() in LLVM on a kernel it
    cannot lower, a segfault in a compiler): no memory advice (the OOM killer sends SIGKILL), but where the crash's
    stacks are, and torch's own way to see it (pytorch#135120): the compile run in the main process."""
    return (f"worker {pid}'s {signal} is a crash in it ({CRASHES[signal]}) or a signal sent from outside the run (no "
            f"record shows a sender; not the OOM killer, which sends SIGKILL): {CRASH_FIX}; or compile in the main "
            "process (TORCHINDUCTOR_COMPILE_THREADS=1), where a crash shows its stack; the pool serves on")


def _lost_and_new(side: Process, at: float) -> tuple[list[Process], list[Process], float | None]:
    """Around one BrokenProcessPool at `at`: the sidecar's workers that had started before it and ended with no
    exit record by WORKER_END_SLACK_S after it, the workers it started after it (by its first pool start after
    it that made any: a pool start that found its executor running returns the old ones), and that start's time."""
    workers = side.compile_workers()
    ended = [q for q in workers if (q.start is None or q.start <= at) and not q.exited
             and (e := q.ended_at) is not None and e <= at + WORKER_END_SLACK_S]
    for t in (t for t in side.pool_starts if t >= at):
        new = [q for q in workers if q.start is not None and at <= q.start <= t]
        if new:
            return ended, new, t
    return ended, [], None


def worker_lost(v: View) -> Finding | None:
    """Compile workers that ended under a sidecar that lived on, with a job in flight: the job's
    BrokenProcessPool (logged by torch's job callback in the sidecar, returned to the compile that sent it),
    which workers ended and how (only where a record shows it), and the new workers the sidecar started."""
    found = [(pool, e) for pool in v.pools if pool.sidecar is not None for e in broken_jobs(pool.sidecar)]
    if not found:
        return None
    pool, err = found[0]
    side = pool.sidecar
    assert side is not None
    ended, new, restart = _lost_and_new(side, err["ts"])
    hows = {q.pid: v.endings.of(q) for q in ended}
    shown = [f"{pid}: {e.words}" for pid, e in hows.items() if e.kind in SHOWN_ENDINGS]
    crash = next(((pid, e.signal) for pid, e in hows.items() if e.kind == SIGNAL and e.sender is None
                  and e.signal in CRASHES), None)
    how = f" ({'; '.join(shown)})" if shown else " (no record shows how)"
    when = max((e for q in ended if (e := q.ended_at) is not None), default=err["ts"])
    who = (f"Compile worker(s) {pid_text([q.pid for q in ended], TEXT_PIDS)} of sidecar {side.pid} ended by "
           f"{v.rel(when) or 0:.1f} s{how}" if ended else f"A compile worker of sidecar {side.pid} ended")
    after = (f", and the sidecar started {len(new)} new worker(s) ({pid_text([q.pid for q in new], TEXT_PIDS)}) at "
             f"{v.rel(restart) or 0:.1f} s" if new and restart is not None else
             ", and the sidecar started no new workers after it")
    more = f" ({len(found) - 1} more job(s) failed alike)" if len(found) > 1 else ""
    text = (f"{who}, failing the job in flight (BrokenProcessPool at {v.rel(err['ts']) or 0:.1f} s){after}; "
            f"the pool served on (the one {pool.creator.role} {pool.creator.pid} made at "
            f"{site(user_frame(pool.call.caller) or pool.call.caller)}). Torch's job callback in the sidecar logged "
            f"the error and returns it to the compile that sent the job{more}.")
    oom = any(e.kind in (OOM_KILL, OOM_AMONG) for e in hows.values())
    killed = any(e.kind in SHOWN_ENDINGS and e.signal == "SIGKILL" for e in hows.values())  # the OOM killer's signal
    evidence = [f"{side.pid}: error at {v.rel(err['ts']) or 0:.3f} s ({err.get('log_message') or 'logged'}): "
                f"{err.get('exc_type')}: {err.get('message', '')}"]
    evidence += [f"{q.pid}: ended {v.rel(q.ended_at) or 0:.3f} s, no process_exit" for q in ended[:TEXT_PIDS]]
    return _finding("worker-lost", "problem", text, sorted({side.pid, *(q.pid for q in ended)}), evidence,
                    OOM_ADVICE if oom else worker_crash_advice(*crash) if crash else
                    WORKER_LOST_ADVICE if killed else WORKER_UNREAD_ADVICE,
                    {"jobs_lost": len(found), "processes": len(ended),
                     **({"oom_kills": 1} if any(e.kind == OOM_KILL for e in hows.values()) else {})})
